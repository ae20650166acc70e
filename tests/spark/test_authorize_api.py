"""API-level questions on the lake (`replay.spark.authorize_api`, `kraft-replay authorize --api` and
`--which-apis`), held to `apis.could_call` over the reference replayer's state of the same log at the same
offset: the same checks in the same order, the same decisions and deciding ACLs, the same outcome and error.
The questions include the three seed KIPs at the Kafka versions before and after each changed what is checked,
on a log written for them (two batches: the ACLs, then one removed)."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest

from replay.kafka import writer
from replay.kafka.acl import AclBinding
from replay.kafka.apis import LATEST_KAFKA, could_call
from replay.kafka.authorizer import StandardAuthorizer
from replay.kafka.dump import replay_paths

# their own lake and deep authorize plans: in the other worker (tests/conftest.py), without adaptive execution; minutes
# in all, so CI runs them and `make test-fast` does not (test_api_sql.py keeps the API questions' SQL in the fast loop)
pytestmark = [pytest.mark.spark, pytest.mark.spark_b, pytest.mark.slow, pytest.mark.usefixtures("without_aqe")]

CLUSTER = "apis"
HOST = "10.0.0.1"
READER, PRODUCER, MEMBER = "User:reader", "User:producer", "User:member"
ACLS = {  # id -> ACL; the first three seeds' ACLs, then one removed in a second batch
    "AAAAAAAAAAAAAAAAAAAAAA": AclBinding.of("GROUP", "g", "LITERAL", READER, "*", "DESCRIBE", "ALLOW"),
    "BAAAAAAAAAAAAAAAAAAAAA": AclBinding.of("TOPIC", "t", "LITERAL", READER, "*", "DESCRIBE", "ALLOW"),
    "CAAAAAAAAAAAAAAAAAAAAA": AclBinding.of("TOPIC", "t", "LITERAL", PRODUCER, "*", "WRITE", "ALLOW"),
    "DAAAAAAAAAAAAAAAAAAAAA": AclBinding.of("GROUP", "g", "LITERAL", MEMBER, "*", "READ", "ALLOW"),
    "EAAAAAAAAAAAAAAAAAAAAA": AclBinding.of("TOPIC", "t", "PREFIXED", MEMBER, "*", "READ", "ALLOW"),
}
REMOVED = "AAAAAAAAAAAAAAAAAAAAAA"
FIRST_END = len(ACLS) - 1  # the offset of the first batch's last record
# (principal, api, resources, Kafka versions)
QUESTIONS: list[tuple[str, str, dict[str, Any], list[str]]] = [
    # KIP-163: OffsetFetch needs the group's DESCRIBE since 1.0 (READ before)
    (READER, "OffsetFetch", {"group": ["g"], "topics": ["t"]}, ["0.11", "1.0", LATEST_KAFKA]),
    # KIP-679: an idempotent producer's InitProducerId accepts WRITE on any topic since 2.8
    (PRODUCER, "InitProducerId", {}, ["2.7", "2.8"]),
    # KIP-559: JoinGroup and SyncGroup need the group's READ in every version
    (MEMBER, "JoinGroup", {"group": ["g"]}, ["2.4", "2.5"]),
    (READER, "SyncGroup", {"group": ["g"]}, ["2.4", "2.5"]),
    (MEMBER, "Fetch", {"topics": ["t", "t-eu", "u"]}, [LATEST_KAFKA]),  # some topics only: PARTIAL
]


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("apis") / "dump"
    part = root / "__cluster_metadata-0"
    part.mkdir(parents=True)
    first = writer.encode_batch(0, [writer.acl_record(i, b) for i, b in ACLS.items()], 1, 1000)
    second = writer.encode_batch(FIRST_END + 1, [writer.remove_acl_record(REMOVED), writer.noop()], 1, 2000)
    (part / "00000000000000000000.log").write_bytes(first + second)
    return root


@pytest.fixture(scope="module")
def api_lake(spark: Any, dump: Path, tmp_path_factory: pytest.TempPathFactory) -> Any:
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, str(tmp_path_factory.mktemp("apis") / "lake"))
    ingest(spark, [str(dump)], cluster=CLUSTER, lake=lake, progress=False)
    replay_lake(lake, [CLUSTER], progress=False)
    return lake


@pytest.fixture(scope="module")
def reference(dump: Path) -> Any:
    return replay_paths([str(dump)])


def authorizer_at(reference: Any, offset: int) -> StandardAuthorizer:
    state = reference.state_at(offset)
    assert state.exact
    a = StandardAuthorizer()
    for acl_id, binding in state.certain.items():
        a.add_acl(acl_id, binding)
    a.complete_initial_load()
    return a


def test_api_calls_are_decided_like_the_reference(spark: Any, api_lake: Any, reference: Any) -> None:
    """Every question at once, as a DataFrame of API calls (`authorize_batch.decide`: one batch decision)."""
    from pyspark.sql import types as T

    from replay.spark.authorize_batch import decide

    asked = [(q, at, v) for q in QUESTIONS for at in ((FIRST_END, None) if q[1] == "OffsetFetch" else (None,))
             for v in q[3]]
    rows = [{"cluster_id": CLUSTER, "principal": principal, "host": HOST, "api": api, "kafka_version": version,
             "group": (resources.get("group") or [None])[0], "topics": resources.get("topics"),
             "offset": at if at is not None else FIRST_END + 2}
            for (principal, api, resources, _), at, version in asked]
    schema = T.StructType([T.StructField(n, T.StringType()) for n in ("cluster_id", "principal", "host", "api",
                                                                      "kafka_version", "group")]
                          + [T.StructField("topics", T.ArrayType(T.StringType())), T.StructField("offset", T.LongType())])
    got = decide(spark.createDataFrame(rows, schema), api_lake).collect()
    assert len(got) == len(rows)
    checked = set()
    for r in got:
        resources = {k: v for k, v in (("group", [r["group"]] if r["group"] else None), ("topics", r["topics"]))
                     if v is not None}
        want = could_call(authorizer_at(reference, r["as_of_offset"]), r["api"], r["principal"], HOST,
                          kafka_version=r["kafka_version"], **resources)
        what = f"{r['api']} by {r['principal']} at Kafka {r['kafka_version']} as of {r['as_of_offset']}"
        assert (r["decision"], r["api_error"]) == (want.outcome, want.error), what
        assert [(c["resource_type"], c["resource_name"], c["operation"], c["decision"], sorted(c["deciding_acl_ids"]))
                for c in r["api_checks"]] == [(c.resource_type, c.resource_name, c.operation, c.result,
                                               sorted(c.explanation.acl_ids)) for c in want.checks], what
        checked.add((r["api"], r["kafka_version"], r["offset"], r["decision"]))
    # each seed's answer changes where its KIP says, and so does the removal in the second batch
    late = FIRST_END + 2
    assert {("OffsetFetch", "0.11", FIRST_END, "DENIED"), ("OffsetFetch", "1.0", FIRST_END, "ALLOWED"),
            ("OffsetFetch", "1.0", late, "DENIED"), ("InitProducerId", "2.7", late, "DENIED"),
            ("InitProducerId", "2.8", late, "ALLOWED"), ("JoinGroup", "2.4", late, "ALLOWED"),
            ("JoinGroup", "2.5", late, "ALLOWED"), ("SyncGroup", "2.4", late, "DENIED"),
            ("SyncGroup", "2.5", late, "DENIED"), ("Fetch", LATEST_KAFKA, late, "PARTIAL")} <= checked, checked


def test_which_apis_asks_every_api_at_once(spark: Any, api_lake: Any, reference: Any) -> None:
    from replay.kafka.apis import APIS
    from replay.spark.authorize_api import which_apis

    resources: dict[str, Any] = {"topics": ["t"], "group": ["g"]}
    got = which_apis(spark, api_lake, CLUSTER, READER, HOST, kafka_version="1.0", offset=FIRST_END, **resources)
    authorizer = authorizer_at(reference, got["asOfOffset"])
    asked = {a["api"]: a for a in got["apis"]}
    assert len(asked) > 20
    for spec in APIS:
        if spec.pascal in asked:
            want = could_call(authorizer, spec.name, READER, HOST, kafka_version="1.0", **resources)
            assert (asked[spec.pascal]["outcome"], asked[spec.pascal]["error"]) == (want.outcome, want.error), spec
    # the reader may describe the group and the topic: OffsetFetch (since 1.0), not JoinGroup (the group's READ)
    assert asked["OffsetFetch"]["outcome"] == "ALLOWED" and asked["JoinGroup"]["outcome"] == "DENIED"
    not_asked = {a["api"]: a["why"] for a in got["notAsked"]}
    assert not_asked["AddPartitionsToTxn"] == "AddPartitionsToTxn needs a transactional id to evaluate its checks"
    assert "CreateAcls" not in not_asked
    assert not_asked["DescribeCluster"] == "no check applies at Kafka 1.0 on the resources and conditions given"
    assert "ApiVersions" in got["noCheck"] and "ApiVersions" not in asked


def test_the_cli_asks_about_an_api_call(spark: Any, api_lake: Any) -> None:
    from replay import cli

    lake = ["--lake", api_lake.location, "--lake-cluster", CLUSTER]
    out = io.StringIO()
    assert cli.main(["authorize", *lake, "--api", "OffsetFetch", "--group", "g", "--topic", "t", "--topic", "u",
                     "--principal", READER, "--host", HOST, "--kafka-version", "1.0", "--as-of-offset",
                     str(FIRST_END)], out) == 0
    text = out.getvalue()
    assert f"{READER} from {HOST} calls OffsetFetch (Kafka 1.0) as of offset {FIRST_END} " in text, text
    assert ": PARTIAL (TOPIC_AUTHORIZATION_FAILED)" in text.splitlines()[0], text
    assert "check GROUP 'g' DESCRIBE: ALLOWED (matching_allow)" in text, text
    assert "Current ACLs for resource `ResourcePattern(resourceType=GROUP, name=g, patternType=LITERAL)`" in text
    assert "denied: TOPIC 'u'" in text, text
    out = io.StringIO()
    assert cli.main(["authorize", *lake, "--which-apis", "--group", "g", "--principal", MEMBER, "--host", HOST,
                     "--output", "json"], out) == 0
    doc = json.loads(out.getvalue())
    assert {a["api"]: a["outcome"] for a in doc["apis"]}["JoinGroup"] == "ALLOWED"
    err = io.StringIO()
    assert cli.main(["authorize", *lake, "--topic", "a", "--group", "g", "--principal", "User:x", "--host",
                     "10.0.0.1", "--operation", "READ"], err) == 2  # one resource per plain question


def test_a_requests_file_mixes_access_tuples_and_api_calls(spark: Any, api_lake: Any, reference: Any,
                                                           tmp_path: Path) -> None:
    """Rows with an `api` value are API calls, decided at scale (checks on the executors, one batch decision) like
    `could_call` decides them; the others stay access tuples; a call Kafka cannot make is an ERROR row saying why."""
    from replay.spark.authorize_batch import authorize_file

    header = "principal,host,operation,resource_type,resource_name,api,group,topics,kafka_version,offset"
    lines = [f"{READER},{HOST},DESCRIBE,GROUP,g,,,,,{FIRST_END}",
             f"{READER},{HOST},,,,OffsetFetch,g,t;u,1.0,{FIRST_END}",
             f"{READER},{HOST},,,,OffsetFetch,g,t,0.11,{FIRST_END}",
             f"{PRODUCER},{HOST},,,,InitProducerId,,,2.8,{FIRST_END}",
             f"{MEMBER},{HOST},,,,JoinGroup,,,,{FIRST_END}",  # no group: JoinGroup cannot be asked
             f"{MEMBER},{HOST},,,,NoSuchApi,g,,,{FIRST_END}"]
    src = tmp_path / "requests.csv"
    src.write_text("\n".join([header, *[line.replace("t;u", '"t,u"') for line in lines]]) + "\n")
    out = tmp_path / "decisions"
    summary = authorize_file(spark, api_lake, CLUSTER, str(src), str(out), "parquet")
    assert summary["total"] == len(lines), summary
    rows = {(r["api"], r["kafka_version"]): r for r in spark.read.parquet(str(out)).collect()}
    plain = rows[None, None]
    assert (plain["decision"], plain["api_checks"], plain["deciding_acl_ids"]) == ("ALLOWED", None, [
        "AAAAAAAAAAAAAAAAAAAAAA"])
    authorizer = authorizer_at(reference, FIRST_END)
    for (api, version), kw in ((("OffsetFetch", "1.0"), {"group": "g", "topics": ["t", "u"]}),
                               (("OffsetFetch", "0.11"), {"group": "g", "topics": ["t"]}),
                               (("InitProducerId", "2.8"), {})):
        row = rows[api, version]
        want = could_call(authorizer, api, row["principal"], HOST, kafka_version=version, **kw)
        assert (row["decision"], row["api_error"], row["as_of_offset"]) == (want.outcome, want.error, FIRST_END)
        assert [(c["resource_type"], c["resource_name"], c["operation"], c["decision"]) for c in row["api_checks"]] \
            == [(c.resource_type, c.resource_name, c.operation, c.result) for c in want.checks]
    assert rows["OffsetFetch", "1.0"]["decision"] == "PARTIAL" and rows["OffsetFetch", "0.11"]["decision"] == "DENIED"
    assert rows["InitProducerId", "2.8"]["decision"] == "ALLOWED"
    assert rows["JoinGroup", None]["decision"] == "ERROR" and "needs a group" in rows["JoinGroup", None]["error"]
    assert rows["NoSuchApi", None]["decision"] == "ERROR" and "unknown Kafka API" in rows["NoSuchApi", None]["error"]
    # CSV out: the checks as JSON
    authorize_file(spark, api_lake, CLUSTER, str(src), str(tmp_path / "csv-out"), "csv")
    written = spark.read.option("header", "true").csv(str(tmp_path / "csv-out")).where("api = 'InitProducerId'")
    checks = json.loads(written.first()["api_checks"])
    assert checks and checks[0]["operation"] in ("IDEMPOTENT_WRITE", "WRITE"), checks


def test_the_python_api_asks_about_an_api_call(api_lake: Any) -> None:
    from replay.spark.api import Lake

    cluster = Lake(api_lake.spark, api_lake.location).cluster(CLUSTER)
    got = cluster.could_call(READER, HOST, "OffsetFetch", offset=FIRST_END, kafka_version="1.0", group=["g"],
                             topics=["t"])
    assert got["outcome"] == "ALLOWED" and [c["operation"] for c in got["checks"]] == ["DESCRIBE", "DESCRIBE"]
    found = cluster.which_apis(MEMBER, HOST, group=["g"])
    assert {a["api"]: a["outcome"] for a in found["apis"]}["JoinGroup"] == "ALLOWED"


# `make test-all`: `make test` holds the function to the Python API (test_sql_install.py) and the Python API to the
# reference (test_api_calls_are_decided_like_the_reference)
@pytest.mark.extended
def test_the_sql_function_answers_like_the_reference(spark: Any, api_lake: Any, reference: Any) -> None:
    """`acl_could_call` (plain SQL, for a warehouse): the seeds' calls at the versions before and after each KIP give
    the reference's checks, decisions, deciding ACLs, outcome and error; `acl_could_call_at_time` maps a time to the
    offset; a question that cannot be asked is an error that says why."""
    from replay.spark.authorize_api_sql import register_api_functions

    assert register_api_functions(spark, api_lake) == ["acl_could_call", "acl_could_call_at_time"]
    late = FIRST_END + 2
    seen = set()
    for principal, api, resources, versions in QUESTIONS:
        for version in versions[:2]:  # each seed's versions before and after its KIP
            for at in ((FIRST_END,) if api == "OffsetFetch" else (late,)):
                args = ", ".join(f"{k} => array({', '.join(repr(x) for x in v)})" for k, v in
                                 (("groups", resources.get("group")), ("topics", resources.get("topics"))) if v)
                rows = spark.sql(f"SELECT * FROM acl_could_call('{CLUSTER}', '{principal}', '{HOST}', '{api}', {at}, "
                                 f"kafka_version => '{version}'{', ' + args if args else ''})").collect()
                want = could_call(authorizer_at(reference, at), api, principal, HOST, kafka_version=version,
                                  **resources)
                what = f"{api} by {principal} at Kafka {version} as of {at}"
                assert {(r["outcome"], r["error"], tuple(r["denied"]), r["as_of_offset"]) for r in rows} == {
                    (want.outcome, want.error, tuple(f"{t}:{n}" for t, n in want.denied), at)}, what
                assert [(r["check_number"], r["resource_type"], r["resource_name"], r["operation"], r["decision"],
                         r["deciding_acl_ids"]) for r in rows] == [
                    (n, c.resource_type, c.resource_name, c.operation, c.result, sorted(c.explanation.acl_ids))
                    for n, c in enumerate(want.checks, 1)], what
                assert all(r["via"] and all(" ALLOW " in v for v in r["via"]) for r in rows if r["decision"] ==
                           "ALLOWED"), what
                seen.add((api, version, at, want.outcome))
    assert {("OffsetFetch", "0.11", FIRST_END, "DENIED"), ("OffsetFetch", "1.0", FIRST_END, "ALLOWED"),
            ("InitProducerId", "2.7", late, "DENIED"), ("InitProducerId", "2.8", late, "ALLOWED"),
            ("Fetch", LATEST_KAFKA, late, "PARTIAL")} <= seen, seen

    # a time maps to the last offset at or before it (the second batch was appended at 2000 ms)
    rows = spark.sql(f"SELECT as_of_offset, outcome FROM acl_could_call_at_time('{CLUSTER}', '{READER}', '{HOST}', "
                     "'OffsetFetch', TIMESTAMP_MILLIS(1500), groups => array('g'))").collect()
    assert {(r["as_of_offset"], r["outcome"]) for r in rows} == {(FIRST_END, "ALLOWED")}
    # an API without an authorization check: one row, allowed, no check
    rows = spark.sql(f"SELECT * FROM acl_could_call('{CLUSTER}', '{READER}', '{HOST}', 'ApiVersions', {late})").collect()
    assert [(r["outcome"], r["check_number"], r["resource_type"]) for r in rows] == [("ALLOWED", None, None)]

    # (every reason a call cannot be asked is held to Kafka's engine in test_api_sql)
    for call, message in [
        ("'OffsetFetch', 3", "OffsetFetch needs a group to evaluate its checks"),
        ("'Produce', -1", "is negative"),
    ]:
        with pytest.raises(Exception, match=message):
            spark.sql(f"SELECT * FROM acl_could_call('{CLUSTER}', '{READER}', '{HOST}', {call})").collect()
    with pytest.raises(Exception, match="not a client address as Java renders it"):
        spark.sql(f"SELECT * FROM acl_could_call('{CLUSTER}', '{READER}', '::1', 'Produce', 3)").collect()
    with pytest.raises(Exception, match="has no replayed history"):
        spark.sql(f"SELECT * FROM acl_could_call('nope', '{READER}', '{HOST}', 'Produce', 3)").collect()
