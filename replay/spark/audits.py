"""Point-in-time audits over the lake, built on the batch authorizer (`authorize.decide_keys`): every decision in an
audit is a StandardAuthorizer decision with its certainty, never a second rule set.

| audit | Python (DataFrame) | plain function for the CLI (rows) |
|---|---|---|
| (a) who could do an operation on a resource at a time | `who_can` | `audit_who_can` |
| (b) what a principal could do at a time | `what_can` | `audit_what_can` |
| (c) what changed between two times: ACLs, and access gained/lost | `acl_changes`, `access_changes` | `audit_changes` |
| (d) timeline of one principal's or one resource's access | `timeline` | `audit_timeline` |
| (e) risky grants over time | `risky_grants` | `audit_risky_grants` |

SQL: `register_audit_functions(spark, lake)` creates the table functions `acl_risky_grants(cluster, at_offset)`
(at_offset NULL: over all history) and `acl_diff(cluster, from_offset, to_offset)` (ACLs added / removed, with
certainty), pure SQL over the lake's tables. The audits that need decisions are Python; `as_view(df, name)` (or
the `view=` argument of every audit) publishes their result as a temporary view for SQL and notebooks.

Conventions shared by every audit:

* the principal `User:*` stands for **everyone**: any principal that has no ACL of its own (column `who`);
  host `*` stands for any host that no ACL names;
* the resources looked at are the ACLs' own patterns: a PREFIXED pattern `pay` is evaluated for a resource named
  exactly `pay`, the LITERAL `*` for a resource named `*` (what holds for every name of the type unless a more
  specific ACL says otherwise); the rows say which pattern (`pattern_type`, `resource_name`);
* `certain` says whether the answer holds in every state the history allows (gaps, uncertain bounds, coverage),
  `coverage` what the history knows at that offset (`complete`, `incomplete`, `not_covered`);
* (e)'s `default_exposed`: topics that exist at the time (TopicRecord names in `metadata_records`: the latest
  snapshot at or before the time plus the log after it, minus RemoveTopicRecords; records inside metadata
  transactions are taken at their own offsets) that no ACL covers (no LITERAL, PREFIXED or `*` ACL of any
  principal), so `allow.everyone.if.no.acl.found=true` would let anybody use them. `certain` is false when an
  uncertain ACL might cover the topic or the history is incomplete there.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

from replay.spark.authorize import (
    _KEY,
    _RES_KEY,
    ALLOWED,
    ANY_HOST,
    COV_COMPLETE,
    DENIED,
    R_DENY,
    UNKNOWN,
    WILDCARD_PRINCIPAL,
    AuthorizerSettings,
    LakeTables,
    _candidate_counts,
    _coverage,
    _history,
    _probes,
    decide_keys,
)
from replay.spark.queries import ACL_FIELDS, certainly_live, last_offset, offset_at_time, possibly_live

# AclEntry.supportedOperations (spec §5.3): what an audit asks about for each resource type.
SUPPORTED_OPERATIONS: dict[str, list[str]] = {
    "TOPIC": ["READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"],
    "GROUP": ["READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"],
    "CLUSTER": ["CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE"],
    "TRANSACTIONAL_ID": ["DESCRIBE", "WRITE"],
    "DELEGATION_TOKEN": ["DESCRIBE"],
    "USER": ["CREATE_TOKENS", "DESCRIBE_TOKENS"],
}
EVERYONE = "everyone"
ANY_HOST_TEXT = "any host"


# ---- helpers -------------------------------------------------------------------------------------------------

def resolve_offset(lake: Any, cluster: str, offset: int | None = None, time: int | None = None) -> int | None:
    """The as-of offset: `offset`, else the last offset whose time is <= `time`, else the end of known history."""
    if offset is not None:
        return offset
    if time is not None:
        return offset_at_time(lake, cluster, time)
    return last_offset(lake, cluster)


def as_view(df: DataFrame, name: str) -> DataFrame:
    """Publish an audit result as a temporary view (SQL: `SELECT * FROM name`)."""
    df.createOrReplaceTempView(name)
    return df


def _finish(df: DataFrame, view: str | None) -> DataFrame:
    return as_view(df, view) if view else df


def _ops_for(rtype: Column, op: Column | None = None) -> Column:
    """Operations an audit asks about: every supported one of the type, or those an ACL operation decides (ALL ->
    all supported; an ALLOW of READ/WRITE/DELETE/ALTER also decides DESCRIBE, ALTER_CONFIGS DESCRIBE_CONFIGS)."""
    supported = F.coalesce(F.element_at(F.create_map(*[x for t, ops in SUPPORTED_OPERATIONS.items()
                                                       for x in (F.lit(t), F.array(*[F.lit(o) for o in ops]))]),
                                        rtype), F.array().cast("array<string>"))
    if op is None:
        return supported
    implied = (F.when(op.isin("READ", "WRITE", "DELETE", "ALTER"), F.array(op, F.lit("DESCRIBE")))
               .when(op == "ALTER_CONFIGS", F.array(op, F.lit("DESCRIBE_CONFIGS"))).otherwise(F.array(op)))
    return F.when(op == "ALL", supported).otherwise(implied)


def _who(p: Column) -> Column:
    return F.when(p == WILDCARD_PRINCIPAL, F.lit(EVERYONE)).otherwise(p)


def _host_text(h: Column) -> Column:
    return F.when(h == ANY_HOST, F.lit(ANY_HOST_TEXT)).otherwise(h)


def _acl_text(prefix: str = "") -> Column:
    """`TOPIC:PREFIXED:pay User:bob ALLOW READ from *` — one ACL in a line."""
    c = [F.col(prefix + f) for f in ACL_FIELDS]
    return F.concat_ws("", c[0], F.lit(":"), c[2], F.lit(":"), c[1], F.lit(" "), c[3], F.lit(" "), c[6], F.lit(" "),
                       c[5], F.lit(" from "), c[4])


def _describe_ids(results: DataFrame, hist: DataFrame, ids_col: str, out_col: str) -> DataFrame:
    """Add `out_col`: the ACLs behind `ids_col` spelled out (kafka-acls-like one-liners), same order as the ids.

    Joined back on (cluster, the id array) itself, so the text always belongs to its own row (a generated row id
    would not survive the plan being evaluated twice).
    """
    texts = (hist.select(F.col("cluster_id").alias("_hc"), F.col("acl_id").alias("_hid"), _acl_text().alias("_txt"))
             .distinct())
    keys = results.select(F.col("cluster_id").alias("_kc"), F.col(ids_col).alias("_ids")).distinct()
    exploded = keys.select("_kc", "_ids", F.posexplode("_ids").alias("_pos", "_id"))
    named = (exploded.join(texts, (F.col("_kc") == F.col("_hc")) & (F.col("_id") == F.col("_hid")), "left")
             .groupBy("_kc", "_ids")
             .agg(F.array_sort(F.collect_list(F.struct("_pos", F.coalesce("_txt", "_id").alias("t")))).alias("_l")))
    joined = results.join(named, (results["cluster_id"] == named["_kc"]) & (results[ids_col] == named["_ids"]),
                          "left")
    return (joined.withColumn(out_col, F.coalesce(F.transform("_l", lambda s: s["t"]),
                                                  F.array().cast("array<string>")))
            .drop("_kc", "_ids", "_l"))


def _only_distinct_hosts(df: DataFrame, group: list[str]) -> DataFrame:
    """Keep a host-specific row only where its answer differs from the any-host row of the same group."""
    w = Window.partitionBy(*group)
    sig = F.concat_ws("|", "decision", "reason")
    anyhost = F.first(F.when(F.col("host") == ANY_HOST, sig), ignorenulls=True).over(w)
    return (df.withColumn("_any", anyhost)
            .where((F.col("host") == ANY_HOST) | F.col("_any").isNull() | (sig != F.col("_any"))).drop("_any"))


def _keys(df: DataFrame) -> DataFrame:
    return df.select(*_KEY).where(F.col("_p").contains(":")).distinct()


def _decorate(decided: DataFrame, tables: LakeTables) -> DataFrame:
    """Readable columns over decided keys."""
    d = decided.select(
        "cluster_id", F.col("_at").alias("as_of_offset"), F.col("_p").alias("principal"), _who(F.col("_p")).alias("who"),
        F.col("_h").alias("host"), _host_text(F.col("_h")).alias("from_host"), F.col("_op").alias("operation"),
        F.col("_rtype").alias("resource_type"), F.col("_name").alias("resource_name"), "decision", "certain",
        "reason", "deciding_acl_ids", "uncertain_acl_ids", "coverage")
    return _describe_ids(d, tables.history, "deciding_acl_ids", "via")


# ---- (a) who could ---------------------------------------------------------------------------------------------

def who_can(spark: SparkSession, lake: Any, cluster: str, operation: str, resource_type: str, resource_name: str,
            offset: int | None = None, time: int | None = None, super_users: str | Sequence[str] | None = "",
            allow_everyone: bool = False, view: str | None = None) -> DataFrame:
    """Every principal (and `everyone`) that could perform `operation` on the resource at that moment, per host,
    through which ACLs; explicit DENYs are listed too (decision DENIED, reason matching_deny)."""
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    at = resolve_offset(lake, cluster, offset, time)
    from replay.kafka.acl import AclOperation, ResourceType

    op = AclOperation.parse(operation).name
    rtype = ResourceType.parse(resource_type).name
    resource = spark.createDataFrame([(cluster, rtype, resource_name, at)],
                                     "cluster_id string, _rtype string, _name string, _at long")
    hist = _history(tables.history)
    cands = (_probes(resource, hist).join(hist, ["cluster_id", "_rtype", "_pk", "_pn"])
             .where(certainly_live(F.col("_at")) | possibly_live(F.col("_at"))))
    principals = cands.select(F.col("principal").alias("_p")).union(
        spark.createDataFrame([(p,) for p in [WILDCARD_PRINCIPAL, *sorted(settings.super_users)]], "_p string"))
    hosts = cands.select(F.col("host").alias("_h")).union(spark.createDataFrame([(ANY_HOST,)], "_h string"))
    keys = (resource.crossJoin(principals.distinct()).crossJoin(hosts.distinct())
            .withColumn("_op", F.lit(op)))
    decided = decide_keys(_keys(keys), tables, settings)
    out = _only_distinct_hosts(_decorate(decided, tables), ["principal"])
    out = out.where((F.col("decision") != DENIED) | (F.col("reason") == R_DENY))
    return _finish(out.orderBy(F.col("principal") != WILDCARD_PRINCIPAL, "principal", "host"), view)


# ---- (b) what could ------------------------------------------------------------------------------------------

def what_can(spark: SparkSession, lake: Any, cluster: str, principal: str, offset: int | None = None,
             time: int | None = None, super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
             view: str | None = None) -> DataFrame:
    """Resource patterns x operations the principal could use at that moment (through its own ACLs or `User:*`
    ACLs), per host, through which ACLs; explicit DENYs listed too. A super user gets one row per resource type:
    everything (reason super_user)."""
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    at = resolve_offset(lake, cluster, offset, time)
    hist = tables.history.where((F.col("cluster_id") == cluster) & F.col("principal").isin(principal,
                                                                                          WILDCARD_PRINCIPAL))
    live = hist.where(certainly_live(F.lit(at)) | possibly_live(F.lit(at))) if at is not None else hist.limit(0)
    patterns = live.select("cluster_id", F.col("resource_type").alias("_rtype"), F.col("resource_name").alias("_name"),
                           F.col("pattern_type").alias("_pattern")).distinct()
    hosts = live.select(F.col("host").alias("_h")).union(spark.createDataFrame([(ANY_HOST,)], "_h string")).distinct()
    keys = (patterns.crossJoin(hosts)
            .select("cluster_id", F.lit(principal).alias("_p"), "_h", F.explode(_ops_for(F.col("_rtype"))).alias("_op"),
                    "_rtype", "_name", F.lit(at).cast("long").alias("_at")))
    decided = _decorate(decide_keys(_keys(keys), tables, settings), tables)
    pats = patterns.select(F.col("cluster_id").alias("_pc"), F.col("_rtype").alias("_prt"),
                           F.col("_name").alias("_pnm"), "_pattern")
    out = (decided.join(pats, (F.col("cluster_id") == F.col("_pc")) & (F.col("resource_type") == F.col("_prt"))
                        & (F.col("resource_name") == F.col("_pnm")), "left")
           .withColumn("pattern_type", F.coalesce(F.col("_pattern"), F.lit("LITERAL"))).drop("_pc", "_prt", "_pnm",
                                                                                            "_pattern"))
    out = _only_distinct_hosts(out, ["resource_type", "resource_name", "pattern_type", "operation"])
    out = out.where((F.col("decision") != DENIED) | (F.col("reason") == R_DENY))
    return _finish(out.orderBy("resource_type", "resource_name", "pattern_type", "operation", "host"), view)


# ---- (c) what changed ----------------------------------------------------------------------------------------

def _status(at: Column) -> Column:
    return (F.when(at.isNull(), F.lit("unknown")).when(certainly_live(at), "live")
            .when(possibly_live(at), "maybe").otherwise("gone"))


def acl_changes(spark: SparkSession, lake: Any, cluster: str, start: int | None, end: int | None,
                view: str | None = None) -> DataFrame:
    """ACLs whose liveness differs between offsets `start` and `end`: `added`, `removed`, or with an uncertain side
    `maybe_added` / `maybe_removed` (certain = false)."""
    hist = LakeTables.of(lake).history.where(F.col("cluster_id") == cluster)
    s0, s1 = F.lit(start).cast("long"), F.lit(end).cast("long")
    d = hist.select("cluster_id", "acl_id", *ACL_FIELDS, "valid_from_offset", "valid_from_min_offset",
                    "valid_to_offset", "valid_to_min_offset", _status(s0).alias("before"), _status(s1).alias("after"))
    change = (F.when((F.col("before") == "gone") & (F.col("after") == "live"), "added")
              .when((F.col("before") == "live") & (F.col("after") == "gone"), "removed")
              .when(F.col("after") == "live", "maybe_added").when(F.col("before") == "live", "maybe_removed")
              .when(F.col("before") == "gone", "maybe_added").when(F.col("after") == "gone", "maybe_removed")
              .otherwise("maybe_changed"))
    out = (d.where(F.col("before") != F.col("after"))
           .withColumn("change", change)
           .withColumn("certain", F.col("before").isin("live", "gone") & F.col("after").isin("live", "gone"))
           .withColumn("from_offset", s0).withColumn("to_offset", s1))
    return _finish(out.orderBy("change", *ACL_FIELDS), view)


def access_changes(spark: SparkSession, lake: Any, cluster: str, start: int | None, end: int | None,
                   super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
                   view: str | None = None) -> DataFrame:
    """(principal, host, operation, resource pattern) whose decision differs between `start` and `end`, for the
    patterns and principals of the ACLs that changed (plus `everyone` on those patterns): `gained` (now ALLOWED),
    `lost` (no longer ALLOWED), or `uncertain` when either side is UNKNOWN."""
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    changed = acl_changes(spark, lake, cluster, start, end)
    combos = changed.select(
        "cluster_id", F.explode(F.array_distinct(F.array("principal", F.lit(WILDCARD_PRINCIPAL)))).alias("_p"),
        F.col("host").alias("_h0"), F.explode(_ops_for(F.col("resource_type"), F.col("operation"))).alias("_op"),
        F.col("resource_type").alias("_rtype"), F.col("resource_name").alias("_name"))
    combos = combos.select("cluster_id", "_p", F.explode(F.array_distinct(F.array("_h0", F.lit(ANY_HOST)))).alias("_h"),
                           "_op", "_rtype", "_name").distinct()
    ats = spark.createDataFrame([(start, 0), (end, 1)], "_at long, _side int")
    keys = combos.crossJoin(ats)
    decided = decide_keys(_keys(keys), tables, settings)
    side = keys.select(*_KEY, "_side")
    both = decided.join(side, _KEY)
    cols = ["decision", "certain", "reason", "deciding_acl_ids"]
    key = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name"]
    before = both.where(F.col("_side") == 0).select(*key, *[F.col(c).alias("before_" + c) for c in cols])
    after = both.where(F.col("_side") == 1).select(*key, *[F.col(c).alias("after_" + c) for c in cols])
    j = before.join(after, key)
    j = j.where(F.col("before_decision") != F.col("after_decision"))
    change = (F.when((F.col("after_decision") == ALLOWED) & (F.col("before_decision") == DENIED), "gained")
              .when((F.col("before_decision") == ALLOWED) & (F.col("after_decision") == DENIED), "lost")
              .otherwise("uncertain"))
    out = j.select("cluster_id", F.col("_p").alias("principal"), _who(F.col("_p")).alias("who"),
                   F.col("_h").alias("host"), F.col("_op").alias("operation"), F.col("_rtype").alias("resource_type"),
                   F.col("_name").alias("resource_name"), change.alias("change"),
                   (F.col("before_certain") & F.col("after_certain")).alias("certain"),
                   F.lit(start).cast("long").alias("from_offset"), F.lit(end).cast("long").alias("to_offset"),
                   *[F.col(p + c) for p in ("before_", "after_") for c in cols])
    out = _describe_ids(out, tables.history, "after_deciding_acl_ids", "after_via")
    return _finish(out.orderBy("change", "resource_type", "resource_name", "principal", "operation"), view)


# ---- (d) timeline ----------------------------------------------------------------------------------------------

def _times(df: DataFrame, offset_col: str, out_col: str, offset_times: DataFrame, cluster: str) -> DataFrame:
    """Add the time of the last indexed offset <= `offset_col` (as-of: union + running max; no range join)."""
    marks = offset_times.where(F.col("cluster_id") == cluster).select(
        F.col("offset").alias("_o"), F.col("time").alias("_t"), F.lit(0).alias("_tag"))
    want = df.select(F.col(offset_col).alias("_o")).where(F.col("_o").isNotNull()).distinct().select(
        "_o", F.lit(None).cast("long").alias("_t"), F.lit(1).alias("_tag"))
    w = Window.orderBy("_o", "_tag").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    found = (marks.unionByName(want).withColumn("_tt", F.last("_t", ignorenulls=True).over(w))
             .where(F.col("_tag") == 1).select(F.col("_o").alias(offset_col + "_k"), F.col("_tt").alias(out_col)))
    return df.join(found, F.col(offset_col).eqNullSafe(F.col(offset_col + "_k")), "left").drop(offset_col + "_k")


def timeline(spark: SparkSession, lake: Any, cluster: str, principal: str | None = None,
             resource_type: str | None = None, resource_name: str | None = None, operation: str | None = None,
             super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
             view: str | None = None) -> DataFrame:
    """Intervals `[from_offset, to_offset)` over which a decision stayed the same, with times and certainty.

    For a principal: every resource pattern and operation its ACLs (and `User:*` ACLs) ever touched; for a resource:
    every principal (and `everyone`) that any covering ACL ever named. `operation` narrows it to one operation.
    The state only changes at lifetime bounds and coverage edges, so decisions are taken at those offsets only.
    """
    from replay.kafka.acl import AclOperation, ResourceType

    if (principal is None) == (resource_name is None or resource_type is None):
        raise ValueError("give either a principal, or a resource type and name")
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    hist = _history(tables.history).where(F.col("cluster_id") == cluster)
    op = AclOperation.parse(operation).name if operation else None
    if principal is not None:
        mine = hist.where(F.col("principal").isin(principal, WILDCARD_PRINCIPAL))
        combos = mine.select("cluster_id", F.lit(principal).alias("_p"), "host",
                             F.explode(_ops_for(F.col("_rtype"), None if op else F.col("operation"))).alias("_op"),
                             "_rtype", F.col("resource_name").alias("_name"))
    else:
        assert resource_type is not None and resource_name is not None
        rtype = ResourceType.parse(resource_type).name
        res = spark.createDataFrame([(cluster, rtype, resource_name, None)],
                                    "cluster_id string, _rtype string, _name string, _at long")
        mine = _probes(res, hist).join(hist, ["cluster_id", "_rtype", "_pk", "_pn"])
        combos = mine.select("cluster_id", F.explode(F.array_distinct(F.array("principal", F.lit(WILDCARD_PRINCIPAL))))
                             .alias("_p"), "host",
                             F.explode(_ops_for(F.col("_rtype"), None if op else F.col("operation"))).alias("_op"),
                             "_rtype", "_name")
    if op:
        combos = combos.withColumn("_op", F.lit(op))
    combos = combos.select("cluster_id", "_p", F.explode(F.array_distinct(F.array("host", F.lit(ANY_HOST))))
                           .alias("_h"), "_op", "_rtype", "_name").distinct()
    # offsets where anything the decisions depend on can change: bounds of the covering lifetimes, coverage edges
    names = combos.select("cluster_id", "_rtype", "_name", F.lit(None).cast("long").alias("_at")).distinct()
    covering = _probes(names, hist).join(hist, ["cluster_id", "_rtype", "_pk", "_pn"])
    bounds = covering.select(F.explode(F.array("valid_from_offset", "valid_from_min_offset", "valid_to_offset",
                                               "valid_to_min_offset")).alias("_at"))
    cov = tables.coverage.where(F.col("cluster_id") == cluster)
    edges = cov.select(F.explode(F.array("start_offset", F.col("end_offset") + 1)).alias("_at"))
    points = bounds.union(edges).where(F.col("_at").isNotNull()).distinct()
    keys = combos.crossJoin(points)
    decided = decide_keys(_keys(keys), tables, settings)
    state = ["decision", "certain", "reason", "deciding_acl_ids"]
    combo = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name"]
    w = Window.partitionBy(*combo).orderBy("_at")
    sig = F.concat_ws("|", "decision", F.col("certain").cast("string"), "reason",
                      F.array_join("deciding_acl_ids", ","), "coverage")
    marked = (decided.withColumn("_sig", sig)
              .withColumn("_new", F.coalesce(F.lag("_sig").over(w) != F.col("_sig"), F.lit(True)))
              .where("_new"))
    intervals = marked.withColumn("to_offset", F.lead("_at").over(w))
    out = intervals.select(
        "cluster_id", F.col("_p").alias("principal"), _who(F.col("_p")).alias("who"), F.col("_h").alias("host"),
        F.col("_op").alias("operation"), F.col("_rtype").alias("resource_type"), F.col("_name").alias("resource_name"),
        F.col("_at").alias("from_offset"), "to_offset", *state, "uncertain_acl_ids", "coverage")
    out = _times(out, "from_offset", "from_time", tables.offset_times, cluster)
    out = _times(out, "to_offset", "to_time", tables.offset_times, cluster)
    out = _describe_ids(out, tables.history, "deciding_acl_ids", "via")
    return _finish(out.orderBy("resource_type", "resource_name", "principal", "operation", "host", "from_offset"),
                   view)


# ---- (e) risky grants ------------------------------------------------------------------------------------------

RISKS = {
    "everyone_allow": "ALLOW for User:* (every principal, of any type)",
    "all_operations": "ALLOW with operation ALL",
    "wildcard_resource": "ALLOW on the LITERAL resource * (every resource of the type)",
    "prefix_everything": "ALLOW on the PREFIXED resource '' (every resource of the type)",
    "default_exposed": "a topic no ACL covers: allow.everyone.if.no.acl.found=true lets anybody use it",
}


def _risk_kinds() -> Column:
    allow = F.col("permission_type") == "ALLOW"
    return F.filter(F.array(
        F.when(allow & (F.col("principal") == WILDCARD_PRINCIPAL), F.lit("everyone_allow")),
        F.when(allow & (F.col("operation") == "ALL"), F.lit("all_operations")),
        F.when(allow & (F.col("pattern_type") == "LITERAL") & (F.col("resource_name") == "*"),
               F.lit("wildcard_resource")),
        F.when(allow & (F.col("pattern_type") == "PREFIXED") & (F.col("resource_name") == ""),
               F.lit("prefix_everything"))), lambda x: x.isNotNull())


def live_topics(lake: Any, cluster: str, at: int) -> DataFrame | None:
    """Topic names existing at offset `at` from `metadata_records` (see the module docstring), or None when the lake
    has no metadata_records."""
    try:
        rec = lake.read("metadata_records").where(F.col("cluster_id") == cluster)
    except Exception:  # no such table in this lake
        return None
    name = F.coalesce(F.get_json_object("payload_json", "$.data.name"), F.get_json_object("payload_json", "$.name"))
    tid = F.coalesce(F.get_json_object("payload_json", "$.data.topicId"),
                     F.get_json_object("payload_json", "$.topicId"))
    snaps = rec.where(F.col("snapshot_end_offset").isNotNull() & (F.col("snapshot_end_offset") - 1 <= at))
    last = snaps.agg(F.max("snapshot_end_offset").alias("e")).first()
    base_end = None if last is None else last["e"]
    log = rec.where(F.col("snapshot_end_offset").isNull() & (F.col("offset") <= at))
    if base_end is not None:
        log = log.where(F.col("offset") >= base_end)
        base = snaps.where((F.col("snapshot_end_offset") == base_end) & (F.col("record_type") == "TOPIC_RECORD"))
        created = base.select(name.alias("topic"), tid.alias("topic_id"), F.lit(base_end - 1).alias("o"))
    else:
        created = log.limit(0).select(name.alias("topic"), tid.alias("topic_id"), F.col("offset").alias("o"))
    created = created.unionByName(log.where(F.col("record_type") == "TOPIC_RECORD").select(
        name.alias("topic"), tid.alias("topic_id"), F.col("offset").alias("o")))
    removed = log.where(F.col("record_type") == "REMOVE_TOPIC_RECORD").select(tid.alias("topic_id"),
                                                                              F.col("offset").alias("ro"))
    alive = created.join(removed, "topic_id", "left").where(F.col("ro").isNull() | (F.col("ro") < F.col("o")))
    return alive.select("topic").where(F.col("topic").isNotNull()).distinct()


def risky_grants(spark: SparkSession, lake: Any, cluster: str, offset: int | None = None, time: int | None = None,
                 over_time: bool = True, view: str | None = None) -> DataFrame:
    """Risky ACL lifetimes (`risk` in RISKS), one row per (lifetime, risk), with their bounds and exactness.

    With `over_time` (default) and no offset/time: every such lifetime in history. With an offset or time: the ones
    possibly live then (certain = certainly live), plus the `default_exposed` topics at that moment.
    """
    tables = LakeTables.of(lake)
    hist = tables.history.where(F.col("cluster_id") == cluster)
    at = None if (over_time and offset is None and time is None) else resolve_offset(lake, cluster, offset, time)
    rows = hist.select("*", F.explode(_risk_kinds()).alias("risk"))
    if at is not None:
        rows = rows.where(certainly_live(F.lit(at)) | possibly_live(F.lit(at))).withColumn(
            "certain", certainly_live(F.lit(at)))
    else:
        rows = rows.withColumn("certain", F.col("valid_from_exact") & F.coalesce(F.col("valid_to_exact"), F.lit(True)))
    out = rows.select(
        "cluster_id", "risk", F.element_at(F.create_map(*[F.lit(x) for kv in RISKS.items() for x in kv]),
                                           F.col("risk")).alias("why"),
        "acl_id", *ACL_FIELDS, "valid_from_offset", "valid_from_min_offset", "valid_from_time", "valid_to_offset",
        "valid_to_min_offset", "valid_to_time", "certain", F.lit(at).cast("long").alias("as_of_offset"),
        F.lit(None).cast("string").alias("coverage"))
    if at is not None:
        topics = live_topics(lake, cluster, at)
        if topics is not None:
            res = topics.select(F.lit(cluster).alias("cluster_id"), F.lit("TOPIC").alias("_rtype"),
                                F.col("topic").alias("_name"), F.lit(at).cast("long").alias("_at"))
            hist2 = _history(hist)
            counts = _candidate_counts(_probes(res, hist2), hist2)
            cov = _coverage(res.select("cluster_id", "_at").distinct(), tables.coverage)
            exposed = (res.join(counts, _RES_KEY, "left").join(cov, ["cluster_id", "_at"], "left")
                       .where(F.coalesce(F.col("_nc"), F.lit(0)) == 0))
            none_str = F.lit(None).cast("string")
            none_long = F.lit(None).cast("long")
            out = out.unionByName(exposed.select(
                "cluster_id", F.lit("default_exposed").alias("risk"), F.lit(RISKS["default_exposed"]).alias("why"),
                none_str.alias("acl_id"), F.lit("TOPIC").alias("resource_type"), F.col("_name").alias("resource_name"),
                F.lit("LITERAL").alias("pattern_type"), F.lit(WILDCARD_PRINCIPAL).alias("principal"),
                F.lit("*").alias("host"), F.lit("ALL").alias("operation"), F.lit("ALLOW").alias("permission_type"),
                *[none_long.alias(c) for c in ("valid_from_offset", "valid_from_min_offset", "valid_from_time",
                                               "valid_to_offset", "valid_to_min_offset", "valid_to_time")],
                ((F.coalesce(F.col("_np"), F.lit(0)) == 0) & (F.col("coverage") == COV_COMPLETE)).alias("certain"),
                F.col("_at").alias("as_of_offset"), "coverage"))
    return _finish(out.orderBy("risk", "resource_type", "resource_name", "principal", "valid_from_offset"), view)


# ---- SQL -------------------------------------------------------------------------------------------------------

def register_audit_functions(spark: SparkSession, lake: Any) -> list[str]:
    """`acl_risky_grants(cluster, at_offset)` and `acl_diff(cluster, from_offset, to_offset)` as SQL table
    functions over this lake (pure SQL; the decision-based audits are Python, published with `view=`)."""
    hist = lake.table_ref("acl_history")
    cols = ", ".join(f"{c} STRING" for c in ACL_FIELDS)
    sel = ", ".join(f"h.{c}" for c in ACL_FIELDS)
    live = "(h.valid_from_offset <= {a} AND (h.valid_to_min_offset IS NULL OR {a} < h.valid_to_min_offset))"
    maybe = ("(h.valid_from_min_offset <= {a} AND (h.valid_to_min_offset IS NULL OR h.valid_to_offset IS NULL "
             "OR {a} < h.valid_to_offset))")
    risk = ("filter(array("
            "CASE WHEN h.permission_type = 'ALLOW' AND h.principal = 'User:*' THEN 'everyone_allow' END, "
            "CASE WHEN h.permission_type = 'ALLOW' AND h.operation = 'ALL' THEN 'all_operations' END, "
            "CASE WHEN h.permission_type = 'ALLOW' AND h.pattern_type = 'LITERAL' AND h.resource_name = '*' "
            "THEN 'wildcard_resource' END, "
            "CASE WHEN h.permission_type = 'ALLOW' AND h.pattern_type = 'PREFIXED' AND h.resource_name = '' "
            "THEN 'prefix_everything' END), x -> x IS NOT NULL)")
    spark.sql(
        f"CREATE OR REPLACE TEMPORARY FUNCTION acl_risky_grants(cluster STRING, at_offset BIGINT) RETURNS TABLE "
        f"(risk STRING, acl_id STRING, {cols}, valid_from_offset BIGINT, valid_to_offset BIGINT, certain BOOLEAN) "
        f"RETURN SELECT r.risk, r.acl_id, {', '.join('r.' + c for c in ACL_FIELDS)}, r.valid_from_offset, "
        f"r.valid_to_offset, r.certain FROM (SELECT explode({risk}) AS risk, h.acl_id, {sel}, h.valid_from_offset, "
        f"h.valid_to_offset, CASE WHEN at_offset IS NULL THEN h.valid_from_exact AND coalesce(h.valid_to_exact, true) "
        f"ELSE {live.format(a='at_offset')} END AS certain FROM {hist} h WHERE h.cluster_id = cluster AND "
        f"(at_offset IS NULL OR {live.format(a='at_offset')} OR {maybe.format(a='at_offset')})) r")

    def status(a: str) -> str:
        return (f"CASE WHEN {live.format(a=a)} THEN 'live' WHEN {maybe.format(a=a)} THEN 'maybe' ELSE 'gone' END")

    spark.sql(
        f"CREATE OR REPLACE TEMPORARY FUNCTION acl_diff(cluster STRING, from_offset BIGINT, to_offset BIGINT) "
        f"RETURNS TABLE (change STRING, certain BOOLEAN, acl_id STRING, {cols}, before STRING, after STRING) "
        f"RETURN SELECT CASE WHEN d.before = 'gone' AND d.after = 'live' THEN 'added' "
        f"WHEN d.before = 'live' AND d.after = 'gone' THEN 'removed' "
        f"WHEN d.after IN ('live', 'maybe') AND d.before != 'live' THEN 'maybe_added' ELSE 'maybe_removed' END, "
        f"d.before IN ('live', 'gone') AND d.after IN ('live', 'gone'), d.acl_id, "
        f"{', '.join('d.' + c for c in ACL_FIELDS)}, d.before, d.after FROM (SELECT h.acl_id, {sel}, "
        f"{status('from_offset')} AS before, {status('to_offset')} AS after FROM {hist} h "
        f"WHERE h.cluster_id = cluster) d WHERE d.before != d.after")
    return ["acl_risky_grants", "acl_diff"]


# ---- plain functions for the CLI -----------------------------------------------------------------------------

def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def audit_who_can(spark: SparkSession, lake: Any, cluster: str, operation: str, resource_type: str,
                  resource_name: str, offset: int | None = None, time: int | None = None, super_users: str = "",
                  allow_everyone: bool = False) -> list[dict[str, Any]]:
    return _rows(who_can(spark, lake, cluster, operation, resource_type, resource_name, offset, time, super_users,
                         allow_everyone))


def audit_what_can(spark: SparkSession, lake: Any, cluster: str, principal: str, offset: int | None = None,
                   time: int | None = None, super_users: str = "", allow_everyone: bool = False
                   ) -> list[dict[str, Any]]:
    return _rows(what_can(spark, lake, cluster, principal, offset, time, super_users, allow_everyone))


def audit_changes(spark: SparkSession, lake: Any, cluster: str, start: int | None = None, end: int | None = None,
                  start_time: int | None = None, end_time: int | None = None, super_users: str = "",
                  allow_everyone: bool = False) -> dict[str, list[dict[str, Any]]]:
    """{"acls": ACLs added/removed, "access": access gained/lost}; times map to offsets as everywhere."""
    s = resolve_offset(lake, cluster, start, start_time) if (start is not None or start_time is not None) else -1
    e = resolve_offset(lake, cluster, end, end_time)
    return {"acls": _rows(acl_changes(spark, lake, cluster, s, e)),
            "access": _rows(access_changes(spark, lake, cluster, s, e, super_users, allow_everyone))}


def audit_timeline(spark: SparkSession, lake: Any, cluster: str, principal: str | None = None,
                   resource_type: str | None = None, resource_name: str | None = None, operation: str | None = None,
                   super_users: str = "", allow_everyone: bool = False) -> list[dict[str, Any]]:
    return _rows(timeline(spark, lake, cluster, principal, resource_type, resource_name, operation, super_users,
                          allow_everyone))


def audit_risky_grants(spark: SparkSession, lake: Any, cluster: str, offset: int | None = None,
                       time: int | None = None) -> list[dict[str, Any]]:
    return _rows(risky_grants(spark, lake, cluster, offset, time))


# Columns a person reads first, per audit (the rest stays in JSON / CSV / Avro output).
SUMMARY_COLUMNS = {
    "who_can": ["who", "from_host", "decision", "certain", "reason", "via"],
    "what_can": ["resource_type", "pattern_type", "resource_name", "operation", "from_host", "decision", "certain",
                 "via"],
    "acl_changes": ["change", "certain", "acl_id", "resource_type", "pattern_type", "resource_name", "principal",
                    "host", "operation", "permission_type"],
    "access_changes": ["change", "certain", "who", "host", "operation", "resource_type", "resource_name",
                       "before_decision", "after_decision", "after_via"],
    "timeline": ["who", "host", "operation", "resource_type", "resource_name", "from_offset", "to_offset",
                 "decision", "certain", "reason"],
    "risky_grants": ["risk", "certain", "acl_id", "resource_type", "pattern_type", "resource_name", "principal",
                     "host", "operation", "valid_from_offset", "valid_to_offset"],
}


def render_audit(rows: Iterable[dict[str, Any]], audit: str, fmt: str = "table") -> list[str]:
    """`table` (the summary columns, for people), `jsonl`, or `csv` (every column) as lines of text; for Avro use
    `replay.kafka.outputs.write_avro(rows, path, audit)`."""
    import io

    from replay.kafka import outputs

    buf = io.StringIO()
    rows = list(rows)
    if fmt == "table":
        outputs.write_rows(rows, buf, "table", audit, SUMMARY_COLUMNS.get(audit))
    else:
        outputs.write_rows(rows, buf, fmt, audit)
    return buf.getvalue().splitlines()


__all__ = [
    "ALLOWED", "DENIED", "EVERYONE", "RISKS", "SUMMARY_COLUMNS", "SUPPORTED_OPERATIONS", "UNKNOWN", "access_changes",
    "acl_changes", "as_view", "audit_changes", "audit_risky_grants", "audit_timeline", "audit_what_can",
    "audit_who_can", "live_topics", "register_audit_functions", "render_audit", "resolve_offset", "risky_grants",
    "timeline", "what_can", "who_can",
]
