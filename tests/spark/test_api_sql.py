"""The API rule in SQL (`replay.spark.authorize_api_sql`, behind the SQL function `acl_could_call`) held equal to the
Kafka engine's (`apis.api_request`, `apis.api_decision`) on random calls: the same questions in the same order (or
the same reason the call cannot be asked), and with random answers (ALLOWED, DENIED, UNKNOWN, ERROR) per question,
the same outcome, error code, denied and hidden resources."""

from __future__ import annotations

import random
from typing import Any

import pytest
from pyspark.sql import types as T

from replay.kafka import apis
from replay.kafka.authorizer import Explanation
from replay.spark.authorize_api_sql import CALL_COLUMNS, calls_sql, catalog_sql, expand_sql
from replay.spark.rules import run_sql

# no lake: in the other worker (tests/conftest.py), without adaptive execution
pytestmark = [pytest.mark.spark, pytest.mark.spark_b, pytest.mark.usefixtures("without_aqe")]

CALL_SCHEMA = T.StructType([
    T.StructField("_call", T.LongType()), T.StructField("cluster_id", T.StringType()),
    T.StructField("_p", T.StringType()), T.StructField("_h", T.StringType()), T.StructField("_at", T.LongType()),
    T.StructField("_api", T.StringType()), T.StructField("_topics", T.ArrayType(T.StringType())),
    T.StructField("_groups", T.ArrayType(T.StringType())), T.StructField("_txn", T.StringType()),
    T.StructField("_token", T.StringType()), T.StructField("_owner", T.StringType()),
    T.StructField("_kv", T.StringType()), T.StructField("_av", T.IntegerType()),
    T.StructField("_conds", T.ArrayType(T.StringType())),
])
ANSWER_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType()), T.StructField("_p", T.StringType()),
    T.StructField("_h", T.StringType()), T.StructField("_op", T.StringType()), T.StructField("_rtype", T.StringType()),
    T.StructField("_name", T.StringType()), T.StructField("_at", T.LongType()),
    T.StructField("decision", T.StringType()), T.StructField("certain", T.BooleanType()),
    T.StructField("reason", T.StringType()), T.StructField("deciding_acl_ids", T.ArrayType(T.StringType())),
    T.StructField("uncertain_acl_ids", T.ArrayType(T.StringType())), T.StructField("coverage", T.StringType()),
    T.StructField("error", T.StringType()), T.StructField("acl_texts", T.MapType(T.StringType(), T.StringType())),
])
VERSIONS = ["0.11", "1.0", "1.0.0.0", "2.4", "2.7.2", "2.8", "2.8.0", "3.3", "3.9.2", apis.LATEST_KAFKA, "v4.0-rc1",
            "banana"]
PRINCIPALS = ["User:alice", "User:bob"]


def _names(rng: random.Random, pool: list[str]) -> list[str] | None:
    roll = rng.random()
    if roll < 0.3:
        return None
    if roll < 0.4:
        return []
    return [rng.choice(pool) for _ in range(rng.randint(1, 3))]  # duplicates allowed, as a request may hold them


def random_call(rng: random.Random, n: int) -> dict[str, Any]:
    spec = rng.choice(apis.APIS)
    spelled = rng.choice([spec.name, spec.pascal, spec.name.lower(), str(spec.key), f" {spec.pascal} "])
    if rng.random() < 0.02:
        spelled = "NoSuchApi"
    principal = rng.choice(PRINCIPALS)
    return {
        "_call": n, "cluster_id": f"c{n}", "_p": principal, "_h": "10.0.0.1", "_at": 5, "_api": spelled,
        "_topics": _names(rng, ["t1", "t2", "t3"]), "_groups": _names(rng, ["g1", "g2"]),
        "_txn": rng.choice([None, None, "tx"]), "_token": rng.choice([None, None, "tok"]),
        "_owner": rng.choice([None, None, principal, "User:carol"]), "_kv": rng.choice(VERSIONS),
        "_av": rng.choice([None, None, None, 0, 3, 4, 5]),
        "_conds": rng.choice([None, [], *[[c] for c in sorted(apis.CONDITIONS)], sorted(rng.sample(
            sorted(apis.CONDITIONS), 2)), ["no_such_condition"]]),
    }


def reference_request(call: dict[str, Any]) -> apis.ApiRequest | str:
    """The Kafka engine's request for a call, or the reason it cannot be asked."""
    try:
        return apis.api_request(call["_api"], call["_p"], kafka_version=call["_kv"], api_version=call["_av"],
                                topics=call["_topics"], group=call["_groups"], transactional_id=call["_txn"],
                                token_id=call["_token"], owner=call["_owner"], conditions=call["_conds"] or ())
    except (KeyError, ValueError) as e:
        return str(e)


def questions(request: apis.ApiRequest) -> list[tuple[int, int, str, str | None, str]]:
    spec = request.spec
    return [(q.requirement, spec.requirements[q.requirement].alternatives.index(q.check), q.resource_type,
             q.resource_name, q.operation) for q in request.questions]


@pytest.fixture(scope="module")
def calls() -> list[dict[str, Any]]:
    rng = random.Random(20261127)
    return [random_call(rng, n) for n in range(600)]


@pytest.mark.slow  # 20 s or more of Spark, and the `calls` fixture's 30 s
def test_calls_expand_to_the_checks_kafka_makes(spark: Any, calls: list[dict[str, Any]]) -> None:
    assert CALL_SCHEMA.names == CALL_COLUMNS
    df = spark.createDataFrame(calls, CALL_SCHEMA)
    text = f"WITH\n{catalog_sql()},\n{expand_sql('{calls}')}\nSELECT _call, _qs, _problem FROM _x"
    got = {r["_call"]: r for r in run_sql(spark, text, calls=df).collect()}
    asked = refused = 0
    for call in calls:
        row = got[call["_call"]]
        want = reference_request(call)
        if isinstance(want, str):
            refused += 1
            assert row["_problem"] is not None, (call, want)
            for word in ("unknown Kafka API", "not a Kafka version", "unknown conditions", " needs "):
                assert (word in want) == (word in row["_problem"]), (call, want, row["_problem"])
            if " needs " in want:
                assert row["_problem"] == want, call
            continue
        asked += 1
        assert row["_problem"] is None, (call, row["_problem"])
        assert [(q["i"], q["j"], q["rt"], q["name"], q["op"]) for q in row["_qs"]] == questions(want), call
    assert asked > 300 and refused > 30, (asked, refused)


@pytest.mark.slow  # with the `calls` fixture (30 s) 20 s or more of Spark
def test_outcomes_follow_the_answers_as_kafka_does(spark: Any, calls: list[dict[str, Any]]) -> None:
    rng = random.Random(7)
    asked = [c for c in calls if not isinstance(reference_request(c), str)]
    answers: list[dict[str, Any]] = []
    want: dict[int, apis.ApiDecision] = {}
    for call in asked:
        request = reference_request(call)
        assert isinstance(request, apis.ApiRequest)
        given: dict[tuple[str, str | None, str], Explanation] = {}
        for q in request.questions:
            if q.key not in given:
                result = rng.choices(["ALLOWED", "DENIED", apis.UNKNOWN, "ERROR"], [10, 10, 4, 1])[0]
                given[q.key] = Explanation(result, "", ())
                answers.append({"cluster_id": call["cluster_id"], "_p": call["_p"], "_h": call["_h"],
                                "_op": q.operation, "_rtype": q.resource_type, "_name": q.resource_name,
                                "_at": call["_at"], "decision": result})
        want[call["_call"]] = apis.api_decision(request, given)
    text = calls_sql("{calls}", lambda q: "SELECT * FROM {answers}")
    rows = run_sql(spark, text, calls=spark.createDataFrame(asked, CALL_SCHEMA),
                   answers=spark.createDataFrame(answers, ANSWER_SCHEMA)).collect()
    got = {r["_call"]: r for r in rows}
    outcomes: dict[str, int] = {}
    for n, d in want.items():
        r = got[n]
        outcomes[d.outcome] = outcomes.get(d.outcome, 0) + 1
        assert (r["outcome"], r["outcome_error"]) == (d.outcome, d.error), (n, d)
        assert list(r["denied"]) == [f"{t}:{x}" for t, x in d.denied], (n, d)
        assert list(r["hidden"]) == [f"{t}:{x}" for t, x in d.hidden], (n, d)
    assert len(rows) == sum(max(1, len(want[n].checks)) for n in want)
    assert all(outcomes.get(o, 0) >= 5 for o in ("ALLOWED", "DENIED", "PARTIAL", apis.UNKNOWN, "ERROR")), outcomes


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine
def test_the_functions_fit_the_analyzers_pass_limit_with_room(spark: Any) -> None:
    """A SQL function's body is analysed as a whole in at most `spark.sql.analyzer.maxIterations` passes (100 by
    default, and a warehouse user cannot raise it); the longest chain of dependent steps sets how many it needs.
    Created here with 85, so a change that makes them deeper fails here, not in a warehouse."""
    from replay.spark.authorize_api_sql import api_functions
    from replay.spark.tables import VISIBLE_SCHEMAS

    for name, schema in VISIBLE_SCHEMAS.items():
        spark.createDataFrame([], schema).createOrReplaceTempView(f"_empty_{name}")
    before = spark.conf.get("spark.sql.analyzer.maxIterations")
    spark.conf.set("spark.sql.analyzer.maxIterations", "85")
    functions = api_functions(lambda table: f"_empty_{table}")
    try:
        for f in functions:
            spark.sql(f.create())
        assert spark.sql("SHOW USER FUNCTIONS LIKE 'acl_could_call*'").count() == 2
    finally:
        spark.conf.set("spark.sql.analyzer.maxIterations", before)
        for f in functions:  # temporary functions over empty tables: none of this session's lakes
            spark.sql(f"DROP TEMPORARY FUNCTION IF EXISTS {f.name}")
