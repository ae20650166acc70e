//! kafka-dump-log's lines for the batches it can print without Python: `DumpLogRenderer.batch_line` and
//! `_record_line` of `replay/kafka/dumplog.py` (the reference), for data batches whose every record decoded to a
//! type Kafka 4.3 knows. Anything else (control batches, record headers, a value that did not decode, a record that
//! holds or may hold a secret) is left to Python, which renders it from the `Batch` object.

use pyo3::prelude::*;
use pyo3::types::PyList;
use std::fmt::Write;

use crate::decode::{RBatch, Rec};
use crate::rows::{config_is_secret, CONFIG_API_KEY, SCRAM_API_KEY};
use crate::schema::HashSet;
use crate::{Gather, SecretConfigs, State, Taken};

const INT_MAX: i128 = i32::MAX as i128;

/// How the lines are printed: the options of a `DumpLogRenderer` that change them.
pub struct Style {
    pub skip_record_metadata: bool,
    /// What comes before `payload:` when the record metadata is skipped (`"| "` for 4.3, `" "` before).
    pub bare_prefix: String,
    /// 4.3 reports a jump from offset -1 too (`_dump_log`).
    pub gap_from_minus_one: bool,
    /// `dumplog.KAFKA_43_API_KEYS`: the record types whose payload Kafka prints as JSON.
    pub kafka_keys: HashSet<i64>,
    /// Secrets stay in (`show_secrets`): no record is left to Python for redaction.
    pub show_secrets: bool,
}

fn jbool(b: bool) -> &'static str {
    if b {
        "true"
    } else {
        "false"
    }
}

/// `dumplog._increment_sequence`: Java's int arithmetic of `DefaultRecordBatch.incrementSequence`.
fn increment_sequence(sequence: i128, increment: i128) -> i128 {
    if sequence > INT_MAX - increment {
        increment - (INT_MAX - sequence) - 1
    } else {
        sequence + increment
    }
}

fn size(s: Option<(u32, u32)>) -> i64 {
    s.map_or(-1, |(a, b)| (b - a) as i64)
}

/// The JSON of a record's payload as `dumplog.payload_text` prints it, or None where Python must.
fn payload(st: &State, style: &Style, r: &Rec, secret: &mut dyn FnMut(&str) -> bool) -> Option<String> {
    if r.control_type.is_some() || r.error.is_some() || !r.headers.is_empty() {
        return None;
    }
    let d = r.decoded.as_ref()?;
    let key = r.api_key?;
    if d.marker.is_some() || !style.kafka_keys.contains(&key) || r.version != Some(d.version) {
        return None;
    }
    if !style.show_secrets
        && (key == SCRAM_API_KEY || (key == CONFIG_API_KEY && config_is_secret(st, &d.data, secret).unwrap_or(true)))
    {
        return None; // redacted by Python (`secrets.redact_record`)
    }
    let sid = st.schemas.metadata.get(&key)?.struct_id;
    Some(st.schemas.payload_json(&d.type_name, sid, d.version, &d.data))
}

/// Appends the lines of `b` (each ending in a newline) to `out`, or leaves `out` as it was and returns false when
/// a record needs Python.
pub fn render_batch(
    b: &RBatch,
    st: &State,
    style: &Style,
    secret: &mut dyn FnMut(&str) -> bool,
    out: &mut String,
) -> bool {
    let h = &b.header;
    if h.is_control() || h.magic != 2 {
        return false;
    }
    let mut payloads = Vec::with_capacity(b.records.len());
    for r in &b.records {
        match payload(st, style, r, secret) {
            Some(p) => payloads.push(p),
            None => return false,
        }
    }
    let time_type = if h.attributes & 0x08 != 0 { "LogAppendTime" } else { "CreateTime" };
    let last_sequence =
        if h.base_sequence == -1 { -1 } else { (h.base_sequence as i64 + h.last_offset_delta as i64) & 0x7FFF_FFFF };
    let horizon = if h.attributes & 0x40 != 0 {
        format!("OptionalLong[{}]", h.base_timestamp)
    } else {
        "OptionalLong.empty".to_string()
    };
    let _ = writeln!(
        out,
        "baseOffset: {} lastOffset: {} count: {} baseSequence: {} lastSequence: {} producerId: {} producerEpoch: {} \
         partitionLeaderEpoch: {} isTransactional: {} isControl: false deleteHorizonMs: {} position: {} {}: {} \
         size: {} magic: {} compresscodec: {} crc: {} isvalid: {}",
        h.base_offset,
        h.last_offset(),
        h.records_count,
        h.base_sequence,
        last_sequence,
        h.producer_id,
        h.producer_epoch,
        h.leader_epoch,
        jbool(h.attributes & 0x10 != 0),
        horizon,
        h.position,
        time_type,
        h.max_timestamp,
        h.batch_length as i64 + 12,
        h.magic,
        h.codec_name(),
        h.crc,
        jbool(h.crc_ok),
    );
    for (r, p) in b.records.iter().zip(payloads) {
        if style.skip_record_metadata {
            let _ = writeln!(out, "{}payload: {}", style.bare_prefix, p);
            continue;
        }
        let seq = if h.base_sequence < 0 {
            -1
        } else {
            increment_sequence(h.base_sequence as i128, r.offset - h.base_offset as i128)
        };
        let _ = writeln!(
            out,
            "| offset: {} {}: {} keySize: {} valueSize: {} sequence: {} headerKeys: [] payload: {}",
            r.offset,
            time_type,
            r.timestamp,
            size(r.key),
            size(r.value),
            seq,
            p
        );
    }
    true
}

/// The lines of consecutive batches, and what `_dump_log` keeps of them: the first and last record offsets, the
/// jumps between offsets inside (`Non-consecutive offsets`), and the bytes of the batches (the valid bytes).
#[derive(Default)]
pub struct Chunk {
    pub text: String,
    pub batches: usize,
    first: Option<i128>,
    last: Option<i128>,
    gaps: Vec<(i128, i128)>,
    bytes: i64,
}

impl Chunk {
    /// Render `b` into the chunk; false (the chunk unchanged) when Python must render it.
    pub fn add(&mut self, b: &RBatch, st: &State, style: &Style, secret: &mut dyn FnMut(&str) -> bool) -> bool {
        let before = self.text.len();
        if !render_batch(b, st, style, secret, &mut self.text) {
            self.text.truncate(before);
            return false;
        }
        for r in &b.records {
            if let Some(last) = self.last {
                if r.offset != last + 1 && (style.gap_from_minus_one || last != -1) {
                    self.gaps.push((last, r.offset));
                }
            } else {
                self.first = Some(r.offset);
            }
            self.last = Some(r.offset);
        }
        self.bytes += b.header.batch_length as i64 + 12;
        self.batches += 1;
        true
    }

    /// `(text without its last newline, first offset, last offset, [(offset, the next one)], bytes)`, and a fresh
    /// chunk.
    pub fn take(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        let mut c = std::mem::take(self);
        if c.text.ends_with('\n') {
            c.text.pop();
        }
        let gaps = PyList::new(py, c.gaps)?;
        Ok((c.text, c.first, c.last, gaps, c.bytes).into_pyobject(py)?.into_any().unbind())
    }
}

/// `DumpLogDecoder`'s gatherer: the batches `render_batch` prints, consecutive ones in one chunk of at most about
/// `max_bytes` of text; a batch right after a problem is a chunk of its own (the renderer acts on a batch's
/// problems once its lines are out).
pub struct Printed {
    style: Style,
    chunk: Chunk,
    max_bytes: usize,
    secrets: SecretConfigs,
}

impl Printed {
    pub fn new(style: Style, max_bytes: usize, secrets: SecretConfigs) -> Printed {
        Printed { style, chunk: Chunk::default(), max_bytes, secrets }
    }
}

impl Gather for Printed {
    fn gather(&mut self, py: Python<'_>, st: &State, b: &RBatch, after_problem: bool) -> PyResult<Taken> {
        let secrets = &mut self.secrets;
        let mut secret = |name: &str| secrets.is_secret(py, name);
        if !self.chunk.add(b, st, &self.style, &mut secret) {
            return Ok(Taken::No);
        }
        if after_problem || self.chunk.text.len() >= self.max_bytes {
            return Ok(Taken::Out(self.chunk.take(py)?));
        }
        Ok(Taken::Yes)
    }

    fn is_empty(&self) -> bool {
        self.chunk.batches == 0
    }

    fn take(&mut self, py: Python<'_>) -> PyResult<PyObject> {
        self.chunk.take(py)
    }
}
