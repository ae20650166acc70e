"""Kafka's dump-log JSON (spec §10): rendering, Java doubles, Jackson strings, and parsing back."""

from __future__ import annotations

import math
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from replay.kafka.kafkajson import (
    KafkaJsonError,
    control_json,
    control_tail,
    jackson_string,
    java_double,
    parse_control_json,
    parse_payload_json,
    payload_json,
)
from replay.kafka.message import UNKNOWN_TAGS_KEY, decode_control_value, decode_metadata_value
from replay.kafka.schemas import CONTROL_SCHEMAS, METADATA_SCHEMAS, Field, Struct, uuid_text

ACL = {
    "id": "ASNFZ4mrze8P7cuph2VDIQ",
    "resourceType": 2,
    "resourceName": "foo",
    "patternType": 3,
    "principal": "User:alice",
    "host": "*",
    "operation": 3,
    "permissionType": 3,
}


# ---------------------------------------------------------------------------------------------------------
# The lines of spec §10.2


def test_spec_10_2_payloads() -> None:
    assert (
        payload_json("FEATURE_LEVEL_RECORD", 0, {"name": "metadata.version", "featureLevel": 21})
        == '{"type":"FEATURE_LEVEL_RECORD","version":0,"data":{"name":"metadata.version","featureLevel":21}}'
    )
    assert payload_json("ACCESS_CONTROL_ENTRY_RECORD", 0, ACL) == (
        '{"type":"ACCESS_CONTROL_ENTRY_RECORD","version":0,"data":{"id":"ASNFZ4mrze8P7cuph2VDIQ","resourceType":2,'
        '"resourceName":"foo","patternType":3,"principal":"User:alice","host":"*","operation":3,"permissionType":3}}'
    )
    assert payload_json("NO_OP_RECORD", 0, {}) == '{"type":"NO_OP_RECORD","version":0,"data":{}}'
    assert (
        payload_json("BEGIN_TRANSACTION_RECORD", 0, {"name": "txn"})
        == '{"type":"BEGIN_TRANSACTION_RECORD","version":0,"data":{"name":"txn"}}'
    )
    assert (
        payload_json("REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 0, {"id": "ASNFZ4mrze8P7cuph2VDIQ"})
        == '{"type":"REMOVE_ACCESS_CONTROL_ENTRY_RECORD","version":0,"data":{"id":"ASNFZ4mrze8P7cuph2VDIQ"}}'
    )
    assert payload_json("END_TRANSACTION_RECORD", 0, {}) == '{"type":"END_TRANSACTION_RECORD","version":0,"data":{}}'
    # tagged at default: not printed (AbortTransactionRecord with a null reason)
    assert payload_json(25, 0, {"reason": None}) == '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{}}'


def test_spec_10_1_control_tails() -> None:
    header = {"version": 0, "lastContainedLogTimestamp": 1700000000003}
    assert control_json("SNAPSHOT_HEADER", header) == '{"version":0,"lastContainedLogTimestamp":1700000000003}'
    assert control_tail("SNAPSHOT_HEADER", header) == 'SnapshotHeader {"version":0,"lastContainedLogTimestamp":1700000000003}'
    assert control_tail("SNAPSHOT_FOOTER", {"version": 0}) == 'SnapshotFooter {"version":0}'
    assert control_tail("KRAFT_VERSION", {"version": 0, "kRaftVersion": 1}) == 'KRaftVersion {"version":0,"kRaftVersion":1}'
    leader = {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    assert (
        control_tail("LEADER_CHANGE", leader)
        == 'LeaderChange: {"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
    )
    # a body whose Version says 1 prints the v1 field (at its default: it was read at version 0)
    assert control_json("LEADER_CHANGE", {**leader, "version": 1}) == (
        '{"version":1,"leaderId":1,"voters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}],'
        '"grantingVoters":[{"voterId":1,"voterDirectoryId":"AAAAAAAAAAAAAAAAAAAAAA"}]}'
    )
    voters = {
        "version": 0,
        "voters": [
            {
                "voterId": 1,
                "voterDirectoryId": uuid_text(bytes(range(16))),
                "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
                "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
                UNKNOWN_TAGS_KEY: {9: b"x"},
            }
        ],
    }
    assert control_tail("KRAFT_VOTERS", voters) == (
        'KRaftVoters {"version":0,"voters":[{"voterId":1,"voterDirectoryId":"AAECAwQFBgcICQoLDA0ODw",'
        '"endpoints":[{"name":"CONTROLLER","host":"localhost","port":9093}],'
        '"kRaftVersionFeature":{"minSupportedVersion":0,"maxSupportedVersion":1}}]}'
    )
    assert control_tail("COMMIT", {"version": 0, "coordinatorEpoch": 5}) == "endTxnMarker: COMMIT coordinatorEpoch: 5"
    with pytest.raises(KafkaJsonError):
        control_json("ABORT", {})


def test_decoded_leader_change_prints_as_kafka() -> None:
    d = decode_control_value(2, bytes.fromhex("0000 00000001 02 00000001 00 02 00000001 00 00".replace(" ", "")))
    assert control_json(d.type_name, d.data) == (
        '{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
    )


def test_fields_by_version_and_tags() -> None:
    # RegisterBrokerRecord v0 has no isMigratingZkBroker / inControlledShutdown; v3 prints logDirs only when set
    v0 = payload_json(0, 0, {"brokerId": 1, "rack": None})
    assert v0 == (
        '{"type":"REGISTER_BROKER_RECORD","version":0,"data":{"brokerId":1,"incarnationId":"AAAAAAAAAAAAAAAAAAAAAA",'
        '"brokerEpoch":0,"endPoints":[],"features":[],"rack":null,"fenced":true}}'
    )
    v4 = payload_json(0, 4, {"brokerId": 1, "rack": "r", "logDirs": ["AAAAAAAAAAAAAAAAAAAAAA"], "cordonedLogDirs": []})
    assert v4.endswith(
        '"rack":"r","fenced":true,"inControlledShutdown":false,"logDirs":["AAAAAAAAAAAAAAAAAAAAAA"],"cordonedLogDirs":[]}}'
    )
    assert '"isMigratingZkBroker":false' in v4
    # PartitionChangeRecord: declaration order (directories before ELR), leader only when != -2
    pcr = payload_json(5, 2, {"partitionId": 0, "topicId": "AAAAAAAAAAAAAAAAAAAAAA", "leader": 1, "directories": [],
                              "eligibleLeaderReplicas": [2]})
    assert pcr.endswith('"leader":1,"directories":[],"eligibleLeaderReplicas":[2]}}')
    # int8 tagged field with default 0
    brc = payload_json(17, 3, {"brokerId": 1, "brokerEpoch": 7, "fenced": -1})
    assert brc == '{"type":"BROKER_REGISTRATION_CHANGE_RECORD","version":3,"data":{"brokerId":1,"brokerEpoch":7,"fenced":-1}}'


def test_bytes_floats_and_longs() -> None:
    scram = payload_json(
        11, 0, {"name": "u", "mechanism": 1, "salt": b"\x01\x02\x03\x04\xff", "storedKey": b"", "serverKey": b"ab",
                "iterations": 4096}
    )
    assert '"salt":"AQIDBP8=","storedKey":"","serverKey":"YWI="' in scram
    quota = payload_json(14, 0, {"entity": [{"entityType": "user", "entityName": None}], "key": "k", "value": 1e7,
                                 "remove": False})
    assert quota.endswith('"data":{"entity":[{"entityType":"user","entityName":null}],"key":"k","value":1.0E7,"remove":false}}')
    assert '"value":"NaN"' in payload_json(14, 0, {"value": float("nan")})
    assert '"value":"-Infinity"' in payload_json(14, 0, {"value": -math.inf})
    assert '"nextProducerId":-9223372036854775808' in payload_json(15, 0, {"nextProducerId": -(2**63)})


# Java's Double.toString; all checked against OpenJDK 17 except where marked (JDK 19+ behaviour).
JAVA_DOUBLES = [
    (0.0, "0.0"),
    (-0.0, "-0.0"),
    (1.0, "1.0"),
    (0.1, "0.1"),
    (100.0, "100.0"),
    (1e7, "1.0E7"),
    (9999999.0, "9999999.0"),
    (0.001, "0.001"),
    (0.00099, "9.9E-4"),
    (1e-5, "1.0E-5"),
    (123456789.0, "1.23456789E8"),
    (1.5e300, "1.5E300"),
    (5e-324, "4.9E-324"),
    (2.2250738585072014e-308, "2.2250738585072014E-308"),
    (0.3, "0.3"),
    (1 / 3, "0.3333333333333333"),
    (1e21, "1.0E21"),
    (1e22, "1.0E22"),
    (4.35, "4.35"),
    (1024.0, "1024.0"),
    (-2.5, "-2.5"),
    (3e-7, "3.0E-7"),
    (1e16, "1.0E16"),
    (12345678.9, "1.23456789E7"),
    (1048576.0, "1048576.0"),
    (float("nan"), "NaN"),
    (math.inf, "Infinity"),
    (-math.inf, "-Infinity"),
    (1e23, "1.0E23"),  # JDK 19+; JDK 17 prints 9.999999999999999E22
    (2e23, "2.0E23"),  # JDK 19+; JDK 17 prints 1.9999999999999998E23
]


@pytest.mark.parametrize(("value", "text"), JAVA_DOUBLES)
def test_java_double(value: float, text: str) -> None:
    assert java_double(value) == text


@given(st.floats(allow_nan=False, allow_infinity=False))
def test_java_double_round_trips(value: float) -> None:
    text = java_double(value)
    assert float(text) == value
    assert "." in text


def test_jackson_string_escapes() -> None:
    # as printed by Jackson 2.21 (ObjectNode.toString) for the characters 0x00-0x7f and some non-ASCII ones
    chars = "".join(chr(i) for i in range(0x80)) + "é€\u2028😀"
    expected = (
        '"\\u0000\\u0001\\u0002\\u0003\\u0004\\u0005\\u0006\\u0007\\b\\t\\n\\u000B\\f\\r\\u000E\\u000F'
        "\\u0010\\u0011\\u0012\\u0013\\u0014\\u0015\\u0016\\u0017\\u0018\\u0019\\u001A\\u001B\\u001C\\u001D\\u001E"
        '\\u001F !\\"#$%&\'()*+,-./0123456789:;<=>?@ABCDEFGHIJKLMNOPQRSTUVWXYZ[\\\\]^_`abcdefghijklmnopqrstuvwxyz'
        '{|}~\x7fé€\u2028😀"'
    )
    assert jackson_string(chars) == expected


# ---------------------------------------------------------------------------------------------------------
# Parsing back


def test_parse_payload_json() -> None:
    text = payload_json("ACCESS_CONTROL_ENTRY_RECORD", 0, ACL)
    assert parse_payload_json(text) == ("ACCESS_CONTROL_ENTRY_RECORD", 0, ACL)
    assert parse_payload_json('{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{}}') == (
        "ABORT_TRANSACTION_RECORD",
        0,
        {"reason": None},
    )
    _, _, data = parse_payload_json(payload_json(11, 0, {"salt": b"\x00\xff", "name": "é"}))
    assert data["salt"] == b"\x00\xff" and data["name"] == "é"
    _, _, pcr = parse_payload_json('{"type":"PARTITION_CHANGE_RECORD","version":0,"data":{"partitionId":1,'
                                   '"topicId":"AAAAAAAAAAAAAAAAAAAAAA"}}')
    assert pcr["leader"] == -2 and pcr["isr"] is None and "directories" not in pcr
    _, _, quota = parse_payload_json(payload_json(14, 0, {"value": float("nan")}))
    assert math.isnan(quota["value"])
    for bad in (
        "not json",
        "[]",
        '{"type":"NOPE","version":0,"data":{}}',
        '{"type":"NO_OP_RECORD","version":1,"data":{}}',
        '{"type":"NO_OP_RECORD","version":0,"data":{"x":1}}',
        '{"type":"REMOVE_TOPIC_RECORD","version":0,"data":{}}',
        '{"type":"REMOVE_TOPIC_RECORD","version":0,"data":{"topicId":5}}',
        '{"type":"CONFIG_RECORD","version":0,"data":{"resourceType":1,"resourceName":null,"name":"a","value":null}}',
        '{"type":"USER_SCRAM_CREDENTIAL_RECORD","version":0,"data":{"name":"u","mechanism":1,"salt":"!!",'
        '"storedKey":"","serverKey":"","iterations":1}}',
    ):
        with pytest.raises(KafkaJsonError):
            parse_payload_json(bad)


def test_parse_control_json() -> None:
    text = '{"version":0,"leaderId":1,"voters":[{"voterId":1}],"grantingVoters":[{"voterId":1}]}'
    assert parse_control_json("LEADER_CHANGE", text) == {
        "version": 0,
        "leaderId": 1,
        "voters": [{"voterId": 1}],
        "grantingVoters": [{"voterId": 1}],
    }
    assert parse_control_json("SNAPSHOT_FOOTER", '{"version":0}') == {"version": 0}
    with pytest.raises(KafkaJsonError):
        parse_control_json("SNAPSHOT_HEADER", '{"version":0}')


# Round trip: data → JSON → data for every schema and version (NaN compares unequal, so finite floats).

_INTS = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
}


def _scalar(kind: str) -> st.SearchStrategy[Any]:
    if kind in _INTS:
        return st.integers(*_INTS[kind])
    return {
        "bool": st.booleans(),
        "float64": st.floats(allow_nan=False),
        "string": st.text(st.characters(codec="utf-8"), max_size=10),
        "bytes": st.binary(max_size=10),
        "uuid": st.binary(min_size=16, max_size=16).map(uuid_text),
    }[kind]


def _value(fld: Field, version: int) -> st.SearchStrategy[Any]:
    elem = _struct(fld.struct, version) if fld.struct is not None else _scalar(fld.element_type)
    value = st.lists(elem, max_size=3) if fld.is_array else elem
    return st.none() | value if fld.nullable_in(version) else value


def _struct(struct_: Struct, version: int) -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries({fl.json_name: _value(fl, version) for fl in struct_.fields if fl.present_in(version)})


CASES = [(k, v) for k, s in sorted(METADATA_SCHEMAS.items()) for v in range(s.valid_versions.lo, s.max_version + 1)]


@pytest.mark.parametrize(("api_key", "version"), CASES)
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_payload_round_trip(api_key: int, version: int, data: st.DataObject) -> None:
    schema = METADATA_SCHEMAS[api_key]
    body = data.draw(_struct(schema.struct, version))
    text = payload_json(schema.type_name, version, body)
    assert parse_payload_json(text) == (schema.type_name, version, body)


@pytest.mark.parametrize("control_type", sorted(CONTROL_SCHEMAS))
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_control_json_round_trip(control_type: int, data: st.DataObject) -> None:
    schema = CONTROL_SCHEMAS[control_type]
    body = data.draw(_struct(schema.struct, 0))
    body["version"] = 0
    assert parse_control_json(schema.type_name, control_json(schema.type_name, body)) == body


def test_decoded_records_render() -> None:
    value = bytes.fromhex("01190001001414") + b"Controller failover"
    d = decode_metadata_value(value)
    assert payload_json(d.type_name, d.version, d.data) == (
        '{"type":"ABORT_TRANSACTION_RECORD","version":0,"data":{"reason":"Controller failover"}}'
    )
