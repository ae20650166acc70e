"""The files a question about one moment needs: the last snapshot at or before it, and the log from there on.

A snapshot ending at S holds the whole ACL set after offset S-1, and loading it replaces the state (DESIGN.md §3),
so the state at N >= S-1 needs the snapshot and the log from S-1 to N, not the history before them. On a dump of
years, answering from there keeps the time and memory of `acls PATH` to what the question needs.

The shortcut must give the answer the whole replay gives, so it is taken only where that is sure, and checked on
its result: one directory of binary files (one node's log: one copy of each offset), a snapshot that loads, and
nothing in what was read but the hole the unread files leave before the snapshot. Anything else (a problem in a file
read, a transaction open where the reading stops, a gap after the snapshot) is a question for the whole replay.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from .batch import batch_position
from .dump import read_source, replay_sources
from .model import Batch, ProblemKind, SourceFile, SourceKind
from .replayer import CoverageKind, ReplayResult, snapshot_time


@dataclass(frozen=True, slots=True)
class MomentAnswer:
    """A replay of the needed files, and the offset it answers at."""

    result: ReplayResult
    offset: int
    snapshot: SourceFile
    read: list[SourceFile]
    unread: list[SourceFile]
    log_from: int | None  # the first offset of the log read (the batch holding the snapshot's last offset)

    def note(self) -> str:
        log = f" and the log from offset {self.log_from}" if self.log_from is not None else ""
        return (f"answered from the snapshot {self.snapshot.name}{log} ({len(self.read)} of "
                f"{len(self.read) + len(self.unread)} files); the rest was not needed and was not read, nor checked "
                "for problems (--read-all reads every file)")


def replay_for_moment(sources: Sequence[SourceFile], offset: int | None = None, time: int | None = None,
                      high_watermark: int | None = None) -> MomentAnswer | None:
    """The state at `offset`, at `time`, or (neither) at the log's end, from the files it needs; None when the
    question needs the whole replay (see the module docstring)."""
    if not _one_node_binary(sources):
        return None
    snapshots = [s for s in sources if s.kind == SourceKind.SNAPSHOT and s.snapshot_end_offset
                 and (high_watermark is None or s.snapshot_end_offset <= high_watermark)]
    segments = sorted((s for s in sources if s.kind == SourceKind.SEGMENT), key=lambda s: s.base_offset or 0)
    snapshot_times: dict[int, int | None] = {}
    if time is not None:
        snapshot_times = {s.snapshot_end_offset - 1: _header_time(s) for s in snapshots if s.snapshot_end_offset}
        ends = [at + 1 for at, t in snapshot_times.items() if t is not None and t <= time]
    else:
        ends = [s.snapshot_end_offset for s in snapshots if s.snapshot_end_offset
                and (offset is None or s.snapshot_end_offset - 1 <= offset)]
    if not ends:
        return None
    end = max(ends)
    chosen = [s for s in snapshots if s.snapshot_end_offset == end]
    start = max((i for i, s in enumerate(segments) if (s.base_offset or 0) <= end - 1), default=0)
    stop = len(segments) if offset is None else max(
        (i + 1 for i, s in enumerate(segments) if (s.base_offset or 0) <= offset), default=0)
    read = chosen + segments[start:max(start, stop)]
    unread = [s for s in sources if s not in read]
    log_from, positions = _log_start(read, end - 1)
    if not any(s.kind != SourceKind.BOOTSTRAP for s in unread) and not positions:
        return None  # nothing to spare: the whole replay is the same work
    result = replay_sources(read, high_watermark=high_watermark, needed_only=True, start_positions=positions)
    at = _answer_offset(result, offset, time, snapshot_times)
    if at is None or at < end - 1 or not _clean(result, end - 1, at):
        return None
    return MomentAnswer(result, at, chosen[0], read, unread, log_from)


def _log_start(read: list[SourceFile], snapshot_at: int) -> tuple[int | None, dict[str, int]]:
    """Where the log read starts: the batch holding the snapshot's last offset, inside the first segment read when
    that segment starts before it (its earlier batches are skipped unread); and that start as a position."""
    first = next((s for s in read if s.kind == SourceKind.SEGMENT), None)
    if first is None:
        return None, {}
    base = first.base_offset or 0
    found = batch_position(first.path, snapshot_at) if base < snapshot_at else None
    if found is None or found[0] == 0:
        return base, {}
    return found[1], {first.path: found[0]}


def _one_node_binary(sources: Sequence[SourceFile]) -> bool:
    """One directory's segments and snapshots, named as Kafka names them (each offset has one copy there)."""
    dirs = {os.path.dirname(os.path.realpath(s.path)) for s in sources if s.kind != SourceKind.BOOTSTRAP}
    known = all(s.kind in (SourceKind.SNAPSHOT, SourceKind.BOOTSTRAP)
                or (s.kind == SourceKind.SEGMENT and s.base_offset is not None) for s in sources)
    return known and len(dirs) == 1


def _header_time(snapshot: SourceFile) -> int | None:
    """The snapshot's time from its first batch alone (the header's control batch)."""
    for item in read_source(snapshot):
        if isinstance(item, Batch):
            return snapshot_time(item.records[0]) if item.records else None
    return None


def _answer_offset(result: ReplayResult, offset: int | None, time: int | None,
                   snapshot_times: dict[int, int | None]) -> int | None:
    """The offset the whole replay would answer at. By time: the greatest offset whose time is <= `time`, which the
    read files hold whole from the snapshot on, except where an unread later snapshot's later time would win at its
    own offset (`Replayer._time_index` keeps the greater): then the whole replay decides."""
    if offset is not None:
        return offset
    if time is None:
        return result.last_offset
    at = result.offset_at_time(time)
    later = snapshot_times.get(at) if at is not None else None
    return None if later is not None and later > time else at


def _clean(result: ReplayResult, snapshot_at: int, offset: int) -> bool:
    """The replay of the needed files knows the state at `offset` exactly, and reports nothing but what the unread
    files leave: the hole before the first offset read (bridged by the snapshot), and removals before the snapshot
    of ACLs created in that hole (the snapshot's load replaces them)."""
    holes = [c for c in result.coverage if c.kind == CoverageKind.MISSING]
    if any(c.end_offset >= snapshot_at for c in holes):
        return False
    for problem in result.anomalies:
        expected = (problem.kind == ProblemKind.GAP and any(c.start_offset == problem.offset for c in holes)) or (
            problem.kind == ProblemKind.UNKNOWN_REMOVE and problem.offset is not None
            and problem.offset <= snapshot_at)
        if not expected:
            return False
    return result.state_at(offset).exact
