"""Kafka's ACL enums (with their byte codes) and the ACL binding value type.

Codes are the ones stored in AccessControlEntryRecord; an unknown code decodes to UNKNOWN, as in Kafka.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from enum import IntEnum


class _CodedEnum(IntEnum):
    """An enum with Kafka's byte codes. Two ways in, for two kinds of caller:

    * ``from_code(code)`` is Kafka's ``fromCode``: **any** code is accepted and one Kafka does not know (say 99)
      becomes ``UNKNOWN``. Use it for what was *stored* (record fields, ACLs loaded from a log), where Kafka's
      reading is the truth and refusing would make a replay stop where the broker did not.
    * ``parse(value)`` reads what a *person* typed or a request file holds: a member, the enum name in any case,
      Kafka's PascalCase (``DescribeConfigs``), dashes for underscores, or a known code (int or digits). Anything
      else -- a misspelt name, or a code Kafka does not define -- raises ``ValueError`` with a message naming the
      accepted values, because silently reading a typo as ``UNKNOWN`` would answer a different question.
      ``parse(value, stored=True)`` is for values that come from storage but may be spelt as names or codes
      (``AclBinding.of``): unknown *codes* then become ``UNKNOWN`` exactly as ``from_code`` does, while unknown
      *names* still raise (no Kafka record holds a name).
    """

    @classmethod
    def from_code(cls, code: int) -> _CodedEnum:
        """Kafka's ``fromCode``: an unknown code is ``UNKNOWN`` (code 0)."""
        try:
            return cls(code)
        except ValueError:
            return cls(0)  # UNKNOWN

    @classmethod
    def parse(cls, text: str | int | _CodedEnum, *, stored: bool = False) -> _CodedEnum:
        """Accept a member, a code, the enum name in any case, or Kafka's PascalCase (`DescribeConfigs`).

        Unknown codes raise unless ``stored`` (then they are ``UNKNOWN``, as Kafka decodes them); unknown names
        always raise. See the class docstring for which callers use which.
        """
        if isinstance(text, cls):
            return text
        if isinstance(text, int) and not isinstance(text, bool):
            return cls._by_code(text, stored)
        key = str(text).strip().replace("-", "_")
        if re.fullmatch(r"[+-]?[0-9]+", key):
            return cls._by_code(int(key), stored)
        if key.upper() in cls.__members__:
            return cls[key.upper()]
        snake = "".join("_" + c if c.isupper() and i else c for i, c in enumerate(key)).upper()
        if snake in cls.__members__:
            return cls[snake]
        raise ValueError(f"unknown {cls.__name__} {text!r}; expected one of {', '.join(cls.__members__)}")

    @classmethod
    def _by_code(cls, code: int, stored: bool) -> _CodedEnum:
        if stored:
            return cls.from_code(code)
        try:
            return cls(code)
        except ValueError:
            known = ", ".join(f"{m.value} ({m.name})" for m in cls)
            raise ValueError(f"unknown {cls.__name__} code {code} (Kafka's fromCode would read it as UNKNOWN; "
                             f"say UNKNOWN or 0 if that is meant); expected one of {known}") from None


class ResourceType(_CodedEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class PatternType(_CodedEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class AclOperation(_CodedEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class AclPermissionType(_CodedEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


WILDCARD_RESOURCE = "*"
WILDCARD_HOST = "*"
WILDCARD_PRINCIPAL = "User:*"
CLUSTER_RESOURCE_NAME = "kafka-cluster"

# PascalCase names as kafka-acls prints resource types (`ResourcePattern(resourceType=TOPIC ...`) uses the enum name,
# but the `--list` header uses these).
RESOURCE_TYPE_PASCAL = {
    ResourceType.TOPIC: "Topic",
    ResourceType.GROUP: "Group",
    ResourceType.CLUSTER: "Cluster",
    ResourceType.TRANSACTIONAL_ID: "TransactionalId",
    ResourceType.DELEGATION_TOKEN: "DelegationToken",
    ResourceType.USER: "User",
}


@dataclass(frozen=True, slots=True)
class AclBinding:
    """One ACL: a resource pattern and an access control entry. Fields are enum names (strings)."""

    resource_type: str
    resource_name: str
    pattern_type: str
    principal: str
    host: str
    operation: str
    permission_type: str

    @classmethod
    def of(
        cls,
        resource_type: str | int,
        resource_name: str,
        pattern_type: str | int,
        principal: str,
        host: str,
        operation: str | int,
        permission_type: str | int,
    ) -> AclBinding:
        """Build from names or codes, normalising to the enum names.

        This is how stored ACLs are read (``StandardAuthorizer.add_acl`` normalises through it), so a code Kafka
        does not know becomes ``UNKNOWN`` as ``fromCode`` makes it; a name that is not an enum name raises
        ``ValueError``.
        """
        return cls(
            ResourceType.parse(resource_type, stored=True).name,
            resource_name,
            PatternType.parse(pattern_type, stored=True).name,
            principal,
            host,
            AclOperation.parse(operation, stored=True).name,
            AclPermissionType.parse(permission_type, stored=True).name,
        )

    @classmethod
    def from_record_data(cls, data: dict[str, object]) -> AclBinding:
        """From the decoded fields of an AccessControlEntryRecord (codes); unknown codes become UNKNOWN."""
        rt, pt, op, perm = _stored_names()
        return cls(
            rt.get(data["resourceType"]) or ResourceType.from_code(int(data["resourceType"])).name,  # type: ignore[call-overload]
            str(data["resourceName"]),
            pt.get(data["patternType"]) or PatternType.from_code(int(data["patternType"])).name,  # type: ignore[call-overload]
            str(data["principal"]),
            str(data["host"]),
            op.get(data["operation"]) or AclOperation.from_code(int(data["operation"])).name,  # type: ignore[call-overload]
            perm.get(data["permissionType"])
            or AclPermissionType.from_code(int(data["permissionType"])).name,  # type: ignore[call-overload]
        )

    def to_record_data(self, acl_id: str) -> dict[str, object]:
        """The AccessControlEntryRecord fields (codes), in schema order."""
        return {
            "id": acl_id,
            "resourceType": int(ResourceType[self.resource_type]),
            "resourceName": self.resource_name,
            "patternType": int(PatternType[self.pattern_type]),
            "principal": self.principal,
            "host": self.host,
            "operation": int(AclOperation[self.operation]),
            "permissionType": int(AclPermissionType[self.permission_type]),
        }

    def standard_acl_text(self) -> str:
        """`StandardAcl(...)` as kafka-metadata-shell prints it."""
        return (
            f"StandardAcl(resourceType={self.resource_type}, resourceName={self.resource_name}, "
            f"patternType={self.pattern_type}, principal={self.principal}, host={self.host}, "
            f"operation={self.operation}, permissionType={self.permission_type})"
        )


@functools.cache
def _stored_names() -> tuple[dict[object, str], ...]:
    """The enum names by code of the four coded fields of an ACL record (`from_code` for the codes not here)."""
    return tuple({member.value: member.name for member in cls}
                 for cls in (ResourceType, PatternType, AclOperation, AclPermissionType))
