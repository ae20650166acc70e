"""The decision for named resources: one SQL query text (`decide_sql`), run over DataFrames by `decide_keys` and
embedded as it is in the SQL table functions of `replay.spark.audits`, so Python and SQL cannot drift apart.

How (spec/standard-authorizer.md §1.3, §1.4), once per *distinct* key (cluster, principal, rendered host, operation,
resource type, name, offset):

* candidates: each resource name becomes probe keys (kind, pattern name): `(L, name)`, `(L, "*")` unless the name
  starts with `*` and is longer than one character (Kafka's quirk, §1.7), and `(P, prefix)` for the prefix lengths
  that PREFIXED ACLs of that (cluster, type) actually have. Candidate ACLs are equi-joins on
  (cluster, type, kind, pattern name);
* matching ACLs: the same equi-join with the principal added (request principal and `User:*`), then the host,
  operation (ALL; ALLOW implication DESCRIBE <- READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS <- ALTER_CONFIGS; DENY
  exact) and lifetime predicates (`rules.live_sql`);
* "does any ACL cover this resource" (what `allow.everyone.if.no.acl.found` depends on) uses a step function per
  resource pattern: the number of lifetimes certainly and possibly live from each change offset on, read with an
  as-of join, so a pattern with thousands of lifetimes (say `*`) costs one row per request, not thousands.

Certainty (gaps in history): a state is any choice of the uncertain lifetimes. DENIED is certain iff a certainly
live matching DENY exists, or no possibly live matching ALLOW exists and (a certainly live candidate exists or the
default is deny). ALLOWED is certain iff no possibly live matching DENY exists and (a certainly live matching ALLOW
exists, or the default is allow and every possibly live candidate is a matching ALLOW). Otherwise UNKNOWN. Where
the offset is not covered by the log or a snapshot, or lies in an `incomplete` range (ACLs that no dump recorded,
created and removed again inside a hole, may have been live), ACLs we never saw may exist: only a certain matching
DENY stays certain (and super users, who need no ACL). Internally (`decide_keys`, used by the audits) the principal
`User:*` means "a principal with no ACL of its own": only `User:*` ACLs match it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replay.kafka.authorizer import parse_allow_everyone, parse_super_users
from replay.spark.rules import COV_COMPLETE, coverage_at_sql, live_sql, markers, run_sql
from replay.spark.tables import Lake, sql_string

ALLOWED, DENIED, UNKNOWN, ERROR = "ALLOWED", "DENIED", "UNKNOWN", "ERROR"
R_SUPER_USER = "super_user"
R_DENY = "matching_deny"
R_ALLOW = "matching_allow"
R_NO_MATCH = "no_matching_acl"
R_ALLOW_EVERYONE = "allow_everyone"
R_UNCERTAIN = "uncertain_history"
R_INVALID = "invalid_request"
R_KAFKA_ERROR = "kafka_error"

WILDCARD_PRINCIPAL = "User:*"
ANY_HOST = "*"  # internal rendered host meaning "a host no ACL names": only host `*` ACLs match it

_IMPLIES_DESCRIBE = ["DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"]
_IMPLIES_DESCRIBE_CONFIGS = ["DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name", "_at"]
_DECIDED = ["decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids", "coverage"]


@dataclass(frozen=True)
class AuthorizerSettings:
    """The two StandardAuthorizer settings that change decisions (spec §1.2), parsed the way Kafka parses them."""

    super_users: frozenset[str] = frozenset()
    allow_everyone: bool = False

    @classmethod
    def of(cls, super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False
           ) -> AuthorizerSettings:
        return cls(parse_super_users(super_users or None), parse_allow_everyone(allow_everyone))

    def params(self) -> dict[str, Any]:
        """The settings as parameter values, for `SqlSettings.of_markers` (`super_users` sorted: one text per set)."""
        return {"super_users": sorted(self.super_users), "allow_everyone": self.allow_everyone}


@dataclass(frozen=True)
class LakeTables:
    """The lake tables authorization reads (any object with `.read(name)` gives them)."""

    history: DataFrame
    coverage: DataFrame
    offset_times: DataFrame

    @classmethod
    def of(cls, lake: Lake) -> LakeTables:
        if isinstance(lake, LakeTables):
            return lake
        return cls(lake.read("acl_history"), lake.read("log_coverage"), lake.read("offset_times"))


def empty_ids() -> Column:
    return F.array().cast("array<string>")


# ---- the decision rules as SQL: one query text for the DataFrame API and the SQL table functions ------------------
#
# `decide_sql` (and the helpers below) return Spark SQL text over named relations. Python runs it with
# `rules.run_sql(spark, text, args, keys=df, hist=df, cov=df)` (relations written `{keys}` ...; PySpark's formatter
# makes them temporary views; the question's values are parameter markers bound to `args`); the SQL table functions
# of `replay.spark.audits` embed the same text with the lake's tables and their own parameters.

def sql_literal(value: Any) -> str:
    """A constant of the code as a Spark SQL literal, for text that must hold it as such (a SQL function's body
    cannot hold a parameter marker): `tables.sql_string` with `{`/`}` doubled, because the text may pass through
    PySpark's formatter; an integer as BIGINT. Values a user asks about go through parameter markers instead."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return f"CAST({value} AS BIGINT)"
    return sql_string(str(value)).replace("{", "{{").replace("}", "}}")


@dataclass(frozen=True)
class SqlSettings:
    """The two settings as SQL expressions: `super_users` an ARRAY<STRING>, `allow_everyone` a BOOLEAN."""

    super_users: str
    allow_everyone: str

    @classmethod
    def of_markers(cls) -> SqlSettings:
        """The markers `AuthorizerSettings.params` binds, for a query run from Python."""
        m = markers(AuthorizerSettings().params())
        return cls(m["super_users"], m["allow_everyone"])

    @classmethod
    def of_params(cls, super_users: str, allow_everyone: str) -> SqlSettings:
        """From SQL function parameters: `super_users` a STRING in `super.users` syntax (split on `;`, each piece
        trimmed as Java's `String.trim` does, empties dropped, a piece without `:` is an error, as Kafka's
        `configure` makes it), `allow_everyone` a BOOLEAN (NULL = false)."""
        pieces = (f"filter(transform(split(coalesce({super_users}, ''), ';'), x -> "
                  r"regexp_replace(x, '^[\\x00-\\x20]+|[\\x00-\\x20]+$', '')), x -> x != '')")
        checked = (f"CASE WHEN exists({pieces}, x -> instr(x, ':') = 0) THEN CAST(raise_error(concat("
                   "'super.users: expected a string in format principalType:principalName but got ', "
                   f"element_at(filter({pieces}, x -> instr(x, ':') = 0), 1))) AS ARRAY<STRING>) ELSE {pieces} END")
        return cls(checked, f"coalesce({allow_everyone}, false)")


def op_match_sql(acl_op: str, allow: str, op: str) -> str:
    """An ACL operation matches a requested one (spec §1.3 4b): ALL, equal, or for ALLOW the implications."""
    describe = ", ".join(f"'{o}'" for o in _IMPLIES_DESCRIBE)
    configs = ", ".join(f"'{o}'" for o in _IMPLIES_DESCRIBE_CONFIGS)
    return (f"({acl_op} = 'ALL' OR {acl_op} = {op} OR ({allow} AND (({op} = 'DESCRIBE' AND {acl_op} IN ({describe})) "
            f"OR ({op} = 'DESCRIBE_CONFIGS' AND {acl_op} IN ({configs})))))")


def acl_covers_sql(h: str, r: str) -> str:
    """The ACL (columns prefixed `h`) matches the request (`r`: principal, operation, resource_type, resource_name)
    in everything but the host (spec §1.3 4a-4b): its principal or `User:*`, its operation, and its pattern covering
    the name (LITERAL: the name, or `*` unless the name starts with `*`, Kafka's quirk §1.7; any other pattern as a
    prefix). What `probes_sql` and `decide_sql` find by joins, as one predicate for a join that has both rows."""
    name = f"{r}resource_name"
    ops = op_match_sql(f"{h}operation", f"{h}permission_type = 'ALLOW'", f"{r}operation")
    return (f"(({h}principal = {r}principal OR {h}principal = '{WILDCARD_PRINCIPAL}') "
            f"AND {h}resource_type = {r}resource_type "
            f"AND CASE WHEN {h}pattern_type = 'LITERAL' THEN {h}resource_name = {name} OR ({h}resource_name = '*' "
            f"AND NOT (startswith({name}, '*') AND length({name}) > 1)) ELSE startswith({name}, {h}resource_name) END "
            f"AND {ops})")


_HIST_COLUMNS = ("cluster_id, acl_id, resource_type, resource_name, pattern_type, principal, host, operation, "
                 "permission_type, valid_from_offset, valid_from_min_offset, valid_to_offset, valid_to_min_offset")


def history_sql(hist: str) -> str:
    """acl_history with the probe columns: `_rtype`, `_pk` (L or P: every non-LITERAL pattern is scanned like a
    prefix), `_pn`, `_allow`."""
    return (f"SELECT {_HIST_COLUMNS}, resource_type AS _rtype, CASE WHEN pattern_type = 'LITERAL' THEN 'L' "
            f"ELSE 'P' END AS _pk, resource_name AS _pn, permission_type = 'ALLOW' AS _allow FROM {hist}")


def probes_sql(resources: str, hist: str) -> str:
    """One row per (resource key, probe pattern) for `resources` (cluster_id, _rtype, _name, _at) over `hist`
    (`history_sql` rows): the patterns that could cover the name (spec §1.3 4a): `(L, name)`, `(L, '*')` unless the
    name starts with `*` (Kafka's quirk, §1.7), and `(P, prefix)` for the prefix lengths PREFIXED ACLs of that
    (cluster, type) actually have."""
    none = "CAST(array() AS ARRAY<STRUCT<k: STRING, n: STRING>>)"
    return f"""SELECT r.cluster_id, r._rtype, r._name, r._at, pr.k AS _pk, pr.n AS _pn FROM (
SELECT /*+ BROADCAST(l) */ r.cluster_id, r._rtype, r._name, r._at, l._lens FROM {resources} r LEFT JOIN (
  SELECT cluster_id, _rtype, array_sort(collect_set(length(_pn))) AS _lens FROM {hist} WHERE _pk = 'P'
  GROUP BY cluster_id, _rtype) l ON r.cluster_id = l.cluster_id AND r._rtype = l._rtype) r
LATERAL VIEW explode(concat(array(named_struct('k', 'L', 'n', r._name)),
  CASE WHEN r._name != '*' AND NOT (startswith(r._name, '*') AND length(r._name) > 1)
       THEN array(named_struct('k', 'L', 'n', '*')) ELSE {none} END,
  transform(filter(coalesce(r._lens, CAST(array() AS ARRAY<INT>)), x -> x <= length(r._name)),
            x -> named_struct('k', 'P', 'n', substring(r._name, 1, x))))) e AS pr"""


def candidate_counts_sql(probes: str, hist: str) -> str:
    """Per resource key of `probes`: lifetimes covering the resource certainly (`_nc`) / certainly or possibly
    (`_np`) live at `_at`. A step function per resource pattern (lifetimes live from each change offset on) read
    with an as-of window, so a pattern with thousands of lifetimes (say `*`) costs one row per request."""
    pat = "cluster_id, _rtype, _pk, _pn"
    return f"""SELECT cluster_id, _rtype, _name, _at, sum(coalesce(_c, 0)) AS _nc, sum(coalesce(_q, 0)) AS _np FROM (
  SELECT {pat}, _name, _at, _tag,
    last(_nc, true) OVER (PARTITION BY {pat} ORDER BY _o, _tag ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _c,
    last(_np, true) OVER (PARTITION BY {pat} ORDER BY _o, _tag ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _q
  FROM (
    SELECT {pat}, _o,
      sum(_dc) OVER (PARTITION BY {pat} ORDER BY _o ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _nc,
      sum(_dp) OVER (PARTITION BY {pat} ORDER BY _o ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _np,
      0 AS _tag, CAST(NULL AS STRING) AS _name, CAST(NULL AS BIGINT) AS _at
    FROM (SELECT {pat}, e.o AS _o, sum(e.dc) AS _dc, sum(e.dp) AS _dp FROM {hist}
          LATERAL VIEW explode(array(
            named_struct('o', valid_from_min_offset, 'dc', 0, 'dp', 1),
            named_struct('o', valid_from_offset, 'dc', 1, 'dp', 0),
            named_struct('o', valid_to_min_offset, 'dc', -1, 'dp', 0),
            named_struct('o', CASE WHEN valid_to_min_offset IS NOT NULL AND valid_to_offset IS NOT NULL
                                   THEN valid_to_offset END, 'dc', 0, 'dp', -1))) x AS e
          WHERE e.o IS NOT NULL GROUP BY {pat}, e.o) steps
    UNION ALL
    SELECT {pat}, _at AS _o, CAST(NULL AS BIGINT), CAST(NULL AS BIGINT), 1, _name, _at FROM {probes}
    WHERE _at IS NOT NULL) marks) read
WHERE _tag = 1 GROUP BY cluster_id, _rtype, _name, _at"""


def acl_text_sql(p: str = "") -> str:
    """`TOPIC:PREFIXED:pay User:bob ALLOW READ from *`: one ACL in a line (columns prefixed `p`)."""
    c = {f: p + f for f in ("resource_type", "pattern_type", "resource_name", "principal", "permission_type",
                            "operation", "host")}
    return (f"concat_ws('', {c['resource_type']}, ':', {c['pattern_type']}, ':', {c['resource_name']}, ' ', "
            f"{c['principal']}, ' ', {c['permission_type']}, ' ', {c['operation']}, ' from ', {c['host']})")


def decide_sql(keys: str, hist: str, coverage: str, settings: SqlSettings) -> str:
    """The decision for every distinct key of `keys` (columns `cluster_id, _p, _h, _op, _rtype, _name, _at`; `_at`
    may be null) over `hist` (acl_history) and `coverage` (log_coverage): the key columns plus `decision`,
    `certain`, `reason`, `deciding_acl_ids`, `uncertain_acl_ids`, `coverage` (module docstring; spec §1.3/§1.4),
    and `acl_texts`: each matching ACL's id -> its one-line text (`acl_text_sql`), so that the audits spell out the
    deciding ACLs without reading the decisions a second time."""
    k = ", ".join(_KEY)
    kk = ", ".join(f"k.{c}" for c in _KEY)
    certain, maybe = live_sql("kp._at", "h")
    ops = op_match_sql("h.operation", "h._allow", "kp._op")

    def ids(cond: str) -> str:
        return f"array_sort(collect_set(CASE WHEN {cond} THEN acl_id END))"

    empty = "CAST(array() AS ARRAY<STRING>)"
    return f"""WITH
_dk_k AS (SELECT DISTINCT {k} FROM {keys}),
_dk_h AS ({history_sql(hist)}),
_dk_p AS ({probes_sql("(SELECT DISTINCT cluster_id, _rtype, _name, _at FROM _dk_k)", "_dk_h")}),
_dk_n AS ({candidate_counts_sql("_dk_p", "_dk_h")}),
_dk_j AS (
  SELECT kp.cluster_id, kp._p, kp._h, kp._op, kp._rtype, kp._name, kp._at, h.acl_id, h._allow, {certain} AS _cl,
    {acl_text_sql("h.")} AS _txt
  FROM (SELECT {kk}, p._pk, p._pn, pp AS _pp FROM _dk_k k JOIN _dk_p p
        ON k.cluster_id = p.cluster_id AND k._rtype = p._rtype AND k._name = p._name AND k._at = p._at
        LATERAL VIEW explode(array_distinct(array(k._p, '{WILDCARD_PRINCIPAL}'))) e AS pp) kp
  JOIN _dk_h h ON kp.cluster_id = h.cluster_id AND kp._rtype = h._rtype AND kp._pk = h._pk AND kp._pn = h._pn
    AND kp._pp = h.principal
  WHERE {maybe} AND (h.host = '*' OR h.host = kp._h) AND {ops}),
_dk_m AS (
  SELECT {k}, {ids("NOT _allow AND _cl")} AS _deny_c, {ids("NOT _allow AND NOT _cl")} AS _deny_u,
    {ids("_allow AND _cl")} AS _allow_c, {ids("_allow AND NOT _cl")} AS _allow_u,
    count(CASE WHEN _allow THEN 1 END) AS _n_allow,
    map_from_entries(collect_set(named_struct('k', acl_id, 'v', _txt))) AS _texts
  FROM _dk_j GROUP BY {k}),
_dk_c AS ({coverage_at_sql("_dk_k", coverage)}),
_dk_d AS (
  SELECT {kk}, coalesce(m._deny_c, {empty}) AS deny_c, coalesce(m._deny_u, {empty}) AS deny_u,
    coalesce(m._allow_c, {empty}) AS allow_c, coalesce(m._allow_u, {empty}) AS allow_u,
    coalesce(n._nc, 0) AS n_c, coalesce(n._np, 0) AS n_p, coalesce(m._n_allow, 0) AS n_allow, c.coverage,
    coalesce(m._texts, CAST(map() AS MAP<STRING, STRING>)) AS acl_texts,
    array_contains({settings.super_users}, k._p) AS su, {settings.allow_everyone} AS default_allow
  FROM _dk_k k
  LEFT JOIN _dk_m m ON k.cluster_id = m.cluster_id AND k._p = m._p AND k._h = m._h AND k._op = m._op
    AND k._rtype = m._rtype AND k._name = m._name AND k._at = m._at
  LEFT JOIN _dk_n n ON k.cluster_id = n.cluster_id AND k._rtype = n._rtype AND k._name = n._name AND k._at = n._at
  LEFT JOIN _dk_c c ON k.cluster_id = c.cluster_id AND k._at = c._at),
_dk_f AS (
  SELECT *, size(deny_c) > 0 AS d_c, size(deny_c) + size(deny_u) > 0 AS d_p, size(allow_c) > 0 AS a_c,
    size(allow_c) + size(allow_u) > 0 AS a_p, n_c > 0 AS c_c, n_p - n_allow > 0 AS other_p,
    coverage = '{COV_COMPLETE}' AS known FROM _dk_d),
_dk_g AS (
  SELECT *, d_c OR (known AND NOT a_p AND (c_c OR NOT default_allow)) AS certain_denied,
    known AND NOT d_p AND (a_c OR (default_allow AND NOT other_p)) AS certain_allowed FROM _dk_f)
SELECT {k}, decision, decision != '{UNKNOWN}' AS certain, reason, deciding_acl_ids, uncertain_acl_ids, coverage,
  acl_texts
FROM (SELECT {k},
  CASE WHEN su THEN '{ALLOWED}' WHEN certain_denied THEN '{DENIED}' WHEN certain_allowed THEN '{ALLOWED}'
       ELSE '{UNKNOWN}' END AS decision,
  CASE WHEN su THEN '{R_SUPER_USER}' WHEN d_c THEN '{R_DENY}' WHEN certain_denied THEN '{R_NO_MATCH}'
       WHEN certain_allowed AND a_c THEN '{R_ALLOW}' WHEN certain_allowed THEN '{R_ALLOW_EVERYONE}'
       ELSE '{R_UNCERTAIN}' END AS reason,
  CASE WHEN su THEN {empty} WHEN d_c THEN deny_c WHEN certain_denied THEN {empty} WHEN certain_allowed THEN allow_c
       ELSE array_sort(array_distinct(concat(deny_c, deny_u, allow_c, allow_u))) END AS deciding_acl_ids,
  CASE WHEN su THEN {empty} ELSE array_sort(concat(deny_u, allow_u)) END AS uncertain_acl_ids,
  coverage, acl_texts
FROM _dk_g)"""


def decide_keys(keys: DataFrame, tables: LakeTables, settings: AuthorizerSettings) -> DataFrame:
    """Decide distinct normalised keys (`_KEY` columns, `_at` may be null). Returns the keys plus the result columns.

    Runs `decide_sql`, the text the SQL audit functions embed too. Public for the audits, which build keys
    directly (host `*` = "a host that no ACL names").
    """
    d = run_sql(keys.sparkSession, decide_sql("{keys}", "{hist}", "{cov}", SqlSettings.of_markers()),
                settings.params(), keys=keys.select(*_KEY), hist=tables.history, cov=tables.coverage)
    return d.select(*_KEY, *_DECIDED)
