"""A file or DataFrame of questions, access tuples and API calls mixed, each decided as of its moment.

A row with an `api` value is an API call: "could `principal` call this API on these resources then?". Its resources
are in `topics` (a list, or a string of comma-separated names: topic names hold no comma), `group`,
`transactional_id`, `token_id`, `owner`; `kafka_version` (default the newest we know), `api_version` and
`conditions` (a list or comma-separated) are optional. Every other row is an access tuple (`authorize.authorize`).

API calls are decided at scale without a driver loop: on the executors each call becomes the checks Kafka makes for
it (`apis.api_request`); the checks of all calls are decided together by the batch authorizer, one row per
distinct check; and on the executors again each call's answers become its outcome (`apis.api_decision`). The
output has the access tuples' result columns (`decision` is the call's outcome: ALLOWED, DENIED, PARTIAL, UNKNOWN
or ERROR) plus `api_error` (the Kafka error code the call gets) and `api_checks` (each check with its decision).
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replay.kafka import apis
from replay.kafka.authorizer import ERROR, Explanation
from replay.spark.authorize import RESULT_COLUMNS, authorize
from replay.spark.authorize_files import read_requests, write_table
from replay.spark.tables import Lake

API_COLUMNS = ["api", "topics", "group", "transactional_id", "token_id", "owner", "kafka_version", "api_version",
               "conditions"]
API_RESULT_COLUMNS = ["api_error", "api_checks"]

_CHECK = T.StructType([T.StructField("resource_type", T.StringType()), T.StructField("resource_name", T.StringType()),
                       T.StructField("operation", T.StringType())])
_QUESTIONS = T.StructType([T.StructField("error", T.StringType()),
                           T.StructField("checks", T.ArrayType(_CHECK))])
_ANSWER = T.StructType([*_CHECK.fields, T.StructField("decision", T.StringType()),
                        T.StructField("reason", T.StringType()),
                        T.StructField("deciding_acl_ids", T.ArrayType(T.StringType()))])
_OUTCOME = T.StructType([T.StructField("outcome", T.StringType()), T.StructField("api_error", T.StringType()),
                         T.StructField("api_checks", T.ArrayType(_ANSWER))])


def _listed(value: Any) -> list[str] | None:
    if value is None:
        return None
    if isinstance(value, str):
        return [v.strip() for v in value.split(",") if v.strip()]
    return [str(v) for v in value]


def _api_request(api: Any, principal: Any, topics: Any, group: Any, transactional_id: Any, token_id: Any,
                 owner: Any, kafka_version: Any, api_version: Any, conditions: Any) -> apis.ApiRequest:
    """The call a row asks about (`apis.api_request` over the row's columns)."""
    return apis.api_request(
        str(api), str(principal), kafka_version=str(kafka_version or apis.LATEST_KAFKA),
        api_version=int(api_version) if api_version not in (None, "") else None, topics=_listed(topics),
        group=[group] if isinstance(group, str) else _listed(group), transactional_id=transactional_id or None,
        token_id=token_id or None, owner=owner or None, conditions=_listed(conditions) or ())


def _questions(*row: Any) -> tuple[str | None, list[tuple[str, str | None, str]] | None]:
    try:
        request = _api_request(*row)
    except (KeyError, ValueError) as e:
        return str(e).strip("'\""), None
    return None, list(dict.fromkeys(q.key for q in request.questions))


def _outcome(*row: Any) -> tuple[str, str | None, list[tuple[Any, ...]]]:
    *call, answers = row
    request = _api_request(*call)
    by_key = {(a["resource_type"], a["resource_name"], a["operation"]): a for a in answers or []}
    decision = apis.api_decision(request, {k: Explanation(a["decision"], a["reason"] or "",
                                                          tuple(a["deciding_acl_ids"] or ()))
                                           for k, a in by_key.items()})
    checks = [(c.resource_type, c.resource_name, c.operation, c.result, by_key[c.resource_type, c.resource_name,
                                                                            c.operation]["reason"],
               list(c.explanation.acl_ids)) for c in decision.checks]
    return decision.outcome, decision.error, checks


@functools.lru_cache(maxsize=1)
def _udfs() -> tuple[Any, Any]:
    return F.udf(_questions, _QUESTIONS), F.udf(_outcome, _OUTCOME)


def _api_args(df: DataFrame) -> list[Any]:
    return [F.col(c) if c in df.columns else F.lit(None).cast("string")
            for c in ["api", "principal", *API_COLUMNS[1:]]]


def decide_api_calls(calls: DataFrame, lake: Lake, super_users: str | Sequence[str] | None = "",
                     allow_everyone: bool | str | None = False) -> DataFrame:
    """Every row (an API call, see the module docstring) decided: its columns plus `RESULT_COLUMNS` and
    `API_RESULT_COLUMNS`."""
    questions, outcome = _udfs()
    original = calls.columns
    moment = [c for c in ("offset", "time") if c in original]
    # a call's key is its content: the plan reads `calls` twice (the checks, then the join back), and a generated id
    # need not come out the same both times; identical calls share their answers, which is right
    rid = F.sha2(F.to_json(F.struct(*[F.col(c) for c in original])), 256)
    rows = calls.withColumn("_rid", rid).withColumn("_q", questions(*_api_args(calls)))
    checks = (rows.where(F.col("_q.error").isNull())
              .select("_rid", "cluster_id", "principal", "host", *moment, F.explode("_q.checks").alias("_c"))
              .select("_rid", "cluster_id", "principal", "host", *moment,
                      F.col("_c.operation").alias("operation"), F.col("_c.resource_type").alias("resource_type"),
                      F.col("_c.resource_name").alias("resource_name"))
              .distinct())
    decided = authorize(checks, lake, super_users, allow_everyone)
    per_call = decided.groupBy("_rid").agg(
        F.collect_list(F.struct(*[F.col(f.name) for f in _ANSWER.fields])).alias("_answers"),
        F.max("as_of_offset").alias("as_of_offset"),
        F.sort_array(F.array_distinct(F.flatten(F.collect_list("deciding_acl_ids")))).alias("deciding_acl_ids"),
        F.sort_array(F.array_distinct(F.flatten(F.collect_list("uncertain_acl_ids")))).alias("uncertain_acl_ids"),
        F.first("coverage", ignorenulls=True).alias("coverage"),
        F.first("error", ignorenulls=True).alias("_check_error"))
    ok = rows.where(F.col("_q.error").isNull()).join(per_call, "_rid", "left")
    ok = ok.withColumn("_o", outcome(*_api_args(calls), F.col("_answers")))
    empty = F.array().cast("array<string>")
    answered = ok.select(
        *original, "as_of_offset", F.col("_o.outcome").alias("decision"),
        (F.col("_o.outcome") != apis.UNKNOWN).alias("certain"), F.lit("api_checks").alias("reason"),
        F.coalesce("deciding_acl_ids", empty).alias("deciding_acl_ids"),
        F.coalesce("uncertain_acl_ids", empty).alias("uncertain_acl_ids"), "coverage",
        F.col("_check_error").alias("error"), F.col("_o.api_error").alias("api_error"),
        F.col("_o.api_checks").alias("api_checks"))
    refused = rows.where(F.col("_q.error").isNotNull()).select(
        *original, F.lit(None).cast("long").alias("as_of_offset"), F.lit(ERROR).alias("decision"),
        F.lit(True).alias("certain"), F.lit("invalid_request").alias("reason"), empty.alias("deciding_acl_ids"),
        empty.alias("uncertain_acl_ids"), F.lit(None).cast("string").alias("coverage"),
        F.col("_q.error").alias("error"), F.lit(None).cast("string").alias("api_error"),
        F.lit(None).cast(T.ArrayType(_ANSWER)).alias("api_checks"))
    return answered.unionByName(refused)


def decide(requests: DataFrame, lake: Lake, super_users: str | Sequence[str] | None = "",
           allow_everyone: bool | str | None = False) -> DataFrame:
    """Access tuples and API calls (rows with an `api` value) mixed, each decided (module docstring)."""
    if "api" not in requests.columns:
        return authorize(requests, lake, super_users, allow_everyone)
    for c in ("operation", "resource_type", "resource_name"):
        if c not in requests.columns:
            requests = requests.withColumn(c, F.lit(None).cast("string"))
    tuples = authorize(requests.where(F.col("api").isNull()), lake, super_users, allow_everyone)
    calls = decide_api_calls(requests.where(F.col("api").isNotNull()), lake, super_users, allow_everyone)
    return tuples.unionByName(calls, allowMissingColumns=True).select(
        *requests.columns, *RESULT_COLUMNS, *API_RESULT_COLUMNS)


def authorize_file(spark: SparkSession, lake: Lake, cluster: str | None, requests_path: str, out_path: str,
                   fmt: str = "delta", in_format: str | None = None, super_users: str = "",
                   allow_everyone: bool = False, mode: str = "overwrite") -> dict[str, Any]:
    """Read access tuples and API calls from a file, decide them all, write the decisions; returns counts per
    decision."""
    requests = read_requests(spark, requests_path, in_format, cluster)
    result = decide(requests, lake, super_users, allow_everyone)
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
