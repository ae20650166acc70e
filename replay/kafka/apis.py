"""Which ACL checks each Kafka API makes, and "could principal P call API X at Kafka version V?".

Source: spec/standard-authorizer.md §5.2 (what KRaft brokers and controllers check), with the version history of
§0 (KIP-163: OffsetFetch needs Group:Describe since 1.0, Read before; KIP-679: idempotent InitProducerId accepts
Cluster:IdempotentWrite OR Write on any topic since 2.8, and Produce stopped checking IdempotentWrite in 2.8).

KIP-559 (JoinGroup v7 / SyncGroup v5 ProtocolType and ProtocolName) changes no authorization: the fields let a
proxy parse Metadata/Assignment bytes; the group coordinator compares them with the group's protocol *after* the
Group:Read check and answers INCONSISTENT_GROUP_PROTOCOL on a mismatch. JoinGroup and SyncGroup need Group:Read in
every version, whatever those fields hold.

    from replay.kafka.apis import could_call
    d = could_call(authorizer, "OffsetFetch", "User:bob", "10.0.0.1", group="g")
    d.allowed, d.outcome, [c.result for c in d.checks]

Every check is an ``authorize`` of a LITERAL resource (the cluster is ``kafka-cluster``) or, where marked
``any_resource``, an ``authorize_by_resource_type``. The ACL rules (ALL, ALLOW implication) apply on top.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field

from replay.kafka.acl import CLUSTER_RESOURCE_NAME
from replay.kafka.authorizer import ALLOWED, DENIED, ERROR, Explanation, StandardAuthorizer

__all__ = [
    "APIS",
    "API_BY_KEY",
    "LATEST_KAFKA",
    "UNKNOWN",
    "ApiDecision",
    "ApiQuestion",
    "ApiRequest",
    "ApiSpec",
    "Check",
    "CheckOutcome",
    "Requirement",
    "api",
    "api_decision",
    "api_request",
    "could_call",
    "parse_kafka_version",
]

LATEST_KAFKA = "4.3.1"

# Request arguments a check can name resources from.
ARG_TOPICS = "topics"
ARG_GROUP = "group"
ARG_TXN = "transactional_id"
ARG_TOKEN = "token_id"
ARG_OWNER = "owner"

# Conditions (flags) checks depend on. `transactional` is implied by passing transactional_id to Produce /
# InitProducerId; `idempotent` is implied for InitProducerId without one.
COND_TRANSACTIONAL = "transactional"
COND_IDEMPOTENT = "idempotent"
COND_FOLLOWER = "follower"  # Fetch from a replica (broker), not a consumer
COND_AUTO_CREATE = "auto_create"  # Metadata that would auto-create missing topics
COND_BROKER_CONFIGS = "broker_configs"  # config resources BROKER / BROKER_LOGGER / CLIENT_METRICS
COND_TOPIC_CONFIGS = "topic_configs"
COND_GROUP_CONFIGS = "group_configs"
COND_COORDINATOR_GROUP = "group_coordinator"  # FindCoordinator key types
COND_COORDINATOR_TXN = "transaction_coordinator"
COND_COORDINATOR_SHARE = "share_coordinator"
COND_OTHER_OWNER = "other_owner"  # CreateDelegationToken for another owner (KIP-373)
COND_CONTROLLER = "controller_endpoint"  # request sent straight to a controller listener

CONDITIONS = frozenset({COND_TRANSACTIONAL, COND_IDEMPOTENT, COND_FOLLOWER, COND_AUTO_CREATE, COND_BROKER_CONFIGS,
                        COND_TOPIC_CONFIGS, COND_GROUP_CONFIGS, COND_COORDINATOR_GROUP, COND_COORDINATOR_TXN,
                        COND_COORDINATOR_SHARE, COND_OTHER_OWNER, COND_CONTROLLER})


def parse_kafka_version(version: str | Sequence[int]) -> tuple[int, ...]:
    """``"2.8"``, ``"2.8.0"``, ``"0.11.0.2"`` -> comparable tuple (trailing zeros ignored)."""
    if isinstance(version, str):
        m = re.fullmatch(r"\s*v?(\d+(?:\.\d+)*)(?:[-+].*)?\s*", version)
        if m is None:
            raise ValueError(f"not a Kafka version: {version!r}")
        parts = [int(p) for p in m.group(1).split(".")]
    else:
        parts = [int(p) for p in version]
    while len(parts) > 1 and parts[-1] == 0:
        parts.pop()
    return tuple(parts)


@dataclass(frozen=True, slots=True)
class Check:
    """One authorizer call.

    ``arg`` names the request argument holding the resource name(s) (``None`` = the cluster, or any resource when
    ``any_resource``). ``when`` / ``unless``: condition flags that must be present / absent. ``since`` / ``until``:
    Kafka versions (inclusive / exclusive) in which the check is made; ``min_api`` / ``max_api``: request versions.
    """

    resource_type: str
    operation: str
    arg: str | None = None
    any_resource: bool = False
    when: frozenset[str] = frozenset()
    unless: frozenset[str] = frozenset()
    since: str | None = None
    until: str | None = None
    min_api: int | None = None
    max_api: int | None = None
    note: str = ""

    def applies(self, kafka: tuple[int, ...], api_version: int | None, conditions: frozenset[str]) -> bool:
        if not self.when <= conditions or self.unless & conditions:
            return False
        if self.since is not None and kafka < parse_kafka_version(self.since):
            return False
        if self.until is not None and kafka >= parse_kafka_version(self.until):
            return False
        if api_version is not None:
            if self.min_api is not None and api_version < self.min_api:
                return False
            if self.max_api is not None and api_version > self.max_api:
                return False
        elif self.min_api is not None:
            return False  # version-gated checks need the request version (defaults to the newest, see could_call)
        return True

    def describe(self) -> str:
        what = "any resource" if self.any_resource else (f"<{self.arg}>" if self.arg else CLUSTER_RESOURCE_NAME)
        return f"{self.resource_type}:{what} {self.operation}"


@dataclass(frozen=True, slots=True)
class Requirement:
    """Alternatives (any one allowed suffices). ``error``: what the request gets when none is allowed.
    ``filters``: a denial only hides resources from the response; the call itself never fails.
    ``per_topic``: a denied request-level check is answered per topic: every named topic (partition) gets
    ``error`` (a follower Fetch without Cluster:ClusterAction: TOPIC_AUTHORIZATION_FAILED everywhere)."""

    alternatives: tuple[Check, ...]
    error: str = ""
    filters: bool = False
    note: str = ""
    per_topic: bool = False


# What a request names, as facts an `Implied` condition can test (see `_request_facts`).
FACT_TXN = "transactional_id"  # a transactional id is given
FACT_GROUP = "group"  # at least one group is named
FACT_GROUP_GIVEN = "group_given"  # the group argument is given (possibly as an empty list)
FACT_TOPICS = "topics"  # at least one topic is named
FACT_OTHER_OWNER = "other_owner"  # an owner other than the principal itself


@dataclass(frozen=True, slots=True)
class Implied:
    """A condition the request itself implies (so the caller need not say it): added when every fact in `facts` holds
    and none in `absent` does, unless the caller gave one of `unless_given` (it chose the case itself)."""

    condition: str
    facts: frozenset[str] = frozenset()
    absent: frozenset[str] = frozenset()
    unless_given: frozenset[str] = frozenset()


def _i(condition: str, *facts: str, absent: tuple[str, ...] = (), unless_given: frozenset[str] = frozenset()
       ) -> Implied:
    return Implied(condition, frozenset(facts), frozenset(absent), unless_given)


@dataclass(frozen=True, slots=True)
class ApiSpec:
    key: int
    name: str  # Kafka's ApiKeys enum name, e.g. OFFSET_FETCH
    requirements: tuple[Requirement, ...]
    note: str = ""
    max_api_version: int | None = None  # newest request version we know of for version-gated checks
    implies: tuple[Implied, ...] = ()  # conditions the request's own content decides
    client_api_version: int | None = None  # the version clients send, when it is not `max_api_version`

    @property
    def pascal(self) -> str:
        return "".join(p.capitalize() for p in self.name.split("_"))

    @property
    def authorizes(self) -> bool:
        return bool(self.requirements)


def _c(rt: str, op: str, arg: str | None = None, *, when: str | None = None, unless: str | None = None,
       any_resource: bool = False, since: str | None = None, until: str | None = None, min_api: int | None = None,
       max_api: int | None = None, note: str = "") -> Check:
    return Check(rt, op, arg, any_resource, frozenset([when] if when else ()), frozenset([unless] if unless else ()),
                 since, until, min_api, max_api, note)


def _r(*alts: Check, error: str = "", filters: bool = False, note: str = "", per_topic: bool = False) -> Requirement:
    return Requirement(tuple(alts), error, filters, note, per_topic)


TOPIC_FAILED = "TOPIC_AUTHORIZATION_FAILED"
GROUP_FAILED = "GROUP_AUTHORIZATION_FAILED"
CLUSTER_FAILED = "CLUSTER_AUTHORIZATION_FAILED"
TXN_FAILED = "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"
TOKEN_FAILED = "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


def _cluster(key: int, name: str, op: str, note: str = "") -> ApiSpec:
    return ApiSpec(key, name, (_r(_c("CLUSTER", op), error=CLUSTER_FAILED),), note)


def _none(key: int, name: str, note: str) -> ApiSpec:
    return ApiSpec(key, name, (), note)


_GROUP_READ = _r(_c("GROUP", "READ", ARG_GROUP), error=GROUP_FAILED)
_GROUP_DESCRIBE = _r(_c("GROUP", "DESCRIBE", ARG_GROUP), error=GROUP_FAILED)
_TXN_WRITE = _r(_c("TRANSACTIONAL_ID", "WRITE", ARG_TXN), error=TXN_FAILED)


def _configs(op: str) -> tuple[Requirement, ...]:
    return (
        _r(_c("CLUSTER", op, when=COND_BROKER_CONFIGS), error=CLUSTER_FAILED,
           note="BROKER, BROKER_LOGGER and CLIENT_METRICS config resources"),
        _r(_c("TOPIC", op, ARG_TOPICS, when=COND_TOPIC_CONFIGS), error=TOPIC_FAILED, note="TOPIC config resources"),
        _r(_c("GROUP", op, ARG_GROUP, when=COND_GROUP_CONFIGS), error=GROUP_FAILED, note="GROUP config resources"),
    )


# FindCoordinator's key type, unless the caller names one: a transaction coordinator for a transactional id alone,
# else a group coordinator.
_COORDINATOR_KEY = tuple(
    _i(cond, *facts, absent=absent, unless_given=frozenset({COND_COORDINATOR_TXN, COND_COORDINATOR_SHARE}))
    for cond, facts, absent in ((COND_COORDINATOR_TXN, (FACT_TXN,), (FACT_GROUP_GIVEN,)),
                                (COND_COORDINATOR_GROUP, (), (FACT_TXN,)),
                                (COND_COORDINATOR_GROUP, (FACT_TXN, FACT_GROUP_GIVEN), ())))
# Describe/AlterConfigs: the config kinds of the resources named, unless the caller names them; none named: broker.
_CONFIG_KINDS = tuple(
    _i(cond, *facts, absent=absent,
       unless_given=frozenset({COND_BROKER_CONFIGS, COND_TOPIC_CONFIGS, COND_GROUP_CONFIGS}))
    for cond, facts, absent in ((COND_TOPIC_CONFIGS, (FACT_TOPICS,), ()), (COND_GROUP_CONFIGS, (FACT_GROUP,), ()),
                                (COND_BROKER_CONFIGS, (), (FACT_TOPICS, FACT_GROUP))))

APIS: tuple[ApiSpec, ...] = (
    ApiSpec(0, "PRODUCE", (
        _r(_c("TRANSACTIONAL_ID", "WRITE", ARG_TXN, when=COND_TRANSACTIONAL), error=TXN_FAILED,
           note="only for batches with transactional records"),
        _r(_c("CLUSTER", "IDEMPOTENT_WRITE", when=COND_IDEMPOTENT, unless=COND_TRANSACTIONAL, until="2.8"),
           error=CLUSTER_FAILED, note="idempotent (non-transactional) produce before 2.8; removed by KIP-679"),
        _r(_c("TOPIC", "WRITE", ARG_TOPICS), error=TOPIC_FAILED, note="per topic"),
    ), implies=(_i(COND_TRANSACTIONAL, FACT_TXN),)),
    ApiSpec(1, "FETCH", (
        _r(Check("CLUSTER", "CLUSTER_ACTION", when=frozenset({COND_FOLLOWER}), unless=frozenset({COND_CONTROLLER})),
           error=TOPIC_FAILED, per_topic=True,
           note="replica (follower) fetch on a broker: denied -> every partition TOPIC_AUTHORIZATION_FAILED"),
        _r(_c("CLUSTER", "CLUSTER_ACTION", when=COND_CONTROLLER), error=CLUSTER_FAILED,
           note="KRaft replication fetch on a controller listener: authorizeClusterOperation, whole request fails"),
        _r(Check("TOPIC", "READ", ARG_TOPICS, unless=frozenset({COND_FOLLOWER, COND_CONTROLLER})), error=TOPIC_FAILED,
           note="consumer fetch, per topic"),
    )),
    ApiSpec(2, "LIST_OFFSETS", (_r(_c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED),)),
    ApiSpec(3, "METADATA", (
        _r(_c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED,
           note="per topic; in all-topics requests undescribable topics are silently left out"),
        _r(_c("CLUSTER", "CREATE", when=COND_AUTO_CREATE), _c("TOPIC", "CREATE", ARG_TOPICS, when=COND_AUTO_CREATE),
           error=TOPIC_FAILED, note="auto-creation of missing topics: Cluster:Create, else per-topic Create"),
    ), note="Cluster:Describe only decides whether cluster authorized-operations are filled in"),
    _cluster(4, "LEADER_AND_ISR", "CLUSTER_ACTION", "ZooKeeper-era inter-broker API; gone in 4.0"),
    _cluster(5, "STOP_REPLICA", "CLUSTER_ACTION", "ZooKeeper-era; gone in 4.0"),
    _cluster(6, "UPDATE_METADATA", "CLUSTER_ACTION", "ZooKeeper-era; gone in 4.0"),
    _cluster(7, "CONTROLLED_SHUTDOWN", "CLUSTER_ACTION", "ZooKeeper-era; gone in 4.0"),
    ApiSpec(8, "OFFSET_COMMIT", (_GROUP_READ, _r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED))),
    ApiSpec(9, "OFFSET_FETCH", (
        _r(_c("GROUP", "READ", ARG_GROUP, until="1.0", note="before KIP-163"),
           _c("GROUP", "DESCRIBE", ARG_GROUP, since="1.0", note="KIP-163"), error=GROUP_FAILED),
        _r(_c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED,
           note="offsets of undescribable topics are left out / TOPIC_AUTHORIZATION_FAILED"),
    ), note="KIP-163 (1.0): Group Describe instead of Group Read"),
    ApiSpec(10, "FIND_COORDINATOR", (
        _r(_c("GROUP", "DESCRIBE", ARG_GROUP, when=COND_COORDINATOR_GROUP), error=GROUP_FAILED),
        _r(_c("TRANSACTIONAL_ID", "DESCRIBE", ARG_TXN, when=COND_COORDINATOR_TXN), error=TXN_FAILED),
        _r(_c("CLUSTER", "CLUSTER_ACTION", when=COND_COORDINATOR_SHARE), error=CLUSTER_FAILED),
    ), note="by key type: group (default), transaction, share", implies=_COORDINATOR_KEY),
    ApiSpec(11, "JOIN_GROUP", (_GROUP_READ,),
            note="KIP-559 (v7 response ProtocolType) does not change authorization"),
    ApiSpec(12, "HEARTBEAT", (_GROUP_READ,)),
    ApiSpec(13, "LEAVE_GROUP", (_GROUP_READ,)),
    ApiSpec(14, "SYNC_GROUP", (_GROUP_READ,),
            note="KIP-559 (v5 ProtocolType/ProtocolName) does not change authorization: a mismatch is "
                 "INCONSISTENT_GROUP_PROTOCOL from the coordinator, after the Group:Read check"),
    ApiSpec(15, "DESCRIBE_GROUPS", (_GROUP_DESCRIBE,)),
    ApiSpec(16, "LIST_GROUPS", (
        _r(_c("CLUSTER", "DESCRIBE"), _c("GROUP", "DESCRIBE", ARG_GROUP), filters=True,
           note="Cluster:Describe lists every group; otherwise only groups the caller may describe"),
    )),
    _none(17, "SASL_HANDSHAKE", "authentication; not authorized"),
    _none(18, "API_VERSIONS", "before authentication; not authorized"),
    ApiSpec(19, "CREATE_TOPICS", (
        _r(_c("CLUSTER", "CREATE"), _c("TOPIC", "CREATE", ARG_TOPICS), error=TOPIC_FAILED,
           note="Cluster:Create allows every topic; otherwise per topic"),
    ), note="Topic:DescribeConfigs only decides whether configs are returned"),
    ApiSpec(20, "DELETE_TOPICS", (
        _r(_c("CLUSTER", "DELETE"), _c("TOPIC", "DELETE", ARG_TOPICS), error=TOPIC_FAILED,
           note="KRaft controller: Cluster:Delete allows deleting any topic; otherwise per topic"),
        _r(_c("CLUSTER", "DELETE"), _c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED,
           note="per topic, unless Cluster:Delete"),
    )),
    ApiSpec(21, "DELETE_RECORDS", (_r(_c("TOPIC", "DELETE", ARG_TOPICS), error=TOPIC_FAILED),)),
    ApiSpec(22, "INIT_PRODUCER_ID", (
        _r(_c("TRANSACTIONAL_ID", "WRITE", ARG_TXN, when=COND_TRANSACTIONAL), error=TXN_FAILED),
        _r(_c("CLUSTER", "IDEMPOTENT_WRITE", unless=COND_TRANSACTIONAL),
           _c("TOPIC", "WRITE", any_resource=True, unless=COND_TRANSACTIONAL, since="2.8", note="KIP-679"),
           error=CLUSTER_FAILED, note="no transactional id: IdempotentWrite on the cluster, or (2.8+) Write on any topic"),
    ), implies=(_i(COND_TRANSACTIONAL, FACT_TXN), _i(COND_IDEMPOTENT, absent=(FACT_TXN,)))),
    ApiSpec(23, "OFFSET_FOR_LEADER_EPOCH", (
        _r(_c("CLUSTER", "CLUSTER_ACTION"), _c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED),
    )),
    ApiSpec(24, "ADD_PARTITIONS_TO_TXN", (
        _r(_c("TRANSACTIONAL_ID", "WRITE", ARG_TXN, max_api=3), error=TXN_FAILED),
        _r(_c("TOPIC", "WRITE", ARG_TOPICS, max_api=3), error=TOPIC_FAILED,
           note="internal topics are never authorized here"),
        _r(_c("CLUSTER", "CLUSTER_ACTION", min_api=4), error=CLUSTER_FAILED,
           note="v4+: broker-to-broker verification"),
    ), max_api_version=5, client_api_version=3, note="clients use v0-3; v4+ is sent by brokers"),
    ApiSpec(25, "ADD_OFFSETS_TO_TXN", (_TXN_WRITE, _GROUP_READ)),
    ApiSpec(26, "END_TXN", (_TXN_WRITE,)),
    ApiSpec(27, "WRITE_TXN_MARKERS", (
        _r(_c("CLUSTER", "ALTER"), _c("CLUSTER", "CLUSTER_ACTION"), error=CLUSTER_FAILED,
           note="Alter checked first (not logged), else ClusterAction"),
    )),
    ApiSpec(28, "TXN_OFFSET_COMMIT", (_TXN_WRITE, _GROUP_READ, _r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED))),
    _cluster(29, "DESCRIBE_ACLS", "DESCRIBE"),
    _cluster(30, "CREATE_ACLS", "ALTER"),
    _cluster(31, "DELETE_ACLS", "ALTER"),
    ApiSpec(32, "DESCRIBE_CONFIGS", _configs("DESCRIBE_CONFIGS"), implies=_CONFIG_KINDS),
    ApiSpec(33, "ALTER_CONFIGS", _configs("ALTER_CONFIGS"), implies=_CONFIG_KINDS,
            note="BROKER_LOGGER sent straight to a controller needs Cluster:ClusterAction"),
    _cluster(34, "ALTER_REPLICA_LOG_DIRS", "ALTER"),
    ApiSpec(35, "DESCRIBE_LOG_DIRS", (_r(_c("CLUSTER", "DESCRIBE"), filters=True, note="empty result when denied"),)),
    _none(36, "SASL_AUTHENTICATE", "authentication; not authorized"),
    ApiSpec(37, "CREATE_PARTITIONS", (_r(_c("TOPIC", "ALTER", ARG_TOPICS), error=TOPIC_FAILED),)),
    ApiSpec(38, "CREATE_DELEGATION_TOKEN", (
        _r(_c("USER", "CREATE_TOKENS", ARG_OWNER, when=COND_OTHER_OWNER, since="3.3", note="KIP-373"),
           error=TOKEN_FAILED, note="owner is a principal string such as User:owner1"),
    ), note="refused on token-authenticated, PLAINTEXT and one-way-SSL connections (not an ACL rule)",
       implies=(_i(COND_OTHER_OWNER, FACT_OTHER_OWNER),)),
    _none(39, "RENEW_DELEGATION_TOKEN", "owner/renewer rules, no ACL"),
    _none(40, "EXPIRE_DELEGATION_TOKEN", "owner/renewer rules, no ACL"),
    ApiSpec(41, "DESCRIBE_DELEGATION_TOKEN", (
        _r(_c("DELEGATION_TOKEN", "DESCRIBE", ARG_TOKEN), _c("USER", "DESCRIBE_TOKENS", ARG_OWNER, since="3.3"),
           filters=True, note="owners and renewers always see their own tokens"),
    )),
    ApiSpec(42, "DELETE_GROUPS", (_r(_c("GROUP", "DELETE", ARG_GROUP), error=GROUP_FAILED),)),
    _cluster(43, "ELECT_LEADERS", "ALTER", "docs say ClusterAction; the code checks Alter"),
    ApiSpec(44, "INCREMENTAL_ALTER_CONFIGS", _configs("ALTER_CONFIGS"), implies=_CONFIG_KINDS),
    _cluster(45, "ALTER_PARTITION_REASSIGNMENTS", "ALTER"),
    _cluster(46, "LIST_PARTITION_REASSIGNMENTS", "DESCRIBE"),
    ApiSpec(47, "OFFSET_DELETE", (_r(_c("GROUP", "DELETE", ARG_GROUP), error=GROUP_FAILED),
                                  _r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED))),
    _cluster(48, "DESCRIBE_CLIENT_QUOTAS", "DESCRIBE_CONFIGS"),
    _cluster(49, "ALTER_CLIENT_QUOTAS", "ALTER_CONFIGS"),
    _cluster(50, "DESCRIBE_USER_SCRAM_CREDENTIALS", "DESCRIBE"),
    _cluster(51, "ALTER_USER_SCRAM_CREDENTIALS", "ALTER"),
    _cluster(52, "VOTE", "CLUSTER_ACTION"),
    _cluster(53, "BEGIN_QUORUM_EPOCH", "CLUSTER_ACTION"),
    _cluster(54, "END_QUORUM_EPOCH", "CLUSTER_ACTION"),
    _cluster(55, "DESCRIBE_QUORUM", "DESCRIBE"),
    _cluster(56, "ALTER_PARTITION", "CLUSTER_ACTION"),
    _cluster(57, "UPDATE_FEATURES", "ALTER"),
    _cluster(58, "ENVELOPE", "CLUSTER_ACTION", "checked for the forwarding broker's principal"),
    _cluster(59, "FETCH_SNAPSHOT", "CLUSTER_ACTION"),
    ApiSpec(60, "DESCRIBE_CLUSTER", (
        _r(_c("CLUSTER", "ALTER", when=COND_CONTROLLER), error=CLUSTER_FAILED,
           note="only on a controller endpoint; a broker does not check"),
    ), note="on a broker Cluster:Describe only decides whether cluster authorized-operations are filled in"),
    ApiSpec(61, "DESCRIBE_PRODUCERS", (_r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED),)),
    _cluster(62, "BROKER_REGISTRATION", "CLUSTER_ACTION"),
    _cluster(63, "BROKER_HEARTBEAT", "CLUSTER_ACTION"),
    _cluster(64, "UNREGISTER_BROKER", "ALTER"),
    ApiSpec(65, "DESCRIBE_TRANSACTIONS", (_r(_c("TRANSACTIONAL_ID", "DESCRIBE", ARG_TXN), error=TXN_FAILED),),
            note="plus Topic:Describe per partition to include it"),
    ApiSpec(66, "LIST_TRANSACTIONS", (_r(_c("TRANSACTIONAL_ID", "DESCRIBE", ARG_TXN), filters=True,
                                         note="results filtered"),)),
    _cluster(67, "ALLOCATE_PRODUCER_IDS", "CLUSTER_ACTION"),
    ApiSpec(68, "CONSUMER_GROUP_HEARTBEAT", (_GROUP_READ,), note="KIP-848"),
    ApiSpec(69, "CONSUMER_GROUP_DESCRIBE", (_GROUP_DESCRIBE,)),
    _cluster(70, "CONTROLLER_REGISTRATION", "CLUSTER_ACTION"),
    _none(71, "GET_TELEMETRY_SUBSCRIPTIONS", "no authorization check"),
    _none(72, "PUSH_TELEMETRY", "no authorization check"),
    _cluster(73, "ASSIGN_REPLICAS_TO_DIRS", "CLUSTER_ACTION"),
    _cluster(74, "LIST_CLIENT_METRICS_RESOURCES", "DESCRIBE_CONFIGS"),
    ApiSpec(75, "DESCRIBE_TOPIC_PARTITIONS", (_r(_c("TOPIC", "DESCRIBE", ARG_TOPICS), error=TOPIC_FAILED),)),
    ApiSpec(76, "SHARE_GROUP_HEARTBEAT", (_GROUP_READ,), note="KIP-932"),
    ApiSpec(77, "SHARE_GROUP_DESCRIBE", (_GROUP_DESCRIBE,)),
    ApiSpec(78, "SHARE_FETCH", (_GROUP_READ, _r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED))),
    ApiSpec(79, "SHARE_ACKNOWLEDGE", (_GROUP_READ, _r(_c("TOPIC", "READ", ARG_TOPICS), error=TOPIC_FAILED))),
    _cluster(80, "ADD_RAFT_VOTER", "ALTER"),
    _cluster(81, "REMOVE_RAFT_VOTER", "ALTER"),
    _cluster(82, "UPDATE_RAFT_VOTER", "CLUSTER_ACTION"),
    _cluster(83, "INITIALIZE_SHARE_GROUP_STATE", "CLUSTER_ACTION", "inter-broker (unimplemented in the 2024 snapshot)"),
    _cluster(84, "READ_SHARE_GROUP_STATE", "CLUSTER_ACTION", "inter-broker"),
    _cluster(85, "WRITE_SHARE_GROUP_STATE", "CLUSTER_ACTION", "inter-broker"),
    _cluster(86, "DELETE_SHARE_GROUP_STATE", "CLUSTER_ACTION", "inter-broker (unimplemented in the 2024 snapshot)"),
    _cluster(87, "READ_SHARE_GROUP_STATE_SUMMARY", "CLUSTER_ACTION",
             "inter-broker (unimplemented in the 2024 snapshot)"),
)

API_BY_KEY: dict[int, ApiSpec] = {a.key: a for a in APIS}
_BY_NAME: dict[str, ApiSpec] = {}
for _a in APIS:
    _BY_NAME[_a.name] = _a
    _BY_NAME[_a.name.replace("_", "")] = _a
API_ALIASES = {"ELECT_PREFERRED_LEADERS": 43}  # older names `api` still answers to
for _alias, _key in API_ALIASES.items():
    _BY_NAME[_alias] = _BY_NAME[_alias.replace("_", "")] = API_BY_KEY[_key]


def api(which: int | str | ApiSpec) -> ApiSpec:
    """Look an API up by key, ``OFFSET_FETCH``, ``OffsetFetch`` or ``offset_fetch``."""
    if isinstance(which, ApiSpec):
        return which
    if isinstance(which, int):
        return API_BY_KEY[which]
    key = which.strip()
    if key.isdigit():
        return API_BY_KEY[int(key)]
    found = _BY_NAME.get(key.upper()) or _BY_NAME.get(key.upper().replace("_", ""))
    if found is None:
        raise KeyError(f"unknown Kafka API {which!r}")
    return found


# --------------------------------------------------------------------------------------------------- evaluation


@dataclass(frozen=True, slots=True)
class CheckOutcome:
    """One authorizer call made for the API. ``resource_name`` is None for ``authorize_by_resource_type``."""

    requirement: int  # index into ApiSpec.requirements
    check: Check
    resource_type: str
    resource_name: str | None
    operation: str
    result: str  # ALLOWED / DENIED / ERROR
    explanation: Explanation


@dataclass(frozen=True, slots=True)
class ApiDecision:
    """``outcome``: ``ALLOWED`` (every required check passes for every named resource), ``DENIED`` (a request-level
    check fails — group, transactional id, cluster, token — or no topic passes), ``PARTIAL`` (some topics pass and
    some do not: Kafka answers per topic), or ``ERROR`` (the authorizer would throw, e.g.
    not ready). Requirements that only filter (ListGroups, ...) never make a call fail; their denials are listed
    in ``hidden``. ``error``: the Kafka error code name of the first failing requirement."""

    api: ApiSpec
    kafka_version: str
    api_version: int | None
    outcome: str
    checks: tuple[CheckOutcome, ...]
    denied: tuple[tuple[str, str], ...] = ()
    hidden: tuple[tuple[str, str], ...] = ()
    error: str | None = None
    notes: tuple[str, ...] = field(default=())

    @property
    def allowed(self) -> bool:
        return self.outcome == ALLOWED


ARG_WORDS = {ARG_TOPICS: "topics", ARG_GROUP: "a group", ARG_TXN: "a transactional id", ARG_TOKEN: "a delegation token id",
              ARG_OWNER: "a token owner"}


def _names(arg: str, values: Mapping[str, Sequence[str]], spec: ApiSpec) -> Sequence[str]:
    names = values.get(arg)
    if names is None:
        raise ValueError(f"{spec.pascal} needs {ARG_WORDS.get(arg, arg)} to evaluate its checks")
    return names


def _request_facts(principal: str, topics: Sequence[str] | None, groups: Sequence[str] | None,
                   transactional_id: str | None, owner: str | None) -> frozenset[str]:
    """The facts about a request that `Implied` conditions test."""
    return frozenset(name for name, holds in (
        (FACT_TXN, transactional_id is not None), (FACT_GROUP, bool(groups)), (FACT_GROUP_GIVEN, groups is not None),
        (FACT_TOPICS, bool(topics)),
        (FACT_OTHER_OWNER, owner is not None and owner != principal)) if holds)


UNKNOWN = "UNKNOWN"  # a check the history cannot decide (the lake's answer when ACLs may have been live unseen)


@dataclass(frozen=True, slots=True)
class ApiQuestion:
    """One authorizer call an API makes: ``resource_name`` None is an ``authorize_by_resource_type``."""

    requirement: int  # index into ApiSpec.requirements
    check: Check
    resource_type: str
    resource_name: str | None
    operation: str

    @property
    def key(self) -> tuple[str, str | None, str]:
        return self.resource_type, self.resource_name, self.operation


@dataclass(frozen=True, slots=True)
class ApiRequest:
    """An API call made concrete: which checks it makes at this Kafka version on these resources (``questions``,
    in the order Kafka makes them), and the resources by request argument. Any engine answers the questions;
    `api_decision` turns the answers into the call's outcome, so the rule is written once."""

    spec: ApiSpec
    kafka_version: str
    api_version: int | None
    values: Mapping[str, Sequence[str]]
    questions: tuple[ApiQuestion, ...]
    # per requirement with a check made at this version: its alternatives on named resources, and the others
    applicable: tuple[tuple[int, tuple[tuple[Check, ...], tuple[Check, ...]]], ...]


def api_request(
    api_name: int | str | ApiSpec,
    principal: str,
    *,
    kafka_version: str = LATEST_KAFKA,
    api_version: int | None = None,
    topics: Iterable[str] | None = None,
    group: str | Iterable[str] | None = None,
    transactional_id: str | None = None,
    token_id: str | None = None,
    owner: str | None = None,
    conditions: Iterable[str] = (),
) -> ApiRequest:
    """The checks ``principal``'s call of ``api_name`` makes (see `could_call` for the arguments). Raises
    ``ValueError`` for an unknown condition or a check whose resource the request does not name."""
    spec = api(api_name)
    kafka = parse_kafka_version(kafka_version)
    conds = set(conditions)
    unknown = conds - CONDITIONS
    if unknown:
        raise ValueError(f"unknown conditions {sorted(unknown)}; known: {sorted(CONDITIONS)}")
    groups = [group] if isinstance(group, str) else (list(group) if group is not None else None)
    topic_list = list(topics) if topics is not None else None
    facts = _request_facts(principal, topic_list, groups, transactional_id, owner)
    given = frozenset(conds)
    conds.update(i.condition for i in spec.implies
                 if i.facts <= facts and not i.absent & facts and not i.unless_given & given)
    if api_version is None and spec.max_api_version is not None:
        api_version = spec.client_api_version if spec.client_api_version is not None else spec.max_api_version
    frozen = frozenset(conds)

    values: dict[str, Sequence[str]] = {}
    if topic_list is not None:
        values[ARG_TOPICS] = topic_list
    if groups is not None:
        values[ARG_GROUP] = groups
    for arg, value in ((ARG_TXN, transactional_id), (ARG_TOKEN, token_id), (ARG_OWNER, owner)):
        if value is not None:
            values[arg] = [value]

    questions: list[ApiQuestion] = []

    def ask(index: int, check: Check, name: str | None) -> None:
        questions.append(ApiQuestion(index, check, check.resource_type, name, check.operation))

    applicable = tuple(_applicable(spec, kafka, api_version, frozen))
    for index, (named, unnamed) in applicable:
        for c in unnamed:
            ask(index, c, None if c.any_resource else CLUSTER_RESOURCE_NAME)
        if not named:
            continue
        primary = named[0].arg
        assert primary is not None
        if primary not in values:
            if primary == ARG_TOPICS or spec.requirements[index].filters:
                continue  # no topics named: nothing to check; a filter hides what it would have shown
            _names(primary, values, spec)  # raises: the caller must name the resource
        for c in named:  # alternatives on another argument (a token id OR its owner) apply to the whole request
            if c.arg != primary:
                for value in values.get(c.arg or "", ()):
                    ask(index, c, value)
        for name in values[primary]:
            for c in named:
                if c.arg == primary:
                    ask(index, c, name)
    return ApiRequest(spec, kafka_version, api_version, values, tuple(questions), applicable)


def _applicable(spec: ApiSpec, kafka: tuple[int, ...], api_version: int | None, conditions: frozenset[str]
                ) -> Iterator[tuple[int, tuple[tuple[Check, ...], tuple[Check, ...]]]]:
    """Per requirement with a check made at this version: its alternatives on named resources, and the others."""
    for index, req in enumerate(spec.requirements):
        alts = [c for c in req.alternatives if c.applies(kafka, api_version, conditions)]
        if alts:
            yield index, (tuple(c for c in alts if c.arg is not None), tuple(c for c in alts if c.arg is None))


def api_decision(request: ApiRequest, answers: Mapping[tuple[str, str | None, str], Explanation]) -> ApiDecision:
    """The call's outcome from the answer to each of its questions (by `ApiQuestion.key`). An ``UNKNOWN`` answer
    (history cannot tell) makes the outcome ``UNKNOWN`` only when it matters: when the outcome differs with that
    check allowed and denied."""
    checks = tuple(CheckOutcome(q.requirement, q.check, q.resource_type, q.resource_name, q.operation,
                                answers[q.key].result, answers[q.key]) for q in request.questions)
    results = {q.key: answers[q.key].result for q in request.questions}
    if UNKNOWN in results.values():
        as_allowed = _outcome(request, {k: ALLOWED if r == UNKNOWN else r for k, r in results.items()})
        as_denied = _outcome(request, {k: DENIED if r == UNKNOWN else r for k, r in results.items()})
        outcome, denied, hidden, error = as_denied
        if as_allowed[0] != as_denied[0]:
            outcome, error = UNKNOWN, None
    else:
        outcome, denied, hidden, error = _outcome(request, results)
    spec = request.spec
    notes = tuple(n for n in (spec.note, *(r.note for r in spec.requirements)) if n)
    return ApiDecision(spec, request.kafka_version, request.api_version, outcome, checks, denied, hidden, error,
                       notes)


def _outcome(request: ApiRequest, results: Mapping[tuple[str, str | None, str], str]
             ) -> tuple[str, tuple[tuple[str, str], ...], tuple[tuple[str, str], ...], str | None]:
    """(outcome, denied resources, hidden resources, first error code) from ALLOWED / DENIED / ERROR answers."""
    def allowed(index: int, check: Check, name: str | None) -> bool:
        return any(results[q.key] == ALLOWED for q in request.questions
                   if q.requirement == index and q.check == check and q.resource_name == name)

    values = request.values
    denied: list[tuple[str, str]] = []
    hidden: list[tuple[str, str]] = []
    passed_topics = 0
    request_failed = False  # a group / transactional id / cluster check failed: the whole request fails
    first_error: str | None = None
    for index, (named, unnamed) in request.applicable:
        req = request.spec.requirements[index]
        # cluster / any-resource alternatives decide for every name at once
        blanket = any(allowed(index, c, None if c.any_resource else CLUSTER_RESOURCE_NAME) for c in unnamed)
        if not named:
            if not blanket:
                label = "*" if unnamed[0].any_resource else CLUSTER_RESOURCE_NAME
                if req.filters:
                    hidden.append((unnamed[0].resource_type, label))
                else:
                    request_failed = True
                    if req.per_topic and values.get(ARG_TOPICS):
                        denied.extend(("TOPIC", t) for t in values[ARG_TOPICS])
                    else:
                        denied.append((unnamed[0].resource_type, label))
                    first_error = first_error or req.error
            continue
        primary = named[0].arg or ""
        if primary not in values:
            if primary != ARG_TOPICS and not blanket:
                hidden.append((named[0].resource_type, "*"))  # only a filter gets here (`api_request` raises)
            continue
        blanket = blanket or any(allowed(index, c, v) for c in named if c.arg != primary
                                 for v in values.get(c.arg or "", ()))
        for name in values[primary]:
            if blanket or any(allowed(index, c, name) for c in named if c.arg == primary):
                if primary == ARG_TOPICS:
                    passed_topics += 1
            elif req.filters:
                hidden.append((named[0].resource_type, name))
            else:
                denied.append((named[0].resource_type, name))
                first_error = first_error or req.error
                if primary != ARG_TOPICS:
                    request_failed = True
    if any(r == ERROR for r in results.values()):
        outcome = ERROR
    elif not denied:
        outcome = ALLOWED
    elif request_failed or passed_topics == 0:
        outcome = DENIED
    else:
        outcome = "PARTIAL"
    return outcome, tuple(denied), tuple(hidden), first_error


def could_call(
    authorizer: StandardAuthorizer,
    api_name: int | str | ApiSpec,
    principal: str,
    host: str,
    *,
    kafka_version: str = LATEST_KAFKA,
    api_version: int | None = None,
    topics: Iterable[str] | None = None,
    group: str | Iterable[str] | None = None,
    transactional_id: str | None = None,
    token_id: str | None = None,
    owner: str | None = None,
    conditions: Iterable[str] = (),
) -> ApiDecision:
    """Could ``principal`` (from ``host``) call ``api_name`` on these resources against ``authorizer``'s ACLs,
    with Kafka ``kafka_version``'s rules?

    ``group`` may be one id or several (ListGroups / per-group checks). Conditions: see ``CONDITIONS``;
    ``transactional`` is implied by ``transactional_id`` for Produce / InitProducerId, ``idempotent`` for
    InitProducerId without one, ``group_coordinator`` for FindCoordinator with a group and no other key type, the
    config kinds for Describe/AlterConfigs from the resources given (``topics`` -> topic configs, ``group`` ->
    group configs, neither -> broker configs), ``other_owner`` for CreateDelegationToken when ``owner`` differs.
    Per-topic checks are skipped when ``topics`` is not given; a check that needs a group, transactional id, token
    id or owner that was not given raises ``ValueError``.
    """
    request = api_request(api_name, principal, kafka_version=kafka_version, api_version=api_version, topics=topics,
                          group=group, transactional_id=transactional_id, token_id=token_id, owner=owner,
                          conditions=conditions)
    answers: dict[tuple[str, str | None, str], Explanation] = {}
    for q in request.questions:
        if q.key not in answers:
            answers[q.key] = (authorizer.explain_by_resource_type(principal, host, q.operation, q.resource_type)
                              if q.resource_name is None else
                              authorizer.explain(principal, host, q.operation, q.resource_type, q.resource_name))
    return api_decision(request, answers)
