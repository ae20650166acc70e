"""JSON lines, CSV and Avro (against the published audit.avsc) writers."""

from __future__ import annotations

import csv
import io
import json
from datetime import datetime, timezone

import fastavro
import pytest

from replay.kafka import outputs

ROW = {"cluster_id": "c", "principal": "User:bob", "host": "10.0.0.1", "operation": "READ", "resource_type": "TOPIC",
       "resource_name": "payments", "as_of_offset": 12, "decision": "ALLOWED", "certain": True,
       "reason": "matching_allow", "deciding_acl_ids": ["a1", "a2"], "uncertain_acl_ids": [], "coverage": "complete",
       "error": None, "request_id": 7, "seen": datetime(2026, 11, 20, 14, 2, tzinfo=timezone.utc)}


def test_schema_is_valid_avro_and_documents_every_field() -> None:
    schema = outputs.audit_schema()
    fastavro.parse_schema(schema)
    assert schema["name"] == "AclAuditRecord"
    assert all("name" in f and "type" in f for f in schema["fields"])


def test_audit_record_maps_known_fields_and_keeps_the_rest() -> None:
    rec = outputs.audit_record(ROW, "authorize")
    assert rec["audit"] == "authorize" and rec["acl_ids"] == ["a1", "a2"] and rec["certain"] is True
    assert rec["as_of_offset"] == 12 and rec["pattern_type"] is None
    assert json.loads(rec["attributes"]["request_id"]) == 7
    assert json.loads(rec["attributes"]["seen"]) == "2026-11-20T14:02:00.000Z"
    assert json.loads(rec["attributes"]["error"]) is None


def test_avro_round_trip(tmp_path) -> None:  # type: ignore[no-untyped-def]
    path = str(tmp_path / "a.avro")
    assert outputs.write_avro([ROW, {**ROW, "decision": "DENIED", "deciding_acl_ids": None}], path, "authorize") == 2
    back = outputs.read_avro(path)
    assert [r["decision"] for r in back] == ["ALLOWED", "DENIED"] and back[1]["acl_ids"] == []
    with open(path, "rb") as f:
        assert fastavro.reader(f).writer_schema["name"].endswith("AclAuditRecord")  # type: ignore[index]
    one = outputs.avro_bytes(ROW, "authorize")
    rec = fastavro.schemaless_reader(io.BytesIO(one), fastavro.parse_schema(outputs.audit_schema()))
    assert rec["resource_name"] == "payments"  # type: ignore[index]


def test_jsonl_and_csv() -> None:
    buf = io.StringIO()
    assert outputs.write_jsonl([ROW], buf) == 1
    line = json.loads(buf.getvalue())
    assert line["deciding_acl_ids"] == ["a1", "a2"] and line["seen"] == "2026-11-20T14:02:00.000Z"
    buf = io.StringIO()
    outputs.write_csv([ROW], buf)
    rows = list(csv.DictReader(io.StringIO(buf.getvalue())))
    assert rows[0]["deciding_acl_ids"] == "a1;a2" and rows[0]["certain"] == "true" and rows[0]["error"] == ""
    buf = io.StringIO()
    outputs.write_csv([], buf, columns=["a", "b"])
    assert buf.getvalue() == "a,b\n"


def test_table_and_unknown_format() -> None:
    buf = io.StringIO()
    outputs.write_rows([ROW], buf, "table", columns=["principal", "decision", "deciding_acl_ids"])
    assert buf.getvalue().splitlines()[2].split() == ["User:bob", "ALLOWED", "a1;a2"]
    with pytest.raises(ValueError, match="unknown output format"):
        outputs.write_rows([ROW], io.StringIO(), "xml")
