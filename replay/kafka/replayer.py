"""The reference replayer: DESIGN.md §3 as plain Python. The Spark replay is held to it.

Input is what the decoder produces: log batches (segments, dump-log text) and snapshots, from any number of
possibly overlapping dumps of one cluster. The replayer

1. merges the log: one record per offset. Equal bytes seen twice are one record; different bytes at one offset
   mean a truncated uncommitted suffix: the copy with the higher leader epoch wins, and a record whose epoch is
   below the epoch of an earlier chosen record belongs to a truncated suffix too (epochs never decrease along a
   Raft log). Both are reported as `divergence`;
2. applies the records strictly in offset order with the controller's transaction semantics (records after Begin
   are held, become visible at End's offset, are dropped at Abort; an open transaction at the end is pending);
3. loads each complete snapshot `E` atomically at offset `E-1`: where the log before `E` is present the two must
   agree (else `snapshot_mismatch`); where history has a hole before `E`, the differences are changes at an
   unknown offset inside the hole (rule 5);
4. returns ACL lifetimes with exact or uncertain bounds, the visible events, coverage and anomalies, and answers
   the state as of any offset or time.

Offsets are log offsets; "as of N" means after applying every visible record with offset <= N.
Lifetime bounds use half-open intervals: live on [valid_from_offset, valid_to_offset). An uncertain start means it
began somewhere in [valid_from_min_offset, valid_from_offset]; an uncertain end means it ended somewhere in
[valid_to_min_offset, valid_to_offset] (valid_to_offset None: maybe still live at the end of known history).
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum

from .acl import AclBinding
from .model import Batch, Problem, ProblemKind, Record

ACL_ENTRY = 18
ACL_REMOVE = 19
TXN_BEGIN = 23
TXN_END = 24
TXN_ABORT = 25
_RELEVANT = {ACL_ENTRY, ACL_REMOVE, TXN_BEGIN, TXN_END, TXN_ABORT}


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
    seq: int = 0  # order of events at one offset


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
    complete: bool = True  # False after an unbridged hole: ACLs created in it are unknown to us

    @property
    def exact(self) -> bool:
        return self.covered and self.complete and not self.uncertain


@dataclass(slots=True)
class LogEntry:
    offset: int
    epoch: int
    time: int
    digest: bytes
    record: Record | None  # only ACL and transaction records are kept
    source: str
    position: int


@dataclass(slots=True)
class SnapshotImage:
    end_offset: int
    epoch: int
    time: int | None
    acls: dict[str, AclBinding]
    source: str
    complete: bool


@dataclass(slots=True)
class ReplayResult:
    lifetimes: list[AclLifetime]
    events: list[AclEvent]
    coverage: list[CoverageRange]
    anomalies: list[Problem]
    times: list[tuple[int, int]] = field(default_factory=list)  # (offset, time), sorted, one per visible batch
    last_offset: int | None = None
    incomplete: list[tuple[int, int]] = field(default_factory=list)  # inclusive offset ranges, see AclState

    def is_complete_at(self, offset: int) -> bool:
        return not any(lo <= offset <= hi for lo, hi in self.incomplete)

    def offset_at_time(self, time_ms: int) -> int | None:
        """DESIGN.md §3.8: the last offset whose time is <= time_ms (None if before all known records)."""
        i = bisect.bisect_right([t for _, t in self.times], time_ms)
        return self.times[i - 1][0] if i else None

    def state_at(self, offset: int) -> AclState:
        certain: dict[str, AclBinding] = {}
        uncertain: dict[str, AclBinding] = {}
        for life in self.lifetimes:
            if life.certainly_live_at(offset):
                certain[life.acl_id] = life.binding
            elif life.possibly_live_at(offset):
                uncertain[life.acl_id] = life.binding
        covered = any(c.start_offset <= offset <= c.end_offset and c.kind != CoverageKind.MISSING for c in self.coverage)
        return AclState(offset, certain, uncertain, covered, self.is_complete_at(offset))

    def state_at_time(self, time_ms: int) -> AclState | None:
        offset = self.offset_at_time(time_ms)
        return None if offset is None else self.state_at(offset)

    def live_at_end(self) -> dict[str, AclBinding]:
        return {life.acl_id: life.binding for life in self.lifetimes if life.valid_to_offset is None}


def _acl_id(record: Record) -> str:
    assert record.data is not None
    return str(record.data["id"])


def _digest(record: Record) -> bytes:
    h = hashlib.sha256()
    for part in (record.key, record.value):
        h.update(b"\x00" if part is None else len(part).to_bytes(4, "big") + part)
    return h.digest()


class Replayer:
    """Collect log batches and snapshots of one cluster, then `run()` once.

    `high_watermark`: the committed point if the user knows it (records with offset >= it are uncommitted and not
    applied). Without it everything on disk counts as committed (DESIGN.md §3.7).
    """

    def __init__(self, high_watermark: int | None = None) -> None:
        self.high_watermark = high_watermark
        self._log: dict[int, dict[bytes, LogEntry]] = {}  # offset -> distinct contents -> preferred copy
        self._snapshots: dict[int, list[SnapshotImage]] = {}  # end offset -> complete copies
        self._anomalies: list[Problem] = []
        self._batch_times: dict[int, int] = {}  # batch last offset -> append time

    # ---- input -------------------------------------------------------------------------------------------
    def add_log(self, items: Iterable[Batch | Problem]) -> None:
        """Log batches in any order, from any number of dumps; problems are passed through to the anomalies."""
        for item in items:
            if isinstance(item, Problem):
                self._anomalies.append(item)
                continue
            header = item.header
            if not header.crc_ok:
                self._anomalies.append(
                    Problem(
                        ProblemKind.SKIPPED_BAD_BATCH,
                        "batch with a bad CRC is not applied (Kafka's recovery truncates the log there)",
                        item.source,
                        header.position,
                        header.base_offset,
                    )
                )
                continue
            if self.high_watermark is not None and header.base_offset >= self.high_watermark:
                continue
            for record in item.records:
                if self.high_watermark is not None and record.offset >= self.high_watermark:
                    continue
                self._add_log_record(item, record)

    def _add_log_record(self, batch: Batch, record: Record) -> None:
        keep = (
            record
            if not record.is_control and record.api_key in _RELEVANT and record.data is not None
            else None
        )
        entry = LogEntry(
            record.offset,
            batch.header.partition_leader_epoch,
            batch.append_time,
            _digest(record),
            keep,
            batch.source,
            batch.header.position,
        )
        self._batch_times[batch.header.last_offset] = batch.append_time
        copies = self._log.setdefault(record.offset, {})
        old = copies.get(entry.digest)
        if old is None or _preference(entry) < _preference(old):
            copies[entry.digest] = entry

    def add_snapshot(
        self, end_offset: int, epoch: int, items: Iterable[Batch | Problem], source: str = ""
    ) -> None:
        """One snapshot file: `end_offset` is exclusive (the file name's first number)."""
        acls: dict[str, AclBinding] = {}
        header_seen = footer_seen = bad_batch = False
        time: int | None = None
        first = True
        for item in items:
            if isinstance(item, Problem):
                self._anomalies.append(item)
                first = False
                continue
            bad_batch = bad_batch or not item.header.crc_ok
            for record in item.records:
                if first:
                    first = False
                    header_seen = record.type_name == "SNAPSHOT_HEADER"
                    if header_seen and record.data is not None:
                        time = int(record.data.get("lastContainedLogTimestamp", 0)) or None
                if record.type_name == "SNAPSHOT_FOOTER":
                    footer_seen = True
                if not record.is_control and record.api_key == ACL_ENTRY and record.data is not None:
                    acls[_acl_id(record)] = AclBinding.from_record_data(record.data)
            first = False
        if bad_batch:
            self._anomalies.append(
                Problem(ProblemKind.SKIPPED_BAD_BATCH, "snapshot holds a batch with a bad CRC; not loaded",
                        source, None, end_offset - 1)
            )
        if not header_seen:
            self._anomalies.append(
                Problem(ProblemKind.SNAPSHOT_NO_HEADER, "snapshot does not start with a SnapshotHeader; not loaded",
                        source, 0, end_offset - 1)
            )
        if not footer_seen:
            self._anomalies.append(
                Problem(ProblemKind.SNAPSHOT_NO_FOOTER, "snapshot has no SnapshotFooter (incomplete); not loaded",
                        source, None, end_offset - 1)
            )
        complete = header_seen and footer_seen and not bad_batch
        if not complete or end_offset <= 0:
            return
        if self.high_watermark is not None and end_offset > self.high_watermark:
            return
        self._snapshots.setdefault(end_offset, []).append(SnapshotImage(end_offset, epoch, time, acls, source, True))

    # ---- replay ------------------------------------------------------------------------------------------
    def run(self) -> ReplayResult:
        log = self._drop_truncated_suffixes(self._choose_log_copies())
        offsets = sorted(log)
        log_ranges = _ranges(offsets)
        snapshots = [self._choose_snapshot(e) for e in sorted(self._snapshots)]
        run = ReplayState(self._anomalies)
        stream: list[tuple[int, int, object]] = [(r[0], 0, r) for r in log_ranges]
        stream += [(o, 1, log[o]) for o in offsets if log[o].record is not None]
        stream += [(s.end_offset - 1, 2, s) for s in snapshots]
        stream.sort(key=lambda item: (item[0], item[1]))
        for _, kind, item in stream:
            if kind == 0:
                run.enter_range(*item)  # type: ignore[misc]
            elif kind == 1:
                run.apply(item)  # type: ignore[arg-type]
            else:
                run.load_snapshot(item)  # type: ignore[arg-type]
        run.finish()
        times = sorted(
            [(o, t) for o, t in self._batch_times.items() if o in log]
            + [(s.end_offset - 1, s.time) for s in snapshots if s.time is not None]
        )
        last = max([*offsets, *(s.end_offset - 1 for s in snapshots)], default=None)
        coverage = coverage_ranges(log_ranges, [(s.end_offset - 1, s.source) for s in snapshots])
        return ReplayResult(run.lifetimes(), run.events, coverage, run.anomalies, times, last, run.incomplete)

    def _choose_log_copies(self) -> dict[int, LogEntry]:
        """Per offset the copy with the highest epoch (then the first source path); others are divergences."""
        chosen: dict[int, LogEntry] = {}
        for offset, copies in self._log.items():
            ranked = sorted(copies.values(), key=_preference)
            winner = chosen[offset] = ranked[0]
            for loser in ranked[1:]:
                self._anomalies.append(
                    Problem(ProblemKind.DIVERGENCE,
                            f"two different records at offset {offset}: epoch {winner.epoch} from {winner.source} "
                            f"wins over epoch {loser.epoch} from {loser.source} (a truncated uncommitted suffix)",
                            loser.source, loser.position, offset)
                )
        return chosen

    def _choose_snapshot(self, end_offset: int) -> SnapshotImage:
        ranked = sorted(self._snapshots[end_offset], key=lambda s: (-s.epoch, s.source))
        for other in ranked[1:]:
            if other.acls != ranked[0].acls:
                self._anomalies.append(
                    Problem(ProblemKind.DIVERGENCE,
                            f"two snapshots end at {end_offset} with different ACLs; epoch {ranked[0].epoch} from "
                            f"{ranked[0].source} wins", other.source, None, end_offset - 1)
                )
        return ranked[0]

    def _drop_truncated_suffixes(self, chosen: dict[int, LogEntry]) -> dict[int, LogEntry]:
        log: dict[int, LogEntry] = {}
        max_epoch = -1
        for offset in sorted(chosen):
            entry = chosen[offset]
            if entry.epoch < max_epoch:
                self._anomalies.append(
                    Problem(
                        ProblemKind.DIVERGENCE,
                        f"record at offset {offset} has epoch {entry.epoch} below epoch {max_epoch} of an earlier "
                        "record: part of a truncated uncommitted suffix, not applied",
                        entry.source,
                        entry.position,
                        offset,
                    )
                )
                continue
            max_epoch = entry.epoch
            log[offset] = entry
        return log


def _preference(entry: LogEntry) -> tuple[int, str, int]:
    return (-entry.epoch, entry.source, entry.position)


def _ranges(offsets: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct offsets as maximal runs of consecutive offsets (inclusive bounds)."""
    out: list[tuple[int, int]] = []
    for o in offsets:
        if out and o == out[-1][1] + 1:
            out[-1] = (out[-1][0], o)
        else:
            out.append((o, o))
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


class ReplayState:
    """The mutable state of one replay pass.

    `known` is the last offset whose state is known (from a log record or a snapshot). `uncertain_since` is the
    first offset of a stretch of history that no snapshot has bridged yet: 0 before anything is known, the first
    missing offset after a hole. While it is set, changes learned from the next snapshot are uncertain from there.
    """

    def __init__(self, anomalies: list[Problem]) -> None:
        self.anomalies = anomalies
        self.events: list[AclEvent] = []
        self.live: dict[str, AclLifetime] = {}
        self.done: list[AclLifetime] = []
        self.txn: list[LogEntry] | None = None
        self.txn_begin: LogEntry | None = None
        self.known: int | None = None
        self.uncertain_since: int | None = 0
        self.incomplete: list[tuple[int, int]] = []  # stretches where ACLs unknown to us may have been live
        self.seq = 0

    # -- helpers
    def _event(self, offset: int, time: int | None, acl_id: str, change: Change, cause: Cause,
               binding: AclBinding, record_offset: int | None, offset_min: int) -> None:
        self.seq += 1
        self.events.append(
            AclEvent(offset, time, acl_id, change, cause, binding, record_offset, offset_min, offset_min == offset,
                     self.seq)
        )

    def _create(self, acl_id: str, binding: AclBinding, offset: int, time: int | None, cause: Cause,
                record_offset: int | None, offset_min: int | None = None) -> None:
        lo = offset if offset_min is None else offset_min
        self.live[acl_id] = AclLifetime(acl_id, binding, offset, lo, time, cause)
        self._event(offset, time, acl_id, Change.CREATE, cause, binding, record_offset, lo)

    def _remove(self, acl_id: str, offset: int, time: int | None, cause: Cause, record_offset: int | None,
                offset_min: int | None = None) -> None:
        life = self.live.pop(acl_id)
        lo = offset if offset_min is None else offset_min
        life.valid_to_offset = offset
        life.valid_to_min_offset = lo
        life.valid_to_time = time
        life.ended_by = cause
        self.done.append(life)
        self._event(offset, time, acl_id, Change.REMOVE, cause, life.binding, record_offset, lo)

    def _note_hole(self, first_missing: int, resume: int) -> None:
        """Offsets first_missing..resume-1 are in no dump and no snapshot bridges them."""
        if self.uncertain_since is None:
            self.uncertain_since = first_missing
        for life in self.live.values():
            if life.valid_to_min_offset is None:
                life.valid_to_min_offset = first_missing  # may have been removed in the hole
        known = "nothing before it is known" if self.known is None else "no snapshot bridges it"
        self.anomalies.append(
            Problem(ProblemKind.GAP,
                    f"offsets {first_missing}..{resume - 1} are missing and {known}: ACLs may have been created or "
                    "removed there; answers from there on are marked uncertain until a snapshot bridges it",
                    None, None, first_missing)
        )

    # -- log records
    def enter_range(self, start: int, end: int) -> None:
        """Offsets start..end are all known from the log (they arrive before the records inside them)."""
        expected = 0 if self.known is None else self.known + 1
        if start > expected:
            self._note_hole(expected, start)
        elif self.known is None:
            self.uncertain_since = None  # the log starts at offset 0: nothing before it
        self.known = end if self.known is None else max(self.known, end)

    def apply(self, entry: LogEntry) -> None:
        record = entry.record
        if record is None:
            return
        key = record.api_key
        if key == TXN_BEGIN:
            if self.txn is not None and self.txn_begin is not None:
                self.anomalies.append(
                    Problem(ProblemKind.NESTED_BEGIN,
                            f"BeginTransaction inside the transaction begun at offset {self.txn_begin.offset}; "
                            "ignored, the open transaction continues", entry.source, entry.position, entry.offset)
                )
                return
            self.txn, self.txn_begin = [], entry
        elif key == TXN_END:
            if self.txn is None:
                self.anomalies.append(Problem(ProblemKind.END_WITHOUT_BEGIN, "EndTransaction without Begin; ignored",
                                              entry.source, entry.position, entry.offset))
                return
            held, self.txn, self.txn_begin = self.txn, None, None
            for h in held:
                self._apply_acl(h, entry.offset, entry.time, Cause.TRANSACTION)
        elif key == TXN_ABORT:
            if self.txn is None:
                self.anomalies.append(
                    Problem(ProblemKind.ABORT_WITHOUT_BEGIN, "AbortTransaction without Begin; ignored",
                            entry.source, entry.position, entry.offset))
                return
            self.txn, self.txn_begin = None, None
        elif self.txn is not None:
            self.txn.append(entry)
        else:
            self._apply_acl(entry, entry.offset, entry.time, Cause.RECORD)

    def _apply_acl(self, entry: LogEntry, offset: int, time: int, cause: Cause) -> None:
        record = entry.record
        assert record is not None and record.data is not None
        acl_id = _acl_id(record)
        if record.api_key == ACL_ENTRY:
            binding = AclBinding.from_record_data(record.data)
            current = self.live.get(acl_id)
            if current is not None:
                same = current.binding == binding
                self.anomalies.append(
                    Problem(ProblemKind.DUPLICATE_ID,
                            f"ACL id {acl_id} created again while live ({'same' if same else 'different'} content); "
                            "the new record replaces it", entry.source, entry.position, entry.offset)
                )
                if same:
                    return
                self._remove(acl_id, offset, time, Cause.REPLACE, entry.offset)
                self._create(acl_id, binding, offset, time, Cause.REPLACE, entry.offset)
                return
            self._create(acl_id, binding, offset, time, cause, entry.offset)
        elif acl_id in self.live:
            self._remove(acl_id, offset, time, cause, entry.offset)  # an exact remove clears any hole mark
        else:
            hint = "" if self.uncertain_since is None else " (it may have been created in an earlier hole)"
            self.anomalies.append(
                Problem(ProblemKind.UNKNOWN_REMOVE,
                        f"RemoveAccessControlEntry for unknown ACL id {acl_id}; ignored{hint}",
                        entry.source, entry.position, entry.offset)
            )

    # -- snapshots
    def load_snapshot(self, snap: SnapshotImage) -> None:
        """Make the state exactly the snapshot's ACLs at its last contained offset, in one step."""
        at = snap.end_offset - 1
        expected = 0 if self.known is None else self.known + 1
        if at >= expected and self.uncertain_since is None:
            self.uncertain_since = expected  # the log stops before the snapshot's last offset
        lo = self.uncertain_since  # None: the log reaches `at` with nothing unknown before
        if lo is None:
            current = {k: v.binding for k, v in self.live.items()}
            if current != snap.acls:
                only_snap = sorted(set(snap.acls) - set(current))
                only_log = sorted(set(current) - set(snap.acls))
                changed = sorted(k for k in set(current) & set(snap.acls) if current[k] != snap.acls[k])
                self.anomalies.append(
                    Problem(ProblemKind.SNAPSHOT_MISMATCH,
                            f"snapshot {snap.end_offset}-{snap.epoch} disagrees with the log before it: "
                            f"{len(only_snap)} ACL(s) only in the snapshot {only_snap[:5]}, {len(only_log)} only in "
                            f"the log {only_log[:5]}, {len(changed)} with other content {changed[:5]}; "
                            "the snapshot is loaded", snap.source, None, at)
                )
        for acl_id in sorted(self.live):
            life = self.live[acl_id]
            if acl_id not in snap.acls or snap.acls[acl_id] != life.binding:
                start = life.valid_to_min_offset if life.valid_to_min_offset is not None else lo
                self._remove(acl_id, at, snap.time, Cause.SNAPSHOT_LOAD, None, start)
            else:
                life.valid_to_min_offset = None  # in the snapshot: ids are never reused, so it lived throughout
        for acl_id in sorted(snap.acls):
            if acl_id not in self.live:
                self._create(acl_id, snap.acls[acl_id], at, snap.time, Cause.SNAPSHOT_LOAD, None, lo)
        if lo is not None and lo < at:
            self.incomplete.append((lo, at - 1))
        self.uncertain_since = None
        self.known = at if self.known is None else max(self.known, at)

    def finish(self) -> None:
        if self.uncertain_since is not None and self.known is not None and self.known >= self.uncertain_since:
            self.incomplete.append((self.uncertain_since, self.known))
        if self.txn is not None and self.txn_begin is not None:
            self.anomalies.append(
                Problem(ProblemKind.PENDING_TRANSACTION,
                        f"transaction begun at offset {self.txn_begin.offset} is still open at the end of the input; "
                        f"its {len(self.txn)} held record(s) are invisible", self.txn_begin.source,
                        self.txn_begin.position, self.txn_begin.offset)
            )

    def lifetimes(self) -> list[AclLifetime]:
        return sorted([*self.done, *self.live.values()], key=lambda life: (life.valid_from_offset, life.acl_id))


def iter_state_changes(result: ReplayResult) -> Iterator[tuple[int, AclEvent]]:
    """Events in application order (offset, then sequence)."""
    for event in sorted(result.events, key=lambda e: (e.offset, e.seq)):
        yield event.offset, event
