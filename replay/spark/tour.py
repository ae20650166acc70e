"""The questions the demo's tour and the notebook ask of a lake, answered the same way for both: a past moment
to look at, coverage in a line each, who could access the busiest resource then, and what changed
between two moments."""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import reduce
from typing import Any

from pyspark.sql import SparkSession
from pyspark.sql import functions as F

from replay.spark.audits import audit_changes, audit_who_can, render_audit
from replay.spark.authorize_requests import presentable_host_sql
from replay.spark.queries import offset_at_time, state_frame, time_of_offset
from replay.spark.tables import Lake


@dataclass
class Moment:
    offset: int
    time: int | None


def pick_moment(lake: Lake, cluster: str, fraction: float = 0.6) -> Moment:
    """A past moment for the tour: the last batch at or before `fraction` of the cluster's time span."""
    times = lake.read("offset_times").where(F.col("cluster_id") == cluster)
    r = times.agg(F.min("time").alias("lo"), F.max("time").alias("hi")).first()
    if r is None or r["lo"] is None:
        raise RuntimeError(f"cluster {cluster!r} has no offsets with times in the lake")
    target = int(r["lo"] + (r["hi"] - r["lo"]) * fraction)
    offset = offset_at_time(lake, cluster, target)
    assert offset is not None
    return Moment(offset, time_of_offset(lake, cluster, offset))


def coverage_lines(lake: Lake, cluster: str) -> list[str]:
    """The cluster's `log_coverage` ranges in words, one line each (the first 50)."""
    rows = (lake.read("log_coverage").where(F.col("cluster_id") == cluster)
            .select("start_offset", "end_offset", "kind").orderBy("start_offset", "kind").limit(50).collect())
    words = {"log": "log records", "snapshot": "snapshot only", "missing": "in no dump (hole)",
             "incomplete": "incomplete (ACLs no dump recorded may have been live)"}
    return [f"{r['start_offset']}..{r['end_offset']} {words.get(r['kind'], r['kind'])}" for r in rows]


_OPERATION = {"TOPIC": "READ", "GROUP": "READ", "CLUSTER": "ALTER", "TRANSACTIONAL_ID": "WRITE",
              "DELEGATION_TOKEN": "DESCRIBE", "USER": "CREATE_TOKENS"}


def default_operation(resource_type: str) -> str:
    """The operation the tour asks about for a resource type (READ for topics and groups)."""
    return _OPERATION.get(resource_type, "DESCRIBE")


def busiest_resource(lake: Lake, cluster: str, offset: int) -> tuple[str, str] | None:
    """The literal topic (else any literal resource) with the most ALLOW ACLs live at `offset` for the operation the
    tour asks about there (`default_operation`, or ALL) from a host a client can present, so that the question has
    someone allowed to answer."""
    asked = reduce(lambda a, b: a | b, [(F.col("resource_type") == t) & F.col("operation").isin(op, "ALL")
                                        for t, op in _OPERATION.items()])
    matchable = F.expr(presentable_host_sql("host"))
    live = state_frame(lake, cluster, offset).where(
        (F.col("pattern_type") == "LITERAL") & (F.col("resource_name") != "*") & asked & matchable
        & (F.col("permission_type") == "ALLOW"))
    row = (live.groupBy("resource_type", "resource_name").count()
           .orderBy((F.col("resource_type") != "TOPIC").cast("int"), F.desc("count"), "resource_name").first())
    return None if row is None else (str(row["resource_type"]), str(row["resource_name"]))


@dataclass
class WhoCanAnswer:
    """One who-could-access question (`replay.spark.audits.audit_who_can`) and its rows."""

    offset: int
    operation: str
    resource_type: str
    resource_name: str
    super_users: str
    allow_everyone: bool
    rows: list[dict[str, Any]]

    def lines(self) -> list[str]:
        head = (f"Who could {self.operation} {self.resource_type} {self.resource_name!r} as of offset {self.offset} "
                f"(super.users={self.super_users or '(none)'}, "
                f"allow.everyone.if.no.acl.found={str(self.allow_everyone).lower()}):")
        return [head, *("  " + line for line in render_audit(self.rows, "who_can"))]


def who_could_access(spark: SparkSession, lake: Lake, cluster: str, offset: int, resource: tuple[str, str],
                     super_users: str = "", allow_everyone: bool = False, operation: str | None = None
                     ) -> WhoCanAnswer:
    """Who could perform `operation` (default: `default_operation`) on `resource` (type, name) at `offset`."""
    rtype, name = resource
    op = operation or default_operation(rtype)
    rows = audit_who_can(spark, lake, cluster, op, rtype, name, offset=offset, super_users=super_users,
                         allow_everyone=allow_everyone)
    return WhoCanAnswer(offset, op, rtype, name, super_users, allow_everyone, rows)


def who_could_access_lines(spark: SparkSession, lake: Lake, cluster: str, offset: int,
                           resource: tuple[str, str] | None = None, super_users: str = "",
                           allow_everyone: bool = False, operation: str | None = None) -> list[str]:
    """`who_could_access` for the resource (default: the busiest literal topic then), as a table."""
    resource = resource or busiest_resource(lake, cluster, offset)
    if resource is None:
        return [f"no literal resource has ALLOW ACLs at offset {offset}"]
    return who_could_access(spark, lake, cluster, offset, resource, super_users, allow_everyone, operation).lines()


def what_changed_lines(spark: SparkSession, lake: Lake, cluster: str, start: int, end: int, super_users: str = "",
                       allow_everyone: bool = False, limit: int = 15) -> list[str]:
    """`replay.spark.audits.audit_changes` between two offsets: the ACLs added / removed and the access gained /
    lost, as tables (the first `limit` rows of each)."""
    found = audit_changes(spark, lake, cluster, start=start, end=end, super_users=super_users,
                          allow_everyone=allow_everyone)
    lines: list[str] = []
    for key, audit, title in (("acls", "acl_changes", "ACLs"), ("access", "access_changes", "Access")):
        rows = sorted(found[key], key=lambda r: json.dumps(r, sort_keys=True, default=str))  # same order each run
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r["change"])] = counts.get(str(r["change"]), 0) + 1
        lines.append(f"{title}: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no change"))
        if rows:
            lines += ["  " + line for line in render_audit(rows[:limit], audit)]
            if len(rows) > limit:
                lines.append(f"  ... {len(rows) - limit} more (kraft-replay changes --lake-cluster {cluster} "
                             f"--from-offset {start} --to-offset {end})")
    return lines
