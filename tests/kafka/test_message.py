"""The flexible codec of spec §6.2: known bytes of spec §12.2, errors, tagged fields, round trips."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.kafka import message
from replay.kafka.message import (
    UNKNOWN_TAGS_KEY,
    MessageError,
    decode_control_value,
    decode_metadata_value,
    encode_control_value,
    encode_metadata_value,
    peek_frame,
)
from replay.kafka.model import ProblemKind
from replay.kafka.schemas import CONTROL_SCHEMAS, METADATA_SCHEMAS, Field, Struct, f, uuid_text


def h(text: str) -> bytes:
    return bytes.fromhex(text.replace(" ", ""))


def s(text: str) -> bytes:
    """A compact string: length+1 varint (short strings only) and the bytes."""
    raw = text.encode()
    return bytes([len(raw) + 1]) + raw


ACL_ID = "ASNFZ4mrze8P7cuph2VDIQ"
ACL_BYTES = (
    h("01 12 00 0123456789abcdef0fedcba987654321 02")
    + s("foo")
    + h("03")
    + s("User:alice")
    + s("*")
    + h("03 03 00")
)
ACL_DATA = {
    "id": ACL_ID,
    "resourceType": 2,
    "resourceName": "foo",
    "patternType": 3,
    "principal": "User:alice",
    "host": "*",
    "operation": 3,
    "permissionType": 3,
}
DIR_ID = bytes(range(16))
VOTERS_BYTES = (
    h("0000 02 00000001") + DIR_ID + h("02") + s("CONTROLLER") + s("localhost") + h("2385 00 0000 0000 00 00 00")
)

# ---------------------------------------------------------------------------------------------------------
# Known bytes (spec §12.2)


def test_access_control_entry_record() -> None:
    d = decode_metadata_value(ACL_BYTES)
    assert (d.api_key, d.version, d.type_name) == (18, 0, "ACCESS_CONTROL_ENTRY_RECORD")
    assert d.data == ACL_DATA
    assert list(d.data) == list(ACL_DATA)  # schema order
    assert d.unknown_tags == {}
    assert len(ACL_BYTES) == 41
    assert encode_metadata_value(18, 0, d.data) == ACL_BYTES
    assert peek_frame(ACL_BYTES) == (1, 18, 0)


def test_remove_access_control_entry_record() -> None:
    value = h("01 13 00 0123456789abcdef0fedcba987654321 00")
    d = decode_metadata_value(value)
    assert d.type_name == "REMOVE_ACCESS_CONTROL_ENTRY_RECORD" and d.data == {"id": ACL_ID}
    assert len(value) == 20
    assert encode_metadata_value(19, 0, {"id": ACL_ID}) == value


def test_feature_level_and_noop() -> None:
    value = h("01 0c 00") + s("metadata.version") + h("0015 00")
    d = decode_metadata_value(value)
    assert d.type_name == "FEATURE_LEVEL_RECORD"
    assert d.data == {"name": "metadata.version", "featureLevel": 21}
    assert encode_metadata_value(12, 0, d.data) == value
    noop = decode_metadata_value(h("01 14 00 00"))
    assert (noop.type_name, noop.data) == ("NO_OP_RECORD", {})
    assert encode_metadata_value(20, 0, {}) == h("01 14 00 00")


def test_transaction_records() -> None:
    abort = h("01 19 00 01 00 14") + s("Controller failover")
    d = decode_metadata_value(abort)
    assert d.type_name == "ABORT_TRANSACTION_RECORD" and d.data == {"reason": "Controller failover"}
    assert encode_metadata_value(25, 0, d.data) == abort
    # default null: absent on the wire, None in data, nothing written back
    assert decode_metadata_value(h("01 19 00 00")).data == {"reason": None}
    assert encode_metadata_value(25, 0, {"reason": None}) == h("01 19 00 00")
    begin = h("01 17 00 01 00 04") + s("txn")
    assert decode_metadata_value(begin).data == {"name": "txn"}
    assert encode_metadata_value(23, 0, {"name": "txn"}) == begin
    assert decode_metadata_value(h("01 18 00 00")).type_name == "END_TRANSACTION_RECORD"


def test_snapshot_header_and_footer() -> None:
    value = h("0000 0000018bcfe56803 00")
    d = decode_control_value(3, value)
    assert (d.type_name, d.version, d.control_type) == ("SNAPSHOT_HEADER", 0, 3)
    assert d.data == {"version": 0, "lastContainedLogTimestamp": 1700000000003}
    assert encode_control_value(3, d.data) == value
    footer = decode_control_value(4, h("0000 00"))
    assert (footer.type_name, footer.data) == ("SNAPSHOT_FOOTER", {"version": 0})
    assert encode_control_value(4, {"version": 0}) == h("0000 00")


def test_kraft_version() -> None:
    d = decode_control_value(5, h("0000 0001 00"))
    assert (d.type_name, d.data) == ("KRAFT_VERSION", {"version": 0, "kRaftVersion": 1})
    assert encode_control_value(5, d.data) == h("0000 0001 00")


def test_voters_record() -> None:
    d = decode_control_value(6, VOTERS_BYTES)
    assert d.type_name == "KRAFT_VOTERS"
    assert d.data == {
        "version": 0,
        "voters": [
            {
                "voterId": 1,
                "voterDirectoryId": uuid_text(DIR_ID),
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 0},
            }
        ],
    }
    assert encode_control_value(6, d.data) == VOTERS_BYTES


def test_leader_change() -> None:
    value = h("0000 00000001 02 00000001 00 02 00000001 00 00")
    assert len(value) == 19
    d = decode_control_value(2, value)
    assert (d.type_name, d.version) == ("LEADER_CHANGE", 0)
    # read at version 0: no voterDirectoryId (v1+) even though the schema knows it
    assert d.data == {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    assert encode_control_value(2, d.data) == value
    # the body's Version field is data, not the decoding version
    v1 = decode_control_value(2, h("0001 00000002 01 01 00"))
    assert v1.version == 1 and v1.data["voters"] == [] and v1.data["grantingVoters"] == []


def test_end_transaction_markers() -> None:
    d = decode_control_value(1, h("0000 00000005"))
    assert (d.type_name, d.version, d.data) == ("COMMIT", 0, {"version": 0, "coordinatorEpoch": 5})
    assert encode_control_value(1, d.data) == h("0000 00000005")
    assert decode_control_value(0, h("0000 ffffffff")).data == {"version": 0, "coordinatorEpoch": -1}
    with pytest.raises(MessageError) as e:
        decode_control_value(0, h("0000 0000"))
    assert e.value.kind is ProblemKind.BAD_RECORD
    with pytest.raises(MessageError) as e:
        decode_control_value(0, h("ffff 00000000"))
    assert e.value.kind is ProblemKind.BAD_RECORD


# ---------------------------------------------------------------------------------------------------------
# Errors


def _kind(value: bytes) -> ProblemKind:
    with pytest.raises(MessageError) as e:
        decode_metadata_value(value)
    return e.value.kind


def test_unknown_api_key() -> None:
    assert _kind(h("01 ff 7f 00")) is ProblemKind.UNKNOWN_API_KEY
    assert peek_frame(h("01 ff 7f 00")) == (1, 16383, 0)
    for key in (6, 13, 16, 30):
        assert _kind(h(f"01 {key:02x} 00 00")) is ProblemKind.UNKNOWN_API_KEY
    assert _kind(h("01 ff ff 03 00 00")) is ProblemKind.UNKNOWN_API_KEY  # 65535 > 32767


def test_unknown_version() -> None:
    with pytest.raises(MessageError) as e:
        decode_metadata_value(h("01 08 ff ff ff 7f"))
    assert e.value.kind is ProblemKind.UNKNOWN_VERSION
    assert e.value.message == "Value for version was too large."
    assert peek_frame(h("01 08 ff ff ff 7f")) == (1, 8, 0x0FFFFFFF)
    with pytest.raises(MessageError) as e:
        decode_metadata_value(h("01 12 01") + ACL_BYTES[3:])
    assert e.value.kind is ProblemKind.UNKNOWN_VERSION
    assert e.value.message == "Can't read version 1 of AccessControlEntryRecord"
    assert _kind(h("01 00 05 00")) is ProblemKind.UNKNOWN_VERSION  # RegisterBrokerRecord knows 0-4


def test_garbage_after_body() -> None:
    with pytest.raises(MessageError) as e:
        decode_metadata_value(ACL_BYTES + b"\x00\x00")
    assert e.value.kind is ProblemKind.BAD_RECORD
    assert e.value.message == "Found 2 byte(s) of garbage after 18:0/1"
    with pytest.raises(MessageError) as e:
        decode_control_value(3, h("0000 0000018bcfe56803 00 00"))
    assert e.value.kind is ProblemKind.BAD_RECORD


def test_truncated_values() -> None:
    for cut in range(len(ACL_BYTES)):
        assert _kind(ACL_BYTES[:cut]) is ProblemKind.BAD_RECORD, cut
    for cut in range(len(VOTERS_BYTES)):
        with pytest.raises(MessageError) as e:
            decode_control_value(6, VOTERS_BYTES[:cut])
        assert e.value.kind is ProblemKind.BAD_RECORD
    with pytest.raises(MessageError):
        peek_frame(h("01 80"))


def test_bad_frames_and_fields() -> None:
    assert _kind(h("00 14 00 00")) is ProblemKind.BAD_RECORD  # frame 0
    assert _kind(h("02 14 00 00")) is ProblemKind.BAD_RECORD
    assert _kind(h("01 14 00 80 80 80 80 80 00")) is ProblemKind.BAD_RECORD  # varint too long
    # non-nullable string serialized as null
    bad = h("01 12 00") + bytes(16) + h("02 00")
    with pytest.raises(MessageError) as e:
        decode_metadata_value(bad)
    assert e.value.kind is ProblemKind.BAD_RECORD and "non-nullable field ResourceName" in e.value.message
    # string longer than 0x7fff
    assert _kind(h("01 02 00 82 80 02")) is ProblemKind.BAD_RECORD
    # array count larger than the bytes left
    assert _kind(h("01 03 00 00000000") + bytes(16) + h("7f")) is ProblemKind.BAD_RECORD
    # tag 0 of RegisterBrokerRecord is only valid from version 3
    rbr_v2 = encode_metadata_value(0, 2, {})
    assert _kind(rbr_v2[:-1] + h("01 00 01 01")) is ProblemKind.BAD_RECORD
    # a tagged field whose size does not match its value
    assert _kind(h("01 05 00 ffffffff") + bytes(16) + h("01 01 05 00000001 00")) is ProblemKind.BAD_RECORD
    assert _kind(b"") is ProblemKind.BAD_RECORD
    with pytest.raises(MessageError) as e:
        decode_control_value(9, h("0000 00"))
    assert e.value.kind is ProblemKind.UNKNOWN_CONTROL_TYPE


def test_encode_errors() -> None:
    with pytest.raises(MessageError) as e:
        encode_metadata_value(16383, 0, {})
    assert e.value.kind is ProblemKind.UNKNOWN_API_KEY
    with pytest.raises(MessageError) as e:
        encode_metadata_value(18, 1, ACL_DATA)
    assert e.value.kind is ProblemKind.UNKNOWN_VERSION
    with pytest.raises(MessageError):
        encode_metadata_value(18, 0, {**ACL_DATA, "nope": 1})
    with pytest.raises(MessageError):
        encode_metadata_value(18, 0, {**ACL_DATA, "resourceType": 300})
    with pytest.raises(MessageError):
        encode_metadata_value(18, 0, {**ACL_DATA, "principal": None})
    with pytest.raises(MessageError):
        encode_metadata_value(18, 0, {**ACL_DATA, "id": "not-a-uuid"})
    with pytest.raises(MessageError):  # a field of version 1+ set at version 0
        encode_metadata_value(0, 0, {"inControlledShutdown": True})
    # a field absent in the version may be given at its default
    assert encode_metadata_value(0, 0, {"inControlledShutdown": False}) == encode_metadata_value(0, 0, {})


# ---------------------------------------------------------------------------------------------------------
# Tagged fields


def test_tagged_fields_written_only_when_not_default() -> None:
    base = {"partitionId": 0, "topicId": ACL_ID}
    plain = encode_metadata_value(5, 2, base)
    assert plain.endswith(h("00"))  # no tags
    assert decode_metadata_value(plain).data == {
        "partitionId": 0,
        "topicId": ACL_ID,
        "isr": None,
        "leader": -2,
        "replicas": None,
        "removingReplicas": None,
        "addingReplicas": None,
        "leaderRecoveryState": -1,
        "directories": None,
        "eligibleLeaderReplicas": None,
        "lastKnownElr": None,
    }
    assert encode_metadata_value(5, 2, {**base, "leader": -2}) == plain
    # tags ascending on the wire even though Directories (8) is declared before ELR (6)
    value = encode_metadata_value(
        5, 2, {**base, "leader": 3, "directories": [ACL_ID], "eligibleLeaderReplicas": [1, 2], "isr": []}
    )
    tail = value[3 + 4 + 16 :]
    # 4 tags: isr (0), leader (1), elr (6), directories (8)
    assert tail == (
        h("04") + h("00 01 01") + h("01 04 00000003") + h("06 09 03 00000001 00000002") + h("08 11 02") + h("0123456789abcdef0fedcba987654321")
    )
    assert decode_metadata_value(value).data["directories"] == [ACL_ID]
    # int8 tagged field: 0 is its default
    brc = encode_metadata_value(17, 1, {"brokerId": 1, "brokerEpoch": 2, "fenced": 0, "inControlledShutdown": 1})
    assert brc.endswith(h("01 01 01 01"))


def test_null_but_default_not_null_is_written() -> None:
    st_ = Struct("T", (f("Name", "string", tag=0, tagged="0+", nullable="0+", default="abc"),))
    plan = message._plan(st_, 0)
    out = bytearray()
    message._write_body(out, {"name": None}, plan, None)
    assert bytes(out) == h("01 00 01 00")
    out = bytearray()
    message._write_body(out, {"name": "abc"}, plan, None)
    assert bytes(out) == h("00")
    data, unknown = message._read_body(message._Reader(h("01 00 01 00")), plan)
    assert data == {"name": None} and unknown == {}
    data, _ = message._read_body(message._Reader(h("00")), plan)
    assert data == {"name": "abc"}


def test_unknown_tags_kept_and_reemitted() -> None:
    value = ACL_BYTES[:-1] + h("02 05 02 abcd 1f 00")
    d = decode_metadata_value(value)
    assert d.data == ACL_DATA
    assert d.unknown_tags == {5: h("abcd"), 31: b""}
    assert encode_metadata_value(18, 0, d.data, d.unknown_tags) == value
    # merged with known tags in tag order
    begin = encode_metadata_value(23, 0, {"name": "x"}, {7: b"\x01", 3: b""})
    assert begin == h("01 17 00 03 00 02") + s("x") + h("03 00 07 01 01")
    assert decode_metadata_value(begin).unknown_tags == {3: b"", 7: b"\x01"}
    with pytest.raises(MessageError):  # collides with the known tag 0
        encode_metadata_value(23, 0, {"name": "x"}, {0: b"\x01"})


def test_nested_unknown_tags_kept() -> None:
    # a voter and its endpoint carry unknown tags
    value = (
        h("0000 02 00000001")
        + DIR_ID
        + h("02")
        + s("CONTROLLER")
        + s("localhost")
        + h("2385 01 09 01 ee")  # endpoint: unknown tag 9
        + h("0000 0001 00")
        + h("01 0a 00")  # voter: unknown tag 10, empty
        + h("00")
    )
    d = decode_control_value(6, value)
    voter = d.data["voters"][0]
    assert voter[UNKNOWN_TAGS_KEY] == {10: b""}
    assert voter["endpoints"][0][UNKNOWN_TAGS_KEY] == {9: h("ee")}
    assert d.unknown_tags == {}
    assert encode_control_value(6, d.data) == value
    # every unknown tag by where it is, each struct before the structs inside it
    assert message.unknown_tags_by_path(d.data, {4: b"\x01"}) == {
        "": {4: b"\x01"}, "voters[0]": {10: b""}, "voters[0].endpoints[0]": {9: h("ee")}}
    assert message.unknown_tags_by_path(decode_metadata_value(h("011400 00")).data, {}) == {}


# ---------------------------------------------------------------------------------------------------------
# Round trips of generated values for every schema and version

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}
_TEXT = st.text(st.characters(codec="utf-8"), max_size=12)


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        lo, hi = _INTS[kind]
        return st.integers(lo, hi)
    if kind == "bool":
        return st.booleans()
    if kind == "float64":
        return st.floats(allow_nan=False)
    if kind == "string":
        return _TEXT
    if kind == "bytes":
        return st.binary(max_size=12)
    if kind == "uuid":
        return st.binary(min_size=16, max_size=16).map(uuid_text)
    raise AssertionError(kind)


def _unknown_tags() -> st.SearchStrategy[dict[int, bytes]]:
    return st.dictionaries(st.integers(100, 300), st.binary(max_size=4), max_size=2)


def _value(fld: Field, version: int) -> st.SearchStrategy[Any]:
    if fld.struct is not None:
        elem: st.SearchStrategy[Any] = _struct(fld.struct, version)
    else:
        elem = _scalar(fld.element_type)
    value = st.lists(elem, max_size=3) if fld.is_array else elem
    if fld.nullable_in(version):
        value = st.none() | value
    return value


def _struct(struct_: Struct, version: int) -> st.SearchStrategy[dict[str, Any]]:
    fields = {fl.json_name: _value(fl, version) for fl in struct_.fields if fl.present_in(version)}

    def add_tags(pair: tuple[dict[str, Any], dict[int, bytes]]) -> dict[str, Any]:
        data, tags = pair
        if tags:
            data[UNKNOWN_TAGS_KEY] = tags
        return data

    return st.tuples(st.fixed_dictionaries(fields), _unknown_tags()).map(add_tags)


CASES = [(k, v) for k, schema in sorted(METADATA_SCHEMAS.items()) for v in range(schema.valid_versions.lo, schema.max_version + 1)]


def _check_order(data: dict[str, Any], struct_: Struct, version: int) -> None:
    names = [fl.json_name for fl in struct_.fields if fl.present_in(version)]
    assert [k for k in data if k != UNKNOWN_TAGS_KEY] == names


@pytest.mark.parametrize(("api_key", "version"), CASES)
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_metadata_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    schema = METADATA_SCHEMAS[api_key]
    body = data.draw(_struct(schema.struct, version))
    top_tags = body.pop(UNKNOWN_TAGS_KEY, {})
    value = encode_metadata_value(api_key, version, body, top_tags)
    decoded = decode_metadata_value(value)
    assert (decoded.api_key, decoded.version, decoded.type_name) == (api_key, version, schema.type_name)
    assert decoded.data == body
    assert decoded.unknown_tags == top_tags
    _check_order(decoded.data, schema.struct, version)
    assert encode_metadata_value(api_key, version, decoded.data, decoded.unknown_tags) == value


@pytest.mark.parametrize("control_type", sorted(CONTROL_SCHEMAS))
@settings(max_examples=60, deadline=None)
@given(data=st.data())
def test_control_round_trip(control_type: int, data: st.DataObject) -> None:
    schema = CONTROL_SCHEMAS[control_type]
    body = data.draw(_struct(schema.struct, 0))
    top_tags = body.pop(UNKNOWN_TAGS_KEY, {})
    value = encode_control_value(control_type, body, top_tags)
    decoded = decode_control_value(control_type, value)
    assert decoded.data == body and decoded.unknown_tags == top_tags
    assert decoded.version == body["version"] and decoded.control_type == control_type
    _check_order(decoded.data, schema.struct, 0)
    assert encode_control_value(control_type, decoded.data, decoded.unknown_tags) == value


@given(st.integers(0, 1), st.integers(0, 2**15 - 1), st.integers(-(2**31), 2**31 - 1))
def test_end_txn_marker_round_trip(control_type: int, version: int, epoch: int) -> None:
    data = {"version": version, "coordinatorEpoch": epoch}
    value = encode_control_value(control_type, data)
    assert len(value) == 6
    assert decode_control_value(control_type, value).data == data


def test_missing_keys_take_defaults() -> None:
    value = encode_metadata_value(0, 4, {"brokerId": 1})
    d = decode_metadata_value(value).data
    assert d["fenced"] is True and d["rack"] == "" and d["cordonedLogDirs"] is None and d["logDirs"] == []
    assert d["incarnationId"] == "AAAAAAAAAAAAAAAAAAAAAA"


def test_float_and_nan() -> None:
    value = encode_metadata_value(14, 0, {"entity": [{"entityType": "user", "entityName": None}], "key": "k", "value": float("nan")})
    d = decode_metadata_value(value).data
    assert d["value"] != d["value"] and d["entity"] == [{"entityType": "user", "entityName": None}]
    assert encode_metadata_value(14, 0, d) == value


def test_invalid_utf8_is_replaced_like_java() -> None:
    value = h("01 02 00 03 ff 41") + bytes(16) + h("00")
    assert decode_metadata_value(value).data["name"] == "\ufffdA"
