//! Framing, resync and batch decoding, step for step as `replay/kafka/batch.py` (`_Framer`, `decode_batch`,
//! `_decode_records`, `_parse_record`, `_control_key`, `_decode_value`, `SnapshotStructure`), with the same
//! problems and messages. Offsets computed from header fields are i128: Python's ints do not overflow.

use std::collections::VecDeque;

use crate::schema::{HashSet, Schemas};
use crate::value::{Decoded, StructVal, Value};

pub const LOG_OVERHEAD: i64 = 12;
pub const HEADER_SIZE_UP_TO_MAGIC: usize = 17;
pub const RECORD_BATCH_OVERHEAD: usize = 61;
pub const MIN_BATCH_LENGTH: i64 = 14;
pub const CRC_START: usize = 21;
pub const CURRENT_MAGIC: u8 = 2;
pub const MAX_RAW_BYTES: usize = 1024 * 1024;
const CHUNK: usize = 1024 * 1024;
/// `batch.MAX_UNFRAMED_RECORDS`
const MAX_UNFRAMED_RECORDS: usize = 100;
/// `batch.RESYNC_CRC_FACTOR`
const RESYNC_CRC_FACTOR: i64 = 8;
/// `batch._ATTRIBUTE_BITS`
const ATTRIBUTE_BITS: u16 = 0x7F;

pub const NOT_A_METADATA_LOG: &str = "not_a_metadata_log";
pub const UNREADABLE_FILE: &str = "unreadable_file";
pub const TRUNCATED_TAIL: &str = "truncated_tail";
pub const BAD_MAGIC: &str = "bad_magic";
pub const BATCH_TOO_SHORT: &str = "batch_too_short";
pub const BAD_CRC: &str = "bad_crc";
pub const UNKNOWN_CODEC: &str = "unknown_codec";
pub const DECOMPRESSION_FAILED: &str = "decompression_failed";
pub const DECOMPRESSION_LIMIT: &str = "decompression_limit";
pub const RECORD_OVERRUN: &str = "record_overrun";
pub const TRAILING_BYTES: &str = "trailing_bytes";
pub const RECORD_COUNT_MISMATCH: &str = "record_count_mismatch";
pub const BAD_RECORD: &str = "bad_record";
pub const UNKNOWN_TAGGED_FIELD: &str = "unknown_tagged_field";
pub const SNAPSHOT_NO_HEADER: &str = "snapshot_no_header";
pub const SNAPSHOT_NO_FOOTER: &str = "snapshot_no_footer";

const CODEC_NAMES: [&str; 5] = ["none", "gzip", "snappy", "lz4", "zstd"];

pub struct Prob {
    pub kind: &'static str,
    pub message: String,
    pub position: Option<i64>,
    pub offset: Option<i128>,
    pub raw: Option<Vec<u8>>,
}

#[derive(Clone, Copy)]
pub struct Header {
    pub position: i64,
    pub base_offset: i64,
    pub batch_length: i32,
    pub leader_epoch: i32,
    pub magic: i8,
    pub crc: u32,
    pub attributes: i16,
    pub last_offset_delta: i32,
    pub base_timestamp: i64,
    pub max_timestamp: i64,
    pub producer_id: i64,
    pub producer_epoch: i16,
    pub base_sequence: i32,
    pub records_count: i32,
    pub crc_ok: bool,
}

impl Header {
    pub fn codec(&self) -> i64 {
        (self.attributes & 7) as i64
    }
    pub fn codec_name(&self) -> String {
        let c = self.codec() as usize;
        if c < CODEC_NAMES.len() {
            CODEC_NAMES[c].to_string()
        } else {
            format!("unknown({})", c)
        }
    }
    pub fn is_control(&self) -> bool {
        self.attributes & 0x20 != 0
    }
    pub fn last_offset(&self) -> i128 {
        self.base_offset as i128 + self.last_offset_delta as i128
    }
}

pub type Span = (u32, u32); // start, end in the batch's records area

pub struct Rec {
    pub offset: i128,
    pub timestamp: i128,
    pub key: Option<Span>,
    pub value: Option<Span>,
    pub attributes: u8,
    pub ts_delta: i64,
    pub headers: Vec<(Span, Option<Span>)>,
    pub control_type: Option<i64>,
    pub api_key: Option<i64>,
    pub version: Option<i64>,
    pub decoded: Option<Decoded>,
    pub error: Option<String>,
}

pub struct RBatch {
    pub header: Header,
    pub area: Vec<u8>,
    pub records: Vec<Rec>,
}

impl RBatch {
    pub fn bytes(&self, s: Span) -> &[u8] {
        &self.area[s.0 as usize..s.1 as usize]
    }
}

pub enum Item {
    Batch(RBatch),
    Problem(Prob),
}

fn be_i64(b: &[u8], at: usize) -> i64 {
    i64::from_be_bytes(b[at..at + 8].try_into().unwrap())
}
fn be_i32(b: &[u8], at: usize) -> i32 {
    i32::from_be_bytes(b[at..at + 4].try_into().unwrap())
}
fn be_i16(b: &[u8], at: usize) -> i16 {
    i16::from_be_bytes([b[at], b[at + 1]])
}

fn looks_like_text(data: &[u8]) -> bool {
    !data.is_empty() && data.iter().all(|&b| b == b'\t' || b == b'\n' || b == b'\r' || (32..127).contains(&b))
}

fn crc_matches(data: &[u8]) -> bool {
    data.len() >= RECORD_BATCH_OVERHEAD
        && u32::from_be_bytes(data[17..21].try_into().unwrap()) == crc32c::crc32c(&data[CRC_START..])
}

fn offset_after(data: &[u8]) -> Option<i128> {
    if data.len() < RECORD_BATCH_OVERHEAD {
        return None;
    }
    Some(be_i64(data, 0) as i128 + be_i32(data, 23) as i128 + 1)
}

// ---- input ------------------------------------------------------------------------------------------------------

/// Where the bytes come from: `read_into(n, out)` appends up to n bytes to `out` and says how many, fewer only
/// at the end (none at the end).
pub trait Source {
    fn read_into(&mut self, n: usize, out: &mut Vec<u8>) -> Result<usize, pyo3::PyErr>;
}

/// A read-ahead buffer over a `Source`: the framer peeks at bytes from its position and consumes them.
pub struct Input {
    buf: Vec<u8>,
    start: usize,
    eof: bool,
    /// How much more than asked a read takes: nothing until a batch frames (a file that is no log is read no
    /// further than the search for a batch needs, as `batch.py` reads it), then `CHUNK`.
    readahead: usize,
    src: Box<dyn Source + Send + Sync>,
}

type PyRes<T> = Result<T, pyo3::PyErr>;

impl Input {
    pub fn new(src: Box<dyn Source + Send + Sync>) -> Input {
        Input { buf: Vec::new(), start: 0, eof: false, readahead: 0, src }
    }

    /// Make `n` bytes from the current point available if the source has them; returns how many are.
    fn ensure(&mut self, n: usize) -> PyRes<usize> {
        while self.buf.len() - self.start < n && !self.eof {
            if self.start > 0 && (self.start >= self.buf.len() / 2 || self.start > 8 * CHUNK) {
                self.buf.drain(..self.start);
                self.start = 0;
            }
            let want = (n - (self.buf.len() - self.start)).max(self.readahead);
            if self.src.read_into(want, &mut self.buf)? == 0 {
                self.eof = true;
            }
        }
        Ok((self.buf.len() - self.start).min(n))
    }

    fn peek(&self, n: usize) -> &[u8] {
        let end = (self.start + n).min(self.buf.len());
        &self.buf[self.start..end]
    }

    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.buf.len());
    }

    /// Every byte left from the current point (read to the end of the source, counting).
    fn count_rest(&mut self) -> PyRes<usize> {
        let mut count = self.buf.len() - self.start;
        self.buf.clear();
        self.start = 0;
        while !self.eof {
            let n = self.src.read_into(CHUNK, &mut self.buf)?;
            self.buf.clear();
            if n == 0 {
                self.eof = true;
            }
            count += n;
        }
        Ok(count)
    }
}

// ---- framing ----------------------------------------------------------------------------------------------------

pub enum Raw {
    Frame(i64, Vec<u8>),
    Problem(Prob),
}

pub struct Framer {
    input: Input,
    source: String,
    pos: i64,
    max: i64,
    /// `batch.RESYNC_WINDOW`, as the caller's module has it
    resync_window: usize,
    next_offset: Option<i128>,
    first: bool,
    done: bool,
    /// where the stream started (`start_position`)
    start: i64,
    /// bytes checksummed for candidates while searching for a valid batch, and how many candidates that was
    crc_spent: i64,
    crc_checked: i64,
    /// why the last search stopped before its window's end, if it did
    gave_up: String,
}

impl Framer {
    pub fn new(
        input: Input,
        source: String,
        start_position: i64,
        max: i64,
        resync_window: usize,
        name_offset: Option<i128>,
    ) -> Framer {
        Framer {
            input,
            source,
            pos: start_position,
            max,
            resync_window,
            next_offset: if start_position == 0 { name_offset } else { None },
            first: start_position == 0,
            done: false,
            start: start_position,
            crc_spent: 0,
            crc_checked: 0,
            gave_up: String::new(),
        }
    }

    fn src_name(&self) -> &str {
        if self.source.is_empty() {
            "the input"
        } else {
            &self.source
        }
    }

    fn problem(&self, kind: &'static str, message: String, offset: Option<i128>, raw: Vec<u8>) -> Raw {
        Raw::Problem(Prob { kind, message, position: Some(self.pos), offset, raw: Some(raw) })
    }

    /// One step of `_Framer.frames`: the items for the next batch (or the problem where framing fails).
    pub fn step(&mut self, out: &mut VecDeque<Raw>) -> PyRes<()> {
        if self.done {
            return Ok(());
        }
        let n = self.input.ensure(HEADER_SIZE_UP_TO_MAGIC)?;
        if n == 0 {
            self.done = true;
            return Ok(());
        }
        let head: Vec<u8> = self.input.peek(HEADER_SIZE_UP_TO_MAGIC).to_vec();
        if n < HEADER_SIZE_UP_TO_MAGIC {
            let first = self.first;
            out.push_back(self.short(&head, first));
            self.done = true;
            return Ok(());
        }
        let go_on = if self.first && !self.plausible_start(&head) {
            self.unframeable_start(&head, out)?
        } else {
            self.batch(&head, out)?
        };
        self.first = false;
        if !go_on {
            self.done = true;
        }
        Ok(())
    }

    pub fn done(&self) -> bool {
        self.done
    }

    fn plausible_start(&self, head: &[u8]) -> bool {
        let size = be_i32(head, 8) as i64 + LOG_OVERHEAD;
        be_i64(head, 0) >= 0
            && head[16] == CURRENT_MAGIC
            && !looks_like_text(head)
            && RECORD_BATCH_OVERHEAD as i64 <= size
            && size <= self.max
    }

    fn short(&self, head: &[u8], first: bool) -> Raw {
        let (kind, offset) = if first && looks_like_text(head) {
            (NOT_A_METADATA_LOG, self.next_offset)
        } else {
            (TRUNCATED_TAIL, if head.len() >= 8 { Some(be_i64(head, 0) as i128) } else { self.next_offset })
        };
        self.problem(
            kind,
            format!(
                "Found {} invalid bytes at the end of {} (fewer than the {} bytes of a batch header)",
                head.len(),
                self.src_name(),
                HEADER_SIZE_UP_TO_MAGIC
            ),
            offset,
            head.to_vec(),
        )
    }

    fn advance(&mut self, size: usize) {
        let next = offset_after(self.input.peek(size));
        self.input.consume(size);
        self.pos += size as i64;
        self.next_offset = next;
    }

    fn skip(&mut self, found: usize) {
        self.input.consume(found);
        self.pos += found as i64;
        self.next_offset = None;
    }

    fn unframeable_start(&mut self, head: &[u8], out: &mut VecDeque<Raw>) -> PyRes<bool> {
        let base = be_i64(head, 0);
        let blen = be_i32(head, 8) as i64;
        let magic = head[16];
        let size = blen + LOG_OVERHEAD;
        if head.starts_with(b"Dumping ") {
            let n = self.input.ensure(MAX_RAW_BYTES)?;
            let raw = self.input.peek(n).to_vec();
            out.push_back(self.problem(
                NOT_A_METADATA_LOG,
                "this is kafka-dump-log text output, not a binary metadata log; read it as dump-log text".into(),
                self.next_offset,
                raw,
            ));
            return Ok(false);
        }
        let mut data_len = HEADER_SIZE_UP_TO_MAGIC;
        if RECORD_BATCH_OVERHEAD as i64 <= size && size <= self.max {
            data_len = self.input.ensure(size as usize)?;
        }
        if data_len as i64 == size && crc_matches(self.input.peek(data_len)) {
            let data = self.input.peek(data_len).to_vec();
            if magic != CURRENT_MAGIC {
                out.push_back(self.problem(
                    BAD_MAGIC,
                    format!("magic {} (expected {}) but the CRC matches; skipped {} bytes", magic, CURRENT_MAGIC, size),
                    Some(base as i128),
                    data,
                ));
            } else {
                out.push_back(Raw::Frame(self.pos, data));
            }
            self.advance(size as usize);
            return Ok(true);
        }
        let (found, wlen) = self.look_ahead(data_len)?;
        match found {
            None => {
                let raw = self.input.peek(wlen.min(MAX_RAW_BYTES)).to_vec();
                out.push_back(self.problem(
                    NOT_A_METADATA_LOG,
                    format!(
                        "not a KRaft metadata log: the first bytes are not a v2 record batch (base offset {}, length {}, \
                         magic {}) and {}",
                        base,
                        blen,
                        magic,
                        self.searched(wlen)
                    ),
                    self.next_offset,
                    raw,
                ));
                Ok(false)
            }
            Some(found) => {
                let next_base = be_i64(self.input.peek(found + 8), found);
                let raw = self.input.peek(found.min(MAX_RAW_BYTES)).to_vec();
                out.push_back(Raw::Problem(self.corrupt_start(head, found, next_base, raw)));
                self.skip(found);
                Ok(true)
            }
        }
    }

    fn corrupt_start(&self, head: &[u8], skipped: usize, next_base: i64, raw: Vec<u8>) -> Prob {
        let base = be_i64(head, 0);
        let blen = be_i32(head, 8) as i64;
        let magic = head[16];
        let size = blen + LOG_OVERHEAD;
        let mut kind = BATCH_TOO_SHORT;
        let why = if blen < MIN_BATCH_LENGTH {
            format!("a batch length of {}, below the minimum of {}", blen, MIN_BATCH_LENGTH)
        } else if size < RECORD_BATCH_OVERHEAD as i64 {
            format!("a size of {} bytes, shorter than the {}-byte v2 header", size, RECORD_BATCH_OVERHEAD)
        } else if size > self.max {
            format!("a batch length of {}, above the limit of {}", blen, self.max - LOG_OVERHEAD)
        } else if magic != CURRENT_MAGIC {
            kind = BAD_MAGIC;
            format!("magic {} (expected {}) and no matching CRC", magic, CURRENT_MAGIC)
        } else {
            kind = BAD_CRC;
            format!("an implausible header (base offset {}) and no matching CRC", base)
        };
        let offset = if 0 <= base && base <= next_base { Some(base as i128) } else { self.next_offset };
        Prob {
            kind,
            message: format!(
                "the first batch has {}, so it cannot be framed; the {} bytes before byte {}, where the next valid \
                 batch starts, are not decoded",
                why,
                skipped,
                self.pos + skipped as i64
            ),
            position: Some(self.pos),
            offset,
            raw: Some(raw),
        }
    }

    fn batch(&mut self, head: &[u8], out: &mut VecDeque<Raw>) -> PyRes<bool> {
        let base = be_i64(head, 0);
        let blen = be_i32(head, 8) as i64;
        let magic = head[16];
        let size = blen + LOG_OVERHEAD;
        if blen < MIN_BATCH_LENGTH || size > self.max {
            return self.untrusted_length(head, out);
        }
        let size = size as usize;
        let got = self.input.ensure(size)?;
        if got < size {
            if magic == CURRENT_MAGIC {
                let raw = self.input.peek(got).to_vec();
                out.push_back(self.problem(
                    TRUNCATED_TAIL,
                    format!(
                        "Found {} invalid bytes at the end of {} (a batch declaring {} bytes)",
                        got,
                        self.src_name(),
                        size
                    ),
                    Some(base as i128),
                    raw,
                ));
                return Ok(false);
            }
            let why = format!(
                "magic {} (expected {}) and a length of {} bytes that runs past the end of the file",
                magic, CURRENT_MAGIC, size
            );
            return self.resync_or_stop(BAD_MAGIC, why, Some(base as i128), got, None, out);
        }
        let data = self.input.peek(size).to_vec();
        if magic != CURRENT_MAGIC {
            out.push_back(self.problem(
                BAD_MAGIC,
                format!("magic {} (expected {}); skipped {} bytes by its length", magic, CURRENT_MAGIC, size),
                Some(base as i128),
                data,
            ));
        } else {
            out.push_back(Raw::Frame(self.pos, data));
            self.input.readahead = CHUNK;
        }
        self.advance(size);
        Ok(true)
    }

    fn untrusted_length(&mut self, head: &[u8], out: &mut VecDeque<Raw>) -> PyRes<bool> {
        let base = be_i64(head, 0);
        let blen = be_i32(head, 8) as i64;
        let size = blen + LOG_OVERHEAD;
        let why = if blen < MIN_BATCH_LENGTH {
            format!("batch length {} is below the minimum of {}", blen, MIN_BATCH_LENGTH)
        } else {
            format!("batch length {} is above the limit of {}", blen, self.max - LOG_OVERHEAD)
        };
        let (found, wlen) = self.look_ahead(HEADER_SIZE_UP_TO_MAGIC)?;
        if found.is_some() {
            return self.resync_or_stop(
                BATCH_TOO_SHORT,
                format!("{}; the length cannot be trusted", why),
                Some(base as i128),
                HEADER_SIZE_UP_TO_MAGIC,
                Some((found, wlen)),
                out,
            );
        }
        let raw = self.input.peek(wlen.min(MAX_RAW_BYTES)).to_vec();
        let left = self.input.count_rest()?;
        if blen >= MIN_BATCH_LENGTH && (left as i64) < size && head[16] == CURRENT_MAGIC {
            out.push_back(self.problem(
                TRUNCATED_TAIL,
                format!(
                    "Found {} invalid bytes at the end of {} (a batch declaring {} bytes){}",
                    left,
                    self.src_name(),
                    size,
                    self.gave_up_note()
                ),
                Some(base as i128),
                raw,
            ));
            return Ok(false);
        }
        let zeros = if raw.iter().all(|&b| b == 0) { " (all zero: preallocated or unflushed space)" } else { "" };
        out.push_back(self.problem(
            BATCH_TOO_SHORT,
            format!(
                "{}; the length cannot be trusted and no valid batch follows, so the remaining {} bytes of the file are \
                 not decoded{}{}",
                why,
                left,
                zeros,
                self.gave_up_note()
            ),
            Some(base as i128),
            raw,
        ));
        Ok(false)
    }

    #[allow(clippy::too_many_arguments)]
    fn resync_or_stop(
        &mut self,
        kind: &'static str,
        why: String,
        offset: Option<i128>,
        data_len: usize,
        looked: Option<(Option<usize>, usize)>,
        out: &mut VecDeque<Raw>,
    ) -> PyRes<bool> {
        let (found, wlen) = match looked {
            Some(l) => l,
            None => self.look_ahead(data_len)?,
        };
        match found {
            None => {
                let raw = self.input.peek(wlen.min(MAX_RAW_BYTES)).to_vec();
                let left = self.input.count_rest()?;
                out.push_back(self.problem(
                    kind,
                    format!("{}; the remaining {} bytes are not decoded{}", why, left, self.gave_up_note()),
                    offset,
                    raw,
                ));
                Ok(false)
            }
            Some(found) => {
                let raw = self.input.peek(found.min(MAX_RAW_BYTES)).to_vec();
                out.push_back(self.problem(
                    kind,
                    format!(
                        "{}, so the {} bytes before byte {}, where the next valid batch starts, are not decoded",
                        why,
                        found,
                        self.pos + found as i64
                    ),
                    offset,
                    raw,
                ));
                self.skip(found);
                Ok(true)
            }
        }
    }

    /// `_look_ahead`: the window (the bytes from here, at least `RESYNC_WINDOW` of them when there are) and the
    /// first place after 0 in it where a valid batch starts. Returns (found, window length).
    fn look_ahead(&mut self, data_len: usize) -> PyRes<(Option<usize>, usize)> {
        self.gave_up.clear();
        let mut wlen = self.input.ensure(data_len.max(self.resync_window))?;
        let found = self.resync(&mut wlen)?;
        Ok((found, wlen))
    }

    fn resync(&mut self, wlen: &mut usize) -> PyRes<Option<usize>> {
        let limit = self.resync_window + HEADER_SIZE_UP_TO_MAGIC - 1;
        let mut from = HEADER_SIZE_UP_TO_MAGIC;
        loop {
            let to = limit.min(*wlen);
            if from >= to {
                return Ok(None);
            }
            let hit = self.input.peek(to)[from..to].iter().position(|&b| b == CURRENT_MAGIC);
            let magic_at = match hit {
                None => return Ok(None),
                Some(i) => from + i,
            };
            let p = magic_at - (HEADER_SIZE_UP_TO_MAGIC - 1);
            match self.candidate_at(p, wlen)? {
                Some(true) => return Ok(Some(p)),
                Some(false) => {}
                None => return Ok(None), // gave up
            }
            from = magic_at + 1;
        }
    }

    fn extend(&mut self, wlen: &mut usize, to: usize) -> PyRes<()> {
        if to > *wlen {
            *wlen = self.input.ensure(to)?.max(*wlen);
        }
        Ok(())
    }

    /// `_searched`: what the last search found nothing in.
    fn searched(&self, wlen: usize) -> String {
        if self.gave_up.is_empty() {
            format!("no valid batch starts in the first {} bytes", wlen.min(self.resync_window))
        } else {
            self.gave_up.clone()
        }
    }

    fn gave_up_note(&self) -> String {
        if self.gave_up.is_empty() {
            String::new()
        } else {
            format!(" ({})", self.gave_up)
        }
    }

    /// `_candidate_at`: Some(whether a valid batch starts at `p`), None when the search gives up (its CRC budget).
    fn candidate_at(&mut self, p: usize, wlen: &mut usize) -> PyRes<Option<bool>> {
        let (base, blen) = {
            let w = self.input.peek(p + 12);
            (be_i64(w, p), be_i32(w, p + 8) as i64)
        };
        let size = blen + LOG_OVERHEAD;
        if base < 0 || size < RECORD_BATCH_OVERHEAD as i64 || size > self.max {
            return Ok(Some(false));
        }
        let end = p + size as usize;
        if p + RECORD_BATCH_OVERHEAD > *wlen {
            self.extend(wlen, p + RECORD_BATCH_OVERHEAD)?;
            if p + RECORD_BATCH_OVERHEAD > *wlen {
                return Ok(Some(false));
            }
        }
        {
            let w = self.input.peek(p + RECORD_BATCH_OVERHEAD);
            let attributes = be_i16(w, p + CRC_START);
            let last_delta = be_i32(w, p + 23);
            let count = be_i32(w, p + 57);
            if (attributes & 7) as usize >= CODEC_NAMES.len()
                || (attributes as u16) & !ATTRIBUTE_BITS != 0
                || last_delta < 0
                || count < 0
            {
                return Ok(Some(false));
            }
        }
        if end > *wlen {
            self.extend(wlen, end)?;
            if end > *wlen {
                return Ok(Some(false));
            }
        }
        let abs_end = self.pos + end as i64;
        if self.crc_spent + size > RESYNC_CRC_FACTOR * (abs_end - self.start) {
            self.gave_up = format!(
                "the search for a valid batch stopped at byte {}: the CRCs of {} candidates checked so far cost {} \
                 bytes, and this one's {} more would pass {} times the bytes up to its end",
                self.pos + p as i64,
                self.crc_checked,
                self.crc_spent,
                size,
                RESYNC_CRC_FACTOR
            );
            return Ok(None);
        }
        self.crc_spent += size;
        self.crc_checked += 1;
        Ok(Some(crc_matches(&self.input.peek(end)[p..end])))
    }
}

// ---- batches ----------------------------------------------------------------------------------------------------

/// What a records area decompresses to: the bytes, more than the limit, or the reason it does not.
pub enum Fallback {
    Ok(Vec<u8>),
    Limit,
    Bad(String),
}

pub struct Ctx<'a> {
    pub schemas: &'a Schemas,
    pub decode_values: bool,
    /// `records_for`: the api keys whose metadata records are kept (with every control record); None keeps all.
    pub records_for: Option<&'a HashSet<u64>>,
    /// `decompressed_limit`: the most bytes a records area may decompress to
    pub decompressed_limit: usize,
    /// Asks Python's `codecs.decompress` (with the limit) when ours fails: its output, past the limit, or the
    /// message of its `CodecError`.
    pub fallback: &'a mut dyn FnMut(i64, &[u8], usize) -> PyRes<Fallback>,
}

pub fn parse_header(data: &[u8], position: i64) -> Header {
    let batch_length = be_i32(data, 8);
    let crc = u32::from_be_bytes(data[17..21].try_into().unwrap());
    let end = ((batch_length as i64 + LOG_OVERHEAD).max(CRC_START as i64) as usize).min(data.len());
    Header {
        position,
        base_offset: be_i64(data, 0),
        batch_length,
        leader_epoch: be_i32(data, 12),
        magic: data[16] as i8,
        crc,
        attributes: be_i16(data, 21),
        last_offset_delta: be_i32(data, 23),
        base_timestamp: be_i64(data, 27),
        max_timestamp: be_i64(data, 35),
        producer_id: be_i64(data, 43),
        producer_epoch: be_i16(data, 51),
        base_sequence: be_i32(data, 53),
        records_count: be_i32(data, 57),
        crc_ok: crc == crc32c::crc32c(&data[CRC_START..end]),
    }
}

fn prob(kind: &'static str, message: String, position: i64, offset: Option<i128>, raw: Option<Vec<u8>>) -> Prob {
    Prob { kind, message, position: Some(position), offset, raw }
}

/// `decode_batch`: the batch's problems, then the batch when it has a header.
pub fn decode_batch(data: &[u8], position: i64, ctx: &mut Ctx, out: &mut VecDeque<Item>) -> PyRes<()> {
    if data.len() < RECORD_BATCH_OVERHEAD {
        let offset = if data.len() >= 8 { Some(be_i64(data, 0) as i128) } else { None };
        out.push_back(Item::Problem(prob(
            BATCH_TOO_SHORT,
            format!(
                "a batch of {} bytes is shorter than the {}-byte v2 header; skipped by its length",
                data.len(),
                RECORD_BATCH_OVERHEAD
            ),
            position,
            offset,
            Some(data.to_vec()),
        )));
        return Ok(());
    }
    if data[16] != CURRENT_MAGIC {
        out.push_back(Item::Problem(prob(
            BAD_MAGIC,
            format!("magic {} (expected {})", data[16], CURRENT_MAGIC),
            position,
            Some(be_i64(data, 0) as i128),
            Some(data.to_vec()),
        )));
        return Ok(());
    }
    let header = parse_header(data, position);
    let size = header.batch_length as i64 + LOG_OVERHEAD;
    let mut view = data;
    let base = Some(header.base_offset as i128);
    if size != data.len() as i64 {
        out.push_back(Item::Problem(prob(
            if size < data.len() as i64 { TRAILING_BYTES } else { TRUNCATED_TAIL },
            format!("batch declares {} bytes but {} were given", size, data.len()),
            position,
            base,
            Some(data.to_vec()),
        )));
        if size > data.len() as i64 {
            return Ok(());
        }
        view = &data[..(size.max(0) as usize)];
    }
    if !header.crc_ok {
        let computed = crc32c::crc32c(&view[CRC_START.min(view.len())..]);
        out.push_back(Item::Problem(prob(
            BAD_CRC,
            format!(
                "stored CRC {} but computed {}; records decoded anyway, the batch is marked crc_ok=false",
                header.crc, computed
            ),
            position,
            base,
            Some(view.to_vec()),
        )));
    }
    let mut batch = RBatch { header, area: Vec::new(), records: Vec::new() };
    let body = if view.len() > RECORD_BATCH_OVERHEAD { &view[RECORD_BATCH_OVERHEAD..] } else { &[][..] };
    let codec = header.codec();
    if codec == 0 {
        batch.area = body.to_vec();
    } else if codec >= 5 {
        out.push_back(Item::Problem(prob(
            UNKNOWN_CODEC,
            format!(
                "unknown compression codec id {} (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd); records not decoded",
                codec
            ),
            position,
            base,
            Some(view.to_vec()),
        )));
        out.push_back(Item::Batch(batch));
        return Ok(());
    } else {
        // ours first; where it fails, Python's codecs (the reference) say what the bytes are
        let outcome = match crate::codec::decompress(codec, body, ctx.decompressed_limit) {
            Ok(area) => Fallback::Ok(area),
            Err(crate::codec::Fail::Limit) => Fallback::Limit,
            Err(crate::codec::Fail::Bad) => (ctx.fallback)(codec, body, ctx.decompressed_limit)?,
        };
        let problem = match outcome {
            Fallback::Ok(area) => {
                batch.area = area;
                None
            }
            Fallback::Limit => Some(prob(
                DECOMPRESSION_LIMIT,
                format!(
                    "{} records area decompresses to more than the limit of {} bytes ({} bytes compressed); \
                     records not decoded (the limit is the `decompressed_limit` option)",
                    header.codec_name(),
                    ctx.decompressed_limit,
                    body.len()
                ),
                position,
                base,
                Some(view.to_vec()),
            )),
            Fallback::Bad(message) => Some(prob(
                DECOMPRESSION_FAILED,
                format!("{} records area does not decompress: {}; records not decoded", header.codec_name(), message),
                position,
                base,
                Some(view.to_vec()),
            )),
        };
        if let Some(p) = problem {
            out.push_back(Item::Problem(p));
            out.push_back(Item::Batch(batch));
            return Ok(());
        }
    }
    decode_records(&mut batch, ctx, out);
    out.push_back(Item::Batch(batch));
    Ok(())
}

enum RecErr {
    Overrun(String),
    Bad(String),
}

fn varint(buf: &[u8], mut pos: usize, end: usize, max_bytes: usize) -> Result<(i64, usize), RecErr> {
    let mut u: u64 = 0;
    let mut shift = 0u32;
    for _ in 0..max_bytes {
        if pos >= end {
            return Err(RecErr::Overrun("varint runs past the end".into()));
        }
        let b = buf[pos];
        pos += 1;
        if shift < 64 {
            u |= ((b & 0x7F) as u64) << shift;
        }
        if b < 0x80 {
            if max_bytes == 5 {
                u &= 0xFFFF_FFFF;
            }
            let v = ((u >> 1) as i64) ^ -((u & 1) as i64);
            return Ok((v, pos));
        }
        shift += 7;
    }
    Err(RecErr::Bad(format!("varint longer than {} bytes", max_bytes)))
}

fn decode_records(batch: &mut RBatch, ctx: &mut Ctx, out: &mut VecDeque<Item>) {
    let header = batch.header;
    let position = header.position;
    let uncompressed = header.codec() == 0;
    let control = header.is_control();
    let log_append = header.attributes & 0x08 != 0;
    let buf = std::mem::take(&mut batch.area);
    let end = buf.len();
    let count = header.records_count as i64;
    let base = header.base_offset as i128;
    let where_ = |p: usize| -> String {
        if uncompressed {
            format!("file byte {}", position + RECORD_BATCH_OVERHEAD as i64 + p as i64)
        } else {
            format!("byte {} of the decompressed records", p)
        }
    };
    let mut problems: Vec<Prob> = Vec::new();
    if count < 0 {
        problems.push(prob(
            RECORD_COUNT_MISMATCH,
            format!("invalid record count {}; reading records to the end of the batch", count),
            position,
            Some(base),
            None,
        ));
    }
    let mut p = 0usize;
    let mut i: i64 = 0;
    let mut overran = false;
    let mut unframed = 0usize; // `_decode_records`: records skipped or with bytes left over
    let mut records: Vec<Rec> = Vec::with_capacity(count.clamp(0, 4096) as usize);
    while count < 0 || i < count {
        if p >= end {
            if count >= 0 {
                problems.push(prob(
                    RECORD_COUNT_MISMATCH,
                    format!("header says {} records but the batch holds {}", count, i),
                    position,
                    Some(base + i as i128),
                    None,
                ));
            }
            break;
        }
        let start = p;
        let guess = Some(base + i as i128);
        let length = match varint(&buf, p, end, 5) {
            Ok((v, q)) => {
                p = q;
                v
            }
            Err(RecErr::Overrun(e)) | Err(RecErr::Bad(e)) => {
                problems.push(prob(
                    RECORD_OVERRUN,
                    format!("record #{} at {}: its length {}", i, where_(start), e),
                    position,
                    guess,
                    Some(buf[start..end].to_vec()),
                ));
                overran = true;
                break;
            }
        };
        if length < 0 || p as i64 + length > end as i64 {
            problems.push(prob(
                RECORD_OVERRUN,
                format!(
                    "record #{} at {} declares {} bytes but {} remain in the batch; the rest of the batch is not decoded",
                    i,
                    where_(start),
                    length,
                    end - p
                ),
                position,
                guess,
                Some(buf[start..end].to_vec()),
            ));
            overran = true;
            break;
        }
        let body_end = p + length as usize;
        if unframed >= MAX_UNFRAMED_RECORDS {
            problems.push(prob(
                RECORD_OVERRUN,
                format!(
                    "{} records of this batch did not frame (see the problems before); the remaining {} bytes of its \
                     records, from record #{} at {}, are not decoded",
                    unframed,
                    end - start,
                    i,
                    where_(start)
                ),
                position,
                guess,
                Some(buf[start..end.min(start + MAX_RAW_BYTES)].to_vec()),
            ));
            overran = true;
            break;
        }
        match parse_record(&buf, p, body_end, &header, log_append) {
            Err(RecErr::Overrun(_)) => {
                unframed += 1;
                problems.push(prob(
                    RECORD_OVERRUN,
                    format!(
                        "record #{} at {}: its fields run past its length of {} bytes; record skipped",
                        i,
                        where_(start),
                        length
                    ),
                    position,
                    guess,
                    Some(buf[start..body_end].to_vec()),
                ));
            }
            Err(RecErr::Bad(e)) => {
                unframed += 1;
                problems.push(prob(
                    BAD_RECORD,
                    format!("record #{} at {}: {}; record skipped", i, where_(start), e),
                    position,
                    guess,
                    Some(buf[start..body_end].to_vec()),
                ));
            }
            Ok((mut rec, q)) => {
                if q != body_end {
                    unframed += 1;
                    problems.push(prob(
                        TRAILING_BYTES,
                        format!("{} bytes left after the body of record #{} at {}", body_end - q, i, where_(start)),
                        position,
                        Some(rec.offset),
                        Some(buf[q..body_end].to_vec()),
                    ));
                }
                if !wanted(&rec, &buf, control, ctx.records_for) {
                    p = body_end;
                    i += 1;
                    continue;
                }
                if control {
                    control_key(&mut rec, &buf, position, &mut problems);
                }
                if ctx.decode_values {
                    decode_value(&mut rec, &buf, control, ctx.schemas, position, &mut problems);
                }
                records.push(rec);
            }
        }
        p = body_end;
        i += 1;
    }
    if !overran && p < end {
        let upto = end.min(p + MAX_RAW_BYTES);
        problems.push(prob(
            TRAILING_BYTES,
            format!("{} bytes left after the last of {} records at {}", end - p, i, where_(p)),
            position,
            Some(base + (i - 1).max(0) as i128),
            Some(buf[p..upto].to_vec()),
        ));
    }
    batch.area = buf;
    batch.records = records;
    for pr in problems {
        out.push_back(Item::Problem(pr));
    }
}

/// `batch.wanted`: every control record, and a metadata record whose value's frame names one of the api keys
/// (`peek_frame`, the body not decoded); a null value or an unreadable frame names none.
fn wanted(rec: &Rec, buf: &[u8], control: bool, records_for: Option<&HashSet<u64>>) -> bool {
    let keys = match records_for {
        None => return true,
        Some(keys) => keys,
    };
    if control {
        return true;
    }
    match rec.value {
        None => false,
        Some(s) => Schemas::peek_frame(&buf[s.0 as usize..s.1 as usize]).is_some_and(|(_, key, _)| keys.contains(&key)),
    }
}

fn span(a: usize, b: usize) -> Span {
    (a as u32, b as u32)
}

fn parse_record(
    buf: &[u8],
    mut p: usize,
    end: usize,
    header: &Header,
    log_append: bool,
) -> Result<(Rec, usize), RecErr> {
    if p >= end {
        return Err(RecErr::Overrun(String::new()));
    }
    let attributes = buf[p];
    p += 1;
    let (ts_delta, q) = varint(buf, p, end, 10)?;
    p = q;
    let (offset_delta, q) = varint(buf, p, end, 5)?;
    p = q;
    let (key_len, q) = varint(buf, p, end, 5)?;
    p = q;
    if key_len < -1 {
        return Err(RecErr::Bad(format!("invalid key length {}", key_len)));
    }
    let mut key = None;
    if key_len >= 0 {
        if p + key_len as usize > end {
            return Err(RecErr::Overrun(String::new()));
        }
        key = Some(span(p, p + key_len as usize));
        p += key_len as usize;
    }
    let (value_len, q) = varint(buf, p, end, 5)?;
    p = q;
    if value_len < -1 {
        return Err(RecErr::Bad(format!("invalid value length {}", value_len)));
    }
    let mut value = None;
    if value_len >= 0 {
        if p + value_len as usize > end {
            return Err(RecErr::Overrun(String::new()));
        }
        value = Some(span(p, p + value_len as usize));
        p += value_len as usize;
    }
    let (header_count, q) = varint(buf, p, end, 5)?;
    p = q;
    if header_count < 0 {
        return Err(RecErr::Bad(format!("invalid header count {}", header_count)));
    }
    let mut headers = Vec::new();
    for _ in 0..header_count {
        let (hk_len, q) = varint(buf, p, end, 5)?;
        p = q;
        if hk_len < 0 {
            return Err(RecErr::Bad(format!("invalid header key length {}", hk_len)));
        }
        if p + hk_len as usize > end {
            return Err(RecErr::Overrun(String::new()));
        }
        let hkey = span(p, p + hk_len as usize);
        p += hk_len as usize;
        let (hv_len, q) = varint(buf, p, end, 5)?;
        p = q;
        if hv_len < -1 {
            return Err(RecErr::Bad(format!("invalid header value length {}", hv_len)));
        }
        let mut hval = None;
        if hv_len >= 0 {
            if p + hv_len as usize > end {
                return Err(RecErr::Overrun(String::new()));
            }
            hval = Some(span(p, p + hv_len as usize));
            p += hv_len as usize;
        }
        headers.push((hkey, hval));
    }
    let timestamp =
        if log_append { header.max_timestamp as i128 } else { header.base_timestamp as i128 + ts_delta as i128 };
    Ok((
        Rec {
            offset: header.base_offset as i128 + offset_delta as i128,
            timestamp,
            key,
            value,
            attributes,
            ts_delta,
            headers,
            control_type: None,
            api_key: None,
            version: None,
            decoded: None,
            error: None,
        },
        p,
    ))
}

fn control_key(rec: &mut Rec, buf: &[u8], position: i64, problems: &mut Vec<Prob>) {
    match rec.key {
        None => {
            rec.control_type = Some(-1);
            rec.error = Some("control record key is null; expected 4".into());
        }
        Some(k) if (k.1 - k.0) < 4 => {
            rec.control_type = Some(-1);
            rec.error = Some(format!("control record key is {} bytes; expected 4", k.1 - k.0));
        }
        Some(k) => {
            let kb = &buf[k.0 as usize..];
            let version = be_i16(kb, 0);
            rec.control_type = Some(be_i16(kb, 2) as i64);
            if version < 0 {
                rec.error = Some(format!("control record key has a negative version {}", version));
            }
        }
    }
    if let Some(e) = &rec.error {
        problems.push(prob(
            BAD_RECORD,
            e.clone(),
            position,
            Some(rec.offset),
            rec.key.map(|k| buf[k.0 as usize..k.1 as usize].to_vec()),
        ));
    }
}

fn decode_value(rec: &mut Rec, buf: &[u8], control: bool, schemas: &Schemas, position: i64, problems: &mut Vec<Prob>) {
    if rec.error.is_some() {
        return;
    }
    let value = rec.value.map(|v| &buf[v.0 as usize..v.1 as usize]);
    let result = match value {
        None => Err(crate::value::MsgError { kind: BAD_RECORD, message: "record value is null".into() }),
        Some(v) => {
            if control {
                schemas.decode_control(rec.control_type.unwrap_or(-1), v)
            } else {
                schemas.decode_metadata(v)
            }
        }
    };
    match result {
        Err(e) => {
            if !control {
                if let Some(v) = value {
                    if let Some((_, api_key, version)) = Schemas::peek_frame(v) {
                        rec.api_key = Some(api_key as i64);
                        rec.version = Some(version as i64);
                    }
                }
            }
            problems.push(prob(
                e.kind,
                format!("record at offset {}: {}", rec.offset, e.message),
                position,
                Some(rec.offset),
                value.map(|v| v.to_vec()),
            ));
            rec.error = Some(e.message);
        }
        Ok(d) => {
            if !control {
                rec.api_key = d.api_key;
            }
            rec.version = Some(d.version);
            let unknown = unknown_tags_by_path(schemas, &d);
            if !unknown.is_empty() {
                problems.push(prob(
                    UNKNOWN_TAGGED_FIELD,
                    format!(
                        "record at offset {} ({} v{}) has {}; the record is decoded and the unknown tags are kept raw",
                        rec.offset,
                        d.type_name,
                        d.version,
                        describe_unknown_tags(&unknown)
                    ),
                    position,
                    Some(rec.offset),
                    None,
                ));
            }
            rec.decoded = Some(d);
        }
    }
}

/// `message.unknown_tags_by_path`: "" for the top level, then nested structs by path, in dict order.
fn unknown_tags_by_path(schemas: &Schemas, d: &Decoded) -> Vec<(String, Vec<(u32, usize)>)> {
    let mut found = Vec::new();
    if d.marker.is_some() {
        return found;
    }
    if !d.data.unknown.is_empty() {
        found.push((String::new(), d.data.unknown.iter().map(|(t, r)| (*t, r.len())).collect()));
    }
    if d.nests {
        nested_unknown(schemas, &d.data, "", &mut found);
    }
    found
}

fn nested_unknown(schemas: &Schemas, sv: &StructVal, path: &str, found: &mut Vec<(String, Vec<(u32, usize)>)>) {
    if !path.is_empty() && !sv.unknown.is_empty() {
        found.push((path.to_string(), sv.unknown.iter().map(|(t, r)| (*t, r.len())).collect()));
    }
    for (fi, v) in sv.fields.iter().enumerate() {
        let v = match v {
            Some(v) => v,
            None => continue,
        };
        let name = &schemas.structs[sv.sid].fields[fi].json_name;
        let here = if path.is_empty() { name.clone() } else { format!("{}.{}", path, name) };
        nested_value(schemas, v, &here, found);
    }
}

fn nested_value(schemas: &Schemas, v: &Value, path: &str, found: &mut Vec<(String, Vec<(u32, usize)>)>) {
    match v {
        Value::Struct(s) => nested_unknown(schemas, s, path, found),
        Value::List(items) => {
            for (i, item) in items.iter().enumerate() {
                if let Value::Struct(_) | Value::List(_) = item {
                    nested_value(schemas, item, &format!("{}[{}]", path, i), found);
                }
            }
        }
        _ => {}
    }
}

fn describe_unknown_tags(unknown: &[(String, Vec<(u32, usize)>)]) -> String {
    let mut parts = Vec::new();
    for (path, tags) in unknown {
        let mut tags = tags.clone();
        tags.sort();
        let listed: Vec<String> =
            tags.iter().map(|(t, n)| format!("{} ({} byte{})", t, n, if *n == 1 { "" } else { "s" })).collect();
        let listed = listed.join(", ");
        parts.push(if path.is_empty() { listed } else { format!("in {}: {}", path, listed) });
    }
    format!("unknown tagged field(s) {}", parts.join("; "))
}

// ---- snapshot structure -----------------------------------------------------------------------------------------

/// `SnapshotStructure` (without `unprinted_ok`, which only dump-log text uses).
#[derive(Default)]
pub struct Structure {
    first: Option<(i64, i64, i128)>,            // seen: (position, base offset, last offset)
    last: Option<(i64, i64, i128, bool, bool)>, // (position, base, last offset, control, has footer)
    file_level: bool,
}

impl Structure {
    pub fn see(&mut self, item: &Item, source_problem: &mut Option<Prob>) {
        match item {
            Item::Problem(p) => {
                self.file_level = self.file_level || p.kind == NOT_A_METADATA_LOG || p.kind == UNREADABLE_FILE;
            }
            Item::Batch(b) => {
                let h = &b.header;
                let control = h.is_control();
                let footer = control && b.records.iter().any(|r| r.control_type == Some(4));
                self.last = Some((h.position, h.base_offset, h.last_offset(), control, footer));
                if self.first.is_some() {
                    return;
                }
                self.first = Some((h.position, h.base_offset, h.last_offset()));
                if control && b.records.first().map_or(false, |r| r.control_type == Some(3)) {
                    return;
                }
                let what = if !control {
                    "a data batch".to_string()
                } else if b.records.is_empty() {
                    "a control batch without records".to_string()
                } else {
                    let first = &b.records[0];
                    let name = first.decoded.as_ref().map(|d| d.type_name.clone()).unwrap_or_default();
                    format!(
                        "a control batch whose first record is {}",
                        if name.is_empty() { "not readable".to_string() } else { name }
                    )
                };
                *source_problem = Some(Prob {
                    kind: SNAPSHOT_NO_HEADER,
                    message: format!(
                        "the snapshot does not start with a SnapshotHeader: its first batch (offsets {}..{}) is {}",
                        h.base_offset,
                        h.last_offset(),
                        what
                    ),
                    position: Some(h.position),
                    offset: Some(h.base_offset as i128),
                    raw: None,
                });
            }
        }
    }

    pub fn finish(&self) -> Vec<Prob> {
        if self.file_level {
            return Vec::new();
        }
        let last = match self.last {
            None => {
                return [(SNAPSHOT_NO_HEADER, "SnapshotHeader"), (SNAPSHOT_NO_FOOTER, "SnapshotFooter")]
                    .iter()
                    .map(|(k, n)| Prob {
                        kind: k,
                        message: format!("the snapshot holds no batch, so no {}", n),
                        position: Some(0),
                        offset: Some(0),
                        raw: None,
                    })
                    .collect()
            }
            Some(l) => l,
        };
        let (position, base, last_offset, control, footer) = last;
        if control && footer {
            return Vec::new();
        }
        let what = if !control { "a data batch" } else { "a control batch without a SnapshotFooter" };
        vec![Prob {
            kind: SNAPSHOT_NO_FOOTER,
            message: format!(
                "the snapshot does not end with a SnapshotFooter, so it may be incomplete: its last batch (offsets {}..{}) \
                 is {}",
                base, last_offset, what
            ),
            position: Some(position),
            offset: Some(last_offset),
            raw: None,
        }]
    }
}
