"""The rows the ingest's executors make: their columns (`DECODED_FIELDS`), their identity hashes, and Arrow record
batches of them.

Runs inside Spark tasks, so it imports only pyarrow, the standard library and `replay.kafka`, never pyspark: the
decoding can then run, be tested and be measured (bench/bench_decode.py) without Spark, and nothing of the
driver's (a session, a DataFrame) can reach a task. `tests/test_imports.py` holds it to that.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import json
from collections.abc import Iterator
from typing import Any

import pyarrow as pa

from replay.kafka import kafkajson, native
from replay.kafka.acl import AclBinding
from replay.kafka.model import ACL_ENTRY_RECORD as ACL_ENTRY_API_KEY
from replay.kafka.model import CONTROL_TYPES, Batch, Problem, ProblemKind
from replay.kafka.model import REMOVE_ACL_ENTRY_RECORD as ACL_REMOVE_API_KEY

ROWS_PER_ARROW_BATCH = 2048
BYTES_PER_ARROW_BATCH = 16 * 1024 * 1024

# What the executors produce: one wide row per record ("R"), per problem ("Q") and per file skipped after sniffing
# ("I"). Split into the two tables on the driver side of the plan.
DECODED_FIELDS: list[tuple[str, pa.DataType]] = [
    ("row_type", pa.string()),
    ("source_file", pa.string()),
    ("source_kind", pa.string()),
    ("stream", pa.string()),
    ("text_section", pa.string()),
    ("snapshot_end_offset", pa.int64()),
    ("snapshot_epoch", pa.int32()),
    ("file_position", pa.int64()),
    ("batch_base_offset", pa.int64()),
    ("batch_last_offset", pa.int64()),
    ("offset", pa.int64()),
    ("record_index", pa.int32()),
    ("leader_epoch", pa.int32()),
    ("append_time", pa.int64()),
    ("record_timestamp", pa.int64()),
    ("codec", pa.string()),
    ("crc_ok", pa.bool_()),
    ("is_control", pa.bool_()),
    ("control_type", pa.string()),
    ("api_key", pa.int32()),
    ("record_version", pa.int32()),
    ("record_type", pa.string()),
    ("payload_json", pa.string()),
    ("acl_id", pa.string()),
    ("resource_type", pa.string()),
    ("resource_name", pa.string()),
    ("pattern_type", pa.string()),
    ("principal", pa.string()),
    ("host", pa.string()),
    ("operation", pa.string()),
    ("permission_type", pa.string()),
    ("raw_key", pa.binary()),
    ("raw_value", pa.binary()),
    ("decode_error", pa.string()),
    ("content_hash", pa.binary()),
    ("kind", pa.string()),
    ("message", pa.string()),
    ("line", pa.int32()),
    ("raw", pa.binary()),
    ("file_length", pa.int64()),
]
COLUMNS = [n for n, _ in DECODED_FIELDS]
# A row travels as a tuple in `COLUMNS` order (a dict per record cost more than decoding it); `record_rows` builds
# record rows positionally, so it names the order it relies on here.
_FILE_FIELDS = ("source_file", "source_kind", "stream", "text_section", "snapshot_end_offset", "snapshot_epoch")
_ROW_FIELDS = ("row_type", *_FILE_FIELDS, "file_position", "batch_base_offset", "batch_last_offset", "offset",
               "record_index", "leader_epoch", "append_time", "record_timestamp", "codec", "crc_ok", "is_control",
               "control_type", "api_key", "record_version", "record_type", "payload_json", "acl_id",
               "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
               "permission_type", "raw_key", "raw_value", "decode_error", "content_hash", "kind", "message", "line",
               "raw", "file_length")
if list(_ROW_FIELDS) != COLUMNS:
    raise AssertionError("_ROW_FIELDS must list DECODED_FIELDS in order")
_SIZED = tuple(COLUMNS.index(n) for n in ("raw_key", "raw_value", "raw", "payload_json"))
_NO_BINDING = (None,) * 7
_NO_PROBLEM = (None,) * 4


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
        return base64.b64encode(value).decode()
    return str(value)


def _payload_json(record: Any) -> str | None:
    if record.data is None or record.type_name is None:
        return None
    try:
        if record.is_control and hasattr(kafkajson, "control_json"):
            return str(kafkajson.control_json(record.type_name, record.data))
        if not record.is_control and record.version is not None:
            return str(kafkajson.payload_json(record.type_name, record.version, record.data))
    except Exception:  # a payload our JSON writer cannot print: fall back to a plain dump
        pass
    return json.dumps({"type": record.type_name, "version": record.version, "data": record.data},
                      default=_json_default)


class RowBuffer:
    """Rows collected column by column and flushed as Arrow record batches of bounded size."""

    def __init__(self) -> None:
        self._schema = arrow_schema()
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
        columns = list(zip(*self.pending, strict=True))
        arrays = [pa.array(columns[i], type=f.type) for i, f in enumerate(self._schema)]
        batch = pa.RecordBatch.from_arrays(arrays, schema=self._schema)
        self._reset()
        return batch


@functools.lru_cache(maxsize=256)
def _constant(value: Any, arrow_type: Any, rows: int) -> Any:
    """A column of `rows` times `value` (arrays are immutable: a file's full chunks share them)."""
    return pa.nulls(rows, arrow_type) if value is None else pa.repeat(pa.scalar(value, arrow_type), rows)


def chunk_batch(chunk: native.RowChunk, ends: tuple[tuple[Any, ...], tuple[Any, ...]]) -> Any:
    """The Arrow record batch (`DECODED_FIELDS`) of a compiled decoder's row chunk: its columns wrap the chunk's
    buffers (no copy); the columns the same for the whole file (`file_ends`) are repeated."""
    head, tail = ends
    same = {**dict(zip(("row_type", *_FILE_FIELDS), head, strict=True)),
            **dict(zip(("kind", "message", "line", "raw", "file_length"), tail, strict=True))}
    made = dict(zip(native.ROW_COLUMNS, chunk.columns, strict=True))
    arrays = []
    for f in arrow_schema():
        if f.name in made:
            valid, values, offsets = made[f.name]
            buffers = [None if valid is None else pa.py_buffer(valid)]
            if offsets is not None:
                buffers.append(pa.py_buffer(offsets))
            buffers.append(pa.py_buffer(values))
            arrays.append(pa.Array.from_buffers(f.type, chunk.rows, buffers, 0 if valid is None else -1))
        else:
            arrays.append(_constant(same[f.name], f.type, chunk.rows))
    return pa.RecordBatch.from_arrays(arrays, schema=arrow_schema())


@functools.cache
def arrow_schema() -> Any:
    return pa.schema(DECODED_FIELDS)


def as_tuple(row: dict[str, Any]) -> tuple[Any, ...]:
    return tuple(map(row.get, COLUMNS))


def file_ends(base: dict[str, Any]) -> tuple[tuple[Any, ...], tuple[Any, ...]]:
    """The first and last columns of a file's record rows (the same for all of them)."""
    return ("R", *map(base.get, _FILE_FIELDS)), (*_NO_PROBLEM, base.get("file_length"))


def record_rows(batch: Batch, ends: tuple[tuple[Any, ...], tuple[Any, ...]]) -> Iterator[tuple[Any, ...]]:
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


def outside_int64(batch: Batch) -> Problem | None:
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


def problem_row(p: Problem, base: dict[str, Any], file_name: str) -> dict[str, Any]:
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


def stream_of(kind: str) -> str:
    return {"snapshot": "snapshot", "bootstrap": "bootstrap"}.get(kind, "log")

