//! What the ingest's row building computes per record besides the decoded fields, done here: the record's
//! `payload_json` (Kafka's JSON of the value, `replay/spark/ingest.py` `_payload_json`) and its `content_hash`
//! (`record_hash`). The value is decoded again from its bytes (cheap here), so the Python objects are only read.

use pyo3::intern;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList};
use sha2::{Digest, Sha256};

use crate::schema::Schemas;

/// `secrets.MAY_HOLD_SECRETS`: the api keys of ConfigRecord and UserScramCredentialRecord.
const MAY_HOLD_SECRETS: [i64; 2] = [4, 11];

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
pub fn record_extras(py: Python<'_>, records: &Bound<'_, PyList>) -> PyResult<Vec<(Option<String>, Option<Py<PyBytes>>)>> {
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
