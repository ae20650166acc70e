"""API-level questions against the lake: "could P call OffsetFetch for group g then?", and "which APIs could P
call on these resources then?".

`replay.kafka.apis` says which checks an API makes at a Kafka version (`api_request`) and what their answers mean
for the call (`api_decision`); the checks are answered here by the lake's batch authorizer (`authorize.authorize`,
one Spark query for every check of every API asked), so a check the history cannot decide (UNKNOWN) makes the call
UNKNOWN only where it matters. Dicts ready for JSON; `render_api_decision` / `render_which_apis` print them.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from pyspark.sql import SparkSession

from replay.kafka import apis
from replay.kafka.authorizer import Explanation, check_question, parse_allow_everyone, parse_super_users
from replay.kafka.model import check_offset
from replay.spark.authorize import acls_by_id, authorize
from replay.spark.authorize_requests import REQUEST_SCHEMA
from replay.spark.queries import last_offset, time_of_offset, unknown_cluster
from replay.spark.tables import Lake

Key = tuple[str, str | None, str]


def _as_of(lake: Lake, cluster: str, offset: int | None, time: int | None) -> int | None:
    check_offset(offset)
    if offset is None and time is None:
        offset = last_offset(lake, cluster)
        if offset is None:
            raise unknown_cluster(lake, cluster)
    return offset


def _answers(spark: SparkSession, lake: Lake, cluster: str, principal: str, host: str, keys: Iterable[Key],
             offset: int | None, time: int | None, super_users: str, allow_everyone: bool
             ) -> tuple[dict[Key, dict[str, Any]], int | None]:
    """Every distinct check decided in one query: per key the decision row, and the offset they were taken at."""
    rows = [{"cluster_id": cluster, "principal": principal, "host": host, "operation": op, "resource_type": rt,
             "resource_name": name, "offset": offset, "time": time} for rt, name, op in dict.fromkeys(keys)]
    if not rows:
        return {}, offset
    decided = authorize(spark.createDataFrame(rows, REQUEST_SCHEMA), lake, super_users, allow_everyone).collect()
    out = {(r["resource_type"], r["resource_name"], r["operation"]): r.asDict(recursive=True) for r in decided}
    at = next((r["as_of_offset"] for r in decided), offset)
    return out, at


def _explanation(row: dict[str, Any]) -> Explanation:
    return Explanation(row["decision"], row["reason"], tuple(row["deciding_acl_ids"] or ()), error=row["error"])


def _request(api_name: str, principal: str, kafka_version: str, api_version: int | None,
             resources: dict[str, Any], conditions: Sequence[str]) -> apis.ApiRequest:
    return apis.api_request(api_name, principal, kafka_version=kafka_version, api_version=api_version,
                            conditions=conditions, **resources)


def _resources(topics: Sequence[str] | None, group: Sequence[str] | None, transactional_id: str | None,
               token_id: str | None, owner: str | None) -> dict[str, Any]:
    """The request's resources as `apis.api_request` takes them (only those given)."""
    given = {"topics": list(topics) if topics else None, "group": list(group) if group else None,
             "transactional_id": transactional_id, "token_id": token_id, "owner": owner}
    return {k: v for k, v in given.items() if v is not None}


def authorize_api(spark: SparkSession, lake: Lake, cluster: str, principal: str, host: str, api_name: str, *,
                  topics: Sequence[str] | None = None, group: Sequence[str] | None = None,
                  transactional_id: str | None = None, token_id: str | None = None, owner: str | None = None,
                  conditions: Sequence[str] = (), kafka_version: str = apis.LATEST_KAFKA,
                  api_version: int | None = None, offset: int | None = None, time: int | None = None,
                  super_users: str = "", allow_everyone: bool = False) -> dict[str, Any]:
    """Could `principal` call `api_name` on these resources as of `offset` or `time` (default: the end of known
    history), with Kafka `kafka_version`'s rules? Every check the call makes, its decision and deciding ACLs, and
    the call's outcome (ALLOWED, DENIED, PARTIAL: some topics only, UNKNOWN, ERROR). Raises `QuestionError` /
    `ValueError` for a question Kafka would not parse or a resource the API needs and the question lacks."""
    check_question(principal, "READ", "TOPIC")  # the principal's form; each check's own fields are Kafka's
    request = _request(api_name, principal, kafka_version, api_version,
                       _resources(topics, group, transactional_id, token_id, owner), conditions)
    offset = _as_of(lake, cluster, offset, time)
    rows, at = _answers(spark, lake, cluster, principal, host, [q.key for q in request.questions], offset, time,
                        super_users, allow_everyone)
    decision = apis.api_decision(request, {k: _explanation(r) for k, r in rows.items()})
    ids = sorted({i for r in rows.values() for i in (r["deciding_acl_ids"] or []) + (r["uncertain_acl_ids"] or [])})
    acls = acls_by_id(lake, cluster, ids)
    checks = []
    for c in decision.checks:
        r = rows[(c.resource_type, c.resource_name, c.operation)]
        checks.append({"requirement": c.requirement, "resourceType": c.resource_type, "resourceName": c.resource_name,
                       "operation": c.operation, "decision": r["decision"], "certain": r["certain"],
                       "reason": r["reason"], "error": r["error"],
                       "decidingAcls": [acls.get(i, {"id": i}) for i in r["deciding_acl_ids"] or []],
                       "uncertainAcls": [acls.get(i, {"id": i}) for i in r["uncertain_acl_ids"] or []]})
    return {"cluster": cluster, "principal": principal, "host": host, "api": request.spec.pascal,
            "apiKey": request.spec.key, "kafkaVersion": kafka_version, "apiVersion": request.api_version,
            "resources": dict(request.values), "conditions": sorted(conditions), "asOfOffset": at,
            "asOfTime": time_of_offset(lake, cluster, at) if at is not None else None, "requestedTime": time,
            "outcome": decision.outcome, "error": decision.error,
            "denied": [{"resourceType": t, "resourceName": n} for t, n in decision.denied],
            "hidden": [{"resourceType": t, "resourceName": n} for t, n in decision.hidden],
            "checks": checks, "notes": list(decision.notes),
            "superUsers": sorted(parse_super_users(super_users or None)),
            "allowEveryoneIfNoAclFound": parse_allow_everyone(allow_everyone)}


def which_apis(spark: SparkSession, lake: Lake, cluster: str, principal: str, host: str, *,
               topics: Sequence[str] | None = None, group: Sequence[str] | None = None,
               transactional_id: str | None = None, token_id: str | None = None, owner: str | None = None,
               conditions: Sequence[str] = (), kafka_version: str = apis.LATEST_KAFKA, offset: int | None = None,
               time: int | None = None, super_users: str = "", allow_everyone: bool = False) -> dict[str, Any]:
    """Every API that checks ACLs, asked on the resources given, as of one moment: its outcome and error code.
    APIs that need a resource the question does not name, or make no check on the resources given, are listed
    apart (`notAsked`), and so are those Kafka never authorizes (`noCheck`)."""
    check_question(principal, "READ", "TOPIC")
    resources = _resources(topics, group, transactional_id, token_id, owner)
    requests: list[apis.ApiRequest] = []
    not_asked: list[dict[str, Any]] = []
    for spec in apis.APIS:
        if not spec.authorizes:
            continue
        try:
            request = _request(spec.name, principal, kafka_version, None, resources, conditions)
        except ValueError as e:
            not_asked.append({"api": spec.pascal, "apiKey": spec.key, "why": str(e)})
            continue
        if request.questions:
            requests.append(request)
        else:
            not_asked.append({"api": spec.pascal, "apiKey": spec.key,
                              "why": f"no check applies at Kafka {kafka_version} on the resources and conditions "
                                     "given"})
    offset = _as_of(lake, cluster, offset, time)
    rows, at = _answers(spark, lake, cluster, principal, host, [q.key for r in requests for q in r.questions],
                        offset, time, super_users, allow_everyone)
    answers = {k: _explanation(r) for k, r in rows.items()}
    found = []
    for request in requests:
        d = apis.api_decision(request, answers)
        found.append({"api": request.spec.pascal, "apiKey": request.spec.key, "outcome": d.outcome,
                      "error": d.error, "checks": len(d.checks),
                      "denied": list(dict.fromkeys(f"{t}:{n}" for t, n in d.denied))})
    return {"cluster": cluster, "principal": principal, "host": host, "kafkaVersion": kafka_version,
            "resources": resources, "conditions": sorted(conditions), "asOfOffset": at,
            "asOfTime": time_of_offset(lake, cluster, at) if at is not None else None, "requestedTime": time,
            "apis": found, "notAsked": not_asked,
            "noCheck": [s.pascal for s in apis.APIS if not s.authorizes]}
