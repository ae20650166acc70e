"""API questions in plain SQL ("could P call OffsetFetch for group g at offset N, with Kafka 2.0's rules?"), for
the SQL table function `acl_could_call` that a SQL warehouse runs without this package.

The Kafka engine's rule (`replay.kafka.apis`: `api_request` expands a call into its checks, `api_decision` turns
their answers into the call's outcome) is written here a second time, as SQL over the API catalog turned into data
(`catalog_sql`: one row per API, requirement and alternative check, made from `apis.APIS`), and held equal to it by
tests on random calls and random answers. Python questions keep using the Kafka engine (`authorize_api`); this text
exists for SQL, where no Python runs.

Shape: a relation of calls (one row each) -> per call the applicable requirements and the questions (`expand_sql`,
all array functions over the call's row) -> one row per question, answered by the lake's decisions (`decide_sql`
for named resources, `decide_by_type_sql` for "any topic") -> each call's outcome from its answered questions
(`outcome_sql`), evaluated with UNKNOWN taken as allowed and as denied: UNKNOWN only where the two differ.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence

from pyspark.sql import SparkSession

from replay.kafka import apis
from replay.kafka.acl import CLUSTER_RESOURCE_NAME
from replay.spark.authorize_by_type import decide_by_type_sql
from replay.spark.authorize_decide import (
    ALLOWED,
    ERROR,
    UNKNOWN,
    WILDCARD_PRINCIPAL,
    SqlSettings,
    decide_sql,
    sql_literal,
)
from replay.spark.authorize_requests import presentable_host_sql
from replay.spark.queries import (
    UNKNOWN_CLUSTER_CHECK,
    before_history_check,
    guarded_sql,
    negative_offset_check,
)
from replay.spark.rules import offset_at_time_sql
from replay.spark.sqlddl import SqlFunction, create_temporary
from replay.spark.tables import Lake, covered_clusters_sql

# the columns of a calls relation (`expand_sql`): `_call` identifies the call; `_p` principal, `_h` host (as Java
# renders it), `_at` the offset; the resources as `api_request` takes them; `_kv` Kafka version, `_av` request
# version (NULL: the newest clients send), `_conds` conditions (NULL: none)
CALL_COLUMNS = ["_call", "cluster_id", "_p", "_h", "_at", "_api", "_topics", "_groups", "_txn", "_token", "_owner",
                "_kv", "_av", "_conds"]

_ALT = ("STRUCT<j: INT, rt: STRING, op: STRING, arg: STRING, anyres: BOOLEAN, w: ARRAY<STRING>, u: ARRAY<STRING>, "
        "since: ARRAY<INT>, until: ARRAY<INT>, lo: INT, hi: INT>")
_REQ = f"STRUCT<i: INT, error: STRING, filters: BOOLEAN, per_topic: BOOLEAN, alts: ARRAY<{_ALT}>>"
_IMPLIED = "STRUCT<o: INT, c: STRING, f: ARRAY<STRING>, a: ARRAY<STRING>, g: ARRAY<STRING>>"
_QUESTION = "STRUCT<i: INT, j: INT, rt: STRING, name: STRING, op: STRING, arg: STRING>"
_STRINGS = "CAST(array() AS ARRAY<STRING>)"

# ---- the catalog as data ------------------------------------------------------------------------------------------

def _lit(value: object) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        return str(value)
    return sql_literal(value)


def _strings(values: Sequence[str]) -> str:
    return f"array({', '.join(_lit(v) for v in values)})" if values else _STRINGS


def _version(version: str | None) -> str:
    if version is None:
        return "CAST(NULL AS ARRAY<INT>)"
    return f"array({', '.join(str(p) for p in apis.parse_kafka_version(version))})"


def _lookup_names(spec: apis.ApiSpec) -> list[str]:
    """The spellings `apis.api` accepts, upper case without underscores (`OFFSETFETCH`)."""
    names = [spec.name.replace("_", "")]
    names += [alias.replace("_", "") for alias, key in apis.API_ALIASES.items() if key == spec.key]
    return names


def _alt_sql(j: int, c: apis.Check) -> str:
    return (f"named_struct('j', {j}, 'rt', {_lit(c.resource_type)}, 'op', {_lit(c.operation)}, "
            f"'arg', CAST({_lit(c.arg)} AS STRING), 'anyres', {_lit(c.any_resource)}, 'w', {_strings(sorted(c.when))}, "
            f"'u', {_strings(sorted(c.unless))}, 'since', {_version(c.since)}, 'until', {_version(c.until)}, "
            f"'lo', CAST({_lit(c.min_api)} AS INT), 'hi', CAST({_lit(c.max_api)} AS INT))")


def _spec_row(s: apis.ApiSpec) -> str:
    """One API as a row: key, name, pascal, lookup, max_api, client_api, notes, implied (o, c, f, a, g), reqs (i,
    error, filters, per_topic, alts)."""
    notes = [n for n in (s.note, *(r.note for r in s.requirements)) if n]
    implied = ", ".join(f"named_struct('o', {o}, 'c', {_lit(m.condition)}, 'f', {_strings(sorted(m.facts))}, "
                        f"'a', {_strings(sorted(m.absent))}, 'g', {_strings(sorted(m.unless_given))})"
                        for o, m in enumerate(s.implies))
    reqs = ", ".join(f"named_struct('i', {i}, 'error', {_lit(r.error)}, 'filters', {_lit(r.filters)}, "
                     f"'per_topic', {_lit(r.per_topic)}, "
                     f"'alts', array({', '.join(_alt_sql(j, c) for j, c in enumerate(r.alternatives))}))"
                     for i, r in enumerate(s.requirements))
    return (f"({s.key}, {_lit(s.name)}, {_lit(s.pascal)}, {_strings(_lookup_names(s))}, "
            f"CAST({_lit(s.max_api_version)} AS INT), CAST({_lit(s.client_api_version)} AS INT), {_strings(notes)}, "
            f"CAST(array({implied}) AS ARRAY<{_IMPLIED}>), CAST(array({reqs}) AS ARRAY<{_REQ}>))")


def catalog_sql() -> str:
    """CTEs `_api_specs` (one row per API: key, name, pascal, lookup, max_api, client_api, notes, implied
    conditions, requirements with their alternative checks) and `_api_alts` (one row per check: key, rt, op, arg,
    anyres): `apis.APIS` as data, for `expand_sql` and `keys_sql`. Literal rows, so that nothing is aggregated
    before a call can be expanded."""
    specs = ",\n  ".join(_spec_row(s) for s in apis.APIS)
    alts = ",\n  ".join(f"({s.key}, {_lit(c.resource_type)}, {_lit(c.operation)}, CAST({_lit(c.arg)} AS STRING), "
                        f"{_lit(c.any_resource)})" for s in apis.APIS for r in s.requirements for c in r.alternatives)
    return (f"_api_specs AS (SELECT * FROM VALUES\n  {specs}\n  AS t(key, name, pascal, lookup, max_api, client_api, "
            f"notes, implied, reqs)),\n"
            f"_api_alts AS (SELECT * FROM VALUES\n  {alts}\n  AS t(key, rt, op, arg, anyres))")


# ---- a call made concrete: `apis.api_request` -------------------------------------------------------------------

def version_sql(text: str) -> str:
    """A Kafka version string -> ARRAY<INT> (`apis.parse_kafka_version`; NULL when it is not one)."""
    pattern = r"^\\s*v?([0-9]+(\\.[0-9]+)*)([-+].*)?\\s*$"
    return (f"CASE WHEN {text} RLIKE '{pattern}' THEN transform(split(regexp_extract({text}, '{pattern}', 1), "
            r"'\\.'), x -> CAST(x AS INT)) END")


def version_at_least_sql(a: str, b: str) -> str:
    """Version `a` >= version `b` (ARRAY<INT>s): padded with zeros to one length, so trailing zeros do not count."""
    n = f"greatest(size({a}), size({b}))"
    return f"(concat({a}, array_repeat(0, {n} - size({a}))) >= concat({b}, array_repeat(0, {n} - size({b}))))"


def _values_sql(arg: str) -> str:
    """The names the call gives for request argument `arg` (NULL: not given), as `api_request`'s `values`."""
    def one(col: str) -> str:
        return f"CASE WHEN {col} IS NOT NULL THEN array({col}) END"
    return (f"CASE {arg} WHEN '{apis.ARG_TOPICS}' THEN _topics WHEN '{apis.ARG_GROUP}' THEN _groups "
            f"WHEN '{apis.ARG_TXN}' THEN {one('_txn')} WHEN '{apis.ARG_TOKEN}' THEN {one('_token')} "
            f"WHEN '{apis.ARG_OWNER}' THEN {one('_owner')} END")


def _applies_sql(c: str) -> str:
    """`Check.applies` for alternative `c` of a call (`_cset` its conditions, `_kver` Kafka version, `_v` request
    version)."""
    since = version_at_least_sql("_kver", f"{c}.since")
    until = version_at_least_sql("_kver", f"{c}.until")
    return (f"(forall({c}.w, cw -> array_contains(_cset, cw)) AND NOT exists({c}.u, cu -> array_contains(_cset, cu)) "
            f"AND ({c}.since IS NULL OR {since}) AND ({c}.until IS NULL OR NOT {until}) "
            f"AND CASE WHEN _v IS NULL THEN {c}.lo IS NULL "
            f"ELSE ({c}.lo IS NULL OR _v >= {c}.lo) AND ({c}.hi IS NULL OR _v <= {c}.hi) END)")


def _problem_sql() -> str:
    """Why the call cannot be asked (NULL: it can), in `api_request`'s order: the API, the Kafka version, the
    conditions, a resource a check needs; and the principal and host the decision needs."""
    known = _strings(sorted(apis.CONDITIONS))
    unknown = "filter(_given, x -> NOT array_contains(" + known + ", x))"
    missing = (f"try_element_at(filter(_reqs, r -> r.primary IS NOT NULL AND r.pv IS NULL "
               f"AND r.primary != '{apis.ARG_TOPICS}' AND NOT r.filters), 1).primary")
    words = ", ".join(f"'{a}', '{w}'" for a, w in apis.ARG_WORDS.items())
    return f"""CASE
  WHEN _key IS NULL THEN concat('unknown Kafka API ', coalesce(_api, 'NULL'))
  WHEN _kver IS NULL THEN concat('not a Kafka version: ', coalesce(_kv, 'NULL'))
  WHEN size({unknown}) > 0 THEN concat('unknown conditions ', array_join(array_sort({unknown}), ', '), '; known: ',
    array_join({known}, ', '))
  WHEN {missing} IS NOT NULL THEN concat(_pascal, ' needs ', element_at(map({words}), {missing}),
    ' to evaluate its checks')
  WHEN _p IS NULL OR instr(_p, ':') = 0 THEN concat('expected a principal in format principalType:principalName but '
    'got ', coalesce(_p, 'NULL'))
  WHEN _p = '{WILDCARD_PRINCIPAL}' THEN 'the principal {WILDCARD_PRINCIPAL} cannot make a request (Kafka throws)'
  WHEN NOT {presentable_host_sql('_h')} THEN concat('host ', coalesce(_h, 'NULL'), ' is not a client address as '
    'Java renders it: give an IPv4 address as 10.0.0.1, an IPv6 one as eight groups (0:0:0:0:0:0:0:1), or * for a '
    'host no ACL names')
END"""


# the API a call (`c`) names, among the catalog's (`s`): by key, or by name in any of `apis.api`'s spellings
_LOOKUP = ("(CASE WHEN trim(c._api) RLIKE '^[0-9]+$' THEN s.key = CAST(trim(c._api) AS INT) "
           "ELSE array_contains(s.lookup, upper(replace(trim(c._api), '_', ''))) END)")


def expand_sql(calls: str) -> str:
    """CTEs (to follow `catalog_sql`) ending in `_x`: every call of `calls` (`CALL_COLUMNS`) with `_key`, `_pascal`,
    `_notes`, `_v` (the request version the checks are gated on), `_reqs` (the requirements with a check made at
    that version: index `i`, `error`, `filters`, `per_topic`, alternatives on named resources `named` and on the
    cluster or any resource `unnamed`, the argument naming the resources `primary` and its names `pv`), `_qs` (the
    questions in the order Kafka asks them: requirement `i`, alternative `j`, `rt`, `name` (NULL: any resource),
    `op`, `arg`) and `_problem` (why the call cannot be asked, else NULL)."""
    facts = ", ".join([  # the request's facts (`apis._request_facts`)
        f"CASE WHEN _txn IS NOT NULL THEN '{apis.FACT_TXN}' END",
        f"CASE WHEN coalesce(size(_groups), 0) > 0 THEN '{apis.FACT_GROUP}' END",
        f"CASE WHEN _groups IS NOT NULL THEN '{apis.FACT_GROUP_GIVEN}' END",
        f"CASE WHEN coalesce(size(_topics), 0) > 0 THEN '{apis.FACT_TOPICS}' END",
        f"CASE WHEN _owner IS NOT NULL AND _owner != _p THEN '{apis.FACT_OTHER_OWNER}' END"])
    def implied(conditions: str, facts: str, given: str) -> str:
        """The conditions `conditions` (the API's `Implied`s) add for a request with these facts and given ones."""
        return (f"transform(filter({conditions}, m -> forall(m.f, f -> array_contains({facts}, f)) "
                f"AND NOT exists(m.a, f -> array_contains({facts}, f)) AND NOT exists(m.g, g -> array_contains({given}, g))"
                "), m -> m.c)")

    first_named = "try_element_at(filter(r.alts, c -> c.arg IS NOT NULL), 1).arg"
    cluster = sql_literal(CLUSTER_RESOURCE_NAME)

    def q(c: str, name: str) -> str:
        return f"named_struct('i', r.i, 'j', {c}.j, 'rt', {c}.rt, 'name', {name}, 'op', {c}.op, 'arg', {c}.arg)"

    questions = f"""flatten(transform(_reqs, r -> concat(
    transform(r.unnamed, c -> {q('c', f"CASE WHEN c.anyres THEN CAST(NULL AS STRING) ELSE {cluster} END")}),
    CASE WHEN r.pv IS NULL THEN CAST(array() AS ARRAY<{_QUESTION}>) ELSE concat(
      flatten(transform(filter(r.named, c -> c.arg != r.primary),
                        c -> transform(coalesce({_values_sql('c.arg')}, {_STRINGS}), v -> {q('c', 'v')}))),
      flatten(transform(r.pv, v -> transform(filter(r.named, c -> c.arg = r.primary), c -> {q('c', 'v')})))) END)))"""
    given = f"coalesce(c._conds, {_STRINGS})"
    facts_now = f"filter(array({facts}), x -> x IS NOT NULL)"
    live = (f"filter(transform(_spec_reqs, r -> named_struct('i', r.i, 'error', r.error, 'filters', r.filters, "
            f"'per_topic', r.per_topic, 'alts', filter(r.alts, a -> {_applies_sql('a')}))), r -> size(r.alts) > 0)")
    return f"""_x1 AS (
  SELECT c.*, s.key AS _key, s.pascal AS _pascal, s.notes AS _notes,
    coalesce(s.reqs, CAST(array() AS ARRAY<{_REQ}>)) AS _spec_reqs,
    coalesce(c._av, s.client_api, s.max_api) AS _v, {version_sql('c._kv')} AS _kver, {given} AS _given,
    array_distinct(concat({given}, {implied("s.implied", facts_now, given)})) AS _cset
  FROM {calls} c LEFT JOIN _api_specs s ON {_LOOKUP}),
_x5 AS (
  SELECT *, transform({live}, r -> named_struct('i', r.i, 'error', r.error, 'filters', r.filters,
    'per_topic', r.per_topic, 'named', filter(r.alts, c -> c.arg IS NOT NULL),
    'unnamed', filter(r.alts, c -> c.arg IS NULL), 'primary', {first_named},
    'pv', {_values_sql(first_named)})) AS _reqs
  FROM _x1),
_x AS (SELECT *, {questions} AS _qs, {_problem_sql()} AS _problem FROM _x5)"""


# ---- the call's outcome: `apis.api_decision` ------------------------------------------------------------------------

def _requirement_sql(unknown_allowed: bool) -> str:
    """Per applicable requirement `r` of a call whose answered questions are `_aq`: what it denies and hides (as
    `TYPE:name`), whether it fails the whole request, how many topics pass, its error code if it denies."""
    ua = "true" if unknown_allowed else "false"

    def ok(q: str) -> str:
        return f"({q}.result = '{ALLOWED}' OR ({ua} AND {q}.result = '{UNKNOWN}'))"

    cluster = sql_literal(CLUSTER_RESOURCE_NAME)
    b0 = f"exists(_aq, q -> q.i = r.i AND q.arg IS NULL AND {ok('q')})"
    blanket = f"({b0} OR exists(_aq, q -> q.i = r.i AND q.arg IS NOT NULL AND q.arg != r.primary AND {ok('q')}))"
    bad = (f"filter(r.pv, n -> NOT ({blanket} OR exists(_aq, q -> q.i = r.i AND q.arg = r.primary AND q.name = n "
           f"AND {ok('q')})))")
    u0 = "try_element_at(r.unnamed, 1)"
    label = f"concat({u0}.rt, ':', CASE WHEN {u0}.anyres THEN '*' ELSE {cluster} END)"
    n0 = "try_element_at(r.named, 1)"
    typed = f"transform({bad}, n -> concat({n0}.rt, ':', n))"
    per_topic = "r.per_topic AND coalesce(size(_topics), 0) > 0"
    no_named = "size(r.named) = 0"
    return f"""named_struct(
  'denied', CASE WHEN {no_named} THEN CASE WHEN {b0} OR r.filters THEN {_STRINGS}
                                      WHEN {per_topic} THEN transform(_topics, t -> concat('TOPIC:', t))
                                      ELSE array({label}) END
                 WHEN r.pv IS NULL OR r.filters THEN {_STRINGS} ELSE {typed} END,
  'hidden', CASE WHEN {no_named} THEN CASE WHEN NOT {b0} AND r.filters THEN array({label}) ELSE {_STRINGS} END
                 WHEN r.pv IS NULL THEN CASE WHEN r.primary != '{apis.ARG_TOPICS}' AND NOT {b0}
                                             THEN array(concat({n0}.rt, ':*')) ELSE {_STRINGS} END
                 WHEN r.filters THEN {typed} ELSE {_STRINGS} END,
  'failed', CASE WHEN {no_named} THEN NOT {b0} AND NOT r.filters WHEN r.pv IS NULL THEN false
                 ELSE NOT r.filters AND size({bad}) > 0 AND r.primary != '{apis.ARG_TOPICS}' END,
  'passed', CASE WHEN NOT {no_named} AND r.pv IS NOT NULL AND r.primary = '{apis.ARG_TOPICS}'
                 THEN size(r.pv) - size({bad}) ELSE 0 END,
  'err', CASE WHEN ({no_named} AND NOT {b0} AND NOT r.filters)
                OR (NOT {no_named} AND r.pv IS NOT NULL AND NOT r.filters AND size({bad}) > 0) THEN r.error END)"""


def _summary_sql(unknown_allowed: bool) -> str:
    """A call's (outcome, denied, hidden, error): its requirements' `_requirement_sql` structs folded in order
    (`aggregate` with a finishing step, so it is one step of the query)."""
    empty = _STRINGS
    start = (f"named_struct('denied', {empty}, 'hidden', {empty}, 'failed', false, 'passed', 0, "
             "'err', CAST(NULL AS STRING))")
    merge = ("(acc, x) -> named_struct('denied', concat(acc.denied, x.denied), 'hidden', concat(acc.hidden, x.hidden), "
             "'failed', acc.failed OR x.failed, 'passed', acc.passed + x.passed, "
             "'err', CASE WHEN acc.err != '' THEN acc.err WHEN x.err != '' THEN x.err ELSE coalesce(acc.err, x.err) END)")
    finish = (f"acc -> named_struct('outcome', CASE WHEN exists(_aq, q -> q.result = '{ERROR}') THEN '{ERROR}' "
              f"WHEN size(acc.denied) = 0 THEN '{ALLOWED}' WHEN acc.failed OR acc.passed = 0 THEN 'DENIED' "
              "ELSE 'PARTIAL' END, 'denied', acc.denied, 'hidden', acc.hidden, 'error', acc.err)")
    return f"aggregate(transform(_reqs, r -> {_requirement_sql(unknown_allowed)}), {start}, {merge}, {finish})"


def outcome_sql(answered: str) -> str:
    """CTEs ending in `_o`: `answered` (one row per question of each call, or one row with `_qq` NULL for a call
    without any: the call's columns from `expand_sql`, `_pos`, `_qq`, and the answer's `decision`, and `_aq`:
    `answered_sql` over the call's rows) plus `outcome`, `outcome_error` (the Kafka error code), `denied`,
    `hidden` of the call (`apis.api_decision`)."""
    return f"""_o1 AS (SELECT *, {_summary_sql(True)} AS _sa, {_summary_sql(False)} AS _sd FROM {answered}),
_o AS (SELECT * EXCEPT (_aq, _sa, _sd),
         CASE WHEN _sa.outcome != _sd.outcome THEN '{UNKNOWN}' ELSE _sd.outcome END AS outcome,
         CASE WHEN _sa.outcome != _sd.outcome THEN CAST(NULL AS STRING) ELSE _sd.error END AS outcome_error,
         _sd.denied AS denied, _sd.hidden AS hidden FROM _o1)"""


# every answered question of the row's call, in order (a window over the rows of `answered`)
ANSWERED = ("array_sort(collect_list(CASE WHEN _qq IS NOT NULL THEN named_struct('pos', _pos, 'i', _qq.i, 'arg', "
            "_qq.arg, 'name', _qq.name, 'result', {decision}) END) OVER (PARTITION BY _call))")


# ---- the whole question over the lake -----------------------------------------------------------------------------

ANSWER_COLUMNS = ["decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids", "coverage", "error",
                  "acl_texts"]


def keys_sql(calls: str) -> str:
    """Every key a call of `calls` could ask about (`_KEY` columns, `_name` NULL for any resource): each check of
    its API on each name the call gives, whether or not the check applies. A few more keys than `expand_sql` asks,
    from a plain join: the decisions do not wait for the expansion (a SQL function's body is analysed as a whole,
    in a bounded number of passes that grows with the longest chain of dependent steps)."""
    cluster = sql_literal(CLUSTER_RESOURCE_NAME)
    names = (f"CASE WHEN a.arg IS NULL THEN array(CASE WHEN a.anyres THEN CAST(NULL AS STRING) ELSE {cluster} END) "
             f"ELSE coalesce({_values_sql('a.arg')}, {_STRINGS}) END")
    return (f"SELECT DISTINCT c.cluster_id, c._p, c._h, a.op AS _op, a.rt AS _rtype, n AS _name, c._at "
            f"FROM {calls} c JOIN _api_specs s ON {_LOOKUP} JOIN _api_alts a ON a.key = s.key "
            f"LATERAL VIEW explode({names}) e AS n")


def lake_answers_sql(hist: str, coverage: str, settings: SqlSettings) -> Callable[[str], str]:
    """The lake's answers to the keys of relation `keys` (`keys_sql`): named resources by `decide_sql`, any
    resource (`_name` NULL) by `decide_by_type_sql`."""
    def answers(keys: str) -> str:
        named = f"(SELECT * FROM {keys} WHERE _name IS NOT NULL)"
        by_type = f"(SELECT * FROM {keys} WHERE _name IS NULL)"
        cols = ", ".join(ANSWER_COLUMNS[:-2])
        return (f"SELECT cluster_id, _p, _h, _op, _rtype, _name, _at, {cols}, CAST(NULL AS STRING) AS error, "
                f"acl_texts FROM ({decide_sql(named, hist, coverage, settings)}) UNION ALL "
                f"SELECT cluster_id, _p, _h, _op, _rtype, CAST(NULL AS STRING) AS _name, _at, {cols}, error, acl_texts "
                f"FROM ({decide_by_type_sql(by_type, hist, coverage, settings)})")
    return answers


def calls_sql(calls: str, answers: Callable[[str], str]) -> str:
    """Every call of `calls` (`CALL_COLUMNS`) answered: one row per question it asks (one row with NULL check
    columns when it asks none), with the call's `outcome`, `outcome_error`, `denied`, `hidden`, the question (`_pos`,
    `_qq`) and its answer (`ANSWER_COLUMNS`). `answers(keys)` gives the answer rows (`_KEY` columns, `_name` NULL
    for any resource, plus `ANSWER_COLUMNS`) for the keys of relation `keys` (`keys_sql`). A call that cannot be
    asked raises its `_problem` as an error."""
    cols = ", ".join(f"a.{c}" for c in ANSWER_COLUMNS)
    return f"""WITH
{catalog_sql()},
{expand_sql(calls)},
_q AS (SELECT * FROM (SELECT *, posexplode_outer(_qs) AS (_pos, _qq) FROM _x)
       WHERE CASE WHEN _problem IS NOT NULL THEN raise_error(_problem) ELSE true END),
_k AS ({keys_sql(calls)}),
_a AS ({answers("_k")}),
_qa AS (SELECT q.*, {cols}, {ANSWERED.format(decision="a.decision")} AS _aq FROM _q q LEFT JOIN _a a ON q.cluster_id = a.cluster_id AND q._p = a._p AND q._h = a._h
          AND q._qq.op = a._op AND q._qq.rt = a._rtype AND q._qq.name <=> a._name AND q._at = a._at),
{outcome_sql("_qa")}
SELECT * FROM _o"""


# ---- the SQL functions --------------------------------------------------------------------------------------------

_PARAMS = ("topics ARRAY<STRING> DEFAULT NULL, groups ARRAY<STRING> DEFAULT NULL, "
           "transactional_id STRING DEFAULT NULL, token_id STRING DEFAULT NULL, owner STRING DEFAULT NULL, "
           f"kafka_version STRING DEFAULT '{apis.LATEST_KAFKA}', api_version INT DEFAULT NULL, "
           "conditions ARRAY<STRING> DEFAULT NULL, super_users STRING DEFAULT NULL, allow_everyone BOOLEAN DEFAULT false")
RETURNS = ("cluster_id STRING, as_of_offset BIGINT, principal STRING, host STRING, api STRING, api_key INT, "
           "kafka_version STRING, api_version INT, outcome STRING, error STRING, denied ARRAY<STRING>, "
           "hidden ARRAY<STRING>, check_number INT, requirement INT, resource_type STRING, resource_name STRING, "
           "operation STRING, decision STRING, certain BOOLEAN, reason STRING, deciding_acl_ids ARRAY<STRING>, "
           "uncertain_acl_ids ARRAY<STRING>, via ARRAY<STRING>, coverage STRING, check_error STRING, "
           "notes ARRAY<STRING>")
_OUT = """SELECT cluster_id, _at AS as_of_offset, _p AS principal, _h AS host, _pascal AS api, _key AS api_key,
  _kv AS kafka_version, _v AS api_version, outcome, outcome_error AS error, denied, hidden,
  CAST(_pos + 1 AS INT) AS check_number, _qq.i AS requirement, _qq.rt AS resource_type, _qq.name AS resource_name,
  _qq.op AS operation, decision, certain, reason, deciding_acl_ids, uncertain_acl_ids,
  transform(deciding_acl_ids, i -> coalesce(element_at(acl_texts, i), i)) AS via, coverage, error AS check_error,
  _notes AS notes
FROM ({calls}) ORDER BY check_number"""


def _call_sql(f: str, at: str, frm: str = "") -> str:
    """The one call a function asks, from its parameters (`f.name`; `at` the offset expression)."""
    return (f"(SELECT CAST(0 AS BIGINT) AS _call, CAST({f}.cluster AS STRING) AS cluster_id, "
            f"CAST({f}.principal AS STRING) AS _p, CAST({f}.host AS STRING) AS _h, CAST({at} AS BIGINT) AS _at, "
            f"CAST({f}.api AS STRING) AS _api, {f}.topics AS _topics, {f}.groups AS _groups, "
            f"{f}.transactional_id AS _txn, {f}.token_id AS _token, {f}.owner AS _owner, "
            f"coalesce({f}.kafka_version, '{apis.LATEST_KAFKA}') AS _kv, {f}.api_version AS _av, "
            f"{f}.conditions AS _conds{frm})")


def api_functions(table_ref: Callable[[str], str], names: str | None = None) -> list[SqlFunction]:
    """`acl_could_call` (at an offset) and `acl_could_call_at_time` as SQL table function definitions over the
    tables `table_ref` names: one row per check the call makes (one row without a check for an API Kafka does not
    authorize), each with the call's outcome. `names`: the clusters with a replayed history
    (`Lake.replayed_clusters_sql`; by default those in `log_coverage`)."""
    hist, cov, times = table_ref("acl_history"), table_ref("log_coverage"), table_ref("offset_times")
    names = names or covered_clusters_sql(cov)
    one, at_time = "acl_could_call", "acl_could_call_at_time"

    def body(f: str, at: str, frm: str = "") -> str:
        settings = SqlSettings.of_params(f"{f}.super_users", f"{f}.allow_everyone")
        return _OUT.format(calls=calls_sql(_call_sql(f, at, frm), lake_answers_sql(hist, cov, settings)))

    ts_ms = f"CAST(unix_millis(CAST({at_time}.ts AS TIMESTAMP)) AS BIGINT)"
    time_offset = f", ({offset_at_time_sql(times, f'{at_time}.cluster', ts_ms, '_at')}) ta"
    required = (f"{one}.at_offset IS NULL", "'at_offset is NULL: give the offset to ask at (or use "
                "acl_could_call_at_time with a timestamp)'")
    common = ("STRING, api STRING, {at}, " + _PARAMS).format
    doc = ("Could the principal, from the host (as Java renders it: 10.0.0.1, 0:0:0:0:0:0:0:1), call the Kafka API "
           "(OffsetFetch, InitProducerId, ...) on these resources {when}, with that Kafka version's checks? One row "
           "per check (decision, deciding ACLs), each with the call's outcome: ALLOWED, DENIED, PARTIAL (some topics "
           "only), UNKNOWN (history cannot tell), ERROR.")
    return [
        SqlFunction(one, "cluster STRING, principal STRING, host " + common(at="at_offset BIGINT"), RETURNS,
                    doc.format(when="at the offset"),
                    guarded_sql(body(one, f"{one}.at_offset"), RETURNS, names,
                                [UNKNOWN_CLUSTER_CHECK, required, negative_offset_check(f"{one}.at_offset")])),
        SqlFunction(at_time, "cluster STRING, principal STRING, host " + common(at="ts TIMESTAMP"), RETURNS,
                    doc.format(when="at the time (the last offset at or before it)"),
                    guarded_sql(body(at_time, "ta._at", time_offset.replace(", (", " FROM (", 1)), RETURNS, names,
                                [UNKNOWN_CLUSTER_CHECK, before_history_check("ta._at", "ts")], time_offset)),
    ]


def register_api_functions(spark: SparkSession, lake: Lake, only: Collection[str] | None = None) -> list[str]:
    """Register `acl_could_call` and `acl_could_call_at_time` as temporary SQL functions over this lake; the
    `kraft-replay sql` command calls it and `kraft-replay install-sql` installs the same definitions. With `only`,
    just the functions it names.

    Example: `SELECT check_number, resource_type, resource_name, operation, decision, outcome, error FROM
    acl_could_call('prod', 'User:svc-orders', '10.0.0.1', 'OffsetFetch', 1234, groups => array('g'))`."""
    return create_temporary(spark, api_functions(lake.source, lake.replayed_clusters_sql()), only)
