"""Issue 4 item 4: Spark's replay must equal the reference replayer on random histories.

Each example writes a random history with our writer (segments, snapshots, holes, a tampered snapshot, a second
dump holding a divergent uncommitted suffix), ingests it into a fresh lake with Spark, replays it in Spark, and
requires the lifetimes, the state at sampled offsets, the coverage and the anomalies to equal the reference's.
"""

from __future__ import annotations

import os
import random
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.kafka import synth
from replay.kafka.dump import replay_paths
from replay.kafka.replayer import ReplayResult

pytestmark = pytest.mark.spark

_REPLAY_KINDS = {"duplicate_id", "unknown_remove", "snapshot_mismatch", "divergence", "pending_transaction",
                 "nested_begin", "end_without_begin", "abort_without_begin", "gap", "skipped_bad_batch",
                 "snapshot_no_header", "snapshot_no_footer"}


def _lifetimes_ref(result: ReplayResult) -> Counter[tuple[Any, ...]]:
    out: Counter[tuple[Any, ...]] = Counter()
    for life in result.lifetimes:
        b = life.binding
        out[(life.acl_id, b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
             b.permission_type, life.valid_from_offset, life.valid_from_min_offset, life.valid_to_offset,
             life.valid_to_min_offset, life.began_by.value, life.ended_by.value if life.ended_by else None)] += 1
    return out


def _lifetimes_spark(rows: list[Any]) -> Counter[tuple[Any, ...]]:
    return Counter(
        (r.acl_id, r.resource_type, r.resource_name, r.pattern_type, r.principal, r.host, r.operation,
         r.permission_type, r.valid_from_offset, r.valid_from_min_offset, r.valid_to_offset, r.valid_to_min_offset,
         r.began_by, r.ended_by) for r in rows)


def run_both(spark: Any, tmp: str, dumps: list[str], cluster: str = "c1") -> tuple[ReplayResult, Any]:
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, os.path.join(tmp, "lake"))
    ingest(spark, dumps, cluster=cluster, lake=lake, progress=False)
    replay_lake(lake, [cluster])
    return replay_paths(dumps), lake


def compare(result: ReplayResult, lake: Any, cluster: str, rng: random.Random) -> None:
    from pyspark.sql import functions as F

    from replay.spark.queries import state_at

    hist = lake.read("acl_history").where(F.col("cluster_id") == cluster).collect()
    assert _lifetimes_spark(hist) == _lifetimes_ref(result)

    got_anomalies = Counter((r.kind, r.offset) for r in lake.read("anomalies").where(
        F.col("cluster_id") == cluster).collect() if r.kind in _REPLAY_KINDS)
    want_anomalies = Counter((p.kind.value, p.offset) for p in result.anomalies if p.kind.value in _REPLAY_KINDS)
    assert got_anomalies == want_anomalies

    cov = sorted((r.start_offset, r.end_offset, r.kind) for r in lake.read("log_coverage").where(
        (F.col("cluster_id") == cluster) & (F.col("kind") != "incomplete")).collect())
    assert cov == sorted((c.start_offset, c.end_offset, c.kind.value) for c in result.coverage)
    incomplete = sorted((r.start_offset, r.end_offset) for r in lake.read("log_coverage").where(
        (F.col("cluster_id") == cluster) & (F.col("kind") == "incomplete")).collect())
    assert incomplete == sorted(result.incomplete)

    if result.last_offset is not None:
        for offset in {0, result.last_offset, *(rng.randint(0, result.last_offset) for _ in range(3))}:
            want = result.state_at(offset)
            got = state_at(lake, cluster, offset=offset)
            assert got.certain == want.certain, offset
            assert got.uncertain == want.uncertain, offset
            assert (got.covered, got.complete) == (want.covered, want.complete), offset
        for t in (result.times[0][1], result.times[-1][1]):
            assert state_at(lake, cluster, time=t).offset == result.offset_at_time(t)


layouts = st.builds(
    dict,
    seed=st.integers(0, 10_000),
    n_batches=st.integers(5, 60),
    segment_every=st.sampled_from([10, 25, 1000]),
    snapshots=st.lists(st.integers(1, 200), max_size=3, unique=True),
    drop=st.lists(st.integers(0, 6), max_size=2, unique=True),
    tamper=st.booleans(),
    diverge=st.booleans(),
    codec=st.sampled_from([0, 1, 2, 3, 4]),
)


@settings(max_examples=8, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(layout=layouts)
def test_spark_replay_equals_reference(spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                       layout: dict[str, Any]) -> None:
    tmp = str(tmp_path_factory.mktemp("replay-vs-ref"))
    log = synth.generate(layout["seed"], n_batches=layout["n_batches"])
    end = log.end_offset
    snaps = tuple(sorted({min(s, end) for s in layout["snapshots"]}))
    dumps = [os.path.join(tmp, "node1")]
    other = None
    if layout["diverge"] and len(log.batches) > 3:
        log, other = synth.divergent_copy(log, len(log.batches) - 2, layout["seed"])
    synth.write_dump(log, dumps[0], synth.Layout(
        segment_every=layout["segment_every"], snapshot_at=snaps,
        tamper_snapshot=snaps[0] if layout["tamper"] and snaps else None,
        drop_segments=tuple(layout["drop"]) if snaps else (), codec=layout["codec"]))
    if other is not None:
        dumps.append(os.path.join(tmp, "node2"))
        synth.write_dump(other, dumps[1], synth.Layout(segment_every=1000))
    result, lake = run_both(spark, tmp, dumps)
    compare(result, lake, "c1", random.Random(layout["seed"]))


def test_replay_is_incremental_when_a_later_dump_arrives(spark: Any, tmp_path: Any) -> None:
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake

    log = synth.generate(99, n_batches=40)
    half = log.batches[len(log.batches) // 2].base_offset
    first, full = str(tmp_path / "day1"), str(tmp_path / "day2")
    synth.write_dump(log, first, synth.Layout(segment_every=1000, max_offset=half))
    synth.write_dump(log, full, synth.Layout(segment_every=1000))
    result, lake = run_both(spark, str(tmp_path), [first])
    compare(result, lake, "c1", random.Random(1))
    ingest(spark, [full], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"])
    compare(replay_paths([first, full]), lake, "c1", random.Random(2))
