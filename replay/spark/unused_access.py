"""Least privilege in the lake: which ACLs decided no logged request in a window, and what each principal was
granted against what it used; the lake's twin of `replay.kafka.unused_acls`, over the verdicts of
`replay.spark.verify_access` (a decision verified `consistent` is credited to the ACLs that decided it).

One SQL text per answer (`unused_sql`), over `verify_sql`'s verdicts: run from Python (`unused_access`) and
embedded in the SQL table functions `acl_unused_acls` and `acl_granted_used` (`verify_access.verify_functions`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from replay.kafka.acl import WILDCARD_HOST, WILDCARD_PRINCIPAL
from replay.kafka.verify_log import CONSISTENT, DEFAULT_SKEW_MS
from replay.spark.authorize_decide import acl_covers_sql
from replay.spark.rules import known_end_sql, offset_at_time_sql
from replay.spark.tables import ACCESS_EVENTS, ACL_FIELDS, Lake
from replay.spark.verify_access import run_verified

ACL_COLUMNS = ["used", "decisions", "from_hosts", "other_hosts", "acl_id", *ACL_FIELDS]
PRINCIPAL_COLUMNS = ["principal", "granted", "used", "granted_not_used", "resources_used"]
UNUSED_ACLS_RETURNS = ("used BOOLEAN, decisions BIGINT, from_hosts ARRAY<STRING>, other_hosts ARRAY<STRING>, "
                       "acl_id STRING, "
                       + ", ".join(f"{c} STRING" for c in ACL_FIELDS))
GRANTED_USED_RETURNS = ("principal STRING, granted ARRAY<STRING>, used ARRAY<STRING>, granted_not_used ARRAY<STRING>, "
                        "resources_used BIGINT")
_EMPTY = "CAST(array() AS ARRAY<STRING>)"


def unused_sql(verdicts: str, hist: str, times: str, cov: str, cluster: str, start: str, end: str) -> dict[str, str]:
    """The queries over the verdicts of the window [start, end] (SQL expressions, epoch ms; NULL: open): `acls`
    (`ACL_COLUMNS`: each ACL live in the window, the consistent decisions credited to it and their client hosts,
    and for an ACL naming a host the other hosts its principal asked for what it covers from while it was live
    (`unused_acls.other_hosts`), unused first), `principals` (`PRINCIPAL_COLUMNS`) and `counts` (lines, allowed,
    not_consistent). An ACL is live in the window when it was, or may have been, live at an offset of it
    (`unused_acls.live_in`)."""
    first = offset_at_time_sql(times, cluster, start, "_o")
    last = offset_at_time_sql(times, cluster, end, "_o")
    known_end = f"SELECT {known_end_sql()} AS _o FROM {cov} WHERE cluster_id = {cluster}"
    fields = ", ".join(f"l.{c}" for c in ACL_FIELDS)
    op_type = "concat_ws(' ', {p}operation, {p}resource_type)"
    prefix = f"""WITH
_u_v AS (SELECT * FROM ({verdicts}) WHERE time IS NOT NULL),
_u_c AS (SELECT acl_id, count(DISTINCT event_key) AS decisions, array_sort(collect_set(host)) AS from_hosts
  FROM (SELECT event_key, host, explode(acl_ids) AS acl_id FROM _u_v WHERE verdict = '{CONSISTENT}') GROUP BY acl_id),
_u_f AS ({first}), _u_t AS ({last}), _u_e AS ({known_end}),
_u_b AS (SELECT CASE WHEN {start} IS NULL THEN 0 ELSE coalesce(f._o, 0) END AS _lo,
  CASE WHEN {end} IS NULL THEN e._o ELSE t._o END AS _hi FROM _u_f f CROSS JOIN _u_t t CROSS JOIN _u_e e),
_u_l AS (SELECT h.* FROM {hist} h CROSS JOIN _u_b b WHERE h.cluster_id = {cluster} AND h.valid_from_min_offset <= b._hi
  AND (h.valid_to_offset IS NULL OR h.valid_to_offset > b._lo))"""
    # the requests (any verdict) an ACL naming a host matches but for the host, from other hosts, while it was live
    other = f"""{prefix},
_u_r AS (SELECT DISTINCT principal, host, operation, resource_type, resource_name, array_min(offsets) AS _lo,
  array_max(offsets) AS _hi FROM _u_v WHERE size(offsets) > 0),
_u_o AS (SELECT l.acl_id, array_sort(collect_set(r.host)) AS other_hosts
  FROM (SELECT * FROM _u_l WHERE host != '{WILDCARD_HOST}') l
  JOIN (SELECT *, explode(array_distinct(array(principal, '{WILDCARD_PRINCIPAL}'))) AS _pp FROM _u_r) r
    ON l.principal = r._pp AND l.resource_type = r.resource_type
  WHERE r.host != l.host AND l.valid_from_min_offset <= r._hi AND (l.valid_to_offset IS NULL OR l.valid_to_offset > r._lo)
    AND {acl_covers_sql("l.", "r.")}
  GROUP BY l.acl_id)"""
    acls = f"""{other}
SELECT coalesce(c.decisions, 0) > 0 AS used, coalesce(c.decisions, 0) AS decisions,
  coalesce(c.from_hosts, {_EMPTY}) AS from_hosts, coalesce(o.other_hosts, {_EMPTY}) AS other_hosts, l.acl_id, {fields}
FROM _u_l l LEFT JOIN _u_c c ON c.acl_id = l.acl_id LEFT JOIN _u_o o ON o.acl_id = l.acl_id
ORDER BY used, decisions, principal, acl_id"""
    principals = f"""{prefix},
_u_g AS (SELECT l.principal, array_sort(collect_set({op_type.format(p='l.')})) AS granted,
  array_sort(collect_set(CASE WHEN c.acl_id IS NULL THEN concat({op_type.format(p='l.')}, ' ', l.pattern_type, ':',
    l.resource_name) END)) AS granted_not_used
  FROM _u_l l LEFT JOIN _u_c c ON c.acl_id = l.acl_id WHERE l.permission_type = 'ALLOW' GROUP BY l.principal),
_u_u AS (SELECT principal, array_sort(collect_set({op_type.format(p='')})) AS used,
  count(DISTINCT resource_type, resource_name) AS resources_used
  FROM _u_v WHERE verdict = '{CONSISTENT}' AND decision = 'ALLOWED' GROUP BY principal)
SELECT coalesce(g.principal, u.principal) AS principal, coalesce(g.granted, {_EMPTY}) AS granted,
  coalesce(u.used, {_EMPTY}) AS used, coalesce(g.granted_not_used, {_EMPTY}) AS granted_not_used,
  coalesce(u.resources_used, 0) AS resources_used
FROM _u_g g FULL OUTER JOIN _u_u u ON g.principal = u.principal
ORDER BY principal"""
    counts = f"""{prefix}
SELECT count(*) AS lines, count(CASE WHEN verdict = '{CONSISTENT}' AND decision = 'ALLOWED' THEN 1 END) AS allowed,
  count(CASE WHEN verdict != '{CONSISTENT}' THEN 1 END) AS not_consistent FROM _u_v"""
    return {"acls": acls, "principals": principals, "counts": counts}


@dataclass
class LakeUsage:
    """`acls`: one row per ACL live in the window (`ACL_COLUMNS`, unused first); `principals`: per principal
    (`PRINCIPAL_COLUMNS`); `counts`: the logged decisions of the window (`lines`), the consistent allowed ones
    (`allowed`) and those credited to no ACL (`not_consistent`)."""

    acls: DataFrame
    principals: DataFrame
    counts: dict[str, int]


def unused_access(lake: Lake, cluster: str, start: int | None = None, end: int | None = None,
                  super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False,
                  skew_ms: int = DEFAULT_SKEW_MS, events: DataFrame | None = None) -> LakeUsage:
    """The usage of the decisions logged in [start, end] (epoch ms): those access_events holds for `cluster`, or
    `events` (`access_ingest.access_rows` of logs read for the question)."""
    if events is None:
        events = lake.read(ACCESS_EVENTS).where(F.col("cluster_id") == cluster)
    if start is not None:
        events = events.where(F.col("time") >= start)
    if end is not None:
        events = events.where(F.col("time") <= end)
    values = {"cluster": cluster, "start": start, "end": end}

    def run(part: str) -> DataFrame:
        def build(verdicts: str, m: dict[str, str]) -> str:
            return unused_sql(verdicts, "{hist}", "{times}", "{cov}", m["cluster"], f"CAST({m['start']} AS BIGINT)",
                              f"CAST({m['end']} AS BIGINT)")[part]

        return run_verified(lake, events, build, values, super_users, allow_everyone, skew_ms)

    row = run("counts").first()
    counts = {k: int(row[k] or 0) if row is not None else 0 for k in ("lines", "allowed", "not_consistent")}
    return LakeUsage(run("acls"), run("principals"), counts)
