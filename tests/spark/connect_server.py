"""A Spark Connect server from the pyspark install, with the Delta jars, on 127.0.0.1: what serverless compute and
standard access-mode clusters give a client (no SparkContext, no `.rdd`, no JVM gateway). Usage::

    with ConnectServer() as server:
        spark = SparkSession.builder.remote(server.url).getOrCreate()

or by hand: `python -m tests.spark.connect_server` (runs until Ctrl-C and prints the URL).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

from tests.harness.spark_cluster import free_port, serve_until_interrupted, spark_home


class ConnectServer:
    def __init__(self, master: str = "local[2]", memory: str = "2g", work_dir: str | None = None,
                 start_timeout: float = 120.0, env: dict[str, str] | None = None,
                 conf: dict[str, str] | None = None) -> None:
        self.env = env or {}  # over this process's environment (e.g. the executors' PYSPARK_PYTHON)
        self.conf = conf or {}  # over `local_conf`'s settings (the suite's: no code generation on tiny data)
        self.master = master
        self.memory = memory
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="kraft-replay-connect-")
        self.work_dir = Path(work_dir or self._tmp.name)  # type: ignore[union-attr]
        self.start_timeout = start_timeout
        self.port = free_port()
        self.url = f"sc://127.0.0.1:{self.port}"
        self.proc: subprocess.Popen[bytes] | None = None
        self.started_in: float | None = None

    def command(self) -> list[str]:
        from replay.spark.server import command

        return command(self.master, self.memory, self.port, self.conf, app_name="kraft-replay connect server")

    def start(self) -> ConnectServer:
        began = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        log = self.work_dir / "connect-server.log"
        env = {**os.environ, "SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
               "PYSPARK_PYTHON": sys.executable, **self.env}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(self.command(), stdout=out, stderr=subprocess.STDOUT, env=env,
                                         cwd=self.work_dir, start_new_session=True)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the Spark Connect server exited with {self.proc.returncode}; see {log}:\n"
                                   f"{log.read_text(errors='replace')[-3000:]}")
            if "Spark Connect server started" in log.read_text(errors="replace"):
                self.started_in = time.monotonic() - began
                return self
            time.sleep(0.3)
        self.stop()
        raise TimeoutError(f"Spark Connect server not ready after {self.start_timeout:.0f}s; see {log}")

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait()
        self.proc = None

    def __enter__(self) -> ConnectServer:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, value: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()
        if self._tmp is not None:
            self._tmp.cleanup()


def main() -> None:
    with ConnectServer() as server:
        serve_until_interrupted(f"Spark Connect server at {server.url} (started in {server.started_in:.1f} s)")


if __name__ == "__main__":
    main()
