"""Point-in-time audits over the lake, built on the batch authorizer's decision query
(`authorize_decide.decide_sql`): every decision in an audit is a StandardAuthorizer decision with its certainty,
never a second rule set.

Each audit is one Spark SQL query text (the `*_sql` builders below) run two ways: from Python over the lake's
DataFrames, the question's values bound to parameter markers (`rules.run_sql(spark, text, values, hist=...)`), and
as a SQL table function registered by `register_audit_functions`, which embeds the very same text over the lake's
tables with its own parameters. So the Python and SQL answers are the same rows by construction (and the tests check
it).

| audit | Python (DataFrame) | plain function for the CLI (rows) | SQL table function |
|---|---|---|---|
| (a) who could do an operation on a resource at a time | `who_can` | `audit_who_can` | `acl_who_can` |
| (b) what a principal could do at a time | `what_can` | `audit_what_can` | `acl_what_can` |
| (c) what changed between two times: ACLs, and access gained/lost | `acl_changes`, `access_changes` | `audit_changes` | `acl_diff`, `acl_access_changes` |
| (d) timeline of one principal's or one resource's access | `timeline` | `audit_timeline` | `acl_timeline` |
| (e) risky grants over time | `risky_grants` | `audit_risky_grants` | `acl_risky_grants` |

`as_view(df, name)` (or the `view=` argument of every audit) also publishes a result as a temporary view.

Conventions shared by every audit:

* the principal `User:*` stands for **everyone**: any principal that has no ACL of its own (column `who`);
  host `*` stands for any host that no ACL names;
* the hosts looked at are the client addresses ACLs name, but only those a client can present: Kafka compares an
  ACL's host with Java's rendering of the client address (`0:0:0:0:0:0:0:1`, never `::1`; no DNS), so an ACL host
  that is not its own rendering (`::1`, `localhost`, `010.0.0.1`) never matches anybody. Those ACLs are not
  hidden: they are listed after the answer as rows with decision `NEVER_MATCHES` and reason
  `acl_host_never_matches` (who-can: the ones for the operation asked; what-can: all of the principal's);
  change and timeline audits simply do not evaluate such hosts;
* the resources looked at are the ACLs' own patterns: a PREFIXED pattern `pay` is evaluated for a resource named
  exactly `pay`, the LITERAL `*` for a resource named `*` (what holds for every name of the type unless a more
  specific ACL says otherwise); the rows say which pattern (`pattern_type`, `resource_name`);
* `certain` says whether the answer holds in every state the history allows (gaps, uncertain bounds, coverage),
  `coverage` what the history knows at that offset (`complete`, `incomplete`, `not_covered`);
* (e)'s `default_exposed`: topics that exist at the time (TopicRecord names in `metadata_records`: the latest
  snapshot at or before the time plus the log after it, minus RemoveTopicRecords; records inside metadata
  transactions are taken at their own offsets) that no ACL covers (no LITERAL, PREFIXED or `*` ACL of any
  principal), so `allow.everyone.if.no.acl.found=true` lets anybody use them. Listed when that setting is true or
  not given (None / SQL NULL: "what it would expose"), not when it is false. `certain` is false when an uncertain
  ACL might cover the topic or the history is incomplete there.
"""

from __future__ import annotations

import io
from collections.abc import Callable, Collection, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from replay.kafka import outputs
from replay.kafka.acl import AclOperation, ResourceType
from replay.kafka.authorizer import check_principal
from replay.kafka.model import QuestionError, check_offset
from replay.spark.authorize_decide import (
    _KEY,
    ALLOWED,
    ANY_HOST,
    DENIED,
    R_DENY,
    UNKNOWN,
    WILDCARD_PRINCIPAL,
    AuthorizerSettings,
    LakeTables,
    SqlSettings,
    acl_text_sql,
    candidate_counts_sql,
    decide_sql,
    history_sql,
    op_match_sql,
    probes_sql,
    sql_literal,
)
from replay.spark.authorize_requests import presentable_host_sql
from replay.spark.queries import (
    UNKNOWN_CLUSTER_CHECK,
    before_history,
    guarded_sql,
    last_offset,
    negative_offset_check,
    offset_at_time,
    require_cluster,
    unknown_cluster,
)
from replay.spark.rules import COV_COMPLETE, coverage_at_sql, live_sql, markers, run_sql, times_of_offsets_sql
from replay.spark.sqlddl import SqlFunction, create_temporary
from replay.spark.tables import ACL_FIELDS, Lake, covered_clusters_sql

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
NEVER_MATCHES = "NEVER_MATCHES"
R_HOST_NEVER_MATCHES = "acl_host_never_matches"


# ---- helpers -------------------------------------------------------------------------------------------------

def resolve_offset(lake: Lake, cluster: str, offset: int | None = None, time: int | None = None) -> int:
    """The as-of offset: `offset`, else the last offset whose time is <= `time`, else the end of known history.

    A wrong question raises (as the SQL functions and `queries.state_at` do), because an empty answer would read as
    "nobody could": `QuestionError` for a negative offset or a time before the cluster's known history,
    `UnknownClusterError` for a cluster the lake has not replayed."""
    check_offset(offset)
    if offset is not None:
        require_cluster(lake, cluster)
        return offset
    if time is not None:
        at = offset_at_time(lake, cluster, time)
        if at is None:
            raise before_history(lake, cluster, time)
        return at
    last = last_offset(lake, cluster)
    if last is None:
        raise unknown_cluster(lake, cluster)
    return last


def _check_range(start: int | None, end: int | None) -> None:
    """A change window's bounds: `end` an offset, `start` one too or -1 (before the first record)."""
    if start is not None and start < -1:
        raise QuestionError(f"offset {start} is negative: give -1 for before the first record, or an offset >= 0")
    check_offset(end)


def _name_of(enum: Any, value: str) -> str:
    """The enum name an audit asks about. A value Kafka would not parse is a wrong question, refused with
    `QuestionError` (as `authorizer.check_question` refuses it for `authorize_one`) and the enum's own message."""
    try:
        return str(enum.parse(value).name)
    except ValueError as e:
        raise QuestionError(str(e)) from None


def as_view(df: DataFrame, name: str) -> DataFrame:
    """Publish an audit result as a temporary view (SQL: `SELECT * FROM name`)."""
    df.createOrReplaceTempView(name)
    return df


def _finish(df: DataFrame, view: str | None) -> DataFrame:
    return as_view(df, view) if view else df


@dataclass(frozen=True)
class _Sources:
    """Where an audit query reads: relation names (`{hist}` placeholders for DataFrames, or the lake's tables)."""

    hist: str
    cov: str
    times: str
    records: str | None


def _records(lake: Lake) -> DataFrame | None:
    try:
        records: DataFrame = lake.read("metadata_records")
        return records
    except Exception:  # no such table in this lake
        return None


def _run(spark: SparkSession, lake: Lake, build: Callable[[_Sources, dict[str, str]], str], **values: Any
         ) -> DataFrame:
    """Run an audit query from Python over the lake's DataFrames: `build` gets the relations and, for each of the
    question's `values`, the parameter marker that stands for it in the text (`rules.markers`)."""
    tables = LakeTables.of(lake)
    frames = {"hist": tables.history, "cov": tables.coverage, "times": tables.offset_times}
    records = None if isinstance(lake, LakeTables) else _records(lake)
    if records is not None:
        frames["records"] = records
    src = _Sources("{hist}", "{cov}", "{times}", "{records}" if records is not None else None)
    return run_sql(spark, build(src, markers(values)), values, **frames)


def _enum_sql(expr: str, enum: Any, what: str) -> str:
    """An enum name or code in any spelling (as `AclOperation.parse` reads it) -> the enum name; an error for
    anything else (NULL stays NULL)."""
    pairs = ", ".join(f"'{k}', '{m.name}'" for m in enum for k in (m.name.replace("_", ""), str(int(m))))
    found = f"element_at(map({pairs}), upper(regexp_replace(trim({expr}), '[-_ ]', '')))"
    return (f"CASE WHEN {expr} IS NULL THEN CAST(NULL AS STRING) WHEN {found} IS NULL THEN "
            f"CAST(raise_error(concat('unknown {what} ', {expr})) AS STRING) ELSE {found} END")


def _ops_sql(rtype: str, op: str | None = None) -> str:
    """Operations an audit asks about: every supported one of the type, or those an ACL operation decides (ALL ->
    all supported; an ALLOW of READ/WRITE/DELETE/ALTER also decides DESCRIBE, ALTER_CONFIGS DESCRIBE_CONFIGS)."""
    pairs = ", ".join(f"'{t}', array({', '.join(repr(o) for o in ops)})" for t, ops in SUPPORTED_OPERATIONS.items())
    supported = f"coalesce(element_at(map({pairs}), {rtype}), CAST(array() AS ARRAY<STRING>))"
    if op is None:
        return supported
    return (f"CASE WHEN {op} = 'ALL' THEN {supported} WHEN {op} IN ('READ', 'WRITE', 'DELETE', 'ALTER') "
            f"THEN array({op}, 'DESCRIBE') WHEN {op} = 'ALTER_CONFIGS' THEN array({op}, 'DESCRIBE_CONFIGS') "
            f"ELSE array({op}) END")


def _who_sql(p: str) -> str:
    return f"CASE WHEN {p} = '{WILDCARD_PRINCIPAL}' THEN '{EVERYONE}' ELSE {p} END"


def _host_text_sql(h: str) -> str:
    return f"CASE WHEN {h} = '{ANY_HOST}' THEN '{ANY_HOST_TEXT}' ELSE {h} END"


def _described_sql(results: str, ids_col: str, out_col: str, texts_col: str = "acl_texts") -> str:
    """`results` without `texts_col` plus `out_col`: the ACLs behind `ids_col` spelled out, in the ids' order, from
    the decision's own `acl_texts` (so the decisions are read once, not joined back to themselves)."""
    return (f"SELECT * EXCEPT ({texts_col}), coalesce(transform({ids_col}, i -> coalesce(element_at({texts_col}, i), "
            f"i)), CAST(array() AS ARRAY<STRING>)) AS {out_col} FROM {results}")


def _decorate_sql(decided: str) -> str:
    return (f"SELECT cluster_id, _at AS as_of_offset, _p AS principal, {_who_sql('_p')} AS who, _h AS host, "
            f"{_host_text_sql('_h')} AS from_host, _op AS operation, _rtype AS resource_type, _name AS resource_name, "
            f"decision, certain, reason, deciding_acl_ids, uncertain_acl_ids, coverage, acl_texts FROM {decided}")


def _only_distinct_hosts_sql(rel: str, group: Sequence[str]) -> str:
    """Keep a host-specific row only where its answer differs from the any-host row of the same group."""
    sig = "concat_ws('|', decision, reason)"
    return (f"SELECT * EXCEPT (_sig, _any) FROM (SELECT *, {sig} AS _sig, first(CASE WHEN host = '{ANY_HOST}' "
            f"THEN {sig} END, true) OVER (PARTITION BY {', '.join(group)}) AS _any FROM {rel}) "
            f"WHERE host = '{ANY_HOST}' OR _any IS NULL OR _sig != _any")


def _keys_from(rel: str) -> str:
    return f"SELECT DISTINCT {', '.join(_KEY)} FROM {rel} WHERE contains(_p, ':')"


def _decided_sql(keys: str, src: _Sources, settings: SqlSettings) -> str:
    return f"({decide_sql(keys, src.hist, src.cov, settings)})"


# ---- (a) who could ---------------------------------------------------------------------------------------------

def who_can_sql(src: _Sources, cluster: str, operation: str, resource_type: str, resource_name: str, at: str,
                settings: SqlSettings) -> str:
    """Who could perform `operation` on the resource at offset `at` (all arguments SQL expressions).

    Parameters are used inline, never through a one-row relation joined in twice (Spark's ReorderJoin fails an
    assertion when one plan appears twice in a flattened inner join)."""
    c = f"CAST({cluster} AS STRING)"
    at_ = f"CAST({at} AS BIGINT)"
    op = _enum_sql(operation, AclOperation, "operation")
    certain, maybe = live_sql("p._at", "h")
    via_main = _described_sql("_deco", "deciding_acl_ids", "via")
    out = ("cluster_id, as_of_offset, principal, who, host, from_host, operation, resource_type, resource_name, "
           "decision, certain, reason, deciding_acl_ids, uncertain_acl_ids, coverage, via")
    return f"""WITH
_r AS (SELECT {c} AS cluster_id, {_enum_sql(resource_type, ResourceType, 'resource type')} AS _rtype,
         CAST({resource_name} AS STRING) AS _name, {at_} AS _at),
_hh AS (SELECT * FROM ({history_sql(src.hist)}) WHERE cluster_id = {c}),
_cands AS (SELECT h.*, p._at, p._name AS _asked, {certain} AS _cl
           FROM ({probes_sql("_r", "_hh")}) p
           JOIN _hh h ON p.cluster_id = h.cluster_id AND p._rtype = h._rtype AND p._pk = h._pk AND p._pn = h._pn
           WHERE {maybe}),
_pr AS (SELECT principal AS _p FROM _cands UNION SELECT '{WILDCARD_PRINCIPAL}' UNION
        SELECT explode({settings.super_users}) AS _p),
_hosts AS (SELECT host AS _h FROM _cands WHERE {presentable_host_sql('host')} UNION SELECT '{ANY_HOST}'),
_k0 AS (SELECT r.cluster_id, p._p, h._h, {op} AS _op, r._rtype, r._name, r._at
        FROM _r r CROSS JOIN _pr p CROSS JOIN _hosts h),
_deco AS ({_decorate_sql(_decided_sql(f"({_keys_from('_k0')})", src, settings))}),
_main AS (SELECT {out} FROM ({_only_distinct_hosts_sql(f"({via_main})", ["principal"])})
          WHERE decision != '{DENIED}' OR reason = '{R_DENY}'),
_never AS (SELECT c.cluster_id, c._at AS as_of_offset, c.principal, {_who_sql('c.principal')} AS who, c.host,
             c.host AS from_host, {op} AS operation, c.resource_type, c._asked AS resource_name,
             '{NEVER_MATCHES}' AS decision, c._cl AS certain, '{R_HOST_NEVER_MATCHES}' AS reason,
             array(c.acl_id) AS deciding_acl_ids, CAST(array() AS ARRAY<STRING>) AS uncertain_acl_ids, v.coverage,
             array({acl_text_sql('c.')}) AS via
           FROM _cands c LEFT JOIN ({coverage_at_sql("_r", src.cov)}) v ON c.cluster_id = v.cluster_id AND c._at = v._at
           WHERE NOT {presentable_host_sql('c.host')} AND {op_match_sql('c.operation', 'c._allow', op)})
SELECT * FROM (SELECT * FROM _main UNION ALL SELECT * FROM _never)
ORDER BY decision = '{NEVER_MATCHES}', principal != '{WILDCARD_PRINCIPAL}', principal, host"""


def who_can(spark: SparkSession, lake: Lake, cluster: str, operation: str, resource_type: str, resource_name: str,
            offset: int | None = None, time: int | None = None, super_users: str | Sequence[str] | None = "",
            allow_everyone: bool = False, view: str | None = None) -> DataFrame:
    """Every principal (and `everyone`) that could perform `operation` on the resource at that moment, per host,
    through which ACLs; explicit DENYs are listed too (decision DENIED, reason matching_deny), then the ACLs for that
    operation whose host no client can present (decision NEVER_MATCHES)."""
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    op, rtype = _name_of(AclOperation, operation), _name_of(ResourceType, resource_type)
    at = resolve_offset(lake, cluster, offset, time)
    df = _run(spark, lake, lambda src, p: who_can_sql(src, p["cluster"], p["operation"], p["resource_type"],
                                                      p["resource_name"], p["at"], SqlSettings.of_markers()),
              cluster=cluster, operation=op, resource_type=rtype, resource_name=resource_name, at=at,
              **settings.params())
    return _finish(df, view)


# ---- (b) what could ------------------------------------------------------------------------------------------

def what_can_sql(src: _Sources, cluster: str, principal: str, at: str, settings: SqlSettings) -> str:
    """What `principal` could do at offset `at` (SQL expressions, used inline)."""
    c = f"CAST({cluster} AS STRING)"
    who = f"CAST({principal} AS STRING)"
    at_ = f"CAST({at} AS BIGINT)"
    certain, maybe = live_sql(at_, "h")
    out = ("d.cluster_id, d.as_of_offset, d.principal, d.who, d.host, d.from_host, d.operation, d.resource_type, "
           "d.resource_name, d.decision, d.certain, d.reason, d.deciding_acl_ids, d.uncertain_acl_ids, d.coverage, "
           "d.via")
    group = ["resource_type", "resource_name", "pattern_type", "operation"]
    decided = _decided_sql(f"({_keys_from('_k0')})", src, settings)
    return f"""WITH
_live AS (SELECT h.*, {at_} AS _at, {certain} AS _cl FROM {src.hist} h
          WHERE h.cluster_id = {c} AND h.principal IN ({who}, '{WILDCARD_PRINCIPAL}') AND {maybe}),
_pats AS (SELECT DISTINCT cluster_id, resource_type AS _rtype, resource_name AS _name, pattern_type AS _pattern
          FROM _live),
_hosts AS (SELECT DISTINCT host AS _h FROM _live WHERE {presentable_host_sql('host')} UNION SELECT '{ANY_HOST}'),
_k0 AS (SELECT p.cluster_id, {who} AS _p, h._h, o AS _op, p._rtype, p._name, {at_} AS _at
        FROM _pats p CROSS JOIN _hosts h LATERAL VIEW explode({_ops_sql('p._rtype')}) e AS o),
_dec AS {decided},
_deco AS ({_described_sql(f"({_decorate_sql('_dec')})", "deciding_acl_ids", "via")}),
_j AS (SELECT {out}, coalesce(p._pattern, 'LITERAL') AS pattern_type FROM _deco d LEFT JOIN _pats p
       ON d.cluster_id = p.cluster_id AND d.resource_type = p._rtype AND d.resource_name = p._name),
_main AS (SELECT * FROM ({_only_distinct_hosts_sql("_j", group)})
          WHERE decision != '{DENIED}' OR reason = '{R_DENY}'),
_never AS (SELECT l.cluster_id, l._at AS as_of_offset, l.principal, {_who_sql('l.principal')} AS who, l.host,
             l.host AS from_host, l.operation, l.resource_type, l.resource_name, '{NEVER_MATCHES}' AS decision,
             l._cl AS certain, '{R_HOST_NEVER_MATCHES}' AS reason, array(l.acl_id) AS deciding_acl_ids,
             CAST(array() AS ARRAY<STRING>) AS uncertain_acl_ids, v.coverage, array({acl_text_sql('l.')}) AS via,
             l.pattern_type
           FROM _live l LEFT JOIN ({coverage_at_sql(f"(SELECT {c} AS cluster_id, {at_} AS _at)", src.cov)}) v
             ON l.cluster_id = v.cluster_id AND l._at = v._at
           WHERE NOT {presentable_host_sql('l.host')})
SELECT * FROM (SELECT * FROM _main UNION ALL SELECT * FROM _never)
ORDER BY decision = '{NEVER_MATCHES}', resource_type, resource_name, pattern_type, operation, host"""


def what_can(spark: SparkSession, lake: Lake, cluster: str, principal: str, offset: int | None = None,
             time: int | None = None, super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
             view: str | None = None) -> DataFrame:
    """Resource patterns x operations the principal could use at that moment (through its own ACLs or `User:*`
    ACLs), per host, through which ACLs; explicit DENYs listed too; then its ACLs whose host no client can present
    (decision NEVER_MATCHES)."""
    check_principal(principal)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    at = resolve_offset(lake, cluster, offset, time)
    df = _run(spark, lake, lambda src, p: what_can_sql(src, p["cluster"], p["principal"], p["at"], SqlSettings.of_markers()),
              cluster=cluster, principal=principal, at=at, **settings.params())
    return _finish(df, view)


# ---- (c) what changed ----------------------------------------------------------------------------------------

def _status_sql(at: str) -> str:
    certain, maybe = live_sql(at, "h")
    return f"CASE WHEN {at} IS NULL THEN 'unknown' WHEN {certain} THEN 'live' WHEN {maybe} THEN 'maybe' ELSE 'gone' END"


def acl_changes_sql(src: _Sources, cluster: str, start: str, end: str) -> str:
    """ACL lifetimes whose liveness differs between offsets `start` and `end` (SQL expressions)."""
    change = ("CASE WHEN before = 'gone' AND after = 'live' THEN 'added' "
              "WHEN before = 'live' AND after = 'gone' THEN 'removed' "
              "WHEN after = 'live' THEN 'maybe_added' WHEN before = 'live' THEN 'maybe_removed' "
              "WHEN before = 'gone' THEN 'maybe_added' WHEN after = 'gone' THEN 'maybe_removed' "
              "ELSE 'maybe_changed' END")
    fields = ", ".join(ACL_FIELDS)
    s0, s1 = f"CAST({start} AS BIGINT)", f"CAST({end} AS BIGINT)"
    return f"""SELECT cluster_id, acl_id, {fields}, valid_from_offset, valid_from_min_offset, valid_to_offset,
  valid_to_min_offset, before, after, {change} AS change,
  before IN ('live', 'gone') AND after IN ('live', 'gone') AS certain, {s0} AS from_offset, {s1} AS to_offset
FROM (SELECT h.*, {_status_sql(s0)} AS before, {_status_sql(s1)} AS after FROM {src.hist} h
      WHERE h.cluster_id = CAST({cluster} AS STRING))
WHERE before != after"""


def acl_changes(spark: SparkSession, lake: Lake, cluster: str, start: int | None, end: int | None,
                view: str | None = None) -> DataFrame:
    """ACLs whose liveness differs between offsets `start` and `end`: `added`, `removed`, or with an uncertain side
    `maybe_added` / `maybe_removed` (certain = false)."""
    _check_range(start, end)
    require_cluster(lake, cluster)
    return _finish(_acl_changes_frame(spark, lake, cluster, start, end), view)


def _acl_changes_frame(spark: SparkSession, lake: Lake, cluster: str, start: int | None, end: int | None
                       ) -> DataFrame:
    order = ", ".join(ACL_FIELDS)

    def build(src: _Sources, p: dict[str, str]) -> str:
        text = acl_changes_sql(src, p["cluster"], p["start"], p["end"])
        return f"SELECT * FROM ({text}) ORDER BY change, {order}"

    return _run(spark, lake, build, cluster=cluster, start=start, end=end)


def access_changes_sql(src: _Sources, cluster: str, start: str, end: str, settings: SqlSettings) -> str:
    """(principal, host, operation, resource pattern) whose decision differs between `start` and `end`."""
    key = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name"]
    s0, s1 = f"CAST({start} AS BIGINT)", f"CAST({end} AS BIGINT)"
    on = " AND ".join(f"b.{c} = a.{c}" for c in key)
    cols = ["decision", "certain", "reason", "deciding_acl_ids"]

    def side(n: int, prefix: str) -> str:
        return (f"SELECT {', '.join(key)}, {', '.join(f'{c} AS {prefix}{c}' for c in [*cols, 'acl_texts'])} "
                f"FROM _both WHERE _side = {n}")

    change = (f"CASE WHEN after_decision = '{ALLOWED}' AND before_decision = '{DENIED}' THEN 'gained' "
              f"WHEN before_decision = '{ALLOWED}' AND after_decision = '{DENIED}' THEN 'lost' ELSE 'uncertain' END")
    out = (f"SELECT b.cluster_id, b._p AS principal, {_who_sql('b._p')} AS who, b._h AS host, b._op AS operation, "
           f"b._rtype AS resource_type, b._name AS resource_name, {change} AS change, "
           f"b.before_certain AND a.after_certain AS certain, {s0} AS from_offset, {s1} AS to_offset, "
           + ", ".join(f"b.before_{c}" for c in cols) + ", " + ", ".join(f"a.after_{c}" for c in cols)
           + f", a.after_acl_texts FROM _before b JOIN _after a ON {on} WHERE b.before_decision != a.after_decision")
    return f"""WITH
_changed AS ({acl_changes_sql(src, cluster, start, end)}),
_combos AS (SELECT DISTINCT cluster_id, _p, _h, _op, _rtype, _name FROM (
  SELECT c.cluster_id, p AS _p, hh AS _h, o AS _op, c.resource_type AS _rtype, c.resource_name AS _name FROM _changed c
  LATERAL VIEW explode(array_distinct(array(c.principal, '{WILDCARD_PRINCIPAL}'))) e1 AS p
  LATERAL VIEW explode(array_distinct(array(c.host, '{ANY_HOST}'))) e2 AS hh
  LATERAL VIEW explode({_ops_sql('c.resource_type', 'c.operation')}) e3 AS o) WHERE {presentable_host_sql('_h')}),
_keys AS (SELECT c.*, s._at, s._side FROM _combos c CROSS JOIN
          (SELECT {s0} AS _at, 0 AS _side UNION ALL SELECT {s1}, 1) s WHERE contains(c._p, ':')),
_dec AS {_decided_sql(f"(SELECT DISTINCT {', '.join(_KEY)} FROM _keys)", src, settings)},
_both AS (SELECT d.*, k._side FROM _dec d JOIN _keys k ON {' AND '.join(f'd.{c} = k.{c}' for c in _KEY)}),
_before AS ({side(0, 'before_')}),
_after AS ({side(1, 'after_')}),
_out AS ({out})
SELECT * FROM ({_described_sql("_out", "after_deciding_acl_ids", "after_via", "after_acl_texts")})
ORDER BY change, resource_type, resource_name, principal, operation"""


def access_changes(spark: SparkSession, lake: Lake, cluster: str, start: int | None, end: int | None,
                   super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
                   view: str | None = None) -> DataFrame:
    """(principal, host, operation, resource pattern) whose decision differs between `start` and `end`, for the
    patterns and principals of the ACLs that changed (plus `everyone` on those patterns): `gained` (now ALLOWED),
    `lost` (no longer ALLOWED), or `uncertain` when either side is UNKNOWN."""
    _check_range(start, end)
    require_cluster(lake, cluster)
    return _finish(_access_changes_frame(spark, lake, cluster, start, end, super_users, allow_everyone), view)


def _access_changes_frame(spark: SparkSession, lake: Lake, cluster: str, start: int | None, end: int | None,
                          super_users: str | Sequence[str] | None, allow_everyone: bool) -> DataFrame:
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    return _run(spark, lake, lambda src, p: access_changes_sql(src, p["cluster"], p["start"], p["end"], SqlSettings.of_markers()),
                cluster=cluster, start=start, end=end, **settings.params())


# ---- (d) timeline ----------------------------------------------------------------------------------------------

def timeline_sql(src: _Sources, cluster: str, principal: str, resource_type: str, resource_name: str,
                 operation: str, settings: SqlSettings) -> str:
    """Decision intervals for a principal (`principal` not NULL) or a resource (type and name); SQL expressions.

    Every interval starts and ends at one of `_points`, so their times are looked up once per point (the intervals
    are not read twice)."""
    combo = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name"]
    w = f"PARTITION BY {', '.join(combo)} ORDER BY _at"
    sig = ("concat_ws('|', decision, CAST(certain AS STRING), reason, array_join(deciding_acl_ids, ','), "
           "coverage)")
    bad = f"(({principal}) IS NULL) = (({resource_name}) IS NULL OR ({resource_type}) IS NULL)"
    c = (f"CASE WHEN {bad} THEN CAST(raise_error('give either a principal, or a resource type and name') AS STRING) "
         f"ELSE CAST({cluster} AS STRING) END")
    who = f"CAST({principal} AS STRING)"
    op1 = _enum_sql(operation, AclOperation, "operation")
    ops = f"CASE WHEN {op1} IS NULL THEN {_ops_sql('h._rtype', 'h.operation')} ELSE {_ops_sql('h._rtype')} END"
    return f"""WITH
_hh AS (SELECT * FROM ({history_sql(src.hist)}) WHERE cluster_id = {c}),
_res AS (SELECT {c} AS cluster_id, {_enum_sql(resource_type, ResourceType, 'resource type')} AS _rtype,
           CAST({resource_name} AS STRING) AS _name, CAST(NULL AS BIGINT) AS _at WHERE {who} IS NULL),
_c0 AS (
  SELECT h.cluster_id, {who} AS _p, h.host, o AS _op, h._rtype, h.resource_name AS _name FROM _hh h
  LATERAL VIEW explode({ops}) e AS o
  WHERE {who} IS NOT NULL AND h.principal IN ({who}, '{WILDCARD_PRINCIPAL}')
  UNION ALL
  SELECT h.cluster_id, pp AS _p, h.host, o AS _op, h._rtype, p._name FROM ({probes_sql("_res", "_hh")}) p
  JOIN _hh h ON p.cluster_id = h.cluster_id AND p._rtype = h._rtype AND p._pk = h._pk AND p._pn = h._pn
  LATERAL VIEW explode(array_distinct(array(h.principal, '{WILDCARD_PRINCIPAL}'))) e1 AS pp
  LATERAL VIEW explode({ops}) e2 AS o),
_combos AS (SELECT DISTINCT c.cluster_id, c._p, hh AS _h, coalesce({op1}, c._op) AS _op, c._rtype, c._name
            FROM _c0 c LATERAL VIEW explode(array_distinct(array(c.host, '{ANY_HOST}'))) e AS hh
            WHERE {presentable_host_sql('hh')}),
_names AS (SELECT DISTINCT cluster_id, _rtype, _name, CAST(NULL AS BIGINT) AS _at FROM _combos),
_covering AS (SELECT h.* FROM ({probes_sql("_names", "_hh")}) p JOIN _hh h ON p.cluster_id = h.cluster_id
              AND p._rtype = h._rtype AND p._pk = h._pk AND p._pn = h._pn),
_points AS (SELECT DISTINCT _at FROM (
  SELECT explode(array(valid_from_offset, valid_from_min_offset, valid_to_offset, valid_to_min_offset)) AS _at
  FROM _covering
  UNION ALL SELECT explode(array(v.start_offset, v.end_offset + 1)) AS _at FROM {src.cov} v WHERE v.cluster_id = {c})
  WHERE _at IS NOT NULL),
_keys AS (SELECT c.cluster_id, c._p, c._h, c._op, c._rtype, c._name, p._at FROM _combos c CROSS JOIN _points p
          WHERE contains(c._p, ':')),
_dec AS {_decided_sql("_keys", src, settings)},
_marked AS (SELECT * FROM (SELECT *, coalesce(lag(_sig) OVER ({w}) != _sig, true) AS _new
                           FROM (SELECT *, {sig} AS _sig FROM _dec)) WHERE _new),
_iv AS (SELECT cluster_id, _p AS principal, {_who_sql('_p')} AS who, _h AS host, _op AS operation,
          _rtype AS resource_type, _name AS resource_name, _at AS from_offset, lead(_at) OVER ({w}) AS to_offset,
          decision, certain, reason, deciding_acl_ids, uncertain_acl_ids, coverage, acl_texts FROM _marked),
_pt AS ({times_of_offsets_sql("_points", "_at", "_t", src.times, c)}),
_t2 AS (SELECT i.*, f._t AS from_time, t._t AS to_time FROM _iv i LEFT JOIN _pt f ON i.from_offset = f._at
        LEFT JOIN _pt t ON i.to_offset = t._at)
SELECT * FROM ({_described_sql("_t2", "deciding_acl_ids", "via")})
ORDER BY resource_type, resource_name, principal, operation, host, from_offset"""


def timeline(spark: SparkSession, lake: Lake, cluster: str, principal: str | None = None,
             resource_type: str | None = None, resource_name: str | None = None, operation: str | None = None,
             super_users: str | Sequence[str] | None = "", allow_everyone: bool = False,
             view: str | None = None) -> DataFrame:
    """Intervals `[from_offset, to_offset)` over which a decision stayed the same, with times and certainty.

    For a principal: every resource pattern and operation its ACLs (and `User:*` ACLs) ever touched; for a resource:
    every principal (and `everyone`) that any covering ACL ever named. `operation` narrows it to one operation.
    The state only changes at lifetime bounds and coverage edges, so decisions are taken at those offsets only.
    """
    if (principal is None) == (resource_name is None or resource_type is None):
        raise QuestionError("give either a principal, or a resource type and name")
    if principal is not None:
        check_principal(principal)
    op = _name_of(AclOperation, operation) if operation else None
    rtype = _name_of(ResourceType, resource_type) if resource_type else None
    require_cluster(lake, cluster)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    df = _run(spark, lake, lambda src, p: timeline_sql(src, p["cluster"], p["principal"], p["resource_type"],
                                                       p["resource_name"], p["operation"], SqlSettings.of_markers()),
              cluster=cluster, principal=principal, resource_type=rtype, resource_name=resource_name, operation=op,
              **settings.params())
    return _finish(df, view)


# ---- (e) risky grants ------------------------------------------------------------------------------------------

RISKS = {
    "everyone_allow": "ALLOW for User:* (every principal, of any type)",
    "all_operations": "ALLOW with operation ALL",
    "wildcard_resource": "ALLOW on the LITERAL resource * (every resource of the type)",
    "prefix_everything": "ALLOW on the PREFIXED resource '' (every resource of the type)",
    "default_exposed": "a topic no ACL covers: allow.everyone.if.no.acl.found=true lets anybody use it",
}

_RISK_KINDS = ("filter(array("
               "CASE WHEN h.permission_type = 'ALLOW' AND h.principal = 'User:*' THEN 'everyone_allow' END, "
               "CASE WHEN h.permission_type = 'ALLOW' AND h.operation = 'ALL' THEN 'all_operations' END, "
               "CASE WHEN h.permission_type = 'ALLOW' AND h.pattern_type = 'LITERAL' AND h.resource_name = '*' "
               "THEN 'wildcard_resource' END, "
               "CASE WHEN h.permission_type = 'ALLOW' AND h.pattern_type = 'PREFIXED' AND h.resource_name = '' "
               "THEN 'prefix_everything' END), x -> x IS NOT NULL)")


def live_topics_sql(records: str, cluster: str, at: str) -> str:
    """Topic names existing at offset `at` from `metadata_records` (module docstring); column `topic`."""
    name = ("coalesce(get_json_object(r.payload_json, '$.data.name'), get_json_object(r.payload_json, '$.name'))")
    tid = ("coalesce(get_json_object(r.payload_json, '$.data.topicId'), "
           "get_json_object(r.payload_json, '$.topicId'))")
    at_ = f"CAST({at} AS BIGINT)"
    return f"""WITH
_rec AS (SELECT r.* FROM {records} r WHERE r.cluster_id = CAST({cluster} AS STRING)),
_base AS (SELECT max(snapshot_end_offset) AS e FROM _rec WHERE snapshot_end_offset IS NOT NULL
          AND snapshot_end_offset - 1 <= {at_}),
_log AS (SELECT r.* FROM _rec r CROSS JOIN _base b WHERE r.snapshot_end_offset IS NULL AND r.`offset` <= {at_}
         AND (b.e IS NULL OR r.`offset` >= b.e)),
_created AS (SELECT {name} AS topic, {tid} AS topic_id, b.e - 1 AS o FROM _rec r CROSS JOIN _base b
             WHERE r.snapshot_end_offset = b.e AND r.record_type = 'TOPIC_RECORD'
             UNION ALL SELECT {name}, {tid}, r.`offset` FROM _log r WHERE r.record_type = 'TOPIC_RECORD'),
_removed AS (SELECT {tid} AS topic_id, r.`offset` AS ro FROM _log r WHERE r.record_type = 'REMOVE_TOPIC_RECORD')
SELECT DISTINCT c.topic FROM _created c LEFT JOIN _removed d ON c.topic_id = d.topic_id
WHERE (d.ro IS NULL OR d.ro < c.o) AND c.topic IS NOT NULL"""


def risky_grants_sql(src: _Sources, cluster: str, at: str, allow_everyone: str) -> str:
    """Risky ACL lifetimes (all of history when `at` is NULL, else those possibly live then) and, with `at` and
    `allow_everyone` not false, the `default_exposed` topics (SQL expressions)."""
    c, at_, ae = f"CAST({cluster} AS STRING)", f"CAST({at} AS BIGINT)", f"CAST({allow_everyone} AS BOOLEAN)"
    certain, maybe = live_sql(at_, "h")
    why = f"element_at(map({', '.join(f'{sql_literal(k)}, {sql_literal(v)}' for k, v in RISKS.items())}), risk)"
    fields = ", ".join(ACL_FIELDS)
    acls = f"""SELECT cluster_id, risk, {why} AS why, acl_id, {fields}, valid_from_offset, valid_from_min_offset,
  valid_from_time, valid_to_offset, valid_to_min_offset, valid_to_time, certain, as_of_offset,
  CAST(NULL AS STRING) AS coverage
FROM (SELECT h.*, r.risk, CASE WHEN {at_} IS NULL THEN h.valid_from_exact AND coalesce(h.valid_to_exact, true)
             ELSE {certain} END AS certain, {at_} AS as_of_offset
      FROM {src.hist} h LATERAL VIEW explode({_RISK_KINDS}) r AS risk
      WHERE h.cluster_id = {c} AND ({at_} IS NULL OR {maybe}))"""
    parts = [f"_acls AS ({acls})"]
    union = "SELECT * FROM _acls"
    if src.records is not None:
        none_long = "CAST(NULL AS BIGINT)"
        parts += [
            f"_res AS (SELECT {c} AS cluster_id, 'TOPIC' AS _rtype, t.topic AS _name, {at_} AS _at FROM "
            f"({live_topics_sql(src.records, cluster, at)}) t WHERE {at_} IS NOT NULL AND coalesce({ae}, true))",
            f"_rh AS (SELECT * FROM ({history_sql(src.hist)}) WHERE cluster_id = {c})",
            f"_rp AS ({probes_sql('_res', '_rh')})",
            f"_rn AS ({candidate_counts_sql('_rp', '_rh')})",
            f"_rc AS ({coverage_at_sql('_res', src.cov)})",
            f"""_exposed AS (SELECT r.cluster_id, 'default_exposed' AS risk, {sql_literal(RISKS['default_exposed'])} AS why,
  CAST(NULL AS STRING) AS acl_id, 'TOPIC' AS resource_type, r._name AS resource_name, 'LITERAL' AS pattern_type,
  '{WILDCARD_PRINCIPAL}' AS principal, '*' AS host, 'ALL' AS operation, 'ALLOW' AS permission_type,
  {none_long} AS valid_from_offset, {none_long} AS valid_from_min_offset, {none_long} AS valid_from_time,
  {none_long} AS valid_to_offset, {none_long} AS valid_to_min_offset, {none_long} AS valid_to_time,
  coalesce(n._np, 0) = 0 AND c.coverage = '{COV_COMPLETE}' AS certain, r._at AS as_of_offset, c.coverage
FROM _res r LEFT JOIN _rn n ON r.cluster_id = n.cluster_id AND r._rtype = n._rtype AND r._name = n._name
  AND r._at = n._at LEFT JOIN _rc c ON r.cluster_id = c.cluster_id AND r._at = c._at
WHERE coalesce(n._nc, 0) = 0)"""]
        union += " UNION ALL SELECT * FROM _exposed"
    return (f"WITH {', '.join(parts)} SELECT * FROM ({union}) "
            f"ORDER BY risk, resource_type, resource_name, principal, valid_from_offset")


def live_topics(lake: Lake, cluster: str, at: int) -> DataFrame | None:
    """Topic names existing at offset `at` from `metadata_records` (see the module docstring), or None when the lake
    has no metadata_records."""
    records = _records(lake)
    if records is None:
        return None
    values = {"cluster": cluster, "at": at}
    p = markers(values)
    return run_sql(records.sparkSession, live_topics_sql("{records}", p["cluster"], p["at"]), values, records=records)


def risky_grants(spark: SparkSession, lake: Lake, cluster: str, offset: int | None = None, time: int | None = None,
                 over_time: bool = True, view: str | None = None, allow_everyone: bool | None = None) -> DataFrame:
    """Risky ACL lifetimes (`risk` in RISKS), one row per (lifetime, risk), with their bounds and exactness.

    With `over_time` (default) and no offset/time: every such lifetime in history. With an offset or time: the ones
    possibly live then (certain = certainly live), plus the `default_exposed` topics at that moment unless
    `allow_everyone` is False (True: the broker has the setting; None: not known, list what it would expose).
    """
    if over_time and offset is None and time is None:
        at = None
        require_cluster(lake, cluster)
    else:
        at = resolve_offset(lake, cluster, offset, time)
    df = _run(spark, lake, lambda src, p: risky_grants_sql(src, p["cluster"], p["at"], p["allow_everyone"]),
              cluster=cluster, at=at, allow_everyone=allow_everyone)
    return _finish(df, view)


# ---- SQL -------------------------------------------------------------------------------------------------------

_SETTINGS_PARAMS = "super_users STRING DEFAULT NULL, allow_everyone BOOLEAN DEFAULT false"
# the columns each audit function returns (its RETURNS TABLE): the Python audits' columns, in their order
_ACL_COLUMNS = ", ".join(f"{c} STRING" for c in ACL_FIELDS)
_DECIDED_COLUMNS = ("decision STRING, certain BOOLEAN, reason STRING, deciding_acl_ids ARRAY<STRING>, "
                    "uncertain_acl_ids ARRAY<STRING>, coverage STRING")
_WHO_RETURNS = ("cluster_id STRING, as_of_offset BIGINT, principal STRING, who STRING, host STRING, from_host STRING, "
                f"operation STRING, resource_type STRING, resource_name STRING, {_DECIDED_COLUMNS}, via ARRAY<STRING>")
_ACCESS_RETURNS = ("cluster_id STRING, principal STRING, who STRING, host STRING, operation STRING, "
                   "resource_type STRING, resource_name STRING, change STRING, certain BOOLEAN, from_offset BIGINT, "
                   "to_offset BIGINT, before_decision STRING, before_certain BOOLEAN, before_reason STRING, "
                   "before_deciding_acl_ids ARRAY<STRING>, after_decision STRING, after_certain BOOLEAN, "
                   "after_reason STRING, after_deciding_acl_ids ARRAY<STRING>, after_via ARRAY<STRING>")
_DIFF_RETURNS = f"change STRING, certain BOOLEAN, acl_id STRING, {_ACL_COLUMNS}, before STRING, after STRING"
_TIMELINE_RETURNS = ("cluster_id STRING, principal STRING, who STRING, host STRING, operation STRING, "
                     "resource_type STRING, resource_name STRING, from_offset BIGINT, to_offset BIGINT, "
                     f"{_DECIDED_COLUMNS}, from_time BIGINT, to_time BIGINT, via ARRAY<STRING>")
_RISKY_RETURNS = (f"cluster_id STRING, risk STRING, why STRING, acl_id STRING, {_ACL_COLUMNS}, "
                  "valid_from_offset BIGINT, valid_from_min_offset BIGINT, valid_from_time BIGINT, "
                  "valid_to_offset BIGINT, valid_to_min_offset BIGINT, valid_to_time BIGINT, certain BOOLEAN, "
                  "as_of_offset BIGINT, coverage STRING")


# StandardAuthorizer's principal rule (`_check_principal`) for a principal asked about in SQL
_PRINCIPAL_CHECK = ("instr(coalesce(principal, ''), ':') = 0",
                    "concat('expected a string in format principalType:principalName but got ', "
                    "coalesce(principal, 'NULL'))")


def audit_functions(table_ref: Callable[[str], str], records: bool = True,
                    names: str | None = None) -> list[SqlFunction]:
    """The audits as SQL table function definitions over the tables `table_ref` names (see
    `register_audit_functions`); `records`: the lake has `metadata_records` (the topics `acl_risky_grants` reads);
    `names`: the clusters with a replayed history (`Lake.replayed_clusters_sql`; by default those in `log_coverage`)."""
    src = _Sources(table_ref("acl_history"), table_ref("log_coverage"), table_ref("offset_times"),
                   table_ref("metadata_records") if records else None)

    def settings(function: str) -> SqlSettings:
        return SqlSettings.of_params(f"{function}.super_users", f"{function}.allow_everyone")

    # parameters are referenced qualified (`acl_who_can.operation`): unqualified, a column of the same name
    # (acl_history has `operation`, `principal`, ...) would win
    who, what, acc, diff, tl, risky = ("acl_who_can", "acl_what_can", "acl_access_changes", "acl_diff",
                                       "acl_timeline", "acl_risky_grants")
    fields = ", ".join(f"d.{c}" for c in ACL_FIELDS)
    names = names or covered_clusters_sql(src.cov)

    # from_offset may be negative (-1: before the first record, as in acl_changes_between)
    def offsets(*names: str) -> list[tuple[str, str]]:
        return [UNKNOWN_CLUSTER_CHECK, *[negative_offset_check(n) for n in names]]

    return [
        SqlFunction(who, "cluster STRING, operation STRING, resource_type STRING, resource_name STRING, "
                    f"at_offset BIGINT, {_SETTINGS_PARAMS}", _WHO_RETURNS,
                    "Who could perform the operation on the resource at the offset, per host, through which ACLs "
                    "(via); DENYs listed; NEVER_MATCHES rows for ACLs whose host no client can present. super_users: "
                    "the broker's super.users text; allow_everyone: allow.everyone.if.no.acl.found.",
                    guarded_sql(who_can_sql(src, f"{who}.cluster", f"{who}.operation", f"{who}.resource_type",
                                            f"{who}.resource_name", f"{who}.at_offset", settings(who)),
                                _WHO_RETURNS, names, offsets("at_offset"))),
        SqlFunction(what, f"cluster STRING, principal STRING, at_offset BIGINT, {_SETTINGS_PARAMS}",
                    f"{_WHO_RETURNS}, pattern_type STRING",
                    "What the principal could do at the offset (its own ACLs and User:*), per host, through which "
                    "ACLs; DENYs listed; its ACLs whose host no client can present.",
                    guarded_sql(what_can_sql(src, f"{what}.cluster", f"{what}.principal", f"{what}.at_offset",
                                             settings(what)),
                                f"{_WHO_RETURNS}, pattern_type STRING", names,
                                [*offsets("at_offset"), _PRINCIPAL_CHECK])),
        SqlFunction(acc, f"cluster STRING, from_offset BIGINT, to_offset BIGINT, {_SETTINGS_PARAMS}", _ACCESS_RETURNS,
                    "Access gained, lost or uncertain between the two offsets.",
                    guarded_sql(access_changes_sql(src, f"{acc}.cluster", f"{acc}.from_offset",
                                                   f"{acc}.to_offset", settings(acc)),
                                _ACCESS_RETURNS, names, offsets("to_offset"))),
        SqlFunction(diff, "cluster STRING, from_offset BIGINT, to_offset BIGINT", _DIFF_RETURNS,
                    "ACLs added or removed between the two offsets (maybe_* where a hole makes it uncertain).",
                    guarded_sql(f"SELECT d.change, d.certain, d.acl_id, {fields}, d.before, d.after FROM "
                                f"({acl_changes_sql(src, f'{diff}.cluster', f'{diff}.from_offset', f'{diff}.to_offset')}) d",
                                _DIFF_RETURNS, names, offsets("to_offset"))),
        SqlFunction(tl, "cluster STRING, principal STRING, resource_type STRING, resource_name STRING, "
                    f"operation STRING DEFAULT NULL, {_SETTINGS_PARAMS}", _TIMELINE_RETURNS,
                    "Decision intervals over the whole history for a principal (resource type and name NULL) or a "
                    "resource (principal NULL); operation NULL means every operation the ACLs decide.",
                    guarded_sql(timeline_sql(src, f"{tl}.cluster", f"{tl}.principal", f"{tl}.resource_type",
                                             f"{tl}.resource_name", f"{tl}.operation", settings(tl)),
                                _TIMELINE_RETURNS, names, offsets())),
        SqlFunction(risky, "cluster STRING, at_offset BIGINT, allow_everyone BOOLEAN DEFAULT NULL", _RISKY_RETURNS,
                    "Risky ACL lifetimes (all history when at_offset is NULL) and, at an offset, the topics "
                    "allow.everyone.if.no.acl.found exposes (omitted when allow_everyone is false).",
                    guarded_sql(risky_grants_sql(src, f"{risky}.cluster", f"{risky}.at_offset",
                                                 f"{risky}.allow_everyone"),
                                _RISKY_RETURNS, names, offsets("at_offset"))),
    ]


def register_audit_functions(spark: SparkSession, lake: Lake, only: Collection[str] | None = None) -> list[str]:
    """Register the audits as temporary SQL table functions over this lake; returns their names.

    Every function is the same query text as the Python audit of the same name (so they give the same rows), run
    over the lake's tables (`lake.source`): `acl_history`, `log_coverage`, `offset_times` and, when the lake has
    it, `metadata_records`. Offsets are log offsets (map a time with `acl_state_at_time` / `offset_times`);
    `super_users` is the broker's `super.users` text (`'User:admin;User:ops'`, parsed as Kafka parses it) and
    `allow_everyone` its `allow.everyone.if.no.acl.found`. Created with CREATE OR REPLACE, so calling this again is
    harmless; the `kraft-replay sql` command calls it, and `kraft-replay install-sql` installs the same definitions
    (`audit_functions`) as persistent functions. Each function's COMMENT there says what it answers. With `only`,
    just the functions it names.

    Example: `SELECT who, from_host, decision, via FROM acl_who_can('prod', 'READ', 'TOPIC', 'payments', 1234)`.
    """
    functions = audit_functions(lake.source, _records(lake) is not None, lake.replayed_clusters_sql())
    return create_temporary(spark, functions, only)


# ---- plain functions for the CLI -----------------------------------------------------------------------------

def _rows(df: DataFrame) -> list[dict[str, Any]]:
    return [r.asDict(recursive=True) for r in df.collect()]


def audit_who_can(spark: SparkSession, lake: Lake, cluster: str, operation: str, resource_type: str,
                  resource_name: str, offset: int | None = None, time: int | None = None, super_users: str = "",
                  allow_everyone: bool = False) -> list[dict[str, Any]]:
    return _rows(who_can(spark, lake, cluster, operation, resource_type, resource_name, offset, time, super_users,
                         allow_everyone))


def audit_what_can(spark: SparkSession, lake: Lake, cluster: str, principal: str, offset: int | None = None,
                   time: int | None = None, super_users: str = "", allow_everyone: bool = False
                   ) -> list[dict[str, Any]]:
    return _rows(what_can(spark, lake, cluster, principal, offset, time, super_users, allow_everyone))


def audit_changes(spark: SparkSession, lake: Lake, cluster: str, start: int | None = None, end: int | None = None,
                  start_time: int | None = None, end_time: int | None = None, super_users: str = "",
                  allow_everyone: bool = False) -> dict[str, list[dict[str, Any]]]:
    """{"acls": ACLs added/removed, "access": access gained/lost}; times map to offsets as everywhere."""
    # resolving `end` has checked the question (the cluster is known, no offset is negative): the frames skip it
    s = resolve_offset(lake, cluster, start, start_time) if (start is not None or start_time is not None) else -1
    e = resolve_offset(lake, cluster, end, end_time)
    return {"acls": _rows(_acl_changes_frame(spark, lake, cluster, s, e)),
            "access": _rows(_access_changes_frame(spark, lake, cluster, s, e, super_users, allow_everyone))}


def audit_timeline(spark: SparkSession, lake: Lake, cluster: str, principal: str | None = None,
                   resource_type: str | None = None, resource_name: str | None = None, operation: str | None = None,
                   super_users: str = "", allow_everyone: bool = False) -> list[dict[str, Any]]:
    return _rows(timeline(spark, lake, cluster, principal, resource_type, resource_name, operation, super_users,
                          allow_everyone))


def audit_risky_grants(spark: SparkSession, lake: Lake, cluster: str, offset: int | None = None,
                       time: int | None = None, allow_everyone: bool | None = None) -> list[dict[str, Any]]:
    return _rows(risky_grants(spark, lake, cluster, offset, time, allow_everyone=allow_everyone))


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
    buf = io.StringIO()
    rows = list(rows)
    if fmt == "table":
        outputs.write_rows(rows, buf, "table", audit, SUMMARY_COLUMNS.get(audit))
    else:
        outputs.write_rows(rows, buf, fmt, audit)
    return buf.getvalue().splitlines()


__all__ = [
    "ALLOWED", "DENIED", "EVERYONE", "NEVER_MATCHES", "RISKS", "SUMMARY_COLUMNS", "SUPPORTED_OPERATIONS", "UNKNOWN", "access_changes",
    "acl_changes", "as_view", "audit_changes", "audit_risky_grants", "audit_timeline", "audit_what_can",
    "audit_who_can", "live_topics", "register_audit_functions", "render_audit", "resolve_offset", "risky_grants",
    "timeline", "what_can", "who_can",
]
