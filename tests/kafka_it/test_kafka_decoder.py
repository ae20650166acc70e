"""Our decoder, dump-log renderer and reference replayer against Kafka itself, on the log a real broker wrote:
`replay.kafka.dumplog.render_file`, `replay.kafka.batch.read_file`, `replay.kafka.dump.replay_paths` with
`ReplayResult.state_at`, and `replay.cli.main`, each against Kafka's DumpLogSegments or describeAcls.
"""

from __future__ import annotations

import io
import re
import subprocess
import sys

import pytest

from replay.kafka.model import Batch, Problem
from tests.harness.dumplog import acl_state, dump_each, payload_records
from tests.harness.itrun import KafkaRun

pytestmark = pytest.mark.kafka

BATCH_LINE = re.compile(
    r"^baseOffset: (\d+) lastOffset: (\d+) count: (\d+) .*?partitionLeaderEpoch: (-?\d+) .*?isControl: (\w+) "
    r".*?position: (\d+) CreateTime: (-?\d+) size: (\d+) magic: 2 compresscodec: (\w+) crc: (\d+) isvalid: (\w+)$"
)


def _ours(path: str, skip_record_metadata: bool = False, show_secrets: bool = True) -> list[str]:
    from replay.kafka.dumplog import render_file

    return [line.rstrip("\n") for line in render_file(path, skip_record_metadata=skip_record_metadata,
                                                       show_secrets=show_secrets)]


def test_render_file_matches_kafka_dump_log(kafka_run: KafkaRun) -> None:
    """`kraft-replay inspect --format dump-log --show-secrets` is byte-for-byte Kafka 4.3's DumpLogSegments, on every
    file."""
    for f in kafka_run.dump_files():
        path = str(f.resolve())
        assert _ours(path) == kafka_run.kafka_dump(f).splitlines(), f.name


def test_the_scram_credential_the_broker_wrote_is_redacted(kafka_run: KafkaRun) -> None:
    """The history creates a SCRAM user (`itrun.SCRAM_USER`): Kafka's tool prints its salt, stored key and server
    key; by default we print markers instead, and every other line as Kafka does (issue 18 item 3)."""
    from replay.kafka import secrets

    seen = 0
    for f in kafka_run.dump_files():
        theirs = kafka_run.kafka_dump(f).splitlines()
        ours = _ours(str(f.resolve()), show_secrets=False)
        assert len(ours) == len(theirs), f.name
        for a, b in zip(theirs, ours, strict=True):
            if "USER_SCRAM_CREDENTIAL_RECORD" not in a:
                assert a == b, f.name
                continue
            seen += 1
            values = re.findall(r'"(?:salt|storedKey|serverKey)":"([^"]+)"', a)
            assert len(values) == 3 and '"name":"harness-user"' in a
            for value in values:
                assert value not in b
            assert len(re.findall(r'"(?:salt|storedKey|serverKey)":"\(redacted [0-9a-f]{12}\)"', b)) == 3
            assert secrets.MARKER_RE.search(b)
    assert seen >= 1  # in the log, and in every snapshot taken after it


def test_render_file_skip_record_metadata_matches_kafka(kafka_run: KafkaRun) -> None:
    theirs = dump_each(kafka_run.dump_files(), skip_record_metadata=True)
    for f, text in theirs.items():
        assert _ours(str(f), skip_record_metadata=True) == text.splitlines(), f.name


def test_cli_inspect_dump_log_matches_kafka(kafka_run: KafkaRun) -> None:
    from replay.cli import main

    for f in [kafka_run.segments()[0], kafka_run.snapshots()[-1]]:
        out = io.StringIO()
        assert main(["inspect", "--format", "dump-log", "--show-secrets", str(f.resolve())], out=out) == 0
        assert out.getvalue() == kafka_run.kafka_dump(f), f.name
    # and the real command line, once
    f = kafka_run.segments()[-1]
    proc = subprocess.run([sys.executable, "-m", "replay.cli", "inspect", "--format", "dump-log", "--show-secrets",
                           str(f.resolve())],
                          capture_output=True, text=True, encoding="utf-8", check=True)
    assert proc.stdout == kafka_run.kafka_dump(f)


def test_read_file_batches_match_kafka(kafka_run: KafkaRun) -> None:
    """Every batch header we decode equals what Kafka printed for it; no problems on a healthy log."""
    from replay.kafka.batch import read_file

    for f in kafka_run.dump_files():
        items = list(read_file(str(f)))
        assert not [p for p in items if isinstance(p, Problem)], f.name
        ours = [
            (b.header.base_offset, b.header.last_offset, b.header.records_count, b.header.partition_leader_epoch,
             b.header.is_control, b.header.position, b.header.max_timestamp, b.header.size, b.header.codec_name,
             b.header.crc, b.header.crc_ok)
            for b in items if isinstance(b, Batch)
        ]
        theirs = []
        for line in kafka_run.kafka_dump(f).splitlines():
            m = BATCH_LINE.match(line)
            if m:
                g = m.groups()
                theirs.append((int(g[0]), int(g[1]), int(g[2]), int(g[3]), g[4] == "true", int(g[5]), int(g[6]),
                               int(g[7]), g[8], int(g[9]), g[10] == "true"))
        assert theirs, f.name
        assert ours == theirs, f.name


def test_reference_replayer_matches_checkpoints(kafka_run: KafkaRun) -> None:
    """The reference replayer's state as of each checkpoint offset is exactly what describeAcls returned."""
    from replay.kafka.dump import replay_paths

    result = replay_paths([str(kafka_run.metadata_log_dir)])
    assert kafka_run.checkpoints
    for cp in kafka_run.checkpoints:
        for offset in (cp["as_of_offset"], cp["high_watermark_after"] - 1):
            state = result.state_at(offset)
            assert state.exact, (cp["label"], offset)
            assert frozenset(state.certain.values()) == cp["acls"], (cp["label"], offset)


def test_reference_replayer_agrees_with_kafka_ids_and_reports_nothing(kafka_run: KafkaRun) -> None:
    """ACL ids at the end equal Kafka's own decoding; snapshots agree with the log: no anomalies on a clean run."""
    from replay.kafka.dump import replay_paths

    result = replay_paths([str(kafka_run.metadata_log_dir)])
    assert [a.describe() for a in result.anomalies] == []
    records = [r for seg in kafka_run.segments() for r in payload_records(kafka_run.kafka_dump(seg))]
    assert result.live_at_end() == acl_state(records)
