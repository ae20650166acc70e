"""Was a logged authorization decision the one the replayed ACLs gave at that moment? (issue 17 item 2: the
reference rule; `replay.spark.verify_access` is the lake's twin.)

A line's time is the broker's clock, the log's times are the controller's append times, and a broker applies a
change a little after it is appended: a line is compared with every state the log went through within `skew_ms`
of its time (the state as of the time `skew_ms` earlier, then after each change up to `skew_ms` later). It is
`consistent` when one of them gives the logged decision, and the logged rule where the line names one (Kafka names
one deciding ACL; any ACL the replayed state would decide by is accepted, since which of several matching ACLs
Kafka meets first is its index's order). It is `unknown` when no known state gives it but some state in the window
does not decide the request exactly (a hole in the dumps, an ACL that may or may not have been live and would
change the answer, a time before the history), and `inconsistent` otherwise, with a sentence saying why.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import timezone, tzinfo
from typing import Any

from replay.kafka.acl import AclBinding
from replay.kafka.authorizer import (
    REASON_ALLOW_ACL,
    REASON_ALLOW_EVERYONE,
    REASON_DENY_ACL,
    REASON_NO_MATCH,
    REASON_SUPER_USER,
    Explanation,
    StandardAuthorizer,
    presentable_host,
)
from replay.kafka.authorizer_log import (
    DEFAULT_ALLOW,
    DEFAULT_DENY,
    MATCHING_ACL,
    RBAC,
    SUPER_USER,
    LineProblem,
    LoggedDecision,
    read_log,
)
from replay.kafka.replayer import AclState, ReplayResult
from replay.kafka.times import format_time

CONSISTENT, INCONSISTENT, UNKNOWN = "consistent", "inconsistent", "unknown"
# Brokers apply a metadata change within moments of its append; NTP keeps clocks within milliseconds. Two seconds
# covers both without letting a decision match a state minutes away.
DEFAULT_SKEW_MS = 2000

# What a verdict says, in words: the templates both engines fill (the lake's `replay.spark.verify_access` too), so
# that their sentences are the same text.
WHY_NO_TIME = "the line has no time (a layout without %d)"
WHY_RBAC = "a Confluent role decided it (RBAC), which the metadata log does not hold"
WHY_NO_HOST = "the event names no client address, and ACLs can name hosts"
WHY_PATTERN = "the line names a {pattern_type} resource pattern; brokers authorize literal resource names only"
WHY_HOST = "the client address {host} is not one Kafka compares with ACL hosts (an IP address as Java prints it)"
WHY_PRINCIPAL = "the principal {principal} is not one Kafka's authorizer is asked about (TYPE:name, not User:*)"
WHY_BEFORE = "the time lies before the history the dumps hold"
WHY_CLIPPED = "the line is within {skew_ms} ms of the start of the history the dumps hold"
WHY_NOT_EXACT = ("the ACLs at offset {offset} do not decide this request exactly (a hole in the dumps, or ACLs that "
                 "may or may not have been live and would change the answer)")
WHY_CONSISTENT = "as the replayed ACLs at offset {offset} decide it"
WHY_AT = "at offset {offset}: {why}"
WHY_SUPER_USER = ("logged as decided for a super user, but {principal} is not one of the super users given (a super "
                  "user nobody knew about?)")
WHY_DECISION = "the replayed ACLs give {result} by {rule}, the broker logged {logged}"
WHY_RULE = "the same decision, but by {rule} where the broker logged {logged_rule}"
WHY_ACL = "the same decision, but the ACL the broker named is not one the replayed ACLs decide by"

_RULE_OF_REASON = {REASON_SUPER_USER: SUPER_USER, REASON_DENY_ACL: MATCHING_ACL, REASON_ALLOW_ACL: MATCHING_ACL,
                   REASON_ALLOW_EVERYONE: DEFAULT_ALLOW, REASON_NO_MATCH: DEFAULT_DENY}


@dataclass(frozen=True, slots=True)
class Verdict:
    """`verdict` (consistent, inconsistent, unknown), why in a sentence, the offsets whose states were compared
    (None when the time lies before the known history), and for a consistent line the ids of the ACLs that decided
    it (the one the line names, or every ACL the state decides by where it names none)."""

    verdict: str
    why: str
    offsets: tuple[int, ...] | None
    acl_ids: tuple[str, ...] = ()


def window_offsets(result: ReplayResult, time_ms: int, skew_ms: int = DEFAULT_SKEW_MS,
                   changes: Sequence[int] | None = None) -> tuple[tuple[int, ...], bool] | None:
    """The offsets whose states a broker may have held at `time_ms` of its clock: the state as of `time_ms -
    skew_ms`, then each state a change made up to `time_ms + skew_ms` (`changes`: the sorted offsets of the
    history's changes, when the caller has them); and whether the window began before the history (it then starts
    at the history's first offset). None when all of it lies before the history."""
    last = result.offset_at_time(time_ms + skew_ms)
    if last is None:
        return None
    first = result.offset_at_time(time_ms - skew_ms)
    clipped = first is None
    if first is None:
        first = next(iter(result.times))[0]
    if changes is None:
        changes = change_offsets(result)
    return (first, *changes[bisect.bisect_right(changes, first):bisect.bisect_right(changes, last)]), clipped


def change_offsets(result: ReplayResult) -> list[int]:
    """The offsets at which the history's visible ACLs change, sorted, each once."""
    return sorted({e.offset for e in result.events})


def not_askable(line: LoggedDecision) -> str | None:
    """Why the line is not a request the replayed ACLs can be asked about (None when it is one)."""
    if line.time is None:
        return WHY_NO_TIME
    if line.rule_kind == RBAC:
        return WHY_RBAC
    if not line.host:
        return WHY_NO_HOST
    if line.pattern_type != "LITERAL":
        return WHY_PATTERN.format(pattern_type=line.pattern_type)
    if line.host == "*" or not presentable_host(line.host):
        return WHY_HOST.format(host=line.host)
    if ":" not in line.principal or line.principal == "User:*":
        return WHY_PRINCIPAL.format(principal=line.principal)
    return None


def decision_at(state: AclState, line: LoggedDecision, super_users: str | Iterable[str] | None,
                allow_everyone: bool) -> tuple[Explanation, dict[str, AclBinding]]:
    """How a StandardAuthorizer holding the state's certain ACLs decides the logged request; with those ACLs."""
    return _explain(_loaded(state.certain, super_users, allow_everyone), line), state.certain


def exact_decision(state: AclState, line: LoggedDecision, authorizer: StandardAuthorizer,
                   super_users: str | Iterable[str] | None, allow_everyone: bool) -> Explanation | None:
    """How the state decides the request when every state the history allows there decides it the same way, by the
    same ACLs (`authorizer` holds the state's certain ACLs); None when not. That needs the offset covered and
    complete, no uncertain ACL that matches the request (it could decide it, or be the one a broker names), and,
    where no ACL decides, the same default whichever uncertain ACLs were live (with allow.everyone.if.no.acl.found
    an ACL of anyone on the resource turns DefaultAllow into DefaultDeny)."""
    if not (state.covered and state.complete):
        return None
    exp = _explain(authorizer, line)
    if exp.reason == REASON_SUPER_USER or not state.uncertain:
        return exp
    if any(_explain(_loaded({acl_id: acl}, None, False), line).reason in (REASON_DENY_ACL, REASON_ALLOW_ACL)
           for acl_id, acl in state.uncertain.items()):
        return None
    widest = _explain(_loaded({**state.certain, **state.uncertain}, super_users, allow_everyone), line)
    return exp if (widest.result, widest.reason) == (exp.result, exp.reason) else None


def _loaded(acls: dict[str, AclBinding], super_users: str | Iterable[str] | None,
            allow_everyone: bool) -> StandardAuthorizer:
    authorizer = StandardAuthorizer(super_users, allow_everyone)
    authorizer.load_snapshot(acls)
    authorizer.complete_initial_load()
    return authorizer


def _explain(authorizer: StandardAuthorizer, line: LoggedDecision) -> Explanation:
    return authorizer.explain(line.principal, line.host, line.operation, line.resource_type, line.resource_name,
                              line.pattern_type)


def mismatch(line: LoggedDecision, exp: Explanation, acls: dict[str, AclBinding]) -> str | None:
    """Why the explanation is not the logged decision (None when it is): another decision, or the same one by
    another rule or another ACL."""
    rule = _RULE_OF_REASON.get(exp.reason, exp.reason)
    if line.rule_kind == SUPER_USER and exp.reason != REASON_SUPER_USER:
        return WHY_SUPER_USER.format(principal=line.principal)
    if exp.result != line.decision:
        return WHY_DECISION.format(result=exp.result, rule=rule, logged=line.decision)
    if line.rule_kind is None:  # ZooKeeper-mode lines and most Confluent events name no rule
        return None
    if rule != line.rule_kind:
        return WHY_RULE.format(rule=rule, logged_rule=line.rule_kind)
    if rule == MATCHING_ACL and line.acl not in {acls[i] for i in exp.acl_ids}:
        return WHY_ACL
    return None


def verify(line: LoggedDecision, result: ReplayResult, super_users: str | Iterable[str] | None = None,
           allow_everyone: bool = False, skew_ms: int = DEFAULT_SKEW_MS) -> Verdict:
    """The verdict on one logged decision against the replayed history `result` (see the module docstring)."""
    return Verifier(result, super_users, allow_everyone, skew_ms).verify(line)


class Verifier:
    """Verdicts on the lines of a log against one history and broker configuration. A log's lines come in time
    order, so the states (and the authorizers loaded with them) of the last few offsets are kept."""

    KEPT = 64

    def __init__(self, result: ReplayResult, super_users: str | Iterable[str] | None = None,
                 allow_everyone: bool = False, skew_ms: int = DEFAULT_SKEW_MS) -> None:
        self.result, self.super_users, self.allow_everyone, self.skew_ms = result, super_users, allow_everyone, skew_ms
        self._changes = change_offsets(result)
        self._states: dict[int, tuple[AclState, StandardAuthorizer]] = {}

    def _at(self, offset: int) -> tuple[AclState, StandardAuthorizer]:
        if offset not in self._states:
            if len(self._states) >= self.KEPT:
                self._states.pop(next(iter(self._states)))
            state = self.result.state_at(offset)
            self._states[offset] = (state, _loaded(state.certain, self.super_users, self.allow_everyone))
        return self._states[offset]

    def verify(self, line: LoggedDecision) -> Verdict:
        why_not = not_askable(line)
        if why_not is not None:
            return Verdict(UNKNOWN, why_not, None)
        assert line.time is not None
        window = window_offsets(self.result, line.time, self.skew_ms, self._changes)
        if window is None:
            return Verdict(UNKNOWN, WHY_BEFORE, None)
        offsets, clipped = window
        unknown = first_why = ""
        if clipped:
            unknown = WHY_CLIPPED.format(skew_ms=self.skew_ms)
        for offset in offsets:
            state, authorizer = self._at(offset)
            exp = exact_decision(state, line, authorizer, self.super_users, self.allow_everyone)
            if exp is None:
                unknown = unknown or WHY_NOT_EXACT.format(offset=offset)
                continue
            why = mismatch(line, exp, state.certain)
            if why is None:
                ids = tuple(i for i in exp.acl_ids if line.acl is None or state.certain[i] == line.acl)
                return Verdict(CONSISTENT, WHY_CONSISTENT.format(offset=offset), offsets, ids)
            first_why = first_why or WHY_AT.format(offset=offset, why=why)
        if unknown:
            return Verdict(UNKNOWN, unknown, offsets)
        return Verdict(INCONSISTENT, first_why, offsets)


def verdict_rows(paths: Sequence[str], verifier: Verifier, zone: tzinfo = timezone.utc,
                 on_problem: Callable[[LineProblem], None] | None = None, start: int | None = None,
                 end: int | None = None) -> Iterator[dict[str, Any]]:
    """One row per logged decision of the log files, in their order, with its verdict; a line that looks like a
    decision and does not read goes to `on_problem` (never dropped unseen). With `start` or `end` (epoch ms), only
    the decisions logged in [start, end]."""
    windowed = start is not None or end is not None
    for path in paths:
        for number, item in read_log(path, zone):
            if isinstance(item, LineProblem):
                if on_problem is not None:
                    on_problem(item)
                continue
            if windowed and (item.time is None or (start is not None and item.time < start)
                             or (end is not None and item.time > end)):
                continue
            v = verifier.verify(item)
            yield {"verdict": v.verdict, "why": v.why, "time": format_time(item.time) if item.time is not None
                   else None, "principal": item.principal, "host": item.host, "operation": item.operation,
                   "resource_type": item.resource_type, "pattern_type": item.pattern_type,
                   "resource_name": item.resource_name, "api": item.api, "decision": item.decision,
                   "rule": item.rule, "offsets": list(v.offsets) if v.offsets is not None else None, "file": path,
                   "line": number}

