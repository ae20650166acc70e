"""The feed downstream pipelines stream from (`acl_event_feed`, issue 15 item 4): a Delta stream over it keeps
working across daily ingests and replays, reads each row once, and what it read, applied in order, is exactly the
visible `acl_events`; a replay that takes changes back (a high watermark) retracts them; a replay that changes
nothing appends nothing."""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replay.kafka import synth

pytestmark = [pytest.mark.spark, pytest.mark.spark_b]  # minutes of replays: the other Spark worker

# an event as readers see it, without `seq` (a later replay may renumber the same change)
IDENTITY = ["cluster_id", "offset", "offset_min", "exact", "time", "acl_id", "change", "cause", "record_offset",
            "resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type"]


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_a_stream_of_the_feed_sees_each_change_once_across_ingests_and_replays(spark: Any, tmp_path: Path) -> None:
    from pyspark.sql import functions as F

    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import ACL_EVENT_FEED, Lake

    log = synth.generate(11, n_batches=60)
    cuts = [log.end_offset // 3, 2 * log.end_offset // 3, None]
    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure(ACL_EVENT_FEED)  # a consumer starts its stream before the first replay
    seen: list[list[Any]] = []  # the rows of each micro-batch the stream got

    def take(batch: Any, batch_id: int) -> None:
        seen.append(batch.collect())

    def run_stream() -> list[Any]:
        """The consumer's scheduled run: everything new since its last run (its checkpoint says where it was)."""
        before = len(seen)
        query = (spark.readStream.format("delta").load(lake.table_path(ACL_EVENT_FEED)).writeStream
                 .foreachBatch(take).option("checkpointLocation", str(tmp_path / "checkpoint"))
                 .trigger(availableNow=True).start())
        query.awaitTermination()
        assert query.exception() is None
        return [r for rows in seen[before:] for r in rows]

    held: Counter[tuple[Any, ...]] = Counter()  # what the consumer holds: the changes published and not retracted

    def apply(rows: list[Any]) -> None:
        for action in ("RETRACT", "PUBLISH"):  # within one replay's append, retractions first
            for r in rows:
                if r["action"] == action:
                    held[tuple(r[c] for c in IDENTITY)] += 1 if action == "PUBLISH" else -1
        assert all(n in (0, 1) for n in held.values()), "a change was published twice or retracted unpublished"

    def visible() -> Counter[tuple[Any, ...]]:
        return Counter(tuple(r) for r in lake.read("acl_events").where(F.col("cluster_id") == "c1")
                       .select(*IDENTITY).collect())

    def holds() -> Counter[tuple[Any, ...]]:
        return +held  # drops the zero counts

    for k, cut in enumerate(cuts):
        d = str(tmp_path / f"day{k}")
        synth.write_dump(log, d, synth.Layout(segment_every=10, max_offset=cut))
        ingest(spark, [d], cluster="c1", lake=lake, progress=False)
        replay_lake(lake, ["c1"], progress=False)
        rows = run_stream()
        assert rows, f"day {k}: the replay published nothing"
        assert {r["action"] for r in rows} == {"PUBLISH"}, "the days only add to the log"
        apply(rows)
        assert holds() == visible(), f"day {k}"

    # a replay with nothing new appends nothing, not even an empty commit
    versions = lake.history(ACL_EVENT_FEED).count()
    replay_lake(lake, ["c1"], full=True, progress=False)
    assert run_stream() == []
    assert lake.history(ACL_EVENT_FEED).count() == versions

    # a replay cut at a high watermark takes back the later changes: each one retracted once, the rest kept
    before = visible()
    hw = log.end_offset // 2
    replay_lake(lake, ["c1"], high_watermark=hw, progress=False)
    rows = run_stream()
    after = visible()
    assert after and after != before
    retracted = Counter(tuple(r[c] for c in IDENTITY) for r in rows if r["action"] == "RETRACT")
    assert +(before - after) == retracted
    apply(rows)
    assert holds() == after

    # and the replay without it publishes them again
    replay_lake(lake, ["c1"], full=True, progress=False)
    apply(run_stream())
    assert holds() == visible() == before

    # the stream read every row of the feed once; the table was only ever appended to
    fed = lake.read(ACL_EVENT_FEED).count()
    assert sum(len(rows) for rows in seen) == fed
    operations = {r["operation"] for r in lake.history(ACL_EVENT_FEED).collect()}
    assert operations <= {"CREATE TABLE", "WRITE"}, operations


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_a_resumed_replay_feeds_only_what_it_may_have_changed(spark: Any, tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """Days of a log with snapshots, so later replays resume: a replay whose cluster's feed matched what readers saw
    compares only the changes after its resume point, and none when it replayed nothing; a replay that died before
    feeding (its rows visible, the feed not appended) leaves no such record, so the next replay compares every
    change. After each replay the feed's published changes are exactly the visible ones."""
    from pyspark.sql import functions as F

    from replay.spark import feed
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import ACL_EVENT_FEED, REPLAY_STATE, Lake

    log = synth.generate(7, n_batches=60)
    snaps = synth.quiet_snapshot_ends(log, [log.end_offset * k // 5 for k in range(1, 5)])
    assert len(snaps) == 4
    lake = Lake(spark, str(tmp_path / "lake"))
    compared: list[dict[str, int | None]] = []
    feed_rows = feed.feed_rows

    def spied(lake_: Any, bounds: Any, visible: Any) -> Any:
        compared.append(dict(bounds))
        return feed_rows(lake_, bounds, visible)

    monkeypatch.setattr(feed, "feed_rows", spied)

    def published() -> Counter[tuple[Any, ...]]:
        net = Counter[tuple[Any, ...]]()
        for r in lake.read(ACL_EVENT_FEED).where(F.col("cluster_id") == "c1").collect():
            net[tuple(r[c] for c in IDENTITY)] += 1 if r["action"] == "PUBLISH" else -1
        assert all(n in (0, 1) for n in net.values()), "a change was published twice or retracted unpublished"
        return +net

    def visible() -> Counter[tuple[Any, ...]]:
        return Counter(tuple(r) for r in lake.read("acl_events").where(F.col("cluster_id") == "c1")
                       .select(*IDENTITY).collect())

    def day(k: int, cut: int | None) -> tuple[str, int | None]:
        """Ingest the dump of day `k` and replay: (the replay's mode, where it resumed)."""
        d = str(tmp_path / f"day{k}")
        synth.write_dump(log, d, synth.Layout(segment_every=10, snapshot_at=tuple(
            s for s in snaps if cut is None or s <= cut), max_offset=cut))
        ingest(spark, [d], cluster="c1", lake=lake, progress=False)
        before = {r["replay_id"] for r in lake.read(REPLAY_STATE).collect()} if lake.exists(REPLAY_STATE) else set()
        replay_lake(lake, ["c1"], progress=False)
        row = lake.read(REPLAY_STATE).where(F.col("cluster_id") == "c1").first()
        assert row is not None and row.status == "done"
        resumed_at = row.visible_ranges[-1]["after_offset"] if row.mode == "incremental" else None
        assert row.replay_id not in before
        return row.mode, resumed_at

    assert day(0, snaps[0] + 3) == ("full", None)
    assert compared.pop() == {"c1": None}  # nothing fed yet: every change
    mode, at = day(1, snaps[1] + 3)
    assert mode == "incremental" and at is not None
    assert compared.pop() == {"c1": at}  # the feed matched the first replay: only what lies after the resume point
    assert published() == visible()

    # the next replay dies after its switch, before the feed is appended
    def dead(*args: Any) -> Any:
        raise RuntimeError("killed before feeding")

    monkeypatch.setattr(feed, "feed_rows", dead)
    with pytest.raises(RuntimeError, match="killed before feeding"):
        day(2, snaps[2] + 3)
    assert published() != visible()
    monkeypatch.setattr(feed, "feed_rows", spied)

    mode, at = day(3, None)
    assert mode == "incremental" and at is not None
    assert compared.pop() == {"c1": None}  # the feed matched an earlier replay than readers saw: every change
    assert published() == visible()

    # nothing new: the cluster is not replayed, and the feed, which matched it, compares nothing
    versions = lake.history(ACL_EVENT_FEED).count()
    replay_lake(lake, ["c1"], progress=False)
    assert compared == []
    assert lake.history(ACL_EVENT_FEED).count() == versions
    assert published() == visible()
