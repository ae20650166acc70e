"""`authorizeByResourceType` (KIP-679, spec §2), for requests whose `resource_name` is null.

The probe `authorize` of the name `hardcode`, then (as Kafka 4.3.1's `AclCache.acls` builds every `AclBinding`
first) `ERROR` / `kafka_error` if a live ACL of the cluster has an ANY code, then the deny-dominance rules over the
LITERAL/PREFIXED ACLs of the type. Adding an ALLOW can only turn that second part towards ALLOWED and adding a DENY
only towards DENIED, so it is evaluated on the two extreme states (certain ALLOWs with every possible DENY; every
possible ALLOW with certain DENYs); a mix of an uncertain probe and an uncertain second part is reported UNKNOWN
(conservative, never a false certainty).
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

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
    decide_keys,
    empty_ids,
)
from replay.spark.queries import certainly_live, live_or_maybe
from replay.spark.rules import COV_COMPLETE
from replay.spark.tables import ACL_FIELDS

BY_TYPE_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_at"]


def _history(history: DataFrame) -> DataFrame:
    return history.select(
        "cluster_id", "acl_id", *ACL_FIELDS, "valid_from_offset", "valid_from_min_offset", "valid_to_offset",
        "valid_to_min_offset",
        F.col("resource_type").alias("_rtype"),
        F.when(F.col("pattern_type") == "LITERAL", "L").otherwise("P").alias("_pk"),
        F.col("resource_name").alias("_pn"),
        (F.col("permission_type") == "ALLOW").alias("_allow"))


def _principals(p: Column) -> Column:
    return F.array_distinct(F.array(p, F.lit(WILDCARD_PRINCIPAL)))


def _live(at: str) -> tuple[Column, Column]:
    """(certainly live, possibly or certainly live) at column `at` for an acl_history row."""
    return certainly_live(at), live_or_maybe(at)


def _bt_state_exprs(arr: str, state: str) -> dict[str, Column]:
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
    lit_dom = "filter({denies}, d -> d.k = 'L' AND d.n != '*' AND d.n = a.n AND a.k = 'L')"
    pre_dom = "filter({denies}, d -> d.k = 'P' AND length(d.n) > 0 AND startswith(a.n, d.n))"
    dominated = (f"(size({lit_dom.format(denies=denies)}) > 0 OR size({pre_dom.format(denies=denies)}) > 0)")
    free = f"filter({named}, a -> NOT {dominated})"
    # the DENYs that dominate: the literal ones, else the shortest dominating prefix (as the reference reports)
    shortest = (f"filter({pre_dom.format(denies=denies)}, p -> length(p.n) = "
                f"array_min(transform({pre_dom.format(denies=denies)}, q -> length(q.n))))")
    dominators = (f"array_sort(array_distinct(flatten(transform({named}, a -> transform(CASE WHEN "
                  f"size({lit_dom.format(denies=denies)}) > 0 THEN {lit_dom.format(denies=denies)} "
                  f"ELSE {shortest} END, z -> z.id)))))")
    allowed = f"(size({wd}) = 0 AND (size({wa}) > 0 OR size({free}) > 0))"
    ids = (f"CASE WHEN size({wd}) > 0 THEN array_sort(transform({wd}, z -> z.id)) "
           f"WHEN size({wa}) > 0 THEN array_sort(transform({wa}, z -> z.id)) "
           f"WHEN size({free}) > 0 THEN array_sort(array_distinct(transform({free}, z -> z.id))) "
           f"ELSE {dominators} END")
    return {"allowed": F.expr(allowed), "wildcard_deny": F.expr(f"size({wd}) > 0"), "ids": F.expr(ids)}


def decide_by_resource_type(keys: DataFrame, tables: LakeTables, settings: AuthorizerSettings) -> DataFrame:
    """Decide distinct by-type keys (`BY_TYPE_KEY`); spec §2."""
    keys = keys.select(*BY_TYPE_KEY).distinct()
    probe = (decide_keys(keys.withColumn("_name", F.lit(HARDCODE_PROBE_NAME)), tables, settings)
             .select(*BY_TYPE_KEY, *[F.col(c).alias("_pr_" + c) for c in
                                 ("decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids",
                                  "coverage")]))
    hist = _history(tables.history).where(F.col("pattern_type").isin("LITERAL", "PREFIXED"))
    k = keys.select(*BY_TYPE_KEY, F.explode(_principals(F.col("_p"))).alias("_pp"))
    j = k.join(hist.withColumnRenamed("principal", "_pp"), ["cluster_id", "_rtype", "_pp"])
    certain, maybe = _live("_at")
    j = j.where(maybe & ((F.col("host") == "*") | (F.col("host") == F.col("_h")))
                & ((F.col("operation") == "ALL") | (F.col("operation") == F.col("_op"))))
    acls = j.groupBy(*BY_TYPE_KEY).agg(F.collect_list(F.struct(
        F.col("_pk").alias("k"), F.col("_pn").alias("n"), F.col("_allow").alias("allow"), certain.alias("c"),
        F.col("acl_id").alias("id"))).alias("_acls"))
    d = probe.join(acls, BY_TYPE_KEY, "left").withColumn(
        "_acls", F.coalesce(F.col("_acls"), F.array().cast(
            "array<struct<k:string,n:string,allow:boolean,c:boolean,id:string>>")))
    # Kafka's acls(filter) turns every stored ACL of the cluster into an AclBinding before walking them; ACLs with
    # an ANY code (only a raw log can hold one) make it throw. Few by nature: a join on the cluster.
    unbindable = (_history(tables.history)
                  .where((F.col("resource_type") == "ANY") | F.col("pattern_type").isin("ANY", "MATCH")
                         | (F.col("operation") == "ANY") | (F.col("permission_type") == "ANY"))
                  .drop("_rtype"))
    ub = (keys.select("cluster_id", "_at").distinct().join(unbindable, "cluster_id").where(maybe)
          .groupBy("cluster_id", "_at").agg(F.array_sort(F.collect_set(F.when(certain, F.col("acl_id")))).alias("_ub_c"),
                                            F.array_sort(F.collect_set(F.when(~certain, F.col("acl_id")))).alias("_ub_u")))
    d = d.join(ub, ["cluster_id", "_at"], "left")
    ub_c = F.coalesce(F.size("_ub_c"), F.lit(0)) > 0
    ub_u = F.coalesce(F.size("_ub_u"), F.lit(0)) > 0
    lo = _bt_state_exprs("_acls", "min")
    hi = _bt_state_exprs("_acls", "max")
    known = F.col("_pr_coverage") == COV_COMPLETE
    probe_allowed = F.col("_pr_certain") & (F.col("_pr_decision") == ALLOWED)
    probe_denied = F.col("_pr_certain") & (F.col("_pr_decision") == DENIED)
    throws = probe_denied & ub_c
    # with unknown ACLs possible, only a certainly live wildcard DENY decides (it also denies the probe)
    certain_denied = probe_denied & ~hi["allowed"] & (known | hi["wildcard_deny"]) & ~ub_u
    certain_allowed = known & lo["allowed"] & ~ub_c & ~ub_u
    decision = (F.when(probe_allowed, ALLOWED).when(throws, ERROR).when(certain_allowed, ALLOWED)
                .when(certain_denied, DENIED).otherwise(UNKNOWN))
    reason = (F.when(probe_allowed, F.col("_pr_reason")).when(throws, R_KAFKA_ERROR).when(certain_allowed, R_ALLOW)
              .when(certain_denied & hi["wildcard_deny"], R_DENY).when(certain_denied, R_NO_MATCH)
              .otherwise(R_UNCERTAIN))
    uncertain_ids = F.expr("array_sort(transform(filter(_acls, x -> NOT x.c), z -> z.id))")
    all_ids = F.expr("array_sort(transform(_acls, z -> z.id))")
    deciding = (F.when(probe_allowed, F.col("_pr_deciding_acl_ids")).when(throws, F.col("_ub_c"))
                .when(certain_allowed, lo["ids"]).when(certain_denied, hi["ids"])
                .otherwise(F.array_sort(F.array_distinct(F.concat(all_ids, F.col("_pr_deciding_acl_ids"))))))
    uncertain = F.when(probe_allowed, F.col("_pr_uncertain_acl_ids")).otherwise(
        F.array_sort(F.array_distinct(F.concat(uncertain_ids, F.col("_pr_uncertain_acl_ids"),
                                               F.coalesce(F.col("_ub_u"), empty_ids())))))
    error = F.when(throws, F.concat(F.lit("Kafka throws IllegalArgumentException in authorizeByResourceType: "
                                          "stored ACL(s) with an ANY code cannot become an AclBinding: "),
                                    F.array_join(F.col("_ub_c"), ", ")))
    return d.select(*BY_TYPE_KEY, decision.alias("decision"), (decision != UNKNOWN).alias("certain"),
                    reason.alias("reason"), deciding.alias("deciding_acl_ids"), uncertain.alias("uncertain_acl_ids"),
                    F.col("_pr_coverage").alias("coverage"), error.alias("error"))

