"""ACL sets printed the ways people know: `kafka-acls --list`, `kafka-metadata-shell`'s StandardAcl lines, JSON,
and a plain table."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from .acl import AclBinding, AclOperation, AclPermissionType, PatternType, ResourceType

FORMATS = ("kafka-acls", "json", "table", "standard-acl")
KAFKA_FORMATS = ("kafka-acls", "standard-acl")  # Kafka's own text; `acls --output` renders the rest


def _sort_key(item: tuple[str, AclBinding]) -> tuple[Any, ...]:
    acl_id, b = item
    return (ResourceType[b.resource_type], b.resource_name, PatternType[b.pattern_type], b.principal, b.host,
            AclOperation[b.operation], AclPermissionType[b.permission_type], acl_id)


def kafka_acls_lines(acls: Mapping[str, AclBinding]) -> list[str]:
    """What `kafka-acls --list` prints: a header per resource pattern, one tab-indented entry per ACL."""
    by_resource: dict[tuple[str, str, str], list[AclBinding]] = {}
    for _, b in sorted(acls.items(), key=_sort_key):
        by_resource.setdefault((b.resource_type, b.resource_name, b.pattern_type), []).append(b)
    lines: list[str] = []
    for (rtype, name, pattern), entries in by_resource.items():
        lines.append(f"Current ACLs for resource `ResourcePattern(resourceType={rtype}, name={name}, "
                     f"patternType={pattern})`: ")
        body = [
            f"\t(principal={b.principal}, host={b.host}, operation={b.operation}, permissionType={b.permission_type})"
            for b in entries
        ]
        body[0] = " " + body[0]
        body[-1] += " "
        lines += body
        lines.append("")
    return lines


def standard_acl_lines(acls: Mapping[str, AclBinding]) -> list[str]:
    """`kafka-metadata-shell` style: `<id> StandardAcl(...)`."""
    return [f"{acl_id} {b.standard_acl_text()}" for acl_id, b in sorted(acls.items(), key=_sort_key)]


def acl_dict(acl_id: str, b: AclBinding, **extra: Any) -> dict[str, Any]:
    return {"id": acl_id, "resourceType": b.resource_type, "resourceName": b.resource_name,
            "patternType": b.pattern_type, "principal": b.principal, "host": b.host, "operation": b.operation,
            "permissionType": b.permission_type, **extra}


def table_lines(rows: Iterable[Mapping[str, Any]], columns: list[str] | None = None) -> list[str]:
    """A fixed-width text table of dicts."""
    rows = list(rows)
    if not rows:
        return ["(none)"]
    cols = columns or list(rows[0])
    cells = [[("" if r.get(c) is None else str(r.get(c))) for c in cols] for r in rows]
    widths = [max(len(c), *(len(row[i]) for row in cells)) for i, c in enumerate(cols)]
    fmt = "  ".join(f"{{:<{w}}}" for w in widths)
    return [fmt.format(*cols), fmt.format(*("-" * w for w in widths)), *(fmt.format(*row).rstrip() for row in cells)]


ACL_COLUMNS = ["id", "resourceType", "resourceName", "patternType", "principal", "host", "operation",
               "permissionType", "certainty"]


def acl_rows(acls: Mapping[str, AclBinding], uncertain: Mapping[str, AclBinding] | None = None) -> list[dict[str, Any]]:
    """One row per ACL (`ACL_COLUMNS`), the certain ones first; `certainty` tells the uncertain ones apart."""
    rows = [acl_dict(i, b, certainty="certain") for i, b in sorted(acls.items(), key=_sort_key)]
    return rows + [acl_dict(i, b, certainty="uncertain") for i, b in sorted((uncertain or {}).items(), key=_sort_key)]


def acls_document(acls: Mapping[str, AclBinding], uncertain: Mapping[str, AclBinding] | None = None,
                  meta: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The answer as one object: `meta` (as of what, how certain), then `acls` and `uncertain` apart."""
    doc = dict(meta or {})
    doc["acls"] = [acl_dict(i, b) for i, b in sorted(acls.items(), key=_sort_key)]
    doc["uncertain"] = [acl_dict(i, b) for i, b in sorted((uncertain or {}).items(), key=_sort_key)]
    return doc


def render_acls(acls: Mapping[str, AclBinding], fmt: str, uncertain: Mapping[str, AclBinding] | None = None,
                meta: Mapping[str, Any] | None = None) -> list[str]:
    """Render an ACL set; `uncertain` ACLs (may or may not have been live) are listed apart, never mixed in."""
    uncertain = uncertain or {}
    if fmt == "json":
        return [json.dumps(acls_document(acls, uncertain, meta), indent=1)]
    if fmt == "table":
        return table_lines(acl_rows(acls, uncertain), ACL_COLUMNS)
    if fmt == "standard-acl":
        return standard_acl_lines(acls) + [f"# uncertain: {line}" for line in standard_acl_lines(uncertain)]
    if fmt == "kafka-acls":
        out = kafka_acls_lines(acls)
        if uncertain:
            out.append(f"# {len(uncertain)} more ACL(s) may or may not have been live then (history has a gap):")
            out += ["# " + line for line in kafka_acls_lines(uncertain) if line]
        return out
    raise ValueError(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}")
