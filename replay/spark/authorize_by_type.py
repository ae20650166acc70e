"""`authorizeByResourceType` (KIP-679, spec §2), for requests whose `resource_name` is null.

The probe `authorize` of the name `hardcode`, then (as Kafka 4.3.1's `AclCache.acls` builds every `AclBinding`
first) `ERROR` / `kafka_error` if a live ACL of the cluster has an ANY code, then the deny-dominance rules over the
LITERAL/PREFIXED ACLs of the type. Adding an ALLOW can only turn that second part towards ALLOWED and adding a DENY
only towards DENIED, so it is evaluated on the two extreme states (certain ALLOWs with every possible DENY; every
possible ALLOW with certain DENYs); a mix of an uncertain probe and an uncertain second part is reported UNKNOWN
(conservative, never a false certainty).
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from replay.kafka.authorizer import HARDCODE_PROBE_NAME
from replay.spark.authorize_decide import (
    ALLOWED,
    DENIED,
    ERROR,
    R_ALLOW,
    R_DENY,
    R_KAFKA_ERROR,
    R_NO_MATCH,
    R_UNCERTAIN,
    UNKNOWN,
    WILDCARD_PRINCIPAL,
    AuthorizerSettings,
    LakeTables,
    SqlSettings,
    acl_text_sql,
    decide_sql,
    history_sql,
)
from replay.spark.rules import COV_COMPLETE, live_sql, run_sql

BY_TYPE_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_at"]

_ACL_STRUCT = "ARRAY<STRUCT<k: STRING, n: STRING, allow: BOOLEAN, c: BOOLEAN, id: STRING, t: STRING>>"
_DECIDED = ["decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids", "coverage", "error"]


def _state_sql(state: str) -> tuple[str, dict[str, str]]:
    """The §2 steps 2-5 over `_acls` (structs k, n, allow, c, id, t) in one extreme state: `min` = certain ALLOWs
    + every possible DENY, `max` = every possible ALLOW + certain DENYs. A select list adding `_s_wdl` (wildcard
    DENYs), `_s_wa` (wildcard ALLOWs), `_s_nm` (each other ALLOW with the DENYs that dominate it), for `_s` =
    `_min` / `_max`, and over those columns the expressions `allowed`, `wd` (a wildcard DENY) and `ids` (the
    deciding ACLs). Two steps, so that no lambda nests deeper than three."""
    s = f"_{state}"
    allows, denies = (("x.allow AND x.c", "NOT x.allow") if state == "min" else ("x.allow", "NOT x.allow AND x.c"))
    al, de = f"filter(_acls, x -> {allows})", f"filter(_acls, x -> {denies})"
    columns = (f"filter({de}, d -> d.k = 'L' AND d.n = '*') AS {s}_wdl, "
               f"filter({al}, a -> a.k = 'L' AND a.n = '*') AS {s}_wa, "
               f"transform(filter({al}, a -> NOT (a.k = 'L' AND a.n = '*')), a -> named_struct('id', a.id, "
               f"'lit', filter({de}, d -> d.k = 'L' AND d.n != '*' AND d.n = a.n AND a.k = 'L'), "
               f"'pre', filter({de}, d -> d.k = 'P' AND length(d.n) > 0 AND startswith(a.n, d.n)))) AS {s}_nm")
    free = f"filter({s}_nm, x -> size(x.lit) = 0 AND size(x.pre) = 0)"
    # the DENYs that dominate: the literal ones, else the shortest dominating prefix (as the reference reports)
    dominators = (f"array_sort(array_distinct(flatten(transform({s}_nm, x -> transform(CASE WHEN size(x.lit) > 0 "
                  "THEN x.lit ELSE filter(x.pre, p -> length(p.n) = array_min(transform(x.pre, q -> length(q.n)))) "
                  "END, z -> z.id)))))")
    return columns, {
        "allowed": f"(size({s}_wdl) = 0 AND (size({s}_wa) > 0 OR size({free}) > 0))",
        "wd": f"(size({s}_wdl) > 0)",
        "ids": (f"CASE WHEN size({s}_wdl) > 0 THEN array_sort(transform({s}_wdl, z -> z.id)) "
                f"WHEN size({s}_wa) > 0 THEN array_sort(transform({s}_wa, z -> z.id)) "
                f"WHEN size({free}) > 0 THEN array_sort(array_distinct(transform({free}, z -> z.id))) "
                f"ELSE {dominators} END")}


def decide_by_type_sql(keys: str, hist: str, coverage: str, settings: SqlSettings) -> str:
    """The by-type decision for every distinct key of `keys` (`BY_TYPE_KEY` columns) over `hist` (acl_history) and
    `coverage` (log_coverage): the key columns plus `decision`, `certain`, `reason`, `deciding_acl_ids`,
    `uncertain_acl_ids`, `coverage`, `error` (module docstring; spec §2) and `acl_texts` (matching ACL id -> its
    line, as `decide_sql` gives). One text for the DataFrame API and the SQL table functions, as `decide_sql`."""
    k = ", ".join(BY_TYPE_KEY)
    kk = ", ".join(f"k.{c}" for c in BY_TYPE_KEY)
    on = " AND ".join(f"p.{c} = a.{c}" for c in BY_TYPE_KEY)
    certain, maybe = live_sql("k._at", "h")
    probe = decide_sql(f"(SELECT {k}, '{HARDCODE_PROBE_NAME}' AS _name FROM _bt_k)", hist, coverage, settings)
    # Kafka's acls(filter) turns every stored ACL of the cluster into an AclBinding before walking them; ACLs with
    # an ANY code (only a raw log can hold one) make it throw. Few by nature: a join on the cluster.
    unbindable = ("(h.resource_type = 'ANY' OR h.pattern_type IN ('ANY', 'MATCH') OR h.operation = 'ANY' "
                  "OR h.permission_type = 'ANY')")
    (lo_cols, lo), (hi_cols, hi) = _state_sql("min"), _state_sql("max")
    probe_allowed = f"(_pr_certain AND _pr_decision = '{ALLOWED}')"
    probe_denied = f"(_pr_certain AND _pr_decision = '{DENIED}')"
    ub_c, ub_u = "coalesce(size(_ub_c), 0) > 0", "coalesce(size(_ub_u), 0) > 0"
    known = f"_pr_coverage = '{COV_COMPLETE}'"
    return f"""WITH
_bt_k AS (SELECT DISTINCT {k} FROM {keys}),
_bt_p AS (SELECT {k}, decision AS _pr_decision, certain AS _pr_certain, reason AS _pr_reason,
            deciding_acl_ids AS _pr_deciding, uncertain_acl_ids AS _pr_uncertain, coverage AS _pr_coverage,
            acl_texts AS _pr_texts
          FROM ({probe})),
_bt_h AS (SELECT * FROM ({history_sql(hist)}) WHERE pattern_type IN ('LITERAL', 'PREFIXED')),
_bt_a AS (
  SELECT {kk}, collect_list(named_struct('k', h._pk, 'n', h._pn, 'allow', h._allow, 'c', {certain}, 'id', h.acl_id,
    't', {acl_text_sql("h.")})) AS _acls
  FROM (SELECT {k}, explode(array_distinct(array(_p, '{WILDCARD_PRINCIPAL}'))) AS _pp FROM _bt_k) k
  JOIN _bt_h h ON k.cluster_id = h.cluster_id AND k._rtype = h._rtype AND k._pp = h.principal
  WHERE {maybe} AND (h.host = '*' OR h.host = k._h) AND (h.operation = 'ALL' OR h.operation = k._op)
  GROUP BY {kk}),
_bt_u AS (
  SELECT k.cluster_id, k._at, array_sort(collect_set(CASE WHEN {certain} THEN h.acl_id END)) AS _ub_c,
    array_sort(collect_set(CASE WHEN NOT {certain} THEN h.acl_id END)) AS _ub_u
  FROM (SELECT DISTINCT cluster_id, _at FROM _bt_k) k JOIN {hist} h ON k.cluster_id = h.cluster_id
  WHERE {unbindable} AND {maybe} GROUP BY k.cluster_id, k._at),
_bt_d AS (
  SELECT p.*, coalesce(a._acls, CAST(array() AS {_ACL_STRUCT})) AS _acls, u._ub_c, u._ub_u
  FROM _bt_p p LEFT JOIN _bt_a a ON {on} LEFT JOIN _bt_u u ON p.cluster_id = u.cluster_id AND p._at = u._at),
_bt_s AS (SELECT *, {lo_cols}, {hi_cols} FROM _bt_d),
_bt_f AS (
  SELECT *, {probe_allowed} AS _pa, {probe_denied} AND {ub_c} AS _throws,
    {probe_denied} AND NOT {hi["allowed"]} AND ({known} OR {hi["wd"]}) AND NOT {ub_u} AS _cd,
    {known} AND {lo["allowed"]} AND NOT {ub_c} AND NOT {ub_u} AS _ca, {hi["wd"]} AS _max_wd,
    {lo["ids"]} AS _min_ids, {hi["ids"]} AS _max_ids
  FROM _bt_s)
SELECT {k}, CASE WHEN _pa THEN '{ALLOWED}' WHEN _throws THEN '{ERROR}' WHEN _ca THEN '{ALLOWED}'
                 WHEN _cd THEN '{DENIED}' ELSE '{UNKNOWN}' END AS decision, _pa OR _throws OR _ca OR _cd AS certain,
  CASE WHEN _pa THEN _pr_reason WHEN _throws THEN '{R_KAFKA_ERROR}' WHEN _ca THEN '{R_ALLOW}'
       WHEN _cd AND _max_wd THEN '{R_DENY}' WHEN _cd THEN '{R_NO_MATCH}' ELSE '{R_UNCERTAIN}' END
    AS reason,
  CASE WHEN _pa THEN _pr_deciding WHEN _throws THEN _ub_c WHEN _ca THEN _min_ids WHEN _cd THEN _max_ids
       ELSE array_sort(array_distinct(concat(transform(_acls, z -> z.id), _pr_deciding))) END AS deciding_acl_ids,
  CASE WHEN _pa THEN _pr_uncertain ELSE array_sort(array_distinct(concat(
    transform(filter(_acls, x -> NOT x.c), z -> z.id), _pr_uncertain, coalesce(_ub_u, CAST(array() AS ARRAY<STRING>)))))
    END AS uncertain_acl_ids,
  _pr_coverage AS coverage,
  CASE WHEN _throws THEN concat('Kafka throws IllegalArgumentException in authorizeByResourceType: stored ACL(s) '
    'with an ANY code cannot become an AclBinding: ', array_join(_ub_c, ', ')) END AS error,
  map_from_entries(array_distinct(concat(map_entries(_pr_texts), transform(_acls, z -> named_struct('key', z.id,
    'value', z.t))))) AS acl_texts
FROM _bt_f"""


def decide_by_resource_type(keys: DataFrame, tables: LakeTables, settings: AuthorizerSettings) -> DataFrame:
    """Decide distinct by-type keys (`BY_TYPE_KEY`); spec §2. Runs `decide_by_type_sql`."""
    return run_sql(keys.sparkSession, decide_by_type_sql("{keys}", "{hist}", "{cov}", SqlSettings.of_markers()),
                   settings.params(), keys=keys.select(*BY_TYPE_KEY), hist=tables.history,
                   cov=tables.coverage).select(*BY_TYPE_KEY, *_DECIDED)
