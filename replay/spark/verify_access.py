"""Was each logged authorization decision the one the replayed ACLs gave at that moment? The lake's twin of
`replay.kafka.verify_log` (same rule, same sentences), as one SQL query text (`verify_sql`) over the logged
decisions and the lake's tables, run from Python (`verify_access`) and embedded in the SQL table function
`acl_verify_access` (`replay.spark.access_sql`), so that both give the same rows.

How, without a range join: each decision's window (the offsets as of its time minus and plus the skew) comes from
the as-of rule of `rules.offsets_at_times_sql`; the ACL changes inside the window are found by an equi-join on
offset buckets; each (request, offset) is decided once by the batch authorizer's query (`decide_sql`), which also
says whether every state the history allows there decides it the same way (covered, complete, certain, no uncertain
matching ACL: the reference's `exact_decision`).
"""

from __future__ import annotations

import string
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from replay.kafka import verify_log as why
from replay.kafka.authorizer_log import DEFAULT_ALLOW, DEFAULT_DENY, MATCHING_ACL, RBAC, SUPER_USER
from replay.spark.authorize_decide import (
    R_ALLOW,
    R_ALLOW_EVERYONE,
    R_DENY,
    R_NO_MATCH,
    R_SUPER_USER,
    AuthorizerSettings,
    LakeTables,
    SqlSettings,
    acl_text_sql,
    decide_sql,
    sql_literal,
)
from replay.spark.authorize_requests import presentable_host_sql
from replay.spark.rules import COV_COMPLETE, markers, offsets_at_times_sql, run_sql
from replay.spark.tables import ACCESS_EVENTS, SCHEMAS, Lake

BUCKET = 4096  # offsets per bucket of the change join: a window of a few seconds spans one or two
VERDICT_COLUMNS = ["verdict", "why", "offsets", "acl_ids"]
_EVENT_COLUMNS = [f.name for f in SCHEMAS[ACCESS_EVENTS].fields]
_RULE_OF_REASON = {R_SUPER_USER: SUPER_USER, R_DENY: MATCHING_ACL, R_ALLOW: MATCHING_ACL,
                   R_ALLOW_EVERYONE: DEFAULT_ALLOW, R_NO_MATCH: DEFAULT_DENY}


def fill_sql(template: str, **values: str) -> str:
    """SQL: a `verify_log` sentence template filled from SQL expressions (the text `template.format` gives)."""
    parts = []
    for literal, name, _spec, _conv in string.Formatter().parse(template):
        if literal:
            parts.append(sql_literal(literal))
        if name is not None:
            parts.append(f"CAST({values[name]} AS STRING)")
    return f"concat({', '.join(parts)})" if len(parts) > 1 else parts[0]


def _not_askable_sql(e: str) -> str:
    """SQL: `verify_log.not_askable` over the event row `e` (NULL: it can be asked)."""
    return f"""CASE WHEN {e}.time IS NULL THEN {sql_literal(why.WHY_NO_TIME)}
    WHEN {e}.rule_kind <=> '{RBAC}' THEN {sql_literal(why.WHY_RBAC)}
    WHEN coalesce({e}.host, '') = '' THEN {sql_literal(why.WHY_NO_HOST)}
    WHEN {e}.pattern_type != 'LITERAL' THEN {fill_sql(why.WHY_PATTERN, pattern_type=f'{e}.pattern_type')}
    WHEN {e}.host = '*' OR NOT {presentable_host_sql(f'{e}.host')} THEN {fill_sql(why.WHY_HOST, host=f'{e}.host')}
    WHEN NOT contains({e}.principal, ':') OR {e}.principal = 'User:*'
      THEN {fill_sql(why.WHY_PRINCIPAL, principal=f'{e}.principal')} END"""


def verify_sql(events: str, times: str, changes: str, hist: str, cov: str, skew: str, settings: SqlSettings) -> str:
    """The verdict on every row of `events` (`access_events` columns; `event_key` unique per cluster) against the
    replayed tables (offset_times, acl_events, acl_history, log_coverage): its columns plus `verdict`, `why`,
    `offsets` (those whose states were compared) and `acl_ids` (a consistent line's deciding ACLs). `skew`: the
    clock skew in ms (a SQL expression)."""
    rule = "CASE d.reason " + " ".join(f"WHEN '{r}' THEN '{k}'" for r, k in _RULE_OF_REASON.items()) + \
        " ELSE d.reason END"
    named = acl_text_sql("f.acl_")
    mismatch = f"""CASE
      WHEN f.rule_kind <=> '{SUPER_USER}' AND _rule != '{SUPER_USER}' THEN {fill_sql(why.WHY_SUPER_USER,
                                                                                    principal='f.principal')}
      WHEN _dec != f.decision THEN {fill_sql(why.WHY_DECISION, result='_dec', rule='_rule', logged='f.decision')}
      WHEN f.rule_kind IS NULL THEN NULL
      WHEN _rule != f.rule_kind THEN {fill_sql(why.WHY_RULE, rule='_rule', logged_rule='f.rule_kind')}
      WHEN _rule = '{MATCHING_ACL}' AND NOT exists(_ids, i -> element_at(_texts, i) = {named})
        THEN {sql_literal(why.WHY_ACL)} END"""
    decided = decide_sql("_va_k", hist, cov, settings)
    # each decision's window ends, as two probes of the as-of rule: its time minus and plus the skew
    probes = (f"(SELECT cluster_id, time - {skew} AS _t, event_key, 1 AS _side FROM _va_e WHERE _pre IS NULL "
              f"UNION ALL SELECT cluster_id, time + {skew}, event_key, 2 FROM _va_e WHERE _pre IS NULL)")
    return f"""WITH
_va_e AS (SELECT e.*, {_not_askable_sql('e')} AS _pre FROM {events} e),
_va_a AS (
  SELECT cluster_id, event_key, max(CASE WHEN _side = 1 THEN _at END) AS _lo, max(CASE WHEN _side = 2 THEN _at END) AS _hi
  FROM ({offsets_at_times_sql(probes, times, ("BINARY event_key", "INT _side"))}) GROUP BY cluster_id, event_key),
_va_s AS (SELECT cluster_id, min(`offset`) AS _start FROM {times} GROUP BY cluster_id),
_va_w AS (
  SELECT e.*, a._lo, a._hi, coalesce(a._lo, s._start) AS _first, a._lo IS NULL AS _clipped
  FROM _va_e e
  LEFT JOIN _va_a a ON a.cluster_id = e.cluster_id AND a.event_key = e.event_key
  LEFT JOIN _va_s s ON s.cluster_id = e.cluster_id),
_va_ch AS (SELECT DISTINCT cluster_id, `offset` AS _c, div(`offset`, {BUCKET}) AS _b FROM {changes}),
_va_q AS (
  SELECT b.* EXCEPT (_bk), coalesce(ch._c, b._first) AS _o
  FROM (SELECT *, explode(concat(array(CAST(NULL AS BIGINT)), CASE WHEN _hi > _first
          THEN sequence(div(_first, {BUCKET}), div(_hi, {BUCKET})) ELSE array() END)) AS _bk
        FROM _va_w WHERE _pre IS NULL AND _hi IS NOT NULL) b
  LEFT JOIN _va_ch ch ON ch.cluster_id = b.cluster_id AND ch._b = b._bk AND ch._c > b._first AND ch._c <= b._hi
  WHERE b._bk IS NULL OR ch._c IS NOT NULL),
_va_k AS (SELECT DISTINCT cluster_id, principal AS _p, host AS _h, operation AS _op, resource_type AS _rtype,
  resource_name AS _name, _o AS _at FROM _va_q),
_va_x AS (
  SELECT f.*, d.decision AS _dec, {rule} AS _rule, d.deciding_acl_ids AS _ids, d.acl_texts AS _texts,
    d.coverage = '{COV_COMPLETE}' AND d.certain AND size(d.uncertain_acl_ids) = 0 AS _exact
  FROM _va_q f JOIN ({decided}) d
    ON d.cluster_id = f.cluster_id AND d._p = f.principal AND d._h = f.host AND d._op = f.operation
    AND d._rtype = f.resource_type AND d._name = f.resource_name AND d._at = f._o),
_va_y AS (
  SELECT *, CASE WHEN NOT _exact THEN 'u' WHEN _why IS NULL THEN 'c' ELSE 'i' END AS _st FROM (
    SELECT event_key, cluster_id, _o, _exact,
      CASE WHEN _exact THEN {mismatch} END AS _why,
      filter(_ids, i -> f.acl_resource_type IS NULL OR element_at(_texts, i) = {named}) AS _ok_ids
    FROM _va_x f)),
_va_v AS (
  SELECT event_key, cluster_id, array_sort(collect_set(_o)) AS _offsets,
    min(CASE WHEN _st = 'c' THEN named_struct('o', _o, 'ids', _ok_ids) END) AS _c,
    min(CASE WHEN _st = 'u' THEN _o END) AS _u,
    min(CASE WHEN _st = 'i' THEN named_struct('o', _o, 'w', _why) END) AS _i
  FROM _va_y GROUP BY event_key, cluster_id)
SELECT {', '.join(f'w.`{c}`' for c in _EVENT_COLUMNS)},
  CASE WHEN w._pre IS NOT NULL OR w._hi IS NULL THEN '{why.UNKNOWN}' WHEN v._c IS NOT NULL THEN '{why.CONSISTENT}'
       WHEN w._clipped OR v._u IS NOT NULL THEN '{why.UNKNOWN}' ELSE '{why.INCONSISTENT}' END AS verdict,
  CASE WHEN w._pre IS NOT NULL THEN w._pre WHEN w._hi IS NULL THEN {sql_literal(why.WHY_BEFORE)}
       WHEN v._c IS NOT NULL THEN {fill_sql(why.WHY_CONSISTENT, offset='v._c.o')}
       WHEN w._clipped THEN {fill_sql(why.WHY_CLIPPED, skew_ms=skew)}
       WHEN v._u IS NOT NULL THEN {fill_sql(why.WHY_NOT_EXACT, offset='v._u')}
       ELSE {fill_sql(why.WHY_AT, offset='v._i.o', why='v._i.w')} END AS why,
  CASE WHEN w._pre IS NULL AND w._hi IS NOT NULL THEN v._offsets END AS offsets,
  coalesce(v._c.ids, CAST(array() AS ARRAY<STRING>)) AS acl_ids
FROM _va_w w LEFT JOIN _va_v v ON v.cluster_id = w.cluster_id AND v.event_key = w.event_key"""


def verify_access(lake: Lake, events: DataFrame, super_users: str | Sequence[str] | None = "",
                  allow_everyone: bool | str | None = False, skew_ms: int = why.DEFAULT_SKEW_MS) -> DataFrame:
    """The verdict on every logged decision of `events` (rows of `access_events`, or `access_ingest.read_logs` rows
    as `access_rows` makes them) against the lake's replayed history: their columns plus `VERDICT_COLUMNS`. Rows of
    one `event_key` are one decision (the same line of the same broker's log)."""
    return run_verified(lake, events, lambda verdicts, _values: verdicts, {}, super_users, allow_everyone, skew_ms)


def run_verified(lake: Lake, events: DataFrame, build: Callable[[str, dict[str, str]], str], values: dict[str, Any],
                 super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False,
                 skew_ms: int = why.DEFAULT_SKEW_MS) -> DataFrame:
    """Run `build(verdicts, markers)` from Python: a query over `verify_sql`'s text (`verdicts`, a subquery) for
    `events`, with `values` bound to the parameter markers `build` gets for them."""
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    values = {**values, **settings.params(), "skew_ms": int(skew_ms)}
    m = markers(values)
    verdicts = verify_sql("{events}", "{times}", "{changes}", "{hist}", "{cov}", f"CAST({m['skew_ms']} AS BIGINT)",
                          SqlSettings(m["super_users"], m["allow_everyone"]))
    return run_sql(events.sparkSession, build(verdicts, m), values,
                   events=events.select(*_EVENT_COLUMNS).dropDuplicates(["cluster_id", "event_key"]),
                   times=tables.offset_times, changes=lake.read("acl_events"), hist=tables.history,
                   cov=tables.coverage)


def verdicts_of(lake: Lake, cluster: str, start: int | None = None, end: int | None = None,
                super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False,
                skew_ms: int = why.DEFAULT_SKEW_MS) -> DataFrame:
    """`verify_access` over the decisions `access_events` holds for `cluster`, logged in [start, end] (epoch ms)."""
    events = lake.read(ACCESS_EVENTS).where(F.col("cluster_id") == cluster)
    if start is not None:
        events = events.where(F.col("time") >= start)
    if end is not None:
        events = events.where(F.col("time") <= end)
    return verify_access(lake, events, super_users, allow_everyone, skew_ms)
