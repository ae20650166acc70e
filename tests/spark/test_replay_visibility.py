"""A reader sees one whole replay of each cluster (issue 18): while a replay writes its five tables one commit at a
time, and after a replay that died between them, the tables read through the lake (`Lake.read`, the SQL
functions) give exactly the last finished replay; the next replay leaves only its own rows behind."""

from __future__ import annotations

import functools
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
