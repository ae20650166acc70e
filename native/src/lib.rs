//! kraft_replay_native: a compiled decoder for Kafka v2 record batch files (KRaft `__cluster_metadata` segments,
//! snapshots, `bootstrap.checkpoint`), giving exactly what the pure-Python reference `replay/kafka/batch.py`
//! gives. Used through `replay/kafka/native.py`; `init` hands over the schema table and the model classes.

mod codec;
mod decode;
mod dumplog;
mod json;
mod pyout;
mod rows;
mod runs;
mod schema;
mod value;

use std::collections::VecDeque;

use pyo3::prelude::*;
use pyo3::sync::GILOnceCell;
use pyo3::types::{PyByteArray, PyBytes, PyString, PyType};

use decode::{Ctx, Fallback, Framer, Input, Item, RBatch, Raw, Source, Structure};
use pyout::{PyOut, SlotClass};
use schema::{ControlSchema, FieldDef, HashMap, HashSet, Kind, MetaSchema, Schemas, StructDef, Versions};

pub struct State {
    pub schemas: Schemas,
    pub out: PyOut,
    pub fallback: PyObject,
    pub acl_names: [HashMap<i64, String>; 4],
}

static STATE: GILOnceCell<State> = GILOnceCell::new();

pub fn state(py: Python<'_>) -> PyResult<&'static State> {
    STATE.get(py).ok_or_else(|| pyo3::exceptions::PyRuntimeError::new_err("kraft_replay_native.init was not called"))
}

type VersionsArg = (i64, Option<i64>);
type FieldArg =
    (String, String, String, bool, VersionsArg, VersionsArg, Option<u32>, VersionsArg, String, Option<usize>);

fn versions(v: VersionsArg) -> Versions {
    Versions { lo: v.0, hi: v.1 }
}

/// Hand over the schema table (`replay/kafka/schemas.py`, flattened by `native.py`), the model classes, the
/// `ProblemKind` members by value, the Python codec fallback and the ACL enum names by code.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
fn init(
    py: Python<'_>,
    structs: Vec<Vec<FieldArg>>,
    metadata: Vec<(i64, String, String, i64, Option<i64>, usize)>,
    control: Vec<(i64, String, usize)>,
    control_names: HashMap<i64, String>,
    classes: (Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>, Bound<'_, PyType>),
    kinds: HashMap<String, PyObject>,
    fallback: PyObject,
    acl_names: [HashMap<i64, String>; 4],
    java_double: PyObject,
) -> PyResult<()> {
    if STATE.get(py).is_some() {
        return Ok(());
    }
    let _ = json::JAVA_DOUBLE.set(py, java_double);
    let mut defs = Vec::new();
    for fields in &structs {
        let mut fs = Vec::new();
        for (name, json_name, kind, is_array, vers, nullable, tag, tagged, default, struct_id) in fields {
            let k = if struct_id.is_some() {
                Kind::Struct
            } else {
                Kind::parse(kind).ok_or_else(|| {
                    pyo3::exceptions::PyValueError::new_err(format!("unsupported type {} of {}", kind, name))
                })?
            };
            fs.push(FieldDef {
                name: name.clone(),
                json_name: json_name.clone(),
                kind: k,
                is_array: *is_array,
                versions: versions(*vers),
                nullable: versions(*nullable),
                tag: *tag,
                tagged: versions(*tagged),
                default: default.clone(),
                struct_id: *struct_id,
            });
        }
        defs.push(StructDef { fields: fs });
    }
    let mut meta = HashMap::default();
    let mut type_names = HashMap::default();
    for (api_key, name, type_name, lo, hi, sid) in metadata {
        type_names.insert(type_name.clone(), PyString::intern(py, &type_name).unbind());
        meta.insert(api_key, MetaSchema { name, type_name, valid: Versions { lo, hi }, struct_id: sid });
    }
    let mut ctl = HashMap::default();
    for (ct, name, sid) in control {
        ctl.insert(ct, ControlSchema { name, struct_id: sid });
    }
    for n in control_names.values() {
        type_names.insert(n.clone(), PyString::intern(py, n).unbind());
    }
    let field_names =
        structs.iter().map(|fs| fs.iter().map(|f| PyString::intern(py, &f.1).unbind()).collect()).collect();
    let (batch, header, record, problem) = classes;
    let out = PyOut {
        batch: SlotClass::new(&batch, &["header", "records", "source"])?,
        header: SlotClass::new(
            &header,
            &[
                "position",
                "base_offset",
                "batch_length",
                "partition_leader_epoch",
                "magic",
                "crc",
                "attributes",
                "last_offset_delta",
                "base_timestamp",
                "max_timestamp",
                "producer_id",
                "producer_epoch",
                "base_sequence",
                "records_count",
                "crc_ok",
            ],
        )?,
        record: SlotClass::new(
            &record,
            &[
                "offset",
                "timestamp",
                "key",
                "value",
                "attributes",
                "timestamp_delta",
                "headers",
                "control_type",
                "api_key",
                "version",
                "type_name",
                "data",
                "unknown_tags",
                "error",
            ],
        )?,
        problem: SlotClass::new(&problem, &["kind", "message", "file", "position", "offset", "raw", "line"])?,
        kinds,
        type_names,
        field_names,
        unknown_tags_key: PyString::intern(py, "_unknownTags").unbind(),
        version_key: PyString::intern(py, "version").unbind(),
        epoch_key: PyString::intern(py, "coordinatorEpoch").unbind(),
    };
    let schemas = Schemas::new(defs, meta, ctl, control_names);
    let _ = STATE.set(py, State { schemas, out, fallback, acl_names });
    Ok(())
}

/// A Python binary stream, read through its `read(n)`.
struct PyStream(PyObject);

impl Source for PyStream {
    fn read_into(&mut self, n: usize, out: &mut Vec<u8>) -> PyResult<usize> {
        Python::with_gil(|py| {
            let r = self.0.call_method1(py, "read", (n,))?;
            let r = r.bind(py);
            if r.is_none() {
                return Ok(0);
            }
            if let Ok(b) = r.downcast::<PyBytes>() {
                out.extend_from_slice(b.as_bytes());
                return Ok(b.as_bytes().len());
            }
            if let Ok(b) = r.downcast::<PyByteArray>() {
                let v = b.to_vec();
                out.extend_from_slice(&v);
                return Ok(v.len());
            }
            let b = py.get_type::<PyBytes>().call1((r,))?;
            let b = b.downcast::<PyBytes>()?.as_bytes();
            out.extend_from_slice(b);
            Ok(b.len())
        })
    }
}

/// The stream of decoded items of one file or stream: frames, decoded batches, problems, snapshot checks.
pub struct Engine {
    framer: Framer,
    raw: VecDeque<Raw>,
    items: VecDeque<Item>,
    structure: Option<Structure>,
    finished: bool,
    decode_values: bool,
    records_for: Option<HashSet<u64>>,
    decompressed_limit: usize,
}

impl Engine {
    fn new(
        stream: PyObject,
        source: &str,
        name_offset: Option<i128>,
        start_position: i64,
        max_batch_size: i64,
        resync_window: usize,
        decode_values: bool,
        snapshot: bool,
        records_for: Option<HashSet<u64>>,
        decompressed_limit: usize,
    ) -> Engine {
        let input = Input::new(Box::new(PyStream(stream)));
        Engine {
            framer: Framer::new(input, source.to_string(), start_position, max_batch_size, resync_window, name_offset),
            raw: VecDeque::new(),
            items: VecDeque::new(),
            structure: if snapshot { Some(Structure::default()) } else { None },
            finished: false,
            decode_values,
            records_for,
            decompressed_limit,
        }
    }

    /// The next item, or None at the end.
    pub fn next_item(&mut self, py: Python<'_>, st: &State) -> PyResult<Option<Item>> {
        loop {
            if let Some(item) = self.items.pop_front() {
                return Ok(Some(item));
            }
            if self.finished {
                return Ok(None);
            }
            if self.raw.is_empty() {
                self.framer.step(&mut self.raw)?;
            }
            let raw = match self.raw.pop_front() {
                Some(r) => r,
                None => {
                    if self.framer.done() {
                        if let Some(s) = &self.structure {
                            for p in s.finish() {
                                self.items.push_back(Item::Problem(p));
                            }
                        }
                        self.finished = true;
                    }
                    continue;
                }
            };
            let mut fresh = VecDeque::new();
            match raw {
                Raw::Problem(p) => fresh.push_back(Item::Problem(p)),
                Raw::Frame(position, data) => {
                    let fallback = &st.fallback;
                    let mut fb = |codec: i64, data: &[u8], limit: usize| -> PyResult<Fallback> {
                        let r = fallback.call1(py, (codec, PyBytes::new(py, data), limit))?;
                        let (outcome, v): (String, PyObject) = r.extract(py)?;
                        Ok(match outcome.as_str() {
                            "ok" => Fallback::Ok(v.bind(py).downcast::<PyBytes>()?.as_bytes().to_vec()),
                            "limit" => Fallback::Limit,
                            _ => Fallback::Bad(v.extract::<String>(py)?),
                        })
                    };
                    let mut ctx = Ctx {
                        schemas: &st.schemas,
                        decode_values: self.decode_values,
                        records_for: self.records_for.as_ref(),
                        decompressed_limit: self.decompressed_limit,
                        fallback: &mut fb,
                    };
                    decode::decode_batch(&data, position, &mut ctx, &mut fresh)?;
                }
            }
            for item in fresh {
                if let Some(s) = &mut self.structure {
                    let mut p = None;
                    s.see(&item, &mut p);
                    if let Some(p) = p {
                        self.items.push_back(Item::Problem(p));
                    }
                }
                self.items.push_back(item);
            }
        }
    }
}

/// Iterates `Batch` and `Problem` objects in file order, as `batch.read_batches` does; with `runs`, consecutive
/// batches that keep no record come out together as one `runs::Run` (columns of their header numbers).
#[pyclass(module = "kraft_replay_native")]
struct Decoder {
    engine: Engine,
    source: Py<PyString>,
    failed: bool,
    order: InOrder<runs::Runs>,
}

/// The api keys of `records_for` as the frame's unsigned numbers (a negative key names no record).
fn selection(records_for: Option<Vec<i64>>) -> Option<HashSet<u64>> {
    records_for.map(|keys| keys.into_iter().filter(|k| *k >= 0).map(|k| k as u64).collect())
}

#[pymethods]
impl Decoder {
    #[new]
    #[pyo3(signature = (stream, source, name_offset, start_position, max_batch_size, resync_window, decode_values, snapshot, records_for, decompressed_limit, runs))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        stream: PyObject,
        source: &str,
        name_offset: Option<i128>,
        start_position: i64,
        max_batch_size: i64,
        resync_window: usize,
        decode_values: bool,
        snapshot: bool,
        records_for: Option<Vec<i64>>,
        decompressed_limit: usize,
        runs: bool,
    ) -> PyResult<Decoder> {
        state(py)?;
        Ok(Decoder {
            engine: Engine::new(
                stream,
                source,
                name_offset,
                start_position,
                max_batch_size,
                resync_window,
                decode_values,
                snapshot,
                selection(records_for),
                decompressed_limit,
            ),
            source: PyString::new(py, source).unbind(),
            failed: false,
            order: InOrder::new(runs::Runs::new(runs)),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    /// A panic (a bug here) becomes a `RuntimeError`, which callers catch as they catch the reference's bugs (the
    /// ingest reports the file as unreadable from that point); the decoder then ends.
    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let (engine, source, order) = (&mut self.engine, &self.source, &mut self.order);
        next_in_order(py, engine, source, order, &mut self.failed)
    }
}

/// What a decoder gathers some batches into, to hand them to Python together (`runs::Runs`,
/// `dumplog::Printed`).
pub trait Gather {
    /// Take `b` (`Taken::Yes`, or `Taken::Out` with what is to be handed out now), or leave it to be handed out as
    /// a `Batch` (`Taken::No`). `after_problem`: the item before `b` was a problem.
    fn gather(&mut self, py: Python<'_>, st: &State, b: &RBatch, after_problem: bool) -> PyResult<Taken>;
    fn is_empty(&self) -> bool;
    /// What was gathered, as one Python object, and a fresh start.
    fn take(&mut self, py: Python<'_>) -> PyResult<PyObject>;
}

pub enum Taken {
    No,
    Yes,
    Out(PyObject),
}

/// A gatherer and what keeps its decoder's items in file order: the object that came after a gathered stretch
/// waits for the stretch to be handed out first.
struct InOrder<G: Gather> {
    gathered: G,
    waiting: Option<PyObject>,
    after_problem: bool,
}

impl<G: Gather> InOrder<G> {
    fn new(gathered: G) -> InOrder<G> {
        InOrder { gathered, waiting: None, after_problem: false }
    }
}

/// The next item of a decoder that gathers batches (`Gather`), in file order; a panic (a bug here) becomes a
/// `RuntimeError`, which callers catch as they catch the reference's bugs, and the decoder then ends.
fn next_in_order<G: Gather>(
    py: Python<'_>,
    engine: &mut Engine,
    source: &Py<PyString>,
    order: &mut InOrder<G>,
    failed: &mut bool,
) -> PyResult<Option<PyObject>> {
    if let Some(obj) = order.waiting.take() {
        return Ok(Some(obj));
    }
    if *failed {
        return Ok(None);
    }
    let st = state(py)?;
    guarded(failed, || loop {
        let item = match engine.next_item(py, st)? {
            None if !order.gathered.is_empty() => return Ok(Some(order.gathered.take(py)?)),
            None => return Ok(None),
            Some(item) => item,
        };
        if let Item::Batch(b) = &item {
            match order.gathered.gather(py, st, b, order.after_problem)? {
                Taken::No => {}
                Taken::Yes => continue,
                Taken::Out(obj) => {
                    order.after_problem = false;
                    return Ok(Some(obj));
                }
            }
        }
        order.after_problem = matches!(item, Item::Problem(_));
        let obj = item_object(py, st, item, source)?;
        if !order.gathered.is_empty() {
            order.waiting = Some(obj);
            return Ok(Some(order.gathered.take(py)?));
        }
        return Ok(Some(obj));
    })
}

fn item_object(py: Python<'_>, st: &State, item: Item, source: &Py<PyString>) -> PyResult<PyObject> {
    match item {
        Item::Problem(p) => st.out.problem(py, &p, source),
        Item::Batch(b) => st.out.batch(py, &b, source, &st.schemas),
    }
}

/// Runs one step of a decoder; a panic in it (a bug here) becomes a `RuntimeError` and marks the decoder failed.
fn guarded<T>(failed: &mut bool, step: impl FnOnce() -> PyResult<T>) -> PyResult<T> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(step)).unwrap_or_else(|panic| {
        *failed = true;
        let why = panic
            .downcast_ref::<&str>()
            .map(|s| s.to_string())
            .or_else(|| panic.downcast_ref::<String>().cloned())
            .unwrap_or_default();
        Err(pyo3::exceptions::PyRuntimeError::new_err(format!("kraft_replay_native failed: {}", why)))
    })
}

/// The ingest's decoder: like `Decoder`, but the records of batches it can render itself come out as row chunks,
/// `(rows, columns)` of Arrow buffers (`rows::RowBuilder`), of at most `max_rows` rows or about `max_bytes`; other
/// batches (one that may hold a secret, say) and problems come out as `Batch` and `Problem` objects, in file order
/// among themselves but as they come, not after the rows of earlier batches (so chunks stay full).
/// `secret_config` is `secrets.is_secret_config` (asked once per config name), or None to keep secrets.
/// `ordered`: everything in file order (the rows before an object come out first, in a smaller chunk).
#[pyclass(module = "kraft_replay_native")]
struct RowDecoder {
    engine: Engine,
    source: Py<PyString>,
    failed: bool,
    rows: rows::RowBuilder,
    max_rows: usize,
    max_bytes: usize,
    secrets: SecretConfigs,
    ordered: bool,
    waiting: Option<PyObject>,
}

#[pymethods]
impl RowDecoder {
    #[new]
    #[pyo3(signature = (stream, source, name_offset, start_position, max_batch_size, resync_window, snapshot, decompressed_limit, max_rows, max_bytes, secret_config, ordered))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        stream: PyObject,
        source: &str,
        name_offset: Option<i128>,
        start_position: i64,
        max_batch_size: i64,
        resync_window: usize,
        snapshot: bool,
        decompressed_limit: usize,
        max_rows: usize,
        max_bytes: usize,
        secret_config: Option<PyObject>,
        ordered: bool,
    ) -> PyResult<RowDecoder> {
        state(py)?;
        Ok(RowDecoder {
            engine: Engine::new(
                stream,
                source,
                name_offset,
                start_position,
                max_batch_size,
                resync_window,
                true,
                snapshot,
                None,
                decompressed_limit,
            ),
            source: PyString::new(py, source).unbind(),
            failed: false,
            rows: rows::RowBuilder::new(),
            max_rows,
            max_bytes,
            secrets: SecretConfigs::new(secret_config),
            ordered,
            waiting: None,
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        if let Some(obj) = self.waiting.take() {
            return Ok(Some(obj));
        }
        if self.failed {
            return Ok(None);
        }
        let st = state(py)?;
        let (engine, source, rows, waiting) = (&mut self.engine, &self.source, &mut self.rows, &mut self.waiting);
        let ordered = self.ordered;
        let (max_rows, max_bytes) = (self.max_rows, self.max_bytes);
        let secrets = &mut self.secrets;
        let mut secret = |name: &str| secrets.is_secret(py, name);
        guarded(&mut self.failed, || loop {
            let item = match engine.next_item(py, st)? {
                None if rows.rows > 0 => return Ok(Some(rows.take(py)?)),
                None => return Ok(None),
                Some(item) => item,
            };
            if let Item::Batch(b) = &item {
                if rows.add(b, st, &mut secret) {
                    if rows.rows >= max_rows || rows.bytes >= max_bytes {
                        return Ok(Some(rows.take(py)?));
                    }
                    continue;
                }
            }
            let obj = item_object(py, st, item, source)?;
            if ordered && rows.rows > 0 {
                *waiting = Some(obj);
                return Ok(Some(rows.take(py)?));
            }
            return Ok(Some(obj));
        })
    }
}

/// `secrets.is_secret_config`, asked once per config name; without it (secrets shown) nothing is secret.
pub struct SecretConfigs {
    asker: Option<PyObject>,
    known: HashMap<String, bool>,
}

impl SecretConfigs {
    fn new(asker: Option<PyObject>) -> SecretConfigs {
        SecretConfigs { asker, known: HashMap::default() }
    }

    pub fn is_secret(&mut self, py: Python<'_>, name: &str) -> bool {
        let Some(ask) = &self.asker else { return false };
        if let Some(answer) = self.known.get(name) {
            return *answer;
        }
        // an error asking counts as secret: Python then redacts it (or says why)
        let answer = ask.call1(py, (name,)).and_then(|r| r.extract::<bool>(py)).unwrap_or(true);
        self.known.insert(name.to_string(), answer);
        answer
    }
}

/// `inspect --format dump-log`'s decoder: like `Decoder`, but the batches `dumplog::render_batch` can print come
/// out as text, consecutive ones together (`dumplog::Chunk::take`: at most `max_bytes` of text), the others as
/// `Batch` and `Problem` objects, everything in file order. A batch right after a problem is a chunk of its own:
/// the renderer acts on a batch's problems once its lines are out.
#[pyclass(module = "kraft_replay_native")]
struct DumpLogDecoder {
    engine: Engine,
    source: Py<PyString>,
    failed: bool,
    order: InOrder<dumplog::Printed>,
}

#[pymethods]
impl DumpLogDecoder {
    #[new]
    #[pyo3(signature = (stream, source, name_offset, start_position, max_batch_size, resync_window, snapshot, decompressed_limit, max_bytes, secret_config, skip_record_metadata, bare_prefix, gap_from_minus_one, kafka_keys))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        stream: PyObject,
        source: &str,
        name_offset: Option<i128>,
        start_position: i64,
        max_batch_size: i64,
        resync_window: usize,
        snapshot: bool,
        decompressed_limit: usize,
        max_bytes: usize,
        secret_config: Option<PyObject>,
        skip_record_metadata: bool,
        bare_prefix: String,
        gap_from_minus_one: bool,
        kafka_keys: Vec<i64>,
    ) -> PyResult<DumpLogDecoder> {
        state(py)?;
        let show_secrets = secret_config.is_none();
        Ok(DumpLogDecoder {
            engine: Engine::new(
                stream,
                source,
                name_offset,
                start_position,
                max_batch_size,
                resync_window,
                true,
                snapshot,
                None,
                decompressed_limit,
            ),
            source: PyString::new(py, source).unbind(),
            failed: false,
            order: InOrder::new(dumplog::Printed::new(
                dumplog::Style {
                    skip_record_metadata,
                    bare_prefix,
                    gap_from_minus_one,
                    kafka_keys: kafka_keys.into_iter().collect(),
                    show_secrets,
                },
                max_bytes,
                SecretConfigs::new(secret_config),
            )),
        })
    }

    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }

    fn __next__(&mut self, py: Python<'_>) -> PyResult<Option<PyObject>> {
        let (engine, source, order) = (&mut self.engine, &self.source, &mut self.order);
        next_in_order(py, engine, source, order, &mut self.failed)
    }
}

/// `bytes.decode("utf-8", "replace")` as the payload JSON of `record_extras` does it (Rust's lossy decoding), for
/// tests.
#[pyfunction]
fn lossy_utf8(data: &[u8]) -> String {
    String::from_utf8_lossy(data).into_owned()
}

#[pymodule]
fn kraft_replay_native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    // the interface version `replay/kafka/native.py` checks: raise it whenever init's or Decoder's arguments change
    m.add("API", 10)?;
    m.add_function(wrap_pyfunction!(init, m)?)?;
    m.add_function(wrap_pyfunction!(lossy_utf8, m)?)?;
    m.add_function(wrap_pyfunction!(rows::record_extras, m)?)?;
    m.add_class::<Decoder>()?;
    m.add_class::<RowDecoder>()?;
    m.add_class::<DumpLogDecoder>()?;
    Ok(())
}
