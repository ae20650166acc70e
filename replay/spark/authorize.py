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

Requests are normalised (`authorize_requests`), decided once per distinct key (`authorize_decide`; requests
without a resource name by `authorize_by_type`) and joined back. Files in and out: `authorize_files`, and files
mixing access tuples and API calls: `authorize_batch`; one decision
for people: `authorize_render`.

Deliberate limits: a stored ACL whose principal has no `:` is a candidate but never matches (Kafka would throw
when its scan reaches it); ACLs never seen (history gaps) are assumed to have valid codes; invalid requests
(operation or type not a known name or code, resource type ANY, or ANY/UNKNOWN in an authorizeByResourceType
question; principal without `:`, a host that is not an IP literal: no DNS here, a requester named `User:*`, for
which Kafka throws) get `ERROR` instead of an exception. A named-resource question may ask for operation ANY or
UNKNOWN and resource type UNKNOWN, as Kafka allows.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from replay.kafka.acl import AclBinding
from replay.kafka.authorizer import check_question, parse_allow_everyone, parse_super_users
from replay.kafka.listing import acl_dict
from replay.kafka.model import check_offset
from replay.spark.authorize_by_type import BY_TYPE_KEY, decide_by_resource_type
from replay.spark.authorize_decide import (
    _KEY,
    ERROR,
    R_INVALID,
    WILDCARD_PRINCIPAL,
    AuthorizerSettings,
    LakeTables,
    decide_keys,
    empty_ids,
)
from replay.spark.authorize_render import render_decision
from replay.spark.authorize_requests import REQUEST_COLUMNS, REQUEST_SCHEMA, normalise, with_as_of_offsets
from replay.spark.frames import join_null_safe
from replay.spark.queries import last_offset, time_of_offset, unknown_cluster
from replay.spark.tables import ACL_FIELDS, Lake

# the entry points; `render_decision` prints what `authorize_one` returns
__all__ = ["acls_by_id", "authorize", "authorize_by_resource_type", "authorize_one", "render_decision"]

RESULT_COLUMNS = ["as_of_offset", "decision", "certain", "reason", "deciding_acl_ids", "uncertain_acl_ids",
                  "coverage", "error"]


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
        parts.append(_join_back(by_type, decide_by_resource_type(by_type, tables, settings), BY_TYPE_KEY, original))
    parts.append(req.where(F.col("_err").isNotNull()).select(
        *original, "as_of_offset", F.lit(ERROR).alias("decision"), F.lit(True).alias("certain"),
        F.lit(R_INVALID).alias("reason"), empty_ids().alias("deciding_acl_ids"),
        empty_ids().alias("uncertain_acl_ids"), F.lit(None).cast("string").alias("coverage"),
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
    acls = acls_by_id(lake, cluster, ids)
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


def acls_by_id(lake: Lake, cluster: str, ids: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The ACLs of these ids as `kafka-acls` JSON names their fields, with the offsets each lifetime spans."""
    acls: dict[str, dict[str, Any]] = {}
    if ids:
        hist = LakeTables.of(lake).history
        for h in hist.where((F.col("cluster_id") == cluster) & F.col("acl_id").isin(list(ids))).collect():
            acls[h["acl_id"]] = acl_dict(h["acl_id"], AclBinding(*(h[c] for c in ACL_FIELDS)),
                                         validFromOffset=h["valid_from_offset"], validToOffset=h["valid_to_offset"])
    return acls
