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
what is missing: the feed is compared with what is visible, not with what the last replay changed. Each append
records which replay of each cluster it matched (`fed` in its commit's userMetadata), so the next replay knows when
the feed and the visible changes agreed as it began, and then compares only what it may have changed: the changes
after its resume point (a resumed replay leaves the earlier ones as they were), none for a cluster it did not
replay (`feed_bounds`). Without such a record (a dead replay's feed, or an append with no rows, which leaves no
commit) it compares everything, as a first feed does.
"""

from __future__ import annotations

import json
from collections.abc import Mapping

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
FED_COMMITS_READ = 50  # the feed's newest commits searched for what they matched; past them, compare everything


def event_key() -> Column:
    """A change's identity: the first 16 bytes of the SHA-256 of its columns other than `seq`, as JSON."""
    digest = F.sha2(F.to_json(F.struct(*[F.col(c) for c in _IDENTITY])), 256)
    return F.unhex(F.substring(digest, 1, 32))


def feed_bounds(clusters: list[str], matched: Mapping[str, str], shown_before: Mapping[str, str | None],
                replayed: Mapping[str, int | None]) -> dict[str, int | None]:
    """Which changes the feed must compare, per cluster: after the offset given (None: all of them); a cluster left
    out needs no comparison.

    `matched`: per cluster, the replay whose visible changes the feed's newest append matched; `shown_before`: the
    replay readers saw before this one; `replayed`: the clusters this replay wrote, each with its resume point (None:
    replayed from the start). When the feed matched what readers saw before, only this replay can have made them
    differ, and a replay that resumed at q left every change at or before q as it was (`visibility.resumed_chain`)."""
    bounds: dict[str, int | None] = {}
    for c in clusters:
        if matched.get(c) is None or matched.get(c) != shown_before.get(c):
            bounds[c] = None
        elif c in replayed:
            bounds[c] = replayed[c]
    return bounds


def feed_rows(lake: Lake, bounds: Mapping[str, int | None], visible: Mapping[str, str | None]) -> DataFrame:
    """What to append for the clusters of `bounds` (`feed_bounds`): PUBLISH rows for the visible changes the feed
    does not hold as published, RETRACT rows for those published that are not visible any more, among the changes
    after each cluster's bound. `visible`: each cluster's newest visible replay (`Lake.visible_replays`), which the
    rows name as `fed_by`.

    One full outer join of the visible changes with the published ones, by identity, finds both: each side is read,
    and each visible change hashed, once (two anti joins, one each way, read and hashed them twice)."""
    whole = [c for c, after in bounds.items() if after is None]
    cluster = F.col("cluster_id").isin(whole)
    for c, after in bounds.items():
        if after is not None:
            cluster = cluster | ((F.col("cluster_id") == c) & (F.col("offset") > after))
    fields = [f.name for f in EVENTS_SCHEMA.fields if f.name != "cluster_id"]
    shown = (lake.read(ACL_EVENTS).where(cluster)
             .select("cluster_id", event_key().alias("event_key"), F.struct(*fields).alias("_shown")))
    # a feed never written has nothing published: its empty table is not read (a replay into a new lake)
    fed = (lake.spark.createDataFrame([], FEED_SCHEMA) if lake.never_written(ACL_EVENT_FEED)
           else lake.read(ACL_EVENT_FEED)).where(cluster)
    net = (fed.groupBy("cluster_id", "event_key")
           .agg(F.sum(F.when(F.col("action") == PUBLISH, 1).otherwise(-1)).alias("_n"),
                F.max_by(F.struct(*fields), F.when(F.col("action") == PUBLISH, F.col("fed_at"))).alias("_fed"))
           .where(F.col("_n") > 0).drop("_n"))
    both = shown.join(net, ["cluster_id", "event_key"], "full_outer")
    publish = F.col("_shown").isNotNull()  # visible, not published; else published and no longer visible (RETRACT)
    changed = both.where(F.col("_shown").isNull() | F.col("_fed").isNull()).select(
        "cluster_id", "event_key", F.when(publish, F.lit(PUBLISH)).otherwise(F.lit(RETRACT)).alias("action"),
        F.when(publish, F.col("_shown")).otherwise(F.col("_fed")).alias("_e"))
    by = F.create_map(*[F.lit(x) for c in bounds for x in (c, visible.get(c) or "")])
    return changed.select(*[(F.element_at(by, F.col("cluster_id")) if f.name == "fed_by"
                             else F.current_timestamp() if f.name == "fed_at"
                             else F.col(f"_e.{f.name}") if f.name in fields
                             else F.col(f.name)).cast(f.dataType).alias(f.name) for f in FEED_SCHEMA.fields])


def matched_replays(lake: Lake) -> dict[str, str]:
    """Per cluster, the replay whose visible changes the feed last matched: the `fed` of its newest append that names
    the cluster, among the newest `FED_COMMITS_READ` commits (those of other writers say nothing of it)."""
    found: dict[str, str] = {}
    for text in lake.commit_metadata(ACL_EVENT_FEED, FED_COMMITS_READ):
        try:
            fed = json.loads(text).get("fed") if text else None
        except (ValueError, AttributeError):
            continue
        if isinstance(fed, dict):
            for c, replay_id in fed.items():
                if isinstance(replay_id, str):
                    found.setdefault(c, replay_id)
    return found


def append_feed(lake: Lake, clusters: list[str], shown_before: Mapping[str, str | None],
                replayed: Mapping[str, int | None]) -> None:
    """Bring `acl_event_feed` up to date with the visible `acl_events` of `clusters` (see the module docstring).

    `shown_before` and `replayed` say what this replay changed (`feed_bounds`). A plain append (Delta checks no
    conflict for it, so replays of other clusters can feed at the same time). A replay that changed nothing leaves
    no commit: Delta records no commit for an append without rows (its `skipRecordingEmptyCommits`, on by default),
    so the rows are computed once, by the write (asking first whether there are any computed them twice: 1-1.5 s of
    every replay)."""
    lake.ensure(ACL_EVENT_FEED)
    bounds = feed_bounds(clusters, matched_replays(lake), shown_before, replayed)
    visible = lake.visible_replays()
    meta = json.dumps({"operation": "feed", "clusters": clusters,
                       "fed": {c: visible[c] for c in clusters if visible.get(c) is not None}})
    if bounds:
        lake.write(ACL_EVENT_FEED, feed_rows(lake, bounds, visible), meta)
