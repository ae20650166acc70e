//! The schema table, handed over from `replay/kafka/schemas.py` at `init` (one source of truth for the schemas),
//! and the decode plans built from it: per struct and version, which fields are read in order, which are tagged.

use std::hash::{BuildHasherDefault, Hasher};

/// The maps of the hot path (plans, schemas, type names) hash small keys of our own tables: a multiply-rotate
/// hash (as rustc's FxHash) instead of SipHash, whose resistance to chosen keys is not needed here.
pub type HashMap<K, V> = std::collections::HashMap<K, V, BuildHasherDefault<FxHasher>>;
pub type HashSet<K> = std::collections::HashSet<K, BuildHasherDefault<FxHasher>>;

#[derive(Default, Clone, Copy)]
pub struct FxHasher {
    hash: u64,
}

impl FxHasher {
    #[inline]
    fn add(&mut self, word: u64) {
        self.hash = (self.hash.rotate_left(5) ^ word).wrapping_mul(0x51_7c_c1_b7_27_22_0a_95);
    }
}

impl Hasher for FxHasher {
    fn write(&mut self, bytes: &[u8]) {
        let mut chunks = bytes.chunks_exact(8);
        for c in &mut chunks {
            self.add(u64::from_le_bytes(c.try_into().unwrap()));
        }
        for b in chunks.remainder() {
            self.add(*b as u64);
        }
    }
    fn write_u8(&mut self, i: u8) {
        self.add(i as u64);
    }
    fn write_u32(&mut self, i: u32) {
        self.add(i as u64);
    }
    fn write_u64(&mut self, i: u64) {
        self.add(i);
    }
    fn write_usize(&mut self, i: usize) {
        self.add(i as u64);
    }
    fn finish(&self) -> u64 {
        self.hash
    }
}

/// An inclusive version range; `hi == None` is open-ended (Kafka's `"0+"`), `lo > hi` is empty (`"none"`).
#[derive(Clone, Copy, Debug)]
pub struct Versions {
    pub lo: i64,
    pub hi: Option<i64>,
}

impl Versions {
    pub fn contains(&self, v: i64) -> bool {
        self.lo <= v && self.hi.map_or(true, |h| v <= h)
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Bool,
    Int8,
    Int16,
    Int32,
    Int64,
    Uint16,
    Uint32,
    Float64,
    Str,
    Bytes,
    Uuid,
    Struct,
}

impl Kind {
    pub fn parse(text: &str) -> Option<Kind> {
        Some(match text {
            "bool" => Kind::Bool,
            "int8" => Kind::Int8,
            "int16" => Kind::Int16,
            "int32" => Kind::Int32,
            "int64" => Kind::Int64,
            "uint16" => Kind::Uint16,
            "uint32" => Kind::Uint32,
            "float64" => Kind::Float64,
            "string" => Kind::Str,
            "bytes" => Kind::Bytes,
            "uuid" => Kind::Uuid,
            _ => return None,
        })
    }

    /// Width of a fixed-size scalar, None for the variable ones.
    pub fn width(self) -> Option<usize> {
        match self {
            Kind::Bool | Kind::Int8 => Some(1),
            Kind::Int16 | Kind::Uint16 => Some(2),
            Kind::Int32 | Kind::Uint32 => Some(4),
            Kind::Int64 | Kind::Float64 => Some(8),
            _ => None,
        }
    }

    pub fn is_int(self) -> bool {
        matches!(self, Kind::Int8 | Kind::Int16 | Kind::Int32 | Kind::Int64 | Kind::Uint16 | Kind::Uint32)
    }
}

#[derive(Debug)]
pub struct FieldDef {
    pub name: String,      // PascalCase (error messages)
    pub json_name: String, // lowerCamel (dict keys, JSON)
    pub kind: Kind,        // element kind for arrays
    pub is_array: bool,
    pub versions: Versions,
    pub nullable: Versions,
    pub tag: Option<u32>,
    pub tagged: Versions,
    pub default: String,
    pub struct_id: Option<usize>,
}

impl FieldDef {
    pub fn present_in(&self, v: i64) -> bool {
        self.versions.contains(v)
    }
    pub fn tagged_in(&self, v: i64) -> bool {
        self.versions.contains(v) && self.tagged.contains(v)
    }
    pub fn nullable_in(&self, v: i64) -> bool {
        self.nullable.contains(v)
    }
    /// `schemas._intersection_empty`: the versions and tagged versions do not overlap.
    fn intersection_empty(&self) -> bool {
        let lo = self.versions.lo.max(self.tagged.lo);
        let his: Vec<i64> = [self.versions.hi, self.tagged.hi].iter().flatten().copied().collect();
        !his.is_empty() && *his.iter().min().unwrap() < lo
    }
}

#[derive(Debug)]
pub struct StructDef {
    pub fields: Vec<FieldDef>,
}

/// How one struct is read at one version (`message._Plan`).
#[derive(Debug)]
pub struct Plan {
    pub items: Vec<(usize, bool)>, // (field index, tagged at this version), declaration order
    pub tagged: Vec<(u32, usize)>, // tag -> field index, for the tags valid at this version
    pub all_tags: Vec<u32>,        // tags any version knows
    pub nests: bool,               // a present field holds structs
}

pub struct MetaSchema {
    pub name: String, // Kafka's message name (error messages)
    pub type_name: String,
    pub valid: Versions,
    pub struct_id: usize,
}

pub struct ControlSchema {
    pub name: String, // Kafka's message name (error messages)
    pub struct_id: usize,
}

pub struct Schemas {
    pub structs: Vec<StructDef>,
    pub metadata: HashMap<i64, MetaSchema>,
    pub control: HashMap<i64, ControlSchema>,
    pub control_names: HashMap<i64, String>,
    plans: HashMap<(usize, i64), Plan>,
}

impl Schemas {
    pub fn new(
        structs: Vec<StructDef>,
        metadata: HashMap<i64, MetaSchema>,
        control: HashMap<i64, ControlSchema>,
        control_names: HashMap<i64, String>,
    ) -> Schemas {
        let mut s = Schemas { structs, metadata, control, control_names, plans: HashMap::default() };
        let mut roots: Vec<(usize, i64)> = Vec::new();
        for m in s.metadata.values() {
            let hi = m.valid.hi.unwrap_or(m.valid.lo);
            for v in m.valid.lo..=hi {
                roots.push((m.struct_id, v));
            }
        }
        for c in s.control.values() {
            roots.push((c.struct_id, 0));
        }
        for (id, v) in roots {
            s.build_plan(id, v);
        }
        s
    }

    fn build_plan(&mut self, id: usize, version: i64) {
        if self.plans.contains_key(&(id, version)) {
            return;
        }
        let mut items = Vec::new();
        let mut tagged = Vec::new();
        let mut all_tags = Vec::new();
        let mut nests = false;
        let mut nested = Vec::new();
        for (i, f) in self.structs[id].fields.iter().enumerate() {
            if let Some(t) = f.tag {
                if !f.intersection_empty() {
                    all_tags.push(t);
                }
            }
            if !f.present_in(version) {
                continue;
            }
            if let Some(sid) = f.struct_id {
                nests = true;
                nested.push(sid);
            }
            if f.tagged_in(version) {
                tagged.push((f.tag.unwrap(), i));
                items.push((i, true));
            } else {
                items.push((i, false));
            }
        }
        self.plans.insert((id, version), Plan { items, tagged, all_tags, nests });
        for sid in nested {
            self.build_plan(sid, version);
        }
    }

    pub fn plan(&self, id: usize, version: i64) -> &Plan {
        &self.plans[&(id, version)]
    }
}
