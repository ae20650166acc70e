"""Issue 12: `kraft-replay acls --lake` (and `changes`, `history`) read a lake directory with delta-rs instead of
starting Spark (`replay.spark.lake_without_spark`). Spark's answer is the oracle: on every sample, at every offset of its history
and past it, by time, and for the wrong questions, both readers must give the same state, coverage, time and the
same errors; and a replay that is written but not switched yet must stay invisible to both.
"""

from __future__ import annotations

import io
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from spark_dumps import SAMPLES

from replay import cli
from replay.kafka.model import QuestionError

pytestmark = pytest.mark.spark


@pytest.fixture(scope="module")
def files(sample_lake: Any) -> Any:
    from replay.spark.lake_without_spark import LakeFiles

    return LakeFiles.open(sample_lake.location)


def _interesting(lake: Any, cluster: str) -> list[int]:
    """Offsets where the answer can change: every event's offset and record offset with their neighbours, every
    coverage bound, the first offsets and past the end."""
    from pyspark.sql import functions as F

    events = lake.read("acl_events").where(F.col("cluster_id") == cluster)
    marks = {v for r in events.select("offset", "offset_min", "record_offset").collect() for v in r if v is not None}
    cov = lake.read("log_coverage").where(F.col("cluster_id") == cluster).select("start_offset", "end_offset")
    marks |= {v for r in cov.collect() for v in r}
    return sorted({m + d for m in marks | {0} for d in (-1, 0, 1) if m + d >= 0})


@pytest.mark.slow  # every sample, a few hundred offsets each
def test_every_sample_at_every_interesting_offset_is_answered_as_spark_answers(sample_lake: Any, files: Any) -> None:
    from replay.spark.queries import states_at

    asked = 0
    for sample in SAMPLES:
        offsets = _interesting(sample_lake, sample.name)
        offsets += [offsets[-1] + 1, offsets[-1] + 1000]  # past the known history: answered, not covered
        want = states_at(sample_lake, sample.name, offsets)
        got = files.states_at(sample.name, offsets)
        for at in offsets:
            assert got[at] == want[at], (sample.name, at)
        # one question at a time reads only the rows that can matter at its offset: the same answers
        for at in offsets[:: max(1, len(offsets) // 12)]:
            assert files.state_at(sample.name, offset=at) == want[at], (sample.name, at)
        assert any(s.unpublished for s in want.values()) or sample.name != "retention-gap"
        assert any(s.uncertain for s in want.values()) or sample.name != "retention-gap"
        asked += len(offsets)
    assert asked > 100


@pytest.mark.slow  # a Spark question per time: a minute and more
def test_by_time_at_the_end_and_the_wrong_questions(sample_lake: Any, files: Any) -> None:
    from pyspark.sql import functions as F

    from replay.spark.queries import state_at

    for sample in SAMPLES:
        cluster = sample.name
        assert files.state_at(cluster) == state_at(sample_lake, cluster), cluster  # the end of known history
        times = sorted(r[0] for r in sample_lake.read("offset_times").where(F.col("cluster_id") == cluster)
                       .select("time").collect())
        # the sample with a hole is asked at its first time, between two, at one and after the last; the others once
        asked = {times[0], times[len(times) // 2] - 1, times[len(times) // 2], times[-1] + 60_000}
        for t in asked if cluster == "retention-gap" else {times[len(times) // 2] - 1}:
            assert files.state_at(cluster, time=t) == state_at(sample_lake, cluster, time=t), (cluster, t)
    times = sorted(r[0] for r in sample_lake.read("offset_times").where(F.col("cluster_id") == "retention-gap")
                   .select("time").collect())
    wrong = [("retention-gap", {"time": times[0] - 1}), ("retention-gap", {"offset": -1}),
             *(("no-such-cluster", kwargs) for kwargs in ({}, {"offset": 5}, {"time": 1}))]
    for cluster, kwargs in wrong:
        with pytest.raises(QuestionError) as by_spark:
            state_at(sample_lake, cluster, **kwargs)
        with pytest.raises(QuestionError) as by_files:
            files.state_at(cluster, **kwargs)
        assert (type(by_files.value), str(by_files.value)) == (type(by_spark.value), str(by_spark.value))
    assert all(repr(s.name) in str(by_files.value) for s in SAMPLES)  # the unknown cluster's names the lake's


def test_history_and_changes_are_sparks_rows(sample_lake: Any, files: Any) -> None:
    from pyspark.sql import functions as F

    from replay.spark.queries import changes_between, history

    for sample in SAMPLES:
        cluster = sample.name
        lifetimes = history(sample_lake, cluster).orderBy("valid_from_offset", "acl_id")
        want = [r.asDict() for r in lifetimes.collect()]
        assert files.history(cluster) == want and want, cluster
        alice = [r.asDict() for r in lifetimes.where(F.col("principal") == want[0]["principal"]).collect()]
        assert files.history(cluster, principal=want[0]["principal"]) == alice
        named = [r.asDict() for r in lifetimes.where(F.col("resource_name") == want[-1]["resource_name"]).collect()]
        assert files.history(cluster, resource=want[-1]["resource_name"]) == named
        events = sorted(r["offset"] for r in sample_lake.read("acl_events").where(F.col("cluster_id") == cluster)
                        .select("offset").collect())
        times = sorted(r["time"] for r in sample_lake.read("offset_times").where(F.col("cluster_id") == cluster)
                       .select("time").collect())
        middle = events[len(events) // 2]
        for span in ({}, {"start": middle}, {"end": middle}, {"start": events[0], "end": middle},
                     {"start_time": times[len(times) // 3], "end_time": times[-1]}, {"end_time": times[0] - 1}):
            rows = [r.asDict() for r in changes_between(sample_lake, cluster, **span).collect()]
            assert files.changes_between(cluster, **span) == rows, (cluster, span)
    assert files.history("no-such-cluster") == [] and files.changes_between("no-such-cluster") == []


def test_the_command_line_answers_without_spark_and_with_it_alike(sample_lake: Any,
                                                                   capsys: pytest.CaptureFixture[str]) -> None:
    cluster = "retention-gap"
    answers = {}
    for engine in ("delta-rs", "spark", "auto"):
        out = io.StringIO()
        assert cli.main(["acls", "--lake", sample_lake.location, "--lake-cluster", cluster, "--as-of-offset", "100",
                         "--output", "json", "--engine", engine], out) == cli.EXIT_OK, capsys.readouterr().err
        answers[engine] = json.loads(out.getvalue())
        assert "asking Spark instead" not in capsys.readouterr().err
    assert answers["delta-rs"] == answers["spark"] == answers["auto"]
    assert not answers["spark"]["covered"] and answers["spark"]["acls"] == []  # in the sample's hole: said
    for command in (["changes", "--from-offset", "150", "--to-offset", "200"], ["history", "--principal", "User:alice"]):
        lines = {}
        for engine in ("delta-rs", "spark"):
            out = io.StringIO()
            assert cli.main([*command, "--lake", sample_lake.location, "--lake-cluster", cluster, "--output",
                             "jsonl", "--engine", engine], out) == cli.EXIT_OK
            lines[engine] = out.getvalue().splitlines()
        assert lines["delta-rs"] == lines["spark"] and lines["spark"], command
    # a catalog cannot be read without Spark: said, before anything starts
    assert cli.main(["acls", "--catalog", "main.kraft", "--lake-cluster", cluster, "--engine", "delta-rs"],
                    io.StringIO()) == cli.EXIT_USAGE
    assert "--engine delta-rs reads a lake directory" in capsys.readouterr().err


def test_a_replay_not_switched_yet_stays_invisible(spark: Any, sample_lake: Any, tmp_path: Path) -> None:
    """A replay writes its rows beside the visible ones before its `replay_state` commit makes them visible: rows
    of another replay id in the tables must not change the answer (`Lake.source`), nor rows of a cluster that has
    no visible replay."""
    from pyspark.sql import functions as F

    from replay.spark.lake_without_spark import LakeFiles
    from replay.spark.queries import states_at
    from replay.spark.tables import REPLAY_ID, Lake

    copy = Lake(spark, str(tmp_path / "lake"))
    shutil.copytree(sample_lake.location, copy.location)
    cluster = "retention-gap"
    ghost = copy.read_raw("acl_history").where(F.col("cluster_id") == cluster).withColumn(REPLAY_ID, F.lit("ghost"))
    ghost.union(ghost.withColumn("cluster_id", F.lit("half-replayed"))).write.format("delta").mode("append").save(
        copy.table_path("acl_history"))
    offsets = _interesting(copy, cluster)
    files = LakeFiles.open(copy.location)
    assert files.states_at(cluster, offsets) == states_at(copy, cluster, offsets)
    assert files.states_at(cluster, offsets) == LakeFiles.open(sample_lake.location).states_at(cluster, offsets)
    with pytest.raises(QuestionError, match="'half-replayed' has no replayed history"):
        files.state_at("half-replayed", offset=5)


def test_the_python_api_keeps_a_clusters_history_until_a_table_changes(spark: Any, sample_lake: Any,
                                                                        tmp_path: Path) -> None:
    """`api.Lake`'s state questions of a lake directory are answered from its files (kept between questions): the
    answers Spark gives, the history read once while no table changes, read again after a commit of rows nobody sees
    yet (same answers), and a switch to another replay seen at the next question."""
    from pyspark.sql import functions as F

    from replay.spark.api import Lake
    from replay.spark.queries import state_at, states_at
    from replay.spark.tables import REPLAY_ID, REPLAY_STATE, sql_string

    lake = Lake.at_path(spark, str(tmp_path / "lake"))
    shutil.copytree(sample_lake.location, lake.location)
    cluster = "retention-gap"
    offsets = _interesting(lake, cluster)
    want = states_at(lake, cluster, offsets)
    asked = lake.cluster(cluster)
    assert asked.states_at(offsets) == want
    files = lake.files()
    assert files is not None and files.keep
    held = files._held[cluster]
    for at in offsets[::5]:
        assert asked.state_at(offset=at) == want[at], at
    assert asked.state_at() == state_at(lake, cluster)
    assert files._held[cluster] is held  # every answer above came from what was kept

    # another replay's rows, half of the ACLs dropped, written beside the visible ones: a commit, nothing visible
    visible = lake.visible_replays()[cluster]
    for table in ("acl_history", "acl_events", "log_coverage", "offset_times"):
        rows = lake.read_raw(table).where((F.col("cluster_id") == cluster) & (F.col(REPLAY_ID) == visible))
        if table in ("acl_history", "acl_events"):
            rows = rows.where(F.crc32("acl_id") % 2 == 0)
        rows.withColumn(REPLAY_ID, F.lit("ghost")).write.format("delta").mode("append").save(lake.table_path(table))
    assert asked.states_at(offsets) == want
    assert files._held[cluster] is not held

    spark.sql(f"UPDATE {lake.table_ref(REPLAY_STATE)} SET visible_replay_id = 'ghost' "
              f"WHERE cluster_id = {sql_string(cluster)}")
    switched = states_at(lake, cluster, offsets)
    assert switched != want
    assert asked.states_at(offsets) == switched
    assert [asked.state_at(offset=at) for at in offsets[::5]] == [switched[at] for at in offsets[::5]]

    lake.engine = "spark"  # asked through Spark again
    assert lake.files() is None and asked.state_at(offset=offsets[-1]) == switched[offsets[-1]]


def test_what_delta_rs_cannot_answer_goes_to_spark_and_says_why(tmp_path: Path) -> None:
    from replay.spark.lake_without_spark import LakeFiles, Unreadable

    with pytest.raises(Unreadable, match="is not a local directory"):
        LakeFiles.open("s3a://bucket/lake")
    (tmp_path / "metadata_records" / "_delta_log").mkdir(parents=True)  # ingested with --no-replay: no replay yet
    with pytest.raises(Unreadable, match="has no table acl_history, acl_events, log_coverage, offset_times, "
                                         "replay_state yet"):
        LakeFiles.open(f"file://{tmp_path}")


@settings(max_examples=200, deadline=None)
@given(units=st.lists(st.tuples(st.integers(0, 40), st.lists(st.integers(0, 12), min_size=1, max_size=4),
                                st.sampled_from(["batch", "transaction"])), max_size=8),
       at=st.integers(-1, 60))
def test_a_question_keeps_only_the_unit_that_holds_its_moment_back(units: list[tuple[int, list[int], str]],
                                                                   at: int) -> None:
    """`_holding_back` hands the Python engine one unit of changes instead of every change logged before the moment:
    `as_of.unpublished_at` answers the same from it as from all of them."""
    import pyarrow as pa

    from replay.kafka.as_of import unpublished_at
    from replay.spark.lake_without_spark import _holding_back

    # (visible offset, record offset, cause): a unit's records become visible together, at its last one
    rows = [(first + max(gaps), first + gap, cause) for first, gaps, cause in units for gap in gaps]
    table = pa.table({"offset": pa.array([r[0] for r in rows], pa.int64()),
                      "record_offset": pa.array([r[1] for r in rows], pa.int64()),
                      "cause": pa.array([r[2] for r in rows], pa.string())})
    kept = _holding_back(table, at)
    assert kept.num_rows <= table.num_rows
    assert (unpublished_at(at, zip(kept["offset"].to_pylist(), kept["record_offset"].to_pylist(),
                                   kept["cause"].to_pylist(), strict=True))
            == unpublished_at(at, rows))
