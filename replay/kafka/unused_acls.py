"""Least privilege from what the brokers logged (issue 17 item 3, the reference rule): which ACLs decided no logged
request in a window, and what each principal was granted against what it used.

An ACL is used when a logged decision in the window, verified `consistent` (`replay.kafka.verify_log`), was
decided by it; the ACLs counted are those live at some moment of the window. An ACL that names a host also gets
the other hosts its principal made the requests it covers from while it was live (`other_hosts`): unused, with
such hosts, it names the wrong address. Allowed requests are logged only when
`kafka.authorizer.logger` is at DEBUG (Kafka ships it at INFO, which logs denials only): from such logs every
ALLOW looks unused, so the caller is told when the logs hold no allowed decision at all.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from typing import Any

from replay.kafka.acl import WILDCARD_HOST, WILDCARD_PRINCIPAL
from replay.kafka.authorizer import StandardAuthorizer
from replay.kafka.authorizer_log import LoggedDecision
from replay.kafka.replayer import AclLifetime, ReplayResult
from replay.kafka.verify_log import CONSISTENT, Verifier


@dataclass(frozen=True)
class LoggedRequest:
    """A logged request the ACLs could be asked about, with the first and last offsets whose states it was compared
    with (its window)."""

    principal: str
    host: str
    operation: str
    resource_type: str
    resource_name: str
    first: int
    last: int


@dataclass
class Usage:
    """What the logged decisions of a window used: per ACL id the decisions and the client hosts, per principal
    the (operation, resource type, resource name) it was allowed and the requests it made (whatever their
    verdict); and how many lines were read, allowed, and left out (not consistent, so no ACL can be credited with
    them)."""

    decisions: dict[str, int] = field(default_factory=dict)
    hosts: dict[str, set[str]] = field(default_factory=dict)
    used: dict[str, set[tuple[str, str, str]]] = field(default_factory=dict)
    requests: dict[str, set[LoggedRequest]] = field(default_factory=dict)
    lines: int = 0
    allowed: int = 0
    not_consistent: int = 0


def usage(lines: Iterable[LoggedDecision], verifier: Verifier, start: int | None = None, end: int | None = None
          ) -> Usage:
    """The usage of the lines whose time lies in [start, end] (epoch ms; None: open)."""
    out = Usage()
    for line in lines:
        if line.time is None or (start is not None and line.time < start) or (end is not None and line.time > end):
            continue
        out.lines += 1
        verdict = verifier.verify(line)
        if verdict.offsets:
            out.requests.setdefault(line.principal, set()).add(LoggedRequest(
                line.principal, line.host, line.operation, line.resource_type, line.resource_name,
                min(verdict.offsets), max(verdict.offsets)))
        if verdict.verdict != CONSISTENT:
            out.not_consistent += 1
            continue
        for acl_id in verdict.acl_ids:
            out.decisions[acl_id] = out.decisions.get(acl_id, 0) + 1
            out.hosts.setdefault(acl_id, set()).add(line.host)
        if line.decision == "ALLOWED":
            out.allowed += 1
            out.used.setdefault(line.principal, set()).add((line.operation, line.resource_type, line.resource_name))
    return out


def live_in(result: ReplayResult, start: int | None, end: int | None) -> list[AclLifetime]:
    """The ACLs that were, or may have been, live at some offset of the window [start, end] (times)."""
    first = 0 if start is None else result.offset_at_time(start)
    last = result.last_offset if end is None else result.offset_at_time(end)
    if last is None:
        return []
    lo = 0 if first is None else first
    return [life for life in result.lifetimes
            if life.valid_from_min_offset <= last and (life.valid_to_offset is None or life.valid_to_offset > lo)]


def live_during(life: AclLifetime, request: LoggedRequest) -> bool:
    """The ACL was, or may have been, live at some offset of the request's window."""
    return life.valid_from_min_offset <= request.last and (
        life.valid_to_offset is None or life.valid_to_offset > request.first)


def other_hosts(life: AclLifetime, used: Usage) -> list[str]:
    """The client hosts, other than the one the ACL names, of the logged requests it matches in all but the host,
    made while it was live; none for an ACL of every host. Matching is the authorizer's own, asked with the ACL
    widened to every host."""
    b = life.binding
    if b.host == WILDCARD_HOST:
        return []
    authorizer = StandardAuthorizer()
    authorizer.load_snapshot({life.acl_id: replace(b, host=WILDCARD_HOST)})
    authorizer.complete_initial_load()
    if b.principal == WILDCARD_PRINCIPAL:
        requests: Iterable[LoggedRequest] = (r for rs in used.requests.values() for r in rs)
    else:
        requests = used.requests.get(b.principal, ())
    hosts: set[str] = set()
    for r in requests:
        if r.host == b.host or r.host in hosts or not live_during(life, r):
            continue
        exp = authorizer.explain(r.principal, r.host, r.operation, r.resource_type, r.resource_name, "LITERAL")
        if life.acl_id in exp.acl_ids:
            hosts.add(r.host)
    return sorted(hosts)


def acl_rows(result: ReplayResult, used: Usage, start: int | None, end: int | None) -> list[dict[str, Any]]:
    """One row per ACL live in the window: its binding, the decisions it made, the hosts they came from and the
    other hosts its principal asked for what it covers from (`other_hosts`); the unused first (those could be
    removed), then by how little they were used."""
    rows = []
    for life in live_in(result, start, end):
        b = life.binding
        n = used.decisions.get(life.acl_id, 0)
        rows.append({"used": n > 0, "decisions": n, "from_hosts": sorted(used.hosts.get(life.acl_id, ())),
                     "other_hosts": other_hosts(life, used),
                     "acl_id": life.acl_id, "principal": b.principal, "host": b.host, "operation": b.operation,
                     "permission_type": b.permission_type, "resource_type": b.resource_type,
                     "pattern_type": b.pattern_type, "resource_name": b.resource_name})
    return sorted(rows, key=lambda r: (r["used"], r["decisions"], r["principal"], r["acl_id"]))


def named_wrong_host(row: dict[str, Any]) -> bool:
    """An `acl_rows` row of a grant used only from hosts other than the one it names: it decided nothing while its
    principal made the requests it covers from other hosts."""
    return not row["used"] and bool(row["other_hosts"])


def principal_rows(result: ReplayResult, used: Usage, start: int | None, end: int | None) -> list[dict[str, Any]]:
    """Per principal that an ALLOW live in the window names, or that was allowed something: the operations its
    ALLOWs grant and those its allowed requests used (`OPERATION TYPE`), and its ALLOWs that decided nothing
    (`OPERATION TYPE PATTERN:name`: those could go)."""
    granted: dict[str, set[str]] = {}
    idle: dict[str, set[str]] = {}
    for life in live_in(result, start, end):
        b = life.binding
        if b.permission_type != "ALLOW":
            continue
        granted.setdefault(b.principal, set()).add(f"{b.operation} {b.resource_type}")
        if not used.decisions.get(life.acl_id):
            idle.setdefault(b.principal, set()).add(
                f"{b.operation} {b.resource_type} {b.pattern_type}:{b.resource_name}")
    return [{"principal": p, "granted": sorted(granted.get(p, ())),
             "used": sorted({f"{op} {rtype}" for op, rtype, _ in used.used.get(p, ())}),
             "granted_not_used": sorted(idle.get(p, ())),
             "resources_used": len({(rtype, name) for _, rtype, name in used.used.get(p, ())})}
            for p in sorted(set(granted) | set(used.used))]
