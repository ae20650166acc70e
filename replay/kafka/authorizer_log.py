"""Kafka's authorizer log (logger `kafka.authorizer.logger`) read back as the decisions it records (issue 17).

The message format was learned from Kafka's source, not from documentation: KRaft's StandardAuthorizer
(`StandardAuthorizerData.buildAuditMessage`, the same from 3.2 to 4.x) writes

    Principal = P is Allowed|Denied operation = OP from host = H on resource = Type:PATTERN:name
    for request = Api with resourceRefCount = N based on rule RULE

where RULE is `SuperUser`, `DefaultAllow`, `DefaultDeny` or `MatchingAcl(acl=StandardAcl(...))` (a Java record's
`StandardAcl[...]` in newer versions). ZooKeeper mode's AclAuthorizer wrote the same without the rule, with
`Operation = Read` in PascalCase. Denials are logged at INFO and allowed requests at DEBUG, but the level is not
read as the decision (the message says it). Around the message, the log4j layout Kafka ships is `[%d] %p %m (%c)%n`;
a thread (`[%t]`) after the level, an ISO date, and no logger suffix are read too. A date without a zone is in the
broker's zone, which the caller names (UTC by default). Confluent Platform and Cloud write CloudEvents JSON
instead (`parse_event`); their field names come from Confluent's documentation and published sample output.
"""

from __future__ import annotations

import gzip
import io
import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone, tzinfo
from typing import IO, Any, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from replay.kafka.acl import AclBinding, AclOperation, ResourceType

LOGGER = "kafka.authorizer.logger"
ALLOWED, DENIED = "ALLOWED", "DENIED"
SUPER_USER, DEFAULT_ALLOW, DEFAULT_DENY, MATCHING_ACL = "SuperUser", "DefaultAllow", "DefaultDeny", "MatchingAcl"
RBAC = "RBAC"  # a Confluent role decided (Confluent's audit events only)
CONFLUENT_AUTHORIZATION = "io.confluent.kafka.server/authorization"

_LINE = re.compile(r"\[(?P<time>[^\]]+)\] (?P<level>[A-Z]+) (?:\[(?P<thread>[^\]]*)\] )?(?P<message>.*?)"
                   r"(?: \((?P<logger>[\w.$-]+)\))?")
_MESSAGE = re.compile(
    r"Principal = (?P<principal>.+?) is (?P<decision>Allowed|Denied) [oO]peration = (?P<operation>\S+) "
    r"from host = (?P<host>\S+) on resource = (?P<rtype>[A-Za-z]+):(?P<ptype>[A-Z]+):(?P<name>.*?) "
    r"for request = (?P<api>\S+) with resourceRefCount = (?P<refs>-?\d+)(?: based on rule (?P<rule>.+))?")
_ACL = re.compile(
    r"MatchingAcl\(acl=StandardAcl[(\[]resourceType=(?P<rtype>\w+), resourceName=(?P<name>.*), "
    r"patternType=(?P<ptype>\w+), principal=(?P<principal>.*), host=(?P<host>.*), operation=(?P<op>\w+), "
    r"permissionType=(?P<perm>\w+)[)\]]\)")


class LogLineError(ValueError):
    """A line that looks like a logged decision but cannot be read as one (it belongs in quarantine)."""


@dataclass(frozen=True, slots=True)
class LoggedDecision:
    """One decision as a broker's authorizer logged it. Names are Kafka's enum names (`TOPIC`, `READ`); `api` is
    the request's name as Kafka prints it (`Produce`, `OffsetFetch`); `rule` is the rule's text, `rule_kind` one of
    SuperUser, DefaultAllow, DefaultDeny, MatchingAcl (None where the log names no rule), `acl` the deciding ACL."""

    time: int | None
    level: str
    thread: str | None
    principal: str
    host: str
    operation: str
    resource_type: str
    pattern_type: str
    resource_name: str
    api: str
    ref_count: int
    decision: str
    rule: str | None
    rule_kind: str | None
    acl: AclBinding | None


def parse_line(line: str, zone: tzinfo = timezone.utc) -> LoggedDecision | None:
    """The decision a log line records; None for a line that records none (another logger's, a stack trace, a
    blank line). Raises `LogLineError` for a line that looks like a decision but does not read as one. A line that
    is a Confluent audit-log event (JSON) is read by `parse_event`."""
    line = line.rstrip("\r\n")
    if line.lstrip().startswith("{") and CONFLUENT_AUTHORIZATION in line:
        return parse_event(line)
    if not looks_like_decision(line):
        return None
    framed = _LINE.fullmatch(line)
    time: int | None = None
    level, thread, message = "", None, line
    if framed is not None:
        level, thread, message = framed["level"], framed["thread"], framed["message"]
        time = parse_log_time(framed["time"], zone)
    m = _MESSAGE.fullmatch(message)
    if m is None:
        raise LogLineError(f"a decision of the authorizer log that does not read as one: {line[:300]!r}")
    try:
        operation = AclOperation.parse(m["operation"]).name
        resource_type = ResourceType.parse(m["rtype"]).name
    except ValueError as err:
        raise LogLineError(f"{err}: {line[:300]!r}") from err
    rule = m["rule"]
    kind, acl = rule_of(rule) if rule is not None else (None, None)
    return LoggedDecision(time, level, thread, m["principal"], m["host"], operation, resource_type, m["ptype"],
                          m["name"], m["api"], int(m["refs"]), ALLOWED if m["decision"] == "Allowed" else DENIED,
                          rule, kind, acl)


def parse_event(text: str) -> LoggedDecision:
    """A Confluent Platform or Cloud audit-log event of type `io.confluent.kafka.server/authorization` (CloudEvents
    JSON, one per line, as consumed from the audit-log topic). Confluent names no deciding ACL: `rule_kind` is
    SuperUser where the event says a super user was authorized, `RBAC` where a role decided (the metadata log holds
    no roles), else None. The client address (`requestMetadata.client_address`, with Java's leading `/`, or
    `clientAddress`) may be missing, as in Confluent Cloud's events: `host` is then empty."""
    try:
        event = json.loads(text)
        data = event["data"]
        auth = data["authorizationInfo"]
        meta = data.get("requestMetadata") or {}
        host = str(meta.get("client_address") or meta.get("clientAddress") or "").lstrip("/")
        kind = SUPER_USER if auth.get("superUserAuthorization") else RBAC if auth.get("rbacAuthorization") else None
        return LoggedDecision(
            parse_log_time(str(event["time"])), "", None, str(data["authenticationInfo"]["principal"]), host,
            AclOperation.parse(str(auth["operation"])).name, ResourceType.parse(str(auth["resourceType"])).name,
            str(auth.get("patternType") or "LITERAL").upper(), str(auth["resourceName"]),
            str(data.get("methodName") or "").removeprefix("kafka."), 1, ALLOWED if auth["granted"] else DENIED,
            kind, kind, None)
    except (ValueError, KeyError, TypeError) as err:
        raise LogLineError(f"a Confluent authorization event that does not read ({err}): {text[:300]!r}") from err


def looks_like_decision(line: str) -> bool:
    """Whether a line is meant as a logged decision (plain substring tests: linear in the line, whatever it holds)."""
    return "Principal = " in line and (" is Allowed " in line or " is Denied " in line) and "peration = " in line


def rule_of(rule: str) -> tuple[str, AclBinding | None]:
    """The kind of rule a decision names, and for `MatchingAcl` the ACL (raises `LogLineError` for another text)."""
    if rule in (SUPER_USER, DEFAULT_ALLOW, DEFAULT_DENY):
        return rule, None
    m = _ACL.fullmatch(rule)
    if m is None:
        raise LogLineError(f"an authorizer rule that is none of SuperUser, DefaultAllow, DefaultDeny, "
                           f"MatchingAcl(acl=StandardAcl(...)): {rule[:300]!r}")
    try:
        acl = AclBinding.of(m["rtype"], m["name"], m["ptype"], m["principal"], m["host"], m["op"], m["perm"])
    except ValueError as err:
        raise LogLineError(f"{err}: {rule[:300]!r}") from err
    return MATCHING_ACL, acl


def parse_log_time(text: str, zone: tzinfo = timezone.utc) -> int:
    """A log4j date (`2026-11-20 14:02:00,123`, ISO `2026-11-20T14:02:00.123Z`, an offset like `+0100`) as epoch
    milliseconds; without a zone, in `zone`."""
    text = text.strip().replace(",", ".")
    try:
        at = datetime.fromisoformat(text)
    except ValueError as err:
        raise LogLineError(f"cannot read the log time {text!r}: expected log4j's date (2026-11-20 14:02:00,123) "
                           "or ISO-8601") from err
    if at.tzinfo is None:
        at = at.replace(tzinfo=zone)
    return (at - datetime(1970, 1, 1, tzinfo=timezone.utc)) // timedelta(milliseconds=1)


def parse_zone(text: str) -> tzinfo:
    """The zone a broker's log dates are in: `UTC`, an offset (`+01:00`, `-0500`) or a zone name
    (`Europe/Berlin`)."""
    m = re.fullmatch(r"([+-])(\d\d):?(\d\d)", text.strip())
    if m is not None:
        sign = 1 if m[1] == "+" else -1
        return timezone(sign * timedelta(hours=int(m[2]), minutes=int(m[3])))
    if text.strip().upper() in ("UTC", "Z"):
        return timezone.utc
    try:
        return ZoneInfo(text.strip())
    except (ZoneInfoNotFoundError, ValueError) as err:
        raise ValueError(f"unknown time zone {text!r}: give UTC, an offset like +01:00, or a name like "
                         "Europe/Berlin") from err


@dataclass(frozen=True, slots=True)
class LineProblem:
    """A line that looked like a decision and could not be read: where it is and why."""

    path: str
    line: int
    message: str


def read_log(path: str, zone: tzinfo = timezone.utc) -> Iterator[tuple[int, LoggedDecision | LineProblem]]:
    """Each decision of a log file (gzip-compressed or plain: the first bytes say which) with its line number;
    unreadable decisions come as `LineProblem`s in their place, so nothing is skipped silently."""
    with open(path, "rb") as stream:
        for line in read_stream(stream, path, zone):
            yield line.number, line.item


@dataclass(frozen=True, slots=True)
class ReadLine:
    """A line of a log that holds a decision (or fails to): its number from 1, its byte position (in the text, for
    a gzip file) and its text, and what it says."""

    number: int
    position: int
    text: str
    item: LoggedDecision | LineProblem


def read_stream(stream: IO[bytes], path: str, zone: tzinfo = timezone.utc) -> Iterator[ReadLine]:
    """`read_log` over an open binary stream (`path` names it in problems), with each line's position and text: what
    the lake's ingest reads on the executors (`replay.spark.access_decode`)."""
    head = stream.read(2)
    source: IO[bytes] = cast(IO[bytes], _Chained(head, stream))
    if head == b"\x1f\x8b":
        source = cast(IO[bytes], gzip.GzipFile(fileobj=source))
    position = 0
    for number, raw in enumerate(io.BufferedReader(cast(Any, source), 1 << 20), 1):
        at, position = position, position + len(raw)
        text = raw.decode("utf-8", errors="replace").rstrip("\r\n")
        try:
            found = parse_line(text, zone)
        except LogLineError as err:
            yield ReadLine(number, at, text, LineProblem(path, number, str(err)))
            continue
        if found is not None:
            yield ReadLine(number, at, text, found)


class _Chained(io.RawIOBase):
    """Bytes already read from a stream, then the rest of it."""

    def __init__(self, head: bytes, rest: IO[bytes]) -> None:
        self._head, self._rest = head, rest

    def readable(self) -> bool:
        return True

    def readinto(self, b: Any) -> int:
        if self._head:
            n = min(len(b), len(self._head))
            b[:n], self._head = self._head[:n], self._head[n:]
            return n
        data = self._rest.read(len(b))
        b[:len(data)] = data
        return len(data)
