"""The ingest's executor side: each Spark task opens its files (or pieces of files) and decodes them into Arrow
record batches of `ingest_rows` rows; `make_stream_decoder` and `make_content_decoder` are the `mapInArrow`
functions.

Runs inside Spark tasks: imports only pyarrow, the standard library and `replay.kafka`, never pyspark (see
`ingest_rows`). A task opens a file as `PlannedFile.open_with` says (`ingest_plan` chooses): local paths, `file:`
URIs and `dbfs:` paths through their mounts directly; other URIs through fsspec or `pyarrow.fs`; otherwise Spark
reads the content for it (`binaryFile`: a file whole in one JVM byte array, so below 2 GiB). A piece of a large
file owns the batches that *start* in its byte range, found by walking the 12-byte batch headers; the piece holding
a break in that chain reads on to the end of the file, so pieces give exactly the rows and problems the whole file
gives.
"""

from __future__ import annotations

import io
import posixpath
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import IO, Any, BinaryIO, cast

import pyarrow as pa
from pyarrow import fs as pafs

from replay.kafka import batch as batch_reader
from replay.kafka import dumplog, native
from replay.kafka import files as kfiles
from replay.kafka.model import Batch, Problem, ProblemKind, SourceKind
from replay.spark.ingest_rows import (
    BYTES_PER_ARROW_BATCH,
    COLUMNS,
    RowBuffer,
    as_tuple,
    chunk_batch,
    file_ends,
    outside_int64,
    problem_row,
    record_rows,
    stream_of,
)
from replay.spark.ingest_summary_rows import LogCounts
from replay.spark.ingest_tally import OffsetTally

NATIVE_ROWS_PER_CHUNK = 8192  # rows the compiled decoder puts in one Arrow batch (it costs a fixed ~1 ms to wrap one)
UNKNOWN_KIND = "unknown"  # a file whose name says nothing; the executor sniffs it


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
    batch_at: int = 0  # a position known to begin a batch (the end of bytes the lake holds): pieces walk from there
    end: int | None = None  # None: the whole file
    show_secrets: bool = False  # keep SCRAM credentials and password configs (`replay.kafka.secrets`)
    cluster: str | None = None  # the cluster it belongs to: its rows carry it in `cluster_id` (`TaskRows`)

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


def decode_file(entry: PlannedFile, stream: IO[bytes]) -> Iterator[dict[str, Any]]:
    """The rows of one file (records, problems, or one "I" row when a sniffed file is not a metadata file), as
    dicts by column name."""
    for row in decode_rows(entry, stream, ordered=True):
        if isinstance(row, tuple):
            yield dict(zip(COLUMNS, row, strict=True))
        else:
            yield from row.to_pylist()


def decode_rows(entry: PlannedFile, stream: IO[bytes], ordered: bool = False) -> Iterator[Any]:
    """The rows of one file as `decode_file` says, each a tuple in `DECODED_FIELDS`' column order, or, where the
    compiled decoder made them, many at once as an Arrow record batch (`chunk_batch`): those
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
            yield as_tuple({**base, "row_type": "I", "source_kind": UNKNOWN_KIND})
            return
        stream = cast(IO[bytes], io.BufferedReader(_Prefixed(head, rest), buffer_size=1024 * 1024))
    base["source_kind"] = kind
    if kind == SourceKind.DUMP_LOG_TEXT.value:
        yield from _decode_text(entry, stream, base)
        return
    base.update(stream=stream_of(kind), snapshot_end_offset=entry.snapshot_end_offset,
                snapshot_epoch=entry.snapshot_epoch)
    if entry.is_piece:
        items = decode_piece(cast(BinaryIO, stream), entry, ordered)
    else:
        # a whole snapshot is checked for its header and footer here; a split one by the replay, from its rows
        items = _batch_items(cast(BinaryIO, stream), entry, ordered=ordered,
                             snapshot=kind in (SourceKind.SNAPSHOT.value, SourceKind.BOOTSTRAP.value))
    position: int | None = entry.start
    ends = file_ends(base)
    try:
        for item in items:
            if isinstance(item, Problem):
                yield as_tuple(problem_row(item, base, entry.name))
            elif isinstance(item, native.RowChunk):
                position = int.from_bytes(item.columns[0][1][-8:], "little", signed=True)
                yield chunk_batch(item, ends)
            else:
                position = item.header.position
                outside = outside_int64(item)
                if outside is None:
                    yield from record_rows(item, ends)
                else:
                    yield as_tuple(problem_row(outside, base, entry.name))
    except Exception as e:  # a decoder bug must not sink the whole ingest: the file is reported, not skipped
        p = Problem(ProblemKind.UNREADABLE_FILE,
                    f"the decoder failed after byte {position} ({type(e).__name__}: {e}); the rest of this file "
                    "is not decoded. This is a bug in kraft-acl-replay: please report it with the file",
                    entry.uri, position)
        yield as_tuple(problem_row(p, base, entry.name))


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


def piece_bounds(stream: BinaryIO, start: int, end: int, length: int, known: int = 0) -> tuple[int, int] | None:
    """Where the piece [start, end) of a batch file begins and ends: `(a, b)` with `a` the first batch position
    >= start and `b` the first batch position >= end (the file's length when the chain of batch lengths breaks or the
    file ends first, so that the piece holding the break reads it and reports it as the whole-file decoder would).
    None when no batch starts in the piece. Walks batch headers only (12 bytes each), from `known`, a position
    where a batch is known to begin when it is not after `start` (the end of a prefix the lake holds), else from 0."""
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

    pos: int | None = known if 0 < known <= start else 0
    if start > 0 and pos == 0:
        stream.seek(0)  # a file whose first batch is not a batch at all is decoded (and reported) by piece 0 alone
        first = next(iter(batch_reader.iter_batch_frames(io.BytesIO(stream.read(128)), "")), None)
        if isinstance(first, Problem) and first.kind == ProblemKind.NOT_A_METADATA_LOG:
            return None
    while pos is not None and pos < start:
        pos = step(pos)
    if pos is None or pos >= end or pos >= length:
        return None
    a = pos
    if end >= length:  # the last piece reads to the end of the file, wherever the chain of lengths goes
        return a, length
    while pos is not None and pos < end and pos < length:
        pos = step(pos)
    return a, (length if pos is None else min(pos, length))


def _batch_items(stream: BinaryIO, entry: PlannedFile, *, start_position: int = 0, snapshot: bool = False,
                 ordered: bool = False) -> Iterator[Batch | Problem | native.RowChunk]:
    """A file's (or piece's) batches and problems; through the compiled decoder most batches come as row chunks
    already (`batch.read_rows`)."""
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
    bounds = piece_bounds(stream, entry.start, entry.end, entry.length, entry.batch_at)
    if bounds is None:
        return
    a, b = bounds
    stream.seek(a)
    limited = cast(BinaryIO, io.BufferedReader(_Limited(stream, b - a), buffer_size=1024 * 1024))
    yield from _batch_items(limited, entry, start_position=a, ordered=ordered)



def _decode_text(entry: PlannedFile, stream: IO[bytes], base: dict[str, Any]) -> Iterator[tuple[Any, ...]]:
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
            yield as_tuple(problem_row(item, here, entry.name))
        else:
            yield from record_rows(item, file_ends(here))


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


def open_planned(entry: PlannedFile) -> IO[bytes]:
    if entry.open_with == "local":
        return open(entry.local_path or entry.uri, "rb", buffering=1024 * 1024)
    if entry.open_with == "fsspec":
        import fsspec

        remote: IO[bytes] = fsspec.open(entry.uri, "rb").open()
        return remote
    if entry.open_with == "pyarrow":
        filesystem, path = pafs.FileSystem.from_uri(entry.uri)
        stream: IO[bytes] = filesystem.open_input_stream(path)
        return stream
    raise ValueError(f"{entry.uri}: no way to open it on an executor ({entry.open_with})")


def _unreadable(entry: PlannedFile, error: Exception) -> dict[str, Any]:
    p = Problem(ProblemKind.UNREADABLE_FILE, f"cannot open: {error}", entry.uri)
    base = {"source_file": entry.uri, "source_kind": entry.kind, "file_length": entry.length,
            "stream": stream_of(entry.kind)}
    return problem_row(p, base, entry.name)


def _emit(rows: Iterable[Any], buf: RowBuffer, tally: OffsetTally | None = None,
          counts: LogCounts | None = None) -> Iterator[Any]:
    """Arrow record batches of the rows: tuples are collected into batches, batches the compiled decoder made pass
    through (the rows are a set: their order within a file does not matter). Each batch is tallied on its way
    (when there is a `tally`: the ingest's tasks have one), and with `counts` (the summary's pass) shaped into the
    summary's rows."""
    for row in rows:
        if isinstance(row, tuple):
            buf.add(row)
            if buf.full:
                yield from _shaped(_tallied(buf.flush(), tally), counts)
        else:
            yield from _shaped(_tallied(row, tally), counts)


def _tallied(batch: Any, tally: OffsetTally | None) -> Any:
    if tally is not None:
        tally.add(batch)
    return batch


def _shaped(batch: Any, counts: LogCounts | None) -> Iterator[Any]:
    if counts is None:
        yield batch
    elif (rest := counts.shape(batch)) is not None:
        yield rest


class TaskRows:
    """A task's rows of one cluster on their way out: buffered into Arrow batches, tallied (when the driver can
    hear of it: `counters`, none on Spark Connect), shaped for the summary (`summary`), and tagged with the cluster
    in a `cluster_id` column when the files name one (an ingest of many clusters packs several into one task: each
    has its own tally and log counts, so the summary and the proof that no key repeats stay per cluster)."""

    def __init__(self, cluster: str | None, counters: Any, summary: bool) -> None:
        self.cluster, self._counters = cluster, counters
        self._buf = RowBuffer()
        self._tally = OffsetTally() if counters is not None else None
        self._counts = LogCounts() if summary else None

    def emit(self, rows: Iterable[Any]) -> Iterator[Any]:
        for batch in _emit(rows, self._buf, self._tally, self._counts):
            yield self._tagged(batch)

    def last(self) -> Iterator[Any]:
        """The last rows (and the log records' counts), then the offset tallies to the driver, as
        (cluster, tally) pairs."""
        if self._buf.rows:
            yield from map(self._tagged, _shaped(_tallied(self._buf.flush(), self._tally), self._counts))
        if self._counts is not None and (counted := self._counts.last()) is not None:
            yield self._tagged(counted)
        if self._tally is not None:
            self._counters[2].add([(self.cluster, t) for t in self._tally.tallies()])

    def _tagged(self, batch: Any) -> Any:
        if self.cluster is None:
            return batch
        return batch.append_column("cluster_id", pa.repeat(pa.scalar(self.cluster, pa.string()), batch.num_rows))


def _by_cluster(rows: Iterable[tuple[PlannedFile, Iterable[Any]]], counters: Any, summary: bool) -> Iterator[Any]:
    """The Arrow batches of a task's files' rows (`(entry, rows)` in turn), each cluster's through its own
    `TaskRows`."""
    out: TaskRows | None = None
    for entry, items in rows:
        if out is None or entry.cluster != out.cluster:
            if out is not None:
                yield from out.last()
            out = TaskRows(entry.cluster, counters, summary)
        yield from out.emit(items)
    if out is not None:
        yield from out.last()


def round_robin(plan: Sequence[PlannedFile], partitions: int) -> list[list[PlannedFile]]:
    """The entries per task when task i takes entries i, i+P, i+2P... of `plan`."""
    return [list(plan[i::partitions]) for i in range(partitions)]


def planned_streams(batches: Iterator[Any], tasks: Sequence[Sequence[PlannedFile]]
                    ) -> Iterator[tuple[PlannedFile, IO[bytes] | None, Exception | None]]:
    """Inside a `spark.range(len(tasks))` task: for each partition id i of its batches, the entries of `tasks[i]`
    opened as executors open them: (entry, stream, None), or (entry, None, the error) when it cannot be opened. Each
    stream is closed once the caller moves on."""
    for arrow_batch in batches:
        for part in arrow_batch.column("id").to_pylist():
            for entry in tasks[int(part)]:
                try:
                    stream = open_planned(entry)
                except Exception as e:
                    yield entry, None, e
                    continue
                try:
                    yield entry, stream, None
                finally:
                    stream.close()


def make_stream_decoder(tasks: Sequence[Sequence[PlannedFile]], counters: Any, summary: bool = False
                        ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files executors open themselves: partition i decodes the entries of `tasks[i]`
    (`ingest_plan.pack_tasks`). `summary`: it makes the summary pass's rows (`ingest_summary_rows`), not the decoded
    rows."""

    def rows(batches: Iterator[Any]) -> Iterator[tuple[PlannedFile, Iterable[Any]]]:
        for entry, stream, error in planned_streams(batches, tasks):
            if stream is None:
                yield entry, [as_tuple(_unreadable(entry, cast(Exception, error)))]
            else:
                yield entry, decode_rows(entry, stream)
            if counters is not None:
                counters[0].add(1)
                counters[1].add(entry.size)

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        return _by_cluster(rows(batches), counters, summary)

    return decode


def make_content_decoder(plan: dict[str, list[PlannedFile]], counters: Any, summary: bool = False
                         ) -> Callable[[Iterator[Any]], Iterator[Any]]:
    """The mapInArrow function for files Spark read for us (`binaryFile` rows with `path` and `content`);
    `summary` as for `make_stream_decoder`."""

    def rows(batches: Iterator[Any]) -> Iterator[tuple[PlannedFile, Iterable[Any]]]:
        for arrow_batch in batches:
            paths = arrow_batch.column("path").to_pylist()
            contents = arrow_batch.column("content")
            for i, path in enumerate(paths):
                data = contents[i].as_buffer()  # zero-copy: the file is not copied into a Python bytes again
                for entry in plan[path]:  # one entry, or one per cluster that names the file
                    reader = pa.BufferReader(data) if data is not None else io.BytesIO(b"")
                    yield entry, decode_rows(entry, cast(IO[bytes], reader))
                    if counters is not None:
                        counters[0].add(1)
                        counters[1].add(entry.length)
                del data

    def decode(batches: Iterator[Any]) -> Iterator[Any]:
        return _by_cluster(rows(batches), counters, summary)

    return decode

