"""Audits (a)-(e) on one small hand-made history, their SQL functions, and their outputs."""

from __future__ import annotations

import json
from typing import Any

import pytest
from test_authorize import MemLake, _acl, life  # type: ignore[import-not-found]

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("without_aqe")]

LIVES = [
    life("a1", _acl("pay", "PREFIXED", "User:bob", "READ", "ALLOW"), 5),
    life("d1", _acl("payments", "LITERAL", "User:bob", "READ", "DENY"), 10, 20),
    life("w1", _acl("*", "LITERAL", "User:*", "DESCRIBE", "ALLOW"), 3, 50),
    life("h1", _acl("payments", "LITERAL", "User:carol", "WRITE", "ALLOW", host="10.0.0.1"), 30, 40, to_min=35),
    life("all1", _acl("g", "PREFIXED", "User:dave", "ALL", "ALLOW", rtype="GROUP"), 0),
]
COVERAGE = [{"cluster_id": "c", "start_offset": 0, "end_offset": 60, "kind": "log", "source": None}]
TIMES = [{"cluster_id": "c", "offset": o, "time": 100_000 + 1000 * o} for o in range(0, 61, 5)]


def _record(offset: int, rtype: str, data: dict[str, Any]) -> dict[str, Any]:
    return {"cluster_id": "c", "snapshot_end_offset": None, "offset": offset, "record_type": rtype,
            "payload_json": json.dumps({"type": rtype, "version": 0, "data": data})}


@pytest.fixture(scope="module")
def lake(spark: Any) -> MemLake:
    records = spark.createDataFrame([
        _record(1, "TOPIC_RECORD", {"name": "payments", "topicId": "T1"}),
        _record(2, "TOPIC_RECORD", {"name": "orphan", "topicId": "T2"}),
        _record(3, "TOPIC_RECORD", {"name": "gone", "topicId": "T3"}),
        _record(8, "REMOVE_TOPIC_RECORD", {"topicId": "T3"}),
    ], "cluster_id string, snapshot_end_offset long, offset long, record_type string, payload_json string")
    return MemLake(spark, [x.row() for x in LIVES], COVERAGE, TIMES, {"metadata_records": records})


def _pick(rows: list[dict[str, Any]], *cols: str) -> set[tuple[Any, ...]]:
    return {tuple(tuple(r[c]) if isinstance(r[c], list) else r[c] for c in cols) for r in rows}


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine: CI runs it, `make test-fast` does not
def test_who_can(spark: Any, lake: MemLake) -> None:
    from replay.spark.audits import audit_who_can, render_audit

    at12 = audit_who_can(spark, lake, "c", "READ", "TOPIC", "payments", offset=12)
    assert _pick(at12, "who", "from_host", "decision", "reason", "deciding_acl_ids") == {
        ("User:bob", "any host", "DENIED", "matching_deny", ("d1",))}
    at25 = audit_who_can(spark, lake, "c", "DESCRIBE", "TOPIC", "payments", time=125_000, super_users="User:root")
    assert _pick(at25, "who", "decision", "reason", "deciding_acl_ids") == {
        ("everyone", "ALLOWED", "matching_allow", ("w1",)),
        ("User:bob", "ALLOWED", "matching_allow", ("a1", "w1")),
        ("User:root", "ALLOWED", "super_user", ()),
    }
    assert {r["as_of_offset"] for r in at25} == {25}
    assert any(v.startswith("TOPIC:PREFIXED:pay User:bob ALLOW READ from *") for r in at25 for v in r["via"])
    write = audit_who_can(spark, lake, "c", "WRITE", "TOPIC", "payments", offset=37)
    assert _pick(write, "who", "host", "decision", "certain") == {("User:carol", "10.0.0.1", "UNKNOWN", False)}
    lines = render_audit(at12, "who_can")
    assert lines[0].split()[:3] == ["who", "from_host", "decision"] and "User:bob" in lines[2]


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine
def test_what_can(spark: Any, lake: MemLake) -> None:
    from replay.spark.audits import audit_what_can

    rows = audit_what_can(spark, lake, "c", "User:bob", offset=25)
    got = _pick(rows, "resource_type", "pattern_type", "resource_name", "operation", "decision")
    assert ("TOPIC", "PREFIXED", "pay", "READ", "ALLOWED") in got
    assert ("TOPIC", "PREFIXED", "pay", "DESCRIBE", "ALLOWED") in got  # READ implies DESCRIBE
    assert ("TOPIC", "LITERAL", "*", "DESCRIBE", "ALLOWED") in got  # everyone's DESCRIBE
    assert not any(r[4] == "DENIED" for r in got)  # nothing denied explicitly at 25
    dave = audit_what_can(spark, lake, "c", "User:dave", offset=55)
    assert {r["operation"] for r in dave if r["resource_type"] == "GROUP"} == {
        "READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS"}


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine
def test_changes(spark: Any, lake: MemLake) -> None:
    from replay.spark.audits import audit_changes

    ch = audit_changes(spark, lake, "c", start=4, end=12)
    assert _pick(ch["acls"], "acl_id", "change", "certain") == {("a1", "added", True), ("d1", "added", True)}
    access = _pick(ch["access"], "who", "operation", "resource_name", "change")
    assert ("User:bob", "READ", "pay", "gained") in access
    assert ("User:bob", "DESCRIBE", "pay", "gained") not in access  # everyone could DESCRIBE already (w1)
    assert not any(a[2] == "payments" and a[0] == "User:bob" and a[1] == "READ" for a in access)  # denied before too
    later = audit_changes(spark, lake, "c", start=32, end=38)
    assert _pick(later["acls"], "acl_id", "change", "certain") == {("h1", "maybe_removed", False)}


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine
def test_timeline(spark: Any, lake: MemLake) -> None:
    from replay.spark.audits import audit_timeline

    rows = audit_timeline(spark, lake, "c", principal="User:bob", operation="READ")
    pay = sorted((r for r in rows if r["resource_name"] == "payments" and r["host"] == "*"),
                 key=lambda r: r["from_offset"])
    assert [(r["from_offset"], r["to_offset"], r["decision"], r["certain"]) for r in pay] == [
        (0, 5, "DENIED", True), (5, 10, "ALLOWED", True), (10, 20, "DENIED", True), (20, 61, "ALLOWED", True),
        (61, None, "UNKNOWN", False)]
    assert pay[1]["from_time"] == 105_000 and pay[1]["to_time"] == 110_000
    res = audit_timeline(spark, lake, "c", resource_type="TOPIC", resource_name="payments", operation="WRITE")
    carol = sorted((r for r in res if r["principal"] == "User:carol" and r["host"] == "10.0.0.1"),
                   key=lambda r: r["from_offset"])
    assert [(r["from_offset"], r["decision"], r["certain"]) for r in carol][1:4] == [
        (30, "ALLOWED", True), (35, "UNKNOWN", False), (40, "DENIED", True)]


@pytest.mark.slow  # 20 s or more of Spark on the 2-core machine
def test_risky_grants_and_sql(spark: Any, lake: MemLake) -> None:
    from replay.kafka import outputs
    from replay.spark.audits import audit_risky_grants, register_audit_functions

    over = audit_risky_grants(spark, lake, "c")
    assert _pick(over, "risk", "acl_id") == {("everyone_allow", "w1"), ("wildcard_resource", "w1"),
                                             ("all_operations", "all1")}
    at55 = audit_risky_grants(spark, lake, "c", offset=55)
    assert _pick(at55, "risk", "resource_name", "certain") == {
        ("all_operations", "g", True), ("default_exposed", "orphan", True)}  # payments is covered by `pay`, gone gone
    names = register_audit_functions(spark, lake)
    assert set(names) == {"acl_who_can", "acl_what_can", "acl_access_changes", "acl_diff", "acl_timeline",
                          "acl_risky_grants"}
    sql = spark.sql("SELECT risk, acl_id, certain FROM acl_risky_grants('c', 20)").collect()
    assert {(r.risk, r.acl_id, r.certain) for r in sql} == {
        ("everyone_allow", "w1", True), ("wildcard_resource", "w1", True), ("all_operations", "all1", True)}
    diff = spark.sql("SELECT change, acl_id, certain FROM acl_diff('c', 4, 12)").collect()
    assert {(r.change, r.acl_id, r.certain) for r in diff} == {("added", "a1", True), ("added", "d1", True)}
    import io

    buf = io.BytesIO()
    outputs.write_avro(over, buf, "risky_grants")
    buf.seek(0)
    back = outputs.read_avro(buf)
    assert {r["acl_ids"][0] for r in back} == {"w1", "all1"} and back[0]["audit"] == "risky_grants"
    assert all("risk" in r["attributes"] for r in back)


def _norm(rows: list[Any]) -> list[tuple[Any, ...]]:
    """Rows (dicts or Rows) as sorted tuples of (column, value), arrays as tuples: order-free comparison."""
    out = []
    for r in rows:
        d = r if isinstance(r, dict) else r.asDict(recursive=True)
        out.append(tuple(sorted((k, tuple(v) if isinstance(v, list) else v) for k, v in d.items())))
    return sorted(out, key=repr)


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_sql_functions_give_the_python_audits_rows(spark: Any, lake: MemLake) -> None:
    """The audits as temporary SQL functions (register_audit_functions) give the Python audit's rows, column for
    column, with the settings (super.users parsed as Kafka parses it; allow.everyone), names in any case and named
    arguments. Every function's plain call is held to the Python API on the samples by test_sql_install (the
    persistent functions are the same definitions)."""
    from replay.spark import audits

    audits.register_audit_functions(spark, lake)
    cases: list[tuple[str, list[dict[str, Any]]]] = [
        ("SELECT * FROM acl_who_can('c', 'describe', 'Topic', 'payments', 25, ' User:root ; ', true)",
         audits.audit_who_can(spark, lake, "c", "DESCRIBE", "TOPIC", "payments", offset=25, super_users="User:root",
                              allow_everyone=True)),
        ("SELECT * FROM acl_what_can('c', 'User:dave', 55, super_users => 'User:dave')",
         audits.audit_what_can(spark, lake, "c", "User:dave", 55, super_users="User:dave")),
        ("SELECT * FROM acl_risky_grants('c', NULL)", audits.audit_risky_grants(spark, lake, "c")),
        ("SELECT * FROM acl_risky_grants('c', 55, true)",
         audits.audit_risky_grants(spark, lake, "c", offset=55, allow_everyone=True)),
        ("SELECT * FROM acl_risky_grants('c', 55, false)",
         audits.audit_risky_grants(spark, lake, "c", offset=55, allow_everyone=False)),
    ]
    got: dict[str, list[Any]] = {}
    for query, python_rows in cases:
        got[query] = spark.sql(query).collect()
        assert python_rows, query  # every case has something to compare
        assert _norm(got[query]) == _norm(python_rows), query
    # acl_diff: the ACL half of the changes audit, same change labels
    diff = spark.sql("SELECT acl_id, change, certain FROM acl_diff('c', 32, 38)").collect()
    acls = [r.asDict() for r in audits.acl_changes(spark, lake, "c", 32, 38).collect()]
    assert _pick([r.asDict() for r in diff], "acl_id", "change", "certain") == _pick(acls, "acl_id", "change", "certain")
    # allow.everyone exposure needs the setting: false -> nothing is exposed
    assert "default_exposed" not in {r.risk for r in got["SELECT * FROM acl_risky_grants('c', 55, false)"]}
    assert ("default_exposed", "orphan") in {(r.risk, r.resource_name)
                                             for r in got["SELECT * FROM acl_risky_grants('c', 55, true)"]}
    with pytest.raises(Exception, match="give either a principal, or a resource type and name"):
        spark.sql("SELECT * FROM acl_timeline('c', 'User:bob', 'TOPIC', 'payments')").collect()
    with pytest.raises(Exception, match="expected a string in format principalType:principalName but got bob"):
        spark.sql("SELECT * FROM acl_who_can('c', 'READ', 'TOPIC', 'payments', 12, 'User:a;bob')").collect()


HOST_LIVES = [
    life("v4", _acl("t", "LITERAL", "User:ann", "READ", "ALLOW", host="10.0.0.1"), 0),
    life("v6", _acl("t", "LITERAL", "User:ann", "READ", "ALLOW", host="0:0:0:0:0:0:0:1"), 0),
    life("short6", _acl("t", "LITERAL", "User:bea", "READ", "ALLOW", host="::1"), 0),
    life("name", _acl("t", "PREFIXED", "User:bea", "ALL", "ALLOW", host="localhost"), 0),
    life("zeros", _acl("t", "LITERAL", "User:*", "READ", "DENY", host="010.0.0.1"), 0, 20),
    life("other", _acl("t", "LITERAL", "User:cid", "WRITE", "ALLOW", host="::1"), 0),
]


def _host_corpus() -> list[str]:
    """ACL host strings of every shape: canonical and not (leading zeros, upper case, `::`, brackets, zones,
    IPv4-mapped, out of range, names), each also slightly mutated."""
    import random

    rnd = random.Random(7)
    hand = ["*", "", "localhost", "10.0.0.1", "010.0.0.1", "10.1", "256.0.0.1", "0.0.0.0", "255.255.255.255",
            "1.2.3.4.5", " 10.0.0.1", "::1", "0:0:0:0:0:0:0:1", "0:0:0:0:0:0:0:01", "0:0:0:0:0:0:0:1%2",
            "0:0:0:0:0:0:0:1%02", "0:0:0:0:0:0:0:1%2147483647", "0:0:0:0:0:0:0:1%2147483648", "0:0:0:0:0:0:0:1%",
            "0:0:0:0:0:0:0:1%eth0", "0:0:0:0:0:ffff:a00:1", "::ffff:10.0.0.1", "[0:0:0:0:0:0:0:1]", "fe80:0:0:0:0:0:0:1",
            "FE80:0:0:0:0:0:0:1", "fe80:0:0:0:0:0:0:1:2", "fe80::1", "1:2:3:4:5:6:7:fffff", "1:2:3:4:5:6:1.2.3.4"]
    out = list(hand)
    for _ in range(400):
        if rnd.random() < 0.5:
            parts = [str(rnd.choice([0, 1, 9, 10, 99, 100, 199, 200, 249, 250, 255, 256, rnd.randrange(300)]))
                     for _ in range(4)]
            text = ".".join(parts)
        else:
            groups = [format(rnd.choice([0, 0, 1, 0xa, 0xff, 0xffff, rnd.randrange(0x10000)]), "x") for _ in range(8)]
            text = ":".join(groups) + rnd.choice(["", "", "%0", "%7", "%12"])
        out.append(text)
        i = rnd.randrange(len(text))
        out.append(text[:i] + rnd.choice(["0", "A", ":", ".", "", "::", "%"]) + text[i + 1:])
    return out


def test_presentable_hosts_in_sql_are_those_java_renders_as_themselves(spark: Any) -> None:
    """The plain-SQL host rule (no Python function, so persistent SQL functions can use it) against the reference
    rendering: a host can match a client only when it is `*` or its own Java rendering."""
    from replay.kafka.authorizer import presentable_host
    from replay.spark.authorize_requests import presentable_host_sql

    hosts = _host_corpus()
    got = {r.h: r.ok for r in spark.createDataFrame([(h,) for h in hosts], "h string").selectExpr(
        "h", f"{presentable_host_sql('h')} AS ok").collect()}
    assert got == {h: presentable_host(h) for h in hosts}
    assert sum(got.values()) > 100 and sum(not v for v in got.values()) > 100  # both answers are exercised


def test_wrong_questions_to_the_python_audits_raise(spark: Any, lake: MemLake) -> None:
    """Issue 18 item 5, issue 14: the Python audits refuse what the SQL functions refuse (an unknown cluster, a
    negative offset, a time before the known history, a principal without its type, an operation or resource type
    Kafka would not parse) with the typed errors of the state questions, instead of answering with no rows."""
    from replay.kafka.model import QuestionError, UnknownClusterError
    from replay.spark import audits

    asks = {
        "who_can at": lambda c: audits.audit_who_can(spark, lake, c, "READ", "TOPIC", "payments", offset=12),
        "who_can at the end": lambda c: audits.audit_who_can(spark, lake, c, "READ", "TOPIC", "payments"),
        "what_can": lambda c: audits.audit_what_can(spark, lake, c, "User:bob", offset=25),
        "changes": lambda c: audits.audit_changes(spark, lake, c, start=4, end=12),
        "timeline": lambda c: audits.audit_timeline(spark, lake, c, principal="User:bob"),
        "risky over time": lambda c: audits.audit_risky_grants(spark, lake, c),
        "risky at": lambda c: audits.audit_risky_grants(spark, lake, c, time=130_000),
    }
    for ask in asks.values():  # (the tests above ask each of them about the known cluster 'c')
        with pytest.raises(UnknownClusterError, match=r"cluster 'nope' has no replayed history .*it holds 'c'"):
            ask("nope")
    with pytest.raises(QuestionError, match="offset -1 is negative"):
        audits.audit_who_can(spark, lake, "c", "READ", "TOPIC", "payments", offset=-1)
    with pytest.raises(QuestionError, match=r"known history starts at .* \(offset 0\)"):
        audits.audit_what_can(spark, lake, "c", "User:bob", time=99_999)
    with pytest.raises(QuestionError, match="principal 'bob' is not TYPE:NAME"):
        audits.audit_what_can(spark, lake, "c", "bob", offset=25)
    with pytest.raises(QuestionError, match="principal 'bob' is not TYPE:NAME"):
        audits.audit_timeline(spark, lake, "c", principal="bob")
    with pytest.raises(QuestionError, match="offset -2 is negative"):
        audits.acl_changes(spark, lake, "c", -2, 12)
    with pytest.raises(QuestionError, match="offset -3 is negative"):
        audits.access_changes(spark, lake, "c", 0, -3)
    # fields Kafka would not parse, and a timeline asked about neither a principal nor a resource: typed errors,
    # raised before any Spark job, as `authorize_one` refuses them (the SQL functions raise errors for them too)
    with pytest.raises(QuestionError, match="unknown AclOperation 'FROB'"):
        audits.audit_who_can(spark, lake, "c", "FROB", "TOPIC", "payments", offset=12)
    with pytest.raises(QuestionError, match="unknown ResourceType 'TOPICS'"):
        audits.audit_who_can(spark, lake, "c", "READ", "TOPICS", "payments", offset=12)
    with pytest.raises(QuestionError, match="unknown AclOperation 'FROB'"):
        audits.audit_timeline(spark, lake, "c", principal="User:bob", operation="FROB")
    with pytest.raises(QuestionError, match="unknown ResourceType 'TOPICS'"):
        audits.audit_timeline(spark, lake, "c", resource_type="TOPICS", resource_name="payments")
    with pytest.raises(QuestionError, match="give either a principal, or a resource type and name"):
        audits.audit_timeline(spark, lake, "c", resource_type="TOPIC")
    with pytest.raises(QuestionError, match="give either a principal, or a resource type and name"):
        audits.audit_timeline(spark, lake, "c", principal="User:bob", resource_type="TOPIC", resource_name="x")
    assert audits.acl_changes(spark, lake, "c", -1, 12).count() > 0  # -1: before the first record


@pytest.mark.slow  # 60-100 s of Spark on the 2-core machine
def test_acl_hosts_no_client_can_present_are_listed_apart(spark: Any) -> None:
    """Kafka compares an ACL host with Java's rendering of the client address, so `::1`, `localhost` or
    `010.0.0.1` never match: who-can / what-can report access only from hosts that can match and list those ACLs
    separately as NEVER_MATCHES (with the ACL spelled out); changes and timelines do not evaluate such hosts."""
    from replay.spark import audits

    lake = MemLake(spark, [x.row() for x in HOST_LIVES], COVERAGE, TIMES)
    rows = audits.audit_who_can(spark, lake, "c", "READ", "TOPIC", "t", offset=10)
    real = [r for r in rows if r["decision"] != audits.NEVER_MATCHES]
    assert _pick(real, "who", "host", "decision", "deciding_acl_ids") == {
        ("User:ann", "10.0.0.1", "ALLOWED", ("v4",)), ("User:ann", "0:0:0:0:0:0:0:1", "ALLOWED", ("v6",))}
    never = [r for r in rows if r["decision"] == audits.NEVER_MATCHES]
    assert rows[-len(never):] == never  # listed after the answer
    # `other` (::1, WRITE) is not for READ; `zeros` is everyone's DENY from 010.0.0.1 (Java prints 10.0.0.1)
    assert _pick(never, "deciding_acl_ids", "who", "host", "reason", "certain") == {
        (("short6",), "User:bea", "::1", "acl_host_never_matches", True),
        (("name",), "User:bea", "localhost", "acl_host_never_matches", True),
        (("zeros",), "everyone", "010.0.0.1", "acl_host_never_matches", True),
    }
    assert all(r["reason"] == "acl_host_never_matches" and len(r["via"]) == 1 and r["via"][0].endswith(
        "from " + r["host"]) for r in never)
    # the Python authorizer agrees: a client at ::1 (rendered 0:0:0:0:0:0:0:1) is not allowed by `short6`
    from replay.kafka.authorizer import StandardAuthorizer

    a = StandardAuthorizer()
    a.load_snapshot({x.acl_id: x.binding for x in HOST_LIVES if x.acl_id != "zeros"})
    a.complete_initial_load()
    assert a.authorize("User:bea", "::1", "READ", "TOPIC", "t") == "DENIED"
    assert a.authorize("User:ann", "::1", "READ", "TOPIC", "t") == "ALLOWED"

    what = audits.audit_what_can(spark, lake, "c", "User:bea", offset=10)
    assert {r["decision"] for r in what} == {audits.NEVER_MATCHES}  # none of bea's ACLs can ever match
    assert {(r["deciding_acl_ids"][0], r["host"], r["operation"]) for r in what
            if r["decision"] == audits.NEVER_MATCHES} == {("short6", "::1", "READ"), ("name", "localhost", "ALL"),
                                                          ("zeros", "010.0.0.1", "READ")}
    assert not any(r["host"] in ("::1", "localhost", "010.0.0.1") for r in what
                   if r["decision"] != audits.NEVER_MATCHES)
    changes = audits.audit_changes(spark, lake, "c", 10, 25)
    assert _pick(changes["acls"], "acl_id", "change") == {("zeros", "removed")}
    assert not any(r["host"] == "010.0.0.1" for r in changes["access"])
    timeline = audits.audit_timeline(spark, lake, "c", resource_type="TOPIC", resource_name="t", operation="READ")
    assert {r["host"] for r in timeline} == {"*", "10.0.0.1", "0:0:0:0:0:0:0:1"}
    # SQL gives the same
    audits.register_audit_functions(spark, lake)
    assert _norm(spark.sql("SELECT * FROM acl_who_can('c', 'READ', 'TOPIC', 't', 10)").collect()) == _norm(rows)
    assert _norm(spark.sql("SELECT * FROM acl_what_can('c', 'User:bea', 10)").collect()) == _norm(what)
