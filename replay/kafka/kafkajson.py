"""Kafka's JSON for metadata records and control bodies, exactly as `kafka-dump-log` prints it, and back.

Kafka's generated `*JsonConverter.write(message, version)` builds a Jackson tree and dump-log prints it with
`ObjectNode.toString()`: compact separators, keys in schema declaration order, fields absent in the version
left out, tagged fields only when they differ from their default (spec §10.1 item 6). Values:

* int8/int16/int32/uint16/int64/uint32: JSON integers;
* bool: true/false; string: a JSON string escaped as Jackson does (`"` and `\\`; control characters as
  `\\b \\t \\n \\f \\r` or `\\u00XX` with upper-case hex; everything else, non-ASCII included, raw);
* uuid: its 22-character base64url text; bytes: standard base64 with padding;
* float64: `java_double`, Java's `Double.toString`; NaN and the infinities as the strings `"NaN"`,
  `"Infinity"`, `"-Infinity"` (Jackson's default WRITE_NAN_AS_STRINGS).

Keys starting with `_` (our `message.UNKNOWN_TAGS_KEY`) are never printed: Kafka does not print unknown tags.
Nothing here imports Spark.
"""

from __future__ import annotations

import base64
import binascii
import json
import math
from decimal import Decimal
from typing import Any

from replay.kafka.schemas import (
    CONTROL_BY_TYPE_NAME,
    METADATA_BY_TYPE_NAME,
    METADATA_SCHEMAS,
    Field,
    MessageSchema,
    Struct,
)
from replay.kafka.secrets import MARKER_RE, RedactedBytes

__all__ = [
    "CONTROL_TAIL_LABELS",
    "KafkaJsonError",
    "control_json",
    "control_tail",
    "data_json",
    "jackson_string",
    "java_double",
    "parse_control_json",
    "parse_payload_json",
    "payload_json",
]


class KafkaJsonError(ValueError):
    """Text that is not Kafka's JSON for the schema it names."""


# ---------------------------------------------------------------------------------------------------------
# Scalars


def java_double(x: float) -> str:
    """Java's `Double.toString(x)` (the JDK 19+ specification, JDK-4511638).

    The shortest decimal that rounds to `x` (when that is a single digit, the closest one of one or two
    digits); plain notation when 1e-3 <= |x| < 1e7, else `d.dddE±n`; at least one digit after the point.
    JDK 17 and older used an older algorithm that, for rare values, prints one more digit than needed.
    """
    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0.0:
        return "-0.0" if math.copysign(1.0, x) < 0 else "0.0"
    sign = "-" if x < 0 else ""
    a = abs(x)
    dec = Decimal(repr(a)).normalize()
    digits = dec.as_tuple().digits
    if len(digits) == 1:
        # Java considers two-digit decimals too and takes the closest to x that still rounds to x.
        two = Decimal(format(Decimal(a), ".1e"))
        if float(two) == a:
            dec = two.normalize()
    tup = dec.as_tuple()
    ds = "".join(map(str, tup.digits))
    assert isinstance(tup.exponent, int)
    exp10 = tup.exponent + len(ds) - 1  # x = d.ddd × 10^exp10
    if 1e-3 <= a < 1e7:
        if exp10 >= 0:
            int_part = ds[: exp10 + 1].ljust(exp10 + 1, "0")
            frac = ds[exp10 + 1 :] or "0"
        else:
            int_part = "0"
            frac = "0" * (-exp10 - 1) + ds
        return f"{sign}{int_part}.{frac}"
    return f"{sign}{ds[0]}.{ds[1:] or '0'}E{exp10}"


_JSON_ESCAPES: dict[int, str] = {i: f"\\u{i:04X}" for i in range(0x20)}
_JSON_ESCAPES.update({0x08: "\\b", 0x09: "\\t", 0x0A: "\\n", 0x0C: "\\f", 0x0D: "\\r"})
_JSON_ESCAPES[ord('"')] = '\\"'
_JSON_ESCAPES[ord("\\")] = "\\\\"


def jackson_string(s: str) -> str:
    """A JSON string literal as Jackson's generator writes it."""
    return '"' + s.translate(_JSON_ESCAPES) + '"'


# ---------------------------------------------------------------------------------------------------------
# Rendering

_INT_TYPES = frozenset({"int8", "int16", "int32", "int64", "uint16", "uint32"})


def _render_scalar(kind: str, v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif kind in _INT_TYPES:
        out.append(str(int(v)))
    elif kind == "string" or kind == "uuid":
        out.append(jackson_string(v))
    elif kind == "bool":
        out.append("true" if v else "false")
    elif kind == "float64":
        f = float(v)
        text = java_double(f)
        out.append(f'"{text}"' if math.isnan(f) or math.isinf(f) else text)
    elif kind == "bytes":
        if isinstance(v, RedactedBytes):
            out.append(jackson_string(v.marker_text()))
        else:
            out.append('"' + base64.b64encode(bytes(v)).decode("ascii") + '"')
    else:
        raise KafkaJsonError(f"unsupported type {kind}")


def _render_value(fld: Field, version: int, v: Any, out: list[str]) -> None:
    if v is None:
        out.append("null")
    elif fld.is_array:
        out.append("[")
        for i, item in enumerate(v):
            if i:
                out.append(",")
            if fld.struct is not None:
                _render_struct(fld.struct, version, item, out)
            else:
                _render_scalar(fld.element_type, item, out)
        out.append("]")
    elif fld.struct is not None:
        _render_struct(fld.struct, version, v, out)
    else:
        _render_scalar(fld.type, v, out)


_MISSING = object()
# per (struct, version): (json name, '"name":' text, field, tagged?, default)
_RENDER_PLANS: dict[tuple[int, int], list[tuple[str, str, Field, bool, Any]]] = {}


def _render_plan(st: Struct, version: int) -> list[tuple[str, str, Field, bool, Any]]:
    key = (id(st), version)
    plan = _RENDER_PLANS.get(key)
    if plan is None:
        plan = [
            (fld.json_name, jackson_string(fld.json_name) + ":", fld, fld.tagged_in(version), fld.default_value(version))
            for fld in st.fields
            if fld.present_in(version)
        ]
        _RENDER_PLANS[key] = plan
    return plan


def _render_struct(st: Struct, version: int, data: dict[str, Any], out: list[str]) -> None:
    out.append("{")
    first = True
    for name, label, fld, tagged, default in _render_plan(st, version):
        v = data.get(name, _MISSING)
        if v is _MISSING:
            v = fld.default_value(version)
        if tagged and v == default:
            continue
        if first:
            first = False
        else:
            out.append(",")
        out.append(label)
        _render_value(fld, version, v, out)
    out.append("}")


def _metadata_schema(type_name: str | int) -> MessageSchema:
    schema = METADATA_SCHEMAS.get(type_name) if isinstance(type_name, int) else METADATA_BY_TYPE_NAME.get(type_name)
    if schema is None:
        raise KafkaJsonError(f"unknown metadata record type {type_name!r}")
    return schema


def data_json(schema: MessageSchema, version: int, data: dict[str, Any]) -> str:
    """The `data` object of one record as Kafka's JsonConverter writes it at `version`."""
    out: list[str] = []
    _render_struct(schema.struct, version, data, out)
    return "".join(out)


def payload_json(type_name: str | int, version: int, data: dict[str, Any]) -> str:
    """The dump-log payload: `{"type":"<TYPE_NAME>","version":V,"data":{…}}` (type by name or api key)."""
    schema = _metadata_schema(type_name)
    return f'{{"type":"{schema.type_name}","version":{version},"data":{data_json(schema, version, data)}}}'


def _control_schema(type_name: str) -> MessageSchema:
    schema = CONTROL_BY_TYPE_NAME.get(type_name)
    if schema is None:
        raise KafkaJsonError(f"control type {type_name!r} has no JSON form")
    return schema


def _control_render_version(data: dict[str, Any]) -> int:
    # dump-log writes each control body at its own Version field; the generated converters only test
    # `version >= n`, so a negative Version prints like 0.
    return max(int(data.get("version", 0)), 0)


def control_json(type_name: str, data: dict[str, Any]) -> str:
    """The JSON dump-log prints for a KRaft control body (LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER,
    KRAFT_VERSION, KRAFT_VOTERS), e.g. `{"version":0,"lastContainedLogTimestamp":1700000000003}`."""
    schema = _control_schema(type_name)
    return data_json(schema, _control_render_version(data), data)


# Kafka 4.3.1 DumpLogSegments: the text before each control body's JSON.
CONTROL_TAIL_LABELS = {
    "LEADER_CHANGE": "LeaderChange: ",
    "SNAPSHOT_HEADER": "SnapshotHeader ",
    "SNAPSHOT_FOOTER": "SnapshotFooter ",
    "KRAFT_VERSION": "KRaftVersion ",
    "KRAFT_VOTERS": "KRaftVoters ",
}


def control_tail(type_name: str, data: dict[str, Any]) -> str:
    """The control-record tail of a Kafka 4.3.1 dump-log record line, without its leading space:
    `endTxnMarker: COMMIT coordinatorEpoch: 5`, `SnapshotHeader {…}`, `LeaderChange: {…}` …"""
    if type_name in ("ABORT", "COMMIT"):
        return f"endTxnMarker: {type_name} coordinatorEpoch: {int(data['coordinatorEpoch'])}"
    label = CONTROL_TAIL_LABELS.get(type_name)
    if label is None:
        raise KafkaJsonError(f"control type {type_name!r} has no JSON form")
    return label + control_json(type_name, data)


# ---------------------------------------------------------------------------------------------------------
# Parsing back


def _parse_scalar(kind: str, v: Any, where: str) -> Any:
    if kind in _INT_TYPES:
        if isinstance(v, bool) or not isinstance(v, int):
            raise KafkaJsonError(f"{where}: expected an integer, got {v!r}")
        return v
    if kind in ("string", "uuid"):
        if not isinstance(v, str):
            raise KafkaJsonError(f"{where}: expected a string, got {v!r}")
        return v
    if kind == "bool":
        if not isinstance(v, bool):
            raise KafkaJsonError(f"{where}: expected a boolean, got {v!r}")
        return v
    if kind == "float64":
        if isinstance(v, str) and v in ("NaN", "Infinity", "-Infinity"):
            return float(v)
        if isinstance(v, bool) or not isinstance(v, int | float):
            raise KafkaJsonError(f"{where}: expected a number, got {v!r}")
        return float(v)
    if kind == "bytes":
        if not isinstance(v, str):
            raise KafkaJsonError(f"{where}: expected base64 text, got {v!r}")
        if MARKER_RE.fullmatch(v):  # a secret we printed redacted (`secrets`)
            return RedactedBytes(v.encode("ascii"))
        try:
            return base64.b64decode(v, validate=True)
        except (binascii.Error, ValueError) as e:
            raise KafkaJsonError(f"{where}: bad base64: {e}") from None
    raise KafkaJsonError(f"{where}: unsupported type {kind}")


def _parse_value(fld: Field, version: int, v: Any, where: str) -> Any:
    if v is None:
        if not fld.nullable_in(version):
            raise KafkaJsonError(f"{where}: null for a non-nullable field")
        return None
    if fld.is_array:
        if not isinstance(v, list):
            raise KafkaJsonError(f"{where}: expected an array, got {v!r}")
        if fld.struct is not None:
            return [_parse_struct(fld.struct, version, item, f"{where}[{i}]") for i, item in enumerate(v)]
        return [_parse_scalar(fld.element_type, item, f"{where}[{i}]") for i, item in enumerate(v)]
    if fld.struct is not None:
        return _parse_struct(fld.struct, version, v, where)
    return _parse_scalar(fld.type, v, where)


def _parse_struct(st: Struct, version: int, obj: Any, where: str) -> dict[str, Any]:
    if not isinstance(obj, dict):
        raise KafkaJsonError(f"{where}: expected an object, got {obj!r}")
    out: dict[str, Any] = {}
    seen = 0
    for fld in st.fields:
        if not fld.present_in(version):
            continue
        name = fld.json_name
        if name in obj:
            seen += 1
            out[name] = _parse_value(fld, version, obj[name], f"{where}.{name}")
        elif fld.tagged_in(version):
            out[name] = fld.default_value(version)
        else:
            raise KafkaJsonError(f"{where}: {st.name} at version {version} needs field {name!r}")
    if seen != len(obj):
        extra = sorted(set(obj) - set(out))
        raise KafkaJsonError(f"{where}: {st.name} at version {version} has no field(s) {', '.join(extra)}")
    return out


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise KafkaJsonError(f"not JSON: {e}") from None


def parse_payload_json(text: str) -> tuple[str, int, dict[str, Any]]:
    """Invert `payload_json`: (type name, version, data) with every field of the version present (tagged ones
    that were not printed at their default), bytes decoded, uuids kept as text."""
    obj = _loads(text)
    if not isinstance(obj, dict) or set(obj) != {"type", "version", "data"}:
        raise KafkaJsonError('expected {"type":…,"version":…,"data":{…}}')
    type_name, version = obj["type"], obj["version"]
    if not isinstance(type_name, str) or isinstance(version, bool) or not isinstance(version, int):
        raise KafkaJsonError(f"bad type or version: {type_name!r} {version!r}")
    schema = _metadata_schema(type_name)
    if version not in schema.valid_versions:
        raise KafkaJsonError(f"unknown version {version} of {type_name}")
    return schema.type_name, version, _parse_struct(schema.struct, version, obj["data"], "data")


def parse_control_json(type_name: str, text: str) -> dict[str, Any]:
    """Invert `control_json` for one control type: the fields of the version named by the JSON's own
    `version` (which is the version the text was printed at), tagged ones filled with their defaults. Bodies
    are encoded at schema version 0, so a LeaderChange printed at version 1 keeps its `voterDirectoryId`
    here but cannot be re-encoded unless that uuid is zero."""
    schema = _control_schema(type_name)
    obj = _loads(text)
    if not isinstance(obj, dict):
        raise KafkaJsonError("expected a JSON object")
    version = obj.get("version", 0)
    if isinstance(version, bool) or not isinstance(version, int):
        raise KafkaJsonError(f"bad version {version!r}")
    return _parse_struct(schema.struct, max(version, 0), obj, type_name)
