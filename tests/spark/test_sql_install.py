"""Persistent SQL (`kraft-replay install-sql`): the functions and views installed in a Hive metastore by one process
answer, in a plain PySpark process that never imports this package, exactly what the Python API answers; for a
directory lake (functions in a schema of their own, reading the tables by path) and for a catalog lake (the same
tables registered in a schema, the functions installed next to them)."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from spark_conf import SHORT_LIVED_JVM_OPTIONS
from test_audits import _norm  # type: ignore[import-not-found]

from replay import cli
from replay.spark.tables import ALL_TABLES

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("without_aqe")]

CLIENT = Path(__file__).with_name("sql_client.py")

# One process installs both variants (one JVM start): the directory lake's functions into `kr`, then the same lake's
# tables registered as external tables of the schema `lk` (a catalog lake), and its functions installed there.
INSTALL_BOTH = """
import sys
from pyspark.sql import SparkSession
from replay import cli
from replay.spark.tables import ALL_TABLES
from replay.spark.tables import sql_string
lake, *tables = sys.argv[1:]
assert cli.main(["install-sql", "--lake", lake, "--schema", "kr"]) == 0
spark = SparkSession.getActiveSession()
spark.sql("CREATE SCHEMA IF NOT EXISTS lk")
for t in tables:
    spark.sql(f"CREATE TABLE lk.{t} USING DELTA LOCATION {sql_string(lake + '/' + t)}")
assert cli.main(["install-sql", "--catalog", "spark_catalog.lk"]) == 0
"""


def _hive(tmp: Path) -> dict[str, str]:
    return {"metastore": str(tmp / "metastore_db"), "warehouse": str(tmp / "warehouse")}


# The installer and the SQL client are JVMs of one test each: the suite's short-lived JVM options (C1 only, the
# serial collector). Measured alone on a quiet machine, the test with them: 462 s of machine CPU and 325 s wall,
# against 524 s and 283 s with the JVM's defaults; CI's two cores are busy throughout, so the CPU is what counts.
def _hive_submit_args(hive: dict[str, str]) -> str:
    return (f"--conf spark.sql.catalogImplementation=hive --conf spark.sql.warehouse.dir={hive['warehouse']} "
            f"--conf spark.hadoop.javax.jdo.option.ConnectionURL=jdbc:derby:;databaseName={hive['metastore']};"
            "create=true --conf spark.sql.codegen.wholeStage=false --conf spark.sql.codegen.factoryMode=NO_CODEGEN "
            f"--driver-java-options '{SHORT_LIVED_JVM_OPTIONS}' pyspark-shell")


def test_printed_ddl_is_plain_persistent_sql(tmp_path: Path) -> None:
    """`--print` needs no Spark and writes only persistent statements, no Python function in them."""
    out = io.StringIO()
    assert cli.main(["install-sql", "--lake", str(tmp_path / "lake"), "--schema", "kr", "--print"], out) == 0
    ddl = out.getvalue()
    assert ddl.count("CREATE OR REPLACE FUNCTION `kr`.") == 13 and ddl.count("CREATE OR REPLACE VIEW `kr`.") == 3
    assert "TEMPORARY" not in ddl and "kraft_replay" not in ddl and "{{" not in ddl
    assert ddl.count("COMMENT '") == 16
    assert f"delta.`{tmp_path / 'lake'}/acl_history`" in ddl
    err = io.StringIO()
    assert cli.main(["install-sql", "--lake", str(tmp_path / "lake"), "--print"], err) == 2  # no schema: usage


def _in_catalog(query: str) -> str:
    """The same call to the catalog lake's functions and views (schema `lk`) instead of the directory lake's."""
    return query.replace(" kr.", " lk.")


def _questions(spark: Any, lake: Any, c: str, mid: int, end: int, resource: tuple[str, str], principal: str
               ) -> dict[str, Callable[[], list[dict[str, Any]]]]:
    """Each SQL call and how the Python API answers it (a thunk, so that the answers can be computed while the
    client runs)."""
    from pyspark.sql import functions as F

    from replay.spark import audits
    from replay.spark.queries import (
        ACL_FIELDS,
        changes_between,
        offset_at_time,
        state_at,
        state_frame,
        time_of_offset,
    )

    def state(at: int) -> list[dict[str, Any]]:
        return [r.asDict() for r in state_frame(lake, c, at).select(
            "acl_id", *ACL_FIELDS, "certainty", "valid_from_offset", "valid_to_offset").collect()]

    def coverage(at: int) -> list[dict[str, Any]]:
        s = state_at(lake, c, offset=at)
        held = s.unpublished  # inside a batch: the state before it, and a note that says so
        return [{"as_of_offset": at, "covered": s.covered, "complete": s.complete, "exact": s.exact,
                 "certain_acls": len(s.certain), "uncertain_acls": len(s.uncertain),
                 "state_as_of_offset": held.state_offset if held else at, "note": held.sentence() if held else None}]

    def changes() -> list[dict[str, Any]]:
        return [r.asDict() for r in changes_between(lake, c, -1, mid).select(
            "offset", "offset_min", "exact", "time", "acl_id", "change", "cause", *ACL_FIELDS).collect()]

    def current() -> list[dict[str, Any]]:
        times = {r.acl_id: r.valid_from_time
                 for r in lake.read("acl_history").where(F.col("cluster_id") == c).collect()}
        return [{"cluster_id": c, "as_of_offset": end, **{k: v for k, v in r.items() if k != "valid_to_offset"},
                 "valid_from_time": times[r["acl_id"]]} for r in state(end)]

    def diff() -> list[dict[str, Any]]:
        return [{k: a[k] for k in ("acl_id", "change", "certain")}
                for a in audits.audit_changes(spark, lake, c, mid, end)["acls"]]

    rtype, name = resource
    api, args, named = {"TOPIC": ("Fetch", f", topics => array('{name}')", {"topics": [name]}),
                        "GROUP": ("JoinGroup", f", groups => array('{name}')", {"group": [name]})
                        }.get(rtype, ("DescribeAcls", "", {}))

    def could_call() -> list[dict[str, Any]]:
        from replay.spark.authorize_api import authorize_api

        d = authorize_api(spark, lake, c, principal, "10.0.0.1", api, offset=end, **named)
        return [{"outcome": d["outcome"], "error": d["error"], "check_number": n, "resource_type": k["resourceType"],
                 "resource_name": k["resourceName"], "operation": k["operation"], "decision": k["decision"]}
                for n, k in enumerate(d["checks"], 1)]

    t_mid = time_of_offset(lake, c, mid)
    at_time = f"timestamp_millis({t_mid})"
    mid_by_time = offset_at_time(lake, c, t_mid) or 0
    return {
        f"SELECT * FROM kr.acl_state_at('{c}', {mid})": lambda: state(mid),
        f"SELECT * FROM kr.acl_state_at_time('{c}', {at_time})": lambda: state(mid_by_time),
        f"SELECT * FROM kr.acl_coverage_at('{c}', {mid})": lambda: coverage(mid),
        f"SELECT * FROM kr.acl_coverage_at_time('{c}', {at_time})": lambda: coverage(mid_by_time),
        f"SELECT * FROM kr.acl_changes_between('{c}', -1, {mid})": changes,
        f"SELECT * FROM kr.acl_who_can('{c}', 'DESCRIBE', '{rtype}', '{name}', {end})":
            lambda: audits.audit_who_can(spark, lake, c, "DESCRIBE", rtype, name, offset=end),
        f"SELECT * FROM kr.acl_what_can('{c}', '{principal}', {end})":
            lambda: audits.audit_what_can(spark, lake, c, principal, end),
        f"SELECT * FROM kr.acl_access_changes('{c}', {mid}, {end})":
            lambda: audits.audit_changes(spark, lake, c, mid, end)["access"],
        f"SELECT acl_id, change, certain FROM kr.acl_diff('{c}', {mid}, {end})": diff,
        f"SELECT * FROM kr.acl_timeline('{c}', NULL, '{rtype}', '{name}')":
            lambda: audits.audit_timeline(spark, lake, c, resource_type=rtype, resource_name=name),
        f"SELECT * FROM kr.acl_risky_grants('{c}', {end})":
            lambda: audits.audit_risky_grants(spark, lake, c, offset=end),
        f"SELECT * FROM kr.acl_current WHERE cluster_id = '{c}'": current,
        ("SELECT outcome, error, check_number, resource_type, resource_name, operation, decision FROM "
         f"kr.acl_could_call('{c}', '{principal}', '10.0.0.1', '{api}', {end}{args})"): could_call,
    }


@pytest.mark.slow
@pytest.mark.extended  # `make test-all`: `make test` keeps the printed DDL and the SQL functions in a session
def test_installed_functions_answer_like_the_python_api_without_the_package(
        spark: Any, sample_lake: Any, tmp_path: Path) -> None:
    """Install with the real command into a Hive metastore (Derby under tmp_path); then a plain PySpark process
    calls every function and view. It runs while this process computes the Python API's answers: both spend most
    of their time planning, on one core each."""
    from pyspark.sql import functions as F

    from replay.spark.queries import last_offset
    from replay.spark.session import local_conf

    c = "small-snapshots"
    end = last_offset(sample_lake, c)
    assert end is not None
    mid = end // 2
    live = sample_lake.read("acl_history").where((F.col("cluster_id") == c) & F.col("valid_to_offset").isNull()
                                                 & (F.col("pattern_type") == "LITERAL")).orderBy("acl_id").first()
    assert live is not None
    questions = _questions(spark, sample_lake, c, mid, end, (live.resource_type, live.resource_name), live.principal)

    hive = _hive(tmp_path)
    env = {**os.environ, "PYSPARK_SUBMIT_ARGS": _hive_submit_args(hive), "KRAFT_REPLAY_SPARK_MASTER": "local[2]"}
    tables = [t for t in ALL_TABLES if sample_lake.exists(t)]
    done = subprocess.run([sys.executable, "-c", INSTALL_BOTH, sample_lake.location, *tables], env=env,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "installed 13 functions and 3 views in kr over " in done.stdout
    assert "installed 13 functions and 3 views in `spark_catalog`.`lk` over spark_catalog.lk" in done.stdout

    errors = {"SELECT * FROM kr.acl_state_at('no-such-cluster', 3)": "has no replayed history in the lake",
              f"SELECT * FROM kr.acl_coverage_at('{c}', -1)": "offset -1 is negative",
              f"SELECT * FROM kr.acl_state_at_time('{c}', TIMESTAMP'1971-01-01')": "is at or before 1971-01-01",
              "SELECT * FROM kr.acl_who_can('nope', 'READ', 'TOPIC', 'x', 5)": "cluster 'nope' has no replayed history",
              f"SELECT * FROM kr.acl_access_changes('{c}', 0, -2)": "offset -2 is negative",
              f"SELECT * FROM kr.acl_what_can('{c}', 'alice', 5)":
                  "expected a string in format principalType:principalName but got alice"}
    views = [f"SELECT * FROM kr.cluster_coverage WHERE cluster_id = '{c}'",
             f"SELECT count(*) AS n FROM kr.anomalies_latest WHERE cluster_id = '{c}'",
             "DESCRIBE FUNCTION EXTENDED kr.acl_who_can"]
    # the catalog lake: every call again, in its own schema, over the registered tables
    in_catalog = [_in_catalog(q) for q in [*questions, *views]]
    errors[_in_catalog("SELECT * FROM kr.acl_state_at('no-such-cluster', 3)")] = "has no replayed history in the lake"
    spec = {"jars": local_conf("local[2]", "x", "1g")["spark.jars"], **hive, "jvm_options": SHORT_LIVED_JVM_OPTIONS,
            "queries": [*questions, *errors, *views, *in_catalog]}
    (tmp_path / "spec.json").write_text(json.dumps(spec))
    out, err = tmp_path / "client.out", tmp_path / "client.err"  # files: a full pipe would stall the client
    with out.open("w") as o, err.open("w") as e, subprocess.Popen(
            [sys.executable, str(CLIENT), str(tmp_path / "spec.json")], stdout=o, stderr=e, cwd=str(tmp_path),
            env={k: v for k, v in os.environ.items() if k != "PYTHONPATH"}) as client:
        expected = {query: answer() for query, answer in questions.items()}
        client.wait(timeout=900)
    line = next((x for x in out.read_text().splitlines() if x.startswith("RESULT ")), None)
    assert line is not None, err.read_text()[-3000:]
    results = json.loads(line[len("RESULT "):])
    assert results.pop() == {"replay_imported": False}
    got = {r["query"]: r for r in results}
    for query, want in expected.items():
        for asked in (query, _in_catalog(query)):
            assert "error" not in got[asked], (asked, got[asked])
            assert want, asked  # every case has something to compare
            assert _norm(got[asked]["rows"]) == _norm(json.loads(json.dumps(want, default=str))), asked
    for query, message in errors.items():
        assert message in got[query].get("error", ""), (query, got[query])
    anomalies = sample_lake.read("anomalies").where(F.col("cluster_id") == c).count()
    for coverage, latest, function in (views, [_in_catalog(v) for v in views]):
        (cov,) = got[coverage]["rows"]
        assert cov["last_offset"] == end and cov["first_offset"] == 0
        (n,) = got[latest]["rows"]
        assert n["n"] == min(100, anomalies)
        described = " ".join(str(v) for r in got[function]["rows"] for v in r.values())
        assert "Who could perform the operation" in described


def test_sql_command_names_the_lakes_tables(spark: Any, sample_lake: Any) -> None:
    from pyspark.sql import functions as F

    out = io.StringIO()
    query = "SELECT count(*) AS n FROM anomalies WHERE cluster_id = 'small-snapshots'"
    assert cli.main(["sql", query, "--lake", sample_lake.location, "--output", "jsonl"], out) == 0
    want = sample_lake.read("anomalies").where(F.col("cluster_id") == "small-snapshots").count()
    assert json.loads(out.getvalue()) == {"n": want}
