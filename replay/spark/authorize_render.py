"""One decision (`authorize.authorize_one`'s dict) as text for people: a sentence and the ACLs as kafka-acls lines,
a table row, or JSON; and the same for an API call's checks (`authorize_api`) and for "which APIs"."""

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

    return lines + _acl_lines(result, "")


def _acl_lines(result: dict[str, Any], indent: str) -> list[str]:
    """The deciding ACLs and those whose liveness history cannot tell, as kafka-acls lines."""
    def fields(a: dict[str, Any]) -> AclBinding:
        return AclBinding(a["resourceType"], a["resourceName"], a["patternType"], a["principal"], a["host"],
                          a["operation"], a["permissionType"])

    lines = []
    for key, title in (("decidingAcls", "deciding ACL(s):"),
                       ("uncertainAcls", "ACL(s) that may or may not have been live then (history has a gap):")):
        if result[key]:
            lines.append(indent + title)
            lines += [indent + "  " + x for x in kafka_acls_lines({a["id"]: fields(a) for a in result[key]
                                                                   if "principal" in a}) if x]
    return lines


def _moment(result: dict[str, Any]) -> str:
    return (f"as of offset {result['asOfOffset']} ({format_time(result['asOfTime'])}) on cluster "
            f"{result['cluster']}")


def render_api_decision(result: dict[str, Any], fmt: str = "text") -> list[str]:
    """An API call's outcome (`authorize_api.authorize_api`): a sentence, then each check with its decision and
    deciding ACLs; `table`: one row per check; `json`."""
    if fmt == "json":
        return [json.dumps(result, indent=1, sort_keys=False)]
    if fmt == "table":
        keys = ["api", "outcome", "resourceType", "resourceName", "operation", "decision", "certain", "reason"]
        rows = [{"api": result["api"], "outcome": result["outcome"], **{k: c[k] for k in keys[2:]},
                 "acls": ",".join(a["id"] for a in c["decidingAcls"])} for c in result["checks"]]
        return table_lines(rows, [*keys, "acls"])
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}; choose text, json or table")
    version = f", request v{result['apiVersion']}" if result["apiVersion"] is not None else ""
    lines = [f"{result['principal']} from {result['host']} calls {result['api']} (Kafka {result['kafkaVersion']}"
             f"{version}) {_moment(result)}: {result['outcome']}"
             + (f" ({result['error']})" if result["error"] else "")]
    if not result["checks"]:
        lines.append("  no ACL check applies to this call with the resources given")
    for c in result["checks"]:
        name = f" {c['resourceName']!r}" if c["resourceName"] is not None else " (any resource of the type)"
        sure = "" if c["certain"] else ", cannot tell"
        lines.append(f"  check {c['resourceType']}{name} {c['operation']}: {c['decision']} ({c['reason']}{sure})"
                     + (f": {c['error']}" if c["error"] else ""))
        lines += _acl_lines(c, "    ")
    for key, title in (("denied", "denied"), ("hidden", "left out of the response (the call does not fail)")):
        if result[key]:
            lines.append(f"{title}: " + ", ".join(f"{d['resourceType']} {d['resourceName']!r}" for d in result[key]))
    lines += [f"note: {n}" for n in result["notes"]]
    return lines


def render_which_apis(result: dict[str, Any], fmt: str = "text") -> list[str]:
    """Which APIs a principal could call on some resources (`authorize_api.which_apis`): one row per API."""
    if fmt == "json":
        return [json.dumps(result, indent=1, sort_keys=False)]
    rows = [{**a, "denied": ", ".join(a["denied"]), "error": a["error"] or ""} for a in result["apis"]]
    table = table_lines(rows, ["api", "apiKey", "outcome", "error", "checks", "denied"])
    if fmt == "table":
        return table
    if fmt != "text":
        raise ValueError(f"unknown format {fmt!r}; choose text, json or table")
    named = ", ".join(f"{k}={v}" for k, v in result["resources"].items()) or "no resource"
    allowed = sum(a["outcome"] == "ALLOWED" for a in result["apis"])
    lines = [f"APIs {result['principal']} from {result['host']} could call on {named} (Kafka "
             f"{result['kafkaVersion']}) {_moment(result)}: {allowed} of {len(result['apis'])} allowed", *table]
    if result["notAsked"]:
        lines.append(f"not asked ({len(result['notAsked'])}): " + "; ".join(
            f"{a['api']}: {a['why']}" for a in result["notAsked"]))
    lines.append(f"never authorized by Kafka ({len(result['noCheck'])}): {', '.join(result['noCheck'])}")
    return lines

