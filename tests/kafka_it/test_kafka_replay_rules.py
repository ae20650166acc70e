"""Issue 3 item 3, the replay comparisons on the real broker's metadata log:

- replaying from the newest snapshot plus the log after it gives the same final state as the whole log, and every
  snapshot agrees with the log before it;
- a copy of the directory with the oldest segment removed (as retention would) still replays, the gap is reported,
  and answers are never claimed exact where history is missing.
"""

from __future__ import annotations

import io
import shutil
from pathlib import Path

import pytest

from replay import cli
from replay.kafka.dump import replay_paths
from replay.kafka.model import ProblemKind
from replay.kafka.replayer import CoverageKind, ReplayResult
from tests.harness.histories import BULK_PRINCIPAL, PROFILES
from tests.harness.itrun import KafkaRun

pytestmark = pytest.mark.kafka


def _offset(path: Path) -> int:
    """A segment's base offset or a snapshot's end offset, from its file name."""
    return int(path.name[:20])


def _log_start(result: ReplayResult) -> int:
    return min(c.start_offset for c in result.coverage if c.kind == CoverageKind.LOG)


def test_run_has_enough_history(kafka_run: KafkaRun) -> None:
    assert len(kafka_run.snapshots()) >= 2
    assert len(kafka_run.segments()) >= 2


def test_newest_snapshot_plus_tail_equals_whole_log(kafka_run: KafkaRun, tmp_path: Path) -> None:
    """A directory holding only the newest snapshot and the segments from its end offset on (the one straddling
    the end offset included, as Kafka keeps it) replays to the state of the whole log."""
    whole = replay_paths([str(kafka_run.metadata_dir)])
    assert not [p for p in whole.anomalies if p.kind == ProblemKind.SNAPSHOT_MISMATCH]

    newest = max(kafka_run.snapshots(), key=_offset)
    end = _offset(newest)
    segments = kafka_run.segments()
    next_bases: list[int | None] = [*(_offset(s) for s in segments[1:]), None]
    kept = [seg for seg, nxt in zip(segments, next_bases, strict=True) if nxt is None or nxt > end]
    assert 0 < _offset(kept[0]) <= end, "the newest snapshot should lie beyond the first segment"
    assert len(kept) < len(segments)

    tail_dir = tmp_path / "__cluster_metadata-0"
    tail_dir.mkdir()
    for f in [newest, *kept]:
        shutil.copy(f, tail_dir / f.name)
    assert sorted(p.name for p in tail_dir.iterdir()) == sorted([newest.name, *(s.name for s in kept)])
    tail = replay_paths([str(tail_dir)])

    assert tail.live_at_end() == whole.live_at_end()
    # the snapshot was used: the log starts above 0, and the state is known exactly from the snapshot on, which
    # the log after the hole alone could not give
    assert _log_start(tail) == _offset(kept[0]) > 0
    assert tail.coverage[0].kind == CoverageKind.MISSING and tail.coverage[0].start_offset == 0
    assert tail.last_offset == whole.last_offset
    assert whole.last_offset is not None
    for offset in range(end - 1, whole.last_offset + 1):
        state = tail.state_at(offset)
        assert state.exact, offset
        assert state.certain == whole.state_at(offset).certain, offset


def test_every_snapshot_agrees_with_the_log_before_it(kafka_run: KafkaRun) -> None:
    result = replay_paths([str(kafka_run.metadata_dir)])
    assert len(kafka_run.snapshots()) >= 2
    assert _log_start(result) == 0, "the whole log is there, so every snapshot is checked against it"
    loads = [e for e in result.events if e.cause.value == "SNAPSHOT_LOAD"]
    assert loads == [], "a snapshot changed the state the log had built: " + repr(loads[:3])
    assert not [p for p in result.anomalies if p.kind == ProblemKind.SNAPSHOT_MISMATCH]


def test_oldest_segment_removed_still_replays_and_reports_the_gap(kafka_run: KafkaRun, tmp_path: Path) -> None:
    copy = tmp_path / "__cluster_metadata-0"
    shutil.copytree(kafka_run.metadata_dir, copy)
    oldest = min(copy.glob("*.log"), key=_offset)
    next_base = min(_offset(p) for p in copy.glob("*.log") if p != oldest)
    oldest.unlink()
    result = replay_paths([str(copy)])
    whole = replay_paths([str(kafka_run.metadata_dir)])

    # coverage says which offsets are missing, and the gap is an anomaly
    missing = [c for c in result.coverage if c.kind == CoverageKind.MISSING]
    assert missing and missing[0].start_offset == 0
    assert all(c.end_offset < next_base for c in missing)
    assert _log_start(result) == next_base
    assert [p for p in result.anomalies if p.kind == ProblemKind.GAP]
    # the end state is still right, bridged by the snapshots
    assert result.live_at_end() == whole.live_at_end()
    # inside the missing range nothing is claimed exact
    for c in missing:
        for offset in {c.start_offset, (c.start_offset + c.end_offset) // 2, c.end_offset}:
            assert not result.state_at(offset).exact, offset
    # after the first snapshot that bridges the hole, every checkpoint is known exactly and equals describeAcls
    bridging = sorted(_offset(p) - 1 for p in kafka_run.snapshots() if _offset(p) - 1 >= next_base)
    assert bridging, "no snapshot after the removed segment: the gap would never be bridged"
    bridge = bridging[0]
    assert result.state_at(bridge).exact
    assert result.state_at(bridge).certain == whole.state_at(bridge).certain
    after = [cp for cp in kafka_run.checkpoints if cp["as_of_offset"] >= bridge]
    assert after, "no checkpoint after the bridging snapshot"
    for cp in after:
        for offset in (cp["as_of_offset"], cp["high_watermark_after"] - 1):
            state = result.state_at(offset)
            assert state.exact, (cp["label"], offset)
            assert frozenset(state.certain.values()) == cp["acls"], (cp["label"], offset)
    # and wherever an answer does claim to be exact (also between the hole and that snapshot), it is right
    for cp in kafka_run.checkpoints:
        state = result.state_at(cp["as_of_offset"])
        if state.exact:
            assert frozenset(state.certain.values()) == cp["acls"], cp["label"]


def test_a_bulk_create_and_delete_are_published_whole(kafka_run: KafkaRun, capsys: pytest.CaptureFixture[str]
                                                      ) -> None:
    """Kafka writes a CreateAcls call of thousands of bindings as one atomic batch, and the DeleteAcls that removes
    them as another: an offset inside either answers with what describeAcls said before the call, and says so; the
    batch's last offset answers with what it said after (DESIGN.md §2)."""
    profile = PROFILES.get(kafka_run.profile)
    if profile is None or not profile.bulk:
        pytest.skip(f"the {kafka_run.profile!r} history (KRAFT_IT_PROFILE) makes no bulk call; the default does")
    checkpoints = {cp["label"]: cp for cp in kafka_run.checkpoints}
    result = replay_paths([str(kafka_run.metadata_dir)])
    for change, before, after in (("CREATE", "bulk-before", "bulk-created"), ("REMOVE", "bulk-created", "bulk-deleted")):
        events = [e for e in result.events if e.binding.principal == BULK_PRINCIPAL and e.change.value == change]
        assert len(events) == profile.bulk, change
        records = sorted(e.record_offset for e in events if e.record_offset is not None)
        first, last, end = records[0], records[-1], {e.offset for e in events}.pop()
        # one batch: the call's records in a row; the controller may put other records after them in the same
        # batch (the batch ended one past the last binding in one run), and all become visible at its end
        assert {e.offset for e in events} == {end} and records == list(range(first, last + 1)), change
        assert last <= end, change
        assert checkpoints[before]["as_of_offset"] < first and end <= checkpoints[after]["as_of_offset"]
        for offset in (first, (first + last) // 2, end - 1):
            state = result.state_at(offset)
            assert frozenset(state.certain.values()) == checkpoints[before]["acls"], (change, offset)
            assert state.unpublished is not None and state.exact
            assert (state.unpublished.first_record, state.unpublished.visible_at, state.unpublished.changes,
                    state.unpublished.state_offset) == (first, end, profile.bulk, first - 1)
        state = result.state_at(end)
        assert frozenset(state.certain.values()) == checkpoints[after]["acls"] and state.unpublished is None

    # the command line says so too
    assert cli.main(["acls", str(kafka_run.metadata_dir), "--as-of-offset", str(first + 7)], io.StringIO()) == 0
    note = capsys.readouterr().err
    assert (f"note: offset {first + 7} lies inside an atomic batch: its {profile.bulk} ACL change(s) logged from "
            f"offset {first} become visible together at {end}; the answer is the state a node published, as of "
            f"{first - 1}") in note, note
