"""The executor side of ingesting brokers' authorizer logs: each Spark task opens its log files and reads them
(`replay.kafka.authorizer_log.read_stream`) into Arrow record batches of `LOG_FIELDS`, one row per logged decision
and one per line that looks like a decision and does not read (`problem` set).

Runs inside Spark tasks: imports only pyarrow, the standard library and `replay.kafka` (like `ingest_decode`, whose
file openers it shares).
"""

from __future__ import annotations

import hashlib
import io
import posixpath
from collections.abc import Callable, Iterator
from typing import IO, Any, cast

import pyarrow as pa

from replay.kafka.acl import AclBinding
from replay.kafka.authorizer_log import LineProblem, parse_zone, read_stream
from replay.spark.ingest_decode import PlannedFile, planned_streams, round_robin

ACL_FIELD_NAMES = list(AclBinding.__dataclass_fields__)
_STR, _LONG, _INT, _BIN = pa.string(), pa.int64(), pa.int32(), pa.binary()
LOG_FIELDS: list[tuple[str, pa.DataType]] = [
    ("broker", _STR), ("time", _LONG), ("principal", _STR), ("host", _STR), ("operation", _STR),
    ("resource_type", _STR), ("pattern_type", _STR), ("resource_name", _STR), ("api", _STR), ("decision", _STR),
    ("rule", _STR), ("rule_kind", _STR), *[("acl_" + n, _STR) for n in ACL_FIELD_NAMES], ("level", _STR),
    ("source_file", _STR), ("line", _INT), ("file_position", _LONG), ("event_key", _BIN), ("problem", _STR),
    ("raw", _BIN),
]
LOG_SCHEMA = pa.schema([pa.field(n, t) for n, t in LOG_FIELDS])
ROWS_PER_BATCH = 10_000
MAX_RAW = 1 << 20  # bytes of an unreadable line kept in quarantine (as the dump ingest keeps at most)


def broker_of(uri: str, broker: str | None) -> str:
    """The broker a log file belongs to: the one given, else the name of the directory holding the file."""
    return broker or posixpath.basename(posixpath.dirname(uri.rstrip("/"))) or uri


def event_key(broker: str, number: int, text: str) -> bytes:
    """A logged decision's identity: the same line of the same broker's file is one row, whatever the file is called
    (a rotated, renamed or compressed copy) and however often it is ingested."""
    return hashlib.sha256(f"{broker}\0{number}\0{text}".encode()).digest()[:16]


def log_rows(entry: PlannedFile, stream: IO[bytes], broker: str | None, zone_name: str) -> Iterator[tuple[Any, ...]]:
    """The rows of one log file, in `LOG_FIELDS` order."""
    name = broker_of(entry.uri, broker)
    no_acl = (None,) * len(ACL_FIELD_NAMES)
    for line in read_stream(stream, entry.uri, parse_zone(zone_name)):
        key = event_key(name, line.number, line.text)
        item = line.item
        if isinstance(item, LineProblem):
            yield (name, None, None, None, None, None, None, None, None, None, None, None, *no_acl, None, entry.uri,
                   line.number, line.position, key, item.message, line.text.encode()[:MAX_RAW])
            continue
        acl = tuple(getattr(item.acl, n) for n in ACL_FIELD_NAMES) if item.acl is not None else no_acl
        yield (name, item.time, item.principal, item.host, item.operation, item.resource_type, item.pattern_type,
               item.resource_name, item.api, item.decision, item.rule, item.rule_kind, *acl, item.level or None,
               entry.uri, line.number, line.position, key, None, None)


def _batches(rows: Iterator[tuple[Any, ...]]) -> Iterator[Any]:
    pending: list[tuple[Any, ...]] = []
    for row in rows:
        pending.append(row)
        if len(pending) >= ROWS_PER_BATCH:
            yield _batch(pending)
            pending = []
    if pending:
        yield _batch(pending)


def _batch(rows: list[tuple[Any, ...]]) -> Any:
    columns = list(zip(*rows, strict=True))
    return pa.RecordBatch.from_arrays([pa.array(columns[i], type=t) for i, (_, t) in enumerate(LOG_FIELDS)],
                                      schema=LOG_SCHEMA)


def _unreadable(entry: PlannedFile, broker: str | None, error: Exception) -> tuple[Any, ...]:
    name = broker_of(entry.uri, broker)
    return (name, *(None,) * (len(LOG_FIELDS) - 7), entry.uri, None, None, event_key(name, 0, entry.uri),
            f"cannot open the log: {error}", None)


def make_log_reader(plan: list[PlannedFile], partitions: int, broker: str | None, zone_name: str
                    ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files executors open themselves: partition i reads files i, i+P, i+2P..."""
    tasks = round_robin(plan, partitions)

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for entry, stream, error in planned_streams(batches, tasks):
            if stream is None:
                yield _batch([_unreadable(entry, broker, cast(Exception, error))])
            else:
                yield from _batches(log_rows(entry, stream, broker, zone_name))

    return read


def make_log_content_reader(plan: dict[str, PlannedFile], broker: str | None, zone_name: str
                            ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files Spark read for us (`binaryFile` rows with `path` and `content`)."""

    def read(batches: Iterator[Any]) -> Iterator[Any]:
        for arrow_batch in batches:
            paths = arrow_batch.column("path").to_pylist()
            contents = arrow_batch.column("content")
            for i, path in enumerate(paths):
                data = contents[i].as_buffer()
                reader = pa.BufferReader(data) if data is not None else io.BytesIO(b"")
                yield from _batches(log_rows(plan[path], cast(IO[bytes], reader), broker, zone_name))

    return read
