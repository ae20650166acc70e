"""As-of authorization at scale: every access tuple decided against the ACL state at its moment, as joins.

Input: a DataFrame of access tuples with `cluster_id`, `principal`, `host`, `operation`, `resource_type`,
`resource_name` and an `offset` and/or `time` (epoch ms, or a timestamp); any other columns are carried through.
Output: the request columns plus

| column | meaning |
|---|---|
| `as_of_offset` | the offset the state is taken at (`offset`, else the last offset whose time is <= `time`) |
| `decision` | `ALLOWED`, `DENIED`, `UNKNOWN` (history cannot tell), or `ERROR` (Kafka would reject the request) |
| `certain` | the decision holds for every state the history allows at that offset |
| `reason` | `super_user`, `matching_deny`, `matching_allow`, `no_matching_acl`, `allow_everyone`, `uncertain_history`, `invalid_request` |
| `deciding_acl_ids` | the ACLs that decided it (sorted): the matching DENYs, the matching ALLOWs, ... |
| `uncertain_acl_ids` | matching ACLs whose liveness at that offset is uncertain (history has a gap there) |
| `coverage` | `complete`, `incomplete` (an unbridged hole before: unknown ACLs may exist) or `not_covered` |
| `error` | why an `ERROR` request is invalid |

How (spec/standard-authorizer.md §1.3, §1.4): the work is done once per *distinct* key (cluster, principal, rendered
host, operation, resource type, name, offset), then joined back to the requests.

* time -> offset: an as-of join with `offset_times` (union + running max over time; no range join);
* candidates: each resource name becomes probe keys (kind, pattern name): `(L, name)`, `(L, "*")` unless the name
  starts with `*` and is longer than one character (Kafka's quirk, §1.7), and `(P, prefix)` for the prefix lengths
  that PREFIXED ACLs of that (cluster, type) actually have. Candidate ACLs are equi-joins on
  (cluster, type, kind, pattern name);
* matching ACLs: the same equi-join with the principal added (request principal and `User:*`), then the host,
  operation (ALL; ALLOW implication DESCRIBE <- READ/WRITE/DELETE/ALTER, DESCRIBE_CONFIGS <- ALTER_CONFIGS; DENY
  exact) and lifetime predicates (`queries.certainly_live` / `queries.possibly_live`);
* "does any ACL cover this resource" (what `allow.everyone.if.no.acl.found` depends on) uses a step function per
  resource pattern: the number of lifetimes certainly and possibly live from each change offset on, read with an
  as-of join, so a pattern with thousands of lifetimes (say `*`) costs one row per request, not thousands.

Certainty (gaps in history): a state is any choice of the uncertain lifetimes. DENIED is certain iff a certainly
live matching DENY exists, or no possibly live matching ALLOW exists and (a certainly live candidate exists or the
default is deny). ALLOWED is certain iff no possibly live matching DENY exists and (a certainly live matching ALLOW
exists, or the default is allow and every possibly live candidate is a matching ALLOW). Otherwise UNKNOWN. Where
the offset is not covered by the log or a snapshot, or lies after an unbridged hole (`incomplete`), ACLs we never
saw may exist: only a certain matching DENY stays certain (and super users, who need no ACL).

`authorizeByResourceType` (KIP-679, spec §2) for requests whose `resource_name` is null: the probe `authorize` of
the name `hardcode`, then the deny-dominance rules over the LITERAL/PREFIXED ACLs of the type. Adding an ALLOW can
only turn that second part towards ALLOWED and adding a DENY only towards DENIED, so it is evaluated on the two
extreme states (certain ALLOWs with every possible DENY; every possible ALLOW with certain DENYs); a mix of an
uncertain probe and an uncertain second part is reported UNKNOWN (conservative, never a false certainty).

Deliberate limits: a stored ACL whose principal has no `:` is a candidate but never matches (Kafka would throw
when its scan reaches it); invalid requests (unknown operation or type, principal without `:`, a host that is not
an IP literal: no DNS here, a requester named `User:*`, for which Kafka throws) get `ERROR` instead of an
exception. Internally (`decide_keys`, used by the audits) the principal `User:*` means "a principal with no ACL
of its own": only `User:*` ACLs match it.

Reading Avro requests: Spark's own Avro source needs the external spark-avro jar, which this project does not
ship. `read_requests` reads `.avro` files with the `binaryFile` source and decodes each file with fastavro inside
`mapInArrow` on the executors: it scales with the number of files (one task per file, the whole file in memory,
at most 2 GiB per file: Spark's binaryFile limit).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replay.kafka.acl import AclOperation, ResourceType
from replay.kafka.authorizer import (
    HARDCODE_PROBE_NAME,
    java_host_address,
    parse_allow_everyone,
    parse_super_users,
)
from replay.spark.queries import ACL_FIELDS, certainly_live, possibly_live

ALLOWED, DENIED, UNKNOWN, ERROR = "ALLOWED", "DENIED", "UNKNOWN", "ERROR"
R_SUPER_USER = "super_user"
R_DENY = "matching_deny"
R_ALLOW = "matching_allow"
R_NO_MATCH = "no_matching_acl"
R_ALLOW_EVERYONE = "allow_everyone"
R_UNCERTAIN = "uncertain_history"
R_INVALID = "invalid_request"

COV_COMPLETE, COV_INCOMPLETE, COV_NOT_COVERED = "complete", "incomplete", "not_covered"

REQUEST_COLUMNS = ["cluster_id", "principal", "host", "operation", "resource_type", "resource_name"]
RESULT_COLUMNS = ["as_of_offset", "decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids",
                  "coverage", "error"]
WILDCARD_PRINCIPAL = "User:*"
ANY_HOST = "*"  # internal rendered host meaning "a host no ACL names": only host `*` ACLs match it

REQUEST_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType()),
    T.StructField("principal", T.StringType()),
    T.StructField("host", T.StringType()),
    T.StructField("operation", T.StringType()),
    T.StructField("resource_type", T.StringType()),
    T.StructField("resource_name", T.StringType()),
    T.StructField("offset", T.LongType()),
    T.StructField("time", T.LongType()),
])

_IMPLIES_DESCRIBE = ["DESCRIBE", "READ", "WRITE", "DELETE", "ALTER"]
_IMPLIES_DESCRIBE_CONFIGS = ["DESCRIBE_CONFIGS", "ALTER_CONFIGS"]
_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_name", "_at"]
_RES_KEY = ["cluster_id", "_rtype", "_name", "_at"]
_PAT_KEY = ["cluster_id", "_rtype", "_pk", "_pn"]


@dataclass(frozen=True)
class AuthorizerSettings:
    """The two StandardAuthorizer settings that change decisions (spec §1.2), parsed the way Kafka parses them."""

    super_users: frozenset[str] = frozenset()
    allow_everyone: bool = False

    @classmethod
    def of(cls, super_users: str | Sequence[str] | None = "", allow_everyone: bool | str | None = False
           ) -> AuthorizerSettings:
        return cls(parse_super_users(super_users or None), parse_allow_everyone(allow_everyone))


@dataclass(frozen=True)
class LakeTables:
    """The lake tables authorization reads (any object with `.read(name)` gives them)."""

    history: DataFrame
    coverage: DataFrame
    offset_times: DataFrame

    @classmethod
    def of(cls, lake: Any) -> LakeTables:
        if isinstance(lake, LakeTables):
            return lake
        return cls(lake.read("acl_history"), lake.read("log_coverage"), lake.read("offset_times"))


# ---- normalisation -------------------------------------------------------------------------------------------

def render_host(host: str | None) -> tuple[str | None, str | None]:
    """(Java-rendered host, error) for a request's client address."""
    if host is None:
        return None, "host is missing"
    try:
        return java_host_address(host), None
    except (ValueError, KeyError) as exc:  # InvalidArgumentError is a ValueError
        return None, str(exc)


def _enum_lookup(col: Column, enum: Any, what: str, forbidden: Sequence[str]) -> tuple[Column, Column]:
    """(enum name, error) for a column holding an enum name in any spelling (`READ`, `read`, `DescribeConfigs`,
    `describe-configs`) or its code, as `AclOperation.parse` reads it; no Python round trip."""
    pairs: list[Column] = []
    for member in enum:
        pairs += [F.lit(member.name.replace("_", "")), F.lit(member.name), F.lit(str(int(member))), F.lit(member.name)]
    key = F.upper(F.regexp_replace(F.trim(col.cast("string")), "[-_ ]", ""))
    name = F.element_at(F.create_map(*pairs), key)
    bad = name.isNull() | name.isin(*forbidden)
    err = F.when(col.isNull(), F.lit(f"{what} is missing")).when(
        bad, F.concat(F.lit(f"{what} "), col.cast("string"), F.lit(" cannot be authorized")))
    return F.when(~bad, name), err


def _time_ms(col: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_millis(col.cast("timestamp"))
    if isinstance(dtype, T.StringType):
        return F.when(col.rlike("^-?[0-9]+$"), col.cast("long")).otherwise(F.unix_millis(F.to_timestamp(col)))
    return col.cast("long")


def _null_safe_join(left: DataFrame, right: DataFrame, pairs: Sequence[tuple[str, str]], how: str = "left"
                    ) -> DataFrame:
    cond = None
    for lc, rc in pairs:
        c = left[lc].eqNullSafe(right[rc])
        cond = c if cond is None else cond & c
    return left.join(right, cond, how)


def with_as_of_offsets(requests: DataFrame, offset_times: DataFrame) -> DataFrame:
    """Add `as_of_offset`: the request's `offset`, else the last offset whose time is <= its `time` (DESIGN §3.8)."""
    cols = set(requests.columns)
    off = F.col("offset").cast("long") if "offset" in cols else F.lit(None).cast("long")
    if "time" not in cols:
        return requests.withColumn("as_of_offset", off)
    req = requests.withColumn("_tms", _time_ms(F.col("time"), requests.schema["time"].dataType))
    wanted = req.where(F.col("_tms").isNotNull()).select("cluster_id", F.col("_tms").alias("_t")).distinct()
    marks = offset_times.select("cluster_id", F.col("time").alias("_t"), F.col("offset").alias("_o"),
                                F.lit(0).alias("_tag"))
    probes = wanted.select("cluster_id", "_t", F.lit(None).cast("long").alias("_o"), F.lit(1).alias("_tag"))
    w = (Window.partitionBy("cluster_id").orderBy("_t", "_tag")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    mapped = (marks.unionByName(probes).withColumn("_asof", F.max("_o").over(w))
              .where(F.col("_tag") == 1).select("cluster_id", F.col("_t").alias("_tms"), "_asof"))
    return (req.join(mapped, ["cluster_id", "_tms"], "left")
            .withColumn("as_of_offset", F.coalesce(off, F.col("_asof"))).drop("_tms", "_asof"))


def normalise(requests: DataFrame) -> tuple[DataFrame, bool]:
    """Add `_p`, `_h` (Java-rendered host), `_op`, `_rtype`, `_name`, `_err` (request invalid: why); also say whether
    any request has no resource name (an authorizeByResourceType question).

    Hosts are rendered on the driver, once per distinct host (the set of client addresses, not of requests), and
    joined back as a broadcast table; operation and type names are parsed with SQL expressions.
    """
    spark = requests.sparkSession
    seen = requests.select("host", F.col("resource_name").isNull().alias("_bt")).distinct().collect()
    hosts = sorted({r[0] for r in seen}, key=lambda h: (h is None, h))
    by_type = any(r[1] for r in seen)
    table = spark.createDataFrame([(h, *render_host(h)) for h in hosts],
                                  "_h0 string, _h string, _herr string")
    joined = _null_safe_join(requests, F.broadcast(table), [("host", "_h0")]).drop("_h0")
    op, op_err = _enum_lookup(F.col("operation"), AclOperation, "operation", ["ANY", "UNKNOWN"])
    rtype, rtype_err = _enum_lookup(F.col("resource_type"), ResourceType, "resource type", ["ANY", "UNKNOWN"])
    p_err = F.when(F.col("principal").isNull() | ~F.col("principal").contains(":"), F.concat(
        F.lit("expected a principal in format principalType:principalName but got "),
        F.coalesce(F.col("principal"), F.lit("null"))))
    return (joined.withColumn("_p", F.col("principal")).withColumn("_name", F.col("resource_name"))
            .withColumn("_op", op).withColumn("_rtype", rtype)
            .withColumn("_err", F.coalesce(p_err, F.col("_herr"), op_err, rtype_err)).drop("_herr")), by_type


# ---- the history side ----------------------------------------------------------------------------------------

def _history(history: DataFrame) -> DataFrame:
    return history.select(
        "cluster_id", "acl_id", *ACL_FIELDS, "valid_from_offset", "valid_from_min_offset", "valid_to_offset",
        "valid_to_min_offset",
        F.col("resource_type").alias("_rtype"),
        F.when(F.col("pattern_type") == "LITERAL", "L").otherwise("P").alias("_pk"),
        F.col("resource_name").alias("_pn"),
        (F.col("permission_type") == "ALLOW").alias("_allow"))


def _prefix_lengths(hist: DataFrame) -> DataFrame:
    return (hist.where(F.col("_pk") == "P").groupBy("cluster_id", "_rtype")
            .agg(F.array_sort(F.collect_set(F.length("_pn"))).alias("_lens")))


def _probes(resources: DataFrame, hist: DataFrame) -> DataFrame:
    """One row per (resource key, probe pattern): the patterns that could cover the name (spec §1.3 4a)."""
    lens = _prefix_lengths(hist)
    r = resources.join(F.broadcast(lens), ["cluster_id", "_rtype"], "left")
    name = F.col("_name")
    exact = F.array(F.struct(F.lit("L").alias("k"), name.alias("n")))
    wildcard_applies = (name != "*") & ~(name.startswith("*") & (F.length(name) > 1))
    wildcard = F.when(wildcard_applies, F.array(F.struct(F.lit("L").alias("k"), F.lit("*").alias("n")))).otherwise(
        F.array().cast("array<struct<k:string,n:string>>"))
    prefixes = F.transform(
        F.filter(F.coalesce(F.col("_lens"), F.array().cast("array<int>")), lambda n: n <= F.length(name)),
        lambda n: F.struct(F.lit("P").alias("k"), F.substring(name, 1, n).alias("n")))
    return (r.select(*_RES_KEY, F.explode(F.concat(exact, wildcard, prefixes)).alias("_probe"))
            .select(*_RES_KEY, F.col("_probe.k").alias("_pk"), F.col("_probe.n").alias("_pn")))


def _segments(hist: DataFrame) -> DataFrame:
    """Per resource pattern, from each change offset on: how many lifetimes are certainly / possibly live."""
    inf = F.lit(None).cast("long")
    poss_end = F.when(F.col("valid_to_min_offset").isNotNull() & F.col("valid_to_offset").isNotNull(),
                      F.col("valid_to_offset")).otherwise(inf)
    events = hist.select(*_PAT_KEY, F.explode(F.array(
        F.struct(F.col("valid_from_min_offset").alias("o"), F.lit(0).alias("dc"), F.lit(1).alias("dp")),
        F.struct(F.col("valid_from_offset").alias("o"), F.lit(1).alias("dc"), F.lit(0).alias("dp")),
        F.struct(F.col("valid_to_min_offset").alias("o"), F.lit(-1).alias("dc"), F.lit(0).alias("dp")),
        F.struct(poss_end.alias("o"), F.lit(0).alias("dc"), F.lit(-1).alias("dp")))).alias("e"))
    steps = (events.where(F.col("e.o").isNotNull())
             .groupBy(*_PAT_KEY, F.col("e.o").alias("_o"))
             .agg(F.sum("e.dc").alias("_dc"), F.sum("e.dp").alias("_dp")))
    w = Window.partitionBy(*_PAT_KEY).orderBy("_o").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return steps.select(*_PAT_KEY, "_o", F.sum("_dc").over(w).alias("_nc"), F.sum("_dp").over(w).alias("_np"))


def _candidate_counts(probes: DataFrame, hist: DataFrame) -> DataFrame:
    """Per resource key: lifetimes covering the resource that are certainly (`_nc`) / possibly or certainly (`_np`)
    live at the offset. An as-of join of the probes with the step functions."""
    seg = _segments(hist).select(*_PAT_KEY, "_o", "_nc", "_np", F.lit(0).alias("_tag"),
                                 *[F.lit(None).cast(t).alias(c) for c, t in (("_name", "string"), ("_at", "long"))])
    pr = (probes.where(F.col("_at").isNotNull())
          .select(*_PAT_KEY, F.col("_at").alias("_o"), F.lit(None).cast("long").alias("_nc"),
                  F.lit(None).cast("long").alias("_np"), F.lit(1).alias("_tag"), "_name", "_at"))
    w = (Window.partitionBy(*_PAT_KEY).orderBy("_o", "_tag")
         .rowsBetween(Window.unboundedPreceding, Window.currentRow))
    read = (seg.unionByName(pr)
            .withColumn("_c", F.last("_nc", ignorenulls=True).over(w))
            .withColumn("_q", F.last("_np", ignorenulls=True).over(w))
            .where(F.col("_tag") == 1))
    return (read.groupBy(*_RES_KEY)
            .agg(F.sum(F.coalesce("_c", F.lit(0))).alias("_nc"), F.sum(F.coalesce("_q", F.lit(0))).alias("_np")))


def _op_matches(acl_op: Column, allow: Column, op: Column) -> Column:
    implied = (((op == "DESCRIBE") & acl_op.isin(*_IMPLIES_DESCRIBE))
               | ((op == "DESCRIBE_CONFIGS") & acl_op.isin(*_IMPLIES_DESCRIBE_CONFIGS)))
    return (acl_op == "ALL") | (acl_op == op) | (allow & implied)


def _principals(p: Column) -> Column:
    return F.array_distinct(F.array(p, F.lit(WILDCARD_PRINCIPAL)))


def _live(at: Column) -> tuple[Column, Column]:
    """(certainly live, possibly or certainly live) at `at` for an acl_history row."""
    c = certainly_live(at)
    return c, c | possibly_live(at)


def _ids(cond: Column) -> Column:
    return F.array_sort(F.collect_set(F.when(cond, F.col("acl_id"))))


def _matches(keys: DataFrame, probes: DataFrame, hist: DataFrame) -> DataFrame:
    """Per key: matching ACL ids by permission and certainty, and how many possibly live ALLOWs match."""
    k = (keys.join(probes, _RES_KEY).select(*_KEY, "_pk", "_pn", F.explode(_principals(F.col("_p"))).alias("_pp")))
    h = hist.withColumnRenamed("principal", "_pp")
    j = k.join(h, [*_PAT_KEY, "_pp"])
    certain, maybe = _live(F.col("_at"))
    j = j.where(maybe & ((F.col("host") == "*") | (F.col("host") == F.col("_h")))
                & _op_matches(F.col("operation"), F.col("_allow"), F.col("_op")))
    j = j.withColumn("_cl", certain)
    return j.groupBy(*_KEY).agg(
        _ids(~F.col("_allow") & F.col("_cl")).alias("_deny_c"),
        _ids(~F.col("_allow") & ~F.col("_cl")).alias("_deny_u"),
        _ids(F.col("_allow") & F.col("_cl")).alias("_allow_c"),
        _ids(F.col("_allow") & ~F.col("_cl")).alias("_allow_u"),
        F.count(F.when(F.col("_allow"), 1)).alias("_n_allow"))


def _coverage(ats: DataFrame, coverage: DataFrame) -> DataFrame:
    """Per (cluster, offset): `complete`, `incomplete` or `not_covered`."""
    cov = coverage.select(F.col("cluster_id").alias("_cc"), "start_offset", "end_offset", "kind")
    j = ats.join(F.broadcast(cov), (F.col("cluster_id") == F.col("_cc")) & (F.col("start_offset") <= F.col("_at"))
                 & (F.col("end_offset") >= F.col("_at")), "left")
    agg = j.groupBy("cluster_id", "_at").agg(
        F.max(F.col("kind").isin("log", "snapshot")).alias("_covered"),
        F.max(F.col("kind") == "incomplete").alias("_incomplete"))
    return agg.select("cluster_id", "_at", F.when(~F.coalesce("_covered", F.lit(False)), COV_NOT_COVERED)
                      .when(F.coalesce("_incomplete", F.lit(False)), COV_INCOMPLETE)
                      .otherwise(COV_COMPLETE).alias("coverage"))


def _empty_ids() -> Column:
    return F.array().cast("array<string>")


def decide_keys(keys: DataFrame, tables: LakeTables, settings: AuthorizerSettings) -> DataFrame:
    """Decide distinct normalised keys (`_KEY` columns, `_at` may be null). Returns the keys plus the result columns.

    Public for the audits, which build keys directly (host `*` = "a host that no ACL names").
    """
    hist = _history(tables.history)
    keys = keys.select(*_KEY).distinct()
    resources = keys.select(*_RES_KEY).distinct()
    probes = _probes(resources, hist)
    counts = _candidate_counts(probes, hist)
    matches = _matches(keys, probes, hist)
    cov = _coverage(keys.select("cluster_id", "_at").distinct(), tables.coverage)
    d = (keys.join(matches, _KEY, "left").join(counts, _RES_KEY, "left")
         .join(cov, ["cluster_id", "_at"], "left"))
    return _decision(d, settings)


def _decision(d: DataFrame, settings: AuthorizerSettings) -> DataFrame:
    def arr(c: str) -> Column:
        return F.coalesce(F.col(c), _empty_ids())

    deny_c, deny_u, allow_c, allow_u = (arr(c) for c in ("_deny_c", "_deny_u", "_allow_c", "_allow_u"))
    has = F.size
    d_c = has(deny_c) > 0
    d_p = d_c | (has(deny_u) > 0)
    a_c = has(allow_c) > 0
    a_p = a_c | (has(allow_u) > 0)
    n_c = F.coalesce(F.col("_nc"), F.lit(0))
    n_p = F.coalesce(F.col("_np"), F.lit(0))
    n_allow = F.coalesce(F.col("_n_allow"), F.lit(0))
    c_c = n_c > 0
    other_p = (n_p - n_allow) > 0  # a possibly live candidate that is not a matching ALLOW
    default_allow = F.lit(settings.allow_everyone)
    known = F.col("coverage") == COV_COMPLETE
    su = (F.col("_p").isin(*sorted(settings.super_users)) if settings.super_users else F.lit(False))
    certain_denied = d_c | (known & ~a_p & (c_c | ~default_allow))
    certain_allowed = known & ~d_p & (a_c | (default_allow & ~other_p))
    decision = (F.when(su, ALLOWED).when(certain_denied, DENIED).when(certain_allowed, ALLOWED).otherwise(UNKNOWN))
    reason = (F.when(su, R_SUPER_USER).when(d_c, R_DENY).when(certain_denied, R_NO_MATCH)
              .when(certain_allowed & a_c, R_ALLOW).when(certain_allowed, R_ALLOW_EVERYONE).otherwise(R_UNCERTAIN))
    deciding = (F.when(su, _empty_ids()).when(d_c, deny_c).when(certain_denied, _empty_ids())
                .when(certain_allowed, allow_c)
                .otherwise(F.array_sort(F.array_distinct(F.concat(deny_c, deny_u, allow_c, allow_u)))))
    uncertain = F.when(su, _empty_ids()).otherwise(F.array_sort(F.concat(deny_u, allow_u)))
    return d.select(*_KEY, decision.alias("decision"), (decision != UNKNOWN).alias("certain"), reason.alias("reason"),
                    deciding.alias("deciding_acl_ids"), uncertain.alias("uncertain_acl_ids"), "coverage")


# ---- authorizeByResourceType ---------------------------------------------------------------------------------

_BT_KEY = ["cluster_id", "_p", "_h", "_op", "_rtype", "_at"]


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
    """Decide distinct by-type keys (`_BT_KEY`); spec §2."""
    keys = keys.select(*_BT_KEY).distinct()
    probe = (decide_keys(keys.withColumn("_name", F.lit(HARDCODE_PROBE_NAME)), tables, settings)
             .select(*_BT_KEY, *[F.col(c).alias("_pr_" + c) for c in
                                 ("decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids",
                                  "coverage")]))
    hist = _history(tables.history).where(F.col("pattern_type").isin("LITERAL", "PREFIXED"))
    k = keys.select(*_BT_KEY, F.explode(_principals(F.col("_p"))).alias("_pp"))
    j = k.join(hist.withColumnRenamed("principal", "_pp"), ["cluster_id", "_rtype", "_pp"])
    certain, maybe = _live(F.col("_at"))
    j = j.where(maybe & ((F.col("host") == "*") | (F.col("host") == F.col("_h")))
                & ((F.col("operation") == "ALL") | (F.col("operation") == F.col("_op"))))
    acls = j.groupBy(*_BT_KEY).agg(F.collect_list(F.struct(
        F.col("_pk").alias("k"), F.col("_pn").alias("n"), F.col("_allow").alias("allow"), certain.alias("c"),
        F.col("acl_id").alias("id"))).alias("_acls"))
    d = probe.join(acls, _BT_KEY, "left").withColumn(
        "_acls", F.coalesce(F.col("_acls"), F.array().cast(
            "array<struct<k:string,n:string,allow:boolean,c:boolean,id:string>>")))
    lo = _bt_state_exprs("_acls", "min")
    hi = _bt_state_exprs("_acls", "max")
    known = F.col("_pr_coverage") == COV_COMPLETE
    probe_allowed = F.col("_pr_certain") & (F.col("_pr_decision") == ALLOWED)
    probe_denied = F.col("_pr_certain") & (F.col("_pr_decision") == DENIED)
    # with unknown ACLs possible, only a certainly live wildcard DENY decides (it also denies the probe)
    certain_denied = probe_denied & ~hi["allowed"] & (known | hi["wildcard_deny"])
    certain_allowed = known & lo["allowed"]
    decision = (F.when(probe_allowed, ALLOWED).when(certain_allowed, ALLOWED).when(certain_denied, DENIED)
                .otherwise(UNKNOWN))
    reason = (F.when(probe_allowed, F.col("_pr_reason")).when(certain_allowed, R_ALLOW)
              .when(certain_denied & hi["wildcard_deny"], R_DENY).when(certain_denied, R_NO_MATCH)
              .otherwise(R_UNCERTAIN))
    uncertain_ids = F.expr("array_sort(transform(filter(_acls, x -> NOT x.c), z -> z.id))")
    all_ids = F.expr("array_sort(transform(_acls, z -> z.id))")
    deciding = (F.when(probe_allowed, F.col("_pr_deciding_acl_ids")).when(certain_allowed, lo["ids"])
                .when(certain_denied, hi["ids"])
                .otherwise(F.array_sort(F.array_distinct(F.concat(all_ids, F.col("_pr_deciding_acl_ids"))))))
    uncertain = F.when(probe_allowed, F.col("_pr_uncertain_acl_ids")).otherwise(
        F.array_sort(F.array_distinct(F.concat(uncertain_ids, F.col("_pr_uncertain_acl_ids")))))
    return d.select(*_BT_KEY, decision.alias("decision"), (decision != UNKNOWN).alias("certain"),
                    reason.alias("reason"), deciding.alias("deciding_acl_ids"), uncertain.alias("uncertain_acl_ids"),
                    F.col("_pr_coverage").alias("coverage"))


# ---- public API ----------------------------------------------------------------------------------------------

def authorize(requests: DataFrame, lake: Any, super_users: str | Sequence[str] | None = "",
              allow_everyone: bool | str | None = False) -> DataFrame:
    """Decide every access tuple of `requests` against the state at its offset or time (module docstring).

    Rows with a null `resource_name` are `authorizeByResourceType` questions (KIP-679). `lake` is a `Lake` (or
    anything with `.read(name)`) or a `LakeTables`.
    """
    tables = LakeTables.of(lake)
    settings = AuthorizerSettings.of(super_users, allow_everyone)
    missing = [c for c in REQUEST_COLUMNS if c not in requests.columns]
    if missing:
        raise ValueError(f"requests lack column(s) {', '.join(missing)}; expected {', '.join(REQUEST_COLUMNS)} "
                         "and offset or time")
    if "offset" not in requests.columns and "time" not in requests.columns:
        raise ValueError("requests need an `offset` or a `time` column")
    clash = [c for c in RESULT_COLUMNS if c in requests.columns]
    if clash:
        raise ValueError(f"requests already have result column(s) {', '.join(clash)}")
    original = requests.columns
    req, any_by_type = normalise(with_as_of_offsets(requests, tables.offset_times))
    # Kafka builds its principal set as Set.of(principal, User:*), which throws for a requester named `User:*`
    # (a super user of that name is answered before that)
    wildcard = (F.col("_p") == WILDCARD_PRINCIPAL) & ~F.col("_p").isin(*sorted(settings.super_users or {""}))
    req = req.withColumn("_err", F.coalesce(F.col("_err"), F.when(wildcard, F.lit(
        "Kafka throws IllegalArgumentException for a requesting principal named User:* (duplicate element)"))))
    req = req.withColumn("_at", F.col("as_of_offset"))
    valid = req.where(F.col("_err").isNull())
    named = valid.where(F.col("_name").isNotNull())
    parts = [_join_back(named, decide_keys(named, tables, settings), _KEY, original)]
    if any_by_type:
        by_type = valid.where(F.col("_name").isNull())
        parts.append(_join_back(by_type, decide_by_resource_type(by_type, tables, settings), _BT_KEY, original))
    parts.append(req.where(F.col("_err").isNotNull()).select(
        *original, "as_of_offset", F.lit(ERROR).alias("decision"), F.lit(True).alias("certain"),
        F.lit(R_INVALID).alias("reason"), _empty_ids().alias("deciding_acl_ids"),
        _empty_ids().alias("uncertain_acl_ids"), F.lit(None).cast("string").alias("coverage"),
        F.col("_err").alias("error")))
    out = parts[0]
    for part in parts[1:]:
        out = out.unionByName(part)
    return out


def _join_back(requests: DataFrame, results: DataFrame, key: list[str], original: list[str]) -> DataFrame:
    renamed = results.select(*[F.col(c).alias("r" + c) for c in results.columns])
    j = _null_safe_join(requests, renamed, [(c, "r" + c) for c in key], "left")
    return j.select(*original, "as_of_offset", *[F.col("r" + c).alias(c) for c in RESULT_COLUMNS[1:-1]],
                    F.lit(None).cast("string").alias("error"))


def authorize_by_resource_type(requests: DataFrame, lake: Any, super_users: str | Sequence[str] | None = "",
                               allow_everyone: bool | str | None = False) -> DataFrame:
    """`authorizeByResourceType` for every row (the `resource_name` column is ignored / may be absent)."""
    return authorize(requests.withColumn("resource_name", F.lit(None).cast("string")), lake, super_users,
                     allow_everyone)


# ---- CLI functions -------------------------------------------------------------------------------------------

def authorize_one(spark: SparkSession, lake: Any, cluster: str, principal: str, host: str, operation: str,
                  resource_type: str, resource_name: str | None, offset: int | None = None, time: int | None = None,
                  super_users: str = "", allow_everyone: bool = False) -> dict[str, Any]:
    """One question, answered with the deciding ACLs spelled out (a dict ready for JSON; `render_decision` prints it).

    Without `offset` and `time`: as of the end of known history. `resource_name=None`: authorizeByResourceType.
    """
    from replay.kafka.listing import acl_dict
    from replay.spark.queries import last_offset, time_of_offset

    if offset is None and time is None:
        offset = last_offset(lake, cluster)
    row = {"cluster_id": cluster, "principal": principal, "host": host, "operation": operation,
           "resource_type": resource_type, "resource_name": resource_name, "offset": offset, "time": time}
    df = spark.createDataFrame([row], REQUEST_SCHEMA)
    r = authorize(df, lake, super_users, allow_everyone).first()
    assert r is not None
    res = r.asDict(recursive=True)
    ids = sorted(set(res["deciding_acl_ids"] or []) | set(res["uncertain_acl_ids"] or []))
    acls: dict[str, Any] = {}
    if ids:
        hist = LakeTables.of(lake).history
        for h in hist.where((F.col("cluster_id") == cluster) & F.col("acl_id").isin(ids)).collect():
            acls[h["acl_id"]] = acl_dict(h["acl_id"], _binding_of(h), validFromOffset=h["valid_from_offset"],
                                         validToOffset=h["valid_to_offset"])
    at = res["as_of_offset"]
    t = time_of_offset(lake, cluster, at) if at is not None else None
    return {"cluster": cluster, "principal": principal, "host": host, "operation": operation,
            "resourceType": resource_type, "resourceName": resource_name, "asOfOffset": at,
            "asOfTime": t, "requestedTime": time, "decision": res["decision"], "certain": res["certain"],
            "reason": res["reason"], "coverage": res["coverage"], "error": res["error"],
            "decidingAcls": [acls.get(i, {"id": i}) for i in res["deciding_acl_ids"] or []],
            "uncertainAcls": [acls.get(i, {"id": i}) for i in res["uncertain_acl_ids"] or []],
            "superUsers": sorted(parse_super_users(super_users or None)),
            "allowEveryoneIfNoAclFound": parse_allow_everyone(allow_everyone)}


def _binding_of(row: Any) -> Any:
    from replay.kafka.acl import AclBinding

    return AclBinding(*(row[c] for c in ACL_FIELDS))


def render_decision(result: dict[str, Any], fmt: str = "text") -> list[str]:
    """`text` (a sentence and the ACLs as kafka-acls lines), `json`, or `table`."""
    import json

    from replay.kafka.acl import AclBinding
    from replay.kafka.listing import kafka_acls_lines, table_lines

    if fmt == "json":
        return [json.dumps(result, indent=1, sort_keys=False)]
    if fmt == "table":
        keys = ["cluster", "principal", "host", "operation", "resourceType", "resourceName", "asOfOffset", "decision",
                "certain", "reason", "coverage"]
        row = {k: result.get(k) for k in keys}
        row["acls"] = ",".join(a["id"] for a in result["decidingAcls"])
        return table_lines([row], [*keys, "acls"])
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}; choose text, json or table")
    from replay.cli import format_time

    what = (f"{result['principal']} from {result['host']}: {result['operation']} on {result['resourceType']}"
            + (f" {result['resourceName']!r}" if result["resourceName"] is not None else " (any resource of the type)"))
    sure = "certainly" if result["certain"] else "cannot tell:"
    lines = [f"{what} as of offset {result['asOfOffset']} ({format_time(result['asOfTime'])}) on cluster "
             f"{result['cluster']}: {sure} {result['decision']} ({result['reason']}, history {result['coverage']})"]
    if result.get("error"):
        lines.append(f"invalid request: {result['error']}")

    def fields(a: dict[str, Any]) -> AclBinding:
        return AclBinding(a["resourceType"], a["resourceName"], a["patternType"], a["principal"], a["host"],
                          a["operation"], a["permissionType"])

    if result["decidingAcls"]:
        lines.append("deciding ACL(s):")
        lines += ["  " + x for x in kafka_acls_lines({a["id"]: fields(a) for a in result["decidingAcls"]
                                                      if "principal" in a}) if x]
    if result["uncertainAcls"]:
        lines.append("ACL(s) that may or may not have been live then (history has a gap):")
        lines += ["  " + x for x in kafka_acls_lines({a["id"]: fields(a) for a in result["uncertainAcls"]
                                                      if "principal" in a}) if x]
    return lines


# ---- files ---------------------------------------------------------------------------------------------------

_IN_FORMATS = ("csv", "json", "parquet", "avro", "delta")
OUT_FORMATS = ("delta", "parquet", "csv", "json")


def _guess_format(path: str) -> str:
    p = path.rstrip("/").lower()
    if os.path.isdir(path):
        if os.path.isdir(os.path.join(path, "_delta_log")):
            return "delta"
        names = [n.lower() for n in os.listdir(path) if not n.startswith((".", "_"))]
        for fmt, ends in (("parquet", (".parquet",)), ("avro", (".avro",)), ("csv", (".csv",)),
                          ("json", (".json", ".jsonl", ".ndjson"))):
            if any(n.endswith(ends) for n in names):
                return fmt
        raise ValueError(f"cannot tell the format of directory {path}; pass the format")
    for fmt, ends in (("parquet", (".parquet",)), ("avro", (".avro",)), ("csv", (".csv",)),
                      ("json", (".json", ".jsonl", ".ndjson"))):
        if p.endswith(ends):
            return fmt
    raise ValueError(f"cannot tell the format of {path} from its name; pass the format ({', '.join(_IN_FORMATS)})")


def _avro_decoder(schema: T.StructType) -> Any:
    names = schema.fieldNames()
    arrow = pa.schema([pa.field(f.name, pa.int64() if isinstance(f.dataType, T.LongType) else pa.string())
                       for f in schema.fields])

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import io

        import fastavro

        for batch in batches:
            for content in batch.column("content").to_pylist():
                rows: list[dict[str, Any]] = []
                for rec in fastavro.reader(io.BytesIO(content)):
                    assert isinstance(rec, dict)
                    rows.append({n: _coerce(rec.get(n), arrow.field(n).type) for n in names})
                    if len(rows) >= 10_000:
                        yield pa.RecordBatch.from_pylist(rows, schema=arrow)
                        rows = []
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow)

    return decode


def _coerce(value: Any, typ: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_integer(typ):
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        return int(value)
    return str(value)


def read_avro(spark: SparkSession, path: str, schema: T.StructType | None = None) -> DataFrame:
    """Avro files (a file or a directory of `*.avro`) decoded with fastavro on the executors, one task per file."""
    schema = schema or REQUEST_SCHEMA
    files = spark.read.format("binaryFile")
    if os.path.isdir(path):
        files = files.option("pathGlobFilter", "*.avro").option("recursiveFileLookup", "true")
    raw = files.load(path).select("content")
    raw = raw.repartition(max(1, raw.rdd.getNumPartitions()))
    return raw.mapInArrow(_avro_decoder(schema), schema)


def read_requests(spark: SparkSession, path: str, fmt: str | None = None, cluster: str | None = None) -> DataFrame:
    """Access tuples from CSV (header row), JSON lines, Parquet, Avro or Delta. A missing `cluster_id` column (or
    null values) is filled with `cluster`."""
    fmt = fmt or _guess_format(path)
    if fmt == "csv":
        df = spark.read.option("header", "true").csv(path)
    elif fmt == "json":
        df = spark.read.json(path)
    elif fmt == "parquet":
        df = spark.read.parquet(path)
    elif fmt == "delta":
        df = spark.read.format("delta").load(path)
    elif fmt == "avro":
        df = read_avro(spark, path)
    else:
        raise ValueError(f"unknown request format {fmt!r}; choose one of {', '.join(_IN_FORMATS)}")
    if "cluster_id" not in df.columns:
        if cluster is None:
            raise ValueError("the requests have no cluster_id column; pass the cluster")
        df = df.withColumn("cluster_id", F.lit(cluster))
    elif cluster is not None:
        df = df.withColumn("cluster_id", F.coalesce(F.col("cluster_id"), F.lit(cluster)))
    for c in ("principal", "host", "operation", "resource_type", "resource_name"):
        if c not in df.columns:
            if c == "resource_name":
                df = df.withColumn(c, F.lit(None).cast("string"))
            else:
                raise ValueError(f"the requests have no {c} column")
    if "offset" in df.columns:
        df = df.withColumn("offset", F.col("offset").cast("long"))
    if "time" in df.columns and isinstance(df.schema["time"].dataType, T.StringType):
        df = df.withColumn("time", _time_ms(F.col("time"), T.StringType()))
    # CSV has no null: an empty resource name means "by resource type"
    df = df.withColumn("resource_name", F.when(F.col("resource_name") == "", None).otherwise(F.col("resource_name")))
    return df


def write_table(df: DataFrame, out_path: str, fmt: str, mode: str = "overwrite") -> None:
    """Delta, Parquet, CSV (header; arrays joined with `;`) or JSON lines."""
    if fmt == "delta":
        df.write.format("delta").mode(mode).save(out_path)
    elif fmt == "parquet":
        df.write.mode(mode).parquet(out_path)
    elif fmt == "json":
        df.write.mode(mode).json(out_path)
    elif fmt == "csv":
        flat = df.select(*[F.array_join(F.col(f.name), ";").alias(f.name) if isinstance(f.dataType, T.ArrayType)
                           else F.col(f.name) for f in df.schema.fields])
        flat.write.mode(mode).option("header", "true").csv(out_path)
    else:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(OUT_FORMATS)}")


def authorize_file(spark: SparkSession, lake: Any, cluster: str | None, requests_path: str, out_path: str,
                   fmt: str = "delta", in_format: str | None = None, super_users: str = "",
                   allow_everyone: bool = False, mode: str = "overwrite") -> dict[str, Any]:
    """Read access tuples from a file, decide them all, write the decisions; returns counts per decision."""
    requests = read_requests(spark, requests_path, in_format, cluster)
    result = authorize(requests, lake, super_users, allow_everyone)
    write_table(result, out_path, fmt, mode)
    written = spark.read.format("delta").load(out_path) if fmt == "delta" else (
        spark.read.parquet(out_path) if fmt == "parquet" else None)
    counts: dict[str, int] = {}
    source = written if written is not None else result
    for r in source.groupBy("decision", "certain").count().collect():
        key = f"{r['decision']}{'' if r['certain'] else ' (uncertain)'}"
        counts[key] = int(r["count"])
    return {"requests": requests_path, "out": out_path, "format": fmt, "decisions": counts,
            "total": sum(counts.values())}
