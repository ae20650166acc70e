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
    decide_sql,
    history_sql,
)
from replay.spark.rules import COV_COMPLETE, live_sql, run_sql

BY_TYPE_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_at"]

_ACL_STRUCT = "ARRAY<STRUCT<k: STRING, n: STRING, allow: BOOLEAN, c: BOOLEAN, id: STRING>>"


def _state_sql(arr: str, state: str) -> dict[str, str]:
    """The §2 steps 2-5 over the ACL array `arr` (structs k, n, allow, c, id) in one extreme state:
    `min` = certain ALLOWs + every possible DENY, `max` = every possible ALLOW + certain DENYs."""
    if state == "min":
        allows = f"filter({arr}, x -> x.allow AND x.c)"
        denies = f"filter({arr}, x -> NOT x.allow)"
    else:
        allows = f"filter({arr}, x -> x.allow)"
        denies = f"filter({arr}, x -> NOT x.allow AND x.c)"
    wd = f"filter({denies}, d -> d.k = 'L' AND d.n = '*')"
    wa = f"filter({allows}, a -> a.k = 'L' AND a.n = '*')"
    named = f"filter({allows}, a -> NOT (a.k = 'L' AND a.n = '*'))"
    lit_dom = f"filter({denies}, d -> d.k = 'L' AND d.n != '*' AND d.n = a.n AND a.k = 'L')"
    pre_dom = f"filter({denies}, d -> d.k = 'P' AND length(d.n) > 0 AND startswith(a.n, d.n))"
    dominated = f"(size({lit_dom}) > 0 OR size({pre_dom}) > 0)"
    free = f"filter({named}, a -> NOT {dominated})"
    # the DENYs that dominate: the literal ones, else the shortest dominating prefix (as the reference reports)
    shortest = f"filter({pre_dom}, p -> length(p.n) = array_min(transform({pre_dom}, q -> length(q.n))))"
    dominators = (f"array_sort(array_distinct(flatten(transform({named}, a -> transform(CASE WHEN "
                  f"size({lit_dom}) > 0 THEN {lit_dom} ELSE {shortest} END, z -> z.id)))))")
    allowed = f"(size({wd}) = 0 AND (size({wa}) > 0 OR size({free}) > 0))"
    ids = (f"CASE WHEN size({wd}) > 0 THEN array_sort(transform({wd}, z -> z.id)) "
           f"WHEN size({wa}) > 0 THEN array_sort(transform({wa}, z -> z.id)) "
           f"WHEN size({free}) > 0 THEN array_sort(array_distinct(transform({free}, z -> z.id))) "
           f"ELSE {dominators} END")
    return {"allowed": allowed, "wildcard_deny": f"(size({wd}) > 0)", "ids": ids}


def decide_by_type_sql(keys: str, hist: str, coverage: str, settings: SqlSettings) -> str:
    """The by-type decision for every distinct key of `keys` (`BY_TYPE_KEY` columns) over `hist` (acl_history) and
    `coverage` (log_coverage): the key columns plus `decision`, `certain`, `reason`, `deciding_acl_ids`,
    `uncertain_acl_ids`, `coverage`, `error` (module docstring; spec §2). One text for the DataFrame API and the
    SQL table functions, as `decide_sql`."""
    k = ", ".join(BY_TYPE_KEY)
    kk = ", ".join(f"k.{c}" for c in BY_TYPE_KEY)
    on = " AND ".join(f"p.{c} = a.{c}" for c in BY_TYPE_KEY)
    certain, maybe = live_sql("k._at", "h")
    probe = decide_sql(f"(SELECT {k}, '{HARDCODE_PROBE_NAME}' AS _name FROM _bt_k)", hist, coverage, settings)
    # Kafka's acls(filter) turns every stored ACL of the cluster into an AclBinding before walking them; ACLs with
    # an ANY code (only a raw log can hold one) make it throw. Few by nature: a join on the cluster.
    unbindable = ("(h.resource_type = 'ANY' OR h.pattern_type IN ('ANY', 'MATCH') OR h.operation = 'ANY' "
                  "OR h.permission_type = 'ANY')")
    lo, hi = _state_sql("_acls", "min"), _state_sql("_acls", "max")
    probe_allowed = f"(_pr_certain AND _pr_decision = '{ALLOWED}')"
    probe_denied = f"(_pr_certain AND _pr_decision = '{DENIED}')"
    ub_c, ub_u = "coalesce(size(_ub_c), 0) > 0", "coalesce(size(_ub_u), 0) > 0"
    known = f"_pr_coverage = '{COV_COMPLETE}'"
    return f"""WITH
_bt_k AS (SELECT DISTINCT {k} FROM {keys}),
_bt_p AS (SELECT {k}, decision AS _pr_decision, certain AS _pr_certain, reason AS _pr_reason,
            deciding_acl_ids AS _pr_deciding, uncertain_acl_ids AS _pr_uncertain, coverage AS _pr_coverage
          FROM ({probe})),
_bt_h AS (SELECT * FROM ({history_sql(hist)}) WHERE pattern_type IN ('LITERAL', 'PREFIXED')),
_bt_a AS (
  SELECT {kk}, collect_list(named_struct('k', h._pk, 'n', h._pn, 'allow', h._allow, 'c', {certain}, 'id', h.acl_id))
    AS _acls
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
_bt_f AS (
  SELECT *, {probe_allowed} AS _pa, {probe_denied} AND {ub_c} AS _throws,
    {probe_denied} AND NOT {hi["allowed"]} AND ({known} OR {hi["wildcard_deny"]}) AND NOT {ub_u} AS _cd,
    {known} AND {lo["allowed"]} AND NOT {ub_c} AND NOT {ub_u} AS _ca
  FROM _bt_d),
_bt_g AS (
  SELECT *, CASE WHEN _pa THEN '{ALLOWED}' WHEN _throws THEN '{ERROR}' WHEN _ca THEN '{ALLOWED}'
                 WHEN _cd THEN '{DENIED}' ELSE '{UNKNOWN}' END AS decision
  FROM _bt_f)
SELECT {k}, decision, decision != '{UNKNOWN}' AS certain,
  CASE WHEN _pa THEN _pr_reason WHEN _throws THEN '{R_KAFKA_ERROR}' WHEN _ca THEN '{R_ALLOW}'
       WHEN _cd AND {hi["wildcard_deny"]} THEN '{R_DENY}' WHEN _cd THEN '{R_NO_MATCH}' ELSE '{R_UNCERTAIN}' END
    AS reason,
  CASE WHEN _pa THEN _pr_deciding WHEN _throws THEN _ub_c WHEN _ca THEN {lo["ids"]} WHEN _cd THEN {hi["ids"]}
       ELSE array_sort(array_distinct(concat(transform(_acls, z -> z.id), _pr_deciding))) END AS deciding_acl_ids,
  CASE WHEN _pa THEN _pr_uncertain ELSE array_sort(array_distinct(concat(
    transform(filter(_acls, x -> NOT x.c), z -> z.id), _pr_uncertain, coalesce(_ub_u, CAST(array() AS ARRAY<STRING>)))))
    END AS uncertain_acl_ids,
  _pr_coverage AS coverage,
  CASE WHEN _throws THEN concat('Kafka throws IllegalArgumentException in authorizeByResourceType: stored ACL(s) '
    'with an ANY code cannot become an AclBinding: ', array_join(_ub_c, ', ')) END AS error
FROM _bt_g"""


def decide_by_resource_type(keys: DataFrame, tables: LakeTables, settings: AuthorizerSettings) -> DataFrame:
    """Decide distinct by-type keys (`BY_TYPE_KEY`); spec §2. Runs `decide_by_type_sql`."""
    return run_sql(keys.sparkSession, decide_by_type_sql("{keys}", "{hist}", "{cov}", SqlSettings.of_markers()),
                   settings.params(), keys=keys.select(*BY_TYPE_KEY), hist=tables.history, cov=tables.coverage)
