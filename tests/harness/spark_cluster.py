"""A Spark standalone master and worker from the pyspark install, on 127.0.0.1, for integration tests and trials.

The pip install of pyspark ships `bin/spark-class` but not the `sbin/start-*.sh` scripts, so the daemons are
started directly. Usage::

    with StandaloneCluster(cores=2, memory="2g") as cluster:
        run `kraft-replay ingest ... --master {cluster.url}`

or by hand: `python -m tests.harness.spark_cluster` (runs until Ctrl-C and prints the master URL).
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def spark_home() -> Path:
    import pyspark

    return Path(pyspark.__file__).parent


class StandaloneCluster:
    def __init__(self, cores: int = 2, memory: str = "2g", work_dir: str | None = None,
                 start_timeout: float = 90.0) -> None:
        self.cores = cores
        self.memory = memory
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="kraft-replay-spark-")
        self.work_dir = Path(work_dir or self._tmp.name)  # type: ignore[union-attr]
        self.start_timeout = start_timeout
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.procs: list[subprocess.Popen[bytes]] = []
        self.started_in: float | None = None

    def _env(self) -> dict[str, str]:
        env = dict(os.environ)
        env.update({"SPARK_HOME": str(spark_home()), "SPARK_LOCAL_IP": "127.0.0.1",
                    "PYSPARK_PYTHON": sys.executable, "SPARK_LOG_DIR": str(self.work_dir)})
        return env

    def _launch(self, name: str, args: list[str], ready: str) -> None:
        log = self.work_dir / f"{name}.log"
        cmd = [str(spark_home() / "bin" / "spark-class"), *args]
        with open(log, "wb") as out:
            proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT, env=self._env(),
                                    start_new_session=True)
        self.procs.append(proc)
        deadline = time.monotonic() + self.start_timeout
        while time.monotonic() < deadline:
            if proc.poll() is not None:
                raise RuntimeError(f"Spark {name} exited with {proc.returncode}; see {log}:\n{log.read_text()[-2000:]}")
            if ready in log.read_text(errors="replace"):
                return
            time.sleep(0.3)
        raise TimeoutError(f"Spark {name} not ready after {self.start_timeout:.0f}s; see {log}")

    def start(self) -> StandaloneCluster:
        began = time.monotonic()
        self.work_dir.mkdir(parents=True, exist_ok=True)
        self._launch("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1", "--port",
                                str(self.port), "--webui-port", str(free_port())], "I have been elected leader")
        self._launch("worker", ["org.apache.spark.deploy.worker.Worker", self.url, "--host", "127.0.0.1",
                                "--cores", str(self.cores), "--memory", self.memory, "--work-dir",
                                str(self.work_dir / "work"), "--webui-port", str(free_port())],
                     "Successfully registered with master")
        self.started_in = time.monotonic() - began
        return self

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                os.killpg(proc.pid, signal.SIGTERM)
        for proc in self.procs:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                os.killpg(proc.pid, signal.SIGKILL)
                proc.wait()
        self.procs.clear()
        if self._tmp is not None:
            self._tmp.cleanup()

    def __enter__(self) -> StandaloneCluster:
        try:
            return self.start()
        except BaseException:
            self.stop()
            raise

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


def serve_until_interrupted(line: str) -> None:
    """Print `line` and wait for Ctrl-C (the `python -m` entry points of the test servers)."""
    print(f"{line}; Ctrl-C stops it", flush=True)
    try:
        while True:
            time.sleep(3600)
    except KeyboardInterrupt:
        pass


def main() -> None:
    with StandaloneCluster() as cluster:
        serve_until_interrupted(f"Spark standalone cluster at {cluster.url} (started in {cluster.started_in:.1f}s)")


if __name__ == "__main__":
    main()
