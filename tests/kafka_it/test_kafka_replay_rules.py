"""Issue 3 item 3, the replay comparisons on the real broker's metadata log:

- replaying from the newest snapshot plus the log after it gives the same final state as the whole log, and every
  snapshot agrees with the log before it;
- a copy of the directory with the oldest segment removed (as retention would) still replays, the gap is reported,
  and answers are never claimed exact where history is missing.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from replay.harness.itrun import KafkaRun
from replay.kafka.dump import replay_paths
from replay.kafka.model import ProblemKind
from replay.kafka.replayer import CoverageKind

pytestmark = pytest.mark.kafka


def test_run_has_enough_history(kafka_run: KafkaRun) -> None:
    assert len(kafka_run.snapshots()) >= 2
    assert len(kafka_run.segments()) >= 2


def test_newest_snapshot_plus_tail_equals_whole_log(kafka_run: KafkaRun, tmp_path: Path) -> None:
    whole = replay_paths([str(kafka_run.metadata_dir)])
    assert not [p for p in whole.anomalies if p.kind == ProblemKind.SNAPSHOT_MISMATCH]

    newest = max(kafka_run.snapshots(), key=lambda p: p.name)
    end = int(newest.name.split("-")[0])
    tail_dir = tmp_path / "__cluster_metadata-0"
    tail_dir.mkdir()
    shutil.copy(newest, tail_dir / newest.name)
    for seg in kafka_run.segments():  # the segments holding anything at or after the snapshot's end
        shutil.copy(seg, tail_dir / seg.name)
    from_snapshot = replay_paths([str(tail_dir)], )
    assert from_snapshot.live_at_end() == whole.live_at_end()

    only_tail = tmp_path / "only-tail" / "__cluster_metadata-0"
    only_tail.mkdir(parents=True)
    shutil.copy(newest, only_tail / newest.name)
    later = [s for s in kafka_run.segments() if int(s.name.split(".")[0]) >= end]
    earlier = [s for s in kafka_run.segments() if int(s.name.split(".")[0]) < end]
    if earlier:  # the segment holding the snapshot's end offset: keep only what it needs by copying it too
        shutil.copy(earlier[-1], only_tail / earlier[-1].name)
    for seg in later:
        shutil.copy(seg, only_tail / seg.name)
    assert replay_paths([str(only_tail)]).live_at_end() == whole.live_at_end()


def test_every_snapshot_agrees_with_the_log_before_it(kafka_run: KafkaRun) -> None:
    result = replay_paths([str(kafka_run.metadata_dir)])
    loads = [e for e in result.events if e.cause.value == "SNAPSHOT_LOAD"]
    assert loads == [], "a snapshot changed the state the log had built: " + repr(loads[:3])
    assert not [p for p in result.anomalies if p.kind == ProblemKind.SNAPSHOT_MISMATCH]


def test_oldest_segment_removed_still_replays_and_reports_the_gap(kafka_run: KafkaRun, tmp_path: Path) -> None:
    copy = tmp_path / "__cluster_metadata-0"
    shutil.copytree(kafka_run.metadata_dir, copy)
    oldest = min(copy.glob("*.log"), key=lambda p: p.name)
    next_base = min(int(p.name.split(".")[0]) for p in copy.glob("*.log") if p != oldest)
    oldest.unlink()
    result = replay_paths([str(copy)])
    whole = replay_paths([str(kafka_run.metadata_dir)])

    missing = [c for c in result.coverage if c.kind == CoverageKind.MISSING]
    assert missing and missing[0].start_offset == 0
    assert [p for p in result.anomalies if p.kind == ProblemKind.GAP]
    # the end state is still right, bridged by the snapshots
    assert result.live_at_end() == whole.live_at_end()
    # inside the hole nothing is claimed exact; after the first snapshot that bridges it, answers are exact again
    inside = result.state_at(next_base // 2)
    assert not inside.exact
    snaps = sorted(int(p.name.split("-")[0]) for p in kafka_run.snapshots())
    bridging = [s for s in snaps if s - 1 >= next_base]
    if bridging:
        at = bridging[0] - 1
        assert result.state_at(at).exact
        assert result.state_at(at).certain == whole.state_at(at).certain
    # checkpoints recorded by Kafka after the hole still agree with the certain state
    for cp in kafka_run.checkpoints:
        offset = cp["as_of_offset"]
        state = result.state_at(offset)
        if state.exact:
            assert frozenset(state.certain.values()) == cp["acls"], offset
