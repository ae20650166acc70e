//! Metadata record values and KRaft control bodies (`replay/kafka/message.py`): the flexible codec driven by the
//! schema table, with the same checks and the same error messages.

use crate::schema::{Kind, Plan, Schemas, Versions};

pub const FRAME_VERSION: u64 = 1;
const MAX_STRING_LENGTH: i64 = 0x7FFF;

/// A decoded value. Strings keep their raw bytes (decoded with replacement characters when they leave Rust,
/// as Python's `decode("utf-8", "replace")` does); uuids their 16 bytes.
#[derive(Clone, Debug)]
pub enum Value {
    Null,
    Bool(bool),
    Int(i64),
    Float(f64),
    Str(Vec<u8>),
    Bytes(Vec<u8>),
    Uuid([u8; 16]),
    List(Vec<Value>),
    Struct(StructVal),
}

/// A struct: its fields by index in the struct's declaration (None: not present at the decoded version) and the
/// tags its schema does not know (tag -> raw bytes, in first-seen order, a later duplicate replacing the value).
#[derive(Clone, Debug)]
pub struct StructVal {
    pub sid: usize,
    pub fields: Vec<Option<Value>>,
    pub unknown: Vec<(u32, Vec<u8>)>,
}

/// Why a value does not decode: the problem kind (`ProblemKind` value) and the message.
pub struct MsgError {
    pub kind: &'static str,
    pub message: String,
}

pub const BAD_RECORD: &str = "bad_record";
pub const UNKNOWN_API_KEY: &str = "unknown_api_key";
pub const UNKNOWN_VERSION: &str = "unknown_version";
pub const UNKNOWN_CONTROL_TYPE: &str = "unknown_control_type";

fn bad(message: String) -> MsgError {
    MsgError { kind: BAD_RECORD, message }
}

pub struct Decoded {
    pub type_name: String,
    pub version: i64,
    pub data: StructVal,
    pub api_key: Option<i64>,
    pub nests: bool,
    /// For ABORT/COMMIT markers: the body is not a schema struct.
    pub marker: Option<(i64, i64)>,
}

struct Reader<'a> {
    buf: &'a [u8],
    pos: usize,
    end: usize,
}

impl<'a> Reader<'a> {
    fn need(&mut self, n: u64) -> Result<usize, String> {
        let p = self.pos;
        if (p as u64) + n > self.end as u64 {
            return Err(format!("truncated: needed {} byte(s) at byte {}, only {} left", n, p, self.end - p));
        }
        self.pos = p + n as usize;
        Ok(p)
    }

    fn uvarint(&mut self) -> Result<u64, String> {
        let mut pos = self.pos;
        let mut value: u64 = 0;
        let mut shift = 0;
        for _ in 0..5 {
            if pos >= self.end {
                return Err(format!("truncated: varint runs past the end at byte {}", pos));
            }
            let b = self.buf[pos];
            pos += 1;
            value |= ((b & 0x7F) as u64) << shift;
            if b & 0x80 == 0 {
                self.pos = pos;
                return Ok(value & 0xFFFF_FFFF);
            }
            shift += 7;
        }
        Err(format!("Varint is too long, the most significant bit in the 5th byte is set (at byte {})", self.pos))
    }
}

fn read_fixed(r: &mut Reader, kind: Kind) -> Result<Value, String> {
    let w = kind.width().unwrap();
    let p = r.need(w as u64)?;
    let b = &r.buf[p..p + w];
    Ok(match kind {
        Kind::Bool => Value::Bool(b[0] != 0),
        Kind::Int8 => Value::Int(b[0] as i8 as i64),
        Kind::Int16 => Value::Int(i16::from_be_bytes([b[0], b[1]]) as i64),
        Kind::Uint16 => Value::Int(u16::from_be_bytes([b[0], b[1]]) as i64),
        Kind::Int32 => Value::Int(i32::from_be_bytes(b.try_into().unwrap()) as i64),
        Kind::Uint32 => Value::Int(u32::from_be_bytes(b.try_into().unwrap()) as i64),
        Kind::Int64 => Value::Int(i64::from_be_bytes(b.try_into().unwrap())),
        Kind::Float64 => Value::Float(f64::from_be_bytes(b.try_into().unwrap())),
        _ => unreachable!(),
    })
}

/// A length-prefixed string or bytes (`uvarint - 1`, -1 = null).
fn read_len(r: &mut Reader, name: &str, nullable: bool) -> Result<Option<i64>, String> {
    let n = r.uvarint()? as i64 - 1;
    if n < 0 {
        if nullable {
            return Ok(None);
        }
        return Err(format!("non-nullable field {} was serialized as null", name));
    }
    Ok(Some(n))
}

fn read_string(r: &mut Reader, name: &str, nullable: bool) -> Result<Value, String> {
    match read_len(r, name, nullable)? {
        None => Ok(Value::Null),
        Some(n) => {
            if n > MAX_STRING_LENGTH {
                return Err(format!("string field {} had invalid length {}", name, n));
            }
            let p = r.need(n as u64)?;
            Ok(Value::Str(r.buf[p..p + n as usize].to_vec()))
        }
    }
}

fn read_bytes(r: &mut Reader, name: &str, nullable: bool) -> Result<Value, String> {
    match read_len(r, name, nullable)? {
        None => Ok(Value::Null),
        Some(n) => {
            let p = r.need(n as u64)?;
            Ok(Value::Bytes(r.buf[p..p + n as usize].to_vec()))
        }
    }
}

fn read_uuid(r: &mut Reader) -> Result<Value, String> {
    let p = r.need(16)?;
    Ok(Value::Uuid(r.buf[p..p + 16].try_into().unwrap()))
}

fn array_length(r: &mut Reader, name: &str, nullable: bool) -> Result<Option<u64>, String> {
    let n = r.uvarint()? as i64 - 1;
    if n < 0 {
        if nullable {
            return Ok(None);
        }
        return Err(format!("non-nullable field {} was serialized as null", name));
    }
    let remaining = (r.end - r.pos) as i64;
    if n > remaining {
        return Err(format!(
            "Tried to allocate a collection of size {}, but there are only {} bytes remaining.",
            n, remaining
        ));
    }
    Ok(Some(n as u64))
}

impl Schemas {
    fn read_element(&self, r: &mut Reader, sid: usize, fi: usize, version: i64) -> Result<Value, String> {
        let f = &self.structs[sid].fields[fi];
        match f.kind {
            Kind::Struct => self.read_struct(r, f.struct_id.unwrap(), version).map(Value::Struct),
            Kind::Str => read_string(r, &f.name, false),
            Kind::Bytes => read_bytes(r, &f.name, false),
            Kind::Uuid => read_uuid(r),
            k => read_fixed(r, k),
        }
    }

    fn read_field(&self, r: &mut Reader, sid: usize, fi: usize, version: i64) -> Result<Value, String> {
        let f = &self.structs[sid].fields[fi];
        let nullable = f.nullable_in(version);
        if !f.is_array {
            return match f.kind {
                Kind::Str => read_string(r, &f.name, nullable),
                Kind::Bytes => read_bytes(r, &f.name, nullable),
                _ => self.read_element(r, sid, fi, version),
            };
        }
        let n = match array_length(r, &f.name, nullable)? {
            None => return Ok(Value::Null),
            Some(n) => n,
        };
        if let Some(w) = f.kind.width() {
            if f.kind != Kind::Bool {
                // struct.unpack_from of n items: the whole array's bytes must be there
                let p = r.need(n * w as u64)?;
                let mut sub = Reader { buf: r.buf, pos: p, end: p + (n as usize) * w };
                let mut out = Vec::with_capacity(n as usize);
                for _ in 0..n {
                    out.push(read_fixed(&mut sub, f.kind)?);
                }
                return Ok(Value::List(out));
            }
        }
        let mut out = Vec::with_capacity((n as usize).min(1024));
        for _ in 0..n {
            out.push(self.read_element(r, sid, fi, version)?);
        }
        Ok(Value::List(out))
    }

    fn read_struct(&self, r: &mut Reader, sid: usize, version: i64) -> Result<StructVal, String> {
        let plan: &Plan = self.plan(sid, version);
        let nfields = self.structs[sid].fields.len();
        let mut fields: Vec<Option<Value>> = vec![None; nfields];
        for &(fi, tagged) in &plan.items {
            fields[fi] =
                Some(if tagged { self.default_value(sid, fi, version) } else { self.read_field(r, sid, fi, version)? });
        }
        let mut unknown: Vec<(u32, Vec<u8>)> = Vec::new();
        let count = r.uvarint()?;
        for _ in 0..count {
            let tag = r.uvarint()? as u32;
            let size = r.uvarint()?;
            let start = r.need(size)?;
            if let Some(&(_, fi)) = plan.tagged.iter().find(|(t, _)| *t == tag) {
                let mut sub = Reader { buf: r.buf, pos: start, end: start + size as usize };
                let v = self.read_field(&mut sub, sid, fi, version)?;
                if sub.pos != sub.end {
                    return Err(format!(
                        "tagged field {} (tag {}) has size {} but its value used {} byte(s)",
                        self.structs[sid].fields[fi].json_name,
                        tag,
                        size,
                        sub.pos - start
                    ));
                }
                fields[fi] = Some(v);
            } else if plan.all_tags.contains(&tag) {
                return Err(format!("Tag {} is not valid for version {}", tag, version));
            } else {
                let raw = r.buf[start..start + size as usize].to_vec();
                match unknown.iter_mut().find(|(t, _)| *t == tag) {
                    Some(slot) => slot.1 = raw,
                    None => unknown.push((tag, raw)),
                }
            }
        }
        Ok(StructVal { sid, fields, unknown })
    }

    /// `Field.default_value(version)`.
    pub fn default_value(&self, sid: usize, fi: usize, version: i64) -> Value {
        let f = &self.structs[sid].fields[fi];
        let text = f.default.as_str();
        if text == "null" {
            return Value::Null;
        }
        if f.is_array {
            return Value::List(Vec::new());
        }
        if let Some(inner) = f.struct_id {
            return Value::Struct(self.struct_defaults(inner, version));
        }
        match f.kind {
            Kind::Bool => Value::Bool(text == "true"),
            k if k.is_int() => {
                if text.is_empty() {
                    return Value::Int(0);
                }
                let lower = text.to_ascii_lowercase();
                if let Some(h) = lower.strip_prefix("0x") {
                    Value::Int(i64::from_str_radix(h, 16).unwrap_or(0))
                } else if let Some(h) = lower.strip_prefix("-0x") {
                    Value::Int(-i64::from_str_radix(h, 16).unwrap_or(0))
                } else {
                    Value::Int(text.trim().parse().unwrap_or(0))
                }
            }
            Kind::Float64 => Value::Float(if text.is_empty() { 0.0 } else { text.trim().parse().unwrap_or(0.0) }),
            Kind::Str => Value::Str(text.as_bytes().to_vec()),
            Kind::Bytes => Value::Bytes(Vec::new()),
            Kind::Uuid => Value::Uuid(if text.is_empty() { [0; 16] } else { crate::json::uuid_from_text(text) }),
            _ => Value::Null,
        }
    }

    pub fn struct_defaults(&self, sid: usize, version: i64) -> StructVal {
        let fields = (0..self.structs[sid].fields.len())
            .map(|fi| {
                if self.structs[sid].fields[fi].present_in(version) {
                    Some(self.default_value(sid, fi, version))
                } else {
                    None
                }
            })
            .collect();
        StructVal { sid, fields, unknown: Vec::new() }
    }

    fn frame_number(r: &mut Reader, entity: &str) -> Result<u64, MsgError> {
        r.uvarint().map_err(|m| bad(format!("Error while reading {}: {}", entity, m)))
    }

    /// `message.peek_frame`: (frame version, api key, record version) when the three varints read.
    pub fn peek_frame(value: &[u8]) -> Option<(u64, u64, u64)> {
        let mut r = Reader { buf: value, pos: 0, end: value.len() };
        let a = Self::frame_number(&mut r, "frame version").ok()?;
        let b = Self::frame_number(&mut r, "type").ok()?;
        let c = Self::frame_number(&mut r, "version").ok()?;
        Some((a, b, c))
    }

    /// `message.decode_metadata_value`.
    pub fn decode_metadata(&self, value: &[u8]) -> Result<Decoded, MsgError> {
        let mut r = Reader { buf: value, pos: 0, end: value.len() };
        let frame = Self::frame_number(&mut r, "frame version")?;
        if frame > 0x7FFF {
            return Err(bad("Value for frame version was too large.".into()));
        }
        if frame != FRAME_VERSION {
            return Err(bad(format!(
                "Could not deserialize metadata record due to unknown frame version {}(only frame version {} is supported)",
                frame, FRAME_VERSION
            )));
        }
        let api_key = Self::frame_number(&mut r, "type")?;
        if api_key > 0x7FFF {
            return Err(MsgError { kind: UNKNOWN_API_KEY, message: "Value for type was too large.".into() });
        }
        let version = Self::frame_number(&mut r, "version")?;
        if version > 0x7FFF {
            return Err(MsgError { kind: UNKNOWN_VERSION, message: "Value for version was too large.".into() });
        }
        let (api_key, version) = (api_key as i64, version as i64);
        let schema = match self.metadata.get(&api_key) {
            None => {
                return Err(MsgError { kind: UNKNOWN_API_KEY, message: format!("Unknown metadata id {}", api_key) })
            }
            Some(s) => s,
        };
        if !schema.valid.contains(version) {
            return Err(MsgError {
                kind: UNKNOWN_VERSION,
                message: format!("Can't read version {} of {}", version, schema.name),
            });
        }
        let data = self.read_struct(&mut r, schema.struct_id, version).map_err(|m| {
            bad(format!("Failed to deserialize record with type {} and version {}: {}", api_key, version, m))
        })?;
        if r.pos != r.end {
            return Err(bad(format!(
                "Found {} byte(s) of garbage after {}:{}/{}",
                r.end - r.pos,
                api_key,
                version,
                frame
            )));
        }
        Ok(Decoded {
            type_name: schema.type_name.clone(),
            version,
            nests: self.plan(schema.struct_id, version).nests,
            data,
            api_key: Some(api_key),
            marker: None,
        })
    }

    /// `message.decode_control_value`.
    pub fn decode_control(&self, control_type: i64, value: &[u8]) -> Result<Decoded, MsgError> {
        if control_type == 0 || control_type == 1 {
            let type_name = self.control_names[&control_type].clone();
            if value.len() < 6 {
                return Err(bad(format!(
                    "Invalid value size found for end transaction marker. Must have at least 6 bytes, but found {}",
                    value.len()
                )));
            }
            let version = i16::from_be_bytes([value[0], value[1]]) as i64;
            let epoch = i32::from_be_bytes(value[2..6].try_into().unwrap()) as i64;
            if version < 0 {
                return Err(bad(format!(
                    "Invalid version found for end transaction marker: {}. May indicate data corruption",
                    version
                )));
            }
            if value.len() > 6 {
                return Err(bad(format!(
                    "Found {} byte(s) of garbage after the end transaction marker",
                    value.len() - 6
                )));
            }
            return Ok(Decoded {
                type_name,
                version,
                data: StructVal { sid: usize::MAX, fields: Vec::new(), unknown: Vec::new() },
                api_key: None,
                nests: false,
                marker: Some((version, epoch)),
            });
        }
        let (schema, type_name) = match (self.control.get(&control_type), self.control_names.get(&control_type)) {
            (Some(s), Some(t)) => (s, t),
            _ => {
                return Err(MsgError {
                    kind: UNKNOWN_CONTROL_TYPE,
                    message: format!("Unknown control record type {}", control_type),
                })
            }
        };
        let mut r = Reader { buf: value, pos: 0, end: value.len() };
        let data = self
            .read_struct(&mut r, schema.struct_id, 0)
            .map_err(|m| bad(format!("Failed to deserialize {}: {}", schema.name, m)))?;
        if r.pos != r.end {
            return Err(bad(format!("Found {} byte(s) of garbage after {}", r.end - r.pos, schema.name)));
        }
        let version = match self.field_by_json(schema.struct_id, "version").and_then(|fi| data.fields[fi].as_ref()) {
            Some(Value::Int(v)) => *v,
            _ => 0,
        };
        Ok(Decoded {
            type_name: type_name.clone(),
            version,
            nests: self.plan(schema.struct_id, 0).nests,
            data,
            api_key: None,
            marker: None,
        })
    }

    pub fn field_by_json(&self, sid: usize, name: &str) -> Option<usize> {
        self.structs[sid].fields.iter().position(|f| f.json_name == name)
    }
}

/// Python's `==` between two decoded values of one field (for "a tagged field at its default is not printed").
pub fn py_eq(a: &Value, b: &Value) -> bool {
    match (a, b) {
        (Value::Null, Value::Null) => true,
        (Value::Bool(x), Value::Bool(y)) => x == y,
        (Value::Int(x), Value::Int(y)) => x == y,
        (Value::Float(x), Value::Float(y)) => x == y,
        (Value::Int(x), Value::Float(y)) | (Value::Float(y), Value::Int(x)) => (*x as f64) == *y,
        (Value::Bool(x), Value::Int(y)) | (Value::Int(y), Value::Bool(x)) => (*x as i64) == *y,
        (Value::Str(x), Value::Str(y)) => x == y || String::from_utf8_lossy(x) == String::from_utf8_lossy(y),
        (Value::Bytes(x), Value::Bytes(y)) => x == y,
        (Value::Uuid(x), Value::Uuid(y)) => x == y,
        (Value::List(x), Value::List(y)) => x.len() == y.len() && x.iter().zip(y).all(|(p, q)| py_eq(p, q)),
        (Value::Struct(x), Value::Struct(y)) => {
            x.fields.len() == y.fields.len()
                && x.fields.iter().zip(&y.fields).all(|(p, q)| match (p, q) {
                    (None, None) => true,
                    (Some(p), Some(q)) => py_eq(p, q),
                    _ => false,
                })
                && x.unknown.is_empty() == y.unknown.is_empty()
                && x.unknown.len() == y.unknown.len()
                && x.unknown.iter().all(|(t, raw)| y.unknown.iter().any(|(u, r2)| u == t && r2 == raw))
        }
        _ => false,
    }
}

#[allow(dead_code)]
pub fn versions_text(v: &Versions) -> String {
    match v.hi {
        None => format!("{}+", v.lo),
        Some(h) if h == v.lo => format!("{}", h),
        Some(h) => format!("{}-{}", v.lo, h),
    }
}
