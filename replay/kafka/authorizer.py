"""Kafka's KRaft ``StandardAuthorizer`` decision rules, in pure Python (no Spark).

Normative rules: ``spec/standard-authorizer.md`` (§1 ``authorize``, §2 ``authorizeByResourceType``, §1.2 config,
§1.5 host rendering, §6 ACL count). Checked against Kafka 4.3.1's real classes by
``tests/kafka_it/test_authorizer_differential.py``.

Usage::

    a = StandardAuthorizer(super_users="User:admin;User:ops", allow_everyone_if_no_acl_found=False)
    a.add_acl("id1", AclBinding("TOPIC", "t", "PREFIXED", "User:bob", "*", "READ", "ALLOW"))
    a.complete_initial_load()
    a.authorize(principal="User:bob", host="10.0.0.1", operation="READ", resource_type="TOPIC",
                resource_name="t1")                                    # -> "ALLOWED"
    a.explain(principal="User:bob", host="10.0.0.1", operation="READ", resource_type="TOPIC",
              resource_name="t1")                                      # -> Explanation(..., acl_ids=("id1",))

Data structure: per resource type, LITERAL ACLs by exact name and PREFIXED ACLs by name, plus the set of prefix
lengths present, so one ``authorize`` looks at ``1 + #distinct prefix lengths + 1`` buckets, and inside a bucket only
at the ACLs of the requesting principal and of ``User:*``. Nothing scans every ACL.

Where this deliberately differs from Kafka (DESIGN.md §7): for a resource name whose first character sorts below
``*`` (U+0000..U+0029), Kafka's scan can loop forever or throw ``StringIndexOutOfBoundsException``; this class gives
the answer of the set-based rules (spec §1.4) instead.
"""

from __future__ import annotations

import functools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from replay.kafka.acl import (
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AclBinding,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from replay.kafka.model import QuestionError

__all__ = [
    "ALLOWED",
    "DENIED",
    "ERROR",
    "HARDCODE_PROBE_NAME",
    "WILDCARD_REQUEST_MESSAGE",
    "AclBinding",
    "AclCacheError",
    "AclStateError",
    "AuthorizerError",
    "AuthorizerNotReadyError",
    "ConfigError",
    "Explanation",
    "InvalidArgumentError",
    "StandardAuthorizer",
    "check_principal",
    "check_question",
    "java_host_address",
    "parse_super_users",
]

ALLOWED = "ALLOWED"
DENIED = "DENIED"
ERROR = "ERROR"

# Reasons carried by Explanation.reason.
REASON_SUPER_USER = "super user"
REASON_DENY_ACL = "matching DENY ACL"
REASON_ALLOW_ACL = "matching ALLOW ACL"
REASON_NO_MATCH = "no matching ACL"
REASON_ALLOW_EVERYONE = "allow everyone"
REASON_NOT_READY = "not ready"
REASON_BAD_ACL = "malformed stored ACL"
REASON_WILDCARD_REQUEST = "request principal User:*"

WILDCARD_REQUEST_MESSAGE = (
    "the requesting principal is User:* itself: Kafka 4.x builds the principals an ACL may name as "
    "Set.of(<requester>, User:*), and Set.of throws IllegalArgumentException (duplicate element) when both are "
    "User:*, so Kafka gives no answer for this requester (only a super user named User:* is answered, before that "
    "step). To ask what a principal without ACLs of its own could do, ask for such a principal (e.g. User:nobody)")

HARDCODE_PROBE_NAME = "hardcode"  # the literal name the Authorizer interface default probes with (KIP-679)

SUPER_USERS_CONFIG = "super.users"
ALLOW_EVERYONE_CONFIG = "allow.everyone.if.no.acl.found"

_ALL = int(AclOperation.ALL)
_DESCRIBE = int(AclOperation.DESCRIBE)
_DESCRIBE_CONFIGS = int(AclOperation.DESCRIBE_CONFIGS)
_ALLOW = int(AclPermissionType.ALLOW)
_DENY = int(AclPermissionType.DENY)
_LITERAL = int(PatternType.LITERAL)
_PREFIXED = int(PatternType.PREFIXED)
# An ALLOW ACL with one of these operations also allows the key operation (never for DENY).
_IMPLIES_DESCRIBE = frozenset(int(o) for o in (AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE,
                                               AclOperation.DELETE, AclOperation.ALTER))
_IMPLIES_DESCRIBE_CONFIGS = frozenset((int(AclOperation.DESCRIBE_CONFIGS), int(AclOperation.ALTER_CONFIGS)))


# --------------------------------------------------------------------------------------------------- errors


def check_principal(principal: str) -> None:
    """A principal asked about must name its type (`User:alice`), as StandardAuthorizer requires: `QuestionError`."""
    try:
        StandardAuthorizer._check_principal(principal)  # the rule, as the authorizer applies it
    except InvalidArgumentError:
        raise QuestionError(f"principal {principal!r} is not TYPE:NAME (e.g. User:alice): Kafka principals always "
                            "name their type") from None


def check_question(principal: str, operation: str | int, resource_type: str | int) -> None:
    """One question's fields as a Kafka client would have to send them. A typo (`--operation FROB`, a principal
    without its type) is refused with `QuestionError` instead of being answered as an ERROR decision, which would
    read as an answer; values Kafka parses but refuses to authorize (ANY, MATCH) still get Kafka's answer."""
    check_principal(principal)
    for enum, value, what in ((AclOperation, operation, "operation"), (ResourceType, resource_type, "resource type")):
        try:
            enum.parse(value)
        except ValueError:
            raise QuestionError(f"{what} {value!r} is not one Kafka knows; give one of "
                                f"{', '.join(enum.__members__)}") from None


class AuthorizerError(Exception):
    """Base class. ``java_class`` names the exception Kafka raises in the same situation."""

    java_class = "java.lang.RuntimeException"

    @property
    def java_simple_name(self) -> str:
        return self.java_class.rsplit(".", 1)[-1]


class InvalidArgumentError(AuthorizerError, ValueError):
    """Kafka's ``IllegalArgumentException`` for a bad request argument (non-LITERAL pattern, ANY type, ...)."""

    java_class = "java.lang.IllegalArgumentException"


class ConfigError(InvalidArgumentError):
    """``configure`` rejected a setting (a ``super.users`` piece without ``:``)."""


class AuthorizerNotReadyError(AuthorizerError, RuntimeError):
    """The initial ACL load has not completed and the principal is not a super user."""

    java_class = "org.apache.kafka.common.errors.AuthorizerNotReadyException"


class AclCacheError(AuthorizerError, RuntimeError):
    """``AclCache`` refused a change: duplicate id, identical ACL under another id, or unknown id on remove."""

    java_class = "java.lang.RuntimeException"


class AclStateError(AuthorizerError, RuntimeError):
    """A stored ACL that Kafka cannot evaluate (principal without ``:``, or an ANY/MATCH code that no
    ``AclBinding`` can hold). Kafka throws when such an ACL is reached; ``java_class`` says which exception."""

    def __init__(self, message: str, java_class: str, acl_ids: tuple[str, ...] = ()) -> None:
        super().__init__(message)
        self.java_class = java_class
        self.acl_ids = acl_ids


# --------------------------------------------------------------------------------------------------- config


def _java_trim(text: str) -> str:
    """``String.trim``: strips every char <= U+0020 at both ends (not Python's notion of whitespace)."""
    start, end = 0, len(text)
    while start < end and text[start] <= " ":
        start += 1
    while end > start and text[end - 1] <= " ":
        end -= 1
    return text[start:end]


def parse_super_users(value: str | Iterable[str] | None) -> frozenset[str]:
    """``super.users`` as Kafka reads it: split on ``;``, trim, drop empties, every piece needs a ``:``.

    An iterable is taken as the already-split pieces (each still trimmed and checked).
    """
    if value is None:
        return frozenset()
    pieces = value.split(";") if isinstance(value, str) else list(value)
    users = set()
    for piece in pieces:
        trimmed = _java_trim(str(piece))
        if not trimmed:
            continue
        if ":" not in trimmed:
            raise ConfigError(f"expected a string in format principalType:principalName but got {trimmed}")
        users.add(trimmed)
    return frozenset(users)


def parse_allow_everyone(value: bool | str | None) -> bool:
    """``allow.everyone.if.no.acl.found``: absent -> False; else ``Boolean.parseBoolean(trim(value))``."""
    if value is None:
        return False
    if isinstance(value, bool):
        return value
    return _java_trim(str(value)).lower() == "true"


# --------------------------------------------------------------------------------------------------- hosts


def _parse_java_ipv4(text: str) -> bytes | None:
    """Java's ``textToNumericFormatV4``: 1-4 dot-separated ASCII decimal parts (leading zeros allowed, read as
    decimal), at most 15 chars; the last part fills the remaining bytes (``10.1`` is 10.0.0.1)."""
    if not text or len(text) > 15:
        return None
    parts = text.split(".")
    if len(parts) > 4:
        return None
    values = []
    for part in parts:
        if not part or not all("0" <= c <= "9" for c in part):
            return None
        values.append(int(part))
    *head, last = values
    if any(v > 255 for v in head):
        return None
    if last >= 1 << (8 * (5 - len(values))):
        return None
    return bytes(head) + last.to_bytes(5 - len(values), "big")


def _parse_java_ipv6(text: str) -> bytes | None:
    """Java's ``textToNumericFormatV6`` (zone already removed): hex groups of any length with value <= 0xffff,
    at most one ``::`` standing for at least one group, an optional trailing dotted quad."""
    if not text:
        return None
    if text.startswith(":") and not text.startswith("::"):
        return None
    if text.endswith(":") and not text.endswith("::"):
        return None
    if text.count("::") > 1 or ":::" in text:
        return None
    tail = b""
    head_text = text
    if "." in text:
        colon = text.rfind(":")
        quad = text[colon + 1:]
        if quad.count(".") != 3:
            return None
        v4 = _parse_java_ipv4(quad)
        if v4 is None:
            return None
        tail = v4
        head_text = text[: colon + 1]
        if head_text.endswith(":") and not head_text.endswith("::"):
            head_text = head_text[:-1]
    if "::" in head_text:
        left, right = head_text.split("::")
        left_groups = left.split(":") if left else []
        right_groups = right.split(":") if right else []
    else:
        left_groups, right_groups = head_text.split(":") if head_text else [], []
    words = []
    for group in (*left_groups, *right_groups):
        if not group or not all(c in "0123456789abcdefABCDEF" for c in group):
            return None
        value = int(group, 16)
        if value > 0xFFFF:
            return None
        words.append(value)
    total = len(words) * 2 + len(tail)
    if "::" in head_text:
        if total > 14:
            return None
        left_bytes = b"".join(w.to_bytes(2, "big") for w in words[: len(left_groups)])
        right_bytes = b"".join(w.to_bytes(2, "big") for w in words[len(left_groups):])
        return left_bytes + bytes(16 - total) + right_bytes + tail
    if total != 16:
        return None
    return b"".join(w.to_bytes(2, "big") for w in words) + tail


@functools.lru_cache(maxsize=65536)
def java_host_address(host: str) -> str:
    """Render an IP address literal the way Kafka sees the client: ``InetAddress.getByName(host).getHostAddress()``.

    IPv4 -> dotted quad (Java also reads ``10.1``, ``010.0.0.1``); IPv6 -> all 8 groups, lower-case hex, no ``::``
    compression; IPv4-mapped IPv6 (``::ffff:a.b.c.d``) -> the IPv4 address; a numeric zone (``%1``) is kept.
    Brackets (``[::1]``) are accepted. Host names, interface-name zones and anything Java would send to DNS raise
    ``InvalidArgumentError`` (no DNS here).
    """
    text = host
    bracketed = False
    if text.startswith("["):
        if len(text) > 2 and text.endswith("]"):
            text = text[1:-1]
            bracketed = True
        else:
            raise InvalidArgumentError(f"{host}: invalid IPv6 address literal")
    if not bracketed and ":" not in text:
        v4 = _parse_java_ipv4(text)
        if v4 is None:
            raise InvalidArgumentError(f"{host!r} is not an IP address literal (host names are not resolved)")
        return ".".join(str(b) for b in v4)
    zone = None
    if "%" in text:
        text, zone_text = text.split("%", 1)
        if not zone_text:
            raise InvalidArgumentError(f"{host}: invalid IPv6 address literal")
        if not all("0" <= c <= "9" for c in zone_text) or int(zone_text) > 0x7FFFFFFF:
            raise InvalidArgumentError(f"{host}: only numeric zone ids are supported (Java: no such interface)")
        zone = int(zone_text)
    raw = _parse_java_ipv6(text)
    if raw is None:
        raise InvalidArgumentError(f"{host}: invalid IPv6 address literal")
    if raw[:10] == bytes(10) and raw[10:12] == b"\xff\xff":
        if zone is not None:
            raise InvalidArgumentError(f"{host}: invalid IPv4-mapped address")
        return ".".join(str(b) for b in raw[12:])
    rendered = ":".join(format(int.from_bytes(raw[i:i + 2], "big"), "x") for i in range(0, 16, 2))
    return rendered if zone is None else f"{rendered}%{zone}"


# --------------------------------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True)
class Explanation:
    """Why a question got its answer.

    ``result``: ``"ALLOWED"``, ``"DENIED"``, or ``"ERROR"`` (Kafka would throw; ``error`` names the Java exception).
    ``reason``: one of ``"super user"``, ``"matching DENY ACL"``, ``"matching ALLOW ACL"``, ``"allow everyone"``,
    ``"no matching ACL"``, ``"not ready"``, ``"malformed stored ACL"``, ``"request principal User:*"``.
    ``acl_ids``: the deciding ACLs — every matching DENY when denied by ACL, every matching ALLOW when allowed by ACL
    (sorted); for ``authorize_by_resource_type`` the wildcard DENYs, the wildcard/undominated ALLOWs, or, when
    denied with ``"no matching ACL"``, the DENY ACLs that dominated the caller's ALLOWs.
    ``has_resource_acls``: some ACL of any principal covers the resource (what makes ``allow.everyone`` not apply).
    ``host``: the client address as Kafka compares it (Java rendering).
    ``via_probe``: ``authorize_by_resource_type`` answered through its ``"hardcode"`` probe.
    """

    result: str
    reason: str
    acl_ids: tuple[str, ...] = ()
    has_resource_acls: bool = False
    host: str = ""
    error: str | None = None
    via_probe: bool = False

    @property
    def allowed(self) -> bool:
        return self.result == ALLOWED


# --------------------------------------------------------------------------------------------------- index


def presentable_host(host: str) -> bool:
    """Whether an ACL's host can ever match a client: `*`, or an address a client's connection renders to exactly
    (Kafka compares Java's rendering, so `2001:db8::5` or `010.0.0.1` never match). The SQL engine's form is
    `replay.spark.authorize_requests.presentable_host_sql`."""
    if host == "*":
        return True
    try:
        return java_host_address(host) == host
    except ValueError:  # InvalidArgumentError: a name or no address at all
        return False


def _java_order(text: str) -> bytes:
    """Sort key equal to Java's ``String.compareTo`` (UTF-16 code units)."""
    return text.encode("utf-16-be", "surrogatepass")


class _Entry:
    __slots__ = ("acl_id", "binding", "host", "malformed", "name", "op", "pattern", "perm", "principal", "rtype",
                 "unbindable")

    def __init__(self, acl_id: str, binding: AclBinding) -> None:
        self.acl_id = acl_id
        self.binding = binding
        self.rtype = int(ResourceType[binding.resource_type])
        self.name = binding.resource_name
        self.pattern = int(PatternType[binding.pattern_type])
        self.principal = binding.principal
        self.host = binding.host
        self.op = int(AclOperation[binding.operation])
        self.perm = int(AclPermissionType[binding.permission_type])
        self.malformed = ":" not in binding.principal  # StandardAcl.kafkaPrincipal() throws for it
        # StandardAcl.toBinding() throws for these codes (ResourcePattern / AccessControlEntry constructors).
        self.unbindable = (
            self.rtype == ResourceType.ANY
            or self.pattern in (PatternType.ANY, PatternType.MATCH)
            or self.op == AclOperation.ANY
            or self.perm == AclPermissionType.ANY
        )

    def kafka_order(self) -> tuple[Any, ...]:
        """``StandardAcl.compareTo``: type asc, name desc, pattern, operation, principal, host, permission."""
        return (self.rtype, _Desc(_java_order(self.name)), self.pattern, self.op, _java_order(self.principal),
                _java_order(self.host), self.perm)


@functools.total_ordering
class _Desc:
    __slots__ = ("key",)

    def __init__(self, key: bytes) -> None:
        self.key = key

    def __eq__(self, other: object) -> bool:
        return isinstance(other, _Desc) and self.key == other.key

    def __lt__(self, other: _Desc) -> bool:
        return self.key > other.key

    def __hash__(self) -> int:
        return hash(self.key)


class _Bucket:
    """ACLs of one resource type with one pattern name, grouped by principal string."""

    __slots__ = ("by_principal", "malformed", "size")

    def __init__(self) -> None:
        self.by_principal: dict[str, dict[str, _Entry]] = {}
        self.size = 0
        self.malformed = 0

    def add(self, e: _Entry) -> None:
        self.by_principal.setdefault(e.principal, {})[e.acl_id] = e
        self.size += 1
        self.malformed += e.malformed

    def remove(self, e: _Entry) -> None:
        group = self.by_principal[e.principal]
        del group[e.acl_id]
        if not group:
            del self.by_principal[e.principal]
        self.size -= 1
        self.malformed -= e.malformed

    def entries(self) -> Iterator[_Entry]:
        for group in self.by_principal.values():
            yield from group.values()


class _TypeIndex:
    """All ACLs of one resource type."""

    __slots__ = ("by_principal", "literal", "malformed", "prefix_lengths", "prefixed")

    def __init__(self) -> None:
        self.literal: dict[str, _Bucket] = {}
        # Every non-LITERAL pattern: Kafka's scan treats PREFIXED and the (invalid) UNKNOWN/ANY/MATCH alike.
        self.prefixed: dict[str, _Bucket] = {}
        self.prefix_lengths: Counter[int] = Counter()
        self.by_principal: dict[str, dict[str, _Entry]] = {}
        self.malformed = 0

    def add(self, e: _Entry) -> None:
        if e.pattern == _LITERAL:
            self.literal.setdefault(e.name, _Bucket()).add(e)
        else:
            bucket = self.prefixed.get(e.name)
            if bucket is None:
                bucket = self.prefixed[e.name] = _Bucket()
                self.prefix_lengths[len(e.name)] += 1
            bucket.add(e)
        self.by_principal.setdefault(e.principal, {})[e.acl_id] = e
        self.malformed += e.malformed

    def remove(self, e: _Entry) -> None:
        table = self.literal if e.pattern == _LITERAL else self.prefixed
        bucket = table[e.name]
        bucket.remove(e)
        if not bucket.size:
            del table[e.name]
            if e.pattern != _LITERAL:
                self.prefix_lengths[len(e.name)] -= 1
                if not self.prefix_lengths[len(e.name)]:
                    del self.prefix_lengths[len(e.name)]
        group = self.by_principal[e.principal]
        del group[e.acl_id]
        if not group:
            del self.by_principal[e.principal]
        self.malformed -= e.malformed

    def candidate_buckets(self, name: str) -> list[_Bucket]:
        """Buckets whose ACLs cover ``name``: LITERAL equal, PREFIXED prefix, LITERAL ``*`` (spec §1.3 4a)."""
        found = []
        bucket = self.literal.get(name)
        if bucket is not None:
            found.append(bucket)
        if self.prefixed:
            n = len(name)
            for length in self.prefix_lengths:
                if length <= n:
                    bucket = self.prefixed.get(name[:length])
                    if bucket is not None:
                        found.append(bucket)
        # Quirk (spec §1.7 1): the literal wildcard is skipped for names `*x...`; for `*` it was found above.
        if not name.startswith(WILDCARD_RESOURCE):
            bucket = self.literal.get(WILDCARD_RESOURCE)
            if bucket is not None:
                found.append(bucket)
        return found


# --------------------------------------------------------------------------------------------------- authorizer


def _parse_enum(enum: Any, value: Any, what: str) -> int:
    try:
        return int(enum.parse(value))
    except (ValueError, KeyError) as exc:
        raise InvalidArgumentError(f"{what}: {exc}") from exc


def _normalise(binding: AclBinding) -> AclBinding:
    try:
        return AclBinding.of(binding.resource_type, binding.resource_name, binding.pattern_type, binding.principal,
                             binding.host, binding.operation, binding.permission_type)
    except (ValueError, KeyError) as exc:
        raise InvalidArgumentError(f"bad ACL {binding}: {exc}") from exc


class StandardAuthorizer:
    """In-memory StandardAuthorizer: same configuration, same ACL store rules, same answers as Kafka's."""

    def __init__(
        self,
        super_users: str | Iterable[str] | None = None,
        allow_everyone_if_no_acl_found: bool | str | None = False,
    ) -> None:
        self.super_users: frozenset[str] = parse_super_users(super_users)
        self.allow_everyone_if_no_acl_found: bool = parse_allow_everyone(allow_everyone_if_no_acl_found)
        self._loaded = False
        self._by_id: dict[str, _Entry] = {}
        self._by_content: dict[AclBinding, str] = {}
        self._types: dict[int, _TypeIndex] = {}
        self._unbindable = 0

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> StandardAuthorizer:
        """Like ``StandardAuthorizer.configure``: reads ``super.users`` and ``allow.everyone.if.no.acl.found``;
        values are taken in their string form (``str(value)``), everything else is ignored."""
        su = config.get(SUPER_USERS_CONFIG)
        ae = config.get(ALLOW_EVERYONE_CONFIG)
        return cls(super_users=None if su is None else str(su), allow_everyone_if_no_acl_found=None if ae is None
                   else (ae if isinstance(ae, bool) else str(ae)))

    # ------------------------------------------------------------------ state

    @property
    def initial_load_complete(self) -> bool:
        return self._loaded

    def complete_initial_load(self) -> None:
        """From now on non-super users get answers instead of ``AuthorizerNotReadyError``."""
        self._loaded = True

    def acl_count(self) -> int:
        """``aclCount()``: the number of stored ACLs (ids)."""
        return len(self._by_id)

    def acls(self) -> dict[str, AclBinding]:
        """A copy of the stored ACLs by id."""
        return {acl_id: e.binding for acl_id, e in self._by_id.items()}

    def __contains__(self, acl_id: object) -> bool:
        return acl_id in self._by_id

    def add_acl(self, acl_id: str, binding: AclBinding) -> None:
        """``addAcl``: like Kafka's ``AclCache``, an id already present or an identical ACL (all seven fields) under
        another id raises ``AclCacheError`` (Kafka: ``RuntimeException``) and changes nothing."""
        binding = _normalise(binding)
        if acl_id in self._by_id:
            raise AclCacheError(f"An ACL with ID {acl_id} already exists.")
        if binding in self._by_content:
            raise AclCacheError(f"ACL {acl_id} is a duplicate of ACL {self._by_content[binding]}: "
                                f"{binding.standard_acl_text()}")
        self._insert(_Entry(acl_id, binding))

    def remove_acl(self, acl_id: str) -> None:
        """``removeAcl``: an unknown id raises ``AclCacheError`` (Kafka: ``RuntimeException``)."""
        e = self._by_id.get(acl_id)
        if e is None:
            raise AclCacheError(f"ID {acl_id} not found in aclsById.")
        del self._by_id[acl_id]
        del self._by_content[e.binding]
        self._types[e.rtype].remove(e)
        self._unbindable -= e.unbindable

    def load_snapshot(self, acls: Mapping[str, AclBinding]) -> None:
        """``loadSnapshot``: replace every ACL at once. If the new set holds the same ACL twice (under two ids),
        raise ``AclCacheError`` and keep the old state, as Kafka does. Does not complete the initial load."""
        fresh = StandardAuthorizer()
        for acl_id, binding in acls.items():
            fresh.add_acl(acl_id, binding)
        self._by_id, self._by_content = fresh._by_id, fresh._by_content
        self._types, self._unbindable = fresh._types, fresh._unbindable

    def _insert(self, e: _Entry) -> None:
        self._by_id[e.acl_id] = e
        self._by_content[e.binding] = e.acl_id
        index = self._types.get(e.rtype)
        if index is None:
            index = self._types[e.rtype] = _TypeIndex()
        index.add(e)
        self._unbindable += e.unbindable

    # ------------------------------------------------------------------ authorize

    def authorize(
        self,
        principal: str,
        host: str,
        operation: str | int,
        resource_type: str | int,
        resource_name: str,
        pattern_type: str | int = "LITERAL",
    ) -> str:
        """``authorize`` for one action: ``"ALLOWED"`` or ``"DENIED"``.

        Raises ``InvalidArgumentError`` (ValueError) for a non-LITERAL ``pattern_type``, resource type ANY, a
        principal without ``:`` or a host that is not an IP literal; ``AuthorizerNotReadyError`` before
        ``complete_initial_load()`` unless the principal is a super user; ``AclStateError`` when Kafka would hit a
        stored ACL whose principal has no ``:``.
        """
        exp = self._explain(principal, host, operation, resource_type, resource_name, pattern_type)
        if exp.result == ERROR:
            raise self._error_for(exp)
        return exp.result

    def explain(
        self,
        principal: str,
        host: str,
        operation: str | int,
        resource_type: str | int,
        resource_name: str,
        pattern_type: str | int = "LITERAL",
    ) -> Explanation:
        """Like ``authorize`` but returns an ``Explanation``; the situations in which Kafka would throw after the
        arguments were accepted (not ready, malformed stored ACL) come back as ``result="ERROR"``."""
        return self._explain(principal, host, operation, resource_type, resource_name, pattern_type)

    def _error_for(self, exp: Explanation) -> AuthorizerError:
        if exp.reason == REASON_NOT_READY:
            return AuthorizerNotReadyError("The authorizer is not ready: the initial ACL load has not completed.")
        if exp.reason == REASON_WILDCARD_REQUEST:
            return InvalidArgumentError(WILDCARD_REQUEST_MESSAGE)
        java = "java.lang." + (exp.error or "IllegalStateException")
        return AclStateError(f"stored ACL(s) {', '.join(exp.acl_ids)} cannot be evaluated by Kafka ({exp.error})",
                             java, exp.acl_ids)

    @staticmethod
    def _check_principal(principal: str) -> str:
        if not isinstance(principal, str) or ":" not in principal:
            raise InvalidArgumentError(f"expected a string in format principalType:principalName but got {principal}")
        return principal

    def _explain(
        self,
        principal: str,
        host: str,
        operation: str | int,
        resource_type: str | int,
        resource_name: str,
        pattern_type: str | int,
    ) -> Explanation:
        rtype = _parse_enum(ResourceType, resource_type, "resource type")
        ptype = _parse_enum(PatternType, pattern_type, "pattern type")
        op = _parse_enum(AclOperation, operation, "operation")
        if not isinstance(resource_name, str):
            raise InvalidArgumentError("resource name must be a string")
        # ResourcePattern's constructor, then StandardAuthorizerData.authorize step 0.
        if rtype == ResourceType.ANY:
            raise InvalidArgumentError("resourceType must not be ANY")
        if ptype in (PatternType.ANY, PatternType.MATCH):
            raise InvalidArgumentError(f"patternType must not be {PatternType(ptype).name}")
        if ptype != _LITERAL:
            raise InvalidArgumentError(f"Only literal resources are supported. Got: {PatternType(ptype).name}")
        principal = self._check_principal(principal)
        rendered = java_host_address(host)
        return self._decide(principal, rendered, op, rtype, resource_name)

    def _decide(self, principal: str, h: str, op: int, rtype: int, name: str) -> Explanation:
        if principal in self.super_users:
            return Explanation(ALLOWED, REASON_SUPER_USER, host=h)
        if not self._loaded:
            return Explanation(ERROR, REASON_NOT_READY, host=h, error="AuthorizerNotReadyException")
        if principal == WILDCARD_PRINCIPAL:
            # Kafka builds its principal match set with Set.of(principal, User:*), which throws
            # IllegalArgumentException("duplicate element") when the requester *is* User:* (verified on 4.3.1).
            return Explanation(ERROR, REASON_WILDCARD_REQUEST, host=h, error="IllegalArgumentException")
        index = self._types.get(rtype)
        buckets = index.candidate_buckets(name) if index is not None else []
        if not buckets:
            if self.allow_everyone_if_no_acl_found:
                return Explanation(ALLOWED, REASON_ALLOW_EVERYONE, host=h)
            return Explanation(DENIED, REASON_NO_MATCH, host=h)
        deny: list[str] = []
        allow: list[str] = []
        keys = (principal, WILDCARD_PRINCIPAL)
        for bucket in buckets:
            for key in keys:
                group = bucket.by_principal.get(key)
                if not group:
                    continue
                for e in group.values():
                    if e.host != WILDCARD_HOST and e.host != h:
                        continue
                    eop = e.op
                    if e.perm == _ALLOW:
                        if eop in (op, _ALL) or (op == _DESCRIBE and eop in _IMPLIES_DESCRIBE) or (
                                op == _DESCRIBE_CONFIGS and eop in _IMPLIES_DESCRIBE_CONFIGS):
                            allow.append(e.acl_id)
                    elif eop in (op, _ALL):
                        deny.append(e.acl_id)  # DENY, and the never-created UNKNOWN/ANY permissions, deny
        if index is not None and index.malformed and any(b.malformed for b in buckets):
            bad = self._first_malformed_before_deny(buckets, keys, h, op, name)
            if bad is not None:
                return Explanation(ERROR, REASON_BAD_ACL, (bad,), True, h, "IllegalStateException")
        if deny:
            return Explanation(DENIED, REASON_DENY_ACL, tuple(sorted(deny)), True, h)
        if allow:
            return Explanation(ALLOWED, REASON_ALLOW_ACL, tuple(sorted(allow)), True, h)
        return Explanation(DENIED, REASON_NO_MATCH, (), True, h)

    @staticmethod
    def _first_malformed_before_deny(buckets: list[_Bucket], keys: tuple[str, ...], h: str, op: int,
                                     name: str) -> str | None:
        """Kafka evaluates candidates in its sort order and stops at the first matching DENY; evaluating an ACL
        whose principal has no ``:`` throws. Returns that ACL's id if Kafka reaches one first.

        The order is not one global sort: Kafka first walks down from the requested name (its own ACLs and its
        prefixes, names descending), and only then, in a second pass, the LITERAL ``*`` ACLs. The first walk only
        passes ``*`` on its way when the name sorts at or above ``*``; for a name sorting below it -- in practice
        the empty name -- the wildcard ACLs come after every other candidate (spec §1.7; checked on 4.3.1: a
        principal-less ACL on name ``''`` throws even next to a matching LITERAL ``*`` DENY).
        """
        wildcard_last = _java_order(name) < _java_order(WILDCARD_RESOURCE)

        def order(e: _Entry) -> tuple[Any, ...]:
            second_pass = wildcard_last and e.pattern == _LITERAL and e.name == WILDCARD_RESOURCE
            return (second_pass, *e.kafka_order())

        entries = sorted((e for b in buckets for e in b.entries()), key=order)
        for e in entries:
            if e.malformed:
                return e.acl_id
            if e.principal in keys and (e.host == WILDCARD_HOST or e.host == h) and e.perm != _ALLOW and (
                    e.op == op or e.op == _ALL):
                return None
        return None

    # ------------------------------------------------------------------ authorizeByResourceType

    def authorize_by_resource_type(
        self, principal: str, host: str, operation: str | int, resource_type: str | int
    ) -> str:
        """``authorizeByResourceType`` exactly as Kafka runs it for StandardAuthorizer (the interface default,
        spec §2): ``"ALLOWED"`` iff the principal may perform ``operation`` on at least one resource of the type."""
        exp = self.explain_by_resource_type(principal, host, operation, resource_type)
        if exp.result == ERROR:
            raise self._error_for(exp)
        return exp.result

    def explain_by_resource_type(
        self, principal: str, host: str, operation: str | int, resource_type: str | int
    ) -> Explanation:
        """``authorize_by_resource_type`` with an ``Explanation`` (``result="ERROR"`` where Kafka would throw).

        Kafka 4.3.1 answers in this order: argument checks; the ``authorize`` probe of the name ``hardcode``
        (ALLOWED there returns at once); then ``acls(filter)``, which ``AclCache`` builds **eagerly**: it turns
        every stored ACL, of every resource type, into an ``AclBinding`` before the walk starts, and an ACL whose
        codes no ``AclBinding`` can hold (resource type ANY, pattern ANY/MATCH, operation ANY, permission ANY)
        throws ``IllegalArgumentException`` there -- even when a matching LITERAL ``*`` DENY would end the walk
        first (checked on the real classes: ``TOPIC LITERAL * User:* WRITE DENY`` plus ``GROUP LITERAL g
        User:x ANY ALLOW`` -> ERROR). Only then the walk in Kafka's order (host, principal parse: a principal
        without ``:`` throws, principal, operation; a matching LITERAL ``*`` DENY returns DENIED at once).
        """
        rtype = _parse_enum(ResourceType, resource_type, "resource type")
        op = _parse_enum(AclOperation, operation, "operation")
        if rtype == ResourceType.ANY:
            raise InvalidArgumentError("Must specify a non-filter resource type for authorizeByResourceType")
        if rtype == ResourceType.UNKNOWN:
            raise InvalidArgumentError("Unknown resource type")
        if op == AclOperation.ANY:
            raise InvalidArgumentError("Must specify a non-filter operation type for authorizeByResourceType")
        if op == AclOperation.UNKNOWN:
            raise InvalidArgumentError("Unknown operation type")
        principal = self._check_principal(principal)
        h = java_host_address(host)
        # 1. the probe: a full authorize() of the literal name "hardcode".
        probe = self._decide(principal, h, op, rtype, HARDCODE_PROBE_NAME)
        if probe.result != DENIED:
            return Explanation(probe.result, probe.reason, probe.acl_ids, probe.has_resource_acls, h, probe.error,
                               via_probe=True)
        # 2. acls(filter) turns every stored ACL into an AclBinding before anything is walked (AclCache.acls
        #    collects a list; Kafka 4.3.1), so an unbindable ACL anywhere throws, whatever the walk would meet.
        if self._unbindable:
            bad = tuple(sorted(e.acl_id for e in self._by_id.values() if e.unbindable))
            return Explanation(ERROR, REASON_BAD_ACL, bad, False, h, "IllegalArgumentException")
        index = self._types.get(rtype)
        if index is None:
            return Explanation(DENIED, REASON_NO_MATCH, (), False, h)
        if index.malformed:
            bad_id = self._first_malformed_in_type_scan(index, principal, h, op)
            if bad_id is not None:
                return Explanation(ERROR, REASON_BAD_ACL, (bad_id,), True, h, "IllegalArgumentException")
        keys = (principal,) if principal == WILDCARD_PRINCIPAL else (principal, WILDCARD_PRINCIPAL)
        wildcard_deny: list[str] = []
        wildcard_allow: list[str] = []
        deny_literal: dict[str, list[str]] = {}
        deny_prefix: dict[str, list[str]] = {}
        allow_literal: dict[str, list[str]] = {}
        allow_prefix: dict[str, list[str]] = {}
        for key in keys:
            for e in index.by_principal.get(key, {}).values():
                if e.host != WILDCARD_HOST and e.host != h:
                    continue
                if e.op != op and e.op != _ALL:
                    continue
                if e.perm == _DENY:
                    if e.pattern == _LITERAL:
                        if e.name == WILDCARD_RESOURCE:
                            wildcard_deny.append(e.acl_id)
                        else:
                            deny_literal.setdefault(e.name, []).append(e.acl_id)
                    elif e.pattern == _PREFIXED:
                        deny_prefix.setdefault(e.name, []).append(e.acl_id)
                elif e.perm == _ALLOW:
                    if e.pattern == _LITERAL:
                        if e.name == WILDCARD_RESOURCE:
                            wildcard_allow.append(e.acl_id)
                        else:
                            allow_literal.setdefault(e.name, []).append(e.acl_id)
                    elif e.pattern == _PREFIXED:
                        allow_prefix.setdefault(e.name, []).append(e.acl_id)
        if wildcard_deny:
            return Explanation(DENIED, REASON_DENY_ACL, tuple(sorted(wildcard_deny)), True, h)
        if wildcard_allow:
            return Explanation(ALLOWED, REASON_ALLOW_ACL, tuple(sorted(wildcard_allow)), True, h)
        deny_lengths = sorted({len(n) for n in deny_prefix if n})
        winners: list[str] = []
        dominators: set[str] = set()
        for allow_names, literal in ((allow_literal, True), (allow_prefix, False)):
            for name, ids in allow_names.items():
                if literal and name in deny_literal:
                    dominators.update(deny_literal[name])
                    continue
                hit = next((name[:n] for n in deny_lengths if n <= len(name) and name[:n] in deny_prefix), None)
                if hit is None:
                    winners.extend(ids)
                else:
                    dominators.update(deny_prefix[hit])
        if winners:
            return Explanation(ALLOWED, REASON_ALLOW_ACL, tuple(sorted(winners)), True, h)
        return Explanation(DENIED, REASON_NO_MATCH, tuple(sorted(dominators)), True, h)

    @staticmethod
    def _first_malformed_in_type_scan(index: _TypeIndex, principal: str, h: str, op: int) -> str | None:
        """The interface default walks every ACL of the type in Kafka's order: host check, then principal parse
        (throws without ``:``); a matching LITERAL ``*`` DENY returns before later ACLs are reached."""
        entries = sorted((e for group in index.by_principal.values() for e in group.values()),
                         key=_Entry.kafka_order)
        for e in entries:
            if e.host != WILDCARD_HOST and e.host != h:
                continue
            if e.malformed:
                return e.acl_id
            if (e.principal == principal or e.principal == WILDCARD_PRINCIPAL) and (e.op == op or e.op == _ALL) \
                    and e.perm == _DENY and e.pattern == _LITERAL and e.name == WILDCARD_RESOURCE:
                return None
        return None
