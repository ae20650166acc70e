"""The append-only feed of ACL changes (`acl_event_feed`) that downstream pipelines stream from.

A replay replaces a cluster's rows in `acl_events` (a new dump can change earlier answers), so a Delta stream over
that table stops at the next replay (Delta refuses a source whose files were rewritten) or, told to ignore that,
sees every row again. The feed is what such a stream reads instead: after each replay, one append with a PUBLISH
row for each change the replay shows that is not published yet, and a RETRACT row for each published change it no
longer shows. A change is known by its identity (`event_key`: its columns other than `seq`, which a later replay
may renumber), so a replay that changes nothing appends nothing, and a consumer that applies the rows in order
(RETRACT before PUBLISH within one append) holds exactly the visible `acl_events`. The table is never rewritten
(`delta.appendOnly`), so a stream reads each row once.

If a replay dies after making its rows visible and before feeding them, the next replay of that cluster appends
what is missing: the feed is always compared with what is visible, not with what the last replay changed.
"""

from __future__ import annotations

import json

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replay.spark.tables import (
    ACL_EVENT_FEED,
    ACL_EVENTS,
    EVENTS_SCHEMA,
    FEED_SCHEMA,
    Lake,
)

PUBLISH, RETRACT = "PUBLISH", "RETRACT"
_IDENTITY = [f.name for f in EVENTS_SCHEMA.fields if f.name != "seq"]


def event_key() -> Column:
    """A change's identity: the first 16 bytes of the SHA-256 of its columns other than `seq`, as JSON."""
    digest = F.sha2(F.to_json(F.struct(*[F.col(c) for c in _IDENTITY])), 256)
    return F.unhex(F.substring(digest, 1, 32))


def feed_rows(lake: Lake, clusters: list[str]) -> DataFrame:
    """What to append for `clusters`: PUBLISH rows for the visible changes the feed does not hold as published,
    RETRACT rows for those published that are not visible any more.

    One full outer join of the visible changes with the published ones, by identity, finds both: each side is read,
    and each visible change hashed, once (two anti joins, one each way, read and hashed them twice)."""
    cluster = F.col("cluster_id").isin(clusters)
    fields = [f.name for f in EVENTS_SCHEMA.fields if f.name != "cluster_id"]
    shown = (lake.read(ACL_EVENTS).where(cluster)
             .select("cluster_id", event_key().alias("event_key"), F.struct(*fields).alias("_shown")))
    fed = lake.read(ACL_EVENT_FEED).where(cluster)
    net = (fed.groupBy("cluster_id", "event_key")
           .agg(F.sum(F.when(F.col("action") == PUBLISH, 1).otherwise(-1)).alias("_n"),
                F.max_by(F.struct(*fields), F.when(F.col("action") == PUBLISH, F.col("fed_at"))).alias("_fed"))
           .where(F.col("_n") > 0).drop("_n"))
    both = shown.join(net, ["cluster_id", "event_key"], "full_outer")
    publish = F.col("_shown").isNotNull()  # visible, not published; else published and no longer visible (RETRACT)
    changed = both.where(F.col("_shown").isNull() | F.col("_fed").isNull()).select(
        "cluster_id", "event_key", F.when(publish, F.lit(PUBLISH)).otherwise(F.lit(RETRACT)).alias("action"),
        F.when(publish, F.col("_shown")).otherwise(F.col("_fed")).alias("_e"))
    visible = lake.visible_replays()
    by = F.create_map(*[F.lit(x) for c in clusters for x in (c, visible.get(c) or "")])
    return changed.select(*[(F.element_at(by, F.col("cluster_id")) if f.name == "fed_by"
                             else F.current_timestamp() if f.name == "fed_at"
                             else F.col(f"_e.{f.name}") if f.name in fields
                             else F.col(f.name)).cast(f.dataType).alias(f.name) for f in FEED_SCHEMA.fields])


def append_feed(lake: Lake, clusters: list[str]) -> None:
    """Bring `acl_event_feed` up to date with the visible `acl_events` of `clusters` (see the module docstring).

    A plain append (Delta checks no conflict for it, so replays of other clusters can feed at the same time). A
    replay that changed nothing leaves no commit: Delta records no commit for an append without rows (its
    `skipRecordingEmptyCommits`, on by default), so the rows are computed once, by the write (asking first whether
    there are any computed them twice: 1-1.5 s of every replay)."""
    lake.ensure(ACL_EVENT_FEED)
    rows = feed_rows(lake, clusters)
    meta = json.dumps({"operation": "feed", "clusters": clusters})
    lake.write(ACL_EVENT_FEED, rows, meta)
