"""Metadata record values and KRaft control record bodies: the flexible ("compact") codec of spec §6.2.

Decoding and encoding are driven by the table in `schemas.py`. Decoded bodies are plain dicts with Kafka's
lowerCamel JSON keys in schema declaration order, holding every field present in the version (tagged fields at
their default when absent on the wire):

=========  ===================================================
schema     Python
=========  ===================================================
bool       bool
intN/uintN int
float64    float
string     str (None when nullable and null)
bytes      bytes (None when nullable and null)
uuid       22-character base64url text, no padding (Kafka's ``Uuid.toString``)
[]T        list (None when nullable and null)
struct     dict
=========  ===================================================

**Unknown tagged fields.** Tags the schema does not know are skipped by their size and kept as raw bytes, so
that encoding the decoded form gives back the same bytes:

* at the top level in `DecodedValue.unknown_tags` (tag -> raw field bytes), which is `Record.unknown_tags`;
* inside nested structs (array elements, inline struct fields) under the reserved key `UNKNOWN_TAGS_KEY`
  (``"_unknownTags"``) of that struct's dict, present only when the struct had unknown tags. No Kafka field
  name starts with ``_``; the JSON renderer (`kafkajson.py`) skips keys starting with ``_``.

Errors raise `MessageError` with a `ProblemKind`: `UNKNOWN_API_KEY`, `UNKNOWN_VERSION` (a version above the
highest this table knows) or `BAD_RECORD` (everything else). Messages follow Kafka's wording where it has one.

We are stricter than Kafka in two places, both of which Kafka's own writers never produce: a tagged field whose
value does not use exactly its declared size, and bytes left after a control body, are `BAD_RECORD` (Kafka reads
on misaligned, or ignores the rest). Strings are decoded from UTF-8 with replacement characters for invalid
bytes, as Java's `new String(bytes, UTF_8)` does; such a string does not re-encode to the same bytes (the raw
value stays on the `Record`).
"""

from __future__ import annotations

import struct
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from replay.kafka.model import CONTROL_TYPES, ProblemKind
from replay.kafka.schemas import (
    CONTROL_BODY_VERSION,
    CONTROL_SCHEMAS,
    METADATA_SCHEMAS,
    Field,
    MessageSchema,
    Struct,
    uuid_bytes,
    uuid_text,
)

UNKNOWN_TAGS_KEY = "_unknownTags"
FRAME_VERSION = 1
MAX_STRING_LENGTH = 0x7FFF

__all__ = [
    "FRAME_VERSION",
    "UNKNOWN_TAGS_KEY",
    "DecodedValue",
    "MessageError",
    "decode_control_value",
    "decode_metadata_value",
    "encode_control_value",
    "encode_metadata_value",
    "peek_frame",
    "unknown_tags_by_path",
]


class MessageError(ValueError):
    """A value that does not decode (or data that does not encode). `kind` says which `ProblemKind` it is."""

    def __init__(self, kind: ProblemKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message

    def __str__(self) -> str:
        return self.message


@dataclass(slots=True)
class DecodedValue:
    """A decoded metadata value or control body.

    Metadata: `api_key` and `version` from the frame, `type_name` the MetadataRecordType name.
    Control: `control_type` from the key, `type_name` from `model.CONTROL_TYPES`, `version` the body's own
    int16 Version field (the body is always read at schema version 0, spec §5.2).
    """

    type_name: str
    version: int
    data: dict[str, Any]
    unknown_tags: dict[int, bytes] = field(default_factory=dict)
    api_key: int | None = None
    control_type: int | None = None
    nests: bool = False  # `data` may hold structs, whose unknown tags `unknown_tags_by_path` finds


def _bad(message: str) -> MessageError:
    return MessageError(ProblemKind.BAD_RECORD, message)


# ---------------------------------------------------------------------------------------------------------
# Reading


class _Reader:
    __slots__ = ("buf", "end", "pos")

    def __init__(self, buf: bytes, pos: int = 0, end: int | None = None) -> None:
        self.buf = buf
        self.pos = pos
        self.end = len(buf) if end is None else end

    def take(self, n: int) -> bytes:
        p = self.pos
        q = p + n
        if q > self.end:
            raise _bad(f"truncated: needed {n} byte(s) at byte {p}, only {self.end - p} left")
        self.pos = q
        return self.buf[p:q]

    def need(self, n: int) -> int:
        """Check `n` bytes are there; return the current position and advance past them."""
        p = self.pos
        if p + n > self.end:
            raise _bad(f"truncated: needed {n} byte(s) at byte {p}, only {self.end - p} left")
        self.pos = p + n
        return p

    def uvarint(self) -> int:
        """Kafka's `readUnsignedVarint`: at most 5 bytes, the value taken as unsigned 32 bits."""
        buf = self.buf
        pos = self.pos
        end = self.end
        value = 0
        shift = 0
        for _ in range(5):
            if pos >= end:
                raise _bad(f"truncated: varint runs past the end at byte {pos}")
            b = buf[pos]
            pos += 1
            value |= (b & 0x7F) << shift
            if not b & 0x80:
                self.pos = pos
                return value & 0xFFFFFFFF
            shift += 7
        raise _bad(f"Varint is too long, the most significant bit in the 5th byte is set (at byte {self.pos})")


_FIXED = {
    "bool": struct.Struct(">B"),
    "int8": struct.Struct(">b"),
    "int16": struct.Struct(">h"),
    "int32": struct.Struct(">i"),
    "int64": struct.Struct(">q"),
    "uint16": struct.Struct(">H"),
    "uint32": struct.Struct(">I"),
    "float64": struct.Struct(">d"),
}
_ARRAY_CODES = {"int8": "b", "int16": "h", "int32": "i", "int64": "q", "uint16": "H", "uint32": "I", "float64": "d"}

Reader = Callable[[_Reader], Any]
Writer = Callable[[bytearray, Any], None]


def _fixed_reader(kind: str) -> Reader:
    st = _FIXED[kind]
    size = st.size
    unpack = st.unpack_from
    if kind == "bool":

        def read_bool(r: _Reader) -> Any:
            return r.buf[r.need(1)] != 0

        return read_bool

    def read_fixed(r: _Reader) -> Any:
        return unpack(r.buf, r.need(size))[0]

    return read_fixed


def _string_reader(name: str, nullable: bool) -> Reader:
    def read_string(r: _Reader) -> Any:
        n = r.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise _bad(f"non-nullable field {name} was serialized as null")
        if n > MAX_STRING_LENGTH:
            raise _bad(f"string field {name} had invalid length {n}")
        return r.take(n).decode("utf-8", "replace")

    return read_string


def _bytes_reader(name: str, nullable: bool) -> Reader:
    def read_bytes(r: _Reader) -> Any:
        n = r.uvarint() - 1
        if n < 0:
            if nullable:
                return None
            raise _bad(f"non-nullable field {name} was serialized as null")
        return bytes(r.take(n))

    return read_bytes


def _read_uuid(r: _Reader) -> Any:
    return uuid_text(r.take(16))


def _element_reader(fld: Field, version: int) -> Reader:
    """A reader for one non-null value of the field's element type (the field's own type if not an array)."""
    kind = fld.element_type
    if fld.struct is not None:
        return _struct_reader(fld.struct, version)
    if kind in _FIXED:
        return _fixed_reader(kind)
    if kind == "string":
        return _string_reader(fld.name, False)
    if kind == "bytes":
        return _bytes_reader(fld.name, False)
    if kind == "uuid":
        return _read_uuid
    raise ValueError(f"unsupported type {fld.type}")


def _field_reader(fld: Field, version: int) -> Reader:
    nullable = fld.nullable_in(version)
    if not fld.is_array:
        if fld.type == "string":
            return _string_reader(fld.name, nullable)
        if fld.type == "bytes":
            return _bytes_reader(fld.name, nullable)
        # uuid, fixed-width and inline structs cannot be null in flexible metadata schemas
        return _element_reader(fld, version)
    name = fld.name
    code = _ARRAY_CODES.get(fld.element_type)
    if code is not None and fld.struct is None:
        width = _FIXED[fld.element_type].size

        def read_fixed_array(r: _Reader) -> Any:
            n = _array_length(r, name, nullable)
            if n is None:
                return None
            return list(struct.unpack_from(f">{n}{code}", r.buf, r.need(n * width)))

        return read_fixed_array
    elem = _element_reader(fld, version)

    def read_array(r: _Reader) -> Any:
        n = _array_length(r, name, nullable)
        if n is None:
            return None
        return [elem(r) for _ in range(n)]

    return read_array


def _array_length(r: _Reader, name: str, nullable: bool) -> int | None:
    n = r.uvarint() - 1
    if n < 0:
        if nullable:
            return None
        raise _bad(f"non-nullable field {name} was serialized as null")
    remaining = r.end - r.pos
    if n > remaining:
        raise _bad(f"Tried to allocate a collection of size {n}, but there are only {remaining} bytes remaining.")
    return n


@dataclass(slots=True)
class _Plan:
    """How to read and write one struct at one version."""

    struct: Struct
    version: int
    # (json name, reader or None for a tagged field, default factory)
    items: list[tuple[str, Reader | None, Callable[[], Any]]]
    tagged: dict[int, tuple[str, Reader]]  # tags valid at this version
    all_tags: set[int]  # tags any version of this struct knows (others at this version are errors)
    # for writing: (json name, field, tag or None)
    write_items: list[tuple[str, Field, int | None]]
    present: dict[str, Field]
    absent: dict[str, Field]  # fields of the struct not present at this version
    nests: bool = False  # whether a field at this version holds structs (which may carry unknown tags)


_PLANS: dict[tuple[int, int], _Plan] = {}
_WRITERS: dict[tuple[int, int], Writer] = {}


def _default_factory(fld: Field, version: int) -> Callable[[], Any]:
    value = fld.default_value(version)
    if isinstance(value, list | dict):
        return lambda: fld.default_value(version)
    return lambda: value


def _plan(st: Struct, version: int) -> _Plan:
    key = (id(st), version)
    plan = _PLANS.get(key)
    if plan is not None:
        return plan
    items: list[tuple[str, Reader | None, Callable[[], Any]]] = []
    tagged: dict[int, tuple[str, Reader]] = {}
    write_items: list[tuple[str, Field, int | None]] = []
    present: dict[str, Field] = {}
    absent: dict[str, Field] = {}
    all_tags: set[int] = set()
    # register first: recursive struct readers look the plan up lazily
    plan = _Plan(st, version, items, tagged, all_tags, write_items, present, absent)
    _PLANS[key] = plan
    for fld in st.fields:
        if fld.tag is not None and not _intersection_empty(fld):
            all_tags.add(fld.tag)
        if not fld.present_in(version):
            absent[fld.json_name] = fld
            continue
        present[fld.json_name] = fld
        reader = _field_reader(fld, version)
        if fld.tagged_in(version):
            assert fld.tag is not None
            tagged[fld.tag] = (fld.json_name, reader)
            items.append((fld.json_name, None, _default_factory(fld, version)))
            write_items.append((fld.json_name, fld, fld.tag))
        else:
            items.append((fld.json_name, reader, _default_factory(fld, version)))
            write_items.append((fld.json_name, fld, None))
    plan.nests = any(fld.struct is not None for fld in present.values())
    return plan


def _intersection_empty(fld: Field) -> bool:
    v, t = fld.versions, fld.tagged_versions
    lo = max(v.lo, t.lo)
    his = [h for h in (v.hi, t.hi) if h is not None]
    return bool(his) and min(his) < lo


def _read_body(r: _Reader, plan: _Plan) -> tuple[dict[str, Any], dict[int, bytes]]:
    out: dict[str, Any] = {}
    for name, reader, default in plan.items:
        out[name] = reader(r) if reader is not None else default()
    unknown: dict[int, bytes] = {}
    count = r.uvarint()
    for _ in range(count):
        tag = r.uvarint()
        size = r.uvarint()
        start = r.need(size)
        known = plan.tagged.get(tag)
        if known is not None:
            name, reader = known
            sub = _Reader(r.buf, start, start + size)
            out[name] = reader(sub)
            if sub.pos != sub.end:
                raise _bad(
                    f"tagged field {name} (tag {tag}) has size {size} but its value used {sub.pos - start} byte(s)"
                )
        elif tag in plan.all_tags:
            raise _bad(f"Tag {tag} is not valid for version {plan.version}")
        else:
            unknown[tag] = bytes(r.buf[start : start + size])
    return out, unknown


def unknown_tags_by_path(data: dict[str, Any] | None, top: dict[int, bytes] | None = None) -> dict[str, dict[int, bytes]]:
    """Every unknown tagged field of a decoded value, by where it is: `""` for the top level (`top`, the
    `DecodedValue.unknown_tags`), else the path of the nested struct, e.g. `voters[0].endpoints[1]`."""
    found: dict[str, dict[int, bytes]] = {}
    if top:
        found[""] = dict(top)
    if data is not None:
        _nested_unknown_tags(data, "", found)
    return found


def _nested_unknown_tags(value: Any, path: str, found: dict[str, dict[int, bytes]]) -> None:
    if isinstance(value, list):
        for i, item in enumerate(value):
            _nested_unknown_tags(item, f"{path}[{i}]", found)
        return
    if not isinstance(value, dict):
        return
    own = value.get(UNKNOWN_TAGS_KEY)
    if own and path:  # a struct's own tags before those of the structs inside it
        found[path] = dict(own)
    for key, item in value.items():
        if key != UNKNOWN_TAGS_KEY and isinstance(item, dict | list):
            _nested_unknown_tags(item, f"{path}.{key}" if path else key, found)


def _struct_reader(st: Struct, version: int) -> Reader:
    def read_struct(r: _Reader) -> Any:
        out, unknown = _read_body(r, _plan(st, version))
        if unknown:
            out[UNKNOWN_TAGS_KEY] = unknown
        return out

    return read_struct


def _frame_number(r: _Reader, entity: str) -> int:
    try:
        value = r.uvarint()
    except MessageError as e:
        raise _bad(f"Error while reading {entity}: {e.message}") from None
    return value


def peek_frame(value: bytes) -> tuple[int, int, int]:
    """The metadata frame: (frame version, api key, record version). Raises `MessageError(BAD_RECORD)` when the
    three varints cannot be read. Values are returned as read, even when out of range."""
    r = _Reader(value)
    return _frame_number(r, "frame version"), _frame_number(r, "type"), _frame_number(r, "version")


def decode_metadata_value(value: bytes) -> DecodedValue:
    """Decode the value of a metadata (non-control) record: frame, then the body at its version (spec §6)."""
    buf = bytes(value)
    r = _Reader(buf)
    frame = _frame_number(r, "frame version")
    if frame > 0x7FFF:
        raise _bad("Value for frame version was too large.")
    if frame != FRAME_VERSION:
        raise _bad(
            f"Could not deserialize metadata record due to unknown frame version {frame}"
            f"(only frame version {FRAME_VERSION} is supported)"
        )
    api_key = _frame_number(r, "type")
    if api_key > 0x7FFF:
        raise MessageError(ProblemKind.UNKNOWN_API_KEY, "Value for type was too large.")
    version = _frame_number(r, "version")
    if version > 0x7FFF:
        raise MessageError(ProblemKind.UNKNOWN_VERSION, "Value for version was too large.")
    schema = METADATA_SCHEMAS.get(api_key)
    if schema is None:
        raise MessageError(ProblemKind.UNKNOWN_API_KEY, f"Unknown metadata id {api_key}")
    if version not in schema.valid_versions:
        raise MessageError(ProblemKind.UNKNOWN_VERSION, f"Can't read version {version} of {schema.name}")
    plan = _plan(schema.struct, version)
    try:
        data, unknown = _read_body(r, plan)
    except MessageError as e:
        raise _bad(f"Failed to deserialize record with type {api_key} and version {version}: {e.message}") from None
    if r.pos != r.end:
        raise _bad(f"Found {r.end - r.pos} byte(s) of garbage after {api_key}:{version}/{frame}")
    return DecodedValue(schema.type_name, version, data, unknown, api_key=api_key, nests=plan.nests)


def decode_control_value(control_type: int, value: bytes) -> DecodedValue:
    """Decode a control record's value by the key's control type (spec §5).

    ABORT/COMMIT: the fixed 6-byte end-transaction marker, data {"version", "coordinatorEpoch"}.
    Types 2-6: the flexible body read at version 0; `version` is its Version field.
    """
    buf = bytes(value)
    type_name = CONTROL_TYPES.get(control_type)
    if control_type in (0, 1):
        assert type_name is not None
        if len(buf) < 6:
            raise _bad(
                f"Invalid value size found for end transaction marker. Must have at least 6 bytes, but found {len(buf)}"
            )
        version, epoch = struct.unpack_from(">hi", buf)
        if version < 0:
            raise _bad(f"Invalid version found for end transaction marker: {version}. May indicate data corruption")
        if len(buf) > 6:
            raise _bad(f"Found {len(buf) - 6} byte(s) of garbage after the end transaction marker")
        return DecodedValue(type_name, version, {"version": version, "coordinatorEpoch": epoch}, control_type=control_type)
    schema = CONTROL_SCHEMAS.get(control_type)
    if schema is None or type_name is None:
        raise MessageError(ProblemKind.UNKNOWN_CONTROL_TYPE, f"Unknown control record type {control_type}")
    r = _Reader(buf)
    plan = _plan(schema.struct, CONTROL_BODY_VERSION)
    try:
        data, unknown = _read_body(r, plan)
    except MessageError as e:
        raise _bad(f"Failed to deserialize {schema.name}: {e.message}") from None
    if r.pos != r.end:
        raise _bad(f"Found {r.end - r.pos} byte(s) of garbage after {schema.name}")
    return DecodedValue(type_name, int(data["version"]), data, unknown, control_type=control_type, nests=plan.nests)


# ---------------------------------------------------------------------------------------------------------
# Writing


def _put_uvarint(out: bytearray, value: int) -> None:
    if value < 0 or value > 0xFFFFFFFF:
        raise _bad(f"varint value {value} out of range")
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _fixed_writer(kind: str, name: str) -> Writer:
    st = _FIXED[kind]
    pack = st.pack
    if kind == "bool":

        def write_bool(out: bytearray, v: Any) -> None:
            out.append(1 if v else 0)

        return write_bool
    if kind == "float64":

        def write_float(out: bytearray, v: Any) -> None:
            out += pack(float(v))

        return write_float

    def write_fixed(out: bytearray, v: Any) -> None:
        if isinstance(v, bool) or not isinstance(v, int):
            raise _bad(f"field {name}: expected an int for {kind}, got {v!r}")
        try:
            out += pack(v)
        except struct.error:
            raise _bad(f"field {name}: {v} out of range for {kind}") from None

    return write_fixed


def _null_or_error(out: bytearray, name: str, nullable: bool) -> None:
    if not nullable:
        raise _bad(f"non-nullable field {name} was serialized as null")
    out.append(0)


def _string_writer(name: str, nullable: bool) -> Writer:
    def write_string(out: bytearray, v: Any) -> None:
        if v is None:
            _null_or_error(out, name, nullable)
            return
        if not isinstance(v, str):
            raise _bad(f"field {name}: expected a str, got {v!r}")
        raw = v.encode("utf-8")
        if len(raw) > MAX_STRING_LENGTH:
            raise _bad(f"'{name}' field is too long to be serialized")
        _put_uvarint(out, len(raw) + 1)
        out += raw

    return write_string


def _bytes_writer(name: str, nullable: bool) -> Writer:
    def write_bytes(out: bytearray, v: Any) -> None:
        if v is None:
            _null_or_error(out, name, nullable)
            return
        if not isinstance(v, bytes | bytearray | memoryview):
            raise _bad(f"field {name}: expected bytes, got {v!r}")
        _put_uvarint(out, len(v) + 1)
        out += v

    return write_bytes


def _uuid_writer(name: str) -> Writer:
    def write_uuid(out: bytearray, v: Any) -> None:
        if isinstance(v, bytes | bytearray) and len(v) == 16:
            out += v
            return
        if hasattr(v, "bytes") and not isinstance(v, str):  # uuid.UUID
            out += v.bytes
            return
        try:
            out += uuid_bytes(v)
        except (ValueError, TypeError) as e:
            raise _bad(f"field {name}: bad uuid {v!r}: {e}") from None

    return write_uuid


def _element_writer(fld: Field, version: int) -> Writer:
    kind = fld.element_type
    if fld.struct is not None:
        st = fld.struct

        def write_struct(out: bytearray, v: Any) -> None:
            if not isinstance(v, dict):
                raise _bad(f"field {fld.name}: expected a dict, got {v!r}")
            _write_body(out, v, _plan(st, version), v.get(UNKNOWN_TAGS_KEY))

        return write_struct
    if kind in _FIXED:
        return _fixed_writer(kind, fld.name)
    if kind == "string":
        return _string_writer(fld.name, False)
    if kind == "bytes":
        return _bytes_writer(fld.name, False)
    if kind == "uuid":
        return _uuid_writer(fld.name)
    raise ValueError(f"unsupported type {fld.type}")


def _field_writer(fld: Field, version: int) -> Writer:
    key = (id(fld), version)
    cached = _WRITERS.get(key)
    if cached is not None:
        return cached
    nullable = fld.nullable_in(version)
    writer: Writer
    if not fld.is_array:
        if fld.type == "string":
            writer = _string_writer(fld.name, nullable)
        elif fld.type == "bytes":
            writer = _bytes_writer(fld.name, nullable)
        else:
            writer = _element_writer(fld, version)
    else:
        elem = _element_writer(fld, version)
        name = fld.name

        def write_array(out: bytearray, v: Any) -> None:
            if v is None:
                _null_or_error(out, name, nullable)
                return
            if isinstance(v, str | bytes | dict):
                raise _bad(f"field {name}: expected a list, got {v!r}")
            _put_uvarint(out, len(v) + 1)
            for item in v:
                if item is None:
                    raise _bad(f"field {name}: null array element")
                elem(out, item)

        writer = write_array
    _WRITERS[key] = writer
    return writer


_MISSING = object()


def _write_body(out: bytearray, data: dict[str, Any], plan: _Plan, unknown_tags: dict[int, bytes] | None) -> None:
    for k in data:
        if k in plan.present or k == UNKNOWN_TAGS_KEY:
            continue
        fld = plan.absent.get(k)
        if fld is None:
            raise _bad(f"{plan.struct.name} has no field {k!r}")
        if data[k] != fld.default_value(plan.version):
            raise _bad(f"Attempted to write a non-default {fld.name} at version {plan.version}")
    tagged: list[tuple[int, bytes]] = []
    for name, fld, tag in plan.write_items:
        v = data.get(name, _MISSING)
        if tag is None:
            if v is _MISSING:
                v = fld.default_value(plan.version)
            _field_writer(fld, plan.version)(out, v)
        elif v is not _MISSING and v != fld.default_value(plan.version):
            buf = bytearray()
            _field_writer(fld, plan.version)(buf, v)
            tagged.append((tag, bytes(buf)))
    if unknown_tags:
        known = {t for t, _ in tagged}
        for tag, raw in unknown_tags.items():
            if tag in known:
                raise _bad(f"unknown tag {tag} of {plan.struct.name} collides with a known tagged field")
            tagged.append((int(tag), bytes(raw)))
        tagged.sort(key=lambda item: item[0])
    elif len(tagged) > 1:
        tagged.sort(key=lambda item: item[0])
    _put_uvarint(out, len(tagged))
    for tag, raw in tagged:
        _put_uvarint(out, tag)
        _put_uvarint(out, len(raw))
        out += raw


def encode_metadata_value(
    api_key: int, version: int, data: dict[str, Any], unknown_tags: dict[int, bytes] | None = None
) -> bytes:
    """Frame (1, api key, version) + body. Missing keys take their default; tagged fields are written only
    when they differ from their default, in tag order, merged with `unknown_tags`."""
    schema = METADATA_SCHEMAS.get(api_key)
    if schema is None:
        raise MessageError(ProblemKind.UNKNOWN_API_KEY, f"Unknown metadata id {api_key}")
    if version not in schema.valid_versions:
        raise MessageError(ProblemKind.UNKNOWN_VERSION, f"Can't write version {version} of {schema.name}")
    out = bytearray()
    _put_uvarint(out, FRAME_VERSION)
    _put_uvarint(out, api_key)
    _put_uvarint(out, version)
    _write_body(out, data, _plan(schema.struct, version), unknown_tags)
    return bytes(out)


def encode_control_value(control_type: int, data: dict[str, Any], unknown_tags: dict[int, bytes] | None = None) -> bytes:
    """The value of a control record: the end-transaction marker for ABORT/COMMIT, else the body at version 0."""
    if control_type in (0, 1):
        if unknown_tags:
            raise _bad("end transaction markers have no tagged fields")
        try:
            return struct.pack(">hi", data.get("version", 0), data.get("coordinatorEpoch", 0))
        except struct.error as e:
            raise _bad(f"bad end transaction marker {data!r}: {e}") from None
    schema: MessageSchema | None = CONTROL_SCHEMAS.get(control_type)
    if schema is None:
        raise MessageError(ProblemKind.UNKNOWN_CONTROL_TYPE, f"Unknown control record type {control_type}")
    out = bytearray()
    _write_body(out, data, _plan(schema.struct, CONTROL_BODY_VERSION), unknown_tags)
    return bytes(out)
