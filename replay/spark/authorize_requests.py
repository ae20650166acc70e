"""Requests (access tuples) made ready for the decision: hosts rendered as Java renders them, operation and type
names parsed, times turned into offsets; a request Kafka would not accept gets the reason in `_err`.
"""

from __future__ import annotations

import functools
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F
from pyspark.sql import types as T
from pyspark.sql.pandas.functions import pandas_udf

from replay.kafka.acl import AclOperation, ResourceType
from replay.kafka.authorizer import java_host_address
from replay.spark.rules import offsets_at_times_sql, run_sql

REQUEST_COLUMNS = ["cluster_id", "principal", "host", "operation", "resource_type", "resource_name"]

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


def time_ms(col: Column, dtype: T.DataType) -> Column:
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
    req = requests.withColumn("_tms", time_ms(F.col("time"), requests.schema["time"].dataType))
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

