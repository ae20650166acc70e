"""As-of authorization at scale: every access tuple decided against the ACL state at its moment, as joins.

Input: a DataFrame of access tuples with `cluster_id`, `principal`, `host`, `operation`, `resource_type`,
`resource_name` and an `offset` and/or `time` (epoch ms, or a timestamp); any other columns are carried through.
Output: the request columns plus

| column | meaning |
|---|---|
| `as_of_offset` | the offset the state is taken at (`offset`, else the last offset whose time is <= `time`) |
| `decision` | `ALLOWED`, `DENIED`, `UNKNOWN` (history cannot tell), or `ERROR` (Kafka would throw instead) |
| `certain` | the decision holds for every state the history allows at that offset |
| `reason` | `super_user`, `matching_deny`, `matching_allow`, `no_matching_acl`, `allow_everyone`, `uncertain_history`, `invalid_request`, `kafka_error` |
| `deciding_acl_ids` | the ACLs that decided it (sorted): the matching DENYs, the matching ALLOWs, ... |
| `uncertain_acl_ids` | matching ACLs whose liveness at that offset is uncertain (history has a gap there) |
| `coverage` | `complete`, `incomplete` (ACLs that no dump recorded may have been live) or `not_covered` |
| `error` | why the answer is `ERROR` (an invalid request, or what Kafka throws) |

How (spec/standard-authorizer.md §1.3, §1.4): the work is done once per *distinct* key (cluster, principal, rendered
host, operation, resource type, name, offset), then joined back to the requests. Client addresses are rendered the
way Java prints them by a vectorised UDF on the executors. The decision for named resources is one SQL query text
(`decide_sql`), run here over DataFrames and embedded as it is in the SQL table functions of `replay.spark.audits`,
so Python and SQL cannot drift apart.

* time -> offset: an as-of join with `offset_times` (`rules.offsets_at_times_sql`: union + running max over time;
  no range join);
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
created and removed again inside a hole, may have been live), ACLs we never saw may exist: only a certain matching DENY stays certain (and super users, who need no ACL).

`authorizeByResourceType` (KIP-679, spec §2) for requests whose `resource_name` is null: the probe `authorize` of
the name `hardcode`, then (as Kafka 4.3.1's `AclCache.acls` builds every `AclBinding` first) `ERROR` /
`kafka_error` if a live ACL of the cluster has an ANY code, then the deny-dominance rules over the LITERAL/PREFIXED
ACLs of the type. Adding an ALLOW can
only turn that second part towards ALLOWED and adding a DENY only towards DENIED, so it is evaluated on the two
extreme states (certain ALLOWs with every possible DENY; every possible ALLOW with certain DENYs); a mix of an
uncertain probe and an uncertain second part is reported UNKNOWN (conservative, never a false certainty).

Deliberate limits: a stored ACL whose principal has no `:` is a candidate but never matches (Kafka would throw
when its scan reaches it); ACLs never seen (history gaps) are assumed to have valid codes; invalid requests
(operation or type not a known name or code, resource type ANY, or ANY/UNKNOWN in an authorizeByResourceType
question; principal without `:`, a host that is not an IP literal: no DNS here, a requester named `User:*`, for
which Kafka throws) get `ERROR` instead of an exception. A named-resource question may ask for operation ANY or
UNKNOWN and resource type UNKNOWN, as Kafka allows. Internally (`decide_keys`, used by the audits) the principal `User:*` means "a principal with no ACL
of its own": only `User:*` ACLs match it.

Reading Avro requests: Spark's own Avro source needs the external spark-avro jar, which this project does not
ship. `read_requests` reads `.avro` files with the `binaryFile` source and decodes each file with fastavro inside
`mapInArrow` on the executors: it scales with the number of files (one task per file, the whole file in memory,
at most 2 GiB per file: Spark's binaryFile limit).
"""

from __future__ import annotations

import functools
import io
import json
import os
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import pandas_udf

from replay.kafka.acl import AclBinding, AclOperation, ResourceType
from replay.kafka.authorizer import (
    HARDCODE_PROBE_NAME,
    check_question,
    java_host_address,
    parse_allow_everyone,
    parse_super_users,
)
from replay.kafka.listing import acl_dict, kafka_acls_lines, table_lines
from replay.kafka.model import check_offset
from replay.kafka.times import format_time
from replay.spark.frames import join_null_safe
from replay.spark.queries import (
    certainly_live,
    last_offset,
    live_or_maybe,
    time_of_offset,
    unknown_cluster,
)
from replay.spark.rules import (
    COV_COMPLETE,
    coverage_at_sql,
    live_sql,
    markers,
    offsets_at_times_sql,
    run_sql,
)
from replay.spark.tables import ACL_FIELDS, Lake, sql_string

ALLOWED, DENIED, UNKNOWN, ERROR = "ALLOWED", "DENIED", "UNKNOWN", "ERROR"
R_SUPER_USER = "super_user"
R_DENY = "matching_deny"
R_ALLOW = "matching_allow"
R_NO_MATCH = "no_matching_acl"
R_ALLOW_EVERYONE = "allow_everyone"
R_UNCERTAIN = "uncertain_history"
R_INVALID = "invalid_request"
R_KAFKA_ERROR = "kafka_error"

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


# ---- normalisation -------------------------------------------------------------------------------------------

def render_host(host: str | None) -> tuple[str | None, str | None]:
    """(Java-rendered host, error) for a request's client address."""
    if host is None:
        return None, "host is missing"
    try:
        return java_host_address(host), None
    except (ValueError, KeyError) as exc:  # InvalidArgumentError is a ValueError
        return None, str(exc)


def _enum_lookup(col: Column, enum: Any) -> Column:
    """The enum name for a column holding a name in any spelling (`READ`, `read`, `DescribeConfigs`,
    `describe-configs`) or a known code, as `AclOperation.parse` reads it; null when it is none of those. No
    Python round trip."""
    pairs: list[Column] = []
    for member in enum:
        pairs += [F.lit(member.name.replace("_", "")), F.lit(member.name), F.lit(str(int(member))), F.lit(member.name)]
    key = F.upper(F.regexp_replace(F.trim(col.cast("string")), "[-_ ]", ""))
    return F.element_at(F.create_map(*pairs), key)


def _enum_error(col: Column, name: Column, what: str, forbidden: Column) -> Column:
    return (F.when(col.isNull(), F.lit(f"{what} is missing"))
            .when(name.isNull(), F.concat(F.lit(f"{what} "), col.cast("string"), F.lit(" is not a known name or code")))
            .when(forbidden, F.concat(F.lit(f"{what} "), name, F.lit(" cannot be authorized here (Kafka: "
                                                                   "IllegalArgumentException)"))))


def _time_ms(col: Column, dtype: T.DataType) -> Column:
    if isinstance(dtype, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_millis(col.cast("timestamp"))
    if isinstance(dtype, T.StringType):
        return F.when(col.rlike("^-?[0-9]+$"), col.cast("long")).otherwise(F.unix_millis(F.to_timestamp(col)))
    return col.cast("long")


def with_as_of_offsets(requests: DataFrame, offset_times: DataFrame) -> DataFrame:
    """Add `as_of_offset`: the request's `offset`, else the last offset whose time is <= its `time` (DESIGN §3.8)."""
    cols = set(requests.columns)
    off = F.col("offset").cast("long") if "offset" in cols else F.lit(None).cast("long")
    if "time" not in cols:
        return requests.withColumn("as_of_offset", off)
    req = requests.withColumn("_tms", _time_ms(F.col("time"), requests.schema["time"].dataType))
    wanted = req.where(F.col("_tms").isNotNull()).select("cluster_id", F.col("_tms").alias("_t")).distinct()
    mapped = run_sql(requests.sparkSession, offsets_at_times_sql("{probes}", "{times}"), probes=wanted,
                     times=offset_times).select("cluster_id", F.col("_t").alias("_tms"), F.col("_at").alias("_asof"))
    return (req.join(mapped, ["cluster_id", "_tms"], "left")
            .withColumn("as_of_offset", F.coalesce(off, F.col("_asof"))).drop("_tms", "_asof"))


_RENDERED = "host string, error string"

# Java's rendering of an address (`InetAddress.getHostAddress`): a dotted quad without leading zeros, or eight
# lower-case hex groups without leading zeros or `::`, with an optional numeric zone (`%3`). IPv4-mapped addresses
# render as IPv4. No braces in the patterns: the SQL text goes through PySpark's formatter.
_QUAD = "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"
_GROUP = "(0|[1-9a-f][0-9a-f]?[0-9a-f]?[0-9a-f]?)"
_IPV4_RENDERED = rf"^{_QUAD}\\.{_QUAD}\\.{_QUAD}\\.{_QUAD}$"
_IPV6_RENDERED = rf"^{_GROUP}:{_GROUP}:{_GROUP}:{_GROUP}:{_GROUP}:{_GROUP}:{_GROUP}:{_GROUP}(%(0|[1-9][0-9]*))?$"


def presentable_host_sql(h: str) -> str:
    """SQL: can a client present the ACL host `h` (a SQL expression)? Kafka compares an ACL's host with the client's
    address as Java renders it, so only `*` and strings that are their own Java rendering ever match (`::1`,
    `010.0.0.1` or a host name never do). The same answer as `java_host_address(h) == h`, as a plain SQL expression
    (no Python function), so that persistent SQL functions and warehouses can use it."""
    zone = f"try_cast(substring_index({h}, '%', -1) AS BIGINT)"
    v6 = (f"({h} RLIKE '{_IPV6_RENDERED}' AND NOT startswith({h}, '0:0:0:0:0:ffff:') "
          f"AND (NOT contains({h}, '%') OR coalesce({zone} <= 2147483647, false)))")
    return f"coalesce({h} = '*' OR {h} RLIKE '{_IPV4_RENDERED}' OR {v6}, false)"


@functools.lru_cache(maxsize=1)
def host_rendering_udf() -> Any:
    """A vectorised (pandas) UDF: client address -> struct(host: Java's rendering, error: why it is not an IP
    literal), computed on the executors with `replay.kafka.authorizer.java_host_address` (cached per worker), so
    a million distinct addresses never pass through the driver. Same results as `render_host`."""
    import pandas as pd

    def render(hosts: pd.Series) -> pd.DataFrame:
        pairs = [render_host(h if isinstance(h, str) else None) for h in hosts]
        return pd.DataFrame({"host": [p[0] for p in pairs], "error": [p[1] for p in pairs]})

    render.__annotations__ = {"hosts": pd.Series, "return": pd.DataFrame}  # real types: this module's are strings
    return pandas_udf(render, _RENDERED)  # type: ignore[call-overload]


def normalise(requests: DataFrame) -> tuple[DataFrame, bool]:
    """Add `_p`, `_h` (Java-rendered host), `_op`, `_rtype`, `_name`, `_err` (request invalid: why); also say whether
    any request has no resource name (an authorizeByResourceType question).

    Hosts are rendered on the executors by a vectorised UDF (`host_rendering_udf`); operation and type names are
    parsed with SQL expressions. Like Kafka, a named-resource question may ask for operation ANY or UNKNOWN and
    resource type UNKNOWN (only ACLs with those values or ALL can match; super users are allowed), but not
    resource type ANY (no ResourcePattern can hold it); authorizeByResourceType refuses ANY and UNKNOWN for both
    (`SecurityUtils.authorizeByResourceTypeCheckArgs`).
    """
    by_type = not requests.where(F.col("resource_name").isNull()).isEmpty()
    render = host_rendering_udf()
    req = requests.withColumn("_hr", render(F.col("host")))
    bt = F.col("resource_name").isNull()
    op = _enum_lookup(F.col("operation"), AclOperation)
    rtype = _enum_lookup(F.col("resource_type"), ResourceType)
    op_err = _enum_error(F.col("operation"), op, "operation", bt & op.isin("ANY", "UNKNOWN"))
    rtype_err = _enum_error(F.col("resource_type"), rtype, "resource type",
                            (rtype == "ANY") | (bt & (rtype == "UNKNOWN")))
    p_err = F.when(F.col("principal").isNull() | ~F.col("principal").contains(":"), F.concat(
        F.lit("expected a principal in format principalType:principalName but got "),
        F.coalesce(F.col("principal"), F.lit("null"))))
    return (req.withColumn("_p", F.col("principal")).withColumn("_name", F.col("resource_name"))
            .withColumn("_op", F.when(op_err.isNull(), op)).withColumn("_rtype", F.when(rtype_err.isNull(), rtype))
            .withColumn("_h", F.col("_hr.host"))
            .withColumn("_err", F.coalesce(p_err, F.col("_hr.error"), op_err, rtype_err)).drop("_hr")), by_type


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


# ---- helpers of the authorizeByResourceType part -------------------------------------------------------------

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


def _empty_ids() -> Column:
    return F.array().cast("array<string>")


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
    certain, maybe = _live("_at")
    j = j.where(maybe & ((F.col("host") == "*") | (F.col("host") == F.col("_h")))
                & ((F.col("operation") == "ALL") | (F.col("operation") == F.col("_op"))))
    acls = j.groupBy(*_BT_KEY).agg(F.collect_list(F.struct(
        F.col("_pk").alias("k"), F.col("_pn").alias("n"), F.col("_allow").alias("allow"), certain.alias("c"),
        F.col("acl_id").alias("id"))).alias("_acls"))
    d = probe.join(acls, _BT_KEY, "left").withColumn(
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
                                               F.coalesce(F.col("_ub_u"), _empty_ids())))))
    error = F.when(throws, F.concat(F.lit("Kafka throws IllegalArgumentException in authorizeByResourceType: "
                                          "stored ACL(s) with an ANY code cannot become an AclBinding: "),
                                    F.array_join(F.col("_ub_c"), ", ")))
    return d.select(*_BT_KEY, decision.alias("decision"), (decision != UNKNOWN).alias("certain"),
                    reason.alias("reason"), deciding.alias("deciding_acl_ids"), uncertain.alias("uncertain_acl_ids"),
                    F.col("_pr_coverage").alias("coverage"), error.alias("error"))


# ---- public API ----------------------------------------------------------------------------------------------

def authorize(requests: DataFrame, lake: Lake, super_users: str | Sequence[str] | None = "",
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
    j = join_null_safe(requests, results, key, "left", prefix="r")
    error = F.col("rerror") if "error" in results.columns else F.lit(None).cast("string")
    return j.select(*original, "as_of_offset", *[F.col("r" + c).alias(c) for c in RESULT_COLUMNS[1:-1]],
                    error.alias("error"))


def authorize_by_resource_type(requests: DataFrame, lake: Lake, super_users: str | Sequence[str] | None = "",
                               allow_everyone: bool | str | None = False) -> DataFrame:
    """`authorizeByResourceType` for every row (the `resource_name` column is ignored / may be absent)."""
    return authorize(requests.withColumn("resource_name", F.lit(None).cast("string")), lake, super_users,
                     allow_everyone)


# ---- CLI functions -------------------------------------------------------------------------------------------

def authorize_one(spark: SparkSession, lake: Lake, cluster: str, principal: str, host: str, operation: str,
                  resource_type: str, resource_name: str | None, offset: int | None = None, time: int | None = None,
                  super_users: str = "", allow_everyone: bool = False) -> dict[str, Any]:
    """One question, answered with the deciding ACLs spelled out (a dict ready for JSON; `render_decision` prints it).

    Without `offset` and `time`: as of the end of known history. `resource_name=None`: authorizeByResourceType.
    Raises `QuestionError` for a field Kafka would not parse, a negative offset or an unknown cluster.
    """
    check_question(principal, operation, resource_type)
    check_offset(offset)
    if offset is None and time is None:
        offset = last_offset(lake, cluster)
        if offset is None:
            raise unknown_cluster(lake, cluster)
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
    return AclBinding(*(row[c] for c in ACL_FIELDS))


def render_decision(result: dict[str, Any], fmt: str = "text") -> list[str]:
    """`text` (a sentence and the ACLs as kafka-acls lines), `json`, or `table`."""
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


def authorize_file(spark: SparkSession, lake: Lake, cluster: str | None, requests_path: str, out_path: str,
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
