"""Wall time and peak memory of a process tree, for the benchmarks (nothing here is asserted anywhere).

Memory is the summed VmRSS of a process and all its descendants, sampled in a thread. Children are listed per
*thread* (`/proc/<pid>/task/<tid>/children`): the JVM starts Spark's Python workers from its own threads, which
`/proc/<pid>/task/<pid>/children` alone would miss.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from typing import Any


def _status_kib(pid: int, key: str) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next((int(line.split()[1]) for line in f if line.startswith(key + ":")), 0)


def jvm_pid(spark: Any) -> int:
    """The process id of a local session's driver JVM, as the JVM itself reports it."""
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    return int(jvm.java.lang.ProcessHandle.current().pid())


def process_tree(root: int) -> list[int]:
    """`root` and every descendant."""
    seen: list[int] = []
    todo = [root]
    while todo:
        pid = todo.pop()
        if pid in seen:
            continue
        seen.append(pid)
        try:
            tasks = os.listdir(f"/proc/{pid}/task")
        except OSError:
            continue
        for tid in tasks:
            try:
                with open(f"/proc/{pid}/task/{tid}/children") as f:
                    todo += [int(c) for c in f.read().split()]
            except OSError:
                continue
    return seen


class TreeMemory:
    """Samples the summed VmRSS of the tree under `root` (default: this process) every `interval` seconds in a
    thread; `phase(name)` records the peak (and the largest number of processes) seen while the block runs."""

    def __init__(self, root: int | None = None, interval: float = 0.05) -> None:
        self.root = os.getpid() if root is None else root
        self.interval = interval
        self.peaks: dict[str, tuple[int, int]] = {}
        self._current: str | None = None
        self._peak = (0, 0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def sample(self) -> tuple[int, int]:
        total, pids = 0, process_tree(self.root)
        for pid in pids:
            with contextlib.suppress(OSError):
                total += _status_kib(pid, "VmRSS")
        return total, len(pids)

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            if self._current is not None:
                kib, n = self.sample()
                self._peak = (max(self._peak[0], kib), max(self._peak[1], n))

    @contextlib.contextmanager
    def phase(self, name: str) -> Iterator[None]:
        self._peak = self.sample()
        self._current = name
        try:
            yield
        finally:
            self._current = None
            kib, n = self.sample()
            self.peaks[name] = (max(self._peak[0], kib), max(self._peak[1], n))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()

    def text(self, name: str) -> str:
        kib, n = self.peaks[name]
        return f"{kib / 1024:,.0f} MiB over {n} processes"


def measure(cmd: list[str], env: dict[str, str] | None = None, echo: bool = False) -> tuple[float, str, int]:
    """Run a command (output discarded; its stderr echoed with `echo`): (seconds, its tree's peak memory as text,
    exit code)."""
    began = time.monotonic()
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    memory = TreeMemory(proc.pid, interval=0.2)
    with memory.phase("run"):
        _, err = proc.communicate()
    memory.close()
    if proc.returncode or echo:
        print(err.decode(errors="replace")[-2000:].rstrip(), file=sys.stderr)
    return time.monotonic() - began, memory.text("run"), proc.returncode
