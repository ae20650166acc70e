"""A reader sees one whole replay of each cluster (issue 18): while a replay writes its five tables one commit at a
time, and after a replay that died between them, the tables read through the lake (`Lake.read`, the SQL
functions) give exactly the last finished replay; the next replay leaves only its own rows behind."""

from __future__ import annotations

import functools
import io
from pathlib import Path
from typing import Any

import pytest

from replay.kafka import synth
from tests.spark.test_incremental_replay import full_replay_rows, table_rows

pytestmark = [pytest.mark.spark, pytest.mark.spark_b]  # minutes of replays: the other Spark worker

TABLES = ["acl_events", "acl_history", "log_coverage", "anomalies", "offset_times"]


class Died(Exception):
    pass


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_readers_see_the_last_finished_replay_throughout(spark: Any, tmp_path: Path,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    from pyspark.sql import functions as F

    from replay.spark import queries
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import REPLAY_ID, Lake

    log = synth.generate(7, n_batches=60)
    cuts = [log.end_offset // 3, 2 * log.end_offset // 3, None]
    dumps = []
    for k, cut in enumerate(cuts):
        d = str(tmp_path / f"day{k}")
        synth.write_dump(log, d, synth.Layout(segment_every=10, max_offset=cut))
        dumps.append(d)
    lake = Lake(spark, str(tmp_path / "lake"))
    at = log.end_offset  # past every day's end: each answer is the state at the end of what was replayed

    def seen() -> dict[str, Any]:
        """Everything a reader gets: each table's rows, and the answers of two SQL functions."""
        parts = [lake.read(t).where(F.col("cluster_id") == "c1").select(F.lit(t).alias("t"), F.to_json(F.struct("*")))
                 for t in TABLES]
        parts.append(spark.sql(f"SELECT 'acl_state_at' AS t, to_json(struct(*)) FROM acl_state_at('c1', {at})"))
        rows = functools.reduce(lambda a, b: a.unionAll(b), parts).collect()
        out: dict[str, Any] = {t: sorted(r[1] for r in rows if r[0] == t) for t in [*TABLES, "acl_state_at"]}
        return out

    ingest(spark, [dumps[0]], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"], progress=False)
    queries.register_sql_functions(lake)
    first = seen()

    # the next replay: after each of its table commits, a reader still sees the first replay, whole
    real = Lake.write
    during: list[tuple[str, bool]] = []

    def watched(lake_: Any, name: str, df: Any, meta: str, replace_where: str | None = None, **options: Any) -> None:
        real(lake_, name, df, meta, replace_where, **options)  # the ingest's append passes its file size too
        if name in TABLES:
            during.append((name, seen() == first))

    monkeypatch.setattr(Lake, "write", watched)
    ingest(spark, [dumps[1]], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"], progress=False)
    assert sorted(name for name, _ in during) == sorted(TABLES)
    assert all(same for _, same in during), during
    second = seen()
    assert second != first and len(second["acl_events"]) > len(first["acl_events"])

    def leftovers() -> int:
        done = lake.read("replay_state").where(F.col("cluster_id") == "c1").first()
        assert done is not None and done.status == "done" and done.visible_replay_id == done.replay_id
        return sum(lake.read_raw(t).where((F.col("cluster_id") == "c1")
                                          & ~F.col(REPLAY_ID).eqNullSafe(done.replay_id)).count() for t in TABLES)

    assert leftovers() == 0  # the first replay's rows are gone once the second is visible

    # a replay that dies after two of its five commits: readers keep the second replay; its rows stay hidden
    written: list[str] = []

    def dies(lake_: Any, name: str, df: Any, meta: str, replace_where: str | None = None, **options: Any) -> None:
        real(lake_, name, df, meta, replace_where, **options)
        if name in TABLES:
            written.append(name)
            if len(written) == 2:
                raise Died(name)

    monkeypatch.setattr(Lake, "write", dies)
    ingest(spark, [dumps[2]], cluster="c1", lake=lake, progress=False)
    with pytest.raises(Died):
        replay_lake(lake, ["c1"], progress=False)
    assert seen() == second
    state = lake.read("replay_state").where(F.col("cluster_id") == "c1").first()
    assert state is not None and state.status == "running" and state.visible_replay_id != state.replay_id
    hidden = sum(lake.read_raw(t).where(F.col(REPLAY_ID) == state.replay_id).count() for t in written)
    assert hidden > 0  # the dead replay's rows are in the tables, and no reader sees them

    # the next replay (full: the previous one did not finish) shows all three days and removes the dead rows
    monkeypatch.setattr(Lake, "write", real)
    replay_lake(lake, ["c1"], progress=False)
    assert lake.read("replay_state").where(F.col("cluster_id") == "c1").first().mode == "full"
    assert leftovers() == 0
    assert seen() != second
    assert table_rows(lake, ["c1"]) == full_replay_rows(lake, ["c1"])


@pytest.mark.slow  # two replays: CI runs it, `make test-fast` does not
def test_replay_tables_an_older_version_wrote_are_partitioned_by_replay_once(spark: Any, tmp_path: Path) -> None:
    """The replay tables are partitioned by cluster and replay, so that the replay's switch and cleanup drop whole
    files; a lake an older version wrote (partitioned by cluster only) gets that layout at its next replay, in one
    commit per table that writes the same rows again: readers see the same rows before and after."""
    import json

    from pyspark.sql import functions as F

    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import REPLAY_ID, Lake

    log = synth.generate(11, n_batches=30)
    synth.write_dump(log, str(tmp_path / "dump"), synth.Layout(segment_every=10))
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [str(tmp_path / "dump")], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"], progress=False)

    def layout(t: str) -> list[str]:
        detail = list(spark.sql(f"DESCRIBE DETAIL {lake.table_ref(t)}").first()["partitionColumns"])
        assert lake.stored_partitioning(t) == detail, t  # what lay_out reads, without counting files
        return detail

    assert all(layout(t) == ["cluster_id", REPLAY_ID] for t in TABLES)
    assert layout("replay_state") == ["cluster_id"]
    before = table_rows(lake, ["c1"])

    for t in TABLES:  # what an older version left: the same rows, partitioned by cluster only
        (lake.read_raw(t).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
         .partitionBy("cluster_id").save(lake.table_path(t)))
    older = Lake(spark, lake.location)
    assert all(layout(t) == ["cluster_id"] for t in TABLES)
    assert table_rows(older, ["c1"]) == before

    replay_lake(older, ["c1"], full=True, progress=False)
    assert all(layout(t) == ["cluster_id", REPLAY_ID] for t in TABLES)
    assert table_rows(older, ["c1"]) == before  # the same records replayed again: the same rows
    state = older.read("replay_state").where(F.col("cluster_id") == "c1").first()
    assert state is not None and state.status == "done" and state.visible_replay_id == state.replay_id
    for t in TABLES:
        assert older.read_raw(t).where(~F.col(REPLAY_ID).eqNullSafe(state.replay_id)).count() == 0
        # newest first: the drop of the previous replay's rows, this replay's rows, the new layout (once)
        ops = [(r["operation"], json.loads(r["userMetadata"] or "{}").get("operation"))
               for r in older.history(t, 4).collect()]
        assert ops[0][0] == "DELETE" and ops[1][1] == "replay" and ops[2][1] == "partition", (t, ops)


@pytest.mark.slow  # three replays: CI runs it, `make test-fast` does not
def test_of_two_replays_of_a_cluster_at_once_the_one_that_started_last_is_shown(
        spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A replay (`kraft-replay replay`, A) writes its tables; meanwhile another replay of the cluster (B: a scheduled
    job, `watch`) starts, finds A's `running` row (a dead replay's, as far as it can tell), replays in full and
    switches. A's switch then finds the row B's: A fails with a message saying so, switches nothing, and removes
    its rows; the lake shows B's replay, as a replay run alone would have left it. B's cleanup leaves the rows of a
    replay started after B alone."""
    import threading

    from pyspark.sql import functions as F

    from replay import cli
    from replay.spark import resume
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import REPLAY_ID, Lake
    from replay.spark.visibility import full_chain

    log = synth.generate(5, n_batches=60)
    days = []
    for k, cut in enumerate([log.end_offset // 2, None]):
        d = str(tmp_path / f"day{k}")
        synth.write_dump(log, d, synth.Layout(segment_every=10, max_offset=cut))
        days.append(d)
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [days[0]], cluster="c1", lake=lake, progress=False)
    replay_lake(lake, ["c1"], progress=False)
    ingest(spark, [days[1]], cluster="c1", lake=lake, progress=False)

    ids: list[str] = []
    real_id = resume.new_replay_id

    def counted_id() -> str:
        ids.append(real_id())
        return ids[-1]

    monkeypatch.setattr(resume, "new_replay_id", counted_id)
    real_write = Lake.write
    started = threading.Lock()

    def b_starts_meanwhile(lake_: Any, name: str, df: Any, meta: str, replace_where: str | None = None,
                           **options: Any) -> None:
        if name in TABLES and started.acquire(blocking=False):  # A's first table write: B runs whole, then A goes on
            replay_lake(lake, ["c1"], progress=False)
        real_write(lake_, name, df, meta, replace_where, **options)

    monkeypatch.setattr(Lake, "write", b_starts_meanwhile)
    with pytest.raises(SystemExit) as exited:
        cli.main(["replay", "--lake", lake.location, "--lake-cluster", "c1"], io.StringIO())
    assert exited.value.code == 1
    a, b = ids
    said = capsys.readouterr().err
    assert f"replay {a} of cluster 'c1' was overtaken: replay {b} marked it running after this one did" in said

    monkeypatch.setattr(Lake, "write", real_write)
    state = lake.read("replay_state").where(F.col("cluster_id") == "c1").first()
    assert state is not None
    assert (state.replay_id, state.status, state.mode, state.visible_replay_id) == (b, "done", "full", b)
    assert state.reason == "the previous replay did not finish"
    for t in TABLES:  # only B's rows are left: A removed its own, B removed the first replay's
        assert lake.read_raw(t).where((F.col("cluster_id") == "c1") & ~F.col(REPLAY_ID).eqNullSafe(b)).count() == 0, t
    assert table_rows(lake, ["c1"]) == full_replay_rows(lake, ["c1"])
    later = resume.new_replay_id()  # a replay that started after B: B's cleanup keeps its rows, others go
    assert later > b
    rows = spark.createDataFrame([("c1", later), ("c1", a), ("c1", b), ("c1", "0123abcd"), ("c1", None)],
                                 "cluster_id string, replay_id string")
    gone = rows.where(resume.others_predicate({"c1": full_chain(b)})).collect()
    assert sorted(str(r.replay_id) for r in gone) == sorted([a, "0123abcd", "None"])
    # a switch that finds another replay's row, or none (any name: names are data), switches nothing
    with pytest.raises(resume.ReplayOvertakenError, match=f"replay {later} of cluster 'c1' was overtaken: replay {b} "):
        resume.write_states(lake, {"c1": resume.Plan("c1", None, "a test")}, later, "done", None,
                            {"c1": full_chain(later)})
    odd = "c'2 {\"x\"}"
    with pytest.raises(resume.ReplayOvertakenError) as missing:
        resume.write_states(lake, {odd: resume.Plan(odd, None, "a test")}, later, "done", None,
                            {odd: full_chain(later)})
    assert f"replay {later} of cluster {odd!r} found no replay_state row of the cluster" in str(missing.value)
    assert [(r.cluster_id, r.replay_id) for r in lake.read("replay_state").collect()] == [("c1", b)]
    # and the next replay finds nothing new
    replay_lake(lake, ["c1"], progress=False)
    after = lake.read("replay_state").where(F.col("cluster_id") == "c1").first()
    assert after is not None and after.replay_id == b
