"""Integration tests against a real Kafka 4.3.1 (`python -m pytest tests/kafka_it`): `-m kafka` for the tests that
start a broker, `-m jvm` for those that only run Kafka's Java code from the cached jars (part of the fast suite).

The session fixture `kafka_run` (a `tests.harness.itrun.KafkaRun`) formats and starts one single-node KRaft broker
(`tests.harness.broker`), plays one generated ACL history through the Admin API (`tests.harness.driver`), stops
the broker cleanly, and hands the tests the metadata log it wrote plus what describeAcls said at every checkpoint.
Measured with the default profile on two cores, nothing else running: 97 s of wall time for the fixture (format,
broker ready in 2.6 s, 3002 Admin calls with the bulk CreateAcls and DeleteAcls of 3,000 bindings each, clean stop),
leaving 6 segments of 256 KiB and 137 snapshots; the broker tests of tests/kafka_it took 2.5 min. `medium` takes
about 30 s.

Environment knobs: `KRAFT_IT_PROFILE` (default `large`: 3000 Admin calls, 21 checkpoints; `medium` is 400), `KRAFT_IT_SEED`
(default 11), `KRAFT_IT_KEEP=/some/dir` to run in that directory and keep it afterwards (its `itrun.json` has the
run's times and counts).
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.harness.broker import _alive, _is_our_java
from tests.harness.itrun import DEFAULT_PROFILE, DEFAULT_SEED, KafkaRun, run_once
from tests.summary import add_summary


@pytest.fixture(scope="session")
def kafka_run(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaRun]:
    keep = os.environ.get("KRAFT_IT_KEEP")
    if keep:
        work = Path(keep)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        work = tmp_path_factory.mktemp("kafka-broker")
    run = run_once(work, os.environ.get("KRAFT_IT_PROFILE", DEFAULT_PROFILE),
                   int(os.environ.get("KRAFT_IT_SEED", str(DEFAULT_SEED))))
    facts = {
        "profile": run.profile, "seed": run.seed, "start_seconds": run.start_seconds, "run_seconds": run.seconds,
        "acl_operations": run.acl_operations(), "snapshots": len(run.snapshots()), "segments": len(run.segments()),
        "checkpoints": len(run.checkpoints), "snapshot_triggers": run.snapshot_triggers(),
    }
    (work / "itrun.json").write_text(json.dumps(facts, indent=1) + "\n")
    add_summary(request.config, "Kafka 4.3.1 harness",
                f"{facts['profile']}, seed {facts['seed']}: broker ready in {facts['start_seconds']:.1f} s; "
                f"history of {facts['acl_operations']} ACL operations in {facts['run_seconds']:.1f} s in all; "
                f"{facts['segments']} segments, {facts['snapshots']} snapshots, "
                f"{facts['checkpoints']} describeAcls checkpoints")
    yield run
    # the broker stopped inside `run_once`; by the session's end its pid may name another process (pids wrap at
    # 32768 on this machine and the suite starts thousands: CI failed on exactly that once), so only a live
    # process running this broker's config counts
    assert not (_alive(run.pid) and _is_our_java(run.pid, run.work.resolve() / "config" / "server.properties"))
