"""A local Spark Connect server that keeps one warm Spark driver for the `kraft-replay` commands of this user.

Every Spark command otherwise starts a driver JVM of its own, and a new JVM runs Spark's and Delta's planning code
cold: about half of a small ingest and replay is that warm-up (`data/small-snapshots`: 33 s in a new process against
15 s for the same work again in it). `kraft-replay server start` starts one Spark Connect server on this machine with
the settings `get_spark` gives a local session; until `kraft-replay server stop`, the lake commands find it (its
state file) and run their Spark work there, on a driver that stays warm between them.

The server listens on the loopback interface only and requires a token that only this user can read (the state
file is mode 0600 in the cache directory): Spark Connect runs any code a client sends, so without the token another
account on the machine could run code as this user. The server's Python workers import this package as it was when
they started, so a command of another version, or run after the package's code changed, does not use it (it runs in
a session of its own, and says to restart the server). A command ends its session on the server when it ends
(`detach`). The sessions share the server's compiled code and Python workers (`server_driver`): with a class loader
and workers of its own, each command compiled and started them again (about 5 s of the 22 s a small ingest and
replay took).
"""

from __future__ import annotations

import contextlib
import dataclasses
import datetime
import fcntl
import hashlib
import json
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from replay.maven import cache_root

SERVER_CLASS = "org.apache.spark.sql.connect.service.SparkConnectServer"
PLUGIN_CLASS = "org.apache.spark.sql.connect.SparkConnectPlugin"  # the same service, in any application
DIR_ENV = "KRAFT_REPLAY_SERVER_DIR"  # where the state file and the log live (tests use their own)
USE_ENV = "KRAFT_REPLAY_SERVER"  # "off": commands never use a running server
TOKEN_ENV = "SPARK_CONNECT_AUTHENTICATE_TOKEN"  # read by the server and by PySpark's Connect client


class ServerError(RuntimeError):
    """The server could not be started or stopped; the message says why and where its log is."""


@dataclasses.dataclass
class ServerState:
    """What a running server's state file records."""

    pid: int
    port: int
    token: str
    started: str
    master: str
    memory: str
    code: str  # `code_stamp()` of the package that started it
    log: str

    @property
    def url(self) -> str:
        # "localhost", not 127.0.0.1: PySpark sends a token over plain TCP to localhost only (local credentials)
        return f"sc://localhost:{self.port}"

    def public(self) -> dict[str, Any]:
        """The state without its token, for people and logs."""
        return {k: v for k, v in dataclasses.asdict(self).items() if k != "token"} | {"url": self.url}


def state_dir() -> Path:
    env = os.environ.get(DIR_ENV)
    return Path(env) if env else cache_root() / "server"


def _state_file() -> Path:
    return state_dir() / "server.json"


def code_stamp() -> str:
    """Which code of this package runs: its location and the newest change to its files (a server started from
    other code would run that code in its Python workers)."""
    root = Path(__file__).resolve().parents[1]
    newest = max((p.stat().st_mtime_ns for p in root.rglob("*.py")), default=0)
    return hashlib.sha256(f"{root}|{newest}".encode()).hexdigest()[:16]


def _read_state() -> ServerState | None:
    try:
        data = json.loads(_state_file().read_text())
        return ServerState(**{f.name: data[f.name] for f in dataclasses.fields(ServerState)})
    except (OSError, ValueError, KeyError, TypeError):
        return None


def _write_state(state: ServerState) -> None:
    path = _state_file()
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(dataclasses.asdict(state), f)
    os.chmod(path, 0o600)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except (ProcessLookupError, PermissionError):  # gone, or someone else's process under a reused pid
        return False
    return True


def _listening(port: int) -> bool:
    with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), timeout=1.0):
        return True
    return False


def running() -> ServerState | None:
    """The running server, if any; a state file whose server has gone is removed."""
    state = _read_state()
    if state is None:
        return None
    if _alive(state.pid) and _listening(state.port):
        return state
    if not _alive(state.pid):
        with contextlib.suppress(OSError):
            _state_file().unlink()
    return None


_attached: ServerState | None = None  # the server this process's commands send their work to


def attach() -> ServerState | None:
    """Send this process's Spark work to the running server (Spark Connect), unless a Spark Connect target is set
    already, `KRAFT_REPLAY_SERVER=off`, or the server runs other code than this process (then a warning says to
    restart it). Returns the server used; `detach` ends this process's session there."""
    global _attached
    if _attached is not None and os.environ.get("SPARK_REMOTE") == _attached.url:
        return _attached
    if os.environ.get("SPARK_REMOTE") or os.environ.get(USE_ENV, "").strip().lower() in ("off", "0", "no", "false"):
        return None
    from replay.spark.session import has_session_here

    if has_session_here():  # Databricks', or one this process runs already (a notebook's): the command uses it
        return None
    state = running()
    if state is None:
        return None
    if state.code != code_stamp():
        print(f"kraft-replay: note: the kraft-replay server (pid {state.pid}) runs other code of this package than "
              "this command (it was changed or reinstalled since the server started), so this command starts a "
              "Spark session of its own; restart the server to use it again: kraft-replay server stop, then start",
              file=sys.stderr)
        return None
    os.environ["SPARK_REMOTE"] = state.url
    os.environ[TOKEN_ENV] = state.token
    _attached = state
    print(f"Spark: the kraft-replay server at {state.url} (pid {state.pid}, since {state.started}); "
          "KRAFT_REPLAY_SERVER=off runs without it", file=sys.stderr)
    return state


def detach() -> None:
    """End this process's session on the server (its views, functions and settings go with it) and stop sending
    Spark work there. The server's Python workers stay for the next command: its sessions share them."""
    global _attached
    state, _attached = _attached, None
    if state is None:
        return
    from pyspark.sql import SparkSession

    for name, value in (("SPARK_REMOTE", state.url), (TOKEN_ENV, state.token)):
        if os.environ.get(name) == value:
            del os.environ[name]
    spark = SparkSession.getActiveSession()
    if spark is not None and getattr(spark, "client", None) is not None:  # a Spark Connect session's, not local
        with contextlib.suppress(Exception):
            spark.stop()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def command(master: str, memory: str, port: int, extra: Mapping[str, str] | None = None,
            app_name: str = "kraft-replay server", isolated: bool = True) -> list[str]:
    """The spark-submit command line of a Spark Connect server: the settings of a local session
    (`session.local_conf`) and `extra`, bound to the loopback interface. No token is on it (command lines are
    visible to every account): a server gets its token in its environment.

    `isolated`: Spark's own server, whose sessions each have their artifacts and class loader, as a serverless
    client gets; otherwise `server_driver`, the same service in a local application whose sessions share the
    application's class loader and Python workers (`kraft-replay server`)."""
    import pyspark

    from replay.spark import server_driver
    from replay.spark.session import local_conf

    conf = {**local_conf(master, app_name, memory), **(extra or {})}
    conf.update({"spark.connect.grpc.binding.address": "127.0.0.1", "spark.connect.grpc.binding.port": str(port)})
    if not isolated:
        conf.update({"spark.plugins": PLUGIN_CLASS, "spark.sql.artifact.isolation.enabled": "false"})
    memory = conf.pop("spark.driver.memory")
    master = conf.pop("spark.master")
    submit = Path(pyspark.__file__).parent / "bin" / "spark-submit"
    args = [str(submit), *(["--class", SERVER_CLASS] if isolated else []), "--master", master,
            "--driver-memory", memory]
    for key, value in sorted(conf.items()):
        args += ["--conf", f"{key}={value}"]
    return [*args, "spark-internal" if isolated else server_driver.__file__]


def start(master: str = "local[*]", memory: str | None = None, timeout: float = 180.0,
          extra: Mapping[str, str] | None = None) -> tuple[ServerState, bool]:
    """Start the server unless one runs (`extra`: Spark settings over a local session's); returns it and whether
    this call started it."""
    from replay.spark.session import driver_memory

    folder = state_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with open(folder / "start.lock", "w") as lock:  # two starts at once: the second finds the first's server
        fcntl.flock(lock, fcntl.LOCK_EX)
        state = running()
        if state is not None:
            return state, False
        return _start(folder, master, driver_memory(memory), timeout, extra), True


def _start(folder: Path, master: str, memory: str, timeout: float, extra: Mapping[str, str] | None) -> ServerState:
    import pyspark

    from replay.spark import server_driver
    from replay.spark.session import _export_package_path

    port = _free_port()
    token = secrets.token_hex(32)
    log = folder / "server.log"  # lake paths and statements: this user's to read
    log.touch(mode=0o600)
    os.chmod(log, 0o600)
    _export_package_path()  # the server's Python workers import this package as this process does
    env = {**os.environ, "SPARK_HOME": str(Path(pyspark.__file__).parent), "SPARK_LOCAL_IP": "127.0.0.1",
           "PYSPARK_PYTHON": sys.executable, TOKEN_ENV: token}
    env.pop("SPARK_REMOTE", None)
    with open(log, "wb") as out:
        proc = subprocess.Popen(command(master, memory, port, extra, isolated=False), stdout=out,
                                stderr=subprocess.STDOUT, env=env, cwd=folder, start_new_session=True)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise ServerError(f"the Spark Connect server exited with {proc.returncode} while starting; its log, "
                              f"{log}, ends:\n{_tail(log)}")
        if server_driver.READY_LINE in log.read_text(errors="replace") and _listening(port):
            state = ServerState(proc.pid, port, token, datetime.datetime.now(datetime.timezone.utc)
                                .isoformat(timespec="seconds"), master, memory, code_stamp(), str(log))
            _write_state(state)
            return state
        time.sleep(0.3)
    _kill(proc.pid)
    raise ServerError(f"the Spark Connect server did not start within {timeout:.0f} s; see its log {log}")


def warm_up(timeout: float = 900.0) -> float:
    """One small ingest and replay through the running server (a synthetic dump, into a lake removed after), so that
    its JVM has compiled Spark's and Delta's code before the first real command: a new server's first job costs
    what a new process does (`bench_server`, 20k records: 43.6 s, against 25.7 s warm). Returns its seconds."""
    from replay.kafka.samples import synthetic_sample

    began = time.monotonic()
    env = {k: v for k, v in os.environ.items() if k not in ("SPARK_REMOTE", TOKEN_ENV, USE_ENV)}
    with tempfile.TemporaryDirectory(prefix="kraft-replay-warm-up-") as tmp:
        dump = synthetic_sample(tmp)
        done = subprocess.run([sys.executable, "-m", "replay.cli", "ingest", str(dump), "--lake", f"{tmp}/lake",
                               "--lake-cluster", "warm-up", "--no-progress"], env=env, capture_output=True,
                              text=True, timeout=timeout)
    if done.returncode != 0 or "kraft-replay server at" not in done.stderr:
        raise ServerError(f"the warm-up ingest through the server failed (exit {done.returncode}); it said:\n"
                          f"{done.stderr[-3000:]}")
    return time.monotonic() - began


def stop(timeout: float = 30.0) -> ServerState | None:
    """Stop the running server; returns it (None when none ran)."""
    state = running()
    if state is None:
        return None
    _kill(state.pid, timeout)
    with contextlib.suppress(OSError):
        _state_file().unlink()
    return state


def _kill(pid: int, timeout: float = 30.0) -> None:
    """End the server's process group (its JVM and Python workers): politely, then not."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline and _alive(pid):
        with contextlib.suppress(ChildProcessError):
            os.waitpid(pid, os.WNOHANG)
        time.sleep(0.2)
    if _alive(pid):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(pid, signal.SIGKILL)


def _tail(path: Path, lines: int = 30) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
