"""Issue 18 item 6: cluster names, principals, resource names and lake paths are data, never code. Names full of
quotes, backticks, backslashes, semicolons, `--`, `../` and non-ASCII go through the CLI, the Python API and the SQL functions and
come back as they went in, with every table still there; the dump read stays exactly as it was (read-only)."""

from __future__ import annotations

import hashlib
import io
import json
import stat
from pathlib import Path
from typing import Any

import pytest

from replay import cli
from replay.kafka import writer
from replay.kafka.acl import AclBinding
from replay.spark.authorize_decide import sql_literal
from replay.spark.tables import ACL_HISTORY, METADATA_RECORDS, Lake

pytestmark = pytest.mark.spark

CLUSTER = "it's `prod`\\b; DROP TABLE metadata_records; -- ü/../../x"
PRINCIPAL = "User:o'neil`x`\"; DROP TABLE acl_history; --日本"
RESOURCE = "pay'ments; DELETE FROM anomalies --/../../etc/passwd ü`"
READ = AclBinding.of("TOPIC", RESOURCE, "LITERAL", PRINCIPAL, "*", "READ", "ALLOW")
WRITE = AclBinding.of("TOPIC", "*", "LITERAL", "User:plain", "*", "WRITE", "ALLOW")


def _fingerprint(root: Path) -> dict[str, tuple[int, int, str]]:
    return {str(p.relative_to(root)): (p.stat().st_size, p.stat().st_mtime_ns, hashlib.sha256(p.read_bytes()).hexdigest())
            for p in sorted(root.rglob("*")) if p.is_file()}


def _read_only(root: Path) -> None:
    for p in [*root.rglob("*"), root]:
        p.chmod(p.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_names_full_of_sql_go_through_as_data(spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from pyspark.sql import functions as F

    from replay.spark.audits import who_can
    from replay.spark.queries import register_sql_functions, state_at

    dump = tmp_path / "dump" / "__cluster_metadata-0"
    dump.mkdir(parents=True)
    (dump / "00000000000000000000.log").write_bytes(
        writer.encode_batch(0, [writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", READ),
                                writer.acl_record("BAAAAAAAAAAAAAAAAAAAAA", WRITE), writer.noop()], 1, 1000))
    _read_only(tmp_path / "dump")
    before = _fingerprint(tmp_path / "dump")
    lake_dir = str(tmp_path / "la`ke 'one'; --")

    out = io.StringIO()
    assert cli.main(["ingest", str(tmp_path / "dump"), "--lake-cluster", CLUSTER, "--lake", lake_dir, "--no-progress"],
                    out) == 0
    assert _fingerprint(tmp_path / "dump") == before  # nothing written, renamed or touched in the input

    out = io.StringIO()
    assert cli.main(["acls", "--lake", lake_dir, "--lake-cluster", CLUSTER, "--output", "json"], out) == 0
    listed = {(a["principal"], a["resourceName"]) for a in json.loads(out.getvalue())["acls"]}
    assert listed == {(PRINCIPAL, RESOURCE), ("User:plain", "*")}

    lake = Lake(spark, lake_dir)
    state = state_at(lake, CLUSTER)
    assert set(state.certain.values()) == {READ, WRITE}

    register_sql_functions(lake)
    rows = spark.sql(f"SELECT principal, resource_name FROM acl_state_at({sql_literal(CLUSTER)}, 2)").collect()
    assert {(r.principal, r.resource_name) for r in rows} == {(PRINCIPAL, RESOURCE), ("User:plain", "*")}

    readers = who_can(spark, lake, CLUSTER, "READ", "TOPIC", RESOURCE).collect()
    assert PRINCIPAL in {r.principal for r in readers}

    capsys.readouterr()
    out = io.StringIO()
    assert cli.main(["authorize", "--lake", lake_dir, "--lake-cluster", CLUSTER, "--principal", PRINCIPAL, "--host",
                     "10.0.0.1", "--operation", "READ", "--topic", RESOURCE, "--output", "json"], out) == 0
    assert json.loads(out.getvalue())["decision"] == "ALLOWED"

    # a full replay replaces this cluster's rows (the DELETE after its switch quotes the name): none doubled, none
    # of the previous replay's left behind in the files
    history = sorted(r.acl_id for r in lake.read(ACL_HISTORY).collect())
    assert cli.main(["replay", "--lake", lake_dir, "--lake-cluster", CLUSTER, "--full"], io.StringIO()) == 0
    assert sorted(r.acl_id for r in lake.read(ACL_HISTORY).collect()) == history
    assert sorted(r.acl_id for r in lake.read_raw(ACL_HISTORY).collect()) == history

    # every table is still there, holding this cluster's rows under its name as given
    assert lake.read(METADATA_RECORDS).where(F.col("cluster_id") == CLUSTER).count() == 3
    assert {r.principal for r in lake.read(ACL_HISTORY).collect()} == {PRINCIPAL, "User:plain"}
    assert lake.read("anomalies").count() == 0
