"""The reference replayer: DESIGN.md §3 as plain Python, one record at a time. The Spark replay is held to it.

Input is what the decoder produces: log batches (segments, dump-log text) and snapshots, from any number of
possibly overlapping dumps of one cluster. The replayer

1. merges the log into one record per offset. Copies at one offset with the same leader epoch are the same record
   (Raft's log matching); a binary copy is preferred to one parsed from dump-log text, which may have lost bytes.
   Different records at one offset mean a truncated uncommitted suffix: the copy with the higher epoch wins, and a
   record whose epoch is below the epoch of an earlier chosen record belongs to a truncated suffix too (epochs
   never decrease along a Raft log). Both are reported as `divergence`;
2. applies the records strictly in offset order with the controller's transaction semantics (records after Begin
   are held, become visible with the End, are dropped at Abort; an open transaction at the end is pending), each
   change visible where a node publishes it: at the last offset of its batch (of the End's batch in a transaction),
   since nodes apply and publish whole batches (`LogRuns.published_offset`);
3. loads each complete snapshot atomically at its last contained offset `q = E-1`: the state becomes exactly the
   snapshot's ACLs there;
4. returns ACL lifetimes with exact or uncertain bounds, the visible events, coverage and anomalies, and answers
   the state as of any offset or time.

**Bounds where history has holes (rule 5).** Every ACL id is observed at known places: its own records (at their
visible offset) and every snapshot (which says whether the id is live there, and with what content). Ids are never
reused, so when a snapshot at `q` shows a state the log cannot explain (the id appears, disappears or changes
content), the change happened at an offset we have no record of, after `p`, the last place the id's previous state
was known (its last record or the previous snapshot, whichever is later). The change therefore lies in
`W = {offsets in (p, q] that are in no dump}`: it began or ended somewhere in `[min W, max W]`, so the ACL is
possibly live from `min W` and certainly live from `max W` (or certainly gone from `max W`). An empty `W` means
the log before the snapshot contradicts it: a `snapshot_mismatch`, and the snapshot's state applies at `q`.

ACLs that nobody ever recorded (created in a hole and removed in a hole, or by a remove record of an id we never
saw) leave the history **incomplete** where they could have been live: from the first hole after a snapshot up to
the last hole or unknown remove before the next snapshot, and from the first hole after the last snapshot to the
end of known history.

Offsets are log offsets; "as of N" means after applying every visible record with offset <= N, at a batch
boundary: an N inside a batch answers as of the offset before the batch (its changes are visible at its end).
Lifetime bounds use half-open intervals: live on [valid_from_offset, valid_to_offset). An uncertain start means it
began somewhere in [valid_from_min_offset, valid_from_offset]; an uncertain end means it ended somewhere in
[valid_to_min_offset, valid_to_offset] (valid_to_offset None: maybe still live at the end of known history).
"""

from __future__ import annotations

import bisect
import hashlib
from array import array
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from enum import Enum
from itertools import accumulate
from typing import BinaryIO, NamedTuple, overload

from . import anomaly_text as msg
from .acl import AclBinding
from .as_of import Unpublished, unpublished_at
from .model import ABORT_TRANSACTION_RECORD as TXN_ABORT
from .model import ACL_ENTRY_RECORD as ACL_ENTRY
from .model import BEGIN_TRANSACTION_RECORD as TXN_BEGIN
from .model import END_TRANSACTION_RECORD as TXN_END
from .model import REMOVE_ACL_ENTRY_RECORD as ACL_REMOVE
from .model import Batch, BatchHeader, Problem, ProblemKind, Record
from .native import BatchRun
from .schemas import METADATA_SCHEMAS

_RELEVANT = frozenset({ACL_ENTRY, ACL_REMOVE, TXN_BEGIN, TXN_END, TXN_ABORT})
# The api keys whose values a replay decodes (`batch.read_file(records_for=...)`): the ACL and transaction records,
# and every key no schema knows (a record of an unknown type might matter; decoding it reports it). Other records
# count by their offsets only.
NEEDED_RECORDS = _RELEVANT | frozenset(range(0x8000)).difference(METADATA_SCHEMAS)


class Change(str, Enum):
    CREATE = "CREATE"
    REMOVE = "REMOVE"


class Cause(str, Enum):
    RECORD = "RECORD"  # an ACL record outside any transaction
    TRANSACTION = "TRANSACTION"  # an ACL record made visible by EndTransaction
    REPLACE = "REPLACE"  # an AccessControlEntryRecord reusing a live id with other content
    SNAPSHOT_LOAD = "SNAPSHOT_LOAD"  # a snapshot's atomic load changed the state


class CoverageKind(str, Enum):
    LOG = "log"
    SNAPSHOT = "snapshot"
    MISSING = "missing"


@dataclass(frozen=True, slots=True)
class AclEvent:
    """One visible change. `offset` is where it became visible; uncertain ones happened in [offset_min, offset]."""

    offset: int
    time: int | None
    acl_id: str
    change: Change
    cause: Cause
    binding: AclBinding
    record_offset: int | None  # where the record physically is (None for snapshot loads)
    offset_min: int  # == offset when exact
    exact: bool = True
    seq: int = 0  # 1-based position in `event_order`


def event_order(e: AclEvent) -> tuple[int, int, int, int, str]:
    """The order events apply in: by offset; at one offset log records (by record offset) before a snapshot load;
    a remove before a create (a replacement); then by id. The Spark replay numbers its events the same way."""
    return (e.offset, 1 if e.record_offset is None else 0, -1 if e.record_offset is None else e.record_offset,
            0 if e.change == Change.REMOVE else 1, e.acl_id)


@dataclass(slots=True)
class AclLifetime:
    """One row of acl_history."""

    acl_id: str
    binding: AclBinding
    valid_from_offset: int  # certainly live from here
    valid_from_min_offset: int  # may have been live from here (== valid_from_offset when exact)
    valid_from_time: int | None
    began_by: Cause
    valid_to_offset: int | None = None  # certainly gone from here; None: live at the end of history
    valid_to_min_offset: int | None = None  # may be gone from here (== valid_to_offset when exact)
    valid_to_time: int | None = None
    ended_by: Cause | None = None

    @property
    def from_exact(self) -> bool:
        return self.valid_from_min_offset == self.valid_from_offset

    @property
    def to_exact(self) -> bool:
        return self.valid_to_min_offset == self.valid_to_offset

    def certainly_live_at(self, offset: int) -> bool:
        if offset < self.valid_from_offset:
            return False
        end = self.valid_to_min_offset
        return end is None or offset < end

    def possibly_live_at(self, offset: int) -> bool:
        if offset < self.valid_from_min_offset:
            return False
        if self.valid_to_min_offset is None:
            return True
        return self.valid_to_offset is None or offset < self.valid_to_offset


@dataclass(frozen=True, slots=True)
class CoverageRange:
    start_offset: int
    end_offset: int  # inclusive
    kind: CoverageKind
    source: str = ""


@dataclass(frozen=True, slots=True)
class AclState:
    """The state as of one offset: what is certainly live, what may or may not be, and whether it is known."""

    offset: int
    certain: dict[str, AclBinding]
    uncertain: dict[str, AclBinding]
    covered: bool  # False when the offset lies in a hole, before the first known offset or after the last
    complete: bool = True  # False where ACLs nobody recorded may have been live (see the module docstring)
    unpublished: Unpublished | None = None  # the offset lies inside a batch or transaction: what it holds back

    @property
    def exact(self) -> bool:
        return self.covered and self.complete and not self.uncertain


@dataclass(slots=True)
class LogEntry:
    """The chosen copy of one log offset. Only ACL and transaction records keep their decoded record."""

    offset: int
    epoch: int
    time: int
    digest: bytes
    record: AclRecord | None
    source: str
    position: int
    batch_last_offset: int
    text: bool = False  # parsed from kafka-dump-log text: bytes may be missing, so not comparable byte for byte
    row: int = -1  # the batch copy it comes from (`_LogCopies`)


@dataclass(slots=True)
class SnapshotImage:
    end_offset: int
    epoch: int
    time: int | None
    acls: dict[str, AclBinding]
    source: str

    @property
    def at(self) -> int:
        return self.end_offset - 1


class TimeSpan(NamedTuple):
    """A stretch of the time index kept in its file: the batches at `position` (`size` bytes) of `path`, each an
    entry (its last offset, its append time); `first` and `last` are the offsets of its first and last entry."""

    first: int
    last: int
    last_time: int
    min_time: int
    path: str
    position: int
    size: int

    def entries(self) -> tuple[array[int], array[int]]:
        with open(self.path, "rb") as f:
            f.seek(self.position)
            data = f.read(self.size)
        offsets, times = array("q"), array("q")
        for h in span_headers(data, self.path, self.position):
            offsets.append(h.last_offset)
            times.append(h.max_timestamp)
        if not offsets or offsets[0] != self.first or offsets[-1] != self.last:
            raise OSError(f"{self.path}: the batches at byte {self.position} read differently now; "
                          "was the file changed during the replay?")
        return offsets, times


class OffsetTimes(Sequence[tuple[int, int]]):
    """The time index, (offset, time) by offset, one per batch (and snapshot).

    Entries are kept in two compact columns, except those of spans of batches (`TimeSpan`, disjoint, in offset
    order), which stay in their files and are read again when a question lands in them: the index costs memory per
    span, not per batch. Where an entry and a span's entry share an offset, the greater time counts."""

    def __init__(self, pairs: Iterable[tuple[int, int]] = (), spans: Iterable[TimeSpan] = ()) -> None:
        self.offsets = array("q")
        self.times = array("q")
        for offset, time in pairs:
            self.offsets.append(offset)
            self.times.append(time)
        self.spans = list(spans)
        self._span_firsts = array("q", (span.first for span in self.spans))
        self._loaded: tuple[int, array[int], array[int]] | None = None  # the last span read again
        self._suffix_min: array[int] | None = None

    @classmethod
    def of_columns(cls, offsets: array[int], times: array[int]) -> OffsetTimes:
        """The index from its two columns, already in offset order with one entry per offset (a lake's
        `offset_times` rows of one cluster), kept as given rather than copied pair by pair."""
        if len(offsets) != len(times):
            raise ValueError(f"{len(offsets)} offsets but {len(times)} times")
        index = cls()
        index.offsets, index.times = offsets, times
        return index

    def _span_entries(self, i: int) -> tuple[array[int], array[int]]:
        if self._loaded is None or self._loaded[0] != i:
            self._loaded = (i, *self.spans[i].entries())
        return self._loaded[1], self._loaded[2]

    def _merged(self) -> Iterator[tuple[int, int]]:
        """Every entry in offset order, one per offset."""
        k, n = 0, len(self.offsets)
        for i, span in enumerate(self.spans):
            while k < n and self.offsets[k] < span.first:
                yield self.offsets[k], self.times[k]
                k += 1
            for offset, time in zip(*self._span_entries(i), strict=True):
                while k < n and self.offsets[k] < offset:
                    yield self.offsets[k], self.times[k]
                    k += 1
                if k < n and self.offsets[k] == offset:
                    time = max(time, self.times[k])
                    k += 1
                yield offset, time
        while k < n:
            yield self.offsets[k], self.times[k]
            k += 1

    def __len__(self) -> int:
        if not self.spans:
            return len(self.offsets)
        return sum(1 for _ in self._merged())

    @overload
    def __getitem__(self, i: int) -> tuple[int, int]: ...

    @overload
    def __getitem__(self, i: slice) -> list[tuple[int, int]]: ...

    def __getitem__(self, i: int | slice) -> tuple[int, int] | list[tuple[int, int]]:
        if self.spans:
            return list(self._merged())[i]
        if isinstance(i, slice):
            return list(zip(self.offsets[i], self.times[i], strict=True))
        return self.offsets[i], self.times[i]

    def __iter__(self) -> Iterator[tuple[int, int]]:
        return self._merged()

    def __eq__(self, other: object) -> bool:
        if isinstance(other, OffsetTimes | list | tuple):
            return list(self) == list(other)
        return NotImplemented

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"OffsetTimes({list(self)!r})"

    def _time_at(self, offset: int) -> int | None:
        """The time of the entry exactly at `offset`, if there is one."""
        found = None
        k = bisect.bisect_left(self.offsets, offset)
        if k < len(self.offsets) and self.offsets[k] == offset:
            found = self.times[k]
        i = bisect.bisect_right(self._span_firsts, offset) - 1
        if i >= 0 and offset <= self.spans[i].last:
            offsets, times = self._span_entries(i)
            j = bisect.bisect_left(offsets, offset)
            if j < len(offsets) and offsets[j] == offset:
                found = times[j] if found is None else max(found, times[j])
        return found

    def time_of(self, offset: int) -> int | None:
        """The time of the last index entry at or before `offset`."""
        k = bisect.bisect_right(self.offsets, offset)
        at = self.offsets[k - 1] if k else None
        i = bisect.bisect_right(self._span_firsts, offset) - 1
        if i >= 0:
            span = self.spans[i]
            if offset >= span.last:
                in_span = span.last
            else:
                offsets, _ = self._span_entries(i)
                in_span = offsets[bisect.bisect_right(offsets, offset) - 1]
            at = in_span if at is None else max(at, in_span)
        return None if at is None else self._time_at(at)

    def offset_at_time(self, time_ms: int) -> int | None:
        """The greatest offset whose time is <= time_ms (None if no entry is that old).

        Append times need not grow with offsets (clock skew between leaders): the columns are searched by bisecting
        the running minimum of their times from the end; spans by their least time, from the last one back."""
        if self._suffix_min is None:
            mins = array("q", self.times)
            for k in range(len(mins) - 2, -1, -1):
                if mins[k + 1] < mins[k]:
                    mins[k] = mins[k + 1]
            self._suffix_min = mins
        k = bisect.bisect_right(self._suffix_min, time_ms)
        best = self.offsets[k - 1] if k else None
        for i in range(len(self.spans) - 1, -1, -1):
            span = self.spans[i]
            if best is not None and span.last <= best:
                break
            if span.min_time > time_ms:
                continue
            offsets, times = self._span_entries(i)
            j = max(j for j in range(len(times)) if times[j] <= time_ms)
            best = offsets[j] if best is None else max(best, offsets[j])
            break
        if best is None:
            return None
        time = self._time_at(best)
        if time is not None and time <= time_ms:
            return best
        # a column entry and a span entry share `best` and the greater time is too late: walk everything
        found = None
        for offset, time in self._merged():
            if time <= time_ms:
                found = offset
        return found


@dataclass(slots=True)
class ReplayResult:
    lifetimes: list[AclLifetime]
    events: list[AclEvent]
    coverage: list[CoverageRange]
    anomalies: list[Problem]
    times: OffsetTimes = field(default_factory=OffsetTimes)  # (offset, time), by offset, one per batch
    last_offset: int | None = None
    incomplete: list[tuple[int, int]] = field(default_factory=list)  # inclusive offset ranges, see AclState

    def is_complete_at(self, offset: int) -> bool:
        return not any(lo <= offset <= hi for lo, hi in self.incomplete)

    def offset_at_time(self, time_ms: int) -> int | None:
        """DESIGN.md §3.8: the last offset whose time is <= time_ms (None if no known record is that old).

        Append times need not grow with offsets (clock skew between leaders): see `OffsetTimes.offset_at_time`.
        """
        return self.times.offset_at_time(time_ms)

    def time_of(self, offset: int) -> int | None:
        """The time of `offset` as the index knows it: that of the last entry at or before it."""
        return self.times.time_of(offset)

    def state_at(self, offset: int) -> AclState:
        certain: dict[str, AclBinding] = {}
        uncertain: dict[str, AclBinding] = {}
        for life in self.lifetimes:
            if life.certainly_live_at(offset):
                certain[life.acl_id] = life.binding
            elif life.possibly_live_at(offset):
                uncertain[life.acl_id] = life.binding
        covered = any(c.start_offset <= offset <= c.end_offset and c.kind != CoverageKind.MISSING for c in self.coverage)
        held = unpublished_at(offset, ((e.offset, e.record_offset, e.cause.value) for e in self.events))
        return AclState(offset, certain, uncertain, covered, self.is_complete_at(offset), held)

    def state_at_time(self, time_ms: int) -> AclState | None:
        offset = self.offset_at_time(time_ms)
        return None if offset is None else self.state_at(offset)

    def live_at_end(self) -> dict[str, AclBinding]:
        return {life.acl_id: life.binding for life in self.lifetimes if life.valid_to_offset is None}


def snapshot_time(first: Record) -> int | None:
    """A snapshot's time (DESIGN.md §3.8): its SnapshotHeader's lastContainedLogTimestamp, if `first` (the file's
    first record) is that header and the time is set."""
    if first.type_name != "SNAPSHOT_HEADER" or first.data is None:
        return None
    return int(first.data.get("lastContainedLogTimestamp", 0)) or None


def _acl_id(record: Record) -> str:
    assert record.data is not None
    return str(record.data["id"])


def _digest(record: Record) -> bytes:
    h = hashlib.sha256()
    for part in (record.key, record.value):
        h.update(b"\x00" if part is None else len(part).to_bytes(4, "big") + part)
    return h.digest()


class LogRuns:
    """The offsets known from the log, as maximal runs; answers which offsets of a range are in no dump."""

    def __init__(self, runs: list[tuple[int, int]]) -> None:
        self.runs = runs
        self._starts = [s for s, _ in runs]

    def _run_at(self, offset: int) -> tuple[int, int] | None:
        i = bisect.bisect_right(self._starts, offset) - 1
        return self.runs[i] if i >= 0 and self.runs[i][1] >= offset else None

    def unknown_min(self, after: int, upto: int) -> int | None:
        """The smallest offset in (after, upto] that no log record covers."""
        x = after + 1
        run = self._run_at(x)
        if run is not None:
            x = run[1] + 1
        return x if x <= upto else None

    def covers(self, offset: int) -> bool:
        return self._run_at(offset) is not None

    def published_offset(self, entry: LogEntry) -> int:
        """Where the change of `entry`'s record becomes visible: nodes apply and publish whole batches (DESIGN.md §2:
        a CreateAcls call is one atomic batch), so at its batch's last offset, or at the last offset kept when a
        high watermark cuts the batch."""
        run = self._run_at(entry.offset)
        last = max(entry.batch_last_offset, entry.offset)
        return last if run is None else min(last, run[1])

    def unknown_between(self, after: int, before: int) -> bool:
        """Whether some offset strictly between `after` and `before` is in no dump."""
        return self.unknown_min(after, before - 1) is not None

    def unknown_max(self, after: int, upto: int) -> int | None:
        """The greatest offset in (after, upto] that no log record covers."""
        run = self._run_at(upto)
        x = upto if run is None else run[0] - 1
        return x if x > after else None


class _RecordCopy(NamedTuple):
    """One record of a batch copy, as the choice between copies needs it."""

    offset: int
    digest: bytes
    record: AclRecord | None  # only ACL and transaction records


class _Kept(NamedTuple):
    """An ACL or transaction record of a plain row, with what the rules read of its batch."""

    record: AclRecord
    time: int
    position: int
    batch_last: int


# A span of batches read again from its file is at most this long (bytes): the cost of an overlap or a time lookup.
SPAN_BYTES = 1 << 20
_RANK_SHIFT = 16  # a span holds fewer than 2**16 batches (every batch is over 61 bytes)


class _Details:
    """The records of detailed rows, in compact columns: each record's offset and digest (40 bytes), and the ACL
    and transaction records as the rules read them."""

    def __init__(self) -> None:
        self._start: dict[int, tuple[int, int]] = {}  # row -> (first index, count)
        self._offsets = array("q")
        self._digests = bytearray()
        self._kept: dict[int, AclRecord] = {}  # index -> record

    def __contains__(self, row: int) -> bool:
        return row in self._start

    def add(self, row: int, copies: list[_RecordCopy]) -> None:
        self._start[row] = (len(self._offsets), len(copies))
        for copy in copies:
            if copy.record is not None:
                self._kept[len(self._offsets)] = copy.record
            self._offsets.append(copy.offset)
            self._digests += copy.digest

    def copies(self, row: int) -> list[_RecordCopy]:
        start, count = self._start[row]
        return [_RecordCopy(self._offsets[i], bytes(self._digests[i * _DIGEST:(i + 1) * _DIGEST]), self._kept.get(i))
                for i in range(start, start + count)]


_DIGEST = hashlib.sha256().digest_size


class _LogCopies:
    """Every copy of a log batch that was added, in compact columns, in the order added.

    A row stands for the records below the high watermark of one batch, or of a *span*: batches that follow each
    other in one binary file with consecutive offsets and one leader epoch (at most `SPAN_BYTES`), so that a log
    that overlaps nothing costs a row per megabyte, not per batch. A *plain* row came from a binary file and its
    records are exactly the offsets `first..last`: it keeps only its ACL and transaction records (`relevant`), and
    where its records are needed one by one (another copy overlaps it) they are read again from the file (a span is
    first split into its batches, `explode`). A *detailed* row (one batch) keeps every record's offset and digest
    (`details`): batches given in memory or parsed from dump-log text (nothing to read again), and batches whose
    record offsets are not simply consecutive.
    """

    def __init__(self) -> None:
        self.first = array("q")  # the row's smallest record offset
        self.last = array("q")  # and its greatest
        self.first_batch_last = array("q")  # the header's last offset of its first batch
        self.batch_last = array("q")  # the header's last offset of its last batch (time index entries sit there)
        self.epoch = array("q")
        self.time = array("q")  # the append time of its last batch
        self.min_time = array("q")  # the least append time of its batches
        self.position = array("q")
        self.size = array("q")
        self.batches = array("l")
        self.rank = array("q")  # the order added (a span's batches keep it, in their order)
        self.source = array("l")  # index into `sources`
        self.text = bytearray()
        self.sources: list[str] = []
        self._source_ids: dict[str, int] = {}
        self.relevant: dict[int, list[_Kept]] = {}
        self.bindings: dict[AclBinding, AclBinding] = {}  # one object per distinct binding (`_slim`, snapshots)
        self.details = _Details()
        self._files: dict[str, BinaryIO] = {}
        self._tail: tuple[int, int, int, int, str] | None = None  # `_tail_of` the row a span may go on in

    def __len__(self) -> int:
        return len(self.first)

    def _source_id(self, path: str) -> int:
        source = self._source_ids.get(path)
        if source is None:
            source = self._source_ids[path] = len(self.sources)
            self.sources.append(path)
        return source

    def add_plain(self, position: int, size: int, base: int, last: int, epoch: int, time: int, source: str,
                  text: bool, high_watermark: int | None) -> int | None:
        """A plain batch (its records are the offsets base..last): on the last row when it continues that row's
        span, else a row of its own; its row, or None when all of it lies at or above the high watermark."""
        kept = last if high_watermark is None else min(last, high_watermark - 1)
        if kept < base:
            return None
        row = self.extend_span(position, size, base, last, epoch, time, source) if kept == last and not text else None
        if row is None:
            row = self._append(base, kept, last, epoch, time, position, size, self._source_id(source), text,
                               len(self.first) << _RANK_SHIFT)
        return row

    def add_run(self, run: BatchRun, high_watermark: int | None) -> None:
        """The batches of a run (`native.BatchRun`: plain, without a kept record, each following the one before in
        its file, offsets and epoch) as `add_plain` adds them one by one, but many at a time where they go on the
        last row's span."""
        positions, sizes, lasts, times = run.positions, run.sizes, run.last_offsets, run.times
        ends = list(accumulate(sizes))  # the run's bytes up to the end of each batch
        count = len(positions)
        # from `below` on, batches reach the high watermark: one at a time (cut, or left out)
        below = count if high_watermark is None else bisect.bisect_left(lasts, high_watermark)
        i = 0
        while i < count:
            taken = self._extend_span_by(run, i, below, ends) if i < below else i
            if taken == i:
                self.add_plain(positions[i], sizes[i], run.base_offsets[i], lasts[i], run.epochs[i], times[i],
                               run.source, False, high_watermark)
                taken = i + 1
            i = taken

    def _extend_span_by(self, run: BatchRun, i: int, end: int, ends: list[int]) -> int:
        """Put batches `i`.. (before `end`) of a run on the last row's span, as many as fit in `SPAN_BYTES`; the
        index of the first batch not taken."""
        n = len(self.first) - 1
        tail = self._continued(n, run.positions[i], run.base_offsets[i], run.epochs[i], run.source)
        if tail is None:
            return i
        before = ends[i - 1] if i else 0
        k = bisect.bisect_right(ends, before + SPAN_BYTES - self.size[n], i, end)  # batches i..k-1 fit
        if k > i:
            self._grow(n, tail, run.positions[k - 1] + run.sizes[k - 1], run.last_offsets[k - 1],
                       ends[k - 1] - before, run.times[k - 1], min(run.times[i:k]), k - i)
        return k

    def add(self, batch: Batch, first: int, last: int, text: bool) -> int:
        h = batch.header
        return self._append(first, last, h.last_offset, h.partition_leader_epoch, batch.append_time, h.position,
                            h.size, self._source_id(batch.source), text, len(self.first) << _RANK_SHIFT)

    def _append(self, first: int, last: int, batch_last: int, epoch: int, time: int, position: int, size: int,
                source: int, text: bool, rank: int) -> int:
        self.first.append(first)
        self.last.append(last)
        self.first_batch_last.append(batch_last)
        self.batch_last.append(batch_last)
        self.epoch.append(epoch)
        self.time.append(time)
        self.min_time.append(time)
        self.position.append(position)
        self.size.append(size)
        self.batches.append(1)
        self.rank.append(rank)
        self.source.append(source)
        self.text.append(text)
        return len(self.first) - 1

    def extend_span(self, position: int, size: int, base: int, last: int, epoch: int, time: int,
                    source: str) -> int | None:
        """Add a whole binary batch to the last row when it continues that row's span; its row, else None."""
        n = len(self.first) - 1
        tail = self._continued(n, position, base, epoch, source)
        if tail is None or self.size[n] + size > SPAN_BYTES:
            return None
        self._grow(n, tail, position + size, last, size, time, time, 1)
        return n

    def _continued(self, n: int, position: int, base: int, epoch: int, source: str
                   ) -> tuple[int, int, int, int, str] | None:
        """Row `n`'s `_tail` when a batch at this position, offset, epoch and file goes on its span, else None."""
        tail = self._tail
        if (tail is None or tail[0] != n or tail[1] != position or tail[2] != base or tail[3] != epoch
                or tail[4] != source):
            tail = self._tail = self._tail_of(n)
            if tail is None or tail[1] != position or tail[2] != base or tail[3] != epoch or tail[4] != source:
                return None
        return tail

    def _grow(self, n: int, tail: tuple[int, int, int, int, str], end: int, last: int, size: int, time: int,
              min_time: int, batches: int) -> None:
        """Row `n`'s span goes on by `batches` batches of `size` bytes, ending at byte `end` and offset `last`."""
        self.last[n] = self.batch_last[n] = last
        self.size[n] += size
        self.time[n] = time
        if min_time < self.min_time[n]:
            self.min_time[n] = min_time
        self.batches[n] += batches
        self._tail = (n, end, last + 1, tail[3], tail[4])

    def _tail_of(self, n: int) -> tuple[int, int, int, int, str] | None:
        """What a batch must match to continue row `n`'s span: (row, byte position, base offset, epoch, file)."""
        if n < 0 or self.text[n] or n in self.details or self.batch_last[n] != self.last[n]:
            return None
        return (n, self.position[n] + self.size[n], self.last[n] + 1, self.epoch[n], self.sources[self.source[n]])

    def explode(self, row: int) -> list[int]:
        """A span's batches as rows of their own (appended; the span's row is left unused), with its records."""
        path, position = self.sources[self.source[row]], self.position[row]
        rows = []
        for i, h in enumerate(span_headers(self.read_raw(row), path, position)):
            rows.append(self._append(h.base_offset, h.last_offset, h.last_offset, h.partition_leader_epoch,
                                     h.max_timestamp, h.position, h.size, self.source[row], False,
                                     self.rank[row] + i))
        kept = self.relevant.pop(row, [])
        firsts = [self.first[r] for r in rows]
        for k in kept:
            self.relevant.setdefault(rows[bisect.bisect_right(firsts, k.record.offset) - 1], []).append(k)
        return rows

    def batch_positions(self, row: int) -> Iterator[tuple[int, int, int]]:
        """(byte position, first offset, last offset) of each batch of a row (a span's read again)."""
        if self.batches[row] == 1:
            yield self.position[row], self.first[row], self.last[row]
            return
        path = self.sources[self.source[row]]
        for h in span_headers(self.read_raw(row), path, self.position[row]):
            yield h.position, h.base_offset, h.last_offset

    def entry(self, row: int, offset: int, record: AclRecord | None, digest: bytes = b"") -> LogEntry:
        return LogEntry(offset, self.epoch[row], self.time[row], digest, record, self.sources[self.source[row]],
                        self.position[row], self.batch_last[row], bool(self.text[row]), row)

    def kept_entry(self, row: int, kept: _Kept) -> LogEntry:
        return LogEntry(kept.record.offset, self.epoch[row], kept.time, b"", kept.record,
                        self.sources[self.source[row]], kept.position, kept.batch_last, bool(self.text[row]), row)

    # ---- reading a plain row's bytes again
    def read_raw(self, row: int) -> bytes:
        return self.read_at(self.sources[self.source[row]], self.position[row], self.size[row])

    def read_at(self, path: str, position: int, size: int) -> bytes:
        stream = self._files.get(path)
        if stream is None:
            stream = self._files[path] = open(path, "rb")  # noqa: SIM115 - closed by `close`
        stream.seek(position)
        return stream.read(size)

    def records_of(self, row: int, high_watermark: int | None) -> list[_RecordCopy]:
        if row in self.details:
            return self.details.copies(row)
        path, position = self.sources[self.source[row]], self.position[row]
        again = decode_whole(self.read_at(path, position, self.size[row]), path, position, self.first[row])
        return [_record_copy(r, self.bindings) for r in again.records
                if high_watermark is None or r.offset < high_watermark]

    def close(self) -> None:
        for stream in self._files.values():
            stream.close()
        self._files.clear()


def span_headers(data: bytes, path: str, position: int) -> Iterator[BatchHeader]:
    """The headers of the batches in a span's bytes (read again from `path` at `position`)."""
    from .batch import RECORD_BATCH_OVERHEAD, parse_header

    at = 0
    while at < len(data):
        if len(data) - at < RECORD_BATCH_OVERHEAD:
            raise OSError(f"{path}: the batches at byte {position} read differently now; "
                          "was the file changed during the replay?")
        h = parse_header(data[at:at + RECORD_BATCH_OVERHEAD], position + at, crc_ok=True)
        if h.size <= 0:
            raise OSError(f"{path}: the batch at byte {position + at} reads differently now; "
                          "was the file changed during the replay?")
        yield h
        at += h.size


def decode_whole(data: bytes, path: str, position: int, base_offset: int) -> Batch:
    """A batch read again from its file, decoded whole (its problems were reported when it was first read)."""
    from .batch import decode_batch

    found = [item for item in decode_batch(data, position, path) if isinstance(item, Batch)]
    if not found or found[0].header.base_offset != base_offset:
        raise OSError(f"{path}: the batch at byte {position} (offset {base_offset}) reads differently now; "
                      "was the file changed during the replay?")
    return found[0]


def _is_relevant(record: Record) -> bool:
    return not record.is_control and record.api_key in _RELEVANT and record.data is not None


class AclRecord(NamedTuple):
    """What the rules read of an ACL or transaction record: its offset and type, and an ACL's id and binding."""

    offset: int
    api_key: int
    acl_id: str | None = None
    binding: AclBinding | None = None  # AccessControlEntryRecord only


def _slim(record: Record, bindings: dict[AclBinding, AclBinding]) -> AclRecord:
    """An ACL or transaction record as the rules read it (equal bindings shared through `bindings`)."""
    assert record.api_key is not None and record.data is not None
    if record.api_key == ACL_ENTRY:
        binding = AclBinding.from_record_data(record.data)
        return AclRecord(record.offset, ACL_ENTRY, _acl_id(record), bindings.setdefault(binding, binding))
    if record.api_key == ACL_REMOVE:
        return AclRecord(record.offset, ACL_REMOVE, _acl_id(record))
    return AclRecord(record.offset, record.api_key)


def _record_copy(record: Record, bindings: dict[AclBinding, AclBinding]) -> _RecordCopy:
    return _RecordCopy(record.offset, _digest(record), _slim(record, bindings) if _is_relevant(record) else None)


def _consecutive(batch: Batch) -> bool:
    """A whole batch whose records are exactly the offsets base..last of its header, in order."""
    h = batch.header
    records = batch.records
    if len(records) != h.last_offset_delta + 1:
        return False
    return all(r.offset == i for i, r in enumerate(records, h.base_offset))


def _plain_selection(batch: Batch, problem_here: bool) -> bool:
    """A batch decoded with `records_for` holds the offsets base..last of its header when nothing says otherwise:
    no decoder problem about it (a record that does not frame, a count that does not match the records walked),
    a record count that matches the header's offsets, and the records kept lie in order inside them. (Kafka's
    writers give the records of a batch the deltas 0..count-1; a record whose delta differs in a batch that frames
    cleanly and whose CRC matches was made so on purpose.)"""
    h = batch.header
    if problem_here or h.records_count != h.last_offset_delta + 1:
        return False
    previous = h.base_offset - 1
    for r in batch.records:
        if not previous < r.offset <= h.last_offset:
            return False
        previous = r.offset
    return True


class _TimeIndex:
    """Collects (offset, time) entries, keeping the greatest time per offset, in compact columns, and spans of
    batches whose entries stay in their files (`TimeSpan`)."""

    def __init__(self) -> None:
        self.offsets = array("q")
        self.times = array("q")
        self.spans: list[TimeSpan] = []
        self._sorted = True

    def add(self, offset: int, time: int) -> None:
        offsets, times = self.offsets, self.times
        if offsets and offset <= offsets[-1]:
            if offset == offsets[-1]:
                times[-1] = max(times[-1], time)
                return
            self._sorted = False
        offsets.append(offset)
        times.append(time)

    def add_span(self, span: TimeSpan) -> None:
        """A span's entries: its offsets are no other row's (it overlaps none), and spans come in offset order."""
        self.spans.append(span)

    def result(self) -> OffsetTimes:
        pairs: Iterable[tuple[int, int]] = zip(self.offsets, self.times, strict=True)
        if not self._sorted:
            best: dict[int, int] = {}
            for offset, time in pairs:
                best[offset] = max(time, best.get(offset, time))
            pairs = sorted(best.items())
        return OffsetTimes(pairs, self.spans)


@dataclass(slots=True)
class _ChosenLog:
    """The log after choosing between copies: pieces of consecutive offsets taken from one row each (in offset
    order, compact), and the chosen ACL and transaction records by offset."""

    start: array[int] = field(default_factory=lambda: array("q"))
    end: array[int] = field(default_factory=lambda: array("q"))
    row: array[int] = field(default_factory=lambda: array("l"))
    relevant: dict[int, LogEntry] = field(default_factory=dict)

    def add(self, start: int, end: int, row: int) -> None:
        if self.row and self.row[-1] == row and self.end[-1] == start - 1:
            self.end[-1] = end
            return
        self.start.append(start)
        self.end.append(end)
        self.row.append(row)


class Replayer:
    """Collect log batches and snapshots of one cluster, then `run()` once.

    `high_watermark`: the committed point if the user knows it (records with offset >= it are uncommitted and not
    applied). Without it everything on disk counts as committed (DESIGN.md §3.7).

    Memory: the ACL and transaction records (offset, type, id, binding) and the snapshots' ACLs, plus a row of a few
    numbers per span of batches in a binary file (up to `SPAN_BYTES`; a batch where copies overlap), and a span of
    the time index each; records of other types are not kept. Batches given in memory or as dump-log text, which
    cannot be read again, keep an offset and a digest per record (40 bytes) to compare copies.
    """

    def __init__(self, high_watermark: int | None = None) -> None:
        self.high_watermark = high_watermark
        self._copies = _LogCopies()
        self._snapshots: dict[int, list[SnapshotImage]] = {}  # end offset -> loadable copies
        self._anomalies: list[Problem] = []

    # ---- input -------------------------------------------------------------------------------------------
    def add_log(self, items: Iterable[Batch | Problem | BatchRun], text: bool = False, *, from_file: bool = False,
                records_for: frozenset[int] | None = None) -> None:
        """Log batches in any order, from any number of dumps; problems are passed through to the anomalies.

        `text`: the batches were parsed from kafka-dump-log output (see `LogEntry.text`). `from_file`: each batch's
        `source` is the binary file it was decoded from (`header.position` is where it starts), so its records can
        be read again when another copy overlaps it instead of being kept. `records_for`: the batches were decoded
        with `batch.read_file(..., records_for=...)` (it must hold the ACL and transaction types; needs
        `from_file`): they hold only the records of these types, and the offsets of the others are known from the
        header (`_plain_selection`; a batch it cannot vouch for is read again whole). With `records_for`, the
        batches that keep no record may come together as `native.BatchRun`s (`batch.read_log_file_in_runs`).
        """
        if records_for is not None and not (from_file and records_for >= _RELEVANT):
            raise ValueError("records_for needs from_file and must hold the ACL and transaction record types")
        problem_at: tuple[str | None, int | None] | None = None
        for item in items:
            if isinstance(item, Problem):
                self._anomalies.append(item)
                problem_at = (item.file, item.position)
                continue
            if isinstance(item, BatchRun):  # plain batches without records, no problem before any of them
                if records_for is None:
                    raise ValueError("batch runs come from reading with records_for")
                self._copies.add_run(item, self.high_watermark)
                problem_at = None
                continue
            header = item.header
            here = problem_at == (item.source, header.position)
            problem_at = None
            if not header.crc_ok:
                self._anomalies.append(
                    Problem(
                        ProblemKind.SKIPPED_BAD_BATCH,
                        msg.BAD_CRC_BATCH,
                        item.source,
                        header.position,
                        header.base_offset,
                    )
                )
                continue
            batch = item
            if records_for is not None:
                if _plain_selection(batch, here):
                    self._add_plain(batch, text)
                    continue
                raw = self._copies.read_at(batch.source, header.position, header.size)
                batch = decode_whole(raw, batch.source, header.position, header.base_offset)
            if from_file and _consecutive(batch):
                self._add_plain(batch, text)
            else:
                self._add_detailed(batch, text)

    def _add_plain(self, batch: Batch, text: bool) -> None:
        h = batch.header
        c = self._copies
        row = c.add_plain(h.position, h.size, h.base_offset, h.last_offset, h.partition_leader_epoch,
                          batch.append_time, batch.source, text, self.high_watermark)
        if row is None or not batch.records:
            return
        last = h.last_offset if self.high_watermark is None else min(h.last_offset, self.high_watermark - 1)
        time = batch.append_time
        relevant = [_Kept(_slim(r, c.bindings), time, h.position, h.last_offset) for r in batch.records
                    if r.offset <= last and _is_relevant(r)]
        if relevant:
            c.relevant.setdefault(row, []).extend(relevant)

    def _add_detailed(self, batch: Batch, text: bool) -> None:
        hw = self.high_watermark
        copies = [_record_copy(r, self._copies.bindings) for r in batch.records if hw is None or r.offset < hw]
        if not copies:
            return
        offsets = [c.offset for c in copies]
        row = self._copies.add(batch, min(offsets), max(offsets), text)
        self._copies.details.add(row, copies)

    def add_snapshot(
        self, end_offset: int, epoch: int, items: Iterable[Batch | Problem], source: str = ""
    ) -> None:
        """One snapshot file: `end_offset` is exclusive (the file name's first number).

        A snapshot is loaded only when it decoded cleanly from its SnapshotHeader to its SnapshotFooter: any problem
        inside it (a bad CRC, a record that does not decode, a missing header or footer; notices aside) means we
        cannot know its ACL set, and loading part of it would invent removals.
        """
        acls: dict[str, AclBinding] = {}
        bindings = self._copies.bindings
        header_seen = footer_seen = False
        problems: list[str] = []
        time: int | None = None
        first = True
        for item in items:
            if isinstance(item, Problem):
                self._anomalies.append(item)
                if not item.is_notice:  # e.g. an unknown tagged field: the record is still whole
                    problems.append(item.kind.value)
                first = False
                continue
            if not item.header.crc_ok:
                problems.append("bad_crc")
            for record in item.records:
                if first:
                    first = False
                    header_seen = record.type_name == "SNAPSHOT_HEADER"
                    time = snapshot_time(record)
                if record.type_name == "SNAPSHOT_FOOTER":
                    footer_seen = True
                if not record.is_control and record.api_key == ACL_ENTRY and record.data is not None:
                    binding = AclBinding.from_record_data(record.data)
                    acls[_acl_id(record)] = bindings.setdefault(binding, binding)
            first = False
        if not header_seen and "snapshot_no_header" not in problems:
            self._anomalies.append(
                Problem(ProblemKind.SNAPSHOT_NO_HEADER, msg.SNAPSHOT_NO_HEADER,
                        source, 0, end_offset - 1)
            )
            problems.append("snapshot_no_header")
        if not footer_seen and "snapshot_no_footer" not in problems:
            self._anomalies.append(
                Problem(ProblemKind.SNAPSHOT_NO_FOOTER, msg.SNAPSHOT_NO_FOOTER,
                        source, None, end_offset - 1)
            )
            problems.append("snapshot_no_footer")
        if problems:
            kinds = ", ".join(sorted(set(problems)))
            self._anomalies.append(
                Problem(ProblemKind.SNAPSHOT_NOT_LOADED,
                        msg.SNAPSHOT_NOT_LOADED.format(end_offset=end_offset, epoch=epoch, kinds=kinds), source, None,
                        end_offset - 1)
            )
            return
        if end_offset <= 0:
            return
        if self.high_watermark is not None and end_offset > self.high_watermark:
            return
        self._snapshots.setdefault(end_offset, []).append(SnapshotImage(end_offset, epoch, time, acls, source))

    # ---- replay ------------------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        try:
            chosen = self._choose_log_copies()
            self._drop_truncated_suffixes(chosen)
        finally:
            self._copies.close()
        runs = LogRuns(_piece_runs(chosen))
        snapshots = [self._choose_snapshot(e) for e in sorted(self._snapshots)]
        log_last = runs.runs[-1][1] if runs.runs else None
        last = max(([log_last] if log_last is not None else []) + [s.at for s in snapshots], default=None)
        relevant = [chosen.relevant[o] for o in sorted(chosen.relevant)]
        visible, spanning_ends = resolve_transactions(relevant, runs, last, self._anomalies)
        state = ReplayState(self._anomalies, runs, spanning_ends)
        stream: list[tuple[int, int, int, Visible | SnapshotImage]] = [
            (v.offset, 0, v.entry.offset, v) for v in visible
        ]
        stream += [(s.at, 1, 0, s) for s in snapshots]
        stream.sort(key=lambda item: item[:3])
        for *_, item in stream:
            if isinstance(item, SnapshotImage):
                state.load_snapshot(item)
            else:
                state.apply(item)
        if last is not None:
            state.finish(last)
        coverage = coverage_ranges(runs.runs, [(s.at, s.source) for s in snapshots])
        state.anomalies.extend(gap_problems(coverage, [s.at for s in snapshots]))
        times = self._time_index(chosen, runs, snapshots)
        events = sorted(state.events, key=event_order)
        events = [_with_seq(e, i) for i, e in enumerate(events, 1)]
        return ReplayResult(state.lifetimes(), events, coverage, state.anomalies, times, last, state.incomplete)

    def _choose_log_copies(self) -> _ChosenLog:
        """Per offset the copy with the highest epoch (a binary copy before a text one, then the first source).

        Other copies with a lower epoch are a truncated suffix; a copy with the same epoch but other bytes is
        reported unless exactly one of the two came from dump-log text (which does not carry every byte).
        Rows that overlap no other row are taken whole; where rows overlap, their records are compared one by one
        (`_choose_per_record`).
        """
        c = self._copies
        first, last = c.first, c.last
        n = len(c)
        order: Iterable[int] = range(n)
        if any(first[i] > first[i + 1] for i in range(n - 1)):
            order = array("l", sorted(range(n), key=first.__getitem__))
        chosen = _ChosenLog()
        divergences: list[tuple[tuple[int, int], Problem]] = []
        for group in _overlapping(order, first, last):
            if len(group) > 1 and any(c.batches[row] > 1 for row in group):
                rows = [r for row in group for r in (c.explode(row) if c.batches[row] > 1 else [row])]
                for part in _overlapping(sorted(rows, key=first.__getitem__), first, last):
                    self._choose_in_group(part, chosen, divergences)
            else:
                self._choose_in_group(group, chosen, divergences)
        divergences.sort(key=lambda d: d[0])  # in the order the offsets were first added, as one record at a time
        self._anomalies.extend(p for _, p in divergences)
        return chosen

    def _choose_in_group(self, group: list[int], chosen: _ChosenLog,
                         divergences: list[tuple[tuple[int, int], Problem]]) -> None:
        """Rows whose offsets overlap (transitively), or one row alone."""
        c = self._copies
        plain = not any(row in c.details for row in group)
        if plain and len(group) > 1:
            raw = [c.read_raw(row) for row in group]
            if all(r == raw[0] for r in raw[1:]):  # byte-identical copies hold the same records: take one whole
                group = [min(group, key=lambda row: (c.sources[c.source[row]], c.position[row]))]
        if plain and len(group) == 1:
            row = group[0]
            chosen.add(c.first[row], c.last[row], row)
            for kept in c.relevant.get(row, ()):
                chosen.relevant[kept.record.offset] = c.kept_entry(row, kept)
            return
        self._choose_per_record(sorted(group, key=c.rank.__getitem__), chosen, divergences)

    def _choose_per_record(self, rows: list[int], chosen: _ChosenLog,
                           divergences: list[tuple[tuple[int, int], Problem]]) -> None:
        """Copies at one offset with the same epoch and bytes are one record (the preferred copy is kept); then
        the copies are ranked (see `_choose_log_copies`). `rows` in the order they were added."""
        c = self._copies
        log: dict[int, dict[tuple[int, bytes], LogEntry]] = {}
        first_seen: dict[int, tuple[int, int]] = {}
        for row in rows:
            for rank, copy in enumerate(c.records_of(row, self.high_watermark)):
                entry = c.entry(row, copy.offset, copy.record, copy.digest)
                copies = log.get(copy.offset)
                if copies is None:
                    copies = log[copy.offset] = {}
                    first_seen[copy.offset] = (c.rank[row], rank)
                key = (entry.epoch, entry.digest)
                old = copies.get(key)
                if old is None or _preference(entry) < _preference(old):
                    copies[key] = entry
        for offset in sorted(log):
            ranked = sorted(log[offset].values(), key=_preference)
            winner = ranked[0]
            for loser in ranked[1:]:
                if loser.epoch != winner.epoch:
                    why = msg.OLDER_EPOCH_LOSES.format(winner_epoch=winner.epoch, winner_source=winner.source,
                                                        epoch=loser.epoch, source=loser.source)
                elif loser.text == winner.text:
                    why = msg.DAMAGED_COPY.format(epoch=winner.epoch, winner_source=winner.source,
                                                   source=loser.source)
                else:
                    continue  # dump-log text and a binary copy of the same record
                divergences.append((first_seen[offset], Problem(
                    ProblemKind.DIVERGENCE, msg.TWO_RECORDS.format(offset=offset, why=why), loser.source,
                    loser.position, offset)))
            chosen.add(offset, offset, winner.row)
            if winner.record is not None:
                chosen.relevant[offset] = winner

    def _drop_truncated_suffixes(self, chosen: _ChosenLog) -> None:
        """Epochs never decrease along a Raft log: records below the epoch of an earlier record are dropped."""
        c = self._copies
        start, end, rows = array("q"), array("q"), array("l")
        max_epoch = -1
        for a, b, row in zip(chosen.start, chosen.end, chosen.row, strict=True):
            epoch = c.epoch[row]
            if epoch < max_epoch:
                source = c.sources[c.source[row]]
                for position, first, last in c.batch_positions(row):
                    for offset in range(max(a, first), min(b, last) + 1):
                        self._anomalies.append(
                            Problem(
                                ProblemKind.DIVERGENCE,
                                msg.EPOCH_BELOW_EARLIER.format(offset=offset, epoch=epoch, max_epoch=max_epoch),
                                source,
                                position,
                                offset,
                            )
                        )
                        chosen.relevant.pop(offset, None)
                continue
            max_epoch = epoch
            start.append(a)
            end.append(b)
            rows.append(row)
        chosen.start, chosen.end, chosen.row = start, end, rows

    def _time_index(self, chosen: _ChosenLog, runs: LogRuns, snapshots: list[SnapshotImage]) -> OffsetTimes:
        """DESIGN.md §3.8: each chosen batch's append time at its last offset (when that offset is in the log),
        and each snapshot's time at its last contained offset; the greatest time where several meet."""
        c = self._copies
        index = _TimeIndex()
        for a, b, row in zip(chosen.start, chosen.end, chosen.row, strict=True):
            if c.batches[row] > 1:  # a whole span (it overlaps no other row)
                assert a == c.first[row] and b == c.last[row] == c.batch_last[row]
                index.add_span(TimeSpan(c.first_batch_last[row], b, c.time[row], c.min_time[row],
                                        c.sources[c.source[row]], c.position[row], c.size[row]))
                continue
            at = c.batch_last[row]
            if a <= at <= b or runs.covers(at):
                index.add(at, c.time[row])
        times = index.result()
        for s in snapshots:
            if s.time is None:
                continue
            i = bisect.bisect_left(times.offsets, s.at)
            if i < len(times.offsets) and times.offsets[i] == s.at:
                times.times[i] = max(times.times[i], s.time)
            else:
                times.offsets.insert(i, s.at)
                times.times.insert(i, s.time)
        return times

    def _choose_snapshot(self, end_offset: int) -> SnapshotImage:

        ranked = sorted(self._snapshots[end_offset], key=lambda s: (-s.epoch, s.source))
        for other in ranked[1:]:
            if other.acls != ranked[0].acls:
                self._anomalies.append(
                    Problem(ProblemKind.DIVERGENCE,
                            msg.SNAPSHOTS_DIFFER.format(end_offset=end_offset, winner_epoch=ranked[0].epoch,
                                                         winner_source=ranked[0].source),
                            other.source, None, end_offset - 1)
                )
        return ranked[0]


def _overlapping(order: Iterable[int], first: array[int], last: array[int]) -> Iterator[list[int]]:
    """Rows (given by their first offset) in groups whose offsets overlap, transitively; a row alone is a group."""
    group: list[int] = []
    group_end = -1
    for row in order:
        if group and first[row] > group_end:
            yield group
            group = []
        group.append(row)
        group_end = max(group_end, last[row])
    if group:
        yield group


def _preference(entry: LogEntry) -> tuple[int, bool, str, int]:
    return (-entry.epoch, entry.text, entry.source, entry.position)


def _with_seq(e: AclEvent, seq: int) -> AclEvent:
    return AclEvent(e.offset, e.time, e.acl_id, e.change, e.cause, e.binding, e.record_offset, e.offset_min, e.exact,
                    seq)


def _piece_runs(chosen: _ChosenLog) -> list[tuple[int, int]]:
    """The chosen log's offsets as maximal runs of consecutive offsets (inclusive bounds)."""
    out: list[tuple[int, int]] = []
    for a, b in zip(chosen.start, chosen.end, strict=True):
        if out and a == out[-1][1] + 1:
            out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def coverage_ranges(log_ranges: list[tuple[int, int]], snapshot_points: list[tuple[int, str]]) -> list[CoverageRange]:
    """Known-from-log runs, snapshot-only points, and the missing stretches between them, from offset 0 on."""
    ranges = [CoverageRange(a, b, CoverageKind.LOG) for a, b in log_ranges]
    for at, source in snapshot_points:
        if not any(a <= at <= b for a, b in log_ranges):
            ranges.append(CoverageRange(at, at, CoverageKind.SNAPSHOT, source))
    ranges.sort(key=lambda r: r.start_offset)
    out: list[CoverageRange] = []
    expected = 0
    for r in ranges:
        if r.start_offset > expected:
            out.append(CoverageRange(expected, r.start_offset - 1, CoverageKind.MISSING))
        if r.end_offset >= expected:
            out.append(r)
        expected = max(expected, r.end_offset + 1)
    return out


def gap_problems(coverage: list[CoverageRange], snapshot_points: list[int]) -> list[Problem]:
    """One `gap` anomaly per stretch of offsets that no dump holds, saying whether a later snapshot bridges it."""
    out = []
    for r in coverage:
        if r.kind != CoverageKind.MISSING:
            continue
        after = [s for s in snapshot_points if s > r.end_offset]
        tail = msg.GAP_BRIDGED.format(bridge=min(after)) if after else msg.GAP_NOT_BRIDGED
        out.append(Problem(ProblemKind.GAP, msg.GAP.format(start=r.start_offset, end=r.end_offset, tail=tail),
                           None, None, r.start_offset))
    return out


@dataclass(frozen=True, slots=True)
class Visible:
    """An ACL record that becomes visible: where, when and why."""

    entry: LogEntry
    offset: int
    time: int
    cause: Cause


def resolve_transactions(entries: list[LogEntry], runs: LogRuns, last: int | None,
                         anomalies: list[Problem]) -> tuple[list[Visible], list[int]]:
    """Rule 2, also across holes: which ACL records become visible, where, and why.

    `entries` are the log's ACL and transaction records in offset order. Records after a Begin are held until the
    next End (visible there) or Abort (dropped); a transaction open at the end is pending. Kafka never leaves a
    transaction open across a snapshot, so holes that retention makes start and end outside transactions; a dump
    that misses other files can cut one, and then:

    * a record separated from the previous Begin/End/Abort by a hole is judged by the next marker: an End means it
      was held in a transaction begun (or still open) across the hole and becomes visible at that End, an Abort
      drops it, a Begin means no transaction was open; with no marker after it, it counts as committed (nothing
      tells otherwise; the hole is reported);
    * a held record whose End or Abort lies beyond a hole, or whose transaction may have closed in one, has an
      unknown fate and is not applied (the offsets around the hole are marked incomplete);
    * an End or Abort whose transaction spans a hole is not an anomaly, and such an End may have made records
      from inside the hole visible: its offset is returned so snapshot windows can include it.
    """
    markers = [e for e in entries if e.record is not None and e.record.api_key in (TXN_BEGIN, TXN_END, TXN_ABORT)]
    open_after: list[bool] = []  # whether a transaction is open after each marker
    opener: LogEntry | None = None  # the Begin of the transaction open now
    spanning_ends: list[int] = []
    prev_offset, is_open = -1, False
    for m in markers:
        assert m.record is not None
        key = m.record.api_key
        hole = runs.unknown_between(prev_offset, m.offset)
        if key == TXN_BEGIN:
            if is_open and not hole:
                assert opener is not None
                anomalies.append(Problem(ProblemKind.NESTED_BEGIN, msg.NESTED_BEGIN.format(opener=opener.offset),
                                         m.source, m.position, m.offset))
            else:
                opener = m
            is_open = True
        else:
            if hole and key == TXN_END:
                spanning_ends.append(m.offset)
            elif not is_open and not hole:
                kind, name = ((ProblemKind.END_WITHOUT_BEGIN, "EndTransaction") if key == TXN_END
                              else (ProblemKind.ABORT_WITHOUT_BEGIN, "AbortTransaction"))
                anomalies.append(Problem(kind, msg.WITHOUT_BEGIN.format(marker=name), m.source, m.position, m.offset))
            is_open = False
        open_after.append(is_open)
        prev_offset = m.offset
    marker_offsets = [m.offset for m in markers]
    closers = [m for m in markers if m.record is not None and m.record.api_key != TXN_BEGIN]
    closer_offsets = [m.offset for m in closers]
    visible: list[Visible] = []
    pending = 0

    def outcome(entry: LogEntry, close: LogEntry) -> None:
        assert close.record is not None
        if close.record.api_key == TXN_END:
            visible.append(Visible(entry, runs.published_offset(close), close.time, Cause.TRANSACTION))

    for e in entries:
        if e.record is None or e.record.api_key not in (ACL_ENTRY, ACL_REMOVE):
            continue
        i = bisect.bisect_left(marker_offsets, e.offset)
        held = i > 0 and open_after[i - 1]
        if not runs.unknown_between(marker_offsets[i - 1] if i else -1, e.offset):
            if not held:
                visible.append(Visible(e, runs.published_offset(e), e.time, Cause.RECORD))
                continue
            j = bisect.bisect_left(closer_offsets, e.offset)
            if j == len(closers):
                pending += 1
            elif not runs.unknown_between(e.offset, closers[j].offset):
                outcome(e, closers[j])
            continue
        nxt = markers[i] if i < len(markers) else None
        if nxt is None:
            if not held:
                visible.append(Visible(e, runs.published_offset(e), e.time, Cause.RECORD))
        elif runs.unknown_between(e.offset, nxt.offset):
            continue
        elif nxt.record is not None and nxt.record.api_key == TXN_BEGIN:
            visible.append(Visible(e, runs.published_offset(e), e.time, Cause.RECORD))
        else:
            outcome(e, nxt)
    if is_open and opener is not None and (last is None or runs.unknown_min(markers[-1].offset, last) is None):
        anomalies.append(Problem(ProblemKind.PENDING_TRANSACTION,
                                 msg.PENDING_TRANSACTION.format(opener=opener.offset, held=pending), opener.source,
                                 opener.position, opener.offset))
    return visible, spanning_ends


class ReplayState:
    """The mutable state of one replay pass over the visible ACL changes and the snapshots, in order.

    `last_seen[id]` is the last offset where the id's state was observed (one of its records at its visible
    offset, or a snapshot); `prev_snapshot` the last contained offset of the previous snapshot (-1 before any);
    `spanning_ends` the offsets of Ends whose transaction spans a hole (see `resolve_transactions`).
    """

    def __init__(self, anomalies: list[Problem], runs: LogRuns, spanning_ends: list[int] | None = None) -> None:
        self.anomalies = anomalies
        self.runs = runs
        self.spanning_ends = sorted(spanning_ends or [])
        self.events: list[AclEvent] = []
        self.live: dict[str, AclLifetime] = {}
        self.done: list[AclLifetime] = []
        self.last_seen: dict[str, int] = {}
        self.prev_snapshot = -1
        self.stray_remove = -1  # the last remove, since the previous snapshot, of an id created in a hole
        self.incomplete: list[tuple[int, int]] = []

    # -- helpers
    def _event(self, offset: int, time: int | None, acl_id: str, change: Change, cause: Cause,
               binding: AclBinding, record_offset: int | None, offset_min: int) -> None:
        self.events.append(
            AclEvent(offset, time, acl_id, change, cause, binding, record_offset, offset_min, offset_min == offset)
        )

    def _create(self, acl_id: str, binding: AclBinding, offset: int, offset_min: int, time: int | None,
                cause: Cause, record_offset: int | None) -> None:
        self.live[acl_id] = AclLifetime(acl_id, binding, offset, offset_min, time, cause)
        self._event(offset, time, acl_id, Change.CREATE, cause, binding, record_offset, offset_min)

    def _remove(self, acl_id: str, offset: int, offset_min: int, time: int | None, cause: Cause,
                record_offset: int | None) -> None:
        life = self.live.pop(acl_id)
        life.valid_to_offset = offset
        life.valid_to_min_offset = offset_min
        life.valid_to_time = time
        life.ended_by = cause
        self.done.append(life)
        self._event(offset, time, acl_id, Change.REMOVE, cause, life.binding, record_offset, offset_min)

    # -- log records
    def apply(self, change: Visible) -> None:
        entry, offset, time, cause = change.entry, change.offset, change.time, change.cause
        record = entry.record
        assert record is not None and record.acl_id is not None
        acl_id = record.acl_id
        seen_before = acl_id in self.last_seen
        self.last_seen[acl_id] = offset
        if record.api_key == ACL_ENTRY:
            binding = record.binding
            assert binding is not None
            current = self.live.get(acl_id)
            if current is None:
                self._create(acl_id, binding, offset, offset, time, cause, entry.offset)
                return
            same = current.binding == binding
            self.anomalies.append(
                Problem(ProblemKind.DUPLICATE_ID,
                        msg.DUPLICATE_ID.format(acl_id=acl_id, content="same" if same else "different"),
                        entry.source, entry.position, entry.offset)
            )
            if not same:
                self._remove(acl_id, offset, offset, time, Cause.REPLACE, entry.offset)
                self._create(acl_id, binding, offset, offset, time, Cause.REPLACE, entry.offset)
        elif acl_id in self.live:
            self._remove(acl_id, offset, offset, time, cause, entry.offset)
        else:
            # An id nobody recorded can only have been created in a hole since the previous snapshot (it would be
            # in that snapshot otherwise): some ACL we do not know was live until here.
            from_hole = not seen_before and self.runs.unknown_min(self.prev_snapshot, offset - 1) is not None
            if from_hole:
                self.stray_remove = max(self.stray_remove, offset)
            hint = msg.UNKNOWN_REMOVE_FROM_HOLE if from_hole else ""
            self.anomalies.append(
                Problem(ProblemKind.UNKNOWN_REMOVE, msg.UNKNOWN_REMOVE.format(acl_id=acl_id, hint=hint),
                        entry.source, entry.position, entry.offset)
            )

    # -- snapshots
    def _spanning_ends_in(self, p: int, q: int) -> list[int]:
        """The Ends in (p, q] whose transaction spans a hole, in order."""
        return self.spanning_ends[bisect.bisect_right(self.spanning_ends, p):bisect.bisect_right(self.spanning_ends, q)]

    def _window(self, acl_id: str, snap: SnapshotImage) -> tuple[int, int, int | None, bool]:
        """Where a change the snapshot reveals happened: (offset_min, offset, time, contradicts_log).

        See the module docstring: the change lies in the offsets after `p` up to the snapshot that no dump holds;
        when there are none, the log contradicts the snapshot and the change is placed at the snapshot itself.
        """
        q = snap.at
        p = max(self.last_seen.get(acl_id, -1), self.prev_snapshot)
        lo, hi = self.runs.unknown_min(p, q), self.runs.unknown_max(p, q)
        ends = self._spanning_ends_in(p, q)
        if ends:  # an End that closed a transaction spanning a hole may have made it visible
            lo = ends[0] if lo is None else min(lo, ends[0])
            hi = ends[-1] if hi is None else max(hi, ends[-1])
        if lo is None or hi is None:
            return q, q, snap.time, True
        return lo, hi, snap.time if hi == q else None, False

    def load_snapshot(self, snap: SnapshotImage) -> None:
        """Make the state exactly the snapshot's ACLs at its last contained offset, in one step (rule 4)."""
        q = snap.at
        only_snap: list[str] = []
        only_log: list[str] = []
        changed: list[str] = []
        touched: list[str] = []
        for acl_id in sorted(self.live):
            wanted = snap.acls.get(acl_id)
            if wanted == self.live[acl_id].binding:
                continue
            lo, hi, time, contradicts = self._window(acl_id, snap)
            if contradicts:
                (only_log if wanted is None else changed).append(acl_id)
            self._remove(acl_id, hi, lo, time, Cause.SNAPSHOT_LOAD, None)
            touched.append(acl_id)
        for acl_id in sorted(snap.acls):
            if acl_id in self.live:
                continue
            lo, hi, time, contradicts = self._window(acl_id, snap)
            if contradicts and acl_id not in changed:
                only_snap.append(acl_id)
            self._create(acl_id, snap.acls[acl_id], hi, lo, time, Cause.SNAPSHOT_LOAD, None)
        if only_snap or only_log or changed:
            self.anomalies.append(
                Problem(ProblemKind.SNAPSHOT_MISMATCH,
                        msg.mismatch_message(snap.end_offset, snap.epoch, only_snap, only_log, changed),
                        snap.source, None, q)
            )
        for acl_id in [*touched, *snap.acls]:
            self.last_seen[acl_id] = q
        # ACLs nobody recorded: created at an unknown offset since the previous snapshot, gone before this one (a
        # remove inside a hole takes effect only at the End of its transaction, when that End lies after the hole)
        first = self.runs.unknown_min(self.prev_snapshot, q)
        if first is not None:
            end = max(self.runs.unknown_max(self.prev_snapshot, q) or first, self.stray_remove,
                      *self._spanning_ends_in(self.prev_snapshot, q))
            if end - 1 >= first:
                self.incomplete.append((first, end - 1))
        self.stray_remove = -1
        self.prev_snapshot = q

    def finish(self, last_offset: int) -> None:
        """End of known history at `last_offset`: trailing holes, and lifetimes that may have ended in them."""
        lo = self.runs.unknown_min(self.prev_snapshot, last_offset)
        if lo is not None:
            self.incomplete.append((lo, last_offset))  # no later snapshot bounds an ACL created in a trailing hole
        for acl_id, life in self.live.items():
            life.valid_to_min_offset = self.runs.unknown_min(self.last_seen[acl_id], last_offset)

    def lifetimes(self) -> list[AclLifetime]:
        return sorted([*self.done, *self.live.values()], key=lambda life: (life.valid_from_offset, life.acl_id))
