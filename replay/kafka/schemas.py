"""Our own description of every KRaft metadata record schema and the KRaft control record bodies.

Facts are those of Kafka 4.3.1 (`metadata/src/main/resources/common/metadata/*.json` and the five control
schemas of `clients/src/main/resources/common/message/`), written out by hand in our own structure; see spec
§5.2, §6.2 and §7. `tests/kafka/test_schemas.py` cross-checks this table against the JSON inside the Kafka jars.

The building blocks:

* `Versions`: a closed or open-ended range such as Kafka's `"0+"`, `"1-3"`, `"0"` or `"none"`.
* `Field`: one field of a struct: Kafka's PascalCase name, Kafka's type text (`int32`, `[]uuid`, `[]Voter`,
  `KRaftVersionFeature`), the versions it exists in, nullable and tagged versions, its tag, its default as
  Kafka writes it in the schema (`""` when the schema gives none) and, for struct and struct-array fields,
  the nested `Struct`.
* `Struct`: an ordered tuple of fields.
* `MessageSchema`: a top-level record: its name, the dump-log type name, valid versions and its fields; an
  api key for metadata records, a control type for control bodies.

Every schema here is flexible from version 0, so the codec in `message.py` only implements the compact rules.
Nothing here imports Spark.
"""

from __future__ import annotations

import base64
import re
from dataclasses import dataclass, field
from typing import Any

# Kafka's primitive type names, as written in its JSON schemas.
PRIMITIVE_TYPES = frozenset(
    {"bool", "int8", "int16", "int32", "int64", "uint16", "uint32", "float64", "string", "bytes", "uuid"}
)
ZERO_UUID = "AAAAAAAAAAAAAAAAAAAAAA"  # Uuid.ZERO_UUID as text


@dataclass(frozen=True, slots=True)
class Versions:
    """An inclusive version range; `hi is None` means open-ended. An empty range has `lo > hi`."""

    lo: int
    hi: int | None

    @staticmethod
    def parse(text: str) -> Versions:
        text = text.strip()
        if text == "none":
            return NO_VERSIONS
        if text.endswith("+"):
            return Versions(int(text[:-1]), None)
        if "-" in text:
            lo, hi = text.split("-", 1)
            return Versions(int(lo), int(hi))
        return Versions(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        if not isinstance(version, int):
            return False
        return self.lo <= version and (self.hi is None or version <= self.hi)

    @property
    def empty(self) -> bool:
        return self.hi is not None and self.hi < self.lo

    def __str__(self) -> str:
        if self.empty:
            return "none"
        if self.hi is None:
            return f"{self.lo}+"
        if self.hi == self.lo:
            return str(self.lo)
        return f"{self.lo}-{self.hi}"


NO_VERSIONS = Versions(0, -1)
ALL_VERSIONS = Versions(0, None)


@dataclass(frozen=True, slots=True)
class Struct:
    """An ordered list of fields: a message body, an array element or an inline struct field."""

    name: str
    fields: tuple[Field, ...]
    versions: Versions = ALL_VERSIONS

    def field(self, name: str) -> Field:
        for f in self.fields:
            if f.name == name or f.json_name == name:
                return f
        raise KeyError(name)


@dataclass(frozen=True, slots=True)
class Field:
    """One field of a struct, as a Kafka schema declares it."""

    name: str  # PascalCase, as in Kafka's schema
    type: str  # Kafka's type text: "int32", "string", "[]int32", "[]BrokerEndpoint", "KRaftVersionFeature"
    versions: Versions
    nullable_versions: Versions = NO_VERSIONS
    tag: int | None = None
    tagged_versions: Versions = NO_VERSIONS
    default: str = ""  # Kafka's default text; "" means the type's default
    struct: Struct | None = None  # for struct and struct-array types

    @property
    def json_name(self) -> str:
        """Kafka's `lowerCaseFirst`: the key used in JSON and in our decoded dicts."""
        return self.name[:1].lower() + self.name[1:]

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element_type(self) -> str:
        """For arrays the element type, else the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """A struct or an array of structs."""
        return self.element_type not in PRIMITIVE_TYPES

    def present_in(self, version: int) -> bool:
        return version in self.versions

    def tagged_in(self, version: int) -> bool:
        return version in self.versions and version in self.tagged_versions

    def nullable_in(self, version: int) -> bool:
        return version in self.nullable_versions

    def default_value(self, version: int) -> Any:
        """Kafka's `FieldSpec.fieldDefault` as a Python value (a fresh object for lists and dicts)."""
        text = self.default
        if text == "null":
            return None
        if self.is_array:
            return []
        if self.struct is not None:
            return struct_defaults(self.struct, version)
        kind = self.type
        if kind == "bool":
            return text == "true"
        if kind in ("int8", "int16", "int32", "int64", "uint16", "uint32"):
            if not text:
                return 0
            return int(text, 16) if text.lower().startswith(("0x", "-0x")) else int(text)
        if kind == "float64":
            return float(text) if text else 0.0
        if kind == "string":
            return text
        if kind == "bytes":
            return b""
        if kind == "uuid":
            return text or ZERO_UUID
        raise ValueError(f"no default for type {kind}")


def struct_defaults(struct: Struct, version: int) -> dict[str, Any]:
    """A struct with every field present in `version` at its default."""
    return {f.json_name: f.default_value(version) for f in struct.fields if f.present_in(version)}


@dataclass(frozen=True, slots=True)
class MessageSchema:
    """A top-level record schema: a metadata record (api_key set) or a control body (control_type set)."""

    name: str  # Kafka's JSON `name`
    type_name: str  # dump-log type: MetadataRecordType enum name, or the control type name
    valid_versions: Versions
    fields: tuple[Field, ...]
    api_key: int | None = None
    control_type: int | None = None
    json_file: str = ""  # the schema file inside the Kafka jar
    in_kafka_431: bool = True  # False: a record type newer than Kafka 4.3.1 (which rejects it as unknown)
    struct: Struct = field(init=False, compare=False, repr=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "struct", Struct(self.name, self.fields))

    @property
    def max_version(self) -> int:
        assert self.valid_versions.hi is not None
        return self.valid_versions.hi


def upper_snake(name: str) -> str:
    """MetadataRecordTypeGenerator's rule: a capital after a lowercase letter or digit starts a new word."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).upper()


# ---------------------------------------------------------------------------------------------------------
# Table helpers. `f(...)` builds a field; struct types take their nested fields in `fields=` (or a shared
# `struct=`).


def f(
    name: str,
    type_: str,
    versions: str = "0+",
    *,
    nullable: str = "none",
    tag: int | None = None,
    tagged: str = "none",
    default: str = "",
    fields: tuple[Field, ...] | None = None,
    struct: Struct | None = None,
    struct_versions: str = "0+",
) -> Field:
    element = type_[2:] if type_.startswith("[]") else type_
    if fields is not None:
        struct = Struct(element, fields, Versions.parse(struct_versions))
    if element not in PRIMITIVE_TYPES and struct is None:
        raise ValueError(f"{name}: struct type {type_} needs its fields")
    return Field(
        name=name,
        type=type_,
        versions=Versions.parse(versions),
        nullable_versions=Versions.parse(nullable),
        tag=tag,
        tagged_versions=Versions.parse(tagged),
        default=default,
        struct=struct,
    )


def _metadata(
    api_key: int, name: str, versions: str, *fields: Field, json_file: str = "", in_kafka_431: bool = True
) -> MessageSchema:
    return MessageSchema(
        name=name,
        type_name=upper_snake(name),
        valid_versions=Versions.parse(versions),
        fields=tuple(fields),
        api_key=api_key,
        json_file=json_file or f"{name}.json",
        in_kafka_431=in_kafka_431,
    )


def _control(control_type: int, type_name: str, name: str, versions: str, *fields: Field) -> MessageSchema:
    return MessageSchema(
        name=name,
        type_name=type_name,
        valid_versions=Versions.parse(versions),
        fields=tuple(fields),
        control_type=control_type,
        json_file=f"{name}.json",
    )


def _endpoint_fields() -> tuple[Field, ...]:
    return (
        f("Name", "string"),
        f("Host", "string"),
        f("Port", "uint16"),
        f("SecurityProtocol", "int16"),
    )


def _feature_fields() -> tuple[Field, ...]:
    return (
        f("Name", "string"),
        f("MinSupportedVersion", "int16"),
        f("MaxSupportedVersion", "int16"),
    )


METADATA_SCHEMAS: dict[int, MessageSchema] = {
    s.api_key: s  # type: ignore[misc]
    for s in (
        _metadata(
            0,
            "RegisterBrokerRecord",
            "0-4",
            f("BrokerId", "int32"),
            f("IsMigratingZkBroker", "bool", "2+", default="false"),
            f("IncarnationId", "uuid"),
            f("BrokerEpoch", "int64"),
            f("EndPoints", "[]BrokerEndpoint", fields=_endpoint_fields()),
            f("Features", "[]BrokerFeature", fields=_feature_fields()),
            f("Rack", "string", nullable="0+"),
            f("Fenced", "bool", default="true"),
            f("InControlledShutdown", "bool", "1+", default="false"),
            f("LogDirs", "[]uuid", "3+", tag=0, tagged="3+"),
            f("CordonedLogDirs", "[]uuid", "4+", tag=1, tagged="4+", nullable="4+", default="null"),
        ),
        _metadata(1, "UnregisterBrokerRecord", "0", f("BrokerId", "int32"), f("BrokerEpoch", "int64")),
        _metadata(2, "TopicRecord", "0", f("Name", "string"), f("TopicId", "uuid")),
        _metadata(
            3,
            "PartitionRecord",
            "0-2",
            f("PartitionId", "int32", default="-1"),
            f("TopicId", "uuid"),
            f("Replicas", "[]int32"),
            f("Isr", "[]int32"),
            f("RemovingReplicas", "[]int32"),
            f("AddingReplicas", "[]int32"),
            f("Leader", "int32", default="-1"),
            f("LeaderRecoveryState", "int8", tag=0, tagged="0+", default="0"),
            f("LeaderEpoch", "int32", default="-1"),
            f("PartitionEpoch", "int32", default="-1"),
            f("Directories", "[]uuid", "1+"),
            f("EligibleLeaderReplicas", "[]int32", "2+", tag=1, tagged="2+", nullable="2+", default="null"),
            f("LastKnownElr", "[]int32", "2+", tag=2, tagged="2+", nullable="2+", default="null"),
        ),
        _metadata(
            4,
            "ConfigRecord",
            "0",
            f("ResourceType", "int8"),
            f("ResourceName", "string"),
            f("Name", "string"),
            f("Value", "string", nullable="0+"),
        ),
        _metadata(
            5,
            "PartitionChangeRecord",
            "0-2",
            f("PartitionId", "int32", default="-1"),
            f("TopicId", "uuid"),
            f("Isr", "[]int32", tag=0, tagged="0+", nullable="0+", default="null"),
            f("Leader", "int32", tag=1, tagged="0+", default="-2"),
            f("Replicas", "[]int32", tag=2, tagged="0+", nullable="0+", default="null"),
            f("RemovingReplicas", "[]int32", tag=3, tagged="0+", nullable="0+", default="null"),
            f("AddingReplicas", "[]int32", tag=4, tagged="0+", nullable="0+", default="null"),
            f("LeaderRecoveryState", "int8", tag=5, tagged="0+", default="-1"),
            # declared before tags 6 and 7: JSON order follows declaration, the wire follows tag order
            f("Directories", "[]uuid", "1+", tag=8, tagged="1+", nullable="1+", default="null"),
            f("EligibleLeaderReplicas", "[]int32", "2+", tag=6, tagged="2+", nullable="2+", default="null"),
            f("LastKnownElr", "[]int32", "2+", tag=7, tagged="2+", nullable="2+", default="null"),
        ),
        _metadata(7, "FenceBrokerRecord", "0", f("Id", "int32"), f("Epoch", "int64")),
        _metadata(8, "UnfenceBrokerRecord", "0", f("Id", "int32"), f("Epoch", "int64")),
        _metadata(9, "RemoveTopicRecord", "0", f("TopicId", "uuid")),
        _metadata(
            10,
            "DelegationTokenRecord",
            "0",
            f("Owner", "string"),
            f("Requester", "string"),
            f("Renewers", "[]string"),
            f("IssueTimestamp", "int64"),
            f("MaxTimestamp", "int64"),
            f("ExpirationTimestamp", "int64"),
            f("TokenId", "string"),
        ),
        _metadata(
            11,
            "UserScramCredentialRecord",
            "0",
            f("Name", "string"),
            f("Mechanism", "int8"),
            f("Salt", "bytes"),
            f("StoredKey", "bytes"),
            f("ServerKey", "bytes"),
            f("Iterations", "int32"),
        ),
        _metadata(12, "FeatureLevelRecord", "0", f("Name", "string"), f("FeatureLevel", "int16")),
        _metadata(
            14,
            "ClientQuotaRecord",
            "0",
            f(
                "Entity",
                "[]EntityData",
                fields=(f("EntityType", "string"), f("EntityName", "string", nullable="0+")),
            ),
            f("Key", "string"),
            f("Value", "float64"),
            f("Remove", "bool"),
        ),
        _metadata(
            15,
            "ProducerIdsRecord",
            "0",
            f("BrokerId", "int32"),
            f("BrokerEpoch", "int64", default="-1"),
            f("NextProducerId", "int64"),
        ),
        _metadata(
            17,
            "BrokerRegistrationChangeRecord",
            "0-3",
            f("BrokerId", "int32"),
            f("BrokerEpoch", "int64"),
            f("Fenced", "int8", tag=0, tagged="0+"),
            f("InControlledShutdown", "int8", "1+", tag=1, tagged="1+"),
            f("LogDirs", "[]uuid", "2+", tag=2, tagged="2+"),
            f("CordonedLogDirs", "[]uuid", "3+", tag=3, tagged="3+", nullable="3+", default="null"),
        ),
        _metadata(
            18,
            "AccessControlEntryRecord",
            "0",
            f("Id", "uuid"),
            f("ResourceType", "int8"),
            f("ResourceName", "string"),
            f("PatternType", "int8"),
            f("Principal", "string"),
            f("Host", "string"),
            f("Operation", "int8"),
            f("PermissionType", "int8"),
        ),
        _metadata(19, "RemoveAccessControlEntryRecord", "0", f("Id", "uuid")),
        _metadata(20, "NoOpRecord", "0"),
        _metadata(
            21, "ZkMigrationStateRecord", "0", f("ZkMigrationState", "int8"), json_file="ZkMigrationRecord.json"
        ),
        _metadata(22, "RemoveUserScramCredentialRecord", "0", f("Name", "string"), f("Mechanism", "int8")),
        _metadata(
            23,
            "BeginTransactionRecord",
            "0",
            f("Name", "string", tag=0, tagged="0+", nullable="0+", default="null"),
        ),
        _metadata(24, "EndTransactionRecord", "0"),
        _metadata(
            25,
            "AbortTransactionRecord",
            "0",
            f("Reason", "string", tag=0, tagged="0+", nullable="0+", default="null"),
        ),
        _metadata(26, "RemoveDelegationTokenRecord", "0", f("TokenId", "string")),
        _metadata(
            27,
            "RegisterControllerRecord",
            "0",
            f("ControllerId", "int32"),
            f("IncarnationId", "uuid"),
            f("ZkMigrationReady", "bool"),
            f("EndPoints", "[]ControllerEndpoint", fields=_endpoint_fields()),
            f("Features", "[]ControllerFeature", fields=_feature_fields()),
        ),
        _metadata(28, "ClearElrRecord", "0", f("TopicName", "string")),
        # Newer than Kafka 4.3.1 (KIP-1239 era trunk): 4.3.1's MetadataRecordType stops at 28.
        _metadata(29, "UnregisterControllerRecord", "0", f("ControllerId", "int32"), in_kafka_431=False),
    )
}

# Api keys that once existed or were never used; Kafka 4.3.1 rejects them as unknown.
RETIRED_API_KEYS = {6: "AccessControlRecord (3.0-3.3 preview)", 13: "unused", 16: "RemoveFeatureLevelRecord (3.0-3.2)"}

METADATA_BY_TYPE_NAME: dict[str, MessageSchema] = {s.type_name: s for s in METADATA_SCHEMAS.values()}

_LEADER_CHANGE_VOTER = Struct(
    "Voter",
    (f("VoterId", "int32"), f("VoterDirectoryId", "uuid", "1+")),
)

# KRaft control bodies (types 2-6) by control type. ABORT/COMMIT (0/1) are the fixed non-flexible
# EndTransactionMarker (`message.py` handles them), so they have no schema here.
CONTROL_SCHEMAS: dict[int, MessageSchema] = {
    s.control_type: s  # type: ignore[misc]
    for s in (
        _control(
            2,
            "LEADER_CHANGE",
            "LeaderChangeMessage",
            "0-1",
            f("Version", "int16"),
            f("LeaderId", "int32"),
            f("Voters", "[]Voter", struct=_LEADER_CHANGE_VOTER),
            f("GrantingVoters", "[]Voter", struct=_LEADER_CHANGE_VOTER),
        ),
        _control(
            3,
            "SNAPSHOT_HEADER",
            "SnapshotHeaderRecord",
            "0",
            f("Version", "int16"),
            f("LastContainedLogTimestamp", "int64"),
        ),
        _control(4, "SNAPSHOT_FOOTER", "SnapshotFooterRecord", "0", f("Version", "int16")),
        _control(5, "KRAFT_VERSION", "KRaftVersionRecord", "0", f("Version", "int16"), f("KRaftVersion", "int16")),
        _control(
            6,
            "KRAFT_VOTERS",
            "VotersRecord",
            "0",
            f("Version", "int16"),
            f(
                "Voters",
                "[]Voter",
                fields=(
                    f("VoterId", "int32"),
                    f("VoterDirectoryId", "uuid"),
                    f("Endpoints", "[]Endpoint", fields=(f("Name", "string"), f("Host", "string"), f("Port", "uint16"))),
                    f(
                        "KRaftVersionFeature",
                        "KRaftVersionFeature",
                        fields=(f("MinSupportedVersion", "int16"), f("MaxSupportedVersion", "int16")),
                    ),
                ),
            ),
        ),
    )
}

CONTROL_BY_TYPE_NAME: dict[str, MessageSchema] = {s.type_name: s for s in CONTROL_SCHEMAS.values()}

# The version every KRaft control body is read and written at (ControlRecordUtils: *_CURRENT_VERSION = 0).
CONTROL_BODY_VERSION = 0


def metadata_schema(api_key: int) -> MessageSchema | None:
    return METADATA_SCHEMAS.get(api_key)


def schema_for_type_name(type_name: str) -> MessageSchema | None:
    """A metadata schema by its dump-log name (`ACCESS_CONTROL_ENTRY_RECORD`) or a control one (`SNAPSHOT_HEADER`)."""
    return METADATA_BY_TYPE_NAME.get(type_name) or CONTROL_BY_TYPE_NAME.get(type_name)


def uuid_text(raw: bytes) -> str:
    """16 bytes (most significant long first) → Kafka's `Uuid.toString`: base64url without padding."""
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def uuid_bytes(text: str) -> bytes:
    """Kafka's `Uuid.fromString`: 22-char base64url (no padding) → 16 bytes."""
    if len(text) != 22:
        raise ValueError(f"Input string with prefix `{text[:22]}` is too long to be decoded as a base64 UUID")
    raw = base64.urlsafe_b64decode(text + "==")
    if len(raw) != 16:
        raise ValueError(f"bad uuid text {text!r}")
    return raw
