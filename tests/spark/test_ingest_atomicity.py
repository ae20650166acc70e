"""Killing an ingest in the middle of its write leaves the tables as they were, and a rerun completes it.

An ingest of a large generated segment runs in a child process (its own Spark driver). As soon as the child's
MERGE has started writing data files into `metadata_records`, the whole process group (Python driver, JVM, Python
workers) gets SIGKILL. The table must then show the same version and the same rows, the data files written so far
must be unreferenced, and the same ingest rerun here must add exactly the new records.
"""

from __future__ import annotations

import glob
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from typing import Any

import pytest
from spark_conf import LEAN_JVMS
from spark_dumps import write_dump, write_large_segment

from replay.spark.ingest import ingest
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, Lake

RECORDS = 60_000
REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

CHILD = textwrap.dedent("""
    import json, sys
    from replay.spark.session import get_spark
    from replay.spark.ingest import ingest
    spark = get_spark(master="local[2]", memory="2g", conf={
        "spark.sql.shuffle.partitions": "2", "spark.ui.enabled": "false",
        "spark.databricks.delta.snapshotPartitions": "2", **json.loads(sys.argv[3])})
    ingest(spark, [sys.argv[1]], "c1", sys.argv[2], progress=True)
    print("CHILD FINISHED", flush=True)
""")


def _data_files(table_dir: str) -> set[str]:
    return set(glob.glob(os.path.join(table_dir, "cluster_id=*", "*.parquet")))


def _commits(table_dir: str) -> set[str]:
    return set(glob.glob(os.path.join(table_dir, "_delta_log", "*.json")))


@pytest.mark.spark
@pytest.mark.second_jvm
def test_kill_during_write_leaves_tables_unchanged(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [write_dump(str(tmp_path / "small"))], "c1", lake, progress=False)
    version = lake.version(METADATA_RECORDS)
    q_version = lake.version(QUARANTINE)
    hashes = sorted(r[0] for r in lake.read(METADATA_RECORDS).select("content_hash").collect())
    table_dir = lake.table_path(METADATA_RECORDS)
    assert table_dir is not None
    files_before, commits_before = _data_files(table_dir), _commits(table_dir)

    big = str(tmp_path / "big" / "__cluster_metadata-0")
    write_large_segment(big, RECORDS)
    script = tmp_path / "child.py"
    script.write_text(CHILD)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]))
    log = open(tmp_path / "child.log", "w")  # noqa: SIM115 - closed below
    child = subprocess.Popen([sys.executable, str(script), big, lake.location, json.dumps(LEAN_JVMS)],
                             cwd=str(tmp_path), env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    killed_at = None
    try:
        deadline = time.monotonic() + 900
        while time.monotonic() < deadline and child.poll() is None:
            if _data_files(table_dir) - files_before:  # the MERGE is writing its data files
                assert _commits(table_dir) == commits_before, "the child committed before it could be stopped"
                os.killpg(child.pid, signal.SIGKILL)
                killed_at = time.monotonic()
                break
            time.sleep(0.01)
    finally:
        if child.poll() is None and killed_at is None:
            os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=60)
        log.close()
    output = (tmp_path / "child.log").read_text()
    assert killed_at is not None, f"the child never started writing:\n{output[-3000:]}"
    assert "CHILD FINISHED" not in output
    time.sleep(1)  # let any straggling file handles of the killed JVM go

    orphans = _data_files(table_dir) - files_before
    assert orphans, "expected the killed write to have left unreferenced data files"
    assert _commits(table_dir) == commits_before
    assert lake.version(METADATA_RECORDS) == version
    assert lake.version(QUARANTINE) == q_version
    assert sorted(r[0] for r in lake.read(METADATA_RECORDS).select("content_hash").collect()) == hashes
    referenced = {os.path.basename(f) for f in lake.read(METADATA_RECORDS).inputFiles()}
    assert not referenced & {os.path.basename(f) for f in orphans}

    report = ingest(spark, [big], "c1", lake, progress=False)
    assert report.records_new == RECORDS
    assert lake.version(METADATA_RECORDS) == (version or 0) + 1
    assert lake.read(METADATA_RECORDS).count() == len(hashes) + RECORDS
