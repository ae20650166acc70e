//! What the ingest's row building computes per record besides the decoded fields, done here: the record's
//! `payload_json` (Kafka's JSON of the value, `replay/spark/ingest.py` `_payload_json`) and its `content_hash`
//! (`record_hash`). The value is decoded again from its bytes (cheap here), so the Python objects are only read.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use sha2::{Digest, Sha256};

use crate::decode::{RBatch, Rec};
use crate::json::uuid_text;
use crate::schema::Schemas;
use crate::value::{Decoded, StructVal, Value};
use crate::State;

/// `secrets.MAY_HOLD_SECRETS`: the api keys of ConfigRecord and UserScramCredentialRecord.
pub(crate) const CONFIG_API_KEY: i64 = 4;
pub(crate) const SCRAM_API_KEY: i64 = 11;
const MAY_HOLD_SECRETS: [i64; 2] = [CONFIG_API_KEY, SCRAM_API_KEY];

/// `ingest.IDENTITY_BYTES`: the identity is the first 16 bytes of the sha256.
const IDENTITY_BYTES: usize = 16;

/// `ingest._part`: a length-prefixed part of the hash input, -1 for null.
fn part(h: &mut Sha256, data: Option<&[u8]>) {
    match data {
        None => h.update([0xFF, 0xFF, 0xFF, 0xFF]),
        Some(d) => {
            h.update((d.len() as u32).to_be_bytes());
            h.update(d);
        }
    }
}

/// `ingest.record_hash`: sha256 of the offset, key and value, its first 16 bytes.
pub fn record_hash(offset: i64, key: Option<&[u8]>, value: Option<&[u8]>) -> [u8; IDENTITY_BYTES] {
    let mut h = Sha256::new();
    h.update(b"kraft-record\x00");
    h.update(offset.to_be_bytes());
    part(&mut h, key);
    part(&mut h, value);
    let digest = h.finalize();
    let mut out = [0u8; IDENTITY_BYTES];
    out.copy_from_slice(&digest[..IDENTITY_BYTES]);
    out
}

/// `ingest._payload_json` for a record whose value decoded: the metadata payload, or the control body of a type
/// with a JSON form. None where Python must say (no decoded data, transaction markers, a value that does not
/// decode here, a record type that may hold a secret).
fn payload_json(schemas: &Schemas, control_type: Option<i64>, value: &[u8]) -> Option<String> {
    match control_type {
        Some(ct) => {
            let cs = schemas.control.get(&ct)?;
            let d = schemas.decode_control(ct, value).ok()?;
            Some(schemas.control_json(cs.struct_id, d.version, &d.data))
        }
        None => {
            let d = schemas.decode_metadata(value).ok()?;
            if MAY_HOLD_SECRETS.contains(&d.api_key?) {
                return None; // Python renders it, from the record's data: a redaction marker is no base64
            }
            let sid = schemas.metadata.get(&d.api_key?)?.struct_id;
            Some(schemas.payload_json(&d.type_name, sid, d.version, &d.data))
        }
    }
}

fn bytes_attr<'py>(obj: &Bound<'py, PyAny>, name: &Bound<'py, pyo3::types::PyString>) -> PyResult<Option<Vec<u8>>> {
    let v = obj.getattr(name)?;
    if v.is_none() {
        return Ok(None);
    }
    Ok(Some(v.downcast::<PyBytes>()?.as_bytes().to_vec()))
}

/// For each of `records` (the model's `Record` objects, as a decoder gave them): (payload JSON, content hash),
/// either None where the caller's Python functions must be asked (see `payload_json`; an offset outside int64).
/// A panic (a bug here) becomes a `RuntimeError`, as in `Decoder`.
#[pyfunction]
pub fn record_extras(
    py: Python<'_>,
    records: &Bound<'_, PyList>,
) -> PyResult<Vec<(Option<String>, Option<Py<PyBytes>>)>> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| extras(py, records)))
        .unwrap_or_else(|_| Err(pyo3::exceptions::PyRuntimeError::new_err("kraft_replay_native.record_extras failed")))
}

fn extras(py: Python<'_>, records: &Bound<'_, PyList>) -> PyResult<Vec<(Option<String>, Option<Py<PyBytes>>)>> {
    let st = crate::state(py)?;
    let mut out = Vec::with_capacity(records.len());
    for rec in records.iter() {
        let key = bytes_attr(&rec, intern!(py, "key"))?;
        let value = bytes_attr(&rec, intern!(py, "value"))?;
        let offset: Option<i64> = rec.getattr(intern!(py, "offset"))?.extract().ok();
        let hash = offset.map(|o| PyBytes::new(py, &record_hash(o, key.as_deref(), value.as_deref())).unbind());
        let payload = if rec.getattr(intern!(py, "data"))?.is_none() {
            None
        } else {
            let control_type: Option<i64> = rec.getattr(intern!(py, "control_type"))?.extract()?;
            value.as_deref().and_then(|v| payload_json(&st.schemas, control_type, v))
        };
        out.push((payload, hash));
    }
    Ok(out)
}

// ---- record rows as Arrow buffers -------------------------------------------------------------------------------

/// A bitmap in Arrow's layout (least significant bit first).
#[derive(Default)]
struct Bits {
    bytes: Vec<u8>,
    len: usize,
}

impl Bits {
    fn push(&mut self, bit: bool) {
        if self.len % 8 == 0 {
            self.bytes.push(0);
        }
        if bit {
            let last = self.bytes.len() - 1;
            self.bytes[last] |= 1 << (self.len % 8);
        }
        self.len += 1;
    }
}

/// One column of Arrow buffers: a validity bitmap, the values (fixed width little-endian, a bitmap for booleans,
/// or the bytes of variable-width values) and, for those, int32 offsets.
#[derive(Default)]
struct Column {
    valid: Bits,
    nulls: usize,
    values: Vec<u8>,
    bits: Bits,
    offsets: Vec<u8>,
}

impl Column {
    fn mark(&mut self, present: bool) {
        self.valid.push(present);
        if !present {
            self.nulls += 1;
        }
    }
    fn i64(&mut self, v: Option<i64>) {
        self.mark(v.is_some());
        self.values.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
    }
    fn i32(&mut self, v: Option<i32>) {
        self.mark(v.is_some());
        self.values.extend_from_slice(&v.unwrap_or(0).to_le_bytes());
    }
    fn boolean(&mut self, v: bool) {
        self.mark(true);
        self.bits.push(v);
    }
    fn var(&mut self, v: Option<&[u8]>) {
        if self.offsets.is_empty() {
            self.offsets.extend_from_slice(&0i32.to_le_bytes());
        }
        self.mark(v.is_some());
        if let Some(b) = v {
            self.values.extend_from_slice(b);
        }
        self.offsets.extend_from_slice(&(self.values.len() as i32).to_le_bytes());
    }
}

/// The record columns the extension fills, in this order (`native.ROW_COLUMNS` names them); the ingest adds the
/// columns that are the same for a whole file.
const COLUMNS: usize = 28;
/// The fields of an ACL binding in row order, and whether each is an enum code (named through `acl_names`).
const BINDING: [(&str, bool); 7] = [
    ("resourceType", true),
    ("resourceName", false),
    ("patternType", true),
    ("principal", false),
    ("host", false),
    ("operation", true),
    ("permissionType", true),
];
/// The boolean columns (`crc_ok`, `is_control`): their values are a bitmap.
const BOOLEAN_COLUMNS: [usize; 2] = [9, 10];
const ACL_ENTRY: i64 = 18;
const ACL_REMOVE: i64 = 19;

/// What one record adds to the columns, computed before any is written so a batch goes in whole or not at all.
struct RowParts {
    offset: i64,
    timestamp: i64,
    control_type: Option<String>,
    api_key: Option<i32>,
    version: Option<i32>,
    payload: Option<String>,
    acl_id: Option<String>,
    binding: Option<[String; 7]>,
}

fn fits_i64(v: i128) -> Option<i64> {
    i64::try_from(v).ok()
}

fn opt_i32(v: Option<i64>) -> Result<Option<i32>, ()> {
    match v {
        None => Ok(None),
        Some(x) => i32::try_from(x).map(Some).map_err(|_| ()),
    }
}

fn field<'a>(st: &State, data: &'a StructVal, json_name: &str) -> Option<&'a Value> {
    let def = st.schemas.structs.get(data.sid)?;
    let i = def.fields.iter().position(|f| f.json_name == json_name)?;
    data.fields.get(i)?.as_ref()
}

/// `ingest._payload_json` where the extension renders it as `record_extras` does; Err where Python must.
fn payload_of(st: &State, r: &Rec, d: &Decoded) -> Result<String, ()> {
    if d.marker.is_some() {
        return Err(());
    }
    match r.control_type {
        Some(ct) => {
            let cs = st.schemas.control.get(&ct).ok_or(())?;
            Ok(st.schemas.control_json(cs.struct_id, d.version, &d.data))
        }
        None => {
            let key = d.api_key.ok_or(())?;
            if key == SCRAM_API_KEY {
                return Err(()); // redacted (or not) by Python
            }
            let sid = st.schemas.metadata.get(&key).ok_or(())?.struct_id;
            Ok(st.schemas.payload_json(&d.type_name, sid, d.version, &d.data))
        }
    }
}

/// `AclBinding.from_record_data` of an AccessControlEntryRecord: the four codes by name, the three texts as they
/// are; Err for anything unusual (a missing field, a text that is not UTF-8), which Python then handles.
fn binding_of(st: &State, data: &StructVal) -> Result<[String; 7], ()> {
    let mut out: [String; 7] = Default::default();
    let mut code = 0;
    for (i, (name, is_code)) in BINDING.iter().enumerate() {
        match field(st, data, name).ok_or(())? {
            Value::Int(v) if *is_code => {
                out[i] = st.acl_names[code].get(v).ok_or(())?.clone();
                code += 1;
            }
            Value::Str(s) if !*is_code => {
                out[i] = String::from_utf8(s.clone()).map_err(|_| ())?;
            }
            _ => return Err(()),
        }
    }
    Ok(out)
}

/// Whether a decoded ConfigRecord's value is a secret: a text value of a config that `secret` names one of
/// (`secrets.is_secret_config`). Err for a name that is not UTF-8 (Python then decides).
pub(crate) fn config_is_secret(st: &State, data: &StructVal, secret: &mut dyn FnMut(&str) -> bool) -> Result<bool, ()> {
    let name = match field(st, data, "name") {
        Some(Value::Str(n)) => std::str::from_utf8(n).map_err(|_| ())?,
        _ => return Err(()),
    };
    Ok(matches!(field(st, data, "value"), Some(Value::Str(_))) && secret(name))
}

fn parts_of(st: &State, r: &Rec, secret: &mut dyn FnMut(&str) -> bool) -> Result<RowParts, ()> {
    let mut p = RowParts {
        offset: fits_i64(r.offset).ok_or(())?,
        timestamp: fits_i64(r.timestamp).ok_or(())?,
        control_type: r
            .control_type
            .map(|ct| st.schemas.control_names.get(&ct).cloned().unwrap_or_else(|| "UNKNOWN".to_string())),
        api_key: opt_i32(r.api_key)?,
        version: opt_i32(r.version)?,
        payload: None,
        acl_id: None,
        binding: None,
    };
    if r.api_key == Some(SCRAM_API_KEY) {
        return Err(());
    }
    if let Some(d) = &r.decoded {
        if r.control_type.is_none() && r.api_key == Some(CONFIG_API_KEY) && config_is_secret(st, &d.data, secret)? {
            return Err(()); // Python redacts it (`secrets.redact_record`)
        }
        p.payload = Some(payload_of(st, r, d)?);
        if r.control_type.is_none() && matches!(r.api_key, Some(ACL_ENTRY) | Some(ACL_REMOVE)) {
            match field(st, &d.data, "id") {
                Some(Value::Uuid(u)) => p.acl_id = Some(uuid_text(u)),
                _ => return Err(()),
            }
            if r.api_key == Some(ACL_ENTRY) {
                p.binding = Some(binding_of(st, &d.data)?);
            }
        }
    }
    Ok(p)
}

/// Record rows of decoded batches, collected as Arrow column buffers (`ingest._record_rows`, without a Python
/// object per record).
pub struct RowBuilder {
    cols: Vec<Column>,
    pub rows: usize,
    pub bytes: usize,
}

impl RowBuilder {
    pub fn new() -> RowBuilder {
        RowBuilder { cols: (0..COLUMNS).map(|_| Column::default()).collect(), rows: 0, bytes: 0 }
    }

    /// Add the rows of `b`, or nothing (false) when one of its records needs Python (`parts_of`).
    /// `secret` says whether a config name holds a secret (asked once per ConfigRecord with a text value).
    pub fn add(&mut self, b: &RBatch, st: &State, secret: &mut dyn FnMut(&str) -> bool) -> bool {
        let h = &b.header;
        let Some(last) = fits_i64(h.last_offset()) else { return false };
        let mut parts = Vec::with_capacity(b.records.len());
        for r in &b.records {
            match parts_of(st, r, secret) {
                Ok(p) => parts.push(p),
                Err(()) => return false,
            }
        }
        let codec = h.codec_name();
        for (index, (r, p)) in b.records.iter().zip(parts).enumerate() {
            let key = r.key.map(|s| b.bytes(s));
            let value = r.value.map(|s| b.bytes(s));
            let c = &mut self.cols;
            c[0].i64(Some(h.position));
            c[1].i64(Some(h.base_offset));
            c[2].i64(Some(last));
            c[3].i64(Some(p.offset));
            c[4].i32(Some(index as i32));
            c[5].i32(Some(h.leader_epoch));
            c[6].i64(Some(h.max_timestamp));
            c[7].i64(Some(p.timestamp));
            c[8].var(Some(codec.as_bytes()));
            c[9].boolean(h.crc_ok);
            c[10].boolean(r.control_type.is_some());
            c[11].var(p.control_type.as_deref().map(str::as_bytes));
            c[12].i32(p.api_key);
            c[13].i32(p.version);
            c[14].var(r.decoded.as_ref().map(|d| d.type_name.as_bytes()));
            c[15].var(p.payload.as_deref().map(str::as_bytes));
            c[16].var(p.acl_id.as_deref().map(str::as_bytes));
            for i in 0..7 {
                c[17 + i].var(p.binding.as_ref().map(|b| b[i].as_bytes()));
            }
            c[24].var(key);
            c[25].var(value);
            c[26].var(r.error.as_deref().map(str::as_bytes));
            c[27].var(Some(&record_hash(p.offset, key, value)));
            self.bytes +=
                key.map_or(0, <[u8]>::len) + value.map_or(0, <[u8]>::len) + p.payload.as_ref().map_or(0, String::len);
            self.rows += 1;
        }
        true
    }

    /// The collected rows as (row count, [(validity or None, values, offsets or None)] per column), and a fresh
    /// start. Boolean values are a bitmap.
    pub fn take(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        let cols = std::mem::replace(&mut self.cols, (0..COLUMNS).map(|_| Column::default()).collect());
        let rows = self.rows;
        self.rows = 0;
        self.bytes = 0;
        let out = PyList::empty(py);
        for (i, c) in cols.into_iter().enumerate() {
            let valid = if c.nulls == 0 { py.None() } else { PyBytes::new(py, &c.valid.bytes).into_any().unbind() };
            let values = PyBytes::new(py, if BOOLEAN_COLUMNS.contains(&i) { &c.bits.bytes } else { &c.values });
            let offsets =
                if c.offsets.is_empty() { py.None() } else { PyBytes::new(py, &c.offsets).into_any().unbind() };
            out.append((valid, values, offsets))?;
        }
        Ok((rows, out).into_pyobject(py)?.into_any().unbind())
    }
}
