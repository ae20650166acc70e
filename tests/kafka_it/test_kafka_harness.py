"""The harness itself, against a real broker: it starts and stops, the history ran as scripted, the metadata log
has the shape we need, and Kafka's own tools read every file. The oracles here use only Kafka's decoding
(DumpLogSegments), not ours."""

from __future__ import annotations

import json
import socket
from collections import Counter
from pathlib import Path

import pytest

import tests.harness.broker as broker_module
from replay.kafka.acl import AclBinding
from tests.harness import make_samples
from tests.harness.broker import SHORT_SNAPSHOT_INTERVAL_MS, KafkaBroker, _alive
from tests.harness.dumplog import acl_state, dump_each, payload_records
from tests.harness.histories import PROFILES, filter_matches, generate, simulate
from tests.harness.itrun import DEFAULT_PROFILE, DEFAULT_SEED, KafkaRun

pytestmark = pytest.mark.kafka


def _log_records(run: KafkaRun) -> list:
    return [r for seg in run.segments() for r in payload_records(run.kafka_dump(seg))]


def _mid_history_snapshots(run: KafkaRun) -> list[Path]:
    """Snapshots written while the history was being played: end offset after the first checkpoint's offset and
    at most the last one's."""
    first, last = run.checkpoints[0]["as_of_offset"], run.checkpoints[-1]["as_of_offset"]
    return [s for s in run.snapshots() if first < int(s.name[:20]) <= last]


def test_broker_started_and_stopped_cleanly(kafka_run: KafkaRun) -> None:
    assert 0 < kafka_run.start_seconds < 120
    assert kafka_run.stop_result == "term", "SIGTERM should be enough for a clean shutdown"
    assert not _alive(kafka_run.pid)
    meta = (kafka_run.metadata_log_dir / "meta.properties").read_text()
    assert f"cluster.id={kafka_run.cluster_id}" in meta
    assert "node.id=1" in meta


def test_history_ran_without_errors(kafka_run: KafkaRun) -> None:
    s = kafka_run.summary
    assert s["errors"] == 0
    # and the SCRAM user (`itrun.SCRAM_USER`), and the bulk create and delete
    assert s["operations"] == PROFILES[kafka_run.profile].operations + 1 + 2 * bool(PROFILES[kafka_run.profile].bulk)
    assert [op["user"] for op in kafka_run.op_log if op["op"] == "scram"] == ["harness-user"]
    assert s["checkpoints"] == sum(op["op"] == "checkpoint" for op in kafka_run.ops) == len(kafka_run.checkpoints)
    assert s["checkpoint_mismatches"] == 0
    assert all(cp["matches_expected"] for cp in kafka_run.checkpoints)
    assert len(kafka_run.op_log) == s["operations"]


def test_checkpoints_follow_kafka_filter_semantics(kafka_run: KafkaRun) -> None:
    """describeAcls at every checkpoint equals our model of CreateAcls (a set) and DeleteAcls (filter matching)."""
    expected = list(simulate(kafka_run.ops))
    assert expected
    assert [e.label for e in expected] == [cp["label"] for cp in kafka_run.checkpoints]
    for e, cp in zip(expected, kafka_run.checkpoints, strict=True):
        assert cp["ops_done"] == e.ops_done
        assert cp["acls"] == e.acls, cp["label"]


def test_checkpoint_offsets_are_consistent(kafka_run: KafkaRun) -> None:
    previous = -1
    for cp in kafka_run.checkpoints:
        assert cp["as_of_offset"] == cp["log_end_offset"] - 1
        assert cp["high_watermark"] >= cp["log_end_offset"]
        assert cp["high_watermark_after"] >= cp["high_watermark"]
        assert cp["log_end_offset_after"] >= cp["high_watermark_after"]
        assert cp["as_of_offset"] >= previous
        previous = cp["as_of_offset"]
    ends = [op["log_end_offset"] for op in kafka_run.op_log]
    assert ends == sorted(ends)


def test_history_covers_the_acl_space(kafka_run: KafkaRun) -> None:
    created = [AclBinding(**a) for op in kafka_run.op_log if op["op"] == "create" for a in op["created"]]
    assert {b.resource_type for b in created} == {"TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID",
                                                  "DELEGATION_TOKEN", "USER"}
    assert {b.pattern_type for b in created} == {"LITERAL", "PREFIXED"}
    assert {b.resource_name for b in created if b.resource_type == "CLUSTER"} == {"kafka-cluster"}
    assert any(b.resource_name == "*" for b in created)
    assert {b.permission_type for b in created} == {"ALLOW", "DENY"}
    assert "User:*" in {b.principal for b in created}
    assert len({b.principal for b in created}) >= 8
    assert {"*", "10.0.0.1", "2001:db8::5"} <= {b.host for b in created}
    deleted_per_call = [len(op["deleted"]) for op in kafka_run.op_log if op["op"] == "delete"]
    assert 0 in deleted_per_call and 1 in deleted_per_call and max(deleted_per_call) > 1
    assert max(len(op["acls"]) for op in kafka_run.ops if op["op"] == "create") > 1
    deleted = {AclBinding(**a) for op in kafka_run.op_log if op["op"] == "delete" for a in op["deleted"]}
    recreated = Counter(created)
    assert any(recreated[b] > 1 for b in deleted), "some deleted binding is created again (a new ACL id)"


def test_metadata_dir_holds_segments_and_snapshots(kafka_run: KafkaRun) -> None:
    assert (kafka_run.metadata_log_dir / "bootstrap.checkpoint").is_file()
    assert (kafka_run.metadata_dir / "00000000000000000000-0000000000.checkpoint").is_file()  # KIP-853 --standalone
    assert len(kafka_run.segments()) >= 2
    assert len(kafka_run.snapshots()) >= 2
    assert len(_mid_history_snapshots(kafka_run)) >= 2, "snapshots are written in the middle of the history"


def test_both_snapshot_limits_are_turned_down_and_trigger_snapshots(kafka_run: KafkaRun) -> None:
    """The broker ran with both of Kafka's snapshot limits turned down, and each of them made Kafka write
    snapshots in the middle of the history (Kafka's own log says why it wrote each snapshot)."""
    props = (kafka_run.work / "config" / "server.properties").read_text().splitlines()
    assert f"metadata.log.max.snapshot.interval.ms={SHORT_SNAPSHOT_INTERVAL_MS}" in props
    assert "metadata.log.max.record.bytes.between.snapshots=8192" in props
    triggers = kafka_run.snapshot_triggers()
    mid = _mid_history_snapshots(kafka_run)
    assert {s.name for s in mid} <= set(triggers), "every snapshot file is one the broker logged writing"
    reasons = Counter(triggers[s.name] for s in mid)
    assert reasons["time"] >= 1, reasons  # metadata.log.max.snapshot.interval.ms
    assert reasons["bytes"] >= 1, reasons  # metadata.log.max.record.bytes.between.snapshots


def test_default_run_has_a_few_thousand_acl_operations(kafka_run: KafkaRun) -> None:
    """Issue 3: the comparisons run on a history of at least a few thousand ACL operations with at least two
    snapshots. The default history is recognized by its content, whatever its profile is called."""
    default_ops = generate(DEFAULT_PROFILE, DEFAULT_SEED)
    assert sum(op["op"] in ("create", "delete") for op in default_ops) >= 2000
    if kafka_run.ops == default_ops:
        assert kafka_run.acl_operations() >= 2000  # CreateAcls + DeleteAcls calls Kafka answered
        assert len(_mid_history_snapshots(kafka_run)) >= 2
    else:  # KRAFT_IT_PROFILE / KRAFT_IT_SEED chose another history: it was played in full
        assert kafka_run.acl_operations() == sum(op["op"] in ("create", "delete") for op in kafka_run.ops)


def test_broker_retries_with_new_ports_when_one_is_taken(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`free_port()` can hand out a port that someone takes before the JVM binds it: a fresh broker is formatted
    again on new ports and starts."""
    real_free_port = broker_module.free_port
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        taken_port = taken.getsockname()[1]
        calls: list[int] = []

        def racy_free_port() -> int:  # the second port (the controller's) is already in use
            calls.append(1)
            return taken_port if len(calls) == 2 else real_free_port()

        monkeypatch.setattr(broker_module, "free_port", racy_free_port)
        broker = KafkaBroker(tmp_path / "broker")
        with broker:
            assert broker.port_retries == 1
            assert taken_port not in (broker.broker_port, broker.controller_port)
            config = broker.config_path.read_text()
            assert f"CONTROLLER://127.0.0.1:{broker.controller_port}" in config
            assert str(taken_port) not in config
            pid = broker.pid
        assert pid is not None and not _alive(pid)
    assert "Address already in use" in (broker.log_dir / "server.log").read_text()


def test_kafka_dump_log_reads_every_file(kafka_run: KafkaRun) -> None:
    for f in kafka_run.dump_files():
        text = kafka_run.kafka_dump(f)
        assert text.startswith(f"Dumping {f.resolve()}\n")
        assert "baseOffset: 0 " in text or f.suffix == ".log"
        assert "isvalid: false" not in text
        assert "Exception" not in text
    for seg in kafka_run.segments():
        assert "payload: " in kafka_run.kafka_dump(seg)


def test_kafka_dump_log_skip_record_metadata(kafka_run: KafkaRun) -> None:
    dumps = dump_each(kafka_run.dump_files(), skip_record_metadata=True)
    for f, text in dumps.items():
        assert "| offset: " not in text, f
    assert any("| payload: " in text for text in dumps.values())


def test_kafka_decoded_log_matches_checkpoints(kafka_run: KafkaRun) -> None:
    """Replaying Kafka's own decoding of the segments gives describeAcls at `as_of_offset` and up to the HW."""
    records = _log_records(kafka_run)
    assert kafka_run.checkpoints
    for cp in kafka_run.checkpoints:
        for offset in (cp["as_of_offset"], cp["high_watermark_after"] - 1):
            assert frozenset(acl_state(records, offset).values()) == cp["acls"], (cp["label"], offset)


def test_snapshots_equal_the_log_before_them(kafka_run: KafkaRun) -> None:
    """Snapshot E holds exactly the ACLs (with their ids) that the log's records with offset < E leave."""
    records = _log_records(kafka_run)
    assert len(kafka_run.snapshots()) >= 2
    for snap in kafka_run.snapshots():
        end = int(snap.name[:20])
        in_snapshot = acl_state(payload_records(kafka_run.kafka_dump(snap)))
        assert in_snapshot == acl_state(records, end - 1), snap.name


def test_acl_record_counts_match_what_kafka_reported(kafka_run: KafkaRun) -> None:
    """One AccessControlEntryRecord per binding that did not exist yet; one Remove per deleted binding."""
    types = Counter(r.type for r in _log_records(kafka_run))
    live: set[AclBinding] = set()
    new = 0
    for op in kafka_run.ops:
        if op["op"] == "create":
            batch = {AclBinding(**a) for a in op["acls"]}
            new += len(batch - live)
            live |= batch
        elif op["op"] == "delete":
            live = {b for b in live if not any(filter_matches(f, b) for f in op["filters"])}
    assert types["ACCESS_CONTROL_ENTRY_RECORD"] == new
    assert types["REMOVE_ACCESS_CONTROL_ENTRY_RECORD"] == kafka_run.summary["acls_deleted"]


def test_make_samples_stops_the_broker_when_the_history_fails(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A sample that keeps its broker up between two parts (`hold_seconds`) still stops it when the first part
    fails."""
    seen: list[int] = []

    def failing_history(bootstrap: str, ops: Path, out: Path, op_log: Path | None = None) -> dict:
        seen.append(json.loads((tmp_path / "broker" / "broker.json").read_text())["pid"])
        assert _alive(seen[-1])
        raise RuntimeError("the driver failed")

    monkeypatch.setattr(make_samples, "run_history", failing_history)
    sample = make_samples.Sample("failing", "a history whose first part fails", "tiny", 1,
                                 make_samples.SAMPLES["small-snapshots"].config, split_after=3, hold_seconds=30.0)
    with pytest.raises(RuntimeError, match="the driver failed"):
        make_samples.play(sample, tmp_path / "broker", tmp_path / "out")
    assert len(seen) == 1
    assert not _alive(seen[0])
