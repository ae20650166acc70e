"""Integration tests against a real Kafka 4.3.1 broker (`python -m pytest -m kafka tests/kafka_it`).

The session fixture `kafka_run` (a `replay.harness.itrun.KafkaRun`) formats and starts one single-node KRaft broker
(`replay.harness.broker`), plays one generated ACL history through the Admin API (`replay.harness.driver`), stops
the broker cleanly, and hands the tests the metadata log it wrote plus what describeAcls said at every checkpoint.
About 40 s of wall time on two cores.

Environment knobs: `KRAFT_IT_PROFILE` (default `large`: 3000 Admin calls, 21 checkpoints; `medium` is 400), `KRAFT_IT_SEED`
(default 11), `KRAFT_IT_KEEP=/some/dir` to run in that directory and keep it afterwards.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from replay.harness.broker import _alive
from replay.harness.itrun import KafkaRun, run_once


@pytest.fixture(scope="session")
def kafka_run(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaRun]:
    keep = os.environ.get("KRAFT_IT_KEEP")
    if keep:
        work = Path(keep)
        shutil.rmtree(work, ignore_errors=True)
        work.mkdir(parents=True)
    else:
        work = tmp_path_factory.mktemp("kafka-broker")
    run = run_once(work, os.environ.get("KRAFT_IT_PROFILE", "large"), int(os.environ.get("KRAFT_IT_SEED", "11")))
    yield run
    assert not _alive(run.pid)
