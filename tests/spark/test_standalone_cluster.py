"""Issue 4 item 6: ingest and replay on a real Spark standalone cluster give the same tables as local mode.

Both runs are processes of their own (the cluster's driver through the CLI; the local run and the comparison in a
child on `local[2]`), so this test does not use the suite's Spark session and runs in whichever pytest-xdist worker
is free (tests/conftest.py), next to the worker that holds the session.
"""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
from pathlib import Path

import pytest
from spark_conf import LEAN_JVMS, NO_CODEGEN

from replay.kafka import synth

pytestmark = [pytest.mark.cluster, pytest.mark.extended]  # a master, a worker and their JVMs: `make test-all`

REPO = str(Path(__file__).resolve().parents[2])

_COMPARED = {
    "metadata_records": ["cluster_id", "source_kind", "offset", "snapshot_end_offset", "record_type", "acl_id",
                         "content_hash", "crc_ok"],
    "acl_history": ["acl_id", "principal", "valid_from_offset", "valid_from_min_offset", "valid_to_offset",
                    "valid_to_min_offset", "began_by", "ended_by"],
    "acl_events": ["offset", "acl_id", "change", "cause", "exact"],
    "log_coverage": ["start_offset", "end_offset", "kind"],
    "anomalies": ["kind", "offset"],
}

# the local run, then both lakes' rows (as sorted reprs) written as JSON: {table: {"local": [...], "cluster": [...]}}
_LOCAL_AND_READ = """
import json, sys
from replay.spark.session import get_spark
from replay.spark.ingest import ingest
from replay.spark.replay import replay_lake
from replay.spark.tables import Lake

dump, local_dir, cluster_dir, out, compared, conf = sys.argv[1:7]
spark = get_spark(master="local[2]", memory="1g", conf=json.loads(conf))
local = Lake(spark, local_dir)
ingest(spark, [dump], cluster="c1", lake=local, progress=False)
replay_lake(local, ["c1"])
remote = Lake(spark, cluster_dir)
rows = {}
for table, cols in json.loads(compared).items():
    rows[table] = {name: sorted(repr(tuple(r)) for r in lake.read(table).select(*cols).collect())
                   for name, lake in (("local", local), ("cluster", remote))}
with open(out, "w") as f:
    json.dump(rows, f)
spark.stop()
"""

# as the in-process tests (tests/spark/conftest.py): no code generation, which on this tiny input costs more than it
# saves; two shuffle partitions for the local run
# the cluster's driver: Spark's 200 shuffle partitions would be 200 tasks per shuffle on 2 cores, each doing nothing
_CLUSTER_CONF = {**NO_CODEGEN, **LEAN_JVMS, "spark.sql.shuffle.partitions": "4", "spark.databricks.delta.snapshotPartitions": "2"}
_LOCAL_CONF = {**NO_CODEGEN, **LEAN_JVMS, "spark.sql.shuffle.partitions": "2", "spark.default.parallelism": "2",
               "spark.ui.enabled": "false", "spark.databricks.delta.snapshotPartitions": "2"}


def _run(cmd: list[str], env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


def test_cluster_mode_gives_the_same_tables_as_local_mode(tmp_path: Path) -> None:
    from tests.harness.spark_cluster import StandaloneCluster

    log = synth.generate(4242, n_batches=50)
    dump = str(tmp_path / "dump")
    synth.write_dump(log, dump, synth.Layout(segment_every=40, snapshot_at=(60,), codec=3))
    env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY="1g",
               PYTHONPATH=os.pathsep.join(p for p in (REPO, os.environ.get("PYTHONPATH")) if p))

    cluster_dir = str(tmp_path / "cluster-lake")
    with StandaloneCluster(cores=2, memory="1g", work_dir=str(tmp_path / "spark")) as cluster:
        submit = " ".join(f"--conf {shlex.quote(f'{k}={v}')}" for k, v in _CLUSTER_CONF.items())
        proc = _run([sys.executable, "-m", "replay.cli", "ingest", dump, "--lake-cluster", "c1", "--lake", cluster_dir,
                     "--master", cluster.url, "--no-progress"],
                    dict(env, PYSPARK_SUBMIT_ARGS=f"{submit} pyspark-shell"))
        assert f"cluster {cluster.url}" in proc.stdout + proc.stderr  # the session says which Spark it used

    out = tmp_path / "rows.json"
    _run([sys.executable, "-c", _LOCAL_AND_READ, dump, str(tmp_path / "local-lake"), cluster_dir, str(out),
          json.dumps(_COMPARED), json.dumps(_LOCAL_CONF)], env)
    rows = json.loads(out.read_text())
    assert set(rows) == set(_COMPARED)
    assert rows["metadata_records"]["local"] and rows["acl_history"]["local"]  # a comparison of something
    for table, both in rows.items():
        assert both["cluster"] == both["local"], table
