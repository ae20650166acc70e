"""Serverless-style (issue 15 item 1): the commands run as a Spark Connect client (`SPARK_REMOTE`), against a
Spark Connect server started from the pyspark install with the Delta jars on 127.0.0.1, as serverless compute and
standard access-mode clusters run them (no SparkContext, no `.rdd`, no JVM in the client). The ingest and replay
over Connect write the tables a local-mode run writes; every question (acls, SQL functions, audits, one
authorization, batch authorization from CSV, JSON lines, Parquet, Avro and Delta, an API question) gives over
Connect the answer the same command gives in local mode on the same lake."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from connect_server import ConnectServer  # type: ignore[import-not-found]
from spark_conf import SHORT_LIVED_SERVER_CONF
from spark_dumps import SAMPLES

pytestmark = [pytest.mark.spark, pytest.mark.second_jvm]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = next(s for s in SAMPLES if s.name == "small-snapshots")
TABLES = ["metadata_records", "quarantine", "acl_events", "acl_history", "log_coverage", "anomalies", "offset_times"]


@pytest.fixture(scope="module")
def server() -> Iterator[ConnectServer]:
    with ConnectServer(memory="1g", conf=SHORT_LIVED_SERVER_CONF) as s:
        yield s


def over_connect(server: ConnectServer, *argv: str, env: dict[str, str] | None = None
                 ) -> subprocess.CompletedProcess[str]:
    """`kraft-replay ARGV` as a Spark Connect client process (with `env` added to this process's environment)."""
    return over_connect_python(server, "-m", "replay.cli", *argv, env=env)


def over_connect_python(server: ConnectServer, *args: str, env: dict[str, str] | None = None
                        ) -> subprocess.CompletedProcess[str]:
    """`python ARGS` as a Spark Connect client process."""
    env = {**{k: v for k, v in os.environ.items() if not k.startswith("PYSPARK")}, **(env or {})}
    env["SPARK_REMOTE"] = server.url
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=900)


# Commands run one after another by `cli.main` in one Connect client process (one interpreter start and one session
# for them all, as a notebook runs them): a JSON list of [exit code, stdout or, on failure, stderr] per command.
_MANY = """
import contextlib, io, json, sys
from replay import cli
answers = []
for argv in json.loads(sys.argv[1]):
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stderr(err):
        code = cli.main(argv, out)
    answers.append([code, out.getvalue() if code == 0 else err.getvalue()])
from pyspark.sql.utils import is_remote
assert is_remote(), "not a Spark Connect client"
print(json.dumps(answers))
"""


def many_over_connect(server: ConnectServer, commands: list[list[str]]) -> list[tuple[int, str]]:
    """`kraft-replay ARGV` for each of `commands`, in one Spark Connect client process: (exit code, stdout, or stderr
    when it failed) for each."""
    done = over_connect_python(server, "-c", _MANY, json.dumps(commands))
    assert done.returncode == 0, done.stderr[-3000:]
    answers = [(code, text) for code, text in json.loads(done.stdout.splitlines()[-1])]
    assert len(answers) == len(commands)
    return answers


def in_local_mode(*argv: str) -> tuple[int, str]:
    """The same command in this process, on the local-mode session of the test run."""
    from replay import cli

    out = io.StringIO()
    return cli.main(list(argv), out), out.getvalue()


def rows(lake: Any, cluster: str) -> dict[str, Counter[tuple[Any, ...]]]:
    from pyspark.sql import functions as F

    out = {}
    for t in TABLES:
        df = lake.read(t).where(F.col("cluster_id") == cluster)
        out[t] = Counter(tuple(r) for r in df.select(*[c for c in df.columns if c != "ingest_id"]).collect())
    return out


# `make test-all`: `make test` keeps the ingest and replay over Connect below (the tables local mode writes)
@pytest.mark.extended
def test_the_pipeline_over_spark_connect_answers_as_local_mode(spark: Any, sample_lake: Any, server: ConnectServer,
                                                                 tmp_path: Path, without_aqe: None) -> None:
    import fastavro

    from replay.spark.tables import Lake

    lake_dir = str(tmp_path / "lake")
    cluster = SAMPLE.name
    done = over_connect(server, "ingest", str(SAMPLE), "--lake-cluster", cluster, "--lake", lake_dir,
                        "--no-progress", "--output", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "Spark: Spark Connect session" in done.stderr
    assert json.loads(done.stdout)["replayed"]["acl_events"] > 0

    # the tables: as the local-mode ingest and replay of the same sample wrote them
    connect_lake = Lake(spark, lake_dir)
    assert rows(connect_lake, cluster) == rows(sample_lake, cluster)

    # the questions: the same answer over Connect as in local mode, on the lake written over Connect
    lake = ["--lake", lake_dir, "--lake-cluster", cluster]
    requests = [{"principal": "User:svc-payments", "host": "10.0.0.2", "operation": "WRITE",
                 "resource_type": "TOPIC", "resource_name": "clicks", "offset": 150},
                {"principal": "User:bob", "host": "10.0.0.9", "operation": "DESCRIBE", "resource_type": "TOPIC",
                 "resource_name": "a", "offset": 150},
                {"principal": "User:carol", "host": "127.0.0.1", "operation": "CREATE", "resource_type": "TOPIC",
                 "resource_name": "new-topic", "offset": 60}]
    files = {"csv": tmp_path / "req.csv", "json": tmp_path / "req.jsonl", "avro": tmp_path / "req.avro",
             "parquet": tmp_path / "req.parquet", "delta": tmp_path / "req-delta"}
    files["csv"].write_text(",".join(requests[0]) + "\n" + "".join(",".join(str(r[k]) for k in r) + "\n"
                                                                  for r in requests))
    files["json"].write_text("".join(json.dumps(r) + "\n" for r in requests))
    with open(files["avro"], "wb") as f:
        fastavro.writer(f, {"type": "record", "name": "Req", "fields": [
            {"name": k, "type": "long" if k == "offset" else "string"} for k in requests[0]]}, requests)
    frame = spark.createDataFrame(requests)
    frame.write.parquet(str(files["parquet"]))
    frame.write.format("delta").save(str(files["delta"]))

    questions = [
        ["acls", *lake, "--as-of-offset", "150", "--output", "json"],
        ["sql", "--lake", lake_dir, "--output", "json",
         f"SELECT principal, operation, resource_name FROM acl_state_at('{cluster}', 150) ORDER BY ALL"],
        ["sql", "--lake", lake_dir, "--output", "json", f"SELECT * FROM acl_coverage_at('{cluster}', 150)"],
        ["audit", "who-can", *lake, "--as-of-offset", "150", "--operation", "DESCRIBE", "--topic", "clicks",
         "--output", "json"],
        ["audit", "risky", *lake, "--as-of-offset", "150", "--output", "json"],
        ["authorize", *lake, "--principal", "User:svc-payments", "--host", "10.0.0.2", "--operation", "WRITE",
         "--topic", "clicks", "--as-of-offset", "150", "--output", "json"],
        ["authorize", *lake, "--api", "Produce", "--principal", "User:svc-payments", "--host", "10.0.0.2",
         "--topic", "clicks", "--as-of-offset", "150", "--output", "json"],
    ]
    batch = {fmt: ["authorize", *lake, "--requests", str(path), "--out-format", "json", "--output", "json"]
             for fmt, path in files.items()}
    answers = many_over_connect(server, [*questions, *[[*argv, "--out", str(tmp_path / f"out-{fmt}-connect")]
                                                       for fmt, argv in batch.items()]])
    for argv, (code, remote) in zip(questions, answers[:len(questions)], strict=True):
        assert code == 0, (argv, remote[-3000:])
        code, local = in_local_mode(*argv)
        assert code == 0, argv
        assert json.loads(remote) == json.loads(local), argv

    def decisions(out: Path) -> list[str]:
        return sorted(line for p in sorted(out.glob("*.json")) for line in p.read_text().splitlines())

    for (fmt, argv), (code, remote) in zip(batch.items(), answers[len(questions):], strict=True):
        assert code == 0, (fmt, remote[-3000:])
        code, local = in_local_mode(*argv, "--out", str(tmp_path / f"out-{fmt}-local"))
        assert code == 0, fmt
        summary, local_summary = json.loads(remote), json.loads(local)
        assert summary.pop("out").endswith("-connect") and local_summary.pop("out").endswith("-local")
        assert summary == local_summary, fmt
        got = decisions(tmp_path / f"out-{fmt}-connect")
        assert len(got) == len(requests) and got == decisions(tmp_path / f"out-{fmt}-local"), fmt


def test_a_server_without_the_package_gets_it_from_the_client(spark: Any, sample_lake: Any, tmp_path: Path) -> None:
    """A Connect server whose executors' Python cannot import `replay` (serverless without the wheel): the ingest
    says what to do and fails; with KRAFT_REPLAY_SHIP_PACKAGE=1 the client sends the package
    (`spark.addArtifacts(pyfile=True)`) and the ingest and replay write the tables local mode writes."""
    import sysconfig

    from replay.spark.tables import Lake

    # The executors run this interpreter without its site initialisation, so the editable install's path hook (a
    # .pth file) never runs: site-packages (pyspark, pyarrow, the compiled decoder) is on their path, the checkout
    # is not.
    wrapper = tmp_path / "python-without-replay"
    wrapper.write_text(f'#!/bin/sh\nPYTHONPATH="{sysconfig.get_paths()["purelib"]}${{PYTHONPATH:+:$PYTHONPATH}}" '
                       f'exec {sys.executable} -S "$@"\n')
    wrapper.chmod(0o755)
    path = os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and Path(p) != ROOT)
    with ConnectServer(memory="1g", conf=SHORT_LIVED_SERVER_CONF,
                       env={"PYSPARK_PYTHON": str(wrapper), "PYTHONPATH": path}) as bare:
        argv = ["ingest", str(SAMPLE), "--lake-cluster", SAMPLE.name, "--lake", str(tmp_path / "lake"),
                "--no-progress", "--output", "json"]
        refused = over_connect(bare, *argv)
        assert refused.returncode != 0
        assert "cannot import the replay package" in refused.stderr and "KRAFT_REPLAY_SHIP_PACKAGE=1" in refused.stderr, \
            refused.stderr[-3000:]
        done = over_connect(bare, *argv, env={"KRAFT_REPLAY_SHIP_PACKAGE": "1"})
        assert done.returncode == 0, done.stderr[-3000:]
        assert "sent the replay package to the server's executors" in done.stderr
    assert rows(Lake(spark, str(tmp_path / "lake")), SAMPLE.name) == rows(sample_lake, SAMPLE.name)


def test_values_written_into_a_query_stay_data() -> None:
    """On Connect, `run_sql` writes its values into the text (`rules._inlined`): quotes, backslashes and braces (the
    text goes through PySpark's formatter) stay data, lists become arrays, and only whole markers are replaced."""
    from replay.spark.rules import _inlined

    text = "SELECT {h}.a FROM {h} WHERE c = :cluster AND o <= CAST(:at AS BIGINT) AND x::string = :atx AND :who"
    out = _inlined(text, {"cluster": "it's {a}\\b", "at": 7, "atx": None, "who": ["a", "b'c"]})
    assert out == ("SELECT {h}.a FROM {h} WHERE c = 'it\\'s {{a}}\\\\b' AND o <= CAST(7 AS BIGINT) AND x::string = NULL "
                   "AND array('a', 'b\\'c')")


def test_the_ingest_counts_task_slots_without_a_spark_context() -> None:
    """A Connect session has no SparkContext: the ingest reads the slots from the server's conf (so a small dump is
    still decoded in several pieces), and assumes `UNKNOWN_CORES` where nothing says."""
    from replay.spark.ingest import UNKNOWN_CORES, _cores

    class Conf:
        def __init__(self, values: dict[str, str]) -> None:
            self.values = values

        def get(self, key: str, default: str | None = None) -> str | None:
            return self.values.get(key, default)

    class ConnectLike:
        def __init__(self, values: dict[str, str]) -> None:
            self.conf = Conf(values)

        @property
        def sparkContext(self) -> Any:
            raise RuntimeError("[JVM_ATTRIBUTE_NOT_SUPPORTED] sparkContext is not supported in Spark Connect")

    assert _cores(ConnectLike({"spark.default.parallelism": "6"})) == 6  # type: ignore[arg-type]
    assert _cores(ConnectLike({"spark.master": "local[3]"})) == 3  # type: ignore[arg-type]
    assert _cores(ConnectLike({"spark.master": "local[*]"})) == (os.cpu_count() or 1)  # type: ignore[arg-type]
    assert _cores(ConnectLike({})) == UNKNOWN_CORES  # type: ignore[arg-type]
