"""Scripted ACL histories for the Admin-API driver, generated from a seed.

A history is a list of operations, written one JSON object per line (the driver's input format, see
`java/AclHistoryDriver.java`):

* `{"op": "create", "acls": [binding, ...]}`: one CreateAcls call with a batch of bindings;
* `{"op": "delete", "filters": [filter, ...]}`: one DeleteAcls call; a filter has the binding's keys, a missing or
  null key matching ANY, and `pattern_type` may be `ANY` or `MATCH`;
* `{"op": "checkpoint", "label": "cp-0003"}`: the driver records `describeAcls(ANY)` and the log offsets there.

What a history covers: every resource type (CLUSTER only as `kafka-cluster`), literal, prefixed and wildcard (`*`)
resources, a dozen principals including `User:*`, hosts `*` and IPv4/IPv6 addresses, ALLOW and DENY, every
operation Kafka accepts for the type (`AclEntry.supportedOperations` plus ALL), batches of several bindings per
call, deletes whose filters match one binding, many bindings, or none, re-creation of deleted bindings (a new ACL
id) and now and then a binding that already exists (Kafka writes no record for it).

Binding names never start with a character that sorts below `*` (DESIGN.md §7: Kafka's authorizer misbehaves).

`simulate(ops)` replays a history with Kafka's filter-matching rules (`AclBindingFilter.matches`) and returns the
ACL set expected at every checkpoint; the integration tests hold the broker to it.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable, Iterator
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from replay.kafka.acl import AclBinding

# AclEntry.supportedOperations (Kafka 4.3.1) plus ALL, which kafka-acls adds for every type.
OPERATIONS: dict[str, tuple[str, ...]] = {
    "TOPIC": ("READ", "WRITE", "CREATE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"),
    "GROUP": ("READ", "DESCRIBE", "DELETE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"),
    "CLUSTER": ("CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE", "ALL"),
    "TRANSACTIONAL_ID": ("DESCRIBE", "WRITE", "TWO_PHASE_COMMIT", "ALL"),
    "DELEGATION_TOKEN": ("DESCRIBE", "ALL"),
    "USER": ("CREATE_TOKENS", "DESCRIBE_TOKENS", "ALL"),
}
RESOURCE_WEIGHTS = {"TOPIC": 45, "GROUP": 20, "CLUSTER": 8, "TRANSACTIONAL_ID": 10, "DELEGATION_TOKEN": 7, "USER": 10}
LITERAL_NAMES: dict[str, tuple[str, ...]] = {
    "TOPIC": ("payments", "payments.eu", "payments.us", "orders", "orders-v2", "audit_log", "clicks",
              "données-clients", "τopic-ελ", "a", "x" * 120),
    "GROUP": ("billing-consumers", "orders-app", "analytics", "team-a.reporting", "connect-cluster"),
    "CLUSTER": ("kafka-cluster",),
    "TRANSACTIONAL_ID": ("txn-payments-1", "txn-payments-2", "orders-tx", "stream-app-0_1"),
    "DELEGATION_TOKEN": ("token-1", "tok-abc", "tok-xyz"),
    "USER": ("User:alice", "User:bob", "User:svc-payments", "User:svc-orders"),
}
PREFIXES: dict[str, tuple[str, ...]] = {
    "TOPIC": ("payments", "pay", "orders-", "team-a.", "audit", "données"),
    "GROUP": ("team-a.", "billing-", "orders"),
    "TRANSACTIONAL_ID": ("txn-", "txn-payments-", "orders"),
    "DELEGATION_TOKEN": ("tok-",),
    "USER": ("User:svc-", "User:"),
}
PRINCIPALS = ("User:alice", "User:bob", "User:carol", "User:dave.smith@EXAMPLE.COM", "User:svc-payments",
              "User:svc-orders", "User:CN=app1,OU=eng,O=Example", "User:*", "User:ANONYMOUS", "User:mallory",
              "Group:ops")
HOSTS = ("*", "*", "*", "*", "10.0.0.1", "10.0.0.2", "192.168.1.20", "127.0.0.1", "2001:db8::5")


@dataclass(frozen=True)
class Profile:
    operations: int  # CreateAcls / DeleteAcls calls (checkpoints not counted)
    checkpoint_every: int
    max_batch: int  # bindings per CreateAcls call: 1..max_batch
    delete_share: float  # share of calls that are deletes
    bulk: int = 0  # halfway: one CreateAcls of this many bindings and one DeleteAcls of them all, between checkpoints


PROFILES: dict[str, Profile] = {
    "tiny": Profile(operations=12, checkpoint_every=4, max_batch=4, delete_share=0.3),
    "small": Profile(operations=60, checkpoint_every=10, max_batch=6, delete_share=0.35),
    "medium": Profile(operations=400, checkpoint_every=40, max_batch=8, delete_share=0.35),
    "large": Profile(operations=3000, checkpoint_every=150, max_batch=10, delete_share=0.35, bulk=3000),
}
BULK_PRINCIPAL = "User:bulk-loader"  # no other binding has it: a filter on it deletes exactly the bulk ones


def bulk_ops(n: int) -> list[dict[str, Any]]:
    """One CreateAcls call of `n` bindings (the controller writes it as one atomic batch) and one DeleteAcls call
    removing them all, with a checkpoint before, between and after."""
    acls = [AclBinding("TOPIC", f"bulk-{k:05d}", "LITERAL", BULK_PRINCIPAL, "*", "READ", "ALLOW") for k in range(n)]
    return [{"op": "checkpoint", "label": "bulk-before"}, {"op": "create", "acls": [_binding_json(b) for b in acls]},
            {"op": "checkpoint", "label": "bulk-created"},
            {"op": "delete", "filters": [{"principal": BULK_PRINCIPAL}]},
            {"op": "checkpoint", "label": "bulk-deleted"}]


def _binding_json(b: AclBinding) -> dict[str, str]:
    return asdict(b)


def _random_binding(rng: random.Random) -> AclBinding:
    rtype = rng.choices(list(RESOURCE_WEIGHTS), weights=list(RESOURCE_WEIGHTS.values()))[0]
    roll = rng.random()
    if rtype == "CLUSTER":
        name, pattern = "kafka-cluster", "LITERAL"
    elif roll < 0.12:
        name, pattern = "*", "LITERAL"
    elif roll < 0.42:
        name, pattern = rng.choice(PREFIXES[rtype]), "PREFIXED"
    else:
        name, pattern = rng.choice(LITERAL_NAMES[rtype]), "LITERAL"
    return AclBinding(rtype, name, pattern, rng.choice(PRINCIPALS), rng.choice(HOSTS),
                      rng.choice(OPERATIONS[rtype]), "DENY" if rng.random() < 0.2 else "ALLOW")


def filter_matches(f: dict[str, Any], b: AclBinding) -> bool:
    """Kafka's `AclBindingFilter.matches` (ResourcePatternFilter + AccessControlEntryFilter) on our JSON filter."""
    rtype = f.get("resource_type") or "ANY"
    if rtype != "ANY" and rtype != b.resource_type:
        return False
    ptype = f.get("pattern_type") or "ANY"
    if ptype not in ("ANY", "MATCH") and ptype != b.pattern_type:
        return False
    name = f.get("resource_name")
    if name is not None:
        if ptype in ("ANY", b.pattern_type):
            if name != b.resource_name:
                return False
        elif b.pattern_type == "LITERAL":  # MATCH against a literal pattern: equal, or the wildcard
            if name != b.resource_name and b.resource_name != "*":
                return False
        elif b.pattern_type == "PREFIXED":  # MATCH against a prefixed pattern
            if not name.startswith(b.resource_name):
                return False
        else:
            return False
    for key in ("principal", "host"):
        if f.get(key) is not None and f[key] != getattr(b, key):
            return False
    for key in ("operation", "permission_type"):
        value = f.get(key) or "ANY"
        if value != "ANY" and value != getattr(b, key):
            return False
    return True


def _random_filter(rng: random.Random, live: list[AclBinding]) -> dict[str, Any]:
    roll = rng.random()
    if not live or roll < 0.04:  # matches nothing
        return {"principal": "User:nobody"}
    b = rng.choice(live)
    if roll < 0.55:  # exactly one binding
        return _binding_json(b)
    if roll < 0.72:  # one resource pattern: every entry on it
        return {"resource_type": b.resource_type, "resource_name": b.resource_name, "pattern_type": b.pattern_type}
    if roll < 0.80:  # every pattern that matches a concrete name (literal, wildcard, prefixes)
        name = b.resource_name if b.pattern_type == "LITERAL" and b.resource_name != "*" else (
            b.resource_name + "-x" if b.pattern_type == "PREFIXED" else "payments")
        return {"resource_type": b.resource_type, "resource_name": name, "pattern_type": "MATCH"}
    if roll < 0.88:  # one principal on one resource type
        return {"resource_type": b.resource_type, "principal": b.principal}
    if roll < 0.93:  # one name, any pattern type
        return {"resource_name": b.resource_name, "pattern_type": "ANY"}
    if roll < 0.97:  # one host, one permission
        return {"host": b.host, "permission_type": b.permission_type}
    return {"principal": b.principal, "operation": b.operation}  # wide


def generate(profile: str | Profile, seed: int) -> list[dict[str, Any]]:
    """The operations of one history. Deterministic for a (profile, seed)."""
    p = PROFILES[profile] if isinstance(profile, str) else profile
    rng = random.Random(seed)
    live: dict[AclBinding, None] = {}  # insertion-ordered set
    removed: list[AclBinding] = []
    ops: list[dict[str, Any]] = [{"op": "checkpoint", "label": "cp-0000"}]
    for i in range(1, p.operations + 1):
        if live and rng.random() < p.delete_share:
            filters = [_random_filter(rng, list(live)) for _ in range(rng.choice((1, 1, 1, 2, 3)))]
            ops.append({"op": "delete", "filters": filters})
            for b in [b for b in live if any(filter_matches(f, b) for f in filters)]:
                del live[b]
                removed.append(b)
        else:
            batch: list[AclBinding] = []
            for _ in range(rng.randint(1, p.max_batch)):
                roll = rng.random()
                if removed and roll < 0.06:
                    b = rng.choice(removed)  # re-create: Kafka gives it a new id
                elif live and roll < 0.09:
                    b = rng.choice(list(live))  # already exists: no record
                else:
                    b = _random_binding(rng)
                if b not in batch:
                    batch.append(b)
            ops.append({"op": "create", "acls": [_binding_json(b) for b in batch]})
            for b in batch:
                live[b] = None
        if i % p.checkpoint_every == 0 or i == p.operations:
            ops.append({"op": "checkpoint", "label": f"cp-{i:04d}"})
        if p.bulk and i == p.operations // 2:
            ops.extend(bulk_ops(p.bulk))
    return ops


@dataclass(frozen=True)
class ExpectedCheckpoint:
    label: str
    ops_done: int
    acls: frozenset[AclBinding]


def simulate(ops: Iterable[dict[str, Any]]) -> Iterator[ExpectedCheckpoint]:
    """The ACL set at every checkpoint, by Kafka's create (set) and delete (filter) semantics."""
    live: set[AclBinding] = set()
    done = 0
    for op in ops:
        if op["op"] == "checkpoint":
            yield ExpectedCheckpoint(op["label"], done, frozenset(live))
            continue
        done += 1
        if op["op"] == "create":
            live.update(AclBinding(**a) for a in op["acls"])
        elif op["op"] == "delete":
            live = {b for b in live if not any(filter_matches(f, b) for f in op["filters"])}
        elif op["op"] == "scram":
            pass  # a SCRAM user (`itrun.SCRAM_USER`): no ACL changes
        else:
            raise ValueError(f"unknown op {op['op']!r}")


def summarize(ops: list[dict[str, Any]]) -> dict[str, Any]:
    """Counts for READMEs: calls, bindings asked for, distinct values used."""
    creates = [op for op in ops if op["op"] == "create"]
    deletes = [op for op in ops if op["op"] == "delete"]
    asked = [AclBinding(**a) for op in creates for a in op["acls"]]
    return {
        "create_calls": len(creates),
        "bindings_in_create_calls": len(asked),
        "delete_calls": len(deletes),
        "filters_in_delete_calls": sum(len(op["filters"]) for op in deletes),
        "checkpoints": sum(op["op"] == "checkpoint" for op in ops),
        "principals": sorted({b.principal for b in asked}),
        "hosts": sorted({b.host for b in asked}),
        "resource_types": sorted({b.resource_type for b in asked}),
        "pattern_types": sorted({b.pattern_type for b in asked}),
        "wildcard_resources": sum(b.resource_name == "*" for b in asked),
        "deny": sum(b.permission_type == "DENY" for b in asked),
    }


def write_ops(ops: Iterable[dict[str, Any]], path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        for op in ops:
            f.write(json.dumps(op, ensure_ascii=False) + "\n")
    return path


def read_checkpoints(path: Path) -> list[dict[str, Any]]:
    """The driver's checkpoint lines; `acls` become a frozenset of AclBinding."""
    out = []
    for line in Path(path).read_text(encoding="utf-8").splitlines():
        if line.strip():
            cp = json.loads(line)
            cp["acls"] = frozenset(AclBinding(**a) for a in cp["acls"])
            out.append(cp)
    return out
