"""Our schema table against the JSON schema files inside the Kafka 4.3.1 jars (spec §5.2, §7)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path
from typing import Any

import pytest

from replay.kafka.model import CONTROL_TYPES
from replay.kafka.schemas import (
    CONTROL_BY_TYPE_NAME,
    CONTROL_SCHEMAS,
    METADATA_BY_TYPE_NAME,
    METADATA_SCHEMAS,
    RETIRED_API_KEYS,
    ZERO_UUID,
    Field,
    Struct,
    Versions,
    schema_for_type_name,
    upper_snake,
    uuid_bytes,
    uuid_text,
)

CONTROL_FILES = {
    2: "LeaderChangeMessage.json",
    3: "SnapshotHeaderRecord.json",
    4: "SnapshotFooterRecord.json",
    5: "KRaftVersionRecord.json",
    6: "VotersRecord.json",
}


def _jar(prefix: str) -> Path:
    from replay.maven import kafka_jars

    for jar in kafka_jars():  # raises MavenError saying what is wrong when mvn cannot fetch them
        if jar.name.startswith(prefix):
            return jar
    pytest.fail(f"no {prefix}*.jar among the Kafka jars")


def _strip_comments(text: str) -> str:
    return "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))


def _read_schemas(jar: Path, folder: str) -> dict[str, dict[str, Any]]:
    out = {}
    with zipfile.ZipFile(jar) as zf:
        for name in zf.namelist():
            if name.startswith(folder) and name.endswith(".json"):
                out[name[len(folder) :]] = json.loads(_strip_comments(zf.read(name).decode("utf-8")))
    return out


@pytest.fixture(scope="module")
def metadata_json() -> dict[str, dict[str, Any]]:
    return _read_schemas(_jar("kafka-metadata-"), "common/metadata/")


@pytest.fixture(scope="module")
def control_json() -> dict[str, dict[str, Any]]:
    found = _read_schemas(_jar("kafka-clients-"), "common/message/")
    return {name: found[name] for name in CONTROL_FILES.values()}


def _versions(spec: dict[str, Any], key: str, default: str = "none") -> str:
    return str(Versions.parse(spec.get(key, default)))


def _compare_fields(
    ours: tuple[Field, ...], theirs: list[dict[str, Any]], common: dict[str, dict[str, Any]], where: str
) -> None:
    assert [f.name for f in ours] == [t["name"] for t in theirs], where
    for f, t in zip(ours, theirs, strict=True):
        here = f"{where}.{f.name}"
        assert f.type == t["type"], here
        assert str(f.versions) == _versions(t, "versions"), here
        assert str(f.nullable_versions) == _versions(t, "nullableVersions"), here
        assert str(f.tagged_versions) == _versions(t, "taggedVersions"), here
        assert f.tag == t.get("tag"), here
        assert f.default == t.get("default", ""), here
        element = t["type"][2:] if t["type"].startswith("[]") else t["type"]
        if "fields" in t:
            assert f.struct is not None, here
            assert f.struct.name == element, here
            _compare_fields(f.struct.fields, t["fields"], common, here)
        elif element in common:
            assert f.struct is not None, here
            assert str(f.struct.versions) == _versions(common[element], "versions"), here
            _compare_fields(f.struct.fields, common[element]["fields"], common, here)
        else:
            assert f.struct is None, here


def test_every_metadata_schema_matches_kafka(metadata_json: dict[str, dict[str, Any]]) -> None:
    in_kafka = {s.api_key: s for s in METADATA_SCHEMAS.values() if s.in_kafka_431}
    assert {spec["apiKey"] for spec in metadata_json.values()} == set(in_kafka)
    for file_name, spec in metadata_json.items():
        ours = in_kafka[spec["apiKey"]]
        assert ours.json_file == file_name
        assert ours.name == spec["name"]
        assert str(ours.valid_versions) == _versions(spec, "validVersions")
        assert spec["flexibleVersions"] == "0+"  # message.py implements only the flexible rules
        common = {c["name"]: c for c in spec.get("commonStructs", [])}
        _compare_fields(ours.fields, spec["fields"], common, ours.name)


def test_every_control_schema_matches_kafka(control_json: dict[str, dict[str, Any]]) -> None:
    for control_type, file_name in CONTROL_FILES.items():
        spec = control_json[file_name]
        ours = CONTROL_SCHEMAS[control_type]
        assert ours.name == spec["name"] and ours.json_file == file_name
        assert str(ours.valid_versions) == _versions(spec, "validVersions")
        assert spec["flexibleVersions"] == "0+"
        common = {c["name"]: c for c in spec.get("commonStructs", [])}
        _compare_fields(ours.fields, spec["fields"], common, ours.name)
        assert ours.fields[0].name == "Version" and ours.fields[0].type == "int16"  # spec §5.2


def test_api_key_table_of_spec_7_1() -> None:
    assert sorted(METADATA_SCHEMAS) == [k for k in range(30) if k not in (6, 13, 16)]
    assert set(RETIRED_API_KEYS) == {6, 13, 16}
    names = {k: s.type_name for k, s in METADATA_SCHEMAS.items()}
    assert names[18] == "ACCESS_CONTROL_ENTRY_RECORD"
    assert names[19] == "REMOVE_ACCESS_CONTROL_ENTRY_RECORD"
    assert names[20] == "NO_OP_RECORD"
    assert names[21] == "ZK_MIGRATION_STATE_RECORD"
    assert names[17] == "BROKER_REGISTRATION_CHANGE_RECORD"
    assert names[28] == "CLEAR_ELR_RECORD"
    assert names[29] == "UNREGISTER_CONTROLLER_RECORD"
    assert METADATA_SCHEMAS[0].valid_versions == Versions(0, 4)
    assert METADATA_SCHEMAS[17].valid_versions == Versions(0, 3)
    assert not METADATA_SCHEMAS[29].in_kafka_431
    assert all(s.in_kafka_431 for k, s in METADATA_SCHEMAS.items() if k != 29)
    for schema in METADATA_SCHEMAS.values():
        assert METADATA_BY_TYPE_NAME[schema.type_name] is schema
        assert schema_for_type_name(schema.type_name) is schema


def test_control_schemas_are_named_as_model() -> None:
    for control_type, schema in CONTROL_SCHEMAS.items():
        assert CONTROL_TYPES[control_type] == schema.type_name
        assert CONTROL_BY_TYPE_NAME[schema.type_name] is schema
    assert set(CONTROL_SCHEMAS) == {2, 3, 4, 5, 6}


def test_upper_snake() -> None:
    assert upper_snake("AccessControlEntryRecord") == "ACCESS_CONTROL_ENTRY_RECORD"
    assert upper_snake("NoOpRecord") == "NO_OP_RECORD"
    assert upper_snake("ZkMigrationStateRecord") == "ZK_MIGRATION_STATE_RECORD"
    assert upper_snake("ClearElrRecord") == "CLEAR_ELR_RECORD"


def test_versions() -> None:
    assert Versions.parse("0+") == Versions(0, None)
    assert str(Versions.parse("1-3")) == "1-3"
    assert str(Versions.parse("2")) == "2"
    assert Versions.parse("none").empty
    assert 5 in Versions.parse("2+") and 1 not in Versions.parse("2+")
    assert 3 not in Versions.parse("0-2")
    assert 0 not in Versions.parse("none")


def test_defaults() -> None:
    pcr = METADATA_SCHEMAS[5].struct
    assert pcr.field("Leader").default_value(0) == -2
    assert pcr.field("Isr").default_value(0) is None
    assert pcr.field("TopicId").default_value(0) == ZERO_UUID
    rbr = METADATA_SCHEMAS[0].struct
    assert rbr.field("Fenced").default_value(0) is True
    assert rbr.field("LogDirs").default_value(3) == []
    assert rbr.field("Rack").default_value(0) == ""
    voters = CONTROL_SCHEMAS[6].struct.field("Voters")
    assert isinstance(voters.struct, Struct)
    assert voters.struct.field("KRaftVersionFeature").default_value(0) == {
        "minSupportedVersion": 0,
        "maxSupportedVersion": 0,
    }
    quota = METADATA_SCHEMAS[14].struct
    assert quota.field("Value").default_value(0) == 0.0


def test_uuid_text() -> None:
    raw = bytes.fromhex("0123456789abcdef0fedcba987654321")
    assert uuid_text(raw) == "ASNFZ4mrze8P7cuph2VDIQ"
    assert uuid_bytes("ASNFZ4mrze8P7cuph2VDIQ") == raw
    assert uuid_text(bytes(16)) == ZERO_UUID
    with pytest.raises(ValueError):
        uuid_bytes("short")
