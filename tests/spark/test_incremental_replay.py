"""Incremental replay (`replay.spark.resume`): dumps arriving day by day give, after each day's replay, the tables a
full replay of everything ingested gives, and the reference replayer's answers."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from replay.kafka import synth
from replay.kafka.dump import replay_paths
from tests.histories import STEPS, spark_property_settings
from tests.spark.test_replay_vs_reference import compare

pytestmark = pytest.mark.spark

TABLES = ["acl_events", "acl_history", "log_coverage", "anomalies", "offset_times"]


def table_rows(lake: Any, clusters: list[str]) -> dict[str, dict[str, Counter[tuple[Any, ...]]]]:
    """Per cluster, per table: its rows as the lake holds them (one query per table for all the clusters)."""
    from pyspark.sql import functions as F

    return _by_cluster({t: lake.read(t).where(F.col("cluster_id").isin(clusters)).collect() for t in TABLES},
                       clusters)


def full_replay_rows(lake: Any, clusters: list[str]) -> dict[str, dict[str, Counter[tuple[Any, ...]]]]:
    """What a full replay of everything the lake holds for `clusters` writes (computed, not written), as
    `table_rows` gives it: one replay for all of them, as `replay_lake` runs one."""
    from pyspark.sql import functions as F

    from replay.spark.replay_rules import replay_records
    from replay.spark.resume import new_replay_id
    from replay.spark.staging import Stages
    from replay.spark.tables import VISIBLE_SCHEMAS

    def read(t: str) -> Any:
        return lake.read(t).where(F.col("cluster_id").isin(clusters))

    with Stages(lake, new_replay_id()) as stages:
        frames, _ = replay_records(read("metadata_records"), read("quarantine"), stages=stages)
        return _by_cluster({t: frames[t].select(*[F.col(f.name).cast(f.dataType) for f in VISIBLE_SCHEMAS[t].fields])
                            .collect() for t in TABLES}, clusters)


def _by_cluster(rows: dict[str, list[Any]], clusters: list[str]) -> dict[str, dict[str, Counter[tuple[Any, ...]]]]:
    out: dict[str, dict[str, Counter[tuple[Any, ...]]]] = {c: {t: Counter() for t in TABLES} for c in clusters}
    for t, table in rows.items():
        for r in table:
            out[r["cluster_id"]][t][tuple(r)] += 1
    return out


def assert_readers_agree(lake: Any, cluster: str, rows: dict[str, Counter[tuple[Any, ...]]]) -> None:
    """The three ways of reading a cluster's visible rows give `rows` (`Lake.read`'s): SQL through `Lake.source`
    (the chain from `replay_state` in the query, as an installed SQL function reads it), and delta-rs without Spark
    (`lake_without_spark`); and the tables hold no row readers do not see (the replay removed them)."""
    from pyspark.sql import functions as F

    from replay.spark.lake_without_spark import LakeFiles
    from replay.spark.tables import VISIBLE_SCHEMAS

    for t in TABLES:
        sql = lake.spark.sql(f"SELECT * FROM {lake.source(t)} WHERE cluster_id = '{cluster}'").collect()
        assert Counter(tuple(r) for r in sql) == rows[t], t
        assert lake.read_raw(t).where(F.col("cluster_id") == cluster).count() == sum(rows[t].values()), t
    # the README's recipe for one's own SQL over the raw tables ("Readers see one finished replay")
    ranges = ("coalesce(s.visible_ranges, array(named_struct('replay_id', s.visible_replay_id, 'after_offset', NULL, "
              "'upto_offset', NULL)))")
    own = lake.spark.sql(
        f"SELECT t.* EXCEPT (replay_id) FROM {lake.table_ref('acl_events')} t JOIN {lake.table_ref('replay_state')} s "
        f"ON t.cluster_id = s.cluster_id WHERE t.cluster_id = '{cluster}' AND exists({ranges}, r -> "
        "r.replay_id = t.replay_id AND coalesce(t.offset > r.after_offset, TRUE) AND "
        "coalesce(t.offset <= r.upto_offset, r.upto_offset IS NULL))").collect()
    assert Counter(tuple(r) for r in own) == rows["acl_events"]
    files = LakeFiles(lake.location)
    cols = VISIBLE_SCHEMAS["acl_history"].fieldNames()
    assert Counter(tuple(r[c] for c in cols) for r in files.history(cluster)) == rows["acl_history"]
    cols = VISIBLE_SCHEMAS["acl_events"].fieldNames()
    assert Counter(tuple(r[c] for c in cols) for r in files.changes_between(cluster)) == rows["acl_events"]


def state(lake: Any, cluster: str) -> Any:
    from pyspark.sql import functions as F

    return lake.read("replay_state").where(F.col("cluster_id") == cluster).first()


def write_days(sc: dict[str, Any], root: Path, days: list[float]) -> list[list[str]]:
    """A drawn history as the dumps of successive days: day k holds the log up to a cut (and the snapshots below
    it); the last day holds it all, as `write_scenario` writes it (retention, divergent and text copies, ...).
    Snapshots are drawn as fractions of the log, so that they fall inside the early days."""
    from tests.spark.test_replay_vs_reference import write_scenario

    log = synth.log_from_steps([*sc["steps"], ("noop",)], valid=sc["valid"])
    sc = {**sc, "cuts": sorted({max(1, int(log.end_offset * f)) for f in sc["snapshots"]}), "high_watermark": None}
    snaps = synth.quiet_snapshot_ends(log, sc["cuts"])
    out = []
    for k, frac in enumerate(days):
        cut = max(1, int(log.end_offset * frac))
        d = root / f"day{k}"
        earlier = tuple(s for s in snaps if s <= cut)
        tampered = snaps[0] if sc["tamper"] and earlier else None  # a node's snapshot file is the same every day
        files = synth.write_dump(log, str(d), synth.Layout(segment_every=sc["segment_every"], codec=sc["codec"],
                                                          snapshot_at=earlier, tamper_snapshot=tampered,
                                                          max_offset=cut))
        if files:
            out.append([str(d)])
    out.append(write_scenario(sc, root / "last"))
    return out


def run_days(spark: Any, root: Path, scenarios: list[dict[str, Any]], days: list[float]) -> list[str]:
    """Ingest each scenario's days as its own cluster, replaying after every day; after each replay, the tables
    equal a full replay's and the reference's. Returns the modes the replays chose."""
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, str(root / "lake"))
    dumps = {f"c{i}": write_days(sc, root / f"c{i}", days) for i, sc in enumerate(scenarios)}
    modes: list[str] = []
    replays: dict[str, str] = {}
    for day in range(max(len(d) for d in dumps.values())):
        todo = [c for c, d in dumps.items() if day < len(d)]
        for c in todo:
            ingest(spark, dumps[c][day], cluster=c, lake=lake, progress=False)
        replay_lake(lake, todo, progress=False)
        stored, full = table_rows(lake, todo), full_replay_rows(lake, todo)
        for c in todo:
            row = state(lake, c)
            modes.append("unchanged" if replays.get(c) == row.replay_id else f"{row.mode}: {row.reason}")
            replays[c] = row.replay_id
            assert stored[c] == full[c], (c, day, row.reason)
            compare(replay_paths([p for d in dumps[c][: day + 1] for p in d]), lake, c)
    return modes


DAYS = st.lists(st.floats(0.1, 0.95), min_size=1, max_size=2).map(sorted)
SCENARIO = st.fixed_dictionaries({
    "steps": STEPS, "valid": st.booleans(), "segment_every": st.sampled_from([3, 7, 1000]),
    "snapshots": st.lists(st.floats(0.05, 1.0), min_size=1, max_size=4),  # where, as fractions of the log
    "retain": st.one_of(st.none(), st.integers(0, 3)), "drop": st.lists(st.integers(0, 8), max_size=1, unique=True),
    "tamper": st.booleans(), "codec": st.sampled_from([0, 2]), "diverge": st.booleans(), "overlap": st.booleans(),
    "text": st.sampled_from([None, None, "4.3"]),
})

_TXN_AND_SNAPSHOTS = {
    "steps": [("create", 1), ("create", 2), ("new_batch",), ("begin",), ("create", 3), ("new_batch",),
              ("create", 4), ("end",), ("new_batch",), ("delete", 0), ("create", 5), ("new_batch",),
              ("stray_remove", True), ("new_batch",), ("begin",), ("create", 6), ("abort",), ("create", 7),
              ("new_batch",), ("delete", 1), ("create", 8), ("new_batch",), ("begin",), ("create", 9)],
    "valid": False, "segment_every": 3, "snapshots": [0.15, 0.35, 0.55, 0.7], "retain": None, "drop": [], "tamper": False,
    "codec": 0, "diverge": False, "overlap": False, "text": None}


# Each example is several days of ingest and replay (minutes on 2 cores): the suite runs the explicit one; see
# `spark_property_settings` for drawing more.
@pytest.mark.property
@pytest.mark.extended  # minutes of Spark: `make test-all` (`make test` has the two tests below)
@pytest.mark.spark_b  # the other Spark worker
@settings(**spark_property_settings())
@given(scenarios=st.lists(SCENARIO, min_size=2, max_size=2), days=DAYS)
@example(scenarios=[_TXN_AND_SNAPSHOTS, {**_TXN_AND_SNAPSHOTS, "retain": 1, "diverge": True, "text": "4.3"}],
         days=[0.3, 0.6])
def test_incremental_replay_equals_full_replay(spark: Any, tmp_path_factory: pytest.TempPathFactory,
                                               scenarios: list[dict[str, Any]], days: list[float]) -> None:
    modes = run_days(spark, tmp_path_factory.mktemp("incremental"), scenarios, days)
    print("replay modes:", modes)


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
@pytest.mark.spark_b  # minutes of Spark: run beside the other Spark tests (tests/conftest.py)
def test_a_later_dump_resumes_from_the_last_snapshot(spark: Any, tmp_path: Path, without_aqe: None) -> None:
    """A log with snapshots, ingested in three dumps: the second and third replays resume; a re-ingest of an old
    dump changes nothing and replays nothing; a dump reaching back before the resume point replays in full."""
    from pyspark.sql import functions as F

    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    log = synth.generate(7, n_batches=60)
    snaps = synth.quiet_snapshot_ends(log, [log.end_offset // 4, log.end_offset // 2, 3 * log.end_offset // 4])
    assert len(snaps) == 3
    lake = Lake(spark, str(tmp_path / "lake"))
    cuts = [snaps[0] + 3, snaps[1] + 3, None]
    dumps = []
    for k, cut in enumerate(cuts):
        d = str(tmp_path / f"day{k}")
        synth.write_dump(log, d, synth.Layout(segment_every=10, snapshot_at=tuple(
            s for s in snaps if cut is None or s <= cut), max_offset=cut))
        dumps.append(d)
    expected_resume = [None, snaps[0] - 1, snaps[1] - 1]
    replays: list[str] = []
    for k, d in enumerate(dumps):
        ingest(spark, [d], cluster="c1", lake=lake, progress=False)
        counts = replay_lake(lake, ["c1"], progress=False)
        st_row = state(lake, "c1")
        assert (st_row.mode, st_row.status) == ("full" if k == 0 else "incremental", "done"), st_row.reason
        replays.append(st_row.replay_id)
        # the replay wrote only the rows past its resume point: the earlier replays' rows up to it stay in place,
        # and readers see each replay over its range
        bounds = [None, *expected_resume[1: k + 1], None]
        assert [(r.replay_id, r.after_offset, r.upto_offset) for r in st_row.visible_ranges] == [
            (replays[i], bounds[i], bounds[i + 1]) for i in range(k + 1)]
        if k:
            assert st_row.reason == "1 new ingest(s), all after it"
        rows = table_rows(lake, ["c1"])
        assert rows == full_replay_rows(lake, ["c1"])
        assert_readers_agree(lake, "c1", rows["c1"])
        if k == 1:
            day2 = (rows, lake.history("replay_state", 1).first()["timestamp"])
        # the counts it returns (counted as the rows were written, and those kept) are the rows the tables hold
        assert dict(counts) == {t: sum(rows["c1"][t].values()) for t in TABLES}
        compare(replay_paths(dumps[: k + 1]), lake, "c1")
    assert state(lake, "c1").resume_offset == snaps[2] - 1
    # as of the second day's replay (time travel reads replay_state's chain as of then, too)
    then = {t: Counter(tuple(r) for r in lake.read(t, timestamp=str(day2[1])).where(F.col("cluster_id") == "c1")
                       .collect()) for t in TABLES}
    assert then == day2[0]["c1"]

    versions = {t: lake.version(t) for t in TABLES}
    ingest(spark, [dumps[1]], cluster="c1", lake=lake, progress=False)  # nothing new
    counts = replay_lake(lake, ["c1"], progress=False)
    assert {t: lake.version(t) for t in TABLES} == versions
    assert dict(counts) == {t: sum(rows["c1"][t].values()) for t in TABLES}  # counted: nothing was written
    assert state(lake, "c1").mode == "incremental"

    # a node that kept other records at offsets before the resume point (a truncated suffix): full replay
    other = str(tmp_path / "node2")
    synth.write_dump(synth.divergent_copy(log, 3, 5)[1], other, synth.Layout(segment_every=1000, max_offset=snaps[0]))
    report = ingest(spark, [other], cluster="c1", lake=lake, progress=False)
    assert report.records_new > 0
    replay_lake(lake, ["c1"], progress=False)
    st_row = state(lake, "c1")
    assert st_row.mode == "full" and "at or before the resume point" in st_row.reason, st_row.reason
    assert table_rows(lake, ["c1"]) == full_replay_rows(lake, ["c1"])
    events = lake.read("acl_events").where(F.col("cluster_id") == "c1")
    assert events.count() == events.select("seq").distinct().count()


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
@pytest.mark.spark_b
def test_full_replay_on_request_and_with_a_high_watermark(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import REPLAY_SCHEMAS, Lake

    log = synth.generate(3, n_batches=30)
    snaps = synth.quiet_snapshot_ends(log, [log.end_offset // 2])
    d = str(tmp_path / "dump")
    synth.write_dump(log, d, synth.Layout(segment_every=10, snapshot_at=snaps))
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [d], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"], high_watermark=snaps[0] + 2, progress=False)
    st_row = state(lake, "c1")
    assert (st_row.mode, st_row.resume_offset, st_row.high_watermark) == ("full", None, snaps[0] + 2)
    replay_lake(lake, ["c1"], progress=False)  # after a watermark, nothing new still means a full replay
    st_row = state(lake, "c1")
    assert (st_row.mode, st_row.reason) == ("full", f"the previous replay stopped at high watermark {snaps[0] + 2}")
    assert st_row.high_watermark is None and st_row.resume_offset == snaps[0] - 1
    counts = replay_lake(lake, ["c1"], full=True, progress=False)
    assert state(lake, "c1").reason == "asked for a full replay"
    # the counts it returns (counted as the rows were written) are the rows the tables hold for the cluster
    assert dict(counts) == {t: lake.read(t).where(F.col("cluster_id") == "c1").count() for t in REPLAY_SCHEMAS}
    assert set(counts) == set(REPLAY_SCHEMAS) and counts["acl_events"] > 0
    compare(replay_paths([d]), lake, "c1")




def test_a_long_chain_of_resumed_replays_is_gathered_by_a_full_one(spark: Any) -> None:
    """After `MAX_CHAIN` resumed replays in a row, the next is full: readers of a long chain read many small files."""
    from replay.spark.resume import plan
    from replay.spark.visibility import MAX_CHAIN, as_rows, full_chain, resumed_chain

    records = spark.createDataFrame(
        [("c1", "i2", "log", 50, None, 0, False)],
        "cluster_id string, ingest_id string, stream string, offset long, snapshot_end_offset long, api_key int, "
        "is_control boolean")
    quarantine = spark.createDataFrame([], "cluster_id string, ingest_id string, offset long")
    chain = full_chain("r0")
    for k in range(1, MAX_CHAIN):
        chain = resumed_chain(chain, f"r{k}", k)

    def state(ranges: Any) -> dict[str, Any]:
        return {"status": "done", "ingest_ids": [], "resume_offset": 20, "high_watermark": None,
                "hole_since_marker": False, "visible_replay_id": ranges[-1][0], "visible_ranges": as_rows(ranges)}

    shorter = plan(records, quarantine, {"c1": state(chain[:-1])}, ["c1"], None, False)["c1"]
    assert (shorter.mode, shorter.reason) == ("incremental", "1 new ingest(s), all after it")
    longest = plan(records, quarantine, {"c1": state(chain)}, ["c1"], None, False)["c1"]
    assert longest.mode == "full" and longest.reason.startswith(f"{MAX_CHAIN} replays in a row resumed"), longest
