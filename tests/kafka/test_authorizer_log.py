"""Reading Kafka's authorizer log (`replay.kafka.authorizer_log`): the lines StandardAuthorizer and the older
AclAuthorizer write, in the layouts people configure, as decisions; what is not a decision is passed over and what
looks like one but does not read goes to the caller as a problem."""

from __future__ import annotations

import gzip
from datetime import timedelta, timezone
from pathlib import Path

import pytest

from replay.kafka.acl import AclBinding
from replay.kafka.authorizer_log import (
    ALLOWED,
    DEFAULT_ALLOW,
    DEFAULT_DENY,
    DENIED,
    MATCHING_ACL,
    SUPER_USER,
    LineProblem,
    LoggedDecision,
    LogLineError,
    parse_line,
    parse_log_time,
    read_log,
)
from replay.kafka.times import parse_time

ACL = ("resourceType=TOPIC, resourceName=pay, patternType=PREFIXED, principal=User:bob, host=*, operation=READ, "
       "permissionType=DENY")
DENY_LINE = ("[2026-11-20 14:02:00,123] INFO Principal = User:bob is Denied operation = READ from host = 10.0.0.7 on "
             "resource = Topic:LITERAL:payments for request = Fetch with resourceRefCount = 1 based on rule "
             f"MatchingAcl(acl=StandardAcl({ACL})) (kafka.authorizer.logger)")


def test_a_denial_of_standard_authorizer_reads_with_its_rule() -> None:
    got = parse_line(DENY_LINE)
    assert got == LoggedDecision(
        time=parse_time("2026-11-20T14:02:00.123Z"), level="INFO", thread=None, principal="User:bob",
        host="10.0.0.7", operation="READ", resource_type="TOPIC", pattern_type="LITERAL", resource_name="payments",
        api="Fetch", ref_count=1, decision=DENIED, rule=f"MatchingAcl(acl=StandardAcl({ACL}))",
        rule_kind=MATCHING_ACL, acl=AclBinding("TOPIC", "pay", "PREFIXED", "User:bob", "*", "READ", "DENY"))


def test_newer_kafka_prints_the_acl_as_a_record() -> None:
    """Kafka 4.1 on: `StandardAcl` is a Java record, printed with square brackets; the same ACL."""
    old, new = parse_line(DENY_LINE), parse_line(DENY_LINE.replace(f"({ACL})", f"[{ACL}]"))
    assert old is not None and new is not None and new.acl == old.acl and new.rule_kind == MATCHING_ACL


@pytest.mark.parametrize("rule, kind, decision", [("SuperUser", SUPER_USER, "Allowed"),
                                                  ("DefaultAllow", DEFAULT_ALLOW, "Allowed"),
                                                  ("DefaultDeny", DEFAULT_DENY, "Denied")])
def test_rules_without_an_acl(rule: str, kind: str, decision: str) -> None:
    line = (f"[2026-11-20 14:02:00,123] DEBUG Principal = User:admin is {decision} operation = DESCRIBE from host = "
            "127.0.0.1 on resource = Cluster:LITERAL:kafka-cluster for request = DescribeCluster with "
            f"resourceRefCount = 1 based on rule {rule} (kafka.authorizer.logger)")
    got = parse_line(line)
    assert got is not None and (got.rule_kind, got.acl, got.rule) == (kind, None, rule)
    assert got.decision == (ALLOWED if decision == "Allowed" else DENIED)
    assert (got.resource_type, got.resource_name, got.api) == ("CLUSTER", "kafka-cluster", "DescribeCluster")


def test_the_zookeeper_authorizer_a_thread_and_an_iso_date() -> None:
    """AclAuthorizer (ZooKeeper mode) wrote `Operation = IdempotentWrite` and no rule; a layout with `[%t]` and
    an ISO date with an offset; names with spaces, colons and commas stay whole."""
    line = ("[2026-11-20T15:02:00.5+0100] DEBUG [data-plane-kafka-request-handler-3] Principal = User:CN=app, O=Acme "
            "is Allowed Operation = IdempotentWrite from host = 0:0:0:0:0:0:0:1 on resource = "
            "TransactionalId:LITERAL:tx: one, two for request = InitProducerId with resourceRefCount = 0 "
            "(kafka.authorizer.logger)")
    got = parse_line(line)
    assert got is not None
    assert (got.time, got.thread, got.principal, got.operation) == (
        parse_time("2026-11-20T14:02:00.500Z"), "data-plane-kafka-request-handler-3", "User:CN=app, O=Acme",
        "IDEMPOTENT_WRITE")
    assert (got.resource_type, got.resource_name, got.ref_count, got.rule, got.rule_kind) == (
        "TRANSACTIONAL_ID", "tx: one, two", 0, None, None)


def test_a_message_without_the_layout_around_it() -> None:
    """A layout that prints only the message (`%m%n`): no time and no level, the decision still reads."""
    message = DENY_LINE.split("] INFO ", 1)[1].removesuffix(" (kafka.authorizer.logger)")
    got = parse_line(message + "\n")
    assert got is not None and (got.time, got.level, got.decision) == (None, "", DENIED)
    assert got.acl == parse_line(DENY_LINE).acl  # type: ignore[union-attr]


def test_a_date_without_a_zone_is_in_the_brokers_zone() -> None:
    cet = timezone(timedelta(hours=1))
    assert parse_log_time("2026-11-20 15:02:00,123", cet) == parse_time("2026-11-20T14:02:00.123Z")
    assert parse_log_time("2026-11-20T14:02:00,123Z", cet) == parse_time("2026-11-20T14:02:00.123Z")
    with pytest.raises(LogLineError, match="cannot read the log time"):
        parse_log_time("Nov 20 14:02:00")


@pytest.mark.parametrize("line", ["", "\n", "[2026-11-20 14:02:00,123] INFO [KafkaServer id=1] started (kafka.server)",
                                  "\tat org.apache.kafka.metadata.authorizer.StandardAuthorizer.authorize",
                                  "Principal = nobody said anything here"])
def test_lines_that_record_no_decision_are_passed_over(line: str) -> None:
    assert parse_line(line) is None


@pytest.mark.parametrize("line, why", [
    (DENY_LINE.replace(" from host = 10.0.0.7", ""), "does not read as one"),
    (DENY_LINE.replace("operation = READ", "operation = PEEK"), "unknown AclOperation 'PEEK'"),
    (DENY_LINE.replace("Topic:LITERAL", "Queue:LITERAL"), "unknown ResourceType 'Queue'"),
    (DENY_LINE.replace("MatchingAcl(acl=", "SomeOtherRule(acl="), "none of SuperUser"),
    (DENY_LINE.replace("2026-11-20 14:02:00,123", "yesterday"), "cannot read the log time"),
])
def test_a_decision_that_does_not_read_is_an_error_that_says_why(line: str, why: str) -> None:
    with pytest.raises(LogLineError, match=why):
        parse_line(line)


def test_a_log_file_plain_or_gzip_gives_its_decisions_and_its_problems_in_place(tmp_path: Path) -> None:
    broken = DENY_LINE.replace(" from host = 10.0.0.7", "")
    text = "\n".join(["[2026-11-20 14:00:00,000] INFO starting (kafka.server)", DENY_LINE, broken,
                      DENY_LINE.replace("Denied", "Allowed").replace("INFO", "DEBUG")]) + "\n"
    plain, packed = tmp_path / "kafka-authorizer.log", tmp_path / "kafka-authorizer.log.2026-11-20-14.gz"
    plain.write_text(text)
    packed.write_bytes(gzip.compress(text.encode()))
    for path in (plain, packed):
        got = list(read_log(str(path)))
        assert [n for n, _ in got] == [2, 3, 4]
        first, problem, last = (x for _, x in got)
        assert isinstance(first, LoggedDecision) and first.decision == DENIED
        assert isinstance(problem, LineProblem) and (problem.path, problem.line) == (str(path), 3)
        assert "does not read as one" in problem.message
        assert isinstance(last, LoggedDecision) and (last.decision, last.level) == (ALLOWED, "DEBUG")


def test_a_long_hostile_line_reads_in_linear_time() -> None:
    """Substring tests decide whether a line is a decision at all, so a huge line of near-misses stays cheap."""
    assert parse_line("Principal = " + "x is Allowe " * 200_000) is None


# Confluent Platform's output as published (kafka-docker-playground, CP 5.x) and Confluent Cloud's documented example
CP_EVENT = ('{"confluentRouting":{"route":"confluent-audit-log-events"},"data":{"authenticationInfo":{"principal":'
            '"User:admin"},"authorizationInfo":{"granted":true,"operation":"Read","patternType":"LITERAL",'
            '"resourceName":"_confluent-metadata-auth","resourceType":"Topic","superUserAuthorization":true},'
            '"methodName":"kafka.FetchConsumer","request":{"client_id":"c-1","correlation_id":"456"},'
            '"requestMetadata":{"client_address":"/192.168.176.4"},"resourceName":"crn:///kafka=q/topic=x",'
            '"serviceName":"crn:///kafka=q"},"datacontenttype":"application/json","id":"7a1b","source":"crn:///kafka=q",'
            '"specversion":"0.3","subject":"crn:///kafka=q/topic=x","time":"2020-03-31T10:00:03.532Z",'
            '"type":"io.confluent.kafka.server/authorization"}')
CLOUD_EVENT = ('{"id":"fc0f","source":"crn://confluent.cloud/kafka=lkc-a1b2c","specversion":"1.0","type":'
               '"io.confluent.kafka.server/authorization","datacontenttype":"application/json","subject":"crn://x",'
               '"time":"2021-01-01T12:34:56.789Z","data":{"serviceName":"crn://x","methodName":"kafka.CreateTopics",'
               '"resourceName":"crn://x/topic=departures","authenticationInfo":{"principal":"User:123456"},'
               '"authorizationInfo":{"granted":false,"operation":"DescribeConfigs","resourceType":"Topic",'
               '"resourceName":"departures","patternType":"LITERAL","rbacAuthorization":{"role":"DeveloperRead"}},'
               '"request":{"correlationId":"123","clientId":"adminclient-42"}}}')


def test_confluent_audit_events_read_as_decisions() -> None:
    cp, cloud = parse_line(CP_EVENT), parse_line(CLOUD_EVENT)
    assert cp == LoggedDecision(parse_time("2020-03-31T10:00:03.532Z"), "", None, "User:admin", "192.168.176.4", "READ",
                                "TOPIC", "LITERAL", "_confluent-metadata-auth", "FetchConsumer", 1, ALLOWED,
                                SUPER_USER, SUPER_USER, None)
    assert cloud is not None and (cloud.decision, cloud.operation, cloud.host, cloud.rule_kind, cloud.api) == (
        DENIED, "DESCRIBE_CONFIGS", "", "RBAC", "CreateTopics")
    with pytest.raises(LogLineError, match="Confluent authorization event that does not read"):
        parse_line(CP_EVENT.replace('"granted":true,', ""))
    assert parse_line('{"type":"io.confluent.kafka.server/authentication","data":{}}') is None
