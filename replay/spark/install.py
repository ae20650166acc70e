"""Persistent SQL: the lake's functions and views created in a schema (`kraft-replay install-sql`), so a SQL
warehouse, a BI tool or any Spark session can call them without this package.

The functions are the same definitions the Python session registers as temporary ones (`queries.state_functions`,
`audits.audit_functions`, `authorize_api_sql.api_functions`, `verify_access.verify_functions`), in plain SQL (no Python function), each with a COMMENT. A directory lake's functions read
its tables by path (`` delta.`/lake/acl_history` ``) from the schema given; a catalog lake's land in its own schema.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import SparkSession

from replay.spark.access_sql import access_functions
from replay.spark.audits import audit_functions
from replay.spark.authorize_api_sql import api_functions
from replay.spark.queries import state_functions
from replay.spark.rules import INCOMPLETE, LOG, MISSING, SNAPSHOT, known_end_sql, live_sql
from replay.spark.sqlddl import SqlFunction, SqlView
from replay.spark.tables import ACCESS_EVENTS, ACL_FIELDS, ALL_TABLES, Lake, quote_ident


def lake_functions(table_ref: Callable[[str], str], access: bool = False,
                   names: str | None = None) -> list[SqlFunction]:
    """Every function; `access`: also those over `access_events` (a lake that has ingested authorizer logs);
    `names`: the clusters with a replayed history, for the checks (`Lake.replayed_clusters_sql`)."""
    return [*state_functions(table_ref, names), *audit_functions(table_ref, names=names),
            *api_functions(table_ref, names),
            *(access_functions(table_ref) if access else [])]


def lake_views(table_ref: Callable[[str], str]) -> list[SqlView]:
    """`acl_current` (each cluster's ACLs at the end of its known history, as `acl_state_at` there),
    `cluster_coverage` (how much of each cluster's log the lake holds), `anomalies_latest` (each cluster's 100 last
    findings)."""
    hist, cov, anomalies = table_ref("acl_history"), table_ref("log_coverage"), table_ref("anomalies")
    at = "l.last_offset"
    live, maybe = live_sql(at, "h")
    fields = ", ".join(f"h.{c}" for c in ACL_FIELDS)
    current = (f"SELECT h.cluster_id, {at} AS as_of_offset, h.acl_id, {fields}, CASE WHEN {live} THEN 'certain' "
               "ELSE 'uncertain' END AS certainty, h.valid_from_offset, h.valid_from_time "
               f"FROM {hist} h JOIN (SELECT cluster_id, {known_end_sql()} AS last_offset FROM {cov} "
               "GROUP BY cluster_id) l ON h.cluster_id = l.cluster_id "
               f"WHERE {maybe}")
    coverage = (f"SELECT cluster_id, min(start_offset) AS first_offset, {known_end_sql()} AS last_offset, "
                f"sum(CASE WHEN kind = '{LOG}' THEN end_offset - start_offset + 1 ELSE 0 END) AS offsets_in_dumps, "
                f"count_if(kind = '{SNAPSHOT}') AS snapshot_only_ranges, count_if(kind = '{MISSING}') AS missing_ranges, "
                f"count_if(kind = '{INCOMPLETE}') AS incomplete_ranges, "
                f"count_if(kind = '{MISSING}') = 0 AND count_if(kind = '{INCOMPLETE}') = 0 AS gapless "
                f"FROM {cov} GROUP BY cluster_id")
    latest = ("SELECT * EXCEPT (_rank) FROM (SELECT a.*, row_number() OVER (PARTITION BY a.cluster_id "
              f"ORDER BY a.offset DESC NULLS LAST, a.kind, a.message) AS _rank FROM {anomalies} a) WHERE _rank <= 100")
    return [
        SqlView("acl_current", "The ACLs live in each cluster at the end of its known history (last_offset of "
                "cluster_coverage); certainty uncertain where a hole hides whether an ACL was still live.", current),
        SqlView("cluster_coverage", "Per cluster: the offsets the lake knows, how many lie in dumps, and the ranges "
                "known only from a snapshot, missing, or where unrecorded ACLs could have been live.", coverage),
        SqlView("anomalies_latest", "The 100 findings at the highest offsets of each cluster (decoder problems "
                "without an offset last).", latest),
    ]


def install_statements(lake: Lake, schema: str | None = None) -> list[str]:
    """The DDL that installs every function and view: in `schema` (a name or `catalog.schema`), by default the
    catalog lake's own schema. A directory lake needs `schema` (its functions read the tables by path)."""
    if schema is None:
        if not lake.is_catalog:
            raise ValueError("a directory lake's functions need a schema to live in: give --schema NAME")
        target = lake.schema_ref
    else:
        target = ".".join(quote_ident(p) for p in schema.split("."))
    return [f"CREATE SCHEMA IF NOT EXISTS {target}",
            *[f.create(target) for f in lake_functions(lake.source, lake.exists(ACCESS_EVENTS),
                                                     lake.replayed_clusters_sql())],
            *[v.create(target) for v in lake_views(lake.source)]]


def install(spark: SparkSession, lake: Lake, schema: str | None = None) -> list[str]:
    """Run `install_statements`, and give the lake's existing tables the comments they lack (`Lake.document`);
    returns every statement run."""
    statements = install_statements(lake, schema)
    for s in statements:
        spark.sql(s)
    return statements + [s for t in ALL_TABLES if lake.exists(t) for s in lake.document(t)]
