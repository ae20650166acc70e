"""Issue 4 item 6: ingest and replay on a real Spark standalone cluster give the same tables as local mode."""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

from replay.kafka import synth

pytestmark = [pytest.mark.spark, pytest.mark.cluster]

_COMPARED = {
    "metadata_records": ["cluster_id", "source_kind", "offset", "snapshot_end_offset", "record_type", "acl_id",
                         "content_hash", "crc_ok"],
    "acl_history": ["acl_id", "principal", "valid_from_offset", "valid_from_min_offset", "valid_to_offset",
                    "valid_to_min_offset", "began_by", "ended_by"],
    "acl_events": ["offset", "acl_id", "change", "cause", "exact"],
    "log_coverage": ["start_offset", "end_offset", "kind"],
    "anomalies": ["kind", "offset"],
}


def _rows(lake: Any, table: str) -> list[tuple[Any, ...]]:
    cols = _COMPARED[table]
    return sorted((tuple(r) for r in lake.read(table).select(*cols).collect()), key=repr)


def test_cluster_mode_gives_the_same_tables_as_local_mode(spark: Any, tmp_path: Any) -> None:
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake
    from tests.harness.spark_cluster import StandaloneCluster

    log = synth.generate(4242, n_batches=50)
    dump = str(tmp_path / "dump")
    synth.write_dump(log, dump, synth.Layout(segment_every=40, snapshot_at=(60,), codec=3))

    local = Lake(spark, str(tmp_path / "local-lake"))
    ingest(spark, [dump], cluster="c1", lake=local, progress=False)
    replay_lake(local, ["c1"])

    remote_dir = str(tmp_path / "cluster-lake")
    with StandaloneCluster(cores=2, memory="1g", work_dir=str(tmp_path / "spark")) as cluster:
        # as the in-process tests (conftest.py): no code generation, which on this tiny input costs more than it saves
        submit = "--conf spark.sql.codegen.wholeStage=false --conf spark.sql.codegen.factoryMode=NO_CODEGEN"
        env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY="1g", PYSPARK_SUBMIT_ARGS=f"{submit} pyspark-shell")
        proc = subprocess.run(
            [sys.executable, "-m", "replay.cli", "ingest", dump, "--cluster", "c1", "--lake", remote_dir,
             "--master", cluster.url, "--no-progress"],
            capture_output=True, text=True, env=env, timeout=900)
        assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
        assert f"cluster {cluster.url}" in proc.stdout + proc.stderr  # the session says which Spark it used

    remote = Lake(spark, remote_dir)
    for table in _COMPARED:
        assert _rows(remote, table) == _rows(local, table), table
