"""The notebook as a Spark Connect client (issue 15 item 1), checked against the reference replayer.

Everything Spark here runs in processes of their own (a Connect server, the notebook, a `kraft-replay sql` client),
so this test needs no Spark session in the test process and runs in whichever worker is free rather than beside the
suite's session (tests/conftest.py): those workers bound CI's time."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from types import SimpleNamespace

import pytest
from connect_server import ConnectServer  # type: ignore[import-not-found]
from spark_conf import SHORT_LIVED_SERVER_CONF
from spark_dumps import SAMPLES

from replay.kafka.dump import replay_paths
from tests.spark.test_replay_vs_reference import history_of_reference, history_of_rows

# `make test-all` (mark `extended`): `make test` runs the notebook locally (test_notebook.py) and the ingest and
# replay over Spark Connect (test_connect.py)
pytestmark = [pytest.mark.slow, pytest.mark.extended]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = next(s for s in SAMPLES if s.name == "small-snapshots")


@pytest.fixture(scope="module")
def server() -> Iterator[ConnectServer]:
    with ConnectServer(memory="1g", conf=SHORT_LIVED_SERVER_CONF) as s:
        yield s


def test_the_notebook_runs_over_spark_connect(server: ConnectServer, tmp_path: Path) -> None:
    """The whole notebook as a Connect client, on the featured sample: every cell runs, and the lake it wrote holds
    the history the reference replayer gives for the sample (read back through a Connect client)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}
    env["SPARK_REMOTE"] = server.url
    lake_dir = str(tmp_path / "lake")
    done = subprocess.run([sys.executable, "-m", "replay.notebook", "notebooks/kraft_acl_replay.py", "-p",
                           f"lake={lake_dir}", "-p", f"dump={SAMPLE}"], cwd=ROOT, env=env, capture_output=True,
                          text=True, timeout=1800)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    ran = re.search(r"(\d+) cell\(s\) run, (\d+) failed", done.stdout + done.stderr)
    assert ran is not None and int(ran.group(1)) > 20 and ran.group(2) == "0", done.stdout[-2000:]
    assert "Spark Connect session" in done.stderr
    # section 8 over Connect: the sample broker's log ingested on the server's executors and verified there
    assert "68 read (58 allowed, 10 denied" in done.stdout and "68 new in access_events" in done.stdout

    read = subprocess.run([sys.executable, "-m", "replay.cli", "sql", "--lake", lake_dir, "--output", "json",
                           f"SELECT * FROM acl_history WHERE cluster_id = '{SAMPLE.name}'"],
                          cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)
    assert read.returncode == 0, read.stderr[-3000:]
    history = [SimpleNamespace(**row) for row in json.loads(read.stdout)]
    assert history and history_of_rows(history) == history_of_reference(replay_paths([str(SAMPLE)]))
