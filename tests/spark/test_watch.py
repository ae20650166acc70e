"""Continuous ingestion (`kraft-replay watch`, issue 15 item 2): dumps of two clusters arriving day by day in a
directory, picked up by a Structured Streaming query run as a scheduled job (available-now), give the lake one
batch ingest of all of them gives; a query left running (a processing-time trigger) picks up a dump that arrives
while it runs."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replay.kafka import synth

pytestmark = [pytest.mark.spark, pytest.mark.spark_b]  # heavy: run in the other worker

TABLES = ["metadata_records", "quarantine", "acl_events", "acl_history", "log_coverage", "anomalies", "offset_times"]
# where a row was read from: two lakes that ingested the same dumps in another order may keep other copies' files
WHERE = {"source_file", "file_position", "source", "ingest_id", "message", "text_section"}


def rows(lake: Any, clusters: list[str]) -> dict[str, Counter[tuple[Any, ...]]]:
    from pyspark.sql import functions as F

    out = {}
    for t in TABLES:
        df = lake.read(t).where(F.col("cluster_id").isin(clusters))
        out[t] = Counter(tuple(r) for r in df.select(*[c for c in df.columns if c not in WHERE]).collect())
    return out


@pytest.mark.slow
@pytest.mark.extended  # minutes of Spark: `make test-all` (`make test` has the running watch below)
def test_dumps_arriving_day_by_day_give_the_lake_of_one_batch_ingest(spark: Any, tmp_path: Path) -> None:
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake
    from replay.spark.watch import WatchedBatch, watch

    logs = {"c1": synth.generate(21, n_batches=50), "c2": synth.generate(22, n_batches=40)}
    root = tmp_path / "arriving"
    root.mkdir()
    lake = Lake(spark, str(tmp_path / "lake"))
    seen: list[WatchedBatch] = []

    def run() -> list[WatchedBatch]:
        before = len(seen)
        query = watch(lake, str(root), cluster_from_path=True, progress=False, on_batch=seen.append)
        query.awaitTermination()
        assert query.exception() is None
        return seen[before:]

    days: dict[str, list[str]] = {c: [] for c in logs}
    for k in range(3):
        for c, log in logs.items():
            cut = None if k == 2 else (k + 1) * log.end_offset // 3
            d = root / c / f"day{k}"
            synth.write_dump(log, str(d), synth.Layout(segment_every=12, max_offset=cut))
            days[c].append(str(d))
        (root / "c1" / f"day{k}" / "__cluster_metadata-0" / "00000000000000000000.index").write_bytes(b"\0" * 8)
        if k == 1:
            (root / "notes.txt").write_text("a file in no cluster's directory\n")
        batches = run()
        assert sum(b.files for b in batches) > 0
        assert {c for b in batches for c in b.ingested} == {"c1", "c2"}, f"day {k}"
        assert {c for b in batches for c in b.replayed} == {"c1", "c2"}
        assert sum(b.ignored for b in batches) == 1  # the index file
        assert sum(len(b.unplaced) for b in batches) == (1 if k == 1 else 0)
    assert run() == []  # nothing new: no batch at all

    batch = Lake(spark, str(tmp_path / "batch-lake"))
    for c, dirs in days.items():
        ingest(spark, dirs, cluster=c, lake=batch, progress=False)
    replay_lake(batch, sorted(logs), progress=False)
    got, want = rows(lake, sorted(logs)), rows(batch, sorted(logs))
    for t in TABLES:
        assert got[t] == want[t], t
    assert got["acl_events"] and got["metadata_records"]


@pytest.mark.slow  # a watch that ingests and replays twice: 1-2 minutes
def test_a_running_watch_picks_up_a_dump_that_arrives(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from replay.spark.tables import Lake
    from replay.spark.watch import watch

    root = tmp_path / "arriving"
    root.mkdir()
    lake = Lake(spark, str(tmp_path / "lake"))
    query = watch(lake, str(root), cluster="c3", trigger="1s", progress=False)
    try:
        assert query.isActive
        log = synth.generate(23, n_batches=30)
        staged = tmp_path / "staged"
        synth.write_dump(log, str(staged))
        staged.rename(root / "day0")  # arrives whole, as a rename
        deadline = time.monotonic() + 180
        events = 0
        while time.monotonic() < deadline and not events:
            time.sleep(2)
            assert query.exception() is None
            if lake.exists("acl_events"):
                events = lake.read("acl_events").where(F.col("cluster_id") == "c3").count()
        assert events > 0, "the running watch did not ingest and replay the dump within 180 s"
        assert query.isActive  # it keeps watching
    finally:
        query.stop()
    offsets = (lake.read("metadata_records").where((F.col("cluster_id") == "c3") & (F.col("stream") == "log"))
               .select("offset").distinct().count())
    assert offsets == log.end_offset  # every offset of the dump


@pytest.mark.slow  # about twenty small ingests: a minute
def test_clusters_ingested_together_hold_what_one_by_one_ingests_hold(spark: Any, tmp_path: Path,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """A micro-batch's clusters are ingested together (`ingest_new_files`: one decoding pass, one commit per table
    for the clusters the lake holds nothing of in the new files' offset range, one MERGE for the others): the lake
    gets the rows one ingest after the other gives, and each cluster's count of new rows is its own; the commit
    names every cluster it holds. A later day's dumps that repeat held snapshots store none of them again. A cluster
    that cannot be ingested does not stop the others: its error is raised after them, naming it. A batch of more
    clusters than one ingest takes is ingested in parts."""
    import json
    import os

    from pyspark.sql import functions as F

    from replay.spark import watch
    from replay.spark.ingest import IngestError, ingest, ingest_clusters
    from replay.spark.tables import Lake
    from replay.spark.watch import ingest_new_files

    names = [f"c{i}" for i in range(4)]
    root = tmp_path / "in"
    for i, name in enumerate(names):
        synth.write_dump(synth.generate(40 + i, n_batches=20), str(root / name), synth.Layout(segment_every=15))
    for name in names[1:3]:
        with open(sorted((root / name).rglob("*.log"))[-1], "ab") as f:
            f.write(b"\0" * 40)  # a torn tail: a problem for quarantine, in two clusters of the batch

    def listed(name: str, under: Path = root) -> list[tuple[str, int]]:  # as the stream lists them
        return [(f"file:{p}", os.path.getsize(p)) for p in sorted((under / name).rglob("*")) if p.is_file()]

    def tables(lake: Lake) -> dict[str, dict[str, Counter[tuple[Any, ...]]]]:
        out = {}
        for t in ("metadata_records", "quarantine"):
            df = lake.read(t)
            cols = [c for c in df.columns if c not in WHERE]
            out[t] = {n: Counter(tuple(r) for r in df.where(F.col("cluster_id") == n).select(*cols).collect())
                      for n in names}
        return out

    apart = Lake(spark, str(tmp_path / "apart"))
    for name in names:
        ingest(spark, [str(root / name)], cluster=name, lake=apart, progress=False)
    together = Lake(spark, str(tmp_path / "together"))
    ingest(spark, [str(root / names[0])], cluster=names[0], lake=together, progress=False)  # held already: a MERGE
    monkeypatch.setattr(watch, "CLUSTERS_PER_INGEST", 3)  # c0 (a MERGE), c1 and c2 together; then c3 alone
    new = ingest_new_files(together, str(root), {n: listed(n) for n in names})
    got, want = tables(together), tables(apart)
    assert got == want
    assert new == {names[0]: 0, **{n: sum(got["metadata_records"][n].values()) for n in names[1:]}}
    assert all(sum(got["quarantine"][n].values()) > 0 for n in names[1:3])
    commits = [(r["operation"], json.loads(r["userMetadata"])) for r in together.history("metadata_records").collect()
               if r["operation"] in ("MERGE", "WRITE")]
    assert sorted(c.get("cluster_ids") or [c["cluster_id"]] for op, c in commits if op == "WRITE") == [
        [names[0]], names[1:3], [names[3]]]
    joint = next(c for _op, c in commits if "cluster_ids" in c)
    assert [i["rows_in_input"] for i in joint["ingests"]] == [sum(got["metadata_records"][n].values())
                                                              for n in names[1:3]]
    quarantined = [json.loads(r["userMetadata"]) for r in together.history("quarantine").collect()
                   if r["operation"] == "MERGE"]
    assert [c.get("cluster_ids") for c in quarantined] == [names[1:3]]
    reports, failed = ingest_clusters(spark, {n: [str(root / n)] for n in names[1:3]}, Lake(spark, str(tmp_path / "3")),
                                      progress=False)
    assert not failed and {n: (r.records_new, r.problems_new) for n, r in reports.items()} == {
        n: (sum(got["metadata_records"][n].values()), sum(got["quarantine"][n].values())) for n in names[1:3]}
    assert ingest_new_files(together, str(root), {n: listed(n) for n in names}) == {n: 0 for n in names}

    # the next day's dumps of two clusters repeat what the lake holds, byte for byte, and go on: only what is past
    # those bytes is decoded (`ingest_held`), and appended for both in one commit, counted apiece
    days = tmp_path / "days"
    for i, name in enumerate(names[:2]):
        log = synth.generate(60 + i, n_batches=30)
        for day, cut in (("d0", log.end_offset // 2), ("d1", None)):
            synth.write_dump(log, str(days / day / name), synth.Layout(segment_every=15, max_offset=cut,
                                                                       snapshot_at=(log.end_offset // 4,)))
    later = Lake(spark, str(tmp_path / "later"))
    first = ingest_new_files(later, str(days / "d0"), {n: listed(n, days / "d0") for n in names[:2]})
    second = ingest_new_files(later, str(days / "d1"), {n: listed(n, days / "d1") for n in names[:2]})
    held = {n: later.read("metadata_records").where(F.col("cluster_id") == n).count() for n in names[:2]}
    assert all(second.values()) and {n: first[n] + second[n] for n in names[:2]} == held
    one_by_one = Lake(spark, str(tmp_path / "one-by-one"))
    for day in ("d0", "d1"):
        for name in names[:2]:
            ingest(spark, [str(days / day / name)], cluster=name, lake=one_by_one, progress=False)
    # the same rows: the snapshots the lake held already, repeated in the later dumps, are not stored again
    assert {n: tables(later)["metadata_records"][n] for n in names[:2]} == {
        n: tables(one_by_one)["metadata_records"][n] for n in names[:2]}
    copies = later.read("metadata_records").where(F.col("stream") == "snapshot").groupBy("cluster_id").agg(
        F.countDistinct("source_file").alias("files")).collect()
    assert sorted((r["cluster_id"], r["files"]) for r in copies) == [(n, 1) for n in names[:2]]  # d0's copy only
    assert [(r["operation"], json.loads(r["userMetadata"]).get("cluster_ids"))
            for r in later.history("metadata_records").collect() if r["operation"] in ("MERGE", "WRITE")] == [
        ("WRITE", names[:2]), ("WRITE", names[:2])]

    broken = Lake(spark, str(tmp_path / "broken"))
    gone = [(f"file:{tmp_path}/in/bad/00000000000000000000.log", 100)]  # listed, then removed before its ingest
    with pytest.raises(IngestError, match="cluster bad: the executors could not open any"):
        ingest_new_files(broken, str(root), {"bad": gone, names[1]: listed(names[1])})
    assert tables(broken)["metadata_records"][names[1]] == want["metadata_records"][names[1]]  # ingested all the same


def test_triggers_clusters_and_refusals(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    import io

    from replay import cli
    from replay.spark.watch import WatchError, cluster_of, trigger_of

    assert trigger_of("available-now") == {"availableNow": True}
    assert trigger_of("30s") == {"processingTime": "30 seconds"}
    assert trigger_of("5 minutes") == {"processingTime": "5 minutes"}
    assert trigger_of("1h") == {"processingTime": "1 hours"}
    with pytest.raises(WatchError, match=r"available-now .* or an interval such as 30s"):
        trigger_of("every day")
    assert cluster_of("file:/data/in/prod-eu/2026-11-27/__cluster_metadata-0/00000000000000000000.log",
                      "/data/in") == "prod-eu"
    assert cluster_of("file:///data/in/notes.txt", "/data/in") is None
    assert cluster_of("s3a://bucket/in/prod-us/d1/x.log", "s3a://bucket/in") == "prod-us"
    assert cluster_of("s3a://bucket/other/x.log", "s3a://bucket/in") is None
    assert cluster_of("s3a://bucket/inner/c/x.log", "s3a://bucket/in") is None  # a sibling that shares a prefix
    # before any Spark: a watch must know where each file's cluster comes from
    capsys.readouterr()
    code = cli.main(["watch", str(tmp_path), "--lake", str(tmp_path / "lake")], io.StringIO())
    assert code == cli.EXIT_USAGE and "--lake-cluster NAME" in capsys.readouterr().err
    code = cli.main(["watch", str(tmp_path), "--lake-cluster", "c", "--cluster-from-path"], io.StringIO())
    assert code == cli.EXIT_USAGE


def test_a_stopped_stream_says_why_in_one_line() -> None:
    """A batch's exception reaches the query as a Python traceback inside Spark's text (as Spark 4.2 words it,
    captured from a real stream); the watch's last words name the exception's own message, not the traceback's
    first line."""
    from replay.spark.watch import stopped_because

    text = ("An exception was raised by the Python Proxy. Return Message: Traceback (most recent call last):\n"
            '  File "/site-packages/pyspark/sql/utils.py", line 163, in call\n'
            "    self.func(DataFrame(jdf, wrapped_session_jdf), batch_id)\n"
            '  File "/repo/replay/spark/replay.py", line 214, in _replay_planned\n'
            "    raise ReplayOvertakenError(message)\n"
            "replay.spark.resume.ReplayOvertakenError: replay r1 of cluster 'c1' was overtaken: replay r2 marked "
            "it running after this one did\n\n=== Streaming Query ===\nIdentifier: [id = 0af8a2b2]\n"
            "Current State: ACTIVE\nLogical Plan:\n~WriteToMicroBatchDataSourceV1 ForeachBatchSink\n")
    assert stopped_because(text) == ("replay r1 of cluster 'c1' was overtaken: replay r2 marked it running after "
                                     "this one did (ReplayOvertakenError)")
    assert stopped_because("[STREAM_FAILED] the query stopped\n\tat somewhere") == "[STREAM_FAILED] the query stopped"
