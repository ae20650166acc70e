"""dump-log text: our rendering against Kafka 4.3.1's own DumpLogSegments (the oracle), and reading it back."""

from __future__ import annotations

import io
import json
import os
import random
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest

from replay.kafka import batch as batch_reader
from replay.kafka import dumplog, message, schemas, writer
from replay.kafka.model import Batch, Problem, ProblemKind, Record

T0 = 1_700_000_000_000
ACL_A = "ASNFZ4mrze8P7cuph2VDIQ"
ACL_B = "EREREREREREiIiIiIiIiIg"


# ---- a corpus of files written with our writer ----------------------------------------------------------------


def _value_for(fld: schemas.Field, version: int, rng: random.Random, depth: int = 0) -> Any:
    """A non-default value for a field (so tagged fields get written and printed)."""
    if fld.nullable_in(version) and rng.random() < 0.2:
        return None
    if fld.is_array:
        n = rng.randint(1, 2)
        if fld.struct is not None:
            return [_struct_value(fld.struct, version, rng, depth + 1) for _ in range(n)]
        return [_scalar(fld.element_type, rng) for _ in range(n)]
    if fld.struct is not None:
        return _struct_value(fld.struct, version, rng, depth + 1)
    return _scalar(fld.type, rng)


def _scalar(kind: str, rng: random.Random) -> Any:
    if kind == "bool":
        return True
    if kind == "int8":
        return rng.randint(1, 100)
    if kind == "int16":
        return rng.randint(1, 30000)
    if kind == "uint16":
        return rng.randint(1, 65535)
    if kind == "int32":
        return rng.randint(1, 2**31 - 1)
    if kind == "uint32":
        return rng.randint(1, 2**32 - 1)
    if kind == "int64":
        return rng.randint(1, 2**63 - 1)
    if kind == "float64":
        return rng.choice([1.5, 1.0e7, 0.001, 123456.789, 1e-5, 2.5e21])
    if kind == "string":
        return rng.choice(["User:alice", "payments", "é✓ \"quoted\"\n", "*", "a\\b"])
    if kind == "bytes":
        return bytes(rng.getrandbits(8) for _ in range(rng.randint(1, 9)))
    if kind == "uuid":
        return schemas.uuid_text(bytes(rng.getrandbits(8) for _ in range(16)))
    raise AssertionError(kind)


def _struct_value(st: schemas.Struct, version: int, rng: random.Random, depth: int = 0) -> dict[str, Any]:
    return {f.json_name: _value_for(f, version, rng, depth) for f in st.fields if f.present_in(version)}


def every_record(seed: int = 7) -> list[writer.RecordInput]:
    """One record per metadata type and version that Kafka 4.3.1 knows, with non-default values."""
    rng = random.Random(seed)
    out = []
    for api_key, schema in sorted(schemas.METADATA_SCHEMAS.items()):
        if not schema.in_kafka_431:
            continue
        for version in range(schema.valid_versions.lo, schema.max_version + 1):
            out.append(writer.metadata_record(api_key, version, _struct_value(schema.struct, version, rng)))
    return out


def voters_record() -> writer.RecordInput:
    return writer.control_record(writer.KRAFT_VOTERS, {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": ACL_B,
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1}}]})


def _acl(acl_id: str, principal: str) -> writer.RecordInput:
    return writer.acl_record(acl_id, {"resourceType": 2, "resourceName": "foo", "patternType": 3,
                                      "principal": principal, "host": "*", "operation": 3, "permissionType": 3})


def tagged_acl() -> writer.RecordInput:
    """An ACL record with tagged fields its schema does not know (a newer writer's)."""
    return writer.metadata_record(18, 0, {"id": ACL_B, "resourceType": 2, "resourceName": "foo", "patternType": 3,
                                          "principal": "User:tags", "host": "*", "operation": 3, "permissionType": 3},
                                  unknown_tags={5: b"\xab\xcd", 31: b""})


def tagged_voters() -> writer.RecordInput:
    """A VotersRecord with unknown tags at the top and in nested structs."""
    return writer.control_record(writer.KRAFT_VOTERS, {"version": 0, "voters": [{
        "voterId": 1, "voterDirectoryId": ACL_B,
        "endpoints": [{"name": "CONTROLLER", "host": "localhost", "port": 9093, "_unknownTags": {9: b"\xee"}}],
        "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1},
        "_unknownTags": {10: b""}}]}, unknown_tags={3: b"\x01"})


def without_unknown_tags(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: without_unknown_tags(v) for k, v in value.items() if k != message.UNKNOWN_TAGS_KEY}
    if isinstance(value, list):
        return [without_unknown_tags(v) for v in value]
    return value


BAD_VALUES = [  # values Kafka cannot read, each with its own error text
    None, b"", b"\x01", b"\x01\x12", b"\x00\x14\x00\x00", b"\x02\x14\x00\x00", b"\x01\x08\xff\xff\xff\x7f",
    b"\x01\xff\x7f\x00", b"\x01\x80\x80\x02\x00", b"\x01\x06\x00\x00", b"\x01\x1d\x00\x00\x00\x00\x05\x00",
    b"\x01\x14\x00\x00\xff", b"\x01\x12\x00" + bytes(16) + b"\x02\x04foo", b"\x01\x14\x05\x00",
    b"\x01\x12\x01" + bytes(16) + b"\x02\x04foo\x03\x0bUser:alice\x02*\x03\x03\x00",
]


def build_corpus(d: Path) -> dict[str, str]:
    """Every kind of file and batch we can make; returns name -> path."""
    d.mkdir(parents=True, exist_ok=True)
    files: dict[str, str] = {}
    seg = d / "a"
    with writer.SegmentWriter(str(seg), 0, epoch=1, timestamp=T0, time_step=1) as w:
        w.append_leader_change(1, [1, 2, 3])
        w.append_control([writer.leader_change(1, [1]), writer.kraft_version(1), voters_record()])
        w.append([writer.feature_level("metadata.version", 21), _acl(ACL_A, "User:alice"), writer.noop()])
        w.append([writer.begin_txn("txn"), _acl(ACL_B, "User:bob"), writer.remove_acl_record(ACL_A),
                  writer.end_txn()])
        w.append([writer.begin_txn(None), _acl(ACL_A, "User:carol"), writer.abort_txn("Controller failover")])
        for codec in ("gzip", "snappy", "lz4", "zstd"):
            w.append([writer.noop(), _acl(ACL_A, f"User:{codec}"), writer.remove_acl_record(ACL_A)], codec=codec)
        w.append([writer.noop(), tagged_acl()])  # Kafka reads unknown tags and never prints them
        w.append_control([tagged_voters()])
        records = every_record()
        for start in range(0, len(records), 7):
            w.append(records[start:start + 7], codec=["none", "gzip", "zstd"][start % 3])
        w.append([writer.RecordInput(v) for v in BAD_VALUES])
        w.append([writer.RecordInput(b"\x00\x00", control_type=9),
                  writer.control_record(writer.COMMIT, {"version": 0, "coordinatorEpoch": 5}),
                  writer.control_record(writer.ABORT, {"version": 0, "coordinatorEpoch": 7})], control=True)
        off = w.next_offset
        # odd header facts: LogAppendTime, a producer, sequences, transactional, headers, timestamp deltas
        w.write_raw(writer.encode_batch(
            off, [writer.RecordInput(writer.noop().value, headers=(("h1", b"x"), ("h2", None)), timestamp_delta=3),
                  writer.RecordInput(writer.noop().value, timestamp_delta=-2)],
            epoch=2, timestamp=T0 + 50, max_timestamp=T0 + 60, producer_id=77, producer_epoch=3,
            base_sequence=2**31 - 2, transactional=True))
        w.write_raw(writer.encode_batch(off + 2, [writer.noop(), writer.noop()], epoch=2, timestamp=T0 + 70,
                                        max_timestamp=T0 + 99, log_append_time=True, codec="lz4"))
        w.write_raw(writer.corrupt_crc(writer.encode_batch(off + 4, [_acl(ACL_B, "User:crc")], epoch=2,
                                                           timestamp=T0 + 80)))
        w.write_raw(writer.corrupt_body(writer.encode_batch(off + 5, [writer.feature_level("x.version", 1)],
                                                            epoch=2, timestamp=T0 + 81), at=70))
        w.write_raw(writer.encode_batch(off + 6, [writer.noop()], epoch=2, timestamp=T0 + 90)[:40])  # partial tail
    files["segment"] = w.path
    with writer.SegmentWriter(str(d / "b"), 500, epoch=4, timestamp=T0) as w:  # offsets out of order
        w.append([writer.noop()])
        w.write_raw(writer.encode_batch(505, [writer.noop(), writer.noop()], epoch=4, timestamp=T0))
        w.write_raw(writer.encode_batch(503, [writer.noop()], epoch=4, timestamp=T0))
        w.write_raw(b"\x00" * 16)  # fewer than 17 bytes: a short tail
    files["gaps"] = w.path
    files["snapshot"] = writer.write_snapshot(
        str(d / "a"), 12, 2, [writer.feature_level("metadata.version", 21), _acl(ACL_B, "User:bob"),
                              *every_record(3)[:5]],
        T0 + 3, kraft_version_records=[writer.kraft_version(1), voters_record()], batch_size=3, codec="snappy")
    files["bootstrap"] = writer.write_bootstrap(str(d / "a"), [writer.feature_level("metadata.version", 21),
                                                               _acl(ACL_A, "User:admin")])
    (d / "notes.txt").write_text("not a log\n")
    files["unknown"] = str(d / "notes.txt")
    with writer.SegmentWriter(str(d / "c"), 0, epoch=1, timestamp=T0) as w:  # Kafka dies on this one
        w.append([writer.noop()])
        w.write_raw(b"\x00" * 40)
    files["crash"] = w.path
    return files


ORDER = ["segment", "gaps", "snapshot", "bootstrap", "unknown", "crash"]


@pytest.fixture(scope="module")
def corpus(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    return build_corpus(tmp_path_factory.mktemp("dumplog"))


# ---- the oracle -------------------------------------------------------------------------------------------------


def _classpath() -> str | None:
    if shutil.which("java") is None:
        return None
    try:
        from replay import maven

        return os.pathsep.join(str(p) for p in maven.kafka_jars())
    except Exception:
        return None


def run_kafka(paths: list[str], skip: bool) -> tuple[list[str], list[str]]:
    cp = _classpath()
    if cp is None:
        pytest.fail("java or the Kafka 4.3.1 jars are missing: run `make setup` (python -m replay.maven) first")
    args = ["java", "-cp", cp, "org.apache.kafka.tools.DumpLogSegments", "--cluster-metadata-decoder",
            "--files", ",".join(paths)]
    if skip:
        args.append("--skip-record-metadata")
    proc = subprocess.run(args, capture_output=True, text=True, timeout=120)
    err = [line for line in proc.stderr.splitlines() if not line.startswith(("SLF4J", "\tat "))]
    return proc.stdout.splitlines(), err


@pytest.fixture(scope="module", params=[False, True], ids=["full", "skip-record-metadata"])
def oracle(request: pytest.FixtureRequest, corpus: dict[str, str]) -> tuple[bool, list[str], list[str]]:
    paths = [corpus[k] for k in ORDER]
    out, err = run_kafka(paths, request.param)
    return request.param, out, err


@pytest.mark.jvm
def test_stdout_equals_kafka_line_for_line(oracle: tuple[bool, list[str], list[str]],
                                           corpus: dict[str, str]) -> None:
    skip, theirs, _ = oracle
    ours = list(dumplog.render_files([corpus[k] for k in ORDER], "4.3", skip, show_secrets=True))
    assert len(theirs) > 100
    for i, (a, b) in enumerate(zip(theirs, ours, strict=False)):
        assert b == a, f"line {i + 1} differs"
    assert len(ours) == len(theirs)


@pytest.mark.jvm
def test_secrets_are_the_only_difference_by_default(oracle: tuple[bool, list[str], list[str]],
                                                    corpus: dict[str, str]) -> None:
    """Without `show_secrets` the lines are Kafka's but for the SCRAM credentials and password configs, each
    replaced by a marker (`replay.kafka.secrets`); the value's size is the redacted value's."""
    skip, theirs, _ = oracle
    ours = list(dumplog.render_files([corpus[k] for k in ORDER], "4.3", skip))
    assert len(ours) == len(theirs)
    changed = [(a, b) for a, b in zip(theirs, ours, strict=True) if a != b]
    scram = [(a, b) for a, b in changed if "USER_SCRAM_CREDENTIAL_RECORD" in a]
    assert scram or skip  # the corpus holds SCRAM records (their payload is printed unless metadata is skipped)
    for a, b in changed:
        assert "USER_SCRAM_CREDENTIAL_RECORD" in a or "CONFIG_RECORD" in a, a
        secrets_in_a = re.findall(r'"(?:salt|storedKey|serverKey|value)":"([^"]*)"', a)
        assert secrets_in_a and "(redacted " in b
        for secret in secrets_in_a:
            assert f'"{secret}"' not in b or secret == "", (secret, b)
        def same_but_secrets(line: str) -> str:
            line = re.sub(r"valueSize: \d+", "valueSize: _", line)
            return re.sub(r'"(salt|storedKey|serverKey|value)":"[^"]*"', r'"\1":_', line)

        assert same_but_secrets(a) == same_but_secrets(b)


@pytest.mark.jvm
def test_stderr_equals_kafka(oracle: tuple[bool, list[str], list[str]], corpus: dict[str, str]) -> None:
    skip, _, theirs = oracle
    renderer = dumplog.DumpLogRenderer("4.3", skip)
    for _ in renderer.render_files([corpus[k] for k in ORDER]):
        pass
    assert renderer.failed is not None  # the last file kills the tool; the report of gaps is never printed
    assert renderer.stderr == theirs


@pytest.mark.jvm
def test_nonconsecutive_report_equals_kafka(corpus: dict[str, str]) -> None:
    paths = [corpus["gaps"], corpus["segment"], corpus["snapshot"]]
    theirs_out, theirs_err = run_kafka(paths, False)
    err: list[str] = []
    assert list(dumplog.render_files(paths, stderr=err, show_secrets=True)) == theirs_out
    assert err == theirs_err
    assert any("is followed by" in line for line in err)


@pytest.mark.jvm
def test_every_record_type_is_in_the_oracle_run(corpus: dict[str, str]) -> None:
    types = set()
    for item in batch_reader.read_file(corpus["segment"]):
        if isinstance(item, Batch):
            types |= {r.type_name for r in item.records if r.type_name}
    expected = {s.type_name for s in schemas.METADATA_SCHEMAS.values() if s.in_kafka_431}
    assert expected <= types
    assert {"LEADER_CHANGE", "KRAFT_VERSION", "KRAFT_VOTERS", "COMMIT", "ABORT"} <= types


# ---- variants -------------------------------------------------------------------------------------------------


def test_variant_differences(corpus: dict[str, str]) -> None:
    full43 = list(dumplog.render_file(corpus["segment"], "4.3"))
    full41 = list(dumplog.render_file(corpus["segment"], "4.1"))
    full40 = list(dumplog.render_file(corpus["segment"], "4.0"))
    assert full41 == full43
    changed = [(a, b) for a, b in zip(full41, full40, strict=True) if a != b]
    assert changed and all(" LeaderChange: {" in a and b.endswith(" controlType: LEADER_CHANGE(2)")
                           for a, b in changed)
    skip43 = list(dumplog.render_file(corpus["segment"], "4.3", True))
    skip41 = list(dumplog.render_file(corpus["segment"], "4.1", True))
    assert any(line.startswith("| payload: {") for line in skip43)
    assert [line.replace("| payload: ", " payload: ", 1) for line in skip43] == skip41
    assert "" in skip43  # control records print empty lines


def test_scala_nonconsecutive_report_skips_the_first_record_and_lists_newest_first(corpus: dict[str, str]) -> None:
    reports = {}
    for variant in ("4.1", "4.3"):
        r = dumplog.DumpLogRenderer(variant, cwd="/x")
        list(r.render_files([corpus["gaps"]]))
        reports[variant] = r.stderr
    assert reports["4.3"][1:] == ["  -1 is followed by 500", "  500 is followed by 505", "  506 is followed by 503"]
    assert reports["4.1"][1:] == ["  506 is followed by 503", "  500 is followed by 505"]


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError):
        list(dumplog.render_file("x.log", "3.9"))


# ---- reading text back ----------------------------------------------------------------------------------------


def _records(items: list[Batch | Problem]) -> list[tuple[str, int, Any, Any, Any]]:
    out = []
    for item in items:
        if isinstance(item, Batch):
            for r in item.records:
                out.append((item.source, r.offset, r.type_name, r.version, r.data))
    return out


@pytest.mark.parametrize("variant", dumplog.VARIANTS)
@pytest.mark.parametrize("skip", [False, True], ids=["full", "skip"])
def test_parse_text_gives_back_the_records(corpus: dict[str, str], variant: str, skip: bool) -> None:
    paths = [corpus[k] for k in ["segment", "gaps", "snapshot", "bootstrap"]]
    text = list(dumplog.render_files(paths, variant, skip))
    parsed = list(dumplog.parse_text(text, "dump.txt"))
    decoded: list[Batch | Problem] = []
    for p in paths:
        for item in batch_reader.read_file(p):
            if isinstance(item, Batch):
                item.source = p
            decoded.append(item)
    ours = [b for b in parsed if isinstance(b, Batch)]
    theirs = [b for b in decoded if isinstance(b, Batch)]
    assert [b.source for b in ours] == [b.source for b in theirs]
    for a, b in zip(ours, theirs, strict=True):
        assert a.header.base_offset == b.header.base_offset
        assert a.header.last_offset == b.header.last_offset
        assert a.header.position == b.header.position and a.header.size == b.header.size
        assert a.header.crc == b.header.crc and a.header.crc_ok == b.header.crc_ok
        assert a.header.attributes == b.header.attributes and a.header.max_timestamp == b.header.max_timestamp
        assert len(a.records) == len(b.records)
        for ra, rb in zip(a.records, b.records, strict=True):
            if skip:
                assert ra.offset == a.header.base_offset + a.records.index(ra)
            else:
                assert (ra.offset, ra.timestamp, ra.key) == (rb.offset, rb.timestamp, rb.key)
                assert [k for k, _ in ra.headers] == [k for k, _ in rb.headers]
            tagged = bool(message.unknown_tags_by_path(rb.data, rb.unknown_tags))  # the text cannot hold them
            if rb.is_control:
                assert ra.is_control
                if skip:
                    continue
                assert ra.control_type == rb.control_type
                if rb.data is not None and not (variant == "4.0" and rb.control_type == 2):
                    assert ra.data == without_unknown_tags(rb.data)
                    assert (ra.value == rb.value) != tagged  # re-encoded control bodies are byte-identical here
            elif rb.data is not None and rb.api_key in dumplog.KAFKA_43_API_KEYS:
                assert (ra.type_name, ra.version, ra.data, ra.api_key) == (rb.type_name, rb.version,
                                                                         without_unknown_tags(rb.data), rb.api_key)
                assert (ra.value == rb.value) != tagged
            else:
                assert ra.data is None and ra.error
    problems = [p for p in parsed if isinstance(p, Problem)]
    assert not [p for p in problems if p.kind == ProblemKind.BAD_TEXT_LINE]
    # the snapshot and bootstrap sections are whole, even when the text omits their control records
    assert not [p for p in problems if p.kind in (ProblemKind.SNAPSHOT_NO_HEADER, ProblemKind.SNAPSHOT_NO_FOOTER)]
    assert sum(p.kind == ProblemKind.TRUNCATED_TAIL for p in problems) == 2
    assert any(p.kind == ProblemKind.BAD_RECORD and "Error" not in p.message for p in problems)


def test_sections_carry_the_file_facts(corpus: dict[str, str]) -> None:
    paths = [corpus[k] for k in ["segment", "gaps", "snapshot", "bootstrap"]]
    reader = dumplog.DumpTextReader("dump.txt")
    batches = [b for b in reader.read(dumplog.render_files(paths)) if isinstance(b, Batch)]
    assert [s.path for s in reader.sections] == paths
    seg, gaps, snap, boot = reader.sections
    assert (seg.kind, seg.log_start_offset) == ("segment", 0)
    assert (gaps.kind, gaps.log_start_offset, gaps.invalid_tail_bytes) == ("segment", 500, 16)
    assert (snap.kind, snap.snapshot_end_offset, snap.snapshot_epoch) == ("snapshot", 12, 2)
    assert boot.kind == "bootstrap"
    assert {b.source for b in batches} == set(paths)


def test_kafka_output_with_an_unknown_version_parses(tmp_path: Path) -> None:
    text = [
        "Dumping /d/00000000000000000000.log",
        "Log starting offset: 0",
        "baseOffset: 0 lastOffset: 0 count: 1 baseSequence: -1 lastSequence: -1 producerId: -1 producerEpoch: -1 "
        "partitionLeaderEpoch: 1 isTransactional: false isControl: false deleteHorizonMs: OptionalLong.empty "
        "position: 0 CreateTime: 1700000000000 size: 72 magic: 2 compresscodec: none crc: 2956721725 isvalid: true",
        '| offset: 0 CreateTime: 1700000000000 keySize: -1 valueSize: 4 sequence: -1 headerKeys: [] payload: '
        '{"type":"NO_OP_RECORD","version":9,"data":{}}',
    ]
    items = list(dumplog.parse_text(text, "t.txt"))
    assert [p.kind for p in items if isinstance(p, Problem)] == [ProblemKind.UNKNOWN_VERSION]
    (b,) = [i for i in items if isinstance(i, Batch)]
    assert b.records[0].offset == 0 and b.records[0].error


def test_bad_lines_are_reported_with_line_numbers(corpus: dict[str, str]) -> None:
    text = list(dumplog.render_file(corpus["snapshot"]))
    text.insert(3, "garbage in the middle")
    payload = next(i for i, line in enumerate(text) if "payload: {" in line)
    text[payload] = text[payload].replace("payload: {", "payload: {oops", 1)
    text[payload + 1] = "| offset: x"
    text.append("Found many invalid bytes")
    items = list(dumplog.parse_text(iter(text), "pasted.txt"))
    bad = [p for p in items if isinstance(p, Problem) and p.kind == ProblemKind.BAD_TEXT_LINE]
    assert [p.line for p in bad] == [4, payload + 1, payload + 2, len(text)]
    # a line number is never passed off as a byte position
    assert all(p.position is None and p.file == "pasted.txt" for p in bad)
    assert bad[0].describe() == (f"bad_text_line: pasted.txt, line 4: not a dump-log line (in the section dumping "
                                 f"{corpus['snapshot']}): 'garbage in the middle'")
    # the batch around the garbage line keeps its records
    first = next(i for i in items if isinstance(i, Batch))
    assert [r.type_name for r in first.records] == ["SNAPSHOT_HEADER", "KRAFT_VERSION", "KRAFT_VOTERS"]


def test_error_payload_lines_become_problems(corpus: dict[str, str]) -> None:
    text = list(dumplog.render_file(corpus["segment"]))
    errors = [i for i, line in enumerate(text, 1) if "payload: Error at " in line]
    assert len(errors) >= len(BAD_VALUES) - 2  # two of them Kafka reads (a NoOp v5, an ACL v1)
    problems = [p for p in dumplog.parse_text(text, "t") if isinstance(p, Problem) and
                p.kind == ProblemKind.BAD_RECORD]
    assert [p.line for p in problems] == errors
    batch_lines = [i for i, line in enumerate(text, 1) if line.startswith("baseOffset: ")]
    for p in problems:  # the position is the batch's byte position in the dumped file, as the text gives it
        assert p.line is not None
        batch_line = text[max(i for i in batch_lines if i < p.line) - 1]
        assert f" position: {p.position} " in batch_line
        assert p.file == corpus["segment"] and p.offset is not None and f"| offset: {p.offset} " in text[p.line - 1]


def test_text_from_a_file_object(tmp_path: Path, corpus: dict[str, str]) -> None:
    out = tmp_path / "dump.txt"
    out.write_text("\n".join(dumplog.render_file(corpus["bootstrap"])) + "\n")
    with open(out) as fh:
        items = list(dumplog.parse_text(fh, str(out)))
    assert all(isinstance(i, Batch) for i in items)
    assert [r.type_name for b in items if isinstance(b, Batch) for r in b.records] == [
        "SNAPSHOT_HEADER", "FEATURE_LEVEL_RECORD", "ACCESS_CONTROL_ENTRY_RECORD", "SNAPSHOT_FOOTER"]


# ---- render details that need no JVM ----------------------------------------------------------------------------


def test_render_streams_and_names_the_tail(corpus: dict[str, str]) -> None:
    lines = dumplog.render_file(corpus["gaps"])
    assert next(lines) == f"Dumping {corpus['gaps']}"
    assert next(lines) == "Log starting offset: 500"
    rest = list(lines)
    assert rest[-1] == "Found 16 invalid bytes at the end of 00000000000000000500.log"


def test_java_hashmap_order() -> None:
    # "Aa" and "BB" share a hash code, so they share a bucket and keep insertion order.
    assert dumplog.java_string_hash("Aa") == dumplog.java_string_hash("BB") == 2112
    assert dumplog.java_hashmap_order(["BB", "Aa"]) == ["BB", "Aa"]
    assert dumplog.java_string_hash("hello") == 99162322


def test_record_json(corpus: dict[str, str]) -> None:
    objs = []
    for item in batch_reader.read_file(corpus["snapshot"]):
        if isinstance(item, Batch):
            objs += [dumplog.record_json(item, r) for r in item.records]
        else:
            objs.append(dumplog.problem_json(item))
    assert objs[0]["control_type"] == "SNAPSHOT_HEADER"
    assert objs[0]["data"] == {"version": 0, "lastContainedLogTimestamp": T0 + 3}
    acl = next(o for o in objs if o.get("type") == "ACCESS_CONTROL_ENTRY_RECORD")
    assert acl["data"]["principal"] == "User:bob" and acl["version"] == 0
    assert {"source", "position", "base_offset", "last_offset", "epoch", "append_time", "codec", "crc_ok",
            "is_control", "offset", "timestamp"} <= set(acl)
    assert acl["codec"] == "snappy" and acl["epoch"] == 2
    bad = Problem(ProblemKind.BAD_CRC, "m", "f", 3, 4, b"\x01")
    assert dumplog.problem_json(bad) == {"problem": "bad_crc", "message": "m", "file": "f", "position": 3,
                                         "offset": 4, "raw": "AQ=="}


def test_record_json_for_an_undecodable_record() -> None:
    h = batch_reader.parse_header(writer.encode_batch(5, [writer.noop()], epoch=1, timestamp=T0))
    rec = Record(offset=5, timestamp=T0, key=None, value=b"\x01", error="Error while reading type")
    obj = dumplog.record_json(Batch(h, [rec], "f.log"), rec)
    assert obj["data"] is None and obj["error"] == "Error while reading type"
    assert dumplog.payload_text(rec) == "Error at 5, skipping. Error while reading type"


def test_text_sections_route_each_file_and_its_problems(corpus: dict[str, str]) -> None:
    paths = [corpus[k] for k in ["segment", "snapshot", "bootstrap"]]
    items = list(dumplog.parse_text_sections(dumplog.render_files(paths), "t.txt"))
    sections = [i for i in items if isinstance(i, dumplog.Section)]
    assert [s.path for s in sections] == paths
    assert (sections[0].kind, sections[0].log_start_offset) == ("segment", 0)
    assert (sections[1].snapshot_end_offset, sections[1].snapshot_epoch) == (12, 2)
    assert sections[2].is_bootstrap
    current = None
    for item in items:
        if isinstance(item, dumplog.Section):
            current = item
        elif isinstance(item, Batch):
            assert current is not None and item.source == current.path
        else:  # every finding about a dumped file arrives inside that file's section
            assert current is not None and item.file == current.path, item.describe()
    tail = next(i for i in items if isinstance(i, Problem) and i.kind == ProblemKind.TRUNCATED_TAIL)
    segment_batches = [i for i in items if isinstance(i, Batch) and i.source == corpus["segment"]]
    last = segment_batches[-1].header
    assert (tail.position, tail.offset) == (last.position + last.size, last.last_offset + 1)
    assert tail.line == next(n for n, line in enumerate(dumplog.render_files(paths), 1) if line.startswith("Found "))


def test_render_file_reports_decoder_problems(corpus: dict[str, str]) -> None:
    seen: list[Problem] = []
    lines = list(dumplog.render_file(corpus["segment"], problems=seen.append))
    kinds = {p.kind for p in seen}
    assert {ProblemKind.BAD_CRC, ProblemKind.TRUNCATED_TAIL, ProblemKind.BAD_RECORD} <= kinds
    assert lines[-1].startswith("Found 40 invalid bytes at the end of ")


# ---- snapshot structure in text ---------------------------------------------------------------------------------


def _snapshot_text(tmp_path: Path, batches: list[bytes], skip: bool = False) -> tuple[str, list[str]]:
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = tmp_path / "00000000000000000009-0000000002.checkpoint"
    path.write_bytes(b"".join(batches))
    return str(path), list(dumplog.render_file(str(path), skip_record_metadata=skip))


def _snapshot_batches() -> tuple[bytes, bytes, bytes]:
    header = writer.encode_batch(0, [writer.snapshot_header(T0)], 2, T0, control=True)
    data = writer.encode_batch(1, [_acl(ACL_A, "User:alice"), writer.noop()], 2, T0)
    footer = writer.encode_batch(3, [writer.snapshot_footer()], 2, T0, control=True)
    return header, data, footer


@pytest.mark.parametrize("skip", [False, True], ids=["full", "skip"])
def test_text_snapshot_sections_get_structure_problems(tmp_path: Path, skip: bool) -> None:
    header, data, footer = _snapshot_batches()
    _, good_text = _snapshot_text(tmp_path / "good", [header, data, footer], skip)
    bad, bad_text = _snapshot_text(tmp_path / "bad", [data], skip)
    text = good_text + bad_text + ["Dumping /x/bootstrap.checkpoint", "KRaft bootstrap snapshot"]
    items = list(dumplog.parse_text_sections(text, "dump.txt"))
    found: list[tuple[str | None, ProblemKind, int | None, int | None, int | None]] = []
    current = None
    for item in items:
        if isinstance(item, dumplog.Section):
            current = item.path
        elif isinstance(item, Problem):
            assert item.file == current  # in its own section's stream
            found.append((item.file, item.kind, item.line, item.position, item.offset))
    bad_batch_line = len(good_text) + 3
    assert found == [
        (bad, ProblemKind.SNAPSHOT_NO_HEADER, bad_batch_line, 0, 1),
        (bad, ProblemKind.SNAPSHOT_NO_FOOTER, bad_batch_line, 0, 2),
        ("/x/bootstrap.checkpoint", ProblemKind.SNAPSHOT_NO_HEADER, len(text) - 1, 0, 0),
        ("/x/bootstrap.checkpoint", ProblemKind.SNAPSHOT_NO_FOOTER, len(text) - 1, 0, 0),
    ]
    snapshot_problems = [p for p in batch_reader.read_file(bad) if isinstance(p, Problem)]
    assert [(p.kind, p.position, p.offset) for p in snapshot_problems] == [(k, pos, o) for _, k, _, pos, o in found[:2]]


def test_a_log_section_needs_no_snapshot_structure(tmp_path: Path) -> None:
    _, data, _ = _snapshot_batches()
    path = tmp_path / "00000000000000000001.log"
    path.write_bytes(data)
    assert [i for i in dumplog.parse_text(dumplog.render_file(str(path)), "t") if isinstance(i, Problem)] == []


# ---- inspect --output jsonl --------------------------------------------------------------------------------------


def test_record_json_text_shows_unknown_tags_nested_too(corpus: dict[str, str]) -> None:
    lines = []
    for item in batch_reader.read_file(corpus["segment"]):
        if isinstance(item, Batch):
            lines += [dumplog.record_json_text(item, r) for r in item.records
                      if message.unknown_tags_by_path(r.data, r.unknown_tags)]
    acl, voters = (json.loads(line) for line in lines)
    assert acl["unknownTaggedFields"] == {"5": "abcd", "31": ""} and acl["data"]["principal"] == "User:tags"
    assert voters["unknownTaggedFields"] == {"3": "01", "voters[0]": {"10": ""}, "voters[0].endpoints[0]": {"9": "ee"}}
    assert voters["control_type"] == "KRAFT_VOTERS" and "_unknownTags" not in lines[1]
    assert '"data": {"version":0,"voters":[{"voterId":1,' in lines[1]  # Kafka's own JSON text


# ---- against the tool: whole runs ---------------------------------------------------------------------------------


@pytest.mark.jvm
def test_cli_dump_log_over_several_files_equals_kafka(corpus: dict[str, str], capsys: pytest.CaptureFixture[str]) -> None:
    from replay import cli

    for keys in (["gaps", "segment", "snapshot"], ["snapshot", "gaps", "crash", "segment"]):
        paths = [corpus[k] for k in keys]
        theirs_out, theirs_err = run_kafka(paths, False)
        capsys.readouterr()
        out = io.StringIO()
        assert cli.main(["inspect", "--format", "dump-log", "--variant", "4.3", "--show-secrets", *paths], out) == 0
        err = capsys.readouterr().err.splitlines()
        assert out.getvalue().splitlines() == theirs_out
        assert err[0].startswith("warning: --show-secrets: SCRAM salts and keys and password configs are printed")
        summary_at = next(i for i, line in enumerate(err) if re.fullmatch(r"\d+ problem\(s\): .*", line))
        assert err[1:summary_at] == theirs_err  # our problem summary follows what the tool prints


@pytest.mark.jvm
def test_framing_failures_end_the_file_where_kafka_does(tmp_path: Path) -> None:
    b0 = writer.encode_batch(0, [writer.noop(), writer.noop()], 1, T0)
    b1 = writer.encode_batch(2, [writer.noop()], 1, T0)
    cases = {
        "text": b"this is a text file that someone named like a segment\n" * 3,
        "short-first": writer.with_batch_length(b0, 5) + b1,
        "long-first": writer.with_batch_length(b0, 10**6) + b1,
        "magic-past-end": b1 + writer.with_batch_length(writer.with_magic(b0, 1), 10**6) + b1,
        "tiny": b"0123456789",
    }
    paths = []
    for i, (name, data) in enumerate(cases.items()):
        (tmp_path / name).mkdir()
        (tmp_path / name / f"{i:020d}.log").write_bytes(data)
        paths.append(str(tmp_path / name / f"{i:020d}.log"))
    for path in paths:
        theirs_out, theirs_err = run_kafka([path], False)
        err: list[str] = []
        assert list(dumplog.render_files([path], stderr=err)) == theirs_out, path
        assert err == theirs_err, path


# ---- --variant auto: the flavour of the release that wrote the files -------------------------------------------


def _versioned_log(tmp: Path, levels: list[int]) -> str:
    """A segment: a leader change, per level a metadata.version record and a NoOp, a NoOp (the variants print a
    leader change and `--skip-record-metadata` payloads differently)."""
    from replay.kafka import files

    data = writer.encode_batch(0, [writer.leader_change(1, [1])], epoch=1, timestamp=1_700_000_000_000, control=True)
    for i, level in enumerate(levels):
        mv = writer.metadata_record(12, 0, {"name": "metadata.version", "featureLevel": level})
        data += writer.encode_batch(1 + 2 * i, [mv, writer.noop()], epoch=1, timestamp=1_700_000_000_000 + i)
    data += writer.encode_batch(1 + 2 * len(levels), [writer.noop()], epoch=1, timestamp=1_700_000_000_100)
    path = tmp / "__cluster_metadata-0" / files.segment_name(0)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return str(path)


@pytest.mark.parametrize(("levels", "variant", "named"), [
    ([21], "4.0", "3.9-IV0"), ([25], "4.0", "4.0-IV3"), ([26], "4.1", "4.1-IV0"), ([29], "4.1", "4.2-IV1"),
    ([30], "4.3", "4.3-IV0"), ([21, 27], "4.1", "4.1-IV1"),  # upgraded: the level in force at the end counts
    ([], "4.3", None),
])
def test_the_variant_picks_itself_from_metadata_version(tmp_path: Path, capsys: pytest.CaptureFixture[str],
                                                        levels: list[int], variant: str, named: str | None) -> None:
    from replay import cli

    path = _versioned_log(tmp_path, levels)
    chosen = dumplog.choose_variant([path])
    assert chosen.variant == variant
    if named:
        assert chosen.reason.startswith(f"metadata.version {named} (level {levels[-1]}) at offset {2 * len(levels) - 1}")
    else:
        assert chosen.reason.startswith("no metadata.version record in these files")
    for skip in ([], ["--skip-record-metadata"]):
        capsys.readouterr()
        auto, explicit = io.StringIO(), io.StringIO()
        assert cli.main(["inspect", "--format", "dump-log", *skip, path], auto) == 0
        err = capsys.readouterr().err
        assert f"kraft-replay inspect: {chosen.reason}" in err.splitlines()
        assert cli.main(["inspect", "--format", "dump-log", "--variant", variant, *skip, path], explicit) == 0
        assert "kraft-replay inspect: " not in capsys.readouterr().err  # a variant given is not second-guessed
        assert auto.getvalue() == explicit.getvalue()
    texts = {v: tuple(line for skip in (False, True) for line in dumplog.render_files([path], v, skip))
             for v in dumplog.VARIANTS}
    assert len(set(texts.values())) == 3  # the choice matters on this log


def test_a_snapshot_and_a_later_segment_the_highest_offset_decides(tmp_path: Path) -> None:
    from replay.kafka import files

    seg = _versioned_log(tmp_path / "log", [21, 21, 21])  # offsets 1, 3, 5 (and a NoOp at 7)
    snap = tmp_path / "snap" / "__cluster_metadata-0" / files.snapshot_name(3, 1)
    snap.parent.mkdir(parents=True)
    snap.write_bytes(writer.snapshot_bytes([writer.metadata_record(12, 0, {"name": "metadata.version",
                                                                           "featureLevel": 30})], 0, 1))
    assert dumplog.choose_variant([str(snap), seg]).variant == "4.0"  # the segment's offset 5 is later
    later = snap.parent / files.snapshot_name(10, 1)
    snap.rename(later)
    chosen = dumplog.choose_variant([seg, str(later)])
    assert chosen.variant == "4.3" and chosen.reason.startswith("metadata.version 4.3-IV0 (level 30) at offset 9 in ")


@pytest.mark.jvm
def test_auto_equals_the_tool_of_the_release_that_wrote_the_log(tmp_path: Path,
                                                                capsys: pytest.CaptureFixture[str]) -> None:
    """A log at Kafka 4.3's metadata.version, printed by `auto`, is what Kafka 4.3.1's kafka-dump-log prints."""
    from replay import cli

    path = _versioned_log(tmp_path, [21, 30])
    for skip in (False, True):
        theirs, _ = run_kafka([path], skip)
        out = io.StringIO()
        assert cli.main(["inspect", "--format", "dump-log", *(["--skip-record-metadata"] if skip else []), path],
                        out) == 0
        assert out.getvalue().splitlines() == theirs
        assert "variant 4.3" in capsys.readouterr().err


# ---- --skip-record-metadata text: control records without a type ----------------------------------------------


def _summary(err: str) -> list[str]:
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if re.fullmatch(r"\d+ problem\(s\): .*|no problems found", line))
    return lines[at:]


def test_skipped_metadata_text_types_what_a_snapshot_says_and_reports_the_rest(
        tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """Control records print as empty lines: a snapshot's first and last are its header and footer (so it loads);
    the others are one `untyped_record` notice per section; `inspect` and `acls` say the same about the text, and
    `acls` answers as from the binary files."""
    from replay import cli
    from replay.kafka import files

    sample = Path(__file__).resolve().parents[2] / "data" / "small-snapshots"
    sources, _ = files.discover([str(sample)])
    paths = [s.path for s in sources]
    text = tmp_path / "dump.txt"
    text.write_text("\n".join(dumplog.render_files(paths, "4.3", True)) + "\n")
    items = list(dumplog.parse_text(text.read_text().splitlines(), str(text)))
    batches = [i for i in items if isinstance(i, Batch)]
    snaps = [b for b in batches if b.source.endswith(".checkpoint")]
    assert snaps and all(b.records[0].type_name == "SNAPSHOT_HEADER" for b in snaps if b.header.base_offset == 0)
    footers = [r for b in snaps for r in b.records if r.type_name == "SNAPSHOT_FOOTER"]
    assert len(footers) == len({b.source for b in snaps})  # one per snapshot section
    notices = [i for i in items if isinstance(i, Problem)]
    assert notices and {p.kind for p in notices} == {ProblemKind.UNTYPED_RECORD}
    untyped = sum(1 for b in batches for r in b.records if r.control_type == -1)
    assert untyped == sum(int(p.message.split(" ", 1)[0]) for p in notices)
    assert all(p.is_notice and p.line is not None for p in notices)

    reports = []
    for argv in (["inspect", str(text)], ["acls", str(text), "--as-of-offset", "150"]):
        capsys.readouterr()
        assert cli.main(argv, io.StringIO()) == 0
        reports.append(_summary(capsys.readouterr().err))
    assert reports[0] == reports[1] and reports[0][0] == f"{len(notices)} problem(s): untyped_record {len(notices)}"
    for at in ("30", "100", "200"):
        answers = []
        for source in (str(sample), str(text)):
            out = io.StringIO()
            assert cli.main(["acls", source, "--as-of-offset", at], out) == 0
            answers.append(out.getvalue())
        assert answers[0] == answers[1] and answers[0]
