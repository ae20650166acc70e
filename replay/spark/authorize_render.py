"""One decision (`authorize.authorize_one`'s dict) as text for people: a sentence and the ACLs as kafka-acls lines,
a table row, or JSON."""

from __future__ import annotations

import json
from typing import Any

from replay.kafka.acl import AclBinding
from replay.kafka.listing import kafka_acls_lines, table_lines
from replay.kafka.times import format_time


def render_decision(result: dict[str, Any], fmt: str = "text") -> list[str]:
    """`text` (a sentence and the ACLs as kafka-acls lines), `json`, or `table`."""
    if fmt == "json":
        return [json.dumps(result, indent=1, sort_keys=False)]
    if fmt == "table":
        keys = ["cluster", "principal", "host", "operation", "resourceType", "resourceName", "asOfOffset", "decision",
                "certain", "reason", "coverage"]
        row = {k: result.get(k) for k in keys}
        row["acls"] = ",".join(a["id"] for a in result["decidingAcls"])
        return table_lines([row], [*keys, "acls"])
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}; choose text, json or table")
    what = (f"{result['principal']} from {result['host']}: {result['operation']} on {result['resourceType']}"
            + (f" {result['resourceName']!r}" if result["resourceName"] is not None else " (any resource of the type)"))
    sure = "certainly" if result["certain"] else "cannot tell:"
    lines = [f"{what} as of offset {result['asOfOffset']} ({format_time(result['asOfTime'])}) on cluster "
             f"{result['cluster']}: {sure} {result['decision']} ({result['reason']}, history {result['coverage']})"]
    if result.get("error"):
        lines.append(f"invalid request: {result['error']}")

    def fields(a: dict[str, Any]) -> AclBinding:
        return AclBinding(a["resourceType"], a["resourceName"], a["patternType"], a["principal"], a["host"],
                          a["operation"], a["permissionType"])

    if result["decidingAcls"]:
        lines.append("deciding ACL(s):")
        lines += ["  " + x for x in kafka_acls_lines({a["id"]: fields(a) for a in result["decidingAcls"]
                                                      if "principal" in a}) if x]
    if result["uncertainAcls"]:
        lines.append("ACL(s) that may or may not have been live then (history has a gap):")
        lines += ["  " + x for x in kafka_acls_lines({a["id"]: fields(a) for a in result["uncertainAcls"]
                                                      if "principal" in a}) if x]
    return lines

