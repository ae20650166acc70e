"""The SQL table functions over `access_events` (what brokers logged): the same query texts as the Python audits of
`verify_access` and `unused_access`, with their own parameters, for `kraft-replay sql`, notebooks and (through
`install-sql`) SQL warehouses."""

from __future__ import annotations

from collections.abc import Callable, Collection

from pyspark.sql import SparkSession

from replay.kafka.verify_log import DEFAULT_SKEW_MS
from replay.spark.authorize_decide import SqlSettings
from replay.spark.sqlddl import SqlFunction, create_temporary
from replay.spark.tables import ACCESS_EVENTS, SCHEMAS, Lake
from replay.spark.unused_access import GRANTED_USED_RETURNS, UNUSED_ACLS_RETURNS, unused_sql
from replay.spark.verify_access import verify_sql

_VERIFY_RETURNS = ", ".join(f"{f.name} {f.dataType.simpleString().upper()}" for f in SCHEMAS[ACCESS_EVENTS].fields) \
    + ", verdict STRING, why STRING, offsets ARRAY<BIGINT>, acl_ids ARRAY<STRING>"
_PARAMS = ("cluster STRING, from_time BIGINT DEFAULT NULL, to_time BIGINT DEFAULT NULL, "
           f"skew_ms BIGINT DEFAULT {DEFAULT_SKEW_MS}, super_users STRING DEFAULT NULL, "
           "allow_everyone BOOLEAN DEFAULT false")


def _verdicts(ref: Callable[[str], str], fn: str) -> str:
    """`verify_sql` over the decisions `access_events` holds for the function's cluster and window."""
    events = (f"(SELECT * FROM {ref(ACCESS_EVENTS)} WHERE cluster_id = {fn}.cluster "
              f"AND ({fn}.from_time IS NULL OR time >= {fn}.from_time) AND ({fn}.to_time IS NULL OR time <= {fn}.to_time))")
    settings = SqlSettings.of_params(f"{fn}.super_users", f"{fn}.allow_everyone")
    return verify_sql(events, ref("offset_times"), ref("acl_events"), ref("acl_history"), ref("log_coverage"),
                      f"CAST(coalesce({fn}.skew_ms, {DEFAULT_SKEW_MS}) AS BIGINT)", settings)


def access_functions(ref: Callable[[str], str]) -> list[SqlFunction]:
    """`acl_verify_access`, `acl_unused_acls`, `acl_granted_used` (cluster, from_time, to_time: epoch ms, NULL open;
    skew_ms; super_users: the broker's super.users text; allow_everyone)."""
    verify, acls, granted = "acl_verify_access", "acl_unused_acls", "acl_granted_used"

    def unused(fn: str, part: str) -> str:
        return unused_sql(_verdicts(ref, fn), ref("acl_history"), ref("offset_times"), ref("log_coverage"),
                          f"{fn}.cluster", f"{fn}.from_time", f"{fn}.to_time")[part]

    return [
        SqlFunction(verify, _PARAMS, _VERIFY_RETURNS,
                    "Each authorization decision the cluster's brokers logged (access_events), verified against the "
                    "ACLs replayed at that moment: consistent, inconsistent (why) or unknown (why).",
                    _verdicts(ref, verify)),
        SqlFunction(acls, _PARAMS, UNUSED_ACLS_RETURNS,
                    "The ACLs live in the window with the logged decisions each made, their client hosts, and for an "
                    "ACL naming a host the other hosts its principal asked for what it covers from; unused first "
                    "(those could be removed).", unused(acls, "acls")),
        SqlFunction(granted, _PARAMS, GRANTED_USED_RETURNS,
                    "Per principal: the operations its ALLOWs grant, those its logged requests used, and its ALLOWs "
                    "that decided nothing.", unused(granted, "principals")),
    ]


def register_access_functions(spark: SparkSession, lake: Lake, only: Collection[str] | None = None) -> list[str]:
    """Register the functions over this lake as temporary SQL table functions (with `only`: those it names);
    returns the names registered. A lake without `access_events` gets an empty one."""
    functions = [f for f in access_functions(lake.source) if only is None or f.name in only]
    if functions:
        lake.ensure(ACCESS_EVENTS)
    return create_temporary(spark, functions)
