"""`kraft-replay` from the command line: every bad input of issue 2 through `inspect` and `acls`, with and without
`--strict`; the output formats on a small log with known ACLs; the commands' wiring (no Spark is started here)."""

from __future__ import annotations

import csv
import io
import itertools
import json
import os
import re
import subprocess
import sys
import types
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

import replay.spark
from replay import cli
from replay.kafka import files, writer
from replay.kafka.acl import AclBinding
from replay.kafka.dump import ProblemSummary

T0 = 1_700_000_000_000
ID_A = "AAAAAAAAAAAAAAAAAAAAAQ"
ID_B = "AAAAAAAAAAAAAAAAAAAAAg"
ID_C = "AAAAAAAAAAAAAAAAAAAAAw"
ALICE = AclBinding.of("TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW")
BOB = AclBinding.of("TOPIC", "orders", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY")


def run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    """main(argv): exit code, stdout, stderr."""
    capsys.readouterr()
    out = io.StringIO()
    code = cli.main(argv, out)
    return code, out.getvalue(), capsys.readouterr().err


def batch(offset: int, records: list[writer.RecordInput], minute: int = 0, **options: Any) -> bytes:
    return writer.encode_batch(offset, records, epoch=1, timestamp=T0 + 60_000 * minute, **options)


def raw_batch(offset: int, area: bytes, count: int, codec: int = 0) -> bytes:
    return writer.assemble_batch(offset, area, count, max(count - 1, 0), epoch=1, timestamp=T0, attributes=codec)


def write(path: Path, data: bytes) -> str:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


def segment(tmp: Path, data: bytes, base: int = 0) -> str:
    return write(tmp / "__cluster_metadata-0" / files.segment_name(base), data)


# ---- the bad inputs of issue 2, item 6 ------------------------------------------------------------------------


@dataclass(frozen=True)
class Bad:
    """A bad input: the files to give (the first one is where the problem is), where the problem is, and the
    offset to ask `acls` about."""

    paths: list[str]
    position: int
    offset: int
    as_of: int = 3


def _head() -> tuple[bytes, bytes]:
    """Two good batches: offsets 0 (ACL alice) and 1..2 (ACL bob, NoOp)."""
    return batch(0, [writer.acl_record(ID_A, ALICE)]), batch(1, [writer.acl_record(ID_B, BOB), writer.noop()], 1)


def _tail_batch() -> bytes:
    return batch(3, [writer.noop()], 2)


def _log_with(middle: bytes) -> Callable[[Path], Bad]:
    """b0 + `middle` (at offset 1) + a NoOp at offset 3."""

    def make(tmp: Path) -> Bad:
        b0, _ = _head()
        return Bad([segment(tmp, b0 + middle + _tail_batch())], len(b0), 1)

    return make


def _records_batch(*values: bytes | None) -> bytes:
    """A batch at offset 1 holding records with these values, the first being ACL bob."""
    area = writer.encode_record(0, writer.acl_record(ID_B, BOB).value)
    area += b"".join(writer.encode_record(i + 1, v) for i, v in enumerate(values))
    return raw_batch(1, area, 1 + len(values))


def truncated_tail(tmp: Path) -> Bad:
    b0, b1 = _head()
    return Bad([segment(tmp, b0 + b1 + _tail_batch()[:-10])], len(b0) + len(b1), 3, as_of=2)


def record_overrun(tmp: Path) -> Bad:
    b0, _ = _head()
    good = writer.encode_record(0, writer.acl_record(ID_B, BOB).value)
    second = writer.encode_record(1, writer.noop().value)
    middle = raw_batch(1, good + writer.varint(500) + second[1:], 2)
    return Bad([segment(tmp, b0 + middle + _tail_batch())], len(b0), 2)


def trailing_bytes(tmp: Path) -> Bad:
    b0, _ = _head()
    body = writer.encode_record(1, writer.noop().value)[1:] + b"\x07\x07"
    area = writer.encode_record(0, writer.acl_record(ID_B, BOB).value) + writer.varint(len(body)) + body
    return Bad([segment(tmp, b0 + raw_batch(1, area, 2) + _tail_batch())], len(b0), 2)


def unknown_api_key(tmp: Path) -> Bad:
    b0, _ = _head()
    return Bad([segment(tmp, b0 + _records_batch(bytes.fromhex("01ff7f00")) + _tail_batch())], len(b0), 2)


def unknown_version(tmp: Path) -> Bad:
    b0, _ = _head()
    value = bytes.fromhex("011205") + bytes(20)  # an AccessControlEntryRecord at version 5
    return Bad([segment(tmp, b0 + _records_batch(value) + _tail_batch())], len(b0), 2)


def _replay_log(records: list[writer.RecordInput]) -> Callable[[Path], Bad]:
    """b0 (ACL alice at 0), then `records` in one batch from offset 1; the anomaly is at the last of them."""

    def make(tmp: Path) -> Bad:
        b0, _ = _head()
        return Bad([segment(tmp, b0 + batch(1, records, 1))], len(b0), len(records), as_of=len(records))

    return make


def _snapshot(tmp: Path, batches: list[bytes]) -> str:
    return write(tmp / "__cluster_metadata-0" / files.snapshot_name(4, 1), b"".join(batches))


def snapshot_no_header(tmp: Path) -> Bad:
    b0, b1 = _head()
    log = segment(tmp, b0 + b1 + _tail_batch())
    snap = _snapshot(tmp, [batch(0, [writer.acl_record(ID_B, BOB)], 2),
                           batch(1, [writer.snapshot_footer()], 2, control=True)])
    return Bad([snap, log], 0, 0)


def snapshot_no_footer(tmp: Path) -> Bad:
    b0, b1 = _head()
    log = segment(tmp, b0 + b1 + _tail_batch())
    header = batch(0, [writer.snapshot_header(T0)], 2, control=True)
    data = batch(1, [writer.acl_record(ID_B, BOB), writer.noop()], 2)
    return Bad([_snapshot(tmp, [header, data]), log], len(header), 2)


def not_a_metadata_log(tmp: Path) -> Bad:
    return Bad([segment(tmp, b"this is a text file that someone named like a segment\n" * 3, base=40)], 0, 40)


DECODER_CASES: dict[str, Callable[[Path], Bad]] = {
    "truncated_tail": truncated_tail,
    "bad_crc": _log_with(writer.corrupt_crc(_head()[1])),
    "bad_magic": _log_with(writer.with_magic(_head()[1], 1)),
    "batch_too_short": _log_with(writer.with_batch_length(_head()[1], 5)),
    "unknown_codec": _log_with(raw_batch(1, writer.encode_record(0, writer.noop().value), 1, codec=6)),
    "record_overrun": record_overrun,
    "trailing_bytes": trailing_bytes,
    "unknown_api_key": unknown_api_key,
    "unknown_version": unknown_version,
    "snapshot_no_header": snapshot_no_header,
    "snapshot_no_footer": snapshot_no_footer,
    "not_a_metadata_log": not_a_metadata_log,
}
REPLAY_CASES: dict[str, Callable[[Path], Bad]] = {
    "nested_begin": _replay_log([writer.begin_txn("a"), writer.begin_txn("b")]),
    "end_without_begin": _replay_log([writer.noop(), writer.end_txn()]),
    "abort_without_begin": _replay_log([writer.noop(), writer.abort_txn("Controller failover")]),
    "unknown_remove": _replay_log([writer.noop(), writer.remove_acl_record(ID_C)]),
    "duplicate_id": _replay_log([writer.noop(), writer.acl_record(ID_A, BOB)]),
}
COMMANDS = {"inspect": lambda bad: ["inspect", *bad.paths],
            "acls": lambda bad: ["acls", *bad.paths, "--as-of-offset", str(bad.as_of)]}
MATRIX = [(kind, command) for kind in DECODER_CASES for command in COMMANDS]
MATRIX += [(kind, "acls") for kind in REPLAY_CASES]


def summary_count(stderr: str, kind: str) -> int:
    """How many problems of `kind` the summary line at the end counts."""
    line = next(ln for ln in stderr.splitlines() if re.fullmatch(r"\d+ problem\(s\): .*", ln))
    m = re.search(rf"(?:: |, ){kind} (\d+)(?:,|$)", line)
    return int(m.group(1)) if m else 0


@pytest.mark.parametrize(("kind", "command"), MATRIX, ids=[f"{k}-{c}" for k, c in MATRIX])
def test_every_bad_input_is_named_counted_and_fails_strict(
    kind: str, command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    bad = {**DECODER_CASES, **REPLAY_CASES}[kind](tmp_path)
    argv = COMMANDS[command](bad)
    code, _, err = run(argv, capsys)
    assert code == cli.EXIT_OK, err
    assert summary_count(err, kind) >= 1, err
    where = f"{kind}: {bad.paths[0]}, byte {bad.position}, offset {bad.offset}: "
    assert any(line.strip().startswith(where) for line in err.splitlines()), (where, err)
    strict_code, _, strict_err = run([*argv, "--strict"], capsys)
    assert strict_code == cli.EXIT_PROBLEMS
    assert summary_count(strict_err, kind) == summary_count(err, kind)


def test_the_good_rest_of_a_bad_file_is_still_answered(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = DECODER_CASES["batch_too_short"](tmp_path)
    # the ACL of the first batch and the NoOp after the unframeable batch are both decoded
    code, out, err = run(["inspect", *bad.paths], capsys)
    assert code == 0 and "2 batches, 2 records, offsets 0..3" in out
    code, out, err = run(["acls", *bad.paths, "--as-of-offset", "0", "--output", "json"], capsys)
    assert [a["id"] for a in json.loads(out)["acls"]] == [ID_A]
    # after the lost offsets 1..2 alice's ACL may have been removed: it is listed as uncertain, not dropped
    code, out, err = run(["acls", *bad.paths, "--as-of-offset", "3", "--output", "json"], capsys)
    doc = json.loads(out)
    assert (doc["acls"], [a["id"] for a in doc["uncertain"]], doc["exact"]) == ([], [ID_A], False)
    assert "not certain" in err


def test_a_corrupt_first_batch_does_not_hide_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    b0, b1 = _head()
    path = segment(tmp_path, writer.with_batch_length(b0, 3) + b1 + _tail_batch())
    code, out, err = run(["inspect", path], capsys)
    assert code == 0 and "2 batches, 3 records, offsets 1..3" in out
    assert summary_count(err, "batch_too_short") == 1 and summary_count(err, "not_a_metadata_log") == 0
    assert f"batch_too_short: {path}, byte 0, offset 0: " in err


# ---- a small log with known ACLs --------------------------------------------------------------------------------


@pytest.fixture()
def small_log(tmp_path: Path) -> str:
    """offset 0: + alice (minute 0); 1..2: + bob, ClientQuota 1.0E7 (minute 1); 3: - alice (minute 2)."""
    quota = writer.metadata_record(14, 0, {"entity": [{"entityType": "user", "entityName": "bob"}],
                                           "key": "producer_byte_rate", "value": 1.0e7, "remove": False})
    return segment(tmp_path, batch(0, [writer.acl_record(ID_A, ALICE)], 0)
                   + batch(1, [writer.acl_record(ID_B, BOB), quota], 1)
                   + batch(3, [writer.remove_acl_record(ID_A)], 2))


def test_inspect_summary(small_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["inspect", small_log], capsys)
    assert code == 0
    assert out.splitlines() == [f"{small_log}: segment, 3 batches, 4 records, offsets 0..3",
                                "  ACCESS_CONTROL_ENTRY_RECORD: 2", "  CLIENT_QUOTA_RECORD: 1",
                                "  REMOVE_ACCESS_CONTROL_ENTRY_RECORD: 1"]
    assert err.splitlines() == ["no problems found"]


def test_inspect_json_embeds_kafka_json_as_printed(small_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["inspect", "--output", "jsonl", small_log], capsys)
    assert code == 0
    lines = out.splitlines()
    objs = [json.loads(line) for line in lines]
    assert [(o["offset"], o["type"], o["base_offset"]) for o in objs] == [
        (0, "ACCESS_CONTROL_ENTRY_RECORD", 0), (1, "ACCESS_CONTROL_ENTRY_RECORD", 1),
        (2, "CLIENT_QUOTA_RECORD", 1), (3, "REMOVE_ACCESS_CONTROL_ENTRY_RECORD", 3)]
    assert objs[0]["data"] == {"id": ID_A, "resourceType": 2, "resourceName": "payments", "patternType": 3,
                               "principal": "User:alice", "host": "*", "operation": 3, "permissionType": 3}
    assert objs[2]["append_time"] == T0 + 60_000 and objs[2]["codec"] == "none" and objs[2]["crc_ok"] is True
    # the double is Kafka's text (Java's Double.toString), not Python's re-serialisation
    assert '"data": {"entity":[{"entityType":"user","entityName":"bob"}],"key":"producer_byte_rate",' \
           '"value":1.0E7,"remove":false}' in lines[2]
    assert "unknownTaggedFields" not in out


def test_inspect_json_lists_problems(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = DECODER_CASES["bad_crc"](tmp_path)
    _, out, _ = run(["inspect", "--output", "jsonl", *bad.paths], capsys)
    problems = [o for o in map(json.loads, out.splitlines()) if "problem" in o]
    assert problems == [{"problem": "bad_crc", "file": bad.paths[0], "position": bad.position, "offset": 1,
                         "message": problems[0]["message"]}]


ALICE_KAFKA = ["Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=payments, patternType=LITERAL)`: ",
               " \t(principal=User:alice, host=*, operation=READ, permissionType=ALLOW) ", ""]
BOB_KAFKA = ["Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, patternType=PREFIXED)`: ",
             " \t(principal=User:bob, host=10.0.0.1, operation=WRITE, permissionType=DENY) ", ""]


@pytest.mark.parametrize(("as_of", "expected"), [(0, ALICE_KAFKA), (2, BOB_KAFKA + ALICE_KAFKA), (3, BOB_KAFKA)])
def test_acls_kafka_acls_format(small_log: str, as_of: int, expected: list[str],
                                capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["acls", small_log, "--as-of-offset", str(as_of)], capsys)
    assert code == 0 and out.split("\n")[:-1] == expected
    assert err.splitlines() == ["no problems found"]


def test_acls_json_format(small_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["acls", small_log, "--as-of-offset", "2", "--output", "json"], capsys)
    doc = json.loads(out)
    assert (doc["asOfOffset"], doc["exact"], doc["uncertain"]) == (2, True, [])
    assert doc["asOfTime"] == cli.format_time(T0 + 60_000)
    assert doc["acls"] == [
        {"id": ID_B, "resourceType": "TOPIC", "resourceName": "orders", "patternType": "PREFIXED",
         "principal": "User:bob", "host": "10.0.0.1", "operation": "WRITE", "permissionType": "DENY"},
        {"id": ID_A, "resourceType": "TOPIC", "resourceName": "payments", "patternType": "LITERAL",
         "principal": "User:alice", "host": "*", "operation": "READ", "permissionType": "ALLOW"}]


def test_acls_table_format(small_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, out, _ = run(["acls", small_log, "--as-of-offset", "2", "--output", "table"], capsys)
    header, rule, *rows = out.splitlines()
    assert header.split() == ["id", "resourceType", "resourceName", "patternType", "principal", "host",
                              "operation", "permissionType", "certainty"]
    assert set(rule) == {"-", " "}
    assert [r.split() for r in rows] == [
        [ID_B, "TOPIC", "orders", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY", "certain"],
        [ID_A, "TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW", "certain"]]


@pytest.mark.parametrize(("when", "expected"), [
    (str(T0 + 90_000), BOB_KAFKA + ALICE_KAFKA),  # between the second and the third batch
    (cli.format_time(T0 + 120_000), BOB_KAFKA),  # ISO-8601, exactly the third batch's time
    ("2023-11-14T22:13:20", ALICE_KAFKA),  # T0 itself, with no zone: UTC
])
def test_acls_as_of_time(small_log: str, when: str, expected: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["acls", small_log, "--as-of-time", when], capsys)
    assert code == 0 and out.split("\n")[:-1] == expected


def test_acls_before_any_record_still_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = DECODER_CASES["bad_crc"](tmp_path)
    code, out, err = run(["acls", *bad.paths, "--as-of-time", str(T0 - 1)], capsys)
    assert code == cli.EXIT_USAGE and out == ""
    assert "no record at or before" in err and summary_count(err, "bad_crc") == 1


def test_wrong_questions_get_one_line_and_exit_2(small_log: str, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    """Issue 18 item 5: a negative offset or a lake that is not there is refused, not answered with nothing."""
    code, out, err = run(["acls", small_log, "--as-of-offset", "-7"], capsys)
    assert code == cli.EXIT_USAGE and out == ""
    assert "kraft-replay: offset -7 is negative: offsets of __cluster_metadata start at 0" in err.splitlines()
    missing = tmp_path / "no-lake"
    for argv in (["acls", "--lake", str(missing), "--lake-cluster", "prod"],
                 ["authorize", "--lake", str(missing), "--lake-cluster", "prod", "--principal", "User:a", "--host",
                  "10.0.0.1", "--operation", "READ", "--topic", "t"],
                 ["replay", "--lake", str(missing), "--lake-cluster", "prod"]):
        code, out, err = run(argv, capsys)
        assert code == cli.EXIT_USAGE and out == "", argv
        assert err.startswith(f"kraft-replay: no lake at {missing}: give --lake DIR") and "Traceback" not in err


def test_check_question_refuses_typos_but_not_what_kafka_parses() -> None:
    from replay.kafka.authorizer import check_question
    from replay.kafka.model import QuestionError, check_offset

    check_question("User:alice", "READ", "TOPIC")
    check_question("User:alice", "describe-configs", "Group")  # spelled as people do: Kafka parses these
    check_question("User:alice", "ANY", "TOPIC")  # parsed; Kafka's authorize answers it with its own error
    with pytest.raises(QuestionError, match=r"principal 'alice' is not TYPE:NAME \(e.g. User:alice\)"):
        check_question("alice", "READ", "TOPIC")
    with pytest.raises(QuestionError, match="operation 'FROB' is not one Kafka knows; give one of UNKNOWN, ANY, ALL"):
        check_question("User:alice", "FROB", "TOPIC")
    with pytest.raises(QuestionError, match="resource type 'TOPICS' is not one Kafka knows"):
        check_question("User:alice", "READ", "TOPICS")
    check_offset(0)
    check_offset(None)
    with pytest.raises(QuestionError, match="offset -1 is negative"):
        check_offset(-1)


def test_acls_with_no_records_still_prints_the_summary(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = not_a_metadata_log(tmp_path)
    code, _, err = run(["acls", *bad.paths], capsys)
    assert code == cli.EXIT_USAGE
    assert "the dump holds no records" in err and summary_count(err, "not_a_metadata_log") == 1


def test_inspect_dump_log_text_with_a_snapshot_without_footer(tmp_path: Path,
                                                              capsys: pytest.CaptureFixture[str]) -> None:
    bad = snapshot_no_footer(tmp_path / "d")
    _, text, _ = run(["inspect", "--format", "dump-log", bad.paths[0]], capsys)
    saved = tmp_path / "dump.txt"
    saved.write_text(text)
    code, _, err = run(["inspect", str(saved), "--strict"], capsys)
    assert code == cli.EXIT_PROBLEMS and summary_count(err, "snapshot_no_footer") == 1
    batch_line = next(n for n, line in enumerate(text.splitlines(), 1) if f"position: {bad.position} " in line)
    assert f"snapshot_no_footer: {bad.paths[0]}, line {batch_line}, byte {bad.position}, offset 2: " in err


# ---- inspect --format dump-log over several files ---------------------------------------------------------------


def test_dump_log_over_several_files_is_one_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    gaps = segment(tmp_path / "g", batch(500, [writer.noop()]) + batch(505, [writer.noop()]), base=500)
    good = segment(tmp_path / "ok", batch(0, [writer.noop()]))
    crash = segment(tmp_path / "c", batch(0, [writer.noop()]) + bytes(40))
    code, out, err = run(["inspect", "--format", "dump-log", gaps, good], capsys)
    dumping = [line for line in out.splitlines() if line.startswith("Dumping ")]
    assert code == 0 and dumping == [f"Dumping {gaps}", f"Dumping {good}"]  # the order given
    assert err.splitlines()[:3] == [f"Non-consecutive offsets in {gaps}", "  -1 is followed by 500",
                                    "  500 is followed by 505"]
    code, out, err = run(["inspect", "--format", "dump-log", good, crash, gaps], capsys)
    dumping = [line for line in out.splitlines() if line.startswith("Dumping ")]
    assert dumping == [f"Dumping {good}", f"Dumping {crash}"]  # the tool dies in the second file
    assert err.splitlines()[0].startswith('Exception in thread "main" org.apache.kafka.common.errors.'
                                          'CorruptRecordException: Found record size 0 smaller than minimum')
    assert "Non-consecutive" not in err and summary_count(err, "batch_too_short") == 1


def test_dump_log_of_a_missing_file_dies_like_the_tool(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = str(tmp_path / files.segment_name(0))
    code, out, err = run(["inspect", "--format", "dump-log", missing, "--strict"], capsys)
    assert out.splitlines() == [f"Dumping {missing}", "Log starting offset: 0"]
    assert err.splitlines()[0] == f'Exception in thread "main" java.nio.file.NoSuchFileException: {missing}'
    assert code == cli.EXIT_PROBLEMS and summary_count(err, "unreadable_file") == 1


def test_dump_log_refuses_index_files(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    index = write(tmp_path / "00000000000000000000.index", bytes(8))
    code, out, err = run(["inspect", "--format", "dump-log", index], capsys)
    assert code == cli.EXIT_USAGE and out == "" and ".index" in err


# ---- unknown tagged fields ---------------------------------------------------------------------------------------


def test_unknown_tagged_fields_are_a_notice_that_strict_fails_on(tmp_path: Path,
                                                                 capsys: pytest.CaptureFixture[str]) -> None:
    record = writer.metadata_record(18, 0, ALICE.to_record_data(ID_A), unknown_tags={7: b"\xab\xcd"})
    path = segment(tmp_path, batch(0, [writer.noop(), record]))
    code, out, err = run(["inspect", "--output", "jsonl", path], capsys)
    assert code == 0 and summary_count(err, "unknown_tagged_field") == 1
    assert (f"unknown_tagged_field: {path}, byte 0, offset 1: record at offset 1 (ACCESS_CONTROL_ENTRY_RECORD v0) has "
            "unknown tagged field(s) 7 (2 bytes)") in err
    objs = [json.loads(line) for line in out.splitlines()]
    assert [o.get("problem") for o in objs] == ["unknown_tagged_field", None, None]
    assert "unknownTaggedFields" not in objs[1]
    assert objs[2]["unknownTaggedFields"] == {"7": "abcd"} and objs[2]["data"]["principal"] == "User:alice"
    assert run(["inspect", path, "--strict"], capsys)[0] == cli.EXIT_PROBLEMS
    _, out, _ = run(["inspect", "--format", "dump-log", path], capsys)
    assert "abcd" not in out and '"principal":"User:alice"' in out
    code, out, err = run(["acls", path, "--as-of-offset", "1"], capsys)  # the ACL still applies
    assert code == 0 and out.split("\n")[:-1] == ALICE_KAFKA and summary_count(err, "unknown_tagged_field") == 1


# ---- the Spark commands' wiring, with stand-ins for the Spark modules -------------------------------------------


def test_building_the_parser_imports_no_spark() -> None:
    code = ("import sys, replay.cli as c; c.build_parser(); "
            "sys.exit(1 if any(m.startswith(('pyspark', 'py4j', 'delta')) for m in sys.modules) else 0)")
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    assert subprocess.run([sys.executable, "-c", code], cwd=root, timeout=120).returncode == 0


@pytest.fixture()
def fake_spark(monkeypatch: pytest.MonkeyPatch) -> dict[str, list[Any]]:
    """Stand-ins for the lake and the replay.spark modules the commands call; returns the calls made."""
    calls: dict[str, list[Any]] = {"replay_lake": [], "sql": [], "audit": [], "sql_functions": [], "ingest": [],
                                   "api_functions": [],
                                   "name_tables": [], "audits": [], "changes": [], "authorize": [],
                                   "unpublished": []}

    def sql(query: str) -> Any:
        calls["sql"].append(query)
        if "raise_error" in query:
            from pyspark.errors import AnalysisException

            raise AnalysisException(message="[USER_RAISED_EXCEPTION] host ::1 is not a client address")
        if "rows" in query:
            return types.SimpleNamespace(collect=lambda: [Row(n=1, name="a,b")], columns=["n", "name"])
        return types.SimpleNamespace(collect=lambda: [])

    lake = types.SimpleNamespace(spark=types.SimpleNamespace(sql=sql),
                                 name_tables=lambda only=None: calls["name_tables"].append(only) or ["anomalies"])
    monkeypatch.setattr(cli, "_lake", lambda args, create=False: lake)
    monkeypatch.setattr(cli, "_from_files", lambda args, ask: None)  # Spark's path: delta-rs is tested with a real lake

    def module(name: str, **attrs: Any) -> None:
        fake = types.SimpleNamespace(**attrs)
        monkeypatch.setitem(sys.modules, f"replay.spark.{name}", fake)
        monkeypatch.setattr(replay.spark, name, fake, raising=False)  # for `from replay.spark import name`

    class Counts(dict[str, int]):
        def findings(self) -> ProblemSummary:
            return ProblemSummary()

    def replay_lake(lk: Any, clusters: list[str], high_watermark: int | None = None, full: bool = False,
                    progress: bool = True) -> Counts:
        calls["replay_lake"].append((lk, clusters, high_watermark) + (("full",) if full else ()))
        return Counts({"acl_events": 5, "acl_history": 3})

    class IngestError(RuntimeError):
        pass

    class StrictIngestError(IngestError):
        pass

    def ingest(spark: Any, paths: list[str], **kw: Any) -> Any:
        calls["ingest"].append(paths)
        if not os.path.exists(paths[0]):
            raise IngestError(f"{paths[0]} does not exist")
        return types.SimpleNamespace(lines=lambda: [f"{kw['cluster']}: 1 file(s)"],
                                     to_dict=lambda: {"cluster_id": kw["cluster"], "files": paths})

    def register_audit_functions(spark: Any, lk: Any, only: Any = None) -> list[str]:
        calls["audit"].append((spark, lk, only))
        return ["acl_risky_grants", "acl_diff"]

    def register_sql_functions(lk: Any, only: Any = None) -> list[str]:
        calls["sql_functions"].append((lk, only))
        return ["acl_state_at"]

    def register_api_functions(spark: Any, lk: Any, only: Any = None) -> list[str]:
        calls["api_functions"].append((spark, lk, only))
        return ["acl_could_call"]

    def audit(name: str, rows: Any) -> Callable[..., Any]:
        def run_audit(spark: Any, lk: Any, cluster: str, *args: Any, **kw: Any) -> Any:
            calls["audits"].append((name, cluster, args, kw))
            return rows
        return run_audit

    def changes_between(lk: Any, cluster: str, **kw: Any) -> Any:
        calls["changes"].append((cluster, kw))
        return types.SimpleNamespace(collect=lambda: [Row(r) for r in CHANGES])

    def authorize_one(spark: Any, lk: Any, cluster: str, *args: Any, **kw: Any) -> dict[str, Any]:
        calls["authorize"].append((cluster, args))
        return dict(DECISION)

    module("replay", replay_lake=replay_lake)
    module("audits", register_audit_functions=register_audit_functions, SUMMARY_COLUMNS={"who_can": ["who"]},
           audit_who_can=audit("who-can", WHO_CAN), audit_what_can=audit("what-can", WHO_CAN),
           audit_timeline=audit("timeline", WHO_CAN), audit_risky_grants=audit("risky", WHO_CAN),
           audit_changes=audit("changes", {"acls": CHANGES, "access": WHO_CAN}))
    def unpublished(lk: Any, cluster: str, offset: int) -> None:
        calls["unpublished"].append(offset)  # every offset is at a batch boundary here

    module("queries", register_sql_functions=register_sql_functions, changes_between=changes_between,
           unpublished=unpublished)
    module("authorize", authorize_one=authorize_one,
           render_decision=lambda result, fmt: [f"{result['principal']}: certainly {result['decision']}"])
    module("authorize_api_sql", register_api_functions=register_api_functions)
    module("access_sql", register_access_functions=lambda spark, lk, only=None: [])
    module("ingest", ingest=ingest, IngestError=IngestError, StrictIngestError=StrictIngestError)
    calls["lake"] = [lake]
    return calls


def test_replay_command(fake_spark: dict[str, list[Any]], capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(["replay", "--lake", "/tmp/lake", "--lake-cluster", "prod", "--high-watermark", "120"], capsys)
    assert code == 0 and fake_spark["replay_lake"] == [(fake_spark["lake"][0], ["prod"], 120)]
    assert out == "replayed: acl_events 5, acl_history 3\n"
    code, out, _ = run(["replay", "--lake", "/tmp/lake", "--lake-cluster", "prod", "--full"], capsys)
    assert code == 0 and fake_spark["replay_lake"][-1] == (fake_spark["lake"][0], ["prod"], None, "full")


def test_sql_registers_the_audit_functions_too(fake_spark: dict[str, list[Any]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    """Every kind of function and the tables, of them what the query names (each costs Spark an analysis)."""
    query = "SELECT * FROM acl_risky_grants('prod', 10) JOIN Anomalies USING (cluster_id)"
    code, out, _ = run(["sql", "--lake", "/tmp/lake", query], capsys)
    lake = fake_spark["lake"][0]
    named = {"select", "from", "acl_risky_grants", "prod", "join", "anomalies", "using", "cluster_id"}
    assert code == 0 and fake_spark["sql_functions"] == [(lake, named)]
    assert fake_spark["audit"] == [(lake.spark, lake, named)] and fake_spark["api_functions"] == [(lake.spark, lake, named)]
    assert fake_spark["sql"] == [query] and out == "(none)\n"
    assert fake_spark["name_tables"] == [named]  # the lake's tables are named too


def test_a_failing_query_is_one_line_and_exit_2(fake_spark: dict[str, list[Any]],
                                               capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["sql", "--lake", "/tmp/lake", "SELECT raise_error('x')"], capsys)
    assert code == 2 and out == ""
    assert err.strip() == ("kraft-replay: the query failed: [USER_RAISED_EXCEPTION] host ::1 is not a client address")


def test_ingest_error_is_a_message_not_a_traceback(fake_spark: dict[str, list[Any]],
                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(["ingest", "/no/such/dump", "--lake-cluster", "prod", "--lake", "/tmp/lake"], capsys)
    assert code == cli.EXIT_FAILED and out == ""
    assert err.splitlines()[0] == "kraft-replay ingest: /no/such/dump does not exist"
    assert fake_spark["replay_lake"] == []


def test_ingest_then_replay_now_or_later(fake_spark: dict[str, list[Any]], tmp_path: Path,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["ingest", str(tmp_path), "--lake-cluster", "prod", "--lake", "/tmp/lake", "--high-watermark", "7"]
    code, out, err = run([*argv, "--no-replay"], capsys)
    assert code == 0 and out == "prod: 1 file(s)\n" and fake_spark["replay_lake"] == []
    assert "kraft-replay replay --lake /tmp/lake --lake-cluster prod" in err
    code, out, _ = run(argv, capsys)
    assert code == 0 and out == "prod: 1 file(s)\nreplayed: acl_events 5, acl_history 3\n"
    assert fake_spark["replay_lake"] == [(fake_spark["lake"][0], ["prod"], 7)]


@pytest.mark.parametrize(("host", "why"), [(None, "give --host"), ("*", "is not an IP address literal"),
                                           ("db.example.com", "is not an IP address literal")])
def test_authorize_needs_a_client_address(host: str | None, why: str, fake_spark: dict[str, list[Any]],
                                          capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["authorize", "--lake", "/tmp/lake", "--lake-cluster", "prod", "--principal", "User:alice",
            "--operation", "READ", "--topic", "payments"]
    code, _, err = run(argv + ([] if host is None else ["--host", host]), capsys)
    assert code == cli.EXIT_USAGE and why in err and "10.0.0.1" in err
    assert cli._host_problem("::1") is None and cli._host_problem("10.0.0.1") is None


# ---- one output path: --output, the old spellings, the audit subcommands, --lake-cluster -------------------------


class Row(dict[str, Any]):
    """A collected Spark row, as the commands use one."""

    def asDict(self, recursive: bool = False) -> dict[str, Any]:
        return dict(self)


CHANGES = [{"offset": 3, "offset_min": 3, "exact": True, "time": T0 + 120_000, "change": "REMOVED", "cause": "record",
            "acl_id": ID_A, "resource_type": "TOPIC", "resource_name": "payments", "pattern_type": "LITERAL",
            "principal": "User:alice", "host": "*", "operation": "READ", "permission_type": "ALLOW"}]
WHO_CAN = [{"who": "User:alice", "from_host": "any host", "decision": "ALLOWED", "certain": True,
            "via": ["TOPIC:LITERAL:payments User:alice ALLOW READ from *"]}]
DECISION = {"cluster": "prod", "principal": "User:alice", "host": "10.0.0.1", "operation": "READ",
            "resourceType": "TOPIC", "resourceName": "payments", "asOfOffset": 2, "decision": "ALLOWED",
            "certain": True, "reason": "matching_allow", "coverage": "complete", "decidingAcls": [{"id": ID_A}]}
LAKE = ["--lake", "/tmp/lake", "--lake-cluster", "prod"]


def parsed(fmt: str, text: str) -> list[dict[str, Any]]:
    """What a machine reads back from `--output fmt`: the rows (a json document that is an object is one row)."""
    if fmt == "json":
        doc = json.loads(text)
        return doc if isinstance(doc, list) else [doc]
    if fmt == "jsonl":
        return [json.loads(line) for line in text.splitlines()]
    rows = list(csv.DictReader(io.StringIO(text)))
    assert text.splitlines()[0].split(",") == list(rows[0]) if rows else True  # a header row
    return rows


def run_usage(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """A command argparse refuses: its exit code and stderr."""
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(argv, io.StringIO())
    return int(exit_.value.code or 0), capsys.readouterr().err


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
@pytest.mark.parametrize("before", [True, False], ids=["before", "after"])
def test_files_commands_in_every_output(fmt: str, before: bool, small_log: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    def argv(*command: str) -> list[str]:
        return ["--output", fmt, *command] if before else [*command, "--output", fmt]

    code, out, err = run(argv("inspect", small_log), capsys)  # every record, Kafka's JSON in `data`
    records = parsed(fmt, out)
    assert code == 0 and [(int(r["offset"]), r["type"]) for r in records] == [
        (0, "ACCESS_CONTROL_ENTRY_RECORD"), (1, "ACCESS_CONTROL_ENTRY_RECORD"), (2, "CLIENT_QUOTA_RECORD"),
        (3, "REMOVE_ACCESS_CONTROL_ENTRY_RECORD")]
    assert err.splitlines() == ["no problems found"]
    data = records[2]["data"]
    assert (json.loads(data) if fmt == "csv" else data)["value"] == 1.0e7
    if fmt != "csv":
        assert '"value":1.0E7' in out  # as Kafka writes it
    _, out, _ = run(argv("inspect", "--format", "summary", small_log), capsys)  # the summary as rows
    (summary,) = parsed(fmt, out)
    assert (summary["path"], int(summary["records"]), str(summary["last_offset"])) == (small_log, 4, "3")
    code, out, _ = run(argv("acls", small_log, "--as-of-offset", "2"), capsys)
    if fmt == "json":  # one document: the as-of facts, then the ACLs
        doc = json.loads(out)
        assert code == 0 and doc["asOfOffset"] == 2 and doc["exact"] is True
        assert [a["id"] for a in doc["acls"]] == [ID_B, ID_A] and doc["uncertain"] == []
    else:
        rows = parsed(fmt, out)
        assert code == 0 and [(r["id"], r["certainty"]) for r in rows] == [(ID_B, "certain"), (ID_A, "certain")]
        assert list(rows[0]) == ["id", "resourceType", "resourceName", "patternType", "principal", "host",
                                 "operation", "permissionType", "certainty"]


def test_lake_commands_in_every_output(fake_spark: dict[str, list[Any]], capsys: pytest.CaptureFixture[str]) -> None:
    ask = [*LAKE, "--principal", "User:alice", "--host", "10.0.0.1", "--operation", "READ", "--topic", "payments"]
    for fmt in ("json", "jsonl", "csv"):
        _, out, _ = run(["changes", *LAKE, "--from-offset", "0", "--output", fmt], capsys)
        (change,) = parsed(fmt, out)
        assert change["acl_id"] == ID_A and str(change["time"]) == str(T0 + 120_000)  # epoch ms for machines
        _, out, _ = run(["sql", "--lake", "/tmp/lake", "SELECT rows", "--output", fmt], capsys)
        assert [(str(r["n"]), r["name"]) for r in parsed(fmt, out)] == [("1", "a,b")]
        _, out, _ = run(["authorize", *ask, "--output", fmt], capsys)
        (decision,) = parsed(fmt, out)
        assert decision["decision"] == "ALLOWED" and decision["resourceName"] == "payments"
        _, out, _ = run(["replay", *LAKE, "--output", fmt], capsys)
        assert [(k, str(v)) for k, v in parsed(fmt, out)[0].items()] == [("acl_events", "5"), ("acl_history", "3"),
                                                                         ("findings", "0"), ("findings_by_kind", "")]
    code, out, _ = run(["--output", "json", "ingest", "/tmp", *LAKE], capsys)
    assert code == 0 and json.loads(out) == {"cluster_id": "prod", "files": ["/tmp"],
                                             "replayed": {"acl_events": 5, "acl_history": 3, "findings": 0,
                                                          "findings_by_kind": ""}}
    _, out, _ = run(["changes", *LAKE], capsys)  # for people: a table, times readable
    assert out.splitlines()[2].split()[:3] == ["3", "true", cli.format_time(T0 + 120_000)]
    _, out, _ = run(["authorize", *ask], capsys)
    assert out == "User:alice: certainly ALLOWED\n"


@pytest.mark.parametrize(("argv", "instead"), [
    (["inspect", "SMALL", "--format", "json"], ["inspect", "SMALL", "--output", "jsonl"]),
    (["acls", "SMALL", "--as-of-offset", "2", "--format", "json"], ["acls", "SMALL", "--as-of-offset", "2", "--output", "json"]),
    (["acls", "SMALL", "--as-of-offset", "2", "--format", "table"], ["acls", "SMALL", "--as-of-offset", "2", "--output", "table"]),
    (["changes", *LAKE, "--format", "json"], ["changes", *LAKE, "--output", "jsonl"]),
    (["sql", "SELECT rows", "--format", "json"], ["sql", "SELECT rows", "--output", "jsonl"]),
    (["authorize", *LAKE, "--principal", "User:alice", "--host", "10.0.0.1", "--operation", "READ", "--topic", "t",
      "--format", "text"],
     ["authorize", *LAKE, "--principal", "User:alice", "--host", "10.0.0.1", "--operation", "READ", "--topic", "t",
      "--output", "table"]),
    (["audit", "risky", *LAKE, "--format", "csv"], ["audit", "risky", *LAKE, "--output", "csv"]),
    (["replay", "--cluster", "prod"], ["replay", "--lake-cluster", "prod"]),
], ids=["inspect", "acls-json", "acls-table", "changes", "sql", "authorize", "audit", "cluster"])
def test_deprecated_spellings_still_work_and_say_what_to_write(
        argv: list[str], instead: list[str], small_log: str, fake_spark: dict[str, list[Any]],
        capsys: pytest.CaptureFixture[str]) -> None:
    def spelled(a: list[str]) -> list[str]:
        return [small_log if x == "SMALL" else x for x in a]

    code, out, err = run(spelled(argv), capsys)
    new_code, new_out, new_err = run(spelled(instead), capsys)
    assert (code, out) == (new_code, new_out) and code == 0 and out
    old = [f"{a} {b}" for a, b in itertools.pairwise(argv) if a.startswith("--") and a not in instead]
    new = [f"{a} {b}" for a, b in itertools.pairwise(instead) if a.startswith("--") and a not in argv]
    (note,) = [line for line in err.splitlines() if "deprecated" in line]
    assert note.startswith(f"kraft-replay: warning: {old[0]} is deprecated and goes in the next release; "
                           f"use {new[0]}")
    assert "deprecated" not in new_err


def test_lake_cluster_names_the_lakes_cluster(fake_spark: dict[str, list[Any]], tmp_path: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = run(["replay", "--lake", "/tmp/lake", "--lake-cluster", "prod-eu"], capsys)
    assert code == 0 and fake_spark["replay_lake"][-1][1] == ["prod-eu"] and err == "no problems found\n"
    code, _, err = run(["replay", "--lake", "/tmp/lake", "--cluster", "prod-eu"], capsys)
    assert code == 0 and fake_spark["replay_lake"][-1][1] == ["prod-eu"]
    assert "use --lake-cluster prod-eu (kafka-acls' --cluster names the CLUSTER resource)" in err
    code, err = run_usage(["replay", "--lake-cluster", "a", "--cluster", "b"], capsys)
    assert code == cli.EXIT_USAGE and "not allowed with" in err
    code, err = run_usage(["replay", "--lake", "/tmp/lake"], capsys)
    assert code == cli.EXIT_USAGE and "error: one of the arguments --lake-cluster is required" in err
    assert "--cluster " not in err  # the old spelling is not offered
    code, _, err = run(["ingest", str(tmp_path), *LAKE, "--no-replay"], capsys)
    assert code == 0 and "kraft-replay replay --lake /tmp/lake --lake-cluster prod" in err
    code, _, _ = run(["audit", "who-can", *LAKE, "--operation", "READ", "--cluster-resource"], capsys)
    assert code == 0 and fake_spark["audits"][-1] == ("who-can", "prod", ("READ", "CLUSTER", "kafka-cluster"),
                                                      {"offset": None, "time": None, "super_users": "",
                                                       "allow_everyone": False})


def test_kafka_texts_and_output_do_not_mix(small_log: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_usage(["inspect", "--format", "dump-log", small_log, "--output", "json"], capsys)
    assert code == cli.EXIT_USAGE and "--format dump-log prints kafka-dump-log's own text: leave out --output" in err
    code, err = run_usage(["--output", "csv", "acls", small_log, "--format", "standard-acl"], capsys)
    assert code == cli.EXIT_USAGE and "give one of them" in err
    code, err = run_usage(["acls", small_log, "--format", "json", "--output", "csv"], capsys)
    assert code == cli.EXIT_USAGE and "--format json and --output csv disagree: give --output only" in err
    code, err = run_usage(["--output", "json", "demo"], capsys)
    assert code == cli.EXIT_USAGE and "leave out --output" in err
    code, err = run_usage(["acls", small_log, "--output", "xml"], capsys)
    assert code == cli.EXIT_USAGE and "invalid choice: 'xml'" in err


RESOURCE_FLAGS = {"--topic", "--group", "--transactional-id", "--delegation-token", "--user", "--cluster-resource"}
AUDIT_FLAGS = {
    "who-can": {"--operation", *RESOURCE_FLAGS, "--as-of-offset", "--as-of-time", "--super-users",
                "--allow-everyone-if-no-acl-found"},
    "what-can": {"--principal", "--as-of-offset", "--as-of-time", "--super-users", "--allow-everyone-if-no-acl-found"},
    "changes": {"--from-offset", "--to-offset", "--from-time", "--to-time", "--super-users",
                "--allow-everyone-if-no-acl-found"},
    "timeline": {"--principal", "--operation", *RESOURCE_FLAGS, "--super-users",
                 "--allow-everyone-if-no-acl-found"},
    "risky": {"--as-of-offset", "--as-of-time", "--allow-everyone-if-no-acl-found"},
    "verify-log": {"--dumps", "--skew-ms", "--log-time-zone", "--high-watermark", "--strict", "--super-users",
                   "--allow-everyone-if-no-acl-found", "--broker", "--from", "--to"},
    "unused": {"--dumps", "--skew-ms", "--log-time-zone", "--high-watermark", "--strict", "--super-users",
               "--allow-everyone-if-no-acl-found", "--from", "--to", "--only-unused", "--only-other-hosts", "--broker"},
}
EVERY_AUDIT_FLAG = set().union(*AUDIT_FLAGS.values())
COMMON_FLAGS = {"--help", "--output", "--lake", "--catalog", "--lake-cluster", "--master", "--avro"}


@pytest.mark.parametrize("audit", list(AUDIT_FLAGS))
def test_each_audit_is_a_subcommand_whose_help_lists_only_its_flags(audit: str,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    capsys.readouterr()
    with pytest.raises(SystemExit) as exit_:
        cli.main(["audit", audit, "--help"], io.StringIO())
    help_text = capsys.readouterr().out
    assert exit_.value.code == 0 and help_text.startswith(f"usage: kraft-replay audit {audit} ")
    listed = set(re.findall(r"(?<![\w-])--[a-z][a-z-]*", help_text.split("options:")[1]))
    assert AUDIT_FLAGS[audit] <= listed and listed <= AUDIT_FLAGS[audit] | COMMON_FLAGS
    assert not (EVERY_AUDIT_FLAG - AUDIT_FLAGS[audit]) & listed
    assert "--format" not in help_text and "--cluster " not in help_text  # the old spellings are not offered


def test_audit_subcommands_check_their_own_flags(fake_spark: dict[str, list[Any]],
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    code, err = run_usage(["audit", "who-can", *LAKE, "--topic", "t"], capsys)
    assert code == cli.EXIT_USAGE and "the following arguments are required: --operation" in err
    code, err = run_usage(["audit", "who-can", *LAKE, "--operation", "READ"], capsys)
    assert code == cli.EXIT_USAGE and "one of the arguments --topic --group" in err
    code, err = run_usage(["audit", "risky", *LAKE, "--principal", "User:a"], capsys)  # another audit's flag
    assert code == cli.EXIT_USAGE and "unrecognized arguments: --principal User:a" in err
    code, err = run_usage(["audit", "changes", *LAKE, "--as-of-offset", "3"], capsys)
    assert code == cli.EXIT_USAGE and "unrecognized arguments: --as-of-offset 3" in err
    code, err = run_usage(["audit", *LAKE], capsys)
    assert code == cli.EXIT_USAGE and "invalid choice" in err and "who-can" in err


@pytest.mark.parametrize("fmt", ["json", "jsonl", "csv"])
def test_audits_in_every_output(fmt: str, fake_spark: dict[str, list[Any]], tmp_path: Path,
                                capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["who-can", "--operation", "READ", "--topic", "payments", "--as-of-offset", "2"],
                 ["what-can", "--principal", "User:alice"], ["timeline", "--topic", "payments"], ["risky"]):
        code, out, _ = run(["audit", argv[0], *LAKE, *argv[1:], "--output", fmt], capsys)
        (row,) = parsed(fmt, out)
        assert code == 0 and row["who"] == "User:alice", argv
        assert row["via"] == (WHO_CAN[0]["via"][0] if fmt == "csv" else WHO_CAN[0]["via"])
    assert fake_spark["audits"][0] == ("who-can", "prod", ("READ", "TOPIC", "payments"),
                                       {"offset": 2, "time": None, "super_users": "", "allow_everyone": False})
    _, out, _ = run(["--output", fmt, "audit", "changes", *LAKE, "--from-offset", "0"], capsys)
    if fmt == "json":  # two answers: one object of both
        doc = json.loads(out)
        assert list(doc) == ["acl_changes", "access_changes"] and doc["acl_changes"][0]["acl_id"] == ID_A
    else:  # one stream, each row led by its answer's name
        rows = parsed(fmt, out)
        assert [r["audit"] for r in rows] == ["acl_changes", "access_changes"]
    _, out, _ = run(["audit", "who-can", *LAKE, "--operation", "READ", "--topic", "payments"], capsys)
    assert [line.rstrip() for line in out.splitlines()[:2]] == ["== who can: 1 row(s)", "who"]  # summary columns


def test_audit_avro_is_a_file(fake_spark: dict[str, list[Any]], tmp_path: Path,
                              capsys: pytest.CaptureFixture[str]) -> None:
    from replay.kafka.outputs import read_avro

    path = str(tmp_path / "risky.avro")
    code, out, err = run(["audit", "risky", *LAKE, "--avro", path], capsys)
    assert code == 0 and out == "" and "wrote 1 risky_grants row(s) as Avro" in err
    assert [r["audit"] for r in read_avro(path)] == ["risky_grants"]


def test_a_catalog_must_be_catalog_schema_or_schema(capsys: pytest.CaptureFixture[str], tmp_path: Path) -> None:
    code, out, err = run(["replay", "--catalog", "a.b.c", "--lake-cluster", "x"], capsys)
    assert code == cli.EXIT_USAGE and out == ""
    assert "--catalog takes CATALOG.SCHEMA or SCHEMA" in err and "--lake DIR" in err and "Traceback" not in err


def test_a_spark_command_without_spark_says_what_to_install(tmp_path: Path) -> None:
    """Without the [spark] extra (pyspark is made unimportable here): one line saying what to install."""
    program = ("import sys; sys.modules['pyspark'] = None\n"
               "from replay import cli\n"
               f"sys.exit(cli.main(['ingest', {str(tmp_path)!r}, '--lake-cluster', 'c', '--lake', "
               f"{str(tmp_path / 'lake')!r}]))")
    done = subprocess.run([sys.executable, "-c", program], capture_output=True, text=True, timeout=120)
    assert done.returncode == cli.EXIT_FAILED, done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    assert "kraft-replay ingest: this command runs on Spark, and pyspark is not installed" in lines[0]
    assert "pip install 'kraft-acl-replay[spark]'" in lines[0]


def test_lake_questions_start_a_short_lived_jvm_and_bulk_work_does_not() -> None:
    """A question's Spark driver lives seconds (`session.QUICK_JVM_OPTIONS`); ingests, replays, watching, a requests
    file and the audits that read authorizer logs run long enough for Spark's full JIT to pay off."""
    def short(*argv: str) -> bool:
        return cli._short_lived(cli.build_parser().parse_args(list(argv)))

    assert short("acls", *LAKE) and short("sql", "--lake", "/tmp/lake", "SELECT 1") and short("history", *LAKE)
    assert short("audit", "who-can", *LAKE, "--operation", "READ", "--topic", "t")
    assert short("authorize", *LAKE, "--principal", "User:a", "--operation", "READ", "--topic", "t")
    assert not short("authorize", *LAKE, "--requests", "q.csv", "--out", "d.csv")
    assert not short("replay", *LAKE) and not short("ingest", "/dump", *LAKE) and not short("watch", "/dumps", *LAKE)
    assert not short("audit", "unused", *LAKE) and not short("audit", "verify-log", *LAKE)


def test_an_ingest_or_replay_of_little_starts_a_short_lived_jvm(tmp_path: Path) -> None:
    """Dumps and bronze rows of fewer than `cli.SMALL_WORK_BYTES`, all local, are an ingest or replay that ends soon
    (C1 alone compiles enough); more, a remote lake, or inputs not there to count are bulk work."""
    def short(*argv: str) -> bool:
        return cli._short_lived(cli.build_parser().parse_args(list(argv)))

    dump, lake = tmp_path / "dump", tmp_path / "lake"
    dump.mkdir()
    (dump / "00000000000000000000.log").write_bytes(b"x" * 1000)
    assert short("ingest", str(dump), "--lake", str(lake), "--lake-cluster", "c")  # a new lake
    assert not short("replay", "--lake", str(lake), "--lake-cluster", "c")  # no bronze rows to replay: not known to be small
    (lake / "metadata_records").mkdir(parents=True)
    (lake / "metadata_records" / "part-0.parquet").write_bytes(b"x" * 1000)
    assert short("replay", "--lake", str(lake), "--lake-cluster", "c") and short("ingest", str(dump), "--lake", str(lake), "--lake-cluster", "c")
    assert not short("ingest", str(dump), "--lake", "s3://bucket/lake", "--lake-cluster", "c")
    assert not short("ingest", str(tmp_path / "missing"), "--lake", str(lake), "--lake-cluster", "c")
    with open(lake / "metadata_records" / "part-1.parquet", "wb") as f:  # the lake grew past it
        f.truncate(cli.SMALL_WORK_BYTES)
    assert not short("replay", "--lake", str(lake), "--lake-cluster", "c") and not short("ingest", str(dump), "--lake", str(lake), "--lake-cluster", "c")
    assert not short("watch", str(dump), "--lake", str(tmp_path / "new"), "--lake-cluster", "c")  # a watch runs on
