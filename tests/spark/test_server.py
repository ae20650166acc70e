"""`kraft-replay server` (issue 12, the fixed cost): one Spark Connect server on this machine that the lake commands
use while it runs, so that their Spark driver is warm. A real server started from the pyspark install; the commands
run as the user runs them, in processes of their own, with nothing telling them where the server is but its state
file. The ingest and replay through it (of a dump named by a path relative to the command's directory) write
what local mode writes; the commands share the server's Python workers; a client without the server's token is
refused; `server stop` ends it."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from spark_conf import SHORT_LIVED_SERVER_CONF
from spark_dumps import SAMPLES
from test_connect import rows

from replay.spark import server

pytestmark = [pytest.mark.spark, pytest.mark.second_jvm]

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = next(s for s in SAMPLES if s.name == "small-snapshots")


@pytest.fixture
def server_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[Path]:
    """This test's own state directory (never the user's server), and no server left running after it."""
    folder = tmp_path / "server"
    monkeypatch.setenv(server.DIR_ENV, str(folder))
    for name in ("SPARK_REMOTE", server.TOKEN_ENV):  # absent now, and again afterwards whatever the test set
        monkeypatch.setenv(name, "")
        monkeypatch.delenv(name)
    monkeypatch.delenv(server.USE_ENV, raising=False)
    yield folder
    server.stop()


def kraft_replay(*argv: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`kraft-replay ARGV` in a process of its own, with this process's environment (the state directory) and
    `env`; no Spark Connect target of its own."""
    base = {k: v for k, v in os.environ.items() if not k.startswith("PYSPARK") and k not in ("SPARK_REMOTE",
                                                                                            server.TOKEN_ENV)}
    return subprocess.run([sys.executable, "-m", "replay.cli", *argv], cwd=ROOT, env={**base, **(env or {})},
                          capture_output=True, text=True, timeout=900)


def test_the_lake_commands_run_on_the_running_server_and_it_takes_only_its_token(
        spark: Any, sample_lake: Any, server_dir: Path, tmp_path: Path) -> None:
    from replay.spark import queries
    from replay.spark.tables import Lake

    state, started = server.start("local[2]", "1g", extra=SHORT_LIVED_SERVER_CONF)
    assert started and server.start("local[2]", "1g")[1] is False  # one server: a second start finds it
    assert server.warm_up() > 0  # a synthetic dump ingested and replayed through it (it raises otherwise)

    status = kraft_replay("server", "status", "--output", "json")
    assert status.returncode == 0, status.stderr
    shown = json.loads(status.stdout)
    assert shown["running"] and shown["url"] == state.url and shown["pid"] == state.pid
    assert "token" not in shown and state.token not in status.stdout + status.stderr
    state_file = server_dir / "server.json"
    assert stat.S_IMODE(state_file.stat().st_mode) == 0o600
    assert state.token not in " ".join(server.command("local[2]", "1g", state.port))

    lake_dir = str(tmp_path / "lake")
    # a relative path names a file of the command's directory, not of the server's
    done = kraft_replay("ingest", os.path.relpath(SAMPLE, ROOT), "--lake-cluster", SAMPLE.name, "--lake", lake_dir, "--no-progress",
                        "--output", "json")
    assert done.returncode == 0, done.stderr[-3000:]
    assert f"Spark: the kraft-replay server at {state.url}" in done.stderr
    assert "Spark: Spark Connect session" in done.stderr
    assert rows(Lake(spark, lake_dir), SAMPLE.name) == rows(sample_lake, SAMPLE.name)  # what local mode writes

    answer = kraft_replay("sql", "--lake", lake_dir, "--output", "json",
                          f"SELECT count(*) AS n FROM acl_state_at('{SAMPLE.name}', 150)")
    assert answer.returncode == 0 and "kraft-replay server at" in answer.stderr, answer.stderr[-3000:]
    local = queries.state_at(sample_lake, SAMPLE.name, offset=150)
    assert json.loads(answer.stdout) == [{"n": len(local.certain) + len(local.uncertain)}]

    # the commands share the server's Python workers: what the warm-up and two commands left is one daemon and at
    # most a worker per core (local[2]), not a daemon per command
    python = [p for p in descendants(state.pid) if b"pyspark" in read_or_empty(f"/proc/{p}/cmdline")]
    daemons = [p for p in python if parent(p) not in python]
    assert len(daemons) <= 1 and len(python) <= 3, python

    # without the token the server answers nothing (it would run any code a client sent)
    stranger = subprocess.run(
        [sys.executable, "-c", "from pyspark.sql import SparkSession\n"
                               "SparkSession.builder.getOrCreate().range(1).collect()"],
        env={**{k: v for k, v in os.environ.items() if k != server.TOKEN_ENV}, "SPARK_REMOTE": state.url},
        capture_output=True, text=True, timeout=300)
    assert stranger.returncode != 0 and "UNAUTHENTICATED" in stranger.stderr.upper(), stranger.stderr[-2000:]

    stopped = kraft_replay("server", "stop")
    assert stopped.returncode == 0 and f"server stopped (pid {state.pid})" in stopped.stdout, stopped.stderr
    assert server.running() is None and not state_file.exists()
    again = kraft_replay("server", "status")
    assert again.stdout.strip() == "no server running"


def descendants(root: int) -> list[int]:
    """Every process below `root`, from /proc."""
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            children.setdefault(parent(int(entry)), []).append(int(entry))
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def parent(pid: int) -> int:
    """The parent of `pid` (-1 when it has gone)."""
    line = read_or_empty(f"/proc/{pid}/stat")
    return int(line.rsplit(b")", 1)[1].split()[1]) if line else -1


def read_or_empty(path: str) -> bytes:
    try:
        return Path(path).read_bytes()
    except OSError:
        return b""


def test_a_server_of_other_code_or_switched_off_or_beside_a_session_is_not_used(
        server_dir: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    other = server.ServerState(pid=os.getpid(), port=1, token="t" * 64, started="2026-12-07T00:00:00+00:00",
                               master="local[*]", memory="1g", code="not-this-code", log="server.log")
    monkeypatch.setattr(server, "_attached", None)
    monkeypatch.setattr(server, "running", lambda: other)
    monkeypatch.setattr("replay.spark.session.has_session_here", lambda: False)
    assert server.attach() is None and "SPARK_REMOTE" not in os.environ
    assert "runs other code of this package than this command" in capsys.readouterr().err

    same = server.ServerState(**{**other.__dict__, "code": server.code_stamp()})
    monkeypatch.setattr(server, "running", lambda: same)
    monkeypatch.setenv(server.USE_ENV, "off")
    assert server.attach() is None and "SPARK_REMOTE" not in os.environ
    monkeypatch.delenv(server.USE_ENV)
    monkeypatch.setattr("replay.spark.session.has_session_here", lambda: True)  # a notebook's session: its own
    assert server.attach() is None and "SPARK_REMOTE" not in os.environ
    monkeypatch.setattr("replay.spark.session.has_session_here", lambda: False)
    assert server.attach() == same
    assert os.environ["SPARK_REMOTE"] == "sc://localhost:1" and os.environ[server.TOKEN_ENV] == "t" * 64


def test_the_state_of_a_server_that_has_gone_is_removed(server_dir: Path) -> None:
    ended = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    gone = server.ServerState(pid=int(ended.stdout), port=1, token="t", started="2026-12-07T00:00:00+00:00",
                              master="local[*]", memory="1g", code=server.code_stamp(), log="server.log")
    server._write_state(gone)
    assert (server_dir / "server.json").exists()
    assert server.running() is None and not (server_dir / "server.json").exists()
