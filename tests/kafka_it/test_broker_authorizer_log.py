"""Issue 17 item 4: a real broker's authorizer log, verified against its own metadata log.

The broker has a SASL_PLAINTEXT listener (PLAIN, three users, so principals are real) and writes
`kafka.authorizer.logger` at DEBUG into its own file, with its dates in Europe/Berlin time. The users describe,
produce and consume across ACL changes, so that the same request is denied, then allowed, then denied again. Every
line Kafka wrote is `consistent` with the replayed history; a copy with some decisions flipped and some principals
swapped gives exactly those lines as `inconsistent`."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from replay.kafka.authorizer_log import LineProblem, LoggedDecision, read_log
from replay.kafka.dump import replay_paths
from replay.kafka.verify_log import CONSISTENT, INCONSISTENT, Verifier
from tests.harness.access import PHASE, SUPER_USERS, ZONE, run

pytestmark = [pytest.mark.kafka]

@pytest.fixture(scope="module")
def logged(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[dict[str, Any]]]:
    """The broker's metadata log directory, its authorizer log, and the outcome of each request."""
    return run(tmp_path_factory.mktemp("authorizer-log"))


def decisions(log: Path) -> list[tuple[int, LoggedDecision]]:
    got = list(read_log(str(log), ZoneInfo(ZONE)))
    problems = [x for _, x in got if isinstance(x, LineProblem)]
    assert not problems, problems[:3]
    return [(n, x) for n, x in got if isinstance(x, LoggedDecision)]


def test_the_same_request_is_denied_allowed_and_denied_again(logged: tuple[Path, Path, list[dict[str, Any]]]
                                                             ) -> None:
    _, _, outcomes = logged
    phases = [[o["outcome"] for o in outcomes[i:i + len(PHASE)]] for i in range(0, len(outcomes), len(PHASE))]
    assert len(phases) == 3
    alice_describe = [p[0] for p in phases]
    assert alice_describe[0] != "ok" and alice_describe[1] == "ok" and alice_describe[2] != "ok", phases
    bob_consume = [p[2] for p in phases]
    assert bob_consume[0] != "ok" and bob_consume[1] == "ok" and bob_consume[2] != "ok", phases
    assert phases[1][3] == "ok" and phases[1][4] != "ok", phases  # carol may describe any topic, not write


def test_every_line_the_broker_logged_is_consistent(logged: tuple[Path, Path, list[dict[str, Any]]]) -> None:
    meta, log, _ = logged
    history = replay_paths([str(meta)])
    lines = decisions(log)
    verifier = Verifier(history, SUPER_USERS)
    verdicts = [(n, line, verifier.verify(line)) for n, line in lines]
    wrong = [(n, v.verdict, v.why) for n, _, v in verdicts if v.verdict != CONSISTENT]
    assert not wrong, wrong[:5]
    seen = Counter((line.decision, line.rule_kind) for _, line in lines)
    assert {("ALLOWED", "MatchingAcl"), ("DENIED", "MatchingAcl"), ("DENIED", "DefaultDeny"),
            ("ALLOWED", "SuperUser")} <= set(seen), seen
    assert {line.principal for _, line in lines} >= {"User:alice", "User:bob", "User:carol"}


def test_a_tampered_copy_gives_exactly_the_tampered_lines(logged: tuple[Path, Path, list[dict[str, Any]]],
                                                          tmp_path: Path) -> None:
    """Decisions flipped on some of the users' lines, and User:alice named instead of User:dave on lines an ACL of
    hers allowed: those lines, and only those, are inconsistent."""
    meta, log, _ = logged
    text = log.read_text().splitlines()
    users = [(n, line) for n, line in decisions(log) if line.principal in {"User:bob", "User:carol"}]
    flipped = {n for n, _ in users[::3]}
    hers = {n for n, line in decisions(log)
            if line.principal == "User:alice" and line.decision == "ALLOWED" and line.rule_kind == "MatchingAcl"}
    assert flipped and hers
    for n in flipped:
        text[n - 1] = re.sub(r" is (Allowed|Denied) ", lambda m: " is Denied " if m[1] == "Allowed" else " is Allowed ",
                             text[n - 1], count=1)
    for n in hers:
        text[n - 1] = text[n - 1].replace("Principal = User:alice ", "Principal = User:dave ", 1)
    copy = tmp_path / "kafka-authorizer.log"
    copy.write_text("\n".join(text) + "\n")
    verifier = Verifier(replay_paths([str(meta)]), SUPER_USERS)
    bad = {n for n, line in decisions(copy) if verifier.verify(line).verdict == INCONSISTENT}
    assert bad == flipped | hers


def test_the_command_on_the_real_log(logged: tuple[Path, Path, list[dict[str, Any]]],
                                     capsys: pytest.CaptureFixture[str]) -> None:
    from replay import cli

    meta, log, _ = logged
    code = cli.main(["audit", "verify-log", str(log), "--dumps", str(meta), "--super-users", SUPER_USERS,
                     "--log-time-zone", ZONE, "--strict", "--output", "jsonl"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    assert "0 inconsistent, 0 unknown; 0 line(s)" in err and out.count("\n") == len(decisions(log))


def test_unused_finds_the_grant_nobody_used(logged: tuple[Path, Path, list[dict[str, Any]]],
                                            capsys: pytest.CaptureFixture[str]) -> None:
    """`audit unused` over the whole log: every ACL of the script decided something except carol's READ on the
    group `reports`; carol was granted DESCRIBE on every topic and READ on a group, and used the first."""
    import json

    from replay import cli

    meta, log, _ = logged
    code = cli.main(["audit", "unused", str(log), "--dumps", str(meta), "--super-users", SUPER_USERS,
                     "--log-time-zone", ZONE, "--strict", "--output", "json"])
    out, err = capsys.readouterr()
    assert code == 0, err[-2000:]
    got = json.loads(out)
    unused = [(r["principal"], r["operation"], r["resource_type"], r["resource_name"]) for r in got["acls"]
              if not r["used"]]
    assert unused == [("User:carol", "READ", "GROUP", "reports")], got["acls"]
    used = {(r["principal"], r["operation"], r["resource_name"]): r for r in got["acls"] if r["used"]}
    assert used[("User:alice", "DESCRIBE", "orders")]["from_hosts"] == ["127.0.0.1"]
    assert ("User:alice", "DESCRIBE", "orders") in used and ("User:bob", "READ", "pay") in used
    carol = next(p for p in got["principals"] if p["principal"] == "User:carol")
    assert carol["granted"] == ["DESCRIBE TOPIC", "READ GROUP"] and carol["used"] == ["DESCRIBE TOPIC"]
    assert carol["granted_not_used"] == ["READ GROUP LITERAL:reports"]
