"""Ingest: dumps of `__cluster_metadata` into the lake's `metadata_records` and `quarantine` tables.

    report = ingest(spark, ["/dumps/node1", "dbfs:/dumps/node2/dump.txt"], cluster="prod-a", lake="./lakehouse")

How it works:

1. **List** the inputs with Spark's `binaryFile` source, selecting only `path` and `length` (no file is read), so
   every filesystem Spark reads works: local paths, `file:`, `dbfs:`, `/Volumes/...`, `s3a://`, `abfss://`... The
   driver classifies the listed files by name the way `replay.kafka.files` does (segments, snapshots,
   `bootstrap.checkpoint`; indexes and state files ignored; other topics' partition directories skipped). Names it
   cannot place are sniffed on the executors (kafka-dump-log text starts with `Dumping `). Spark's listing skips
   "hidden" names (`_*`, `.*`) and so every `__cluster_metadata-0` directory: those are added as explicit roots
   (found with `os.walk` for local inputs, with a glob up to four levels deep for other filesystems). Other
   directories whose names start with `_` or `.` stay invisible; name them explicitly.
2. **Decode on the executors** with `mapInArrow`: each task opens its files itself and streams them batch by batch
   through `replay.kafka.batch.read_batches` (or `replay.kafka.dumplog` for dump-log text), yielding Arrow record
   batches of at most a few thousand rows. Local segment and snapshot files are decoded in pieces by parallel
   tasks when they are above `split_bytes` (64 MiB) or when fewer files than cores would leave cores idle (pieces of
   at least 4 MiB): a piece owns the batches that *start* in its byte range, found by walking
   the 12-byte batch headers from the start of the file, and the piece holding a break in that chain (a corrupt
   length, a truncated tail) reads on to the end of the file, so pieces give exactly the rows and problems the whole
   file gives. How a task opens a file:
   * local paths and `file:` URIs, `dbfs:/x` (through the `/dbfs/x` mount) and `dbfs:/Volumes/...` (through
     `/Volumes/...`) when those mounts exist: opened directly, streamed;
   * other URIs: through `fsspec` when it is installed and knows the scheme, else `pyarrow.fs` when it can open
     the URI from the driver (it must then also work from the executors: same credentials), streamed;
   * otherwise through Spark itself: a `binaryFile` read with `content` of just those files. Limits of that
     fallback: each file is loaded whole into one JVM byte array and one Arrow batch, so a file must be below
     2 GiB (`spark.sql.sources.binaryFile.maxLength`) and the executor needs memory for it (segments are 1 GiB
     at most by default, so they fit).
3. **Check** on the driver with aggregates only (row counts by kind, offset ranges, snapshot ids; nothing that grows
   with the log is collected). The decoded rows are persisted so files are decoded once (in memory and on disk;
   on local disk only when the input is over `CACHE_IN_MEMORY_BYTES`, so a large dump cannot fill the heap). In
   strict mode any problem raises `StrictIngestError` here, before anything is written.
4. **Write** one `MERGE` per table that inserts only rows the table does not hold yet: one Delta commit per table
   per ingest, with `userMetadata` JSON naming the cluster, the ingest id, the files and the offset range.
   `metadata_records` is written first, then `quarantine`; a side with no rows in this ingest is not written.
   The ingest runs in a session of its own (`spark.newSession()`: same context and cache, own SQL conf and temp
   views) because the userMetadata of a SQL MERGE is a session conf: ingests may run concurrently from threads of
   one application. A MERGE that loses a race with another ingest of the same cluster is retried (it is
   idempotent); ingests of different clusters write different `cluster_id` partitions and do not conflict.

Progress: while the executors decode, a bar on the driver shows bytes and files of the files *finished* (Spark
accumulators, which reach the driver when a task ends), so a single large file shows as one step; then one status
line per write. `progress=False` or `KRAFT_REPLAY_PROGRESS=0` silences it.

Identity (what makes re-ingesting idempotent): a record is `(cluster_id, stream, snapshot_end_offset,
snapshot_epoch, offset, content_hash, leader_epoch, crc_ok)` where `stream` is `log`, `snapshot` or `bootstrap` and
`content_hash` is the sha256 of offset, key and value; snapshot and bootstrap rows also carry their copy
(`source_file`, `text_section`), because a snapshot is judged whole, copy by copy. A snapshot copy whose records
equal those of a clean copy the lake already holds (the same snapshot in a later dump, on another node, or as
dump-log text) is not stored again; a copy with problems is always kept. The same log offset seen in two
dumps with the same bytes, epoch and CRC state is one row (the first seen keeps its file and position); anything
else at one offset is kept (the replay chooses by leader epoch, prefers a good CRC and a binary copy to dump-log
text, and reports real divergences); a later dump with more offsets adds only those. A quarantine row is `(cluster_id, content_hash)`
with the hash over the problem's kind, file name, position, offset and raw bytes (or message when there are none).

Re-ingesting what the lake already holds inserts nothing, and Delta then writes **no commit at all** (an insert-only
MERGE that inserts no row does not commit), so the table version and contents stay exactly as they were.

Atomicity: each table changes in one Delta commit or not at all; a process killed mid-ingest leaves at most
unreferenced data files, which readers never see (VACUUM removes them). The two tables are two commits: a crash
between them leaves `metadata_records` ahead of `quarantine`; rerunning the same ingest completes it.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import io
import json
import logging
import os
import posixpath
import re
import time
import uuid
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import IO, Any, BinaryIO, cast

from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)
from pyspark.sql.window import Window

from replay import progress as progress_ui
from replay.kafka import files as kfiles
from replay.kafka import native
from replay.kafka.acl import AclBinding
from replay.kafka.model import CONTROL_TYPES, NOTICE_KINDS, Batch, Problem, ProblemKind, SourceKind
from replay.spark.frames import join_null_safe
from replay.spark.resume import write_replacing
from replay.spark.session import step

from .tables import METADATA_RECORDS, QUARANTINE, SCHEMAS, Lake, sql_string

ACL_ENTRY_API_KEY = 18
ACL_REMOVE_API_KEY = 19
ROWS_PER_ARROW_BATCH = 2048
NATIVE_ROWS_PER_CHUNK = 8192  # rows the compiled decoder puts in one Arrow batch (it costs a fixed ~1 ms to wrap one)
BYTES_PER_ARROW_BATCH = 16 * 1024 * 1024
USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
MAX_NAMED_FILES = 200  # files named in a commit's userMetadata (the count is always there)

# The key of a metadata_records row (see the module docstring).
RECORD_KEY = ("cluster_id", "stream", "snapshot_end_offset", "snapshot_epoch", "offset", "content_hash",
              "leader_epoch", "crc_ok")
_NULLABLE_KEY = ("snapshot_end_offset", "snapshot_epoch", "leader_epoch", "crc_ok")
# Snapshot and bootstrap rows belong to one copy (a file, or a section of a dump-log text).
_COPY_KEY = ("source_file", "text_section")

log = logging.getLogger("replay.spark.ingest")

UNKNOWN_KIND = "unknown"  # a file whose name says nothing; the executor sniffs it

# What the executors produce: one wide row per record ("R"), per problem ("Q") and per file skipped after sniffing
# ("I"). Split into the two tables on the driver side of the plan.
_DECODED_FIELDS: list[tuple[str, DataType]] = [
    ("row_type", StringType()),
    ("source_file", StringType()),
    ("source_kind", StringType()),
    ("stream", StringType()),
    ("text_section", StringType()),
    ("snapshot_end_offset", LongType()),
    ("snapshot_epoch", IntegerType()),
    ("file_position", LongType()),
    ("batch_base_offset", LongType()),
    ("batch_last_offset", LongType()),
    ("offset", LongType()),
    ("record_index", IntegerType()),
    ("leader_epoch", IntegerType()),
    ("append_time", LongType()),
    ("record_timestamp", LongType()),
    ("codec", StringType()),
    ("crc_ok", BooleanType()),
    ("is_control", BooleanType()),
    ("control_type", StringType()),
    ("api_key", IntegerType()),
    ("record_version", IntegerType()),
    ("record_type", StringType()),
    ("payload_json", StringType()),
    ("acl_id", StringType()),
    ("resource_type", StringType()),
    ("resource_name", StringType()),
    ("pattern_type", StringType()),
    ("principal", StringType()),
    ("host", StringType()),
    ("operation", StringType()),
    ("permission_type", StringType()),
    ("raw_key", BinaryType()),
    ("raw_value", BinaryType()),
    ("decode_error", StringType()),
    ("content_hash", BinaryType()),
    ("kind", StringType()),
    ("message", StringType()),
    ("line", IntegerType()),
    ("raw", BinaryType()),
    ("file_length", LongType()),
]
DECODED_SCHEMA = StructType([StructField(n, t, True) for n, t in _DECODED_FIELDS])
_COLUMNS = [n for n, _ in _DECODED_FIELDS]
# A row travels as a tuple in `_COLUMNS` order (a dict per record cost more than decoding it); `_record_rows` builds
# record rows positionally, so it names the order it relies on here.
_FILE_FIELDS = ("source_file", "source_kind", "stream", "text_section", "snapshot_end_offset", "snapshot_epoch")
_ROW_FIELDS = ("row_type", *_FILE_FIELDS, "file_position", "batch_base_offset", "batch_last_offset", "offset",
               "record_index", "leader_epoch", "append_time", "record_timestamp", "codec", "crc_ok", "is_control",
               "control_type", "api_key", "record_version", "record_type", "payload_json", "acl_id",
               "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
               "permission_type", "raw_key", "raw_value", "decode_error", "content_hash", "kind", "message", "line",
               "raw", "file_length")
if list(_ROW_FIELDS) != _COLUMNS:
    raise AssertionError("_ROW_FIELDS must list _DECODED_FIELDS in order")
_SIZED = tuple(_COLUMNS.index(n) for n in ("raw_key", "raw_value", "raw", "payload_json"))
_NO_BINDING = (None,) * 7
_NO_PROBLEM = (None,) * 4


class IngestError(RuntimeError):
    """The ingest could not run (nothing to read, a path that does not exist, ...). Nothing was written."""


class StrictIngestError(IngestError):
    """Strict mode found problems in the input; nothing was written. `problems` lists the first few."""

    def __init__(self, message: str, counts: dict[str, int], problems: list[str]) -> None:
        super().__init__(message)
        self.counts = counts
        self.problems = problems


# ---- planning: which files, of which kind, opened how -----------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlannedFile:
    """One file to decode. `uri` is the path as Spark lists it; `open_with` says how an executor opens it."""

    uri: str
    length: int
    kind: str  # a SourceKind value, or "unknown" (sniffed on the executor)
    snapshot_end_offset: int | None = None
    snapshot_epoch: int | None = None
    explicit: bool = False  # named by the user (not found by walking a directory)
    open_with: str = "local"  # local | fsspec | pyarrow | spark
    local_path: str | None = None
    start: int = 0  # a piece of a large file: the batches that START in [start, end) (see decode_piece)
    end: int | None = None  # None: the whole file
    show_secrets: bool = False  # keep SCRAM credentials and password configs (`replay.kafka.secrets`)

    @property
    def name(self) -> str:
        return posixpath.basename(self.uri.rstrip("/"))

    @property
    def is_piece(self) -> bool:
        return self.end is not None

    @property
    def size(self) -> int:
        """Bytes this entry covers (for progress)."""
        return self.length if self.end is None else max(0, min(self.end, self.length) - self.start)


_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def _scheme(uri: str) -> str | None:
    m = _SCHEME_RE.match(uri)
    if m is None or (len(m.group(1)) == 1 and os.name == "nt"):  # C:\ on Windows
        return None
    return m.group(1).lower()


def local_path_of(uri: str) -> str | None:
    """The local filesystem path for a URI when this machine can open it directly, else None."""
    scheme = _scheme(uri)
    if scheme is None:
        return uri
    if scheme == "file":
        rest = uri[5:]
        if rest.startswith("//"):  # file://host/path or file:///path
            rest = rest[2:]
            rest = rest[rest.index("/"):] if "/" in rest else "/"
        return rest
    if scheme == "dbfs":
        rest = "/" + uri[5:].lstrip("/")
        if rest.startswith("/Volumes/") and os.path.isdir("/Volumes"):
            return rest
        if os.path.isdir("/dbfs"):
            return "/dbfs" + rest
    return None


@functools.lru_cache(maxsize=65536)
def _norm(uri: str) -> str:
    """A comparable form: the real path for local files, the URI without a trailing slash otherwise."""
    local = local_path_of(uri)
    return os.path.realpath(local) if local is not None else uri.rstrip("/")


def _input_roots(paths: Sequence[str]) -> list[str]:
    """Inputs as Spark should list them: local paths made absolute, URIs as given."""
    roots = []
    for p in paths:
        p = str(p)
        roots.append(os.path.abspath(os.path.expanduser(p)) if _scheme(p) is None else p)
    return roots


def classify_listing(
    roots: Sequence[str], listed: Iterable[tuple[str, int]]
) -> tuple[list[PlannedFile], list[str]]:
    """Classify listed files `(uri, length)` by name, as `replay.kafka.files.discover` does for local directories.

    Returns the files to decode (in replay order) and the ignored ones. Pure Python: no Spark, no file access.
    """
    listed = sorted(set(listed))
    uris = [u for u, _ in listed]
    root_dirs = {r.rstrip("/") for r in roots}
    names_by_dir: dict[str, set[str]] = {}
    for u in uris:
        d, n = posixpath.split(u)
        names_by_dir.setdefault(d, set()).add(n)
    subdirs_by_dir: dict[str, set[str]] = {}
    for d in list(names_by_dir):
        while True:
            parent, name = posixpath.split(d)
            if not name or parent == d:
                break
            subdirs_by_dir.setdefault(parent, set()).add(name)
            d = parent

    def other_partition_dir(d: str) -> bool:
        parent, name = posixpath.split(d)
        if name.startswith(kfiles.METADATA_PARTITION_DIR) or kfiles._PARTITION_DIR_RE.match(name) is None:
            return False
        if "partition.metadata" in names_by_dir.get(d, set()):
            return True
        return "meta.properties" in names_by_dir.get(parent, set()) or kfiles.METADATA_PARTITION_DIR in \
            subdirs_by_dir.get(parent, set())

    root_norms = {_norm(r) for r in root_dirs}

    def skipped_by_dir(uri: str) -> bool:
        d = posixpath.dirname(uri)
        while d and _norm(d) not in root_norms:
            if other_partition_dir(d):
                return True
            parent = posixpath.dirname(d)
            if parent == d:
                break
            d = parent
        return False

    planned: list[PlannedFile] = []
    ignored: list[str] = []
    for uri, length in listed:
        explicit = _norm(uri) in root_norms
        name = posixpath.basename(uri)
        if not explicit and (kfiles.is_ignored_name(name) or skipped_by_dir(uri)):
            ignored.append(uri)
            continue
        source = kfiles.classify_name(uri)
        if source is None:
            if kfiles.is_ignored_name(name) and not explicit:
                ignored.append(uri)
                continue
            planned.append(PlannedFile(uri, int(length), UNKNOWN_KIND, explicit=explicit))
        else:
            planned.append(PlannedFile(uri, int(length), source.kind.value, source.snapshot_end_offset,
                                       source.snapshot_epoch, explicit))
    order = {SourceKind.BOOTSTRAP.value: 0, SourceKind.SNAPSHOT.value: 1, SourceKind.SEGMENT.value: 2}
    planned.sort(key=lambda f: (order.get(f.kind, 3), f.snapshot_end_offset or 0, f.snapshot_epoch or 0, f.name,
                                f.uri))
    return planned, ignored


def _choose_opener(uri: str, probes: dict[str, str]) -> tuple[str, str | None]:
    """How executors will open `uri`: ("local", path) | ("fsspec", None) | ("pyarrow", None) | ("spark", None)."""
    local = local_path_of(uri)
    if local is not None:
        return "local", local
    scheme = _scheme(uri) or ""
    if scheme not in probes:
        probes[scheme] = _probe(uri)
    return probes[scheme], None


def _probe(uri: str) -> str:
    try:
        import fsspec

        with fsspec.open(uri, "rb") as f:
            f.read(1)
        return "fsspec"
    except Exception:
        pass
    try:
        from pyarrow import fs as pafs

        filesystem, path = pafs.FileSystem.from_uri(uri)
        with filesystem.open_input_stream(path) as f:
            f.read(1)
        return "pyarrow"
    except Exception:
        return "spark"


# Spark's file listing skips names that start with "_" or "." (Hadoop "hidden" files), and with them every
# `__cluster_metadata-0` directory found while walking. They are added as explicit roots: found with os.walk for local
# inputs, and through this glob (up to four directory levels below the input) for other filesystems.
METADATA_DIR_GLOB = "{,*/,*/*/,*/*/*/,*/*/*/*/}" + kfiles.METADATA_PARTITION_DIR.rsplit("-", 1)[0] + "-*"


def _listing(spark: SparkSession, paths: list[str]) -> list[tuple[str, int]]:
    df = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(paths).select("path", "length")
    return [(str(r["path"]), int(r["length"])) for r in df.collect()]  # one small row per file, not the log


def _hidden_metadata_dirs(local_dir: str) -> list[str]:
    found = []
    for dirpath, dirnames, _files in os.walk(local_dir):
        for d in dirnames:
            if d.startswith(kfiles.METADATA_PARTITION_DIR.rsplit("-", 1)[0]):
                found.append(os.path.join(dirpath, d))
    return sorted(found)


def list_inputs(spark: SparkSession, roots: Sequence[str]) -> list[tuple[str, int]]:
    """Every file under `roots` as `(uri, length)`, listed by Spark's binaryFile source without reading content."""
    out: list[tuple[str, int]] = []
    for root in roots:
        local = local_path_of(root)
        if local is not None and not os.path.exists(local) and _scheme(root) is None:
            local = None  # not on this machine: Spark resolves it on its default filesystem (DBFS, HDFS, ...)
        if local is not None:
            if not os.path.exists(local):
                raise IngestError(f"{root} does not exist")
            extra = _hidden_metadata_dirs(local) if os.path.isdir(local) else []
            try:
                out += _listing(spark, [root, *extra])
            except Exception as e:
                raise IngestError(f"cannot list {root}: {_first_line(e)}") from e
            continue
        try:  # two paths: Spark then skips its metadata-directory probe (a stack trace in the log for globs)
            out += _listing(spark, [root, root.rstrip("/") + "/" + METADATA_DIR_GLOB])
        except Exception:
            try:
                out += _listing(spark, [root])
            except Exception as e:
                if _scheme(root) is None:
                    raise IngestError(f"{root} does not exist (neither here nor on Spark's default filesystem)"
                                      ) from e
                raise IngestError(f"cannot list {root}: {_first_line(e)}") from e
    return out


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def plan_files(spark: SparkSession, paths: Sequence[str]) -> tuple[list[PlannedFile], list[str]]:
    """List `paths` with Spark (names and sizes only) and decide each file's kind and how executors open it."""
    roots = _input_roots(paths)
    planned, ignored = classify_listing(roots, list_inputs(spark, roots))
    probes: dict[str, str] = {}
    out = []
    for f in planned:
        how, local = _choose_opener(f.uri, probes)
        out.append(PlannedFile(f.uri, f.length, f.kind, f.snapshot_end_offset, f.snapshot_epoch, f.explicit, how,
                               local))
    return out, ignored


# ---- decoding (runs on the executors) ---------------------------------------------------------------------------


def _part(data: bytes | None) -> bytes:
    return b"\xff\xff\xff\xff" if data is None else len(data).to_bytes(4, "big") + data


IDENTITY_BYTES = 16  # 128 bits of sha256: no collision among billions of rows, a quarter of the hex text


def record_hash(offset: int, key: bytes | None, value: bytes | None) -> bytes:
    """A record's identity: sha256 of its offset, key and value, cut to 16 bytes; equal at one offset means the same
    record."""
    h = hashlib.sha256(b"kraft-record\x00")
    h.update(int(offset).to_bytes(8, "big", signed=True))
    h.update(_part(key))
    h.update(_part(value))
    return h.digest()[:IDENTITY_BYTES]


def problem_hash(kind: str, file_name: str, position: int | None, offset: int | None, raw: bytes | None,
                 message: str) -> bytes:
    """The identity of one quarantined finding, sha256 cut to 16 bytes (the same bad bytes of the same file are one
    row)."""
    h = hashlib.sha256(b"kraft-problem\x00")
    for text in (kind, file_name, "" if position is None else str(position), "" if offset is None else str(offset)):
        h.update(_part(text.encode()))
    h.update(_part(raw) if raw is not None else b"M" + _part(message.encode()))
    return h.digest()[:IDENTITY_BYTES]


def _json_default(value: Any) -> Any:
    if isinstance(value, bytes):
        import base64

        return base64.b64encode(value).decode()
    return str(value)


def _payload_json(record: Any) -> str | None:
    if record.data is None or record.type_name is None:
        return None
    try:
        from replay.kafka import kafkajson

        if record.is_control and hasattr(kafkajson, "control_json"):
            return str(kafkajson.control_json(record.type_name, record.data))
        if not record.is_control and record.version is not None:
            return str(kafkajson.payload_json(record.type_name, record.version, record.data))
    except ImportError:
        pass
    except Exception:  # a payload our JSON writer cannot print: fall back to a plain dump
        pass
    return json.dumps({"type": record.type_name, "version": record.version, "data": record.data},
                      default=_json_default)


class _RowBuffer:
    """Rows collected column by column and flushed as Arrow record batches of bounded size."""

    def __init__(self) -> None:
        import pyarrow as pa

        self._pa = pa
        self._schema = _arrow_schema()
        self._reset()

    def _reset(self) -> None:
        self.pending: list[tuple[Any, ...]] = []
        self.bytes = 0

    @property
    def rows(self) -> int:
        return len(self.pending)

    def add(self, row: tuple[Any, ...]) -> None:
        self.pending.append(row)
        for i in _SIZED:
            v = row[i]
            if v is not None:
                self.bytes += len(v)

    @property
    def full(self) -> bool:
        return len(self.pending) >= ROWS_PER_ARROW_BATCH or self.bytes >= BYTES_PER_ARROW_BATCH

    def flush(self) -> Any:
        pa = self._pa
        columns = list(zip(*self.pending, strict=True))
        arrays = [pa.array(columns[i], type=f.type) for i, f in enumerate(self._schema)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._reset()
        return batch


@functools.lru_cache(maxsize=256)
def _constant(value: Any, arrow_type: Any, rows: int) -> Any:
    """A column of `rows` times `value` (arrays are immutable: a file's full chunks share them)."""
    import pyarrow as pa

    return pa.nulls(rows, arrow_type) if value is None else pa.repeat(pa.scalar(value, arrow_type), rows)


def _chunk_batch(chunk: native.RowChunk, ends: tuple[tuple[Any, ...], tuple[Any, ...]]) -> Any:
    """The Arrow record batch of `DECODED_SCHEMA` of a compiled decoder's row chunk: its columns wrap the chunk's
    buffers (no copy); the columns the same for the whole file (`_file_ends`) are repeated."""
    import pyarrow as pa

    head, tail = ends
    same = {**dict(zip(("row_type", *_FILE_FIELDS), head, strict=True)),
            **dict(zip(("kind", "message", "line", "raw", "file_length"), tail, strict=True))}
    made = dict(zip(native.ROW_COLUMNS, chunk.columns, strict=True))
    arrays = []
    for f in _arrow_schema():
        if f.name in made:
            valid, values, offsets = made[f.name]
            buffers = [None if valid is None else pa.py_buffer(valid)]
            if offsets is not None:
                buffers.append(pa.py_buffer(offsets))
            buffers.append(pa.py_buffer(values))
            arrays.append(pa.Array.from_buffers(f.type, chunk.rows, buffers, 0 if valid is None else -1))
        else:
            arrays.append(_constant(same[f.name], f.type, chunk.rows))
    return pa.RecordBatch.from_arrays(arrays, schema=_arrow_schema())


@functools.cache
def _arrow_schema() -> Any:
    import pyarrow as pa

    return pa.schema([(n, _arrow_type(t)) for n, t in _DECODED_FIELDS])


def _arrow_type(t: DataType) -> Any:
    import pyarrow as pa

    return {
        StringType: pa.string(),
        LongType: pa.int64(),
        IntegerType: pa.int32(),
        BooleanType: pa.bool_(),
        BinaryType: pa.binary(),
    }[type(t)]


def _as_tuple(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(map(row.get, _COLUMNS))


def _file_ends(base: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The first and last columns of a file's record rows (the same for all of them)."""
    return ("R", *map(base.get, _FILE_FIELDS)), (*_NO_PROBLEM, base.get("file_length"))


def _record_rows(batch: Batch, ends: tuple[tuple[Any, ...], tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
    h = batch.header
    file_head, tail = ends
    head = (*file_head, h.position, h.base_offset, h.last_offset)
    epoch, append_time, codec, crc_ok = h.partition_leader_epoch, batch.append_time, h.codec_name, h.crc_ok
    extras = native.record_extras(batch.records)  # payload JSON and hash from the compiled decoder, where in use
    for index, rec in enumerate(batch.records):
        payload, digest = extras[index] if extras is not None else (None, None)
        acl_id: str | None = None
        binding: tuple[Any, ...] = _NO_BINDING
        if not rec.is_control and rec.data is not None and rec.api_key in (ACL_ENTRY_API_KEY, ACL_REMOVE_API_KEY):
            acl_id = str(rec.data.get("id"))
            if rec.api_key == ACL_ENTRY_API_KEY:
                try:
                    b = AclBinding.from_record_data(rec.data)
                    binding = (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                               b.permission_type)
                except (KeyError, TypeError, ValueError):
                    pass
        yield (*head, rec.offset, index, epoch, append_time, rec.timestamp, codec, crc_ok, rec.is_control,
               CONTROL_TYPES.get(rec.control_type, "UNKNOWN") if rec.control_type is not None else None,
               _int32_or_none(rec.api_key), _int32_or_none(rec.version), rec.type_name,
               payload if payload is not None else _payload_json(rec), acl_id, *binding, rec.key, rec.value,
               rec.error, digest if digest is not None else record_hash(rec.offset, rec.key, rec.value), *tail)


_INT64 = range(-(2**63), 2**63)
_INT32 = range(-(2**31), 2**31)


def _int32_or_none(value: int | None) -> int | None:
    """An api key or version for the int32 columns: one past that range (read from a damaged frame's unsigned
    varint) is None there; the decoder reported the record (`unknown_api_key`, `unknown_version`)."""
    return value if value is None or value in _INT32 else None


def _outside_int64(batch: Batch) -> Problem | None:
    """A problem when an offset or timestamp of the batch does not fit the lake's 64-bit columns (a damaged delta
    near the end of the range; Kafka's own arithmetic would wrap around): the batch is reported, not stored."""
    h = batch.header
    bad = [(r.offset, r.timestamp) for r in batch.records if r.offset not in _INT64 or r.timestamp not in _INT64]
    if h.last_offset in _INT64 and not bad:
        return None
    what = f"record offset {bad[0][0]}, timestamp {bad[0][1]}" if bad else f"last offset {h.last_offset}"
    return Problem(ProblemKind.BAD_RECORD,
                   f"the batch at byte {h.position} (base offset {h.base_offset}) runs past the 64-bit range of "
                   f"offsets and timestamps ({what}); its {len(batch.records)} record(s) are not stored",
                   batch.source, h.position, h.base_offset)


def _problem_row(p: Problem, base: dict[str, Any], file_name: str) -> dict[str, Any]:
    row = dict(base)
    if p.offset is not None and p.offset not in _INT64:  # a damaged delta: the offset is in the message
        p = dataclasses.replace(p, offset=None, message=f"{p.message} (at offset {p.offset}, outside the 64-bit "
                                "range of offsets)")
    section = p.file if p.file and p.file != base["source_file"] and base["source_kind"] == "dump_log_text" else None
    row.update(
        row_type="Q",
        text_section=section or base.get("text_section"),
        file_position=p.position,
        offset=p.offset,
        kind=p.kind.value,
        message=p.message,
        line=p.line,
        raw=p.raw,
        content_hash=problem_hash(p.kind.value, file_name, p.position, p.offset, p.raw, p.message),
    )
    return row


def _stream_of(kind: str) -> str:
    return {"snapshot": "snapshot", "bootstrap": "bootstrap"}.get(kind, "log")


def decode_file(entry: PlannedFile, stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The rows of one file (records, problems, or one "I" row when a sniffed file is not a metadata file), as
    dicts by column name."""
    for row in decode_rows(entry, stream, ordered=True):
        if isinstance(row, tuple):
            yield dict(zip(_COLUMNS, row, strict=True))
        else:
            yield from row.to_pylist()


def decode_rows(entry: PlannedFile, stream: IO[bytes], ordered: bool = False) -> Iterator[Any]:
    """The rows of one file as `decode_file` says, each a tuple in `DECODED_SCHEMA`'s column order, or, where the
    compiled decoder made them, many at once as an Arrow record batch of `DECODED_SCHEMA` (`_chunk_batch`): those
    come in file order with the others only when `ordered` (the table does not need it, and full chunks are
    cheaper)."""

    kind = entry.kind
    base: dict[str, Any] = {"source_file": entry.uri, "file_length": entry.length}
    if kind == UNKNOWN_KIND:
        head = stream.read(64)
        rest = stream
        if head.lstrip(b"\xef\xbb\xbf").startswith(kfiles.DUMP_LOG_TEXT_PREFIX):
            kind = SourceKind.DUMP_LOG_TEXT.value
        elif entry.explicit:
            kind = SourceKind.SEGMENT.value  # named by the user: the reader says what it is
        else:
            yield _as_tuple({**base, "row_type": "I", "source_kind": UNKNOWN_KIND})
            return
        stream = cast(IO[bytes], io.BufferedReader(_Prefixed(head, rest), buffer_size=1024 * 1024))
    base["source_kind"] = kind
    if kind == SourceKind.DUMP_LOG_TEXT.value:
        yield from _decode_text(entry, stream, base)
        return
    base.update(stream=_stream_of(kind), snapshot_end_offset=entry.snapshot_end_offset,
                snapshot_epoch=entry.snapshot_epoch)
    if entry.is_piece:
        items = decode_piece(cast(BinaryIO, stream), entry, ordered)
    else:
        # a whole snapshot is checked for its header and footer here; a split one by the replay, from its rows
        items = _batch_items(cast(BinaryIO, stream), entry, ordered=ordered,
                             snapshot=kind in (SourceKind.SNAPSHOT.value, SourceKind.BOOTSTRAP.value))
    position: int | None = entry.start
    ends = _file_ends(base)
    try:
        for item in items:
            if isinstance(item, Problem):
                yield _as_tuple(_problem_row(item, base, entry.name))
            elif isinstance(item, native.RowChunk):
                position = int.from_bytes(item.columns[0][1][-8:], "little", signed=True)
                yield _chunk_batch(item, ends)
            else:
                position = item.header.position
                outside = _outside_int64(item)
                if outside is None:
                    yield from _record_rows(item, ends)
                else:
                    yield _as_tuple(_problem_row(outside, base, entry.name))
    except Exception as e:  # a decoder bug must not sink the whole ingest: the file is reported, not skipped
        p = Problem(ProblemKind.UNREADABLE_FILE,
                    f"the decoder failed after byte {position} ({type(e).__name__}: {e}); the rest of this file "
                    "is not decoded. This is a bug in kraft-acl-replay: please report it with the file",
                    entry.uri, position)
        yield _as_tuple(_problem_row(p, base, entry.name))


class _Limited(io.RawIOBase):
    """The next `limit` bytes of a stream, then end of stream."""

    def __init__(self, stream: BinaryIO, limit: int) -> None:
        self._stream = stream
        self._left = limit

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._left <= 0:
            return 0
        data = self._stream.read(min(len(b), self._left))
        n = len(data)
        b[:n] = data
        self._left -= n
        return n


def piece_bounds(stream: BinaryIO, start: int, end: int, length: int) -> tuple[int, int] | None:
    """Where the piece [start, end) of a batch file begins and ends: `(a, b)` with `a` the first batch position
    >= start and `b` the first batch position >= end (the file's length when the chain of batch lengths breaks or the
    file ends first, so that the piece holding the break reads it and reports it as the whole-file decoder would).
    None when no batch starts in the piece. Walks batch headers only (12 bytes each)."""
    from replay.kafka import batch as batch_reader

    def step(pos: int) -> int | None:
        """The next batch position after the one at `pos`, or None where the chain of lengths breaks."""
        stream.seek(pos)
        head = stream.read(batch_reader.LOG_OVERHEAD)
        if len(head) < batch_reader.LOG_OVERHEAD:
            return None
        batch_length = int.from_bytes(head[8:12], "big", signed=True)
        size = batch_length + batch_reader.LOG_OVERHEAD
        if batch_length < batch_reader.MIN_BATCH_LENGTH or size > batch_reader.DEFAULT_MAX_BATCH_SIZE:
            return None
        if pos + size > length:
            return None
        return pos + size

    if start > 0:
        stream.seek(0)  # a file whose first batch is not a batch at all is decoded (and reported) by piece 0 alone
        first = next(iter(batch_reader.iter_batch_frames(io.BytesIO(stream.read(128)), "")), None)
        if isinstance(first, Problem) and first.kind == ProblemKind.NOT_A_METADATA_LOG:
            return None
    pos: int | None = 0
    while pos is not None and pos < start:
        pos = step(pos)
    if pos is None or pos >= end or pos >= length:
        return None
    a = pos
    while pos is not None and pos < end and pos < length:
        pos = step(pos)
    return a, (length if pos is None else min(pos, length))


def _batch_items(stream: BinaryIO, entry: PlannedFile, *, start_position: int = 0, snapshot: bool = False,
                 ordered: bool = False) -> Iterator[Batch | Problem | native.RowChunk]:
    """A file's (or piece's) batches and problems; through the compiled decoder most batches come as row chunks
    already (`batch.read_rows`)."""
    from replay.kafka import batch as batch_reader

    if native.enabled():
        return batch_reader.read_rows(stream, entry.uri, start_position=start_position, snapshot=snapshot,
                                      show_secrets=entry.show_secrets, max_rows=NATIVE_ROWS_PER_CHUNK,
                                      max_bytes=BYTES_PER_ARROW_BATCH, ordered=ordered)
    return batch_reader.read_batches(stream, entry.uri, start_position=start_position, snapshot=snapshot,
                                     show_secrets=entry.show_secrets)


def decode_piece(stream: BinaryIO, entry: PlannedFile,
                 ordered: bool = False) -> Iterator[Batch | Problem | native.RowChunk]:
    """The batches (and problems) of one piece of a large file, as `read_batches` gives them for the whole file."""

    assert entry.end is not None
    bounds = piece_bounds(stream, entry.start, entry.end, entry.length)
    if bounds is None:
        return
    a, b = bounds
    stream.seek(a)
    limited = cast(BinaryIO, io.BufferedReader(_Limited(stream, b - a), buffer_size=1024 * 1024))
    yield from _batch_items(limited, entry, start_position=a, ordered=ordered)


def _splittable(f: PlannedFile) -> bool:
    """A local binary segment or snapshot: one a task can seek in and start reading at a batch boundary."""
    return f.open_with == "local" and f.kind in (SourceKind.SEGMENT.value, SourceKind.SNAPSHOT.value)


def split_plan(plan: list[PlannedFile], split_bytes: int) -> list[PlannedFile]:
    """Large local segment and snapshot files as pieces of about `split_bytes`, so one file uses many cores."""
    if split_bytes <= 0:
        return list(plan)
    out: list[PlannedFile] = []
    for f in plan:
        if not _splittable(f) or f.length <= split_bytes:
            out.append(f)
            continue
        for start in range(0, f.length, split_bytes):
            out.append(dataclasses.replace(f, start=start, end=min(start + split_bytes, f.length)))
    return out


def _decode_text(entry: PlannedFile, stream: IO[bytes], base: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
    from replay.kafka import dumplog

    text = io.TextIOWrapper(stream, encoding="utf-8", errors="replace", newline="")
    reader = dumplog.DumpTextReader(entry.uri, entry.show_secrets)
    for item in reader.read(text):
        section = reader.section  # the section the item belongs to (read before the next one opens)
        here = dict(base)
        if section is not None:
            here["text_section"] = section.path
            if section.kind == "snapshot" or section.snapshot_end_offset is not None:
                here.update(stream="snapshot", snapshot_end_offset=section.snapshot_end_offset,
                            snapshot_epoch=section.snapshot_epoch)
            elif section.kind == "bootstrap" or section.name == kfiles.BOOTSTRAP_NAME:
                here["stream"] = "bootstrap"
            else:
                here["stream"] = "log"
        if isinstance(item, Problem):
            yield _as_tuple(_problem_row(item, here, entry.name))
        else:
            yield from _record_rows(item, _file_ends(here))


class _Prefixed(io.RawIOBase):
    """A stream with some bytes already read from it put back in front."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n] = self._head[:n]
            self._head = self._head[n:]
            return n
        data = self._rest.read(len(b))
        n = len(data)
        b[:n] = data
        return n


def _open(entry: PlannedFile) -> IO[bytes]:
    if entry.open_with == "local":
        return open(entry.local_path or entry.uri, "rb", buffering=1024 * 1024)
    if entry.open_with == "fsspec":
        import fsspec

        remote: IO[bytes] = fsspec.open(entry.uri, "rb").open()
        return remote
    if entry.open_with == "pyarrow":
        from pyarrow import fs as pafs

        filesystem, path = pafs.FileSystem.from_uri(entry.uri)
        stream: IO[bytes] = filesystem.open_input_stream(path)
        return stream
    raise ValueError(f"{entry.uri}: no way to open it on an executor ({entry.open_with})")


def _unreadable(entry: PlannedFile, error: Exception) -> dict[str, Any]:
    p = Problem(
ProblemKind.UNREADABLE_FILE, f"cannot open: {error}", entry.uri)
    base = {"source_file": entry.uri, "source_kind": entry.kind, "file_length": entry.length,
            "stream": _stream_of(entry.kind)}
    return _problem_row(p, base, entry.name)


def _emit(rows: Iterable[Any], buf: _RowBuffer) -> Iterator[Any]:
    """Arrow record batches of the rows: tuples are collected into batches, batches the compiled decoder made pass
    through (the rows are a set: their order within a file does not matter)."""
    for row in rows:
        if isinstance(row, tuple):
            buf.add(row)
            if buf.full:
                yield buf.flush()
        else:
            yield row


def make_stream_decoder(plan: list[PlannedFile], partitions: int, counters: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files executors open themselves: partition i decodes files i, i+P, i+2P..."""

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        buf = _RowBuffer()
        for arrow_batch in batches:
            for part in arrow_batch.column("id").to_pylist():
                for index in range(int(part), len(plan), partitions):
                    entry = plan[index]
                    try:
                        stream = _open(entry)
                    except Exception as e:
                        yield from _emit([_as_tuple(_unreadable(entry, e))], buf)
                    else:
                        try:
                            yield from _emit(decode_rows(entry, stream), buf)
                        finally:
                            stream.close()
                    if counters is not None:
                        counters[0].add(1)
                        counters[1].add(entry.size)
        if buf.rows:
            yield buf.flush()

    return decode


def make_content_decoder(plan: dict[str, PlannedFile], counters: Any) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files Spark read for us (`binaryFile` rows with `path` and `content`)."""

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        import pyarrow as pa

        buf = _RowBuffer()
        for arrow_batch in batches:
            paths = arrow_batch.column("path").to_pylist()
            contents = arrow_batch.column("content")
            for i, path in enumerate(paths):
                entry = plan[path]
                data = contents[i].as_buffer()  # zero-copy: the file is not copied into a Python bytes again
                reader = pa.BufferReader(data) if data is not None else io.BytesIO(b"")
                yield from _emit(decode_rows(entry, cast(IO[bytes], reader)), buf)
                if counters is not None:
                    counters[0].add(1)
                    counters[1].add(entry.length)
                del data
        if buf.rows:
            yield buf.flush()

    return decode


DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
MIN_SPLIT_BYTES = 4 * 1024 * 1024


def split_for_cores(plan: list[PlannedFile], split_bytes: int, cores: int) -> int:
    """The piece size that keeps `cores` tasks busy: at most `split_bytes`, and smaller when the splittable bytes
    would otherwise leave cores idle (one 20 MiB segment on 2 cores: two 10 MiB pieces), never below
    `MIN_SPLIT_BYTES` (a piece costs a walk over the batch headers before it and a task)."""
    if split_bytes <= 0:
        return split_bytes
    splittable = sum(f.length for f in plan if _splittable(f))
    per_core = -(-splittable // max(cores, 1))
    return min(split_bytes, max(MIN_SPLIT_BYTES, per_core))


def decode_plan(spark: SparkSession, plan: list[PlannedFile], counters: Any = None) -> DataFrame:
    """A DataFrame of `DECODED_SCHEMA` rows for the planned entries (files or pieces); nothing runs until an action."""
    direct = sorted((f for f in plan if f.open_with != "spark"), key=lambda f: -f.size)  # big ones start first
    via_spark = {f.uri: f for f in plan if f.open_with == "spark"}
    frames: list[DataFrame] = []
    if direct:
        partitions = min(len(direct), 4096)
        frames.append(
            spark.range(0, partitions, 1, partitions).mapInArrow(
                make_stream_decoder(direct, partitions, counters), DECODED_SCHEMA
            )
        )
    if via_spark:
        content = spark.read.format("binaryFile").load(list(via_spark)).select("path", "content")
        frames.append(content.mapInArrow(make_content_decoder(via_spark, counters), DECODED_SCHEMA))
    if not frames:
        return spark.createDataFrame([], DECODED_SCHEMA)
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


# ---- the report -------------------------------------------------------------------------------------------------


@dataclass
class IngestReport:
    """What one ingest read and wrote. Counts are rows; `*_new` are the rows the tables did not hold before."""

    ingest_id: str
    cluster_id: str
    lake: str
    strict: bool
    files: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    bytes: int = 0
    records: int = 0
    records_new: int = 0
    problems: int = 0
    problems_new: int = 0
    problems_by_kind: dict[str, int] = field(default_factory=dict)
    records_by_stream: dict[str, int] = field(default_factory=dict)
    log_offsets: tuple[int, int] | None = None
    snapshots: list[tuple[int, int]] = field(default_factory=list)
    versions: dict[str, int | None] = field(default_factory=dict)
    committed: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        span = f"log offsets {self.log_offsets[0]}..{self.log_offsets[1]}" if self.log_offsets else "no log records"
        out = [
            f"ingest {self.ingest_id} of cluster {self.cluster_id!r} into {self.lake}: {len(self.files)} file(s), "
            f"{self.bytes:,} bytes, {self.seconds:.1f} s",
            f"  records: {self.records:,} decoded, {self.records_new:,} new ({span}; "
            f"{len(self.snapshots)} snapshot(s))",
        ]
        if self.problems:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.problems_by_kind.items()))
            out.append(f"  problems: {self.problems:,} ({kinds}), {self.problems_new:,} new in quarantine")
        else:
            out.append("  problems: none")
        for table, version in self.versions.items():
            state = "committed" if self.committed.get(table) else "unchanged (nothing new)"
            out.append(f"  {table}: version {version}, {state}")
        if self.ignored:
            out.append(f"  ignored {len(self.ignored)} file(s) that are not metadata log files")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        from dataclasses import asdict

        return asdict(self)


# ---- the ingest -------------------------------------------------------------------------------------------------


def _counters(spark: SparkSession) -> Any:
    """(files, bytes) accumulators, or None where there is no SparkContext (Spark Connect)."""
    try:
        sc = spark.sparkContext
        return (sc.accumulator(0), sc.accumulator(0))
    except Exception:
        return None


def _cores(spark: SparkSession) -> int:
    """The task slots decoding can use (Spark's default parallelism; 1 where it cannot be read, as on Connect)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        return 1


# Decoded rows of inputs larger than this are cached on local disk only: in memory, a 10M-record dump (733 MiB)
# filled a 2 GiB driver's heap while two tasks built their cached blocks (OutOfMemoryError in the decode job).
CACHE_IN_MEMORY_BYTES = 64 * 1024 * 1024


def _persist(df: DataFrame, input_bytes: int) -> bool:
    """Cache the decoded rows, so that the files are decoded once (the summary reads them, then the write)."""
    from pyspark import StorageLevel

    level = StorageLevel.MEMORY_AND_DISK if input_bytes <= CACHE_IN_MEMORY_BYTES else StorageLevel.DISK_ONLY
    try:
        df.persist(level)
        return True
    except Exception:  # serverless compute has no cache: the write decodes again
        return False


def _summarise(decoded: DataFrame) -> list[Any]:
    """One aggregate row per (row type, stream, snapshot, problem kind, copy): the only thing collected from the data.
    A copy is a snapshot or bootstrap file (or dump-log text section) for record rows, the file (or section) for
    problems, none for log records; a copy's row carries its digest (`_copy_digest_columns`), so which copies are
    repeats is decided from this one pass (`_copies_to_drop`)."""
    is_copy = (F.col("row_type") == "Q") | ((F.col("row_type") == "R") & (F.col("stream") != "log"))
    h1, h2 = _copy_digest_columns()
    return (
        decoded.groupBy("row_type", "stream", "snapshot_end_offset", "snapshot_epoch", "kind",
                        *[F.when(is_copy, F.col(c)).alias(c) for c in _COPY_KEY])
        .agg(
            F.count(F.lit(1)).alias("n"),
            F.min("offset").alias("min_offset"),
            F.max("offset").alias("max_offset"),
            F.collect_set(F.when(F.col("row_type") == "I", F.col("source_file"))).alias("ignored"),
            F.sum(F.when(F.col("row_type") == "R", h1)).alias("_h1"),
            F.sum(F.when(F.col("row_type") == "R", h2)).alias("_h2"),
        )
        .collect()
    )


def _user_metadata(report: IngestReport, table: str, rows: int) -> str:
    files = report.files
    doc: dict[str, Any] = {
        "app": "kraft-acl-replay",
        "action": "ingest",
        "table": table,
        "cluster_id": report.cluster_id,
        "ingest_id": report.ingest_id,
        "file_count": len(files),
        "files": files[:MAX_NAMED_FILES],
        "bytes": report.bytes,
        "log_offsets": list(report.log_offsets) if report.log_offsets else None,
        "snapshots": [list(s) for s in report.snapshots[:MAX_NAMED_FILES]],
        "rows_in_input": rows,
    }
    if len(files) > MAX_NAMED_FILES:
        doc["files_truncated"] = len(files) - MAX_NAMED_FILES
    return json.dumps(doc, separators=(",", ":"))


MERGE_ATTEMPTS = 5


def _is_conflict(error: Exception) -> bool:
    """A Delta optimistic-concurrency conflict (another writer committed first): safe to retry an idempotent MERGE."""
    text = f"{type(error).__name__}: {error}"
    return "Concurrent" in text or "DELTA_CONCURRENT" in text or "MetadataChanged" in text


def _merge(spark: SparkSession, lake: Lake, table: str, source: DataFrame, condition: str, metadata: str) -> int:
    """Insert the source rows the table does not match; return how many were inserted (0: Delta made no commit).

    The commit's userMetadata comes from the session conf (SQL MERGE has no writer option); `ingest` runs in a
    session of its own so that concurrent ingests never see each other's value. A conflict with a concurrent writer
    (another ingest of the same cluster) is retried: the MERGE is idempotent.
    """
    view = f"kraft_ingest_src_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        previous = spark.conf.get(USER_METADATA_CONF, None)
    except Exception:
        previous = None
    try:
        spark.conf.set(USER_METADATA_CONF, metadata)
    except Exception as e:  # a platform that forbids the conf: write without userMetadata rather than not at all
        log.warning("cannot set %s (%s); the commit will carry no userMetadata", USER_METADATA_CONF, e)
    sql = f"MERGE INTO {lake.table_ref(table)} AS t USING {view} AS s ON {condition} WHEN NOT MATCHED THEN INSERT *"
    try:
        for attempt in range(1, MERGE_ATTEMPTS + 1):
            try:
                result = spark.sql(sql).collect()
                break
            except Exception as e:
                if attempt == MERGE_ATTEMPTS or not _is_conflict(e):
                    raise
                log.info("MERGE into %s conflicted with a concurrent commit (attempt %d); retrying", table, attempt)
                time.sleep(0.5 * attempt)
    finally:
        with contextlib.suppress(Exception):
            if previous is None:
                spark.conf.unset(USER_METADATA_CONF)
            else:
                spark.conf.set(USER_METADATA_CONF, previous)
        spark.catalog.dropTempView(view)
    if not result:
        return 0
    row = result[0].asDict()
    return int(row.get("num_inserted_rows") or row.get("num_affected_rows") or 0)


ROWS_PER_FILE = 250_000  # 15-20 MiB of Parquet per file; a task's sort of that many rows fits a 2g driver unspilled


def _own_session(spark: SparkSession) -> SparkSession:
    """A session sharing `spark`'s context and cache but with its own SQL conf and temp views (Spark Connect: the
    same session)."""
    try:
        own = spark.newSession()
    except Exception:
        own = spark
    with contextlib.suppress(Exception):  # MERGE would otherwise funnel a cluster's rows (one partition) into one task
        own.conf.set("spark.databricks.delta.merge.repartitionBeforeWrite.enabled", "false")
    return own


_SNAPSHOT_ID = ("stream", "snapshot_end_offset", "snapshot_epoch")


def _copy_digest_columns() -> tuple[Column, Column]:
    """A record's two parts of its copy's digest (summed over the copy): over its offset, hash, epoch and CRC state,
    so two copies with the same records have the same digest in any order, wherever they were read from."""
    item = [F.col("offset"), F.col("content_hash"), F.col("leader_epoch"), F.col("crc_ok")]
    return F.xxhash64(*item).cast("decimal(38,0)"), F.hash(*item).cast("long")


def _copy_digests(rows: DataFrame) -> DataFrame:
    """Per snapshot or bootstrap copy (`_SNAPSHOT_ID` + `_COPY_KEY`): its record count and digest."""
    h1, h2 = _copy_digest_columns()
    return rows.groupBy(*_SNAPSHOT_ID, *_COPY_KEY).agg(
        F.count(F.lit(1)).alias("_n"), F.sum(h1).alias("_h1"), F.sum(h2).alias("_h2"))


def _clean(copies: DataFrame, problems: DataFrame) -> DataFrame:
    """The copies no problem other than a notice names (a copy with one is judged on its own by the replay)."""
    bad = problems.where(~F.col("kind").isin(*sorted(k.value for k in NOTICE_KINDS)))
    return join_null_safe(copies, bad, _COPY_KEY, "left_anti")


Copy = tuple[Any, ...]  # (stream, snapshot_end_offset, snapshot_epoch, source_file, text_section)


def _copies_to_drop(summary: list[Any], lake: Lake | None, cluster: str) -> list[Copy]:
    """The snapshot and bootstrap copies of this ingest not to store, from the summary: those whose exact content
    the lake (when given) or an earlier copy of this ingest already holds in a clean copy (the same snapshot in
    tomorrow's dump, or from another node). A copy with problems is always kept, under its own file."""
    notices = {k.value for k in NOTICE_KINDS}
    bad = {(r["source_file"], r["text_section"]) for r in summary if r["row_type"] == "Q" and r["kind"] not in notices}
    clean = [r for r in summary if r["row_type"] == "R" and r["source_file"] is not None
             and (r["source_file"], r["text_section"]) not in bad]

    def copy(r: Any) -> Copy:
        return tuple(r[c] for c in (*_SNAPSHOT_ID, *_COPY_KEY))

    def content(r: Any) -> tuple[Any, ...]:
        return (*(r[c] for c in _SNAPSHOT_ID), r["n"], r["_h1"], r["_h2"])

    def first_by_copy_key(r: Any) -> tuple[Any, ...]:  # ascending, nulls first, as the table orders them
        return tuple(x for c in _COPY_KEY for x in (r[c] is not None, r[c] or ""))

    drop: list[Copy] = []
    kept: dict[tuple[Any, ...], Any] = {}
    for r in sorted(clean, key=first_by_copy_key):
        if content(r) in kept:
            drop.append(copy(r))
        else:
            kept[content(r)] = r
    if lake is not None and kept and lake.exists(METADATA_RECORDS):
        ids = {content(r)[:3] for r in kept.values()}
        same_snapshot = functools.reduce(lambda a, b: a | b, [
            functools.reduce(lambda a, b: a & b,
                             [F.col(c).eqNullSafe(F.lit(v)) for c, v in zip(_SNAPSHOT_ID, i, strict=True)])
            for i in sorted(ids, key=repr)])
        stored = lake.read(METADATA_RECORDS).where(
            (F.col("cluster_id") == cluster) & (F.col("stream") != "log") & same_snapshot)
        stored_problems = lake.read(QUARANTINE).where(F.col("cluster_id") == cluster) if lake.exists(QUARANTINE) \
            else None
        digests = _copy_digests(stored)
        if stored_problems is not None:
            digests = _clean(digests, stored_problems)
        held = {(*(d[c] for c in _SNAPSHOT_ID), d["_n"], d["_h1"], d["_h2"])
                for d in digests.select(*_SNAPSHOT_ID, "_n", "_h1", "_h2").distinct().collect()}
        drop += [copy(r) for key, r in kept.items() if key in held]
    return drop


def records_source(decoded: DataFrame, cluster: str, ingest_id: str, drop: list[Copy], rows_hint: int = 0,
                   ) -> DataFrame:
    """The metadata_records rows of this ingest, one per key (the first by file and position), without the
    snapshot copies in `drop` (`_copies_to_drop`), range-partitioned by stream and offset into parts of about
    `ROWS_PER_FILE` rows (`rows_hint` bounds the rows): parallel tasks then write files of a sensible size, each a
    contiguous stretch of the log, which the replay's reads by offset skip or take whole. The duplicate check runs
    inside those parts (its key holds stream and offset): the rows are shuffled once."""
    cols = SCHEMAS[METADATA_RECORDS].fieldNames()
    rows = decoded.filter(F.col("row_type") == "R").withColumns({
        "cluster_id": F.lit(cluster),
        "ingest_id": F.lit(ingest_id),
        "append_ts": F.timestamp_millis(F.col("append_time")),
    })
    if drop:
        key = [*_SNAPSHOT_ID, *_COPY_KEY]
        schema = StructType([decoded.schema[c] for c in key])
        # one row per copy: broadcast, so that the records are not shuffled to meet it
        dropped = F.broadcast(decoded.sparkSession.createDataFrame(drop, schema))
        rows = join_null_safe(rows, dropped, key, "left_anti")
    rows = rows.repartitionByRange(max(1, -(-rows_hint // ROWS_PER_FILE)), "stream", "offset")
    copy = [F.when(F.col("stream") != "log", F.col(c)).alias("_copy_" + c) for c in _COPY_KEY]
    first = Window.partitionBy(*RECORD_KEY, *[f"_copy_{c}" for c in _COPY_KEY]).orderBy(
        "source_file", "file_position", "record_index")
    rows = rows.select("*", *copy)
    return rows.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).select(*cols)


def quarantine_source(decoded: DataFrame, cluster: str, ingest_id: str) -> DataFrame:
    cols = SCHEMAS[QUARANTINE].fieldNames()
    rows = decoded.filter(F.col("row_type") == "Q").withColumns(
        {"cluster_id": F.lit(cluster), "ingest_id": F.lit(ingest_id)}
    )
    return rows.dropDuplicates(["content_hash"]).select(*cols)


def _record_condition(cluster: str, log_offsets: tuple[int, int] | None = None) -> str:
    """The MERGE's match: the record key, and literal bounds on the stored rows (log records in the source's offset
    range, or snapshot rows), so Delta reads only the files that can hold a match: an ingest past what the lake
    holds reads none of them and is in effect an append. It stays a MERGE because a blind append never conflicts:
    two ingests of one dump at once would both land, where MERGE's conflict check makes the second find the first's
    rows on retry."""
    parts = [f"t.cluster_id = {sql_string(cluster)}", "t.cluster_id = s.cluster_id"]
    in_range = "FALSE" if log_offsets is None else (
        f"t.offset BETWEEN {int(log_offsets[0])} AND {int(log_offsets[1])}")
    parts.append(f"((t.stream = 'log' AND {in_range}) OR t.stream <> 'log')")
    for col in RECORD_KEY[1:]:
        op = "<=>" if col in _NULLABLE_KEY else "="
        parts.append(f"t.`{col}` {op} s.`{col}`")
    same_copy = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in _COPY_KEY)
    parts.append(f"(s.stream = 'log' OR ({same_copy}))")
    return " AND ".join(parts)


def _collision_region(cluster: str, log_offsets: tuple[int, int] | None,
                      copies: set[tuple[str | None, int | None, int | None]]) -> str | None:
    """A predicate on metadata_records for the rows this ingest's records could be equal to: the cluster's log rows
    in the ingest's offset range and its rows of the same snapshots (any copy). None when a record row has no
    stream (a dump-log text line outside any section), which the region cannot name."""

    def literal(v: int | None) -> str:
        return "NULL" if v is None else str(int(v))

    parts = []
    if log_offsets is not None:
        parts.append(f"(stream = 'log' AND offset BETWEEN {int(log_offsets[0])} AND {int(log_offsets[1])})")
    for stream, end, epoch in sorted(copies, key=repr):
        if stream is None:
            return None
        parts.append(f"(stream = {sql_string(stream)} AND snapshot_end_offset <=> {literal(end)} "
                     f"AND snapshot_epoch <=> {literal(epoch)})")
    if not parts:
        return None
    return f"cluster_id = {sql_string(cluster)} AND ({' OR '.join(parts)})"


def _write_records(spark: SparkSession, lake: Lake, decoded: DataFrame, report: IngestReport,
                   copies: set[tuple[str | None, int | None, int | None]], summary: list[Any]) -> int:
    """Write this ingest's metadata_records rows; how many were new.

    Append first: when the lake holds none of the cluster's rows in the region these could collide with (a first
    ingest, a later dump past the stored end, new snapshots), the rows are written without a MERGE, as a
    `replaceWhere` of that empty region: one write of the rows, no join with the table, and still one commit that
    conflicts with a concurrent ingest writing into the same region (a blind append would not), so the loser
    retries and then finds the winner's rows through the MERGE. Otherwise (an overlapping dump) the MERGE inserts
    what the table does not match."""
    cluster, metadata = report.cluster_id, _user_metadata(report, METADATA_RECORDS, report.records)
    region = _collision_region(cluster, report.log_offsets, copies)
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        if region is None or lake.read(METADATA_RECORDS).where(region).limit(1).count() > 0:
            break
        source = records_source(decoded, cluster, report.ingest_id, _copies_to_drop(summary, None, cluster),
                                report.records)
        try:
            write_replacing(lake, METADATA_RECORDS, source, region, metadata)
        except Exception as e:
            if not _is_conflict(e):
                raise
            log.info("the append into %s conflicted with a concurrent commit (attempt %d); looking again",
                     METADATA_RECORDS, attempt)
            continue
        return _rows_added(lake, METADATA_RECORDS, metadata)
    return _merge(spark, lake, METADATA_RECORDS,
                  records_source(decoded, cluster, report.ingest_id, _copies_to_drop(summary, lake, cluster),
                                 report.records),
                  _record_condition(cluster, report.log_offsets), metadata)


def _rows_added(lake: Lake, table: str, metadata: str) -> int:
    """The rows our commit wrote (its `numOutputRows`), found in the table's recent history by its userMetadata,
    which names this ingest."""
    ours = (lake.history(table, 50).where(F.col("userMetadata") == metadata)
            .select("operationMetrics").first())
    return 0 if ours is None else int((ours["operationMetrics"] or {}).get("numOutputRows", 0))


def _quarantine_condition(cluster: str) -> str:
    return f"t.cluster_id = {sql_string(cluster)} AND t.cluster_id = s.cluster_id AND t.content_hash = s.content_hash"


def _check_cluster(cluster: str) -> str:
    text = (cluster or "").strip()
    if not text or any(ord(c) < 32 for c in text):
        raise IngestError(f"invalid cluster id {cluster!r}: give a non-empty name without control characters")
    return text


def ingest(
    spark: SparkSession,
    paths: str | Sequence[str],
    cluster: str,
    lake: Lake | str | None = None,
    strict: bool = False,
    progress: bool = True,
    *,
    ingest_id: str | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    show_secrets: bool = False,
) -> IngestReport:
    """Read dumps under `paths` into `lake`'s metadata_records and quarantine tables for `cluster`.

    `paths`: files or directories, local or any URI Spark reads. `lake`: a `Lake`, a directory or `catalog.schema`
    (default `./lakehouse`). `strict`: any problem in the input raises `StrictIngestError` and nothing is written.
    `progress`: a bar of files and bytes decoded, and status lines, on stderr. `split_bytes`: local segment and
    snapshot files larger than this are decoded in pieces of about this size by parallel tasks, smaller pieces when
    cores would otherwise be idle (`split_for_cores`; 0: never split). `show_secrets`: store SCRAM credentials and
    password configs as the log holds them; by default `payload_json` and `raw_value` hold a redaction marker in
    their place (`replay.kafka.secrets`; the content hash is taken over the redacted value, so it still tells copies
    with different secrets apart), and a warning is logged when they are kept.
    Raises `IngestError` when there is nothing to read. Returns what was read and written.
    """
    started = time.monotonic()
    cluster = _check_cluster(cluster)
    lake = lake if isinstance(lake, Lake) else Lake(spark, lake)
    spark = _own_session(spark)
    path_list = [paths] if isinstance(paths, str | os.PathLike) else [str(p) for p in paths]
    if not path_list:
        raise IngestError("no input paths given")
    report = IngestReport(ingest_id or uuid.uuid4().hex, cluster, lake.location, strict)

    progress_ui.say(f"ingest {report.ingest_id}: listing {', '.join(map(str, path_list))}", progress)
    plan, ignored = plan_files(spark, [str(p) for p in path_list])
    if show_secrets:
        log.warning("ingest %s keeps SCRAM credentials and password configs in the lake %s as the log holds them",
                    report.ingest_id, lake.location)
        plan = [dataclasses.replace(f, show_secrets=True) for f in plan]
    report.ignored = ignored
    if not plan:
        raise IngestError(
            f"no metadata log files under {', '.join(map(str, path_list))}"
            + (f" ({len(ignored)} other file(s) ignored)" if ignored else "")
        )
    total = sum(f.length for f in plan)
    via_spark = sum(1 for f in plan if f.open_with == "spark")
    progress_ui.say(
        f"decoding {len(plan)} file(s), {total:,} bytes, on the executors"
        + (f" ({via_spark} read through Spark binaryFile)" if via_spark else ""),
        progress,
    )

    parts = split_plan(plan, split_for_cores(plan, split_bytes, _cores(spark)))
    unit = "files" if len(parts) == len(plan) else "parts"
    counters = _counters(spark)
    decoded = decode_plan(spark, parts, counters)
    cached = _persist(decoded, total)
    try:
        if counters is not None:
            def read() -> tuple[float, str]:
                return float(counters[1].value), f"{counters[0].value}/{len(parts)} {unit}"

            with progress_ui.poll(read, total=float(total), desc="decode", unit="B", unit_scale=True,
                                  enabled=progress), step(spark, "ingest: decode"):
                summary = _summarise(decoded)
        else:
            with step(spark, "ingest: decode"):
                summary = _summarise(decoded)

        sniffed_out: set[str] = set()
        problems: Counter[str] = Counter()
        streams: Counter[str] = Counter()
        log_lo: int | None = None
        log_hi: int | None = None
        snapshots: set[tuple[int, int]] = set()
        copies: set[tuple[str | None, int | None, int | None]] = set()  # (stream, end, epoch) of non-log rows
        for row in summary:
            if row["row_type"] == "I":
                sniffed_out.update(row["ignored"])
            elif row["row_type"] == "Q":
                problems[row["kind"]] += int(row["n"])
            elif row["row_type"] == "R":
                streams[row["stream"] or "log"] += int(row["n"])
                if row["stream"] == "log" and row["min_offset"] is not None:
                    log_lo = row["min_offset"] if log_lo is None else min(log_lo, row["min_offset"])
                    log_hi = row["max_offset"] if log_hi is None else max(log_hi, row["max_offset"])
                if row["stream"] == "snapshot" and row["snapshot_end_offset"] is not None:
                    snapshots.add((int(row["snapshot_end_offset"]), int(row["snapshot_epoch"] or 0)))
                if row["stream"] != "log":
                    copies.add((row["stream"], row["snapshot_end_offset"], row["snapshot_epoch"]))
        report.files = [f.uri for f in plan if f.uri not in sniffed_out]
        report.ignored = ignored + sorted(sniffed_out)
        report.bytes = sum(f.length for f in plan if f.uri not in sniffed_out)
        report.records = sum(streams.values())
        report.records_by_stream = dict(streams)
        report.problems = sum(problems.values())
        report.problems_by_kind = dict(problems)
        report.log_offsets = (int(log_lo), int(log_hi)) if log_lo is not None and log_hi is not None else None
        report.snapshots = sorted(snapshots)

        if not report.files:
            raise IngestError(f"no metadata log files under {', '.join(map(str, path_list))} "
                              f"({len(report.ignored)} other file(s) ignored)")
        if not streams and problems.get(ProblemKind.UNREADABLE_FILE.value, 0) >= len(report.files):
            raise IngestError(
                f"the executors could not open any of the {len(report.files)} input file(s); nothing was written. "
                "On a cluster the dumps must be where every node can read them (object storage, HDFS, a shared "
                "mount, or /Volumes on Databricks), not on the driver's local disk")
        if strict and report.problems:
            first = (
                decoded.filter(F.col("row_type") == "Q")
                .select("source_file", "file_position", "offset", "kind", "message")
                .orderBy("source_file", "file_position", "offset")
                .limit(10)
                .collect()
            )
            described = [
                f"{r['kind']}: {r['source_file']}"
                + (f", byte {r['file_position']}" if r["file_position"] is not None else "")
                + (f", offset {r['offset']}" if r["offset"] is not None else "")
                + f": {r['message']}"
                for r in first
            ]
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(problems.items()))
            raise StrictIngestError(
                f"strict ingest refused: {report.problems} problem(s) in the input ({kinds}); nothing was written.\n"
                + "\n".join("  " + d for d in described),
                dict(problems),
                described,
            )

        for table in (METADATA_RECORDS, QUARANTINE):
            lake.ensure(table)
        # An empty side is skipped: an insert-only MERGE of nothing would not commit anyway.
        if report.records:
            progress_ui.say(f"writing {METADATA_RECORDS} ({report.records:,} records decoded)", progress)
            with step(spark, f"ingest: write {METADATA_RECORDS}"):
                report.records_new = _write_records(spark, lake, decoded, report, copies, summary)
        if report.problems:
            progress_ui.say(f"writing {QUARANTINE} ({report.problems:,} problems found)", progress)
            with step(spark, f"ingest: write {QUARANTINE}"):
                report.problems_new = _merge(
                    spark, lake, QUARANTINE, quarantine_source(decoded, cluster, report.ingest_id),
                    _quarantine_condition(cluster), _user_metadata(report, QUARANTINE, report.problems),
                )
        report.committed = {METADATA_RECORDS: report.records_new > 0, QUARANTINE: report.problems_new > 0}
        report.versions = {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)}
    finally:
        if cached:
            with contextlib.suppress(Exception):
                decoded.unpersist()
    report.seconds = time.monotonic() - started
    return report  # the caller prints it (`str(report)`): the CLI on stdout, the notebook in its cell
