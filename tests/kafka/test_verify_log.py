"""Verifying logged decisions against the replayed history (`replay.kafka.verify_log`, the reference rule).

The lines here are written the way StandardAuthorizer writes them (`kafka_line`, from the format in
`replay.kafka.authorizer_log`) for requests the sample's own ACLs decide; lines that a real broker wrote are the
subject of the broker test that is still to come (issue 17 item 4)."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from replay.kafka.acl import RESOURCE_TYPE_PASCAL, AclBinding, ResourceType
from replay.kafka.authorizer import (
    REASON_ALLOW_ACL,
    REASON_ALLOW_EVERYONE,
    REASON_DENY_ACL,
    REASON_SUPER_USER,
    java_host_address,
    presentable_host,
)
from replay.kafka.authorizer_log import LoggedDecision, parse_line
from replay.kafka.dump import replay_paths
from replay.kafka.replayer import AclState, ReplayResult
from replay.kafka.times import format_time
from replay.kafka.verify_log import CONSISTENT, INCONSISTENT, UNKNOWN, decision_at, exact_decision, verify

SAMPLE = Path(__file__).resolve().parents[2] / "data" / "small-snapshots"
AT = 150  # an offset of the sample whose state holds 33 ACLs, all known exactly


@pytest.fixture(scope="module")
def history() -> ReplayResult:
    return replay_paths([str(SAMPLE)])


def kafka_line(time_ms: int, principal: str, decision: str, operation: str, host: str, resource_type: str,
               name: str, rule: str, api: str = "Metadata") -> str:
    """A line as StandardAuthorizer logs it with Kafka's log4j layout (date in the broker's zone, here UTC)."""
    when = format_time(time_ms).replace("T", " ").replace(".", ",").removesuffix("Z")
    level = "INFO" if decision == "Denied" else "DEBUG"
    return (f"[{when}] {level} Principal = {principal} is {decision} operation = {operation} from host = {host} on "
            f"resource = {RESOURCE_TYPE_PASCAL[ResourceType[resource_type]]}:LITERAL:{name} for request = {api} with "
            f"resourceRefCount = 1 based on rule {rule} (kafka.authorizer.logger)")


def acl_text(b: AclBinding) -> str:
    return (f"MatchingAcl(acl=StandardAcl(resourceType={b.resource_type}, resourceName={b.resource_name}, "
            f"patternType={b.pattern_type}, principal={b.principal}, host={b.host}, operation={b.operation}, "
            f"permissionType={b.permission_type}))")


def request_of(b: AclBinding) -> tuple[str, str, str, str]:
    """A request (principal, host, operation, resource name) that the ACL applies to."""
    principal = b.principal if b.principal != "User:*" else "User:someone"
    host = java_host_address(b.host) if b.host != "*" else "10.9.8.7"  # as a broker prints a client's address
    operation = b.operation if b.operation != "ALL" else "DESCRIBE"
    name = {"LITERAL": b.resource_name if b.resource_name != "*" else "anything"}.get(
        b.pattern_type, b.resource_name + "-x")
    return principal, host, operation, name


def logged_as_decided(history: ReplayResult, b: AclBinding, at: int = AT) -> LoggedDecision:
    """The line a broker holding the sample's ACLs at offset `at` writes for a request `b` applies to."""
    principal, host, operation, name = request_of(b)
    probe = LoggedDecision(None, "", None, principal, host, operation, b.resource_type, "LITERAL", name, "Metadata",
                           1, "", None, None, None)
    exp, acls = decision_at(history.state_at(at), probe, None, False)
    rule = {REASON_SUPER_USER: "SuperUser", REASON_ALLOW_EVERYONE: "DefaultAllow"}.get(exp.reason, "DefaultDeny")
    if exp.reason in (REASON_DENY_ACL, REASON_ALLOW_ACL):
        rule = acl_text(acls[exp.acl_ids[-1]])
    time = history.time_of(at)
    assert time is not None
    line = parse_line(kafka_line(time, principal, "Allowed" if exp.allowed else "Denied", operation, host,
                                 b.resource_type, name, rule))
    assert line is not None
    return line


def lines(history: ReplayResult) -> list[LoggedDecision]:
    state = history.state_at(AT)
    assert state.exact and len(state.certain) > 20
    return [logged_as_decided(history, b) for b in state.certain.values()]


def test_what_the_acls_of_the_moment_decide_is_consistent(history: ReplayResult) -> None:
    got = [verify(line, history, skew_ms=0) for line in lines(history)]
    assert {v.verdict for v in got} == {CONSISTENT}, [v.why for v in got if v.verdict != CONSISTENT]
    kinds = {line.rule_kind for line in lines(history)}
    assert kinds >= {"MatchingAcl", "DefaultDeny"}, kinds  # allowed and denied by ACLs, and by no matching ACL


def test_a_flipped_decision_is_inconsistent_and_says_why(history: ReplayResult) -> None:
    for line in lines(history):
        flipped = dataclasses.replace(line, decision="DENIED" if line.decision == "ALLOWED" else "ALLOWED")
        v = verify(flipped, history, skew_ms=0)
        assert v.verdict == INCONSISTENT and f"the broker logged {flipped.decision}" in v.why, v


def test_another_principal_allowed_by_an_acl_is_inconsistent(history: ReplayResult) -> None:
    allowed = [line for line in lines(history) if line.decision == "ALLOWED" and line.acl is not None
               and line.acl.principal != "User:*"]
    assert allowed
    for line in allowed:
        v = verify(dataclasses.replace(line, principal="User:not-in-any-acl"), history, skew_ms=0)
        assert v.verdict == INCONSISTENT, v


def test_a_super_user_nobody_named(history: ReplayResult) -> None:
    line = dataclasses.replace(lines(history)[0], decision="ALLOWED", rule="SuperUser", rule_kind="SuperUser",
                               acl=None, principal="User:root")
    v = verify(line, history, skew_ms=0)
    assert v.verdict == INCONSISTENT and "super user nobody knew about" in v.why
    assert verify(line, history, super_users="User:root", skew_ms=0).verdict == CONSISTENT


def test_a_line_before_the_history_or_without_a_time_is_unknown(history: ReplayResult) -> None:
    line = lines(history)[0]
    assert verify(dataclasses.replace(line, time=1), history).verdict == UNKNOWN
    assert verify(dataclasses.replace(line, time=None), history).verdict == UNKNOWN


def test_the_skew_window_takes_the_states_just_before_and_after(history: ReplayResult) -> None:
    """A request allowed by an ACL, logged a little before the ACL was appended, is consistent within the skew and
    not without it (the broker's clock, or its lag in applying changes, can put a line on either side)."""
    def first_allowed_by_its_creation() -> LoggedDecision:
        for e in history.events:
            if e.change.value != "CREATE" or not e.exact or e.binding.permission_type != "ALLOW" or e.offset == 0:
                continue
            after = logged_as_decided(history, e.binding, e.offset)
            before, _ = decision_at(history.state_at(e.offset - 1), after, None, False)
            time, earlier = history.time_of(e.offset), history.time_of(e.offset - 1)
            if after.decision == "ALLOWED" and not before.allowed and time and earlier and earlier < time - 1:
                return dataclasses.replace(after, time=(time + earlier) // 2)  # between the two appends
        raise AssertionError("the sample has no ACL whose creation allows what was denied before")

    line = first_allowed_by_its_creation()
    assert verify(line, history, skew_ms=2000).verdict == CONSISTENT
    assert verify(line, history, skew_ms=0).verdict == INCONSISTENT


def test_a_state_decides_exactly_unless_a_possible_acl_could_change_the_answer() -> None:
    """An uncertain ACL (possibly live) leaves the answer exact unless it matches the request (it could decide it,
    or be the ACL a broker names) or, with allow.everyone.if.no.acl.found, covers the resource (it could turn the
    default around); a hole or an incomplete stretch never decides exactly."""
    line: Any = LoggedDecision(0, "", None, "User:a", "10.0.0.1", "READ", "TOPIC", "LITERAL", "orders", "Fetch", 1,
                               "DENIED", "DefaultDeny", "DefaultDeny", None)
    elsewhere = AclBinding("TOPIC", "payments", "LITERAL", "User:a", "*", "READ", "ALLOW")
    others = AclBinding("TOPIC", "ord", "PREFIXED", "User:b", "*", "READ", "ALLOW")
    mine = AclBinding("TOPIC", "ord", "PREFIXED", "User:a", "10.0.0.1", "ALL", "DENY")

    def exact(state: AclState, allow_everyone: bool = False) -> Any:
        return exact_decision(state, line, _authorizer(state.certain, allow_everyone), None, allow_everyone)

    assert exact(AclState(5, {}, {"x": elsewhere}, True, True)).reason == "no matching ACL"
    assert exact(AclState(5, {}, {"x": others}, True, True)).reason == "no matching ACL"
    assert exact(AclState(5, {}, {"x": others}, True, True), allow_everyone=True) is None
    assert exact(AclState(5, {}, {"x": elsewhere}, True, True), allow_everyone=True).reason == "allow everyone"
    assert exact(AclState(5, {}, {"x": mine}, True, True)) is None
    assert exact(AclState(5, {}, {}, False, True)) is None and exact(AclState(5, {}, {}, True, False)) is None


def _authorizer(acls: dict[str, AclBinding], allow_everyone: bool) -> Any:
    from replay.kafka.authorizer import StandardAuthorizer

    a = StandardAuthorizer(None, allow_everyone)
    a.load_snapshot(acls)
    a.complete_initial_load()
    return a


def test_the_command_verifies_a_log_against_the_dumps(history: ReplayResult, tmp_path: Path,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`kraft-replay audit verify-log`: a row per logged decision with its verdict, file and line; a line that
    does not read is told on stderr with its place; `--strict` exits 3 when anything is off."""
    import json

    from replay import cli

    good = lines(history)[0]
    time = history.time_of(AT)
    assert time is not None
    decided = "Allowed" if good.decision == "ALLOWED" else "Denied"
    text = kafka_line(time, good.principal, decided, good.operation, good.host, good.resource_type,
                      good.resource_name, good.rule or "")
    flipped = text.replace(f" is {decided} ", " is Denied " if decided == "Allowed" else " is Allowed ")
    log = tmp_path / "kafka-authorizer.log"
    log.write_text("\n".join([text, "[2026-11-20 14:00:00,000] INFO unrelated (kafka.server)", flipped,
                              text.replace(" from host = ", " from hots = ")]) + "\n")
    argv = ["audit", "verify-log", str(log), "--dumps", str(SAMPLE), "--skew-ms", "0", "--output", "json"]
    assert cli.main(argv) == 0
    out, err = capsys.readouterr()
    rows = json.loads(out)
    assert [(r["verdict"], r["line"], r["file"]) for r in rows] == [(CONSISTENT, 1, str(log)),
                                                                   (INCONSISTENT, 3, str(log))]
    assert rows[1]["why"].startswith(f"at offset {AT}: the replayed ACLs give ") and rows[0]["offsets"] == [AT]
    assert f"{log}:4: a decision of the authorizer log that does not read as one" in err
    assert "2 logged decision(s): 1 consistent, 1 inconsistent, 0 unknown; 1 line(s)" in err
    assert cli.main([*argv, "--strict"]) == 3


def test_unused_credits_each_decision_to_the_acl_that_made_it(history: ReplayResult) -> None:
    """`replay.kafka.unused_acls`: the ACLs the logged allowed lines name are used, each once; every other ACL live
    at the moment is unused; a principal's ALLOWs that decided nothing are listed as granted and not used."""
    from replay.kafka.unused_acls import acl_rows, principal_rows, usage
    from replay.kafka.verify_log import Verifier

    allowed = [line for line in lines(history) if line.decision == "ALLOWED" and line.acl is not None][:4]
    assert len(allowed) == 4
    time = history.time_of(AT)
    assert time is not None
    used = usage(allowed, Verifier(history, skew_ms=0), time, time)
    assert (used.lines, used.allowed, used.not_consistent) == (4, 4, 0)
    rows = acl_rows(history, used, time, time)
    state = history.state_at(AT)
    assert {r["acl_id"] for r in rows} >= set(state.certain)  # every ACL live then
    named = {i for line in allowed for i, b in state.certain.items() if b == line.acl}
    assert {r["acl_id"] for r in rows if r["used"]} == named and all(r["decisions"] == 1 for r in rows if r["used"])
    assert all(not r["used"] for r in rows[: len(rows) - len(named)])  # the unused come first
    for p in principal_rows(history, used, time, time):
        mine = [r for r in rows if r["principal"] == p["principal"] and r["permission_type"] == "ALLOW"]
        idle = {f"{r['operation']} {r['resource_type']} {r['pattern_type']}:{r['resource_name']}" for r in mine
                if not r["used"]}
        assert set(p["granted_not_used"]) == idle, p


def test_unused_says_when_the_logs_hold_no_allowed_decision(history: ReplayResult, tmp_path: Path,
                                                            capsys: pytest.CaptureFixture[str]) -> None:
    """A log at Kafka's shipped INFO level holds denials only: every ALLOW would look unused, and the command says
    why."""
    from replay import cli

    denied = next(line for line in lines(history) if line.decision == "DENIED")
    time = history.time_of(AT)
    assert time is not None
    log = tmp_path / "kafka-authorizer.log"
    log.write_text(kafka_line(time, denied.principal, "Denied", denied.operation, denied.host, denied.resource_type,
                              denied.resource_name, denied.rule or "") + "\n")
    assert cli.main(["audit", "unused", str(log), "--dumps", str(SAMPLE), "--skew-ms", "0", "--output", "json"]) == 0
    err = capsys.readouterr().err
    assert "1 logged decision(s) in the window, 0 allowed" in err and "kafka.authorizer.logger was at INFO" in err


def test_confluent_events_are_verified_by_decision(history: ReplayResult) -> None:
    """A Confluent event names no ACL: its decision is compared; one a role decided, or without a client address,
    is unknown."""
    line = next(x for x in lines(history) if x.decision == "ALLOWED" and x.acl is not None)
    event = dataclasses.replace(line, rule=None, rule_kind=None, acl=None)
    assert verify(event, history, skew_ms=0).verdict == CONSISTENT
    assert verify(dataclasses.replace(event, decision="DENIED"), history, skew_ms=0).verdict == INCONSISTENT
    rbac = verify(dataclasses.replace(event, rule="RBAC", rule_kind="RBAC"), history, skew_ms=0)
    assert rbac.verdict == UNKNOWN and "role" in rbac.why
    assert verify(dataclasses.replace(event, host=""), history, skew_ms=0).verdict == UNKNOWN


def test_the_sample_of_a_real_broker_is_consistent_and_has_one_unused_grant(capsys: pytest.CaptureFixture[str]
                                                                           ) -> None:
    """`data/authorizer-log/`: a broker's own dump and authorizer log (`tests.harness.access`), as its README shows."""
    import json

    from replay import cli

    sample = SAMPLE.parent / "authorizer-log"
    common = [str(sample / "broker-logs" / "kafka-authorizer.log"), "--dumps", str(sample / "dump"), "--super-users",
              "User:ANONYMOUS;User:admin", "--log-time-zone", "Europe/Berlin", "--strict", "--output", "json"]
    assert cli.main(["audit", "verify-log", *common]) == 0
    out, err = capsys.readouterr()
    assert "68 logged decision(s): 68 consistent, 0 inconsistent, 0 unknown; 0 line(s)" in err
    assert {r["decision"] for r in json.loads(out)} == {"ALLOWED", "DENIED"}
    assert cli.main(["audit", "unused", *common, "--only-unused"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert [(r["principal"], r["operation"], r["resource_type"], r["resource_name"]) for r in got["acls"]] == [
        ("User:carol", "READ", "GROUP", "reports")]


def test_a_grant_used_only_from_other_hosts_than_it_names(history: ReplayResult) -> None:
    """`other_hosts`: for an ACL naming a host, the client hosts other than its own of the requests it covers but
    for the host, while it was live. Requests for every named-host ACL of the moment from 10.9.8.7 make each of them
    a grant used only from another host; the same requests from the ACL's own host are not other hosts (and use the
    ALLOWs); a request from 10.9.8.6 before an ACL existed is not counted for it."""
    from replay.kafka.unused_acls import acl_rows, named_wrong_host, usage
    from replay.kafka.verify_log import Verifier

    state = history.state_at(AT)
    named = {i: b for i, b in state.certain.items() if b.host != "*"}
    assert len(named) > 10

    def logged(b: AclBinding, host: str, at: int = AT) -> LoggedDecision:
        """The request `b` covers, from `host`, logged as decided at `at` (naming no rule)."""
        principal, _, operation, name = request_of(b)
        probe = LoggedDecision(history.time_of(at), "DEBUG", None, principal, host, operation, b.resource_type,
                               "LITERAL", name, "Metadata", 1, "", None, None, None)
        exp, _ = decision_at(history.state_at(at), probe, None, False)
        return dataclasses.replace(probe, decision=exp.result)

    elsewhere = [logged(b, "10.9.8.7") for b in named.values()]
    time = history.time_of(AT)
    assert time is not None
    rows = {r["acl_id"]: r for r in acl_rows(history, usage(elsewhere, Verifier(history, skew_ms=0), time, time),
                                              time, time)}
    assert {i for i, r in rows.items() if named_wrong_host(r)} == set(named)
    assert all(rows[i]["other_hosts"] == ["10.9.8.7"] for i in named)
    assert all(r["other_hosts"] == [] for r in rows.values() if r["host"] == "*")

    own = [logged(b, java_host_address(b.host)) for b in named.values() if presentable_host(b.host)]
    used = usage(elsewhere + own, Verifier(history, skew_ms=0), time, time)
    rows = {r["acl_id"]: r for r in acl_rows(history, used, time, time)}
    assert all(rows[i]["other_hosts"] == ["10.9.8.7"] for i in named)
    allows = {i for i, b in named.items() if b.permission_type == "ALLOW" and presentable_host(b.host)}
    assert allows and {i for i in allows if rows[i]["used"]} and not any(named_wrong_host(rows[i]) for i in allows
                                                                          if rows[i]["used"])

    window_end = history.offset_at_time(time)
    assert window_end is not None
    later = next(life for life in history.lifetimes
                 if life.binding.host != "*" and life.valid_from_min_offset > window_end and life.acl_id not in named)
    early = logged(later.binding, "10.9.8.6")
    whole = {r["acl_id"]: r for r in acl_rows(history, usage([early], Verifier(history, skew_ms=0)), None, None)}
    assert "10.9.8.6" not in whole[later.acl_id]["other_hosts"]
