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


# ---- the Renderer: the one output path of every command --------------------------------------------------------

ROWS = [{"principal": "User:bob", "acl_ids": ["a1", "a2"], "certain": True, "error": None,
         "seen": datetime(2026, 11, 20, 14, 2, tzinfo=timezone.utc)},
        {"principal": "User:çé, \"quoted\"", "acl_ids": [], "certain": False, "error": "x", "seen": None}]


def rendered(fmt: str, call: str, *args: object, **kw: object) -> str:
    buf = io.StringIO()
    getattr(outputs.Renderer(fmt, buf), call)(*args, **kw)
    return buf.getvalue()


def test_rows_in_every_output_parse_back() -> None:
    assert json.loads(rendered("json", "rows", ROWS)) == [
        {"principal": "User:bob", "acl_ids": ["a1", "a2"], "certain": True, "error": None,
         "seen": "2026-11-20T14:02:00.000Z"},
        {"principal": "User:çé, \"quoted\"", "acl_ids": [], "certain": False, "error": "x", "seen": None}]
    lines = rendered("jsonl", "rows", ROWS).splitlines()
    assert [json.loads(line)["principal"] for line in lines] == ["User:bob", "User:çé, \"quoted\""]
    back = list(csv.DictReader(io.StringIO(rendered("csv", "rows", ROWS, ["principal", "acl_ids", "certain"]))))
    assert back == [{"principal": "User:bob", "acl_ids": "a1;a2", "certain": "true"},
                    {"principal": "User:çé, \"quoted\"", "acl_ids": "", "certain": "false"}]
    header, rule, *body = rendered("table", "rows", ROWS, ["principal", "error"], people=["principal"]).splitlines()
    assert header.split() == ["principal"] and set(rule) == {"-"} and body[0] == "User:bob"
    # no rows: json is an empty array, jsonl nothing, csv the header only, the table says so
    assert json.loads(rendered("json", "rows", [])) == []
    assert rendered("jsonl", "rows", []) == ""
    assert rendered("csv", "rows", [], ["a", "b"]) == "a,b\n"
    assert rendered("table", "rows", []) == "(none)\n"


def test_json_text_is_copied_as_kafka_wrote_it() -> None:
    kafka = outputs.JsonText('{"offset": 2, "data": {"value":1.0E7}}')
    assert rendered("jsonl", "rows", [kafka, {"problem": "bad_crc"}]).splitlines() == [kafka, '{"problem": "bad_crc"}']
    assert '"data": {"value":1.0E7}' in rendered("json", "rows", [kafka])
    assert json.loads(rendered("json", "rows", [kafka, kafka]))[1]["data"] == {"value": 1.0e7}
    assert list(csv.DictReader(io.StringIO(rendered("csv", "rows", [kafka], ["offset", "data"])))) == [
        {"offset": "2", "data": '{"value": 10000000.0}'}]


def test_document_in_every_output() -> None:
    doc = {"decision": "ALLOWED", "acls": [{"id": "a1"}], "offset": 7}
    assert json.loads(rendered("json", "document", doc, ["people"])) == doc
    (line,) = rendered("jsonl", "document", doc, ["people"]).splitlines()
    assert json.loads(line) == doc
    (row,) = csv.DictReader(io.StringIO(rendered("csv", "document", doc, ["people"])))
    assert row == {"decision": "ALLOWED", "acls": '[{"id": "a1"}]', "offset": "7"}
    assert rendered("table", "document", doc, ["a sentence", "for people"]) == "a sentence\nfor people\n"


def test_sets_keep_one_stream_parseable() -> None:
    sets = {"acl_changes": [{"change": "ADDED", "acl_id": "a"}], "access_changes": [{"change": "GAINED", "who": "b"}]}
    assert json.loads(rendered("json", "sets", sets)) == sets
    assert [json.loads(line) for line in rendered("jsonl", "sets", sets).splitlines()] == [
        {"audit": "acl_changes", "change": "ADDED", "acl_id": "a"},
        {"audit": "access_changes", "change": "GAINED", "who": "b"}]
    assert list(csv.DictReader(io.StringIO(rendered("csv", "sets", sets)))) == [
        {"audit": "acl_changes", "change": "ADDED", "acl_id": "a", "who": ""},
        {"audit": "access_changes", "change": "GAINED", "acl_id": "", "who": "b"}]
    table = rendered("table", "sets", sets, {"acl_changes": ["acl_id"]}).splitlines()
    assert table[0] == "== acl changes: 1 row(s)" and table[1].split() == ["acl_id"] and "== access changes: 1 row(s)" in table
    one = {"who_can": [{"who": "User:a"}]}  # one set: rows as they are, no `audit` column added
    assert json.loads(rendered("json", "sets", one)) == [{"who": "User:a"}]
    with pytest.raises(ValueError, match="unknown output 'xml'; choose one of table, json, jsonl, csv"):
        outputs.Renderer("xml", io.StringIO())
