//! Kafka's JSON for decoded values, byte for byte as `replay/kafka/kafkajson.py` writes it (dump-log's payload),
//! and the text forms shared with it: uuids as base64url, bytes as base64, Java's `Double.toString`.

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;

use crate::schema::{Kind, Schemas};

/// `kafkajson.java_double`, set at `init`: Python's repr picks the even digit where two shortest decimals are
/// equally close and Rust's formatting does not, so floats (ClientQuotaRecord values only) are printed by it.
pub static JAVA_DOUBLE: GILOnceCell<PyObject> = GILOnceCell::new();

fn java_double_text(x: f64) -> String {
    Python::with_gil(|py| {
        JAVA_DOUBLE
            .get(py)
            .and_then(|f| f.call1(py, (x,)).ok())
            .and_then(|t| t.extract::<String>(py).ok())
            .unwrap_or_else(|| java_double(x))
    })
}
use crate::value::{py_eq, StructVal, Value};

const B64: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
const B64URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

fn base64_into(data: &[u8], table: &[u8; 64], pad: bool, out: &mut String) {
    for chunk in data.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = ((b[0] as u32) << 16) | ((b[1] as u32) << 8) | b[2] as u32;
        let chars = [(n >> 18) & 63, (n >> 12) & 63, (n >> 6) & 63, n & 63];
        let keep = chunk.len() + 1;
        for (i, c) in chars.iter().enumerate() {
            if i < keep {
                out.push(table[*c as usize] as char);
            } else if pad {
                out.push('=');
            }
        }
    }
}

/// Kafka's `Uuid.toString`: 22 characters of base64url without padding.
pub fn uuid_text(raw: &[u8; 16]) -> String {
    let mut s = String::with_capacity(22);
    base64_into(raw, B64URL, false, &mut s);
    s
}

pub fn uuid_from_text(text: &str) -> [u8; 16] {
    let mut bits: u32 = 0;
    let mut nbits = 0;
    let mut out = Vec::with_capacity(16);
    for c in text.bytes() {
        let v = match B64URL.iter().position(|&x| x == c) {
            Some(v) => v as u32,
            None => continue,
        };
        bits = (bits << 6) | v;
        nbits += 6;
        if nbits >= 8 {
            nbits -= 8;
            out.push((bits >> nbits) as u8);
            bits &= (1 << nbits) - 1;
        }
    }
    out.resize(16, 0);
    out.try_into().unwrap()
}

pub fn base64_std(data: &[u8], out: &mut String) {
    base64_into(data, B64, true, out)
}

/// A JSON string literal as Jackson writes it.
pub fn jackson_string(s: &str, out: &mut String) {
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{08}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{0C}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04X}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
}

/// Java's `Double.toString` (JDK 19+), as `kafkajson.java_double` but for exact ties between two shortest decimals.
pub fn java_double(x: f64) -> String {
    if x.is_nan() {
        return "NaN".into();
    }
    if x.is_infinite() {
        return if x > 0.0 { "Infinity".into() } else { "-Infinity".into() };
    }
    if x == 0.0 {
        return if x.is_sign_negative() { "-0.0".into() } else { "0.0".into() };
    }
    let sign = if x < 0.0 { "-" } else { "" };
    let a = x.abs();
    let (mut ds, mut exp10) = sci_digits(&format!("{:e}", a));
    if ds.len() == 1 {
        let two = format!("{:.1e}", a);
        if two.parse::<f64>().ok() == Some(a) {
            let (d2, e2) = sci_digits(&two);
            ds = d2;
            exp10 = e2;
        }
    }
    if (1e-3..1e7).contains(&a) {
        let (int_part, frac) = if exp10 >= 0 {
            let k = (exp10 + 1) as usize;
            let mut ip: String = ds.chars().take(k).collect();
            while ip.len() < k {
                ip.push('0');
            }
            let fr: String = ds.chars().skip(k).collect();
            (ip, if fr.is_empty() { "0".to_string() } else { fr })
        } else {
            ("0".to_string(), "0".repeat((-exp10 - 1) as usize) + &ds)
        };
        return format!("{}{}.{}", sign, int_part, frac);
    }
    let rest = if ds.len() > 1 { ds[1..].to_string() } else { "0".to_string() };
    format!("{}{}.{}E{}", sign, &ds[..1], rest, exp10)
}

/// Digits without trailing zeros and the decimal exponent of the first, from Rust's `{:e}` text.
fn sci_digits(text: &str) -> (String, i64) {
    let (mant, exp) = text.split_once('e').unwrap();
    let exp: i64 = exp.parse().unwrap();
    let mut ds: String = mant.chars().filter(|c| c.is_ascii_digit()).collect();
    while ds.len() > 1 && ds.ends_with('0') {
        ds.pop();
    }
    (ds, exp)
}

fn render_scalar(kind: Kind, v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Int(i) => out.push_str(&i.to_string()),
        Value::Bool(b) => {
            if kind.is_int() {
                out.push_str(if *b { "1" } else { "0" })
            } else {
                out.push_str(if *b { "true" } else { "false" })
            }
        }
        Value::Str(raw) => jackson_string(&String::from_utf8_lossy(raw), out),
        Value::Uuid(u) => {
            out.push('"');
            out.push_str(&uuid_text(u));
            out.push('"');
        }
        Value::Float(f) => {
            let text = java_double_text(*f);
            if f.is_nan() || f.is_infinite() {
                out.push('"');
                out.push_str(&text);
                out.push('"');
            } else {
                out.push_str(&text);
            }
        }
        Value::Bytes(b) => {
            out.push('"');
            base64_std(b, out);
            out.push('"');
        }
        _ => out.push_str("null"),
    }
}

impl Schemas {
    fn render_value(&self, sid: usize, fi: usize, version: i64, v: &Value, out: &mut String) {
        let f = &self.structs[sid].fields[fi];
        match v {
            Value::Null => out.push_str("null"),
            Value::List(items) if f.is_array => {
                out.push('[');
                for (i, item) in items.iter().enumerate() {
                    if i > 0 {
                        out.push(',');
                    }
                    match (f.struct_id, item) {
                        (Some(inner), Value::Struct(sv)) => self.render_struct(inner, version, Some(sv), out),
                        _ => render_scalar(f.kind, item, out),
                    }
                }
                out.push(']');
            }
            Value::Struct(sv) => self.render_struct(f.struct_id.unwrap_or(sv.sid), version, Some(sv), out),
            _ => render_scalar(f.kind, v, out),
        }
    }

    /// `kafkajson._render_struct`: the fields present at `version` in declaration order; a tagged field at its
    /// default is left out; a field the decoded value lacks (decoded at another version) takes its default.
    pub fn render_struct(&self, sid: usize, version: i64, data: Option<&StructVal>, out: &mut String) {
        out.push('{');
        let mut first = true;
        for (fi, f) in self.structs[sid].fields.iter().enumerate() {
            if !f.present_in(version) {
                continue;
            }
            let stored = data.and_then(|d| d.fields.get(fi)).and_then(|v| v.as_ref());
            let default;
            let v = match stored {
                Some(v) => v,
                None => {
                    default = self.default_value(sid, fi, version);
                    &default
                }
            };
            if f.tagged_in(version) && py_eq(v, &self.default_value(sid, fi, version)) {
                continue;
            }
            if !first {
                out.push(',');
            }
            first = false;
            jackson_string(&f.json_name, out);
            out.push(':');
            self.render_value(sid, fi, version, v, out);
        }
        out.push('}');
    }

    /// `kafkajson.payload_json` for a metadata record.
    pub fn payload_json(&self, type_name: &str, sid: usize, version: i64, data: &StructVal) -> String {
        let mut out = String::with_capacity(64);
        out.push_str("{\"type\":\"");
        out.push_str(type_name);
        out.push_str("\",\"version\":");
        out.push_str(&version.to_string());
        out.push_str(",\"data\":");
        self.render_struct(sid, version, Some(data), &mut out);
        out.push('}');
        out
    }

    /// `kafkajson.control_json`: the body rendered at its own Version field (negative as 0).
    pub fn control_json(&self, sid: usize, version: i64, data: &StructVal) -> String {
        let mut out = String::with_capacity(64);
        self.render_struct(sid, version.max(0), Some(data), &mut out);
        out
    }
}
