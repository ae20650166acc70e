"""One real broker run for the integration tests (`tests/kafka_it/conftest.py`) and for people at a shell:

    from tests.harness.itrun import run_once
    run = run_once(Path("/tmp/k"), profile="small", seed=3)
    run.checkpoints[-1]["acls"], run.segments(), run.kafka_dump(run.segments()[0])
"""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.harness.broker import SHORT_SNAPSHOT_INTERVAL_MS, BrokerConfig, KafkaBroker
from tests.harness.driver import run_history
from tests.harness.dumplog import dump_each
from tests.harness.histories import generate, read_checkpoints, write_ops

# Small snapshots and segments so that a few hundred Admin calls leave several of each: a snapshot after 8 KiB of
# records or after one second, whichever comes first (both kinds happen in a run; see KafkaRun.snapshot_triggers).
# A segment must hold the largest batch: the default history's bulk CreateAcls of 3,000 bindings is one batch of
# 186 KB (with 16 KiB segments the controller stopped on RecordBatchTooLargeException).
IT_CONFIG = BrokerConfig(snapshot_bytes=8192, snapshot_interval_ms=SHORT_SNAPSHOT_INTERVAL_MS,
                         segment_bytes=256 * 1024)
BOOTSTRAP_SNAPSHOT = "00000000000000000000-0000000000.checkpoint"
# The integration tests' default run (tests/kafka_it/conftest.py; KRAFT_IT_PROFILE / KRAFT_IT_SEED override them).
DEFAULT_PROFILE = "large"
DEFAULT_SEED = 11
# SnapshotGenerator's INFO line for every snapshot it writes, with its reason.
SNAPSHOT_LOG_LINE = re.compile(r"Creating new KRaft snapshot file snapshot (\d{20}-\d{10}) because we have "
                               r"(replayed|waited) at least")


@dataclass
class KafkaRun:
    """What one real broker run left behind (the broker is stopped)."""

    work: Path
    metadata_log_dir: Path  # meta.properties, bootstrap.checkpoint, __cluster_metadata-0/
    metadata_dir: Path  # __cluster_metadata-0
    cluster_id: str
    profile: str
    seed: int
    ops: list[dict[str, Any]]  # the history (driver input)
    op_log: list[dict[str, Any]]  # what Kafka answered to each call
    checkpoints: list[dict[str, Any]]  # driver output; "acls" is a frozenset[AclBinding]
    summary: dict[str, Any]
    start_seconds: float
    stop_result: str  # "term" when SIGTERM sufficed
    pid: int
    log_dir: Path  # the broker's server.log and stdout.log
    seconds: float = 0.0  # the whole run: format, start, history, stop
    _dumps: dict[Path, str] = field(default_factory=dict, repr=False)

    def segments(self) -> list[Path]:
        return sorted(self.metadata_dir.glob("*.log"))

    def snapshots(self, include_bootstrap: bool = False) -> list[Path]:
        snaps = sorted(self.metadata_dir.glob("*.checkpoint"))
        return snaps if include_bootstrap else [s for s in snaps if s.name != BOOTSTRAP_SNAPSHOT]

    def snapshot_triggers(self) -> dict[str, str]:
        """Snapshot file name -> why Kafka wrote it: "bytes" (metadata.log.max.record.bytes.between.snapshots) or
        "time" (metadata.log.max.snapshot.interval.ms), from the broker's own log."""
        out = {}
        for m in SNAPSHOT_LOG_LINE.finditer((self.log_dir / "server.log").read_text(errors="replace")):
            out[f"{m.group(1)}.checkpoint"] = "bytes" if m.group(2) == "replayed" else "time"
        return out

    def acl_operations(self) -> int:
        """CreateAcls and DeleteAcls calls that Kafka answered."""
        return sum(op["op"] in ("create", "delete") for op in self.op_log)

    def dump_files(self) -> list[Path]:
        """What a user would copy: segments, snapshots (incl. the KIP-853 bootstrap one), bootstrap.checkpoint."""
        return [*self.segments(), *self.snapshots(include_bootstrap=True),
                self.metadata_log_dir / "bootstrap.checkpoint"]

    def kafka_dump(self, path: Path) -> str:
        """Kafka's DumpLogSegments --cluster-metadata-decoder output for one file (all files in one JVM, cached)."""
        if not self._dumps:
            self._dumps.update(dump_each(self.dump_files()))
        return self._dumps[path.resolve()]


# A SCRAM user the history creates, so that the broker's log holds a credential (issue 18: redaction).
SCRAM_USER = {"op": "scram", "user": "harness-user", "mechanism": "SCRAM-SHA-256", "password": "harness-secret-1",
              "iterations": 8192}


def run_once(work: Path, profile: str = "medium", seed: int = DEFAULT_SEED, config: BrokerConfig = IT_CONFIG) -> KafkaRun:
    """Format a broker in `work`, play the (profile, seed) history, stop the broker; return what it left."""
    t0 = time.monotonic()
    ops = generate(profile, seed)
    ops.insert(1, SCRAM_USER)  # after the first checkpoint: the log then holds a SCRAM credential to redact
    ops_path = write_ops(ops, work / "history.jsonl")
    broker = KafkaBroker(work, config)
    with broker:
        assert broker.start_seconds is not None and broker.pid is not None
        start_seconds, pid = broker.start_seconds, broker.pid
        summary = run_history(broker.bootstrap, ops_path, work / "checkpoints.jsonl", work / "ops.jsonl")
        stop_result = broker.stop()
    op_log = [json.loads(line) for line in (work / "ops.jsonl").read_text(encoding="utf-8").splitlines()]
    return KafkaRun(
        work=work,
        metadata_log_dir=broker.metadata_log_dir,
        metadata_dir=broker.metadata_dir,
        cluster_id=broker.cluster_id,
        profile=profile,
        seed=seed,
        ops=ops,
        op_log=op_log,
        checkpoints=read_checkpoints(work / "checkpoints.jsonl"),
        summary=summary,
        start_seconds=start_seconds,
        stop_result=stop_result,
        pid=pid,
        log_dir=broker.log_dir,
        seconds=time.monotonic() - t0,
    )
