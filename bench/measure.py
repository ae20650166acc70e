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


def _memory(pid: int) -> tuple[int, int, int, str]:
    """(parent pid, VmSize KiB, VmRSS KiB, executable) of a process."""
    fields: dict[str, str] = {}
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value
    kib = [int(fields[k].split()[0]) if k in fields else 0 for k in ("VmSize", "VmRSS")]
    return int(fields["PPid"]), kib[0], kib[1], os.readlink(f"/proc/{pid}/exe")


def tree_rss_kib(pids: list[int]) -> int:
    """The summed VmRSS of `pids`, each address space counted once. A process the JVM starts (a Python worker, a
    shell command of Hadoop's) is cloned sharing the JVM's memory until it runs its program, and meanwhile reports
    the JVM's whole RSS as its own: sampled then, a 2.8 GiB JVM counted twice made a 2M replay's peak 5.8 GiB
    (2026-12-03). A child with its parent's executable and address-space size is such a clone, or a fork that owns
    nothing yet: not counted."""
    seen: dict[int, tuple[int, int, int, str]] = {}
    for pid in pids:
        with contextlib.suppress(OSError, KeyError, ValueError):
            seen[pid] = _memory(pid)
    total = 0
    for ppid, size, rss, exe in seen.values():
        parent = seen.get(ppid)
        if parent is not None and parent[1] == size and parent[3] == exe:
            continue
        total += rss
    return total


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
        pids = process_tree(self.root)
        return tree_rss_kib(pids), len(pids)

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
