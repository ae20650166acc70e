"""Least privilege in the lake: which ACLs decided no logged request in a window, and what each principal was
granted against what it used; the lake's twin of `replay.kafka.unused_acls`, over the verdicts of
`replay.spark.verify_access` (a decision verified `consistent` is credited to the ACLs that decided it).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from replay.kafka.verify_log import CONSISTENT, DEFAULT_SKEW_MS
from replay.spark.queries import last_offset, offset_at_time
from replay.spark.tables import ACL_FIELDS, Lake
from replay.spark.verify_access import verdicts_of, verify_access

ACL_COLUMNS = ["used", "decisions", "from_hosts", "acl_id", *ACL_FIELDS]
PRINCIPAL_COLUMNS = ["principal", "granted", "used", "granted_not_used", "resources_used"]


@dataclass
class LakeUsage:
    """`acls`: one row per ACL live in the window (`ACL_COLUMNS`, unused first); `principals`: per principal
    (`PRINCIPAL_COLUMNS`); `counts`: the logged decisions of the window (`lines`), the consistent allowed ones
    (`allowed`) and those credited to no ACL (`not_consistent`)."""

    acls: DataFrame
    principals: DataFrame
    counts: dict[str, int]


def live_in(lake: Lake, cluster: str, start: int | None, end: int | None) -> DataFrame:
    """acl_history's lifetimes that were, or may have been, live at some offset of the window [start, end] (times,
    mapped to offsets by the as-of rule; `unused_acls.live_in`)."""
    first = 0 if start is None else offset_at_time(lake, cluster, start)
    last = last_offset(lake, cluster) if end is None else offset_at_time(lake, cluster, end)
    hist = lake.read("acl_history").where(F.col("cluster_id") == cluster)
    if last is None:
        return hist.limit(0)
    lo = 0 if first is None else first
    return hist.where((F.col("valid_from_min_offset") <= last)
                      & (F.col("valid_to_offset").isNull() | (F.col("valid_to_offset") > lo)))


def unused_access(lake: Lake, cluster: str, start: int | None = None, end: int | None = None,
                  super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False,
                  skew_ms: int = DEFAULT_SKEW_MS, events: DataFrame | None = None) -> LakeUsage:
    """The usage of the decisions logged in [start, end] (epoch ms): those access_events holds for `cluster`, or
    `events` (`access_ingest.access_rows` of logs read for the question)."""
    if events is None:
        verdicts = verdicts_of(lake, cluster, start, end, super_users, allow_everyone, skew_ms)
    else:
        window = F.lit(True)
        if start is not None:
            window &= F.col("time") >= start
        if end is not None:
            window &= F.col("time") <= end
        verdicts = verify_access(lake, events.where(window), super_users, allow_everyone, skew_ms)
    verdicts = verdicts.where(F.col("time").isNotNull())
    credited, used, counts = _tally(verdicts)
    spark = verdicts.sparkSession
    empty = F.array().cast("array<string>")
    credit = spark.createDataFrame(credited, "acl_id STRING, decisions BIGINT, from_hosts ARRAY<STRING>")
    live = live_in(lake, cluster, start, end)
    acls = (live.join(credit, "acl_id", "left")
            .select((F.coalesce("decisions", F.lit(0)) > 0).alias("used"),
                    F.coalesce("decisions", F.lit(0)).alias("decisions"), F.coalesce("from_hosts", empty).alias("from_hosts"),
                    "acl_id", *ACL_FIELDS)
            .orderBy("used", "decisions", "principal", "acl_id"))
    op_type = F.concat_ws(" ", "operation", "resource_type")
    granted = (live.where(F.col("permission_type") == "ALLOW").join(credit.select("acl_id", "decisions"), "acl_id", "left")
               .groupBy("principal").agg(
                   F.array_sort(F.collect_set(op_type)).alias("granted"),
                   F.array_sort(F.collect_set(F.when(F.col("decisions").isNull(), F.concat(
                       op_type, F.lit(" "), F.col("pattern_type"), F.lit(":"), F.col("resource_name"))))
                   ).alias("granted_not_used")))
    usage = spark.createDataFrame(used, "principal STRING, used ARRAY<STRING>, resources_used BIGINT")
    principals = (granted.join(usage, "principal", "full")
                  .select("principal", F.coalesce("granted", empty).alias("granted"),
                          F.coalesce("used", empty).alias("used"),
                          F.coalesce("granted_not_used", empty).alias("granted_not_used"),
                          F.coalesce("resources_used", F.lit(0)).alias("resources_used"))
                  .orderBy("principal"))
    return LakeUsage(acls, principals, counts)


def _tally(verdicts: DataFrame) -> tuple[list[tuple[Any, ...]], list[tuple[Any, ...]], dict[str, int]]:
    """In one pass over the verdicts (one row per ACL, per principal, and the totals come back: bounded by the ACLs
    and principals, not by the log): per ACL id the consistent decisions credited to it and their client hosts, per
    principal the (operation type) pairs and resources of its consistent allowed requests, and the counts."""
    ok = F.col("verdict") == CONSISTENT
    allowed = ok & (F.col("decision") == "ALLOWED")
    rows = (verdicts.select("*", F.explode_outer(F.when(ok, F.col("acl_ids"))).alias("_acl"))
            .cube("_acl", "principal")
            .agg(F.grouping_id().alias("_g"),
                 F.count_distinct(F.when(ok, F.col("event_key"))).alias("decisions"),
                 F.array_sort(F.collect_set(F.when(ok, F.col("host")))).alias("hosts"),
                 F.array_sort(F.collect_set(F.when(allowed, F.concat_ws(" ", "operation", "resource_type"))))
                 .alias("used"),
                 F.size(F.collect_set(F.when(allowed, F.struct("resource_type", "resource_name")))).alias("resources"),
                 F.count_distinct("event_key").alias("lines"),
                 F.count_distinct(F.when(allowed, F.col("event_key"))).alias("allowed"),
                 F.count_distinct(F.when(~ok, F.col("event_key"))).alias("not_consistent"))
            .where("_g = 3 OR (_g = 1 AND _acl IS NOT NULL) OR (_g = 2 AND principal IS NOT NULL)")
            .collect())
    credited = [(r["_acl"], r["decisions"], r["hosts"]) for r in rows if r["_g"] == 1]
    used = [(r["principal"], r["used"], r["resources"]) for r in rows if r["_g"] == 2 and r["used"]]
    total = next((r for r in rows if r["_g"] == 3), None)
    counts = {k: int(total[k]) if total is not None else 0 for k in ("lines", "allowed", "not_consistent")}
    return credited, used, counts
