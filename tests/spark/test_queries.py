"""Issue 4 item 5: the as-of questions from Python and SQL agree with the reference, and Delta's own time travel
over ingests works, also on a copy of the lake (in-commit timestamps).

The real `data/retention-gap` sample is used: its first 163 offsets are gone, so the answers there must say so.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest
from spark_dumps import DATA

from replay.kafka.dump import replay_paths

pytestmark = pytest.mark.spark

SAMPLE = DATA / "retention-gap"
CLUSTER = SAMPLE.name  # its cluster in the shared `sample_lake` (conftest.py)


@pytest.fixture(scope="module")
def lake(sample_lake: Any) -> Any:
    """The samples' lake, ingested and replayed once per run; these tests only read it."""
    from replay.spark.queries import register_sql_functions

    register_sql_functions(sample_lake)
    return sample_lake


@pytest.fixture(scope="module")
def reference() -> Any:
    return replay_paths([str(SAMPLE)])


def _offsets(reference: Any) -> list[int]:
    last = reference.last_offset
    inside = sorted({e.record_offset for e in reference.events if e.record_offset is not None
                     and e.record_offset < e.offset})  # inside a CreateAcls / DeleteAcls batch
    return sorted({0, 100, 162, 163, 170, 177, 178, 250, last, last + 5, *inside[:2]})


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_sql_state_at_and_coverage_at_equal_the_reference(spark: Any, lake: Any, reference: Any) -> None:
    for offset in _offsets(reference):
        want = reference.state_at(offset)
        rows = spark.sql(f"SELECT * FROM acl_state_at('{CLUSTER}', {offset})").collect()
        assert {r.acl_id for r in rows if r.certainty == "certain"} == set(want.certain), offset
        assert {r.acl_id for r in rows if r.certainty == "uncertain"} == set(want.uncertain), offset
        (cov,) = spark.sql(f"SELECT * FROM acl_coverage_at('{CLUSTER}', {offset})").collect()
        assert (cov.as_of_offset, cov.covered, cov.complete, cov.exact, cov.certain_acls, cov.uncertain_acls) == (
            offset, want.covered, want.complete, want.exact, len(want.certain), len(want.uncertain)), offset
        held = want.unpublished  # the offset lies inside a batch: the answer is the state before it, and says so
        assert (cov.state_as_of_offset, cov.note) == ((held.state_offset, held.sentence()) if held else (offset, None))
    assert any(reference.state_at(o).unpublished for o in _offsets(reference)), "no offset inside a batch asked"
    # inside the hole the answer says it is not exact, and why
    (hole,) = spark.sql(f"SELECT * FROM acl_coverage_at('{CLUSTER}', 100)").collect()
    assert not hole.covered and not hole.exact


def test_wrong_questions_raise_typed_errors(spark: Any, lake: Any, reference: Any,
                                           capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 18 item 5: an unknown cluster (the error lists the lake's), a negative offset, a time before the known
    history, a typo in a question: errors, not empty answers; the CLI says it in one line and exits 2."""
    import io

    from replay import cli
    from replay.kafka.model import QuestionError, UnknownClusterError
    from replay.spark.authorize import authorize_one
    from replay.spark.queries import state_at

    for offset in (5, None):
        with pytest.raises(UnknownClusterError) as info:
            state_at(lake, "no-such-cluster", offset=offset)
        assert "cluster 'no-such-cluster' has no replayed history" in str(info.value)
        assert "'retention-gap'" in str(info.value) and "'small-snapshots'" in str(info.value)
    with pytest.raises(QuestionError, match="offset -7 is negative"):
        state_at(lake, CLUSTER, offset=-7)
    first = min(reference.times, key=lambda ot: ot[1])
    with pytest.raises(QuestionError, match=rf"known history starts at .* \(offset {first[0]}\)"):
        state_at(lake, CLUSTER, time=first[1] - 1)
    after = state_at(lake, CLUSTER, offset=reference.last_offset + 5)  # answered, and not covered
    assert not after.covered and after.certain == reference.state_at(reference.last_offset + 5).certain
    with pytest.raises(QuestionError, match="operation 'FROB'"):
        authorize_one(spark, lake, CLUSTER, "User:alice", "10.0.0.1", "FROB", "TOPIC", "t")
    with pytest.raises(QuestionError, match="principal 'alice'"):
        authorize_one(spark, lake, CLUSTER, "alice", "10.0.0.1", "READ", "TOPIC", "t")
    with pytest.raises(UnknownClusterError):
        authorize_one(spark, lake, "nope", "User:alice", "10.0.0.1", "READ", "TOPIC", "t")
    capsys.readouterr()
    out = io.StringIO()
    assert cli.main(["acls", "--lake", lake.location, "--lake-cluster", "nope"], out) == cli.EXIT_USAGE
    err = capsys.readouterr().err
    assert out.getvalue() == "" and "kraft-replay: cluster 'nope' has no replayed history" in err
    # a replay of a cluster the lake holds nothing of: an error before anything is written, not an empty replay
    # that would make the mistyped name a cluster without ACLs
    state_version = lake.version("replay_state")
    for full in ([], ["--full"]):
        assert cli.main(["replay", "--lake", lake.location, "--lake-cluster", "retention_gap", *full],
                        out) == cli.EXIT_USAGE
        err = capsys.readouterr().err
        assert "nothing of cluster 'retention_gap' is in the lake" in err and "'retention-gap'" in err, err
    assert out.getvalue() == "" and lake.version("replay_state") == state_version


def test_states_at_many_offsets_are_the_references_and_state_at_is_one_of_them(lake: Any, reference: Any) -> None:
    """`states_at`: the state at many offsets in one query (in the hole, in the log, inside a batch, after the
    end), each the reference's; `state_at` is its one-offset case; wrong questions raise as `state_at`'s do."""
    from replay.kafka.model import QuestionError, UnknownClusterError
    from replay.spark.queries import state_at, states_at

    asked = _offsets(reference)
    states = states_at(lake, CLUSTER, [*asked, asked[0]])
    assert sorted(states) == asked
    for offset, got in states.items():
        want = reference.state_at(offset)
        assert (got.offset, got.time, got.certain, got.uncertain, got.covered, got.complete, got.unpublished) == (
            offset, reference.time_of(offset), want.certain, want.uncertain, want.covered, want.complete,
            want.unpublished), offset
    assert any(s.unpublished for s in states.values()) and any(not s.covered for s in states.values())
    assert state_at(lake, CLUSTER, offset=asked[-1]) == states[asked[-1]]
    assert states_at(lake, CLUSTER, []) == {}
    with pytest.raises(QuestionError, match="offset -1 is negative"):
        states_at(lake, CLUSTER, [3, -1])
    with pytest.raises(UnknownClusterError):
        states_at(lake, "no-such-cluster", [1, 2])


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_sql_by_time_equals_the_reference(spark: Any, lake: Any, reference: Any) -> None:
    from datetime import datetime, timezone

    for _, time_ms in reference.times[:: max(1, len(reference.times) // 5)]:
        ts = datetime.fromtimestamp(time_ms / 1000, tz=timezone.utc).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3]
        want_offset = reference.offset_at_time(time_ms)
        want = reference.state_at(want_offset)
        rows = spark.sql(f"SELECT * FROM acl_state_at_time('{CLUSTER}', TIMESTAMP'{ts}')").collect()
        assert {r.acl_id for r in rows if r.certainty == "certain"} == set(want.certain), ts
        (cov,) = spark.sql(f"SELECT * FROM acl_coverage_at_time('{CLUSTER}', TIMESTAMP'{ts}')").collect()
        assert (cov.as_of_offset, cov.exact) == (want_offset, want.exact), ts


def test_changes_between_from_python_and_sql_equal_the_reference(spark: Any, lake: Any, reference: Any) -> None:
    from replay.spark.queries import changes_between, history, state_at

    for start, end in [(-1, reference.last_offset), (170, 250), (178, 200)]:
        want = sorted((e.offset, e.acl_id, e.change.value) for e in reference.events if start < e.offset <= end)
        got = sorted((r.offset, r.acl_id, r.change) for r in changes_between(lake, CLUSTER, start, end).collect())
        sql = sorted((r.offset, r.acl_id, r.change) for r in spark.sql(
            f"SELECT * FROM acl_changes_between('{CLUSTER}', {start}, {end})").collect())
        assert got == want == sql, (start, end)
    assert history(lake, CLUSTER).count() == len(reference.lifetimes)
    t = reference.times[-1][1]
    assert state_at(lake, CLUSTER, time=t).certain == reference.state_at(reference.offset_at_time(t)).certain


def test_delta_time_travel_over_ingests_survives_a_copy(spark: Any, lake: Any, tmp_path: Path) -> None:
    """Each ingest and replay is a Delta commit; VERSION AS OF and TIMESTAMP AS OF read what was known then."""
    path = lake.table_path("acl_history")
    history_rows = spark.sql(f"DESCRIBE HISTORY delta.`{path}`").collect()
    assert history_rows and all(r.userMetadata for r in history_rows if r.operation != "CREATE TABLE")
    latest = max(r.version for r in history_rows)
    now = spark.read.format("delta").load(path).count()
    assert spark.sql(f"SELECT count(*) AS n FROM delta.`{path}` VERSION AS OF {latest}").first().n == now
    # in-commit timestamps are in the log itself: a copy of the lake keeps them, so TIMESTAMP AS OF still works
    copy = tmp_path / "copy"
    shutil.copytree(path, copy)
    stamp = max(r.timestamp for r in history_rows)
    copied = spark.sql(f"SELECT count(*) AS n FROM delta.`{copy}` TIMESTAMP AS OF '{stamp}'").first().n
    assert copied == now
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{copy}`").collect()}
    assert props.get("delta.enableInCommitTimestamps") == "true"


def test_question_values_are_parameter_markers(spark: Any) -> None:
    """What a user asks about reaches Spark as a parameter value, never as SQL text (`rules.run_sql`), typed as a
    literal would be, also in a Delta session, whose parser drops parameter values unless Spark binds them in the
    analyzer (delta-io/delta#7640); the session's setting is left as it was."""
    from replay.spark.rules import BIND_IN_ANALYZER, markers, run_sql

    values = {"name": "it's {x}; DROP TABLE acl_history; --", "at": 7, "users": [], "flag": True, "none": None}
    p = markers(values)
    assert p["at"] == "CAST(:at AS BIGINT)" and p["users"] == "CAST(:users AS ARRAY<STRING>)" and p["name"] == ":name"
    before = spark.conf.get(BIND_IN_ANALYZER, None)
    frame = spark.createDataFrame([(1,)], "n int")
    df = run_sql(spark, f"SELECT {', '.join(f'{m} AS {k}' for k, m in p.items())} FROM {{frame}}", values,
                 frame=frame)
    assert df.first().asDict() == values
    assert dict(df.dtypes)["at"] == "bigint" and dict(df.dtypes)["users"] == "array<string>"
    assert spark.conf.get(BIND_IN_ANALYZER, None) == before


def test_an_offset_inside_a_batch_answers_as_of_before_it_and_says_so(
        spark: Any, lake: Any, reference: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 16 item 2: the sample's CreateAcls calls are batches of several records; an offset inside one answers
    with the state before the batch, on the command line and from Python, and says so."""
    import io
    import json

    from replay import cli
    from replay.spark.queries import state_at, unpublished

    at = min(e.record_offset for e in reference.events if e.record_offset is not None and e.record_offset < e.offset)
    held = reference.state_at(at).unpublished
    assert held is not None and unpublished(lake, CLUSTER, at) == held
    assert state_at(lake, CLUSTER, offset=at).certain == reference.state_at(held.state_offset).certain
    assert unpublished(lake, CLUSTER, held.visible_at) is None

    out = io.StringIO()
    assert cli.main(["acls", "--lake", lake.location, "--lake-cluster", CLUSTER, "--as-of-offset", str(at),
                     "--output", "json"], out) == 0
    assert json.loads(out.getvalue())["insideAtomicUnit"] == held.meta()
    assert f"note: {held.sentence()}" in capsys.readouterr().err
    assert cli.main(["audit", "what-can", "--lake", lake.location, "--lake-cluster", CLUSTER, "--principal",
                     "User:alice", "--as-of-offset", str(at)], io.StringIO()) == 0
    assert f"note: {held.sentence()}" in capsys.readouterr().err


def test_a_query_gets_only_the_functions_it_names(spark: Any, sample_lake: Any) -> None:
    """`kraft-replay sql` creates the functions and views its query names (`sqlddl.words`), as Spark analyses each
    one as it is created; in a session of its own, the others are not there."""
    from replay.spark.queries import register_sql_functions
    from replay.spark.sqlddl import words
    from replay.spark.tables import Lake

    own = Lake(spark.newSession(), sample_lake.location)
    named = words(f"SELECT * FROM ACL_Coverage_At('{CLUSTER}', 5) JOIN log_coverage USING (cluster_id)")
    assert register_sql_functions(own, named) == ["acl_coverage_at"]
    assert own.name_tables(named) == ["log_coverage"]
    assert own.spark.catalog.functionExists("acl_coverage_at") and not own.spark.catalog.functionExists("acl_state_at")
    assert own.spark.sql(f"SELECT count(*) FROM acl_coverage_at('{CLUSTER}', 5)").first()[0] == 1


@pytest.mark.slow  # a copy of the lake and its functions: a minute of Spark
def test_the_unknown_cluster_check_reads_only_the_visible_replays(spark: Any, sample_lake: Any,
                                                                   tmp_path: Path) -> None:
    """The functions' check for an unknown cluster reads the map of visible replays that already filters the rows
    (`Lake.replayed_clusters_sql`), no table of its own; a cluster whose first replay has not finished (a
    `replay_state` row without a visible replay) is unknown, as when the check read `log_coverage`."""
    from pyspark.sql import functions as F

    from replay.spark.queries import register_sql_functions
    from replay.spark.tables import Lake

    own = spark.newSession()  # the functions over the copy in a session of their own: other tests keep theirs
    copy = Lake(own, str(tmp_path / "lake"))
    shutil.copytree(sample_lake.location, copy.location)
    starting = (copy.read_raw("replay_state").where(F.col("cluster_id") == CLUSTER).limit(1)
                .withColumn("cluster_id", F.lit("starting")).withColumn("visible_replay_id", F.lit(None).cast("string")))
    starting.write.format("delta").mode("append").save(copy.table_path("replay_state"))
    register_sql_functions(copy, ["acl_state_at"])
    plan = own.sql(f"EXPLAIN EXTENDED SELECT * FROM acl_state_at('{CLUSTER}', 5)").first()[0]
    assert "/log_coverage" not in plan and "/replay_state" in plan and "/acl_history" in plan
    assert own.sql(f"SELECT * FROM acl_state_at('{CLUSTER}', 250)").count() > 0
    for cluster in ("starting", "no-such-cluster"):
        with pytest.raises(Exception, match=f"cluster '{cluster}' has no replayed history .*'retention-gap'"):
            own.sql(f"SELECT * FROM acl_state_at('{cluster}', 5)").collect()
    # the Python path's list and check read the same map (`Lake.replayed_clusters`), here without a Spark job
    from replay.kafka.model import UnknownClusterError
    from replay.spark.queries import known_clusters, require_cluster

    expected = known_clusters(sample_lake)
    assert CLUSTER in expected
    copy.visible_replays()  # read once: then cached until replay_state has a new commit
    sc = own.sparkContext
    sc.setJobGroup("cluster-check", "the Python path's cluster check")
    try:
        assert known_clusters(copy) == expected and "starting" not in expected
        require_cluster(copy, CLUSTER)
        for cluster in ("starting", "no-such-cluster"):
            with pytest.raises(UnknownClusterError, match=f"cluster '{cluster}' has no replayed history"):
                require_cluster(copy, cluster)
        assert list(sc.statusTracker().getJobIdsForGroup("cluster-check")) == []
    finally:
        sc.setLocalProperty("spark.jobGroup.id", None)  # type: ignore[arg-type]
