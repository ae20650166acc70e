"""The compiled decoder (`kraft_replay_native`, Rust, in `native/`) behind the same API as `batch.read_batches`.

It gives exactly what the pure-Python reference gives, item for item: the same `Batch`, `BatchHeader`, `Record`
and `Problem` objects (kind, message, file, position, offset, raw), only faster. `batch.read_batches` uses it when
it is installed (`pip install ./native`, which `make setup` runs); the reference is used where it is not, and
everywhere when `KRAFT_REPLAY_PURE_PYTHON=1` is set in the process's environment (the differential tests set it
and `refresh` to compare the two).

The extension gets the schema table of `schemas.py` at import (`_init`), so value decoding follows the one table,
and the model classes, whose slots it fills directly. Where a records area does not decompress, it asks
`codecs.decompress` for the exact message (`_codec_fallback`).
"""

from __future__ import annotations

import importlib
import os
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, BinaryIO

from . import codecs, kafkajson, secrets
from .acl import AclOperation, AclPermissionType, PatternType, ResourceType
from .files import first_offset_from_name
from .model import CONTROL_TYPES, Batch, BatchHeader, Problem, ProblemKind, Record
from .schemas import CONTROL_SCHEMAS, METADATA_SCHEMAS, Struct, Versions

PURE_PYTHON_ENV = "KRAFT_REPLAY_PURE_PYTHON"
BUILD_COMMAND = "python3 -m pip install ./native   (from the project root; needs cargo)"
API = 10  # the extension's `API`: an extension built from other sources (older or newer) is not used


def _load() -> tuple[Any, str | None]:
    """The extension module, or None and why it is not used (not built, or built from other sources)."""
    try:
        ext = importlib.import_module("kraft_replay_native")
    except ImportError:  # not built here: the pure-Python decoder is used
        return None, "the kraft_replay_native extension is not installed"
    if getattr(ext, "API", None) != API:
        return None, (f"the installed kraft_replay_native (API {getattr(ext, 'API', None)}) was built from other "
                      f"sources than this checkout (API {API}); rebuild it")
    return ext, None


_ext, IMPORT_ERROR = _load()


def installed() -> bool:
    """Whether the extension imports (whatever the environment asks for)."""
    return _ext is not None


def _pure_python_asked() -> bool:
    return os.environ.get(PURE_PYTHON_ENV, "").strip().lower() in ("1", "true", "yes", "on")


_pure_asked = _pure_python_asked()


def refresh() -> None:
    """Read `KRAFT_REPLAY_PURE_PYTHON` again. It is read once, at import: `enabled` is asked for every batch the
    ingest turns into rows, and reading the environment costs about 2 µs (more than decoding a NoOp batch)."""
    global _pure_asked
    _pure_asked = _pure_python_asked()


def enabled() -> bool:
    """Whether decoding goes through the extension: installed, and `KRAFT_REPLAY_PURE_PYTHON` was not set (to 1,
    true, yes or on) when this module was imported or last `refresh`ed."""
    return _ext is not None and not _pure_asked


def _versions(v: Versions) -> tuple[int, int | None]:
    return v.lo, v.hi


def _schema_table() -> tuple[list[list[tuple[Any, ...]]], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """The schema table flattened for the extension: structs by index (fields with the index of their struct),
    metadata schemas and control schemas pointing at them."""
    structs: list[list[tuple[Any, ...]]] = []
    index: dict[int, int] = {}

    def struct_id(st: Struct) -> int:
        if id(st) in index:
            return index[id(st)]
        i = index[id(st)] = len(structs)
        structs.append([])
        structs[i] = [(f.name, f.json_name, f.element_type, f.is_array, _versions(f.versions),
                       _versions(f.nullable_versions), f.tag, _versions(f.tagged_versions), f.default,
                       struct_id(f.struct) if f.struct is not None else None) for f in st.fields]
        return i

    metadata = [(key, s.name, s.type_name, s.valid_versions.lo, s.valid_versions.hi, struct_id(s.struct))
                for key, s in METADATA_SCHEMAS.items()]
    control = [(ct, s.name, struct_id(s.struct)) for ct, s in CONTROL_SCHEMAS.items()]
    return structs, metadata, control


def _codec_fallback(codec: int, data: bytes, limit: int) -> tuple[str, bytes | str]:
    """What the Python codecs make of a records area the extension could not decompress: ("ok", the bytes),
    ("limit", the message) past `limit`, or ("bad", the `CodecError` message)."""
    try:
        return "ok", codecs.decompress(codec, data, limit)
    except codecs.DecompressionLimitError as e:
        return "limit", str(e)
    except codecs.CodecError as e:
        return "bad", str(e)


def _acl_names() -> list[dict[int, str]]:
    """Each ACL enum's names by int8 code, unknown codes as UNKNOWN (`from_code`)."""
    return [{code: enum.from_code(code).name for code in range(-128, 128)}
            for enum in (ResourceType, PatternType, AclOperation, AclPermissionType)]


def _init() -> None:
    structs, metadata, control = _schema_table()
    _ext.init(structs, metadata, control, dict(CONTROL_TYPES), (Batch, BatchHeader, Record, Problem),
              {k.value: k for k in ProblemKind}, _codec_fallback, _acl_names(), kafkajson.java_double)


if _ext is not None:
    _init()


def read_batches(
    stream: BinaryIO,
    source: str = "",
    *,
    start_position: int = 0,
    decode_values: bool = True,
    max_batch_size: int,
    resync_window: int,
    snapshot: bool = False,
    records_for: frozenset[int] | None = None,
    decompressed_limit: int,
) -> Iterator[Batch | Problem]:
    """`batch.read_batches` (without `strict`, which the caller applies) through the extension; the caller passes
    its `RESYNC_WINDOW` as it is at the call (tests change it)."""
    name_offset = first_offset_from_name(source) if start_position == 0 else None
    return iter(_ext.Decoder(stream, source, name_offset, start_position, max_batch_size, resync_window,
                             decode_values, snapshot, None if records_for is None else sorted(records_for),
                             decompressed_limit, False))


@dataclass(frozen=True, slots=True)
class BatchRun:
    """Consecutive batches of one file that keep no record of `records_for`, whose CRC matches and whose record
    count is their header's span of offsets, with no problem before any of them: the header numbers the replayer
    needs of each (`replayer._LogCopies.add_run`), in file order, instead of a `Batch` each."""

    source: str
    positions: list[int]
    sizes: list[int]
    base_offsets: list[int]
    last_offsets: list[int]
    epochs: list[int]
    times: list[int]  # append times (the header's max timestamp)


def read_batches_in_runs(
    stream: BinaryIO,
    source: str,
    *,
    start_position: int = 0,
    max_batch_size: int,
    resync_window: int,
    records_for: frozenset[int],
    decompressed_limit: int,
) -> Iterator[Batch | Problem | BatchRun]:
    """The items of `read_batches(..., records_for=...)` of a log segment, with the batches that keep no record
    together as `BatchRun`s (at most 1,024 each); everything in file order. Requires `enabled()`."""
    name_offset = first_offset_from_name(source) if start_position == 0 else None
    for item in _ext.Decoder(stream, source, name_offset, start_position, max_batch_size, resync_window, True, False,
                             sorted(records_for), decompressed_limit, True):
        yield BatchRun(source, *item) if isinstance(item, tuple) else item


def record_extras(records: list[Record]) -> list[tuple[str | None, bytes | None]] | None:
    """For the ingest's rows: each record's payload JSON (`kafkajson.payload_json` / `control_json` of its decoded
    value) and content hash (`ingest_rows.record_hash`), computed in the extension; an item is None where the Python
    function must be asked (no decoded value, transaction markers, an offset outside int64). None when decoding
    does not go through the extension (`enabled`)."""
    if not enabled():
        return None
    extras: list[tuple[str | None, bytes | None]] = _ext.record_extras(records)
    return extras


# The record columns of a `RowChunk`, in order (the extension's `rows::RowBuilder`); they are the ingest's record
# row columns but those that are the same for a whole file and those only problems have.
ROW_COLUMNS = ("file_position", "batch_base_offset", "batch_last_offset", "offset", "record_index", "leader_epoch",
               "append_time", "record_timestamp", "codec", "crc_ok", "is_control", "control_type", "api_key",
               "record_version", "record_type", "payload_json", "acl_id", "resource_type", "resource_name",
               "pattern_type", "principal", "host", "operation", "permission_type", "raw_key", "raw_value",
               "decode_error", "content_hash")


@dataclass(frozen=True, slots=True)
class RowChunk:
    """The record rows of consecutive batches as Arrow buffers, per `ROW_COLUMNS` column: (validity bitmap or
    None when no value is null, values (a bitmap for booleans), int32 offsets or None for fixed-width columns)."""

    rows: int
    columns: list[tuple[bytes | None, bytes, bytes | None]]


def read_rows(
    stream: BinaryIO,
    source: str = "",
    *,
    start_position: int = 0,
    max_batch_size: int,
    resync_window: int,
    snapshot: bool = False,
    decompressed_limit: int,
    max_rows: int,
    max_bytes: int,
    show_secrets: bool,
    ordered: bool = False,
) -> Iterator[Batch | Problem | RowChunk]:
    """The items of `read_batches` for the ingest, but with the records of most batches already turned into
    `RowChunk`s (no Python object per record); a batch the extension leaves to Python (one with a secret, a value
    it does not render) comes as a `Batch`, as soon as it is decoded: the rows of the batches before it may come
    later, unless `ordered`. Requires `enabled()`."""
    name_offset = first_offset_from_name(source) if start_position == 0 else None
    for item in _ext.RowDecoder(stream, source, name_offset, start_position, max_batch_size, resync_window, snapshot,
                                decompressed_limit, max_rows, max_bytes,
                                None if show_secrets else secrets.is_secret_config, ordered):
        yield RowChunk(*item) if isinstance(item, tuple) else item


@dataclass(frozen=True, slots=True)
class DumpLogText:
    """kafka-dump-log's lines of consecutive batches, printed by the extension (`DumpLogRenderer` prints the same
    from their `Batch` objects): the text (lines joined by newlines), the first and last record offsets (None: no
    records), the jumps between record offsets inside it, `(offset, the next one)`, and the bytes of the batches."""

    text: str
    first_offset: int | None
    last_offset: int | None
    gaps: list[tuple[int, int]]
    size: int


def read_dump_log(
    stream: BinaryIO,
    source: str = "",
    *,
    max_batch_size: int,
    resync_window: int,
    snapshot: bool = False,
    decompressed_limit: int,
    show_secrets: bool,
    skip_record_metadata: bool,
    bare_prefix: str,
    gap_from_minus_one: bool,
    kafka_keys: frozenset[int],
    max_bytes: int = 1 << 20,
) -> Iterator[Batch | Problem | DumpLogText]:
    """The items of `read_batches` for kafka-dump-log's text, in file order, with the batches the extension can
    print itself as `DumpLogText` (at most about `max_bytes` of text each); the rest (control batches, a record
    that holds a secret or did not decode, problems) as the objects `read_batches` gives. Requires `enabled()`."""
    name_offset = first_offset_from_name(source)
    for item in _ext.DumpLogDecoder(stream, source, name_offset, 0, max_batch_size, resync_window, snapshot,
                                    decompressed_limit, max_bytes, None if show_secrets else secrets.is_secret_config,
                                    skip_record_metadata, bare_prefix, gap_from_minus_one, sorted(kafka_keys)):
        yield DumpLogText(*item) if isinstance(item, tuple) else item
