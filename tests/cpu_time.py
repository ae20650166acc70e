"""CPU seconds per test, of the test's process and everything it started (a Spark JVM, a Connect server, a crashed
run, a broker), read from /proc: on CI's two cores the suite is bound by CPU, so the tests that use the most of it,
not those that wait longest, are where the run's time goes. Printed at the end of `make test` beside pytest's
`--durations`, with the machine's busy CPU over the run and how fast the host was (`calibration_ms`). A process
that outlives its parent (a PySpark gateway JVM whose Python exited without waiting for it, a killed run's JVM, the
standalone cluster's daemons) is reaped by init and its CPU is in the machine's figure only: in CI the tests' sum
fell 1,259 s short of it."""

from __future__ import annotations

import os
import time
import zlib
from pathlib import Path

_TICK = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def tree_cpu_seconds(pid: int | None = None) -> float:
    """CPU of a process and its descendants: their own time, and that of the children they have reaped (a finished
    subprocess counts in its parent). 0.0 where /proc is not there."""
    children: dict[int, list[int]] = {}
    ticks: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue  # ended meanwhile
        p = int(stat.parent.name)
        children.setdefault(int(fields[1]), []).append(p)
        ticks[p] = sum(int(f) for f in fields[11:15])  # utime, stime, cutime, cstime
    total, todo = 0, [os.getpid() if pid is None else pid]
    while todo:
        p = todo.pop()
        total += ticks.get(p, 0)
        todo += children.get(p, [])
    return total / _TICK


def machine_cpu_seconds() -> tuple[float, float]:
    """(busy, idle) CPU seconds of the whole machine since boot, summed over its cores."""
    try:
        values = [int(v) for v in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = values[3] + values[4]
    return (sum(values[:8]) - idle) / _TICK, idle / _TICK


def calibration_ms(rounds: int = 5) -> float:
    """Milliseconds of CPU a fixed single-threaded piece of work takes on this machine now (the least of `rounds`):
    dictionary inserts, a sort and a compression, about 0.15 s each round. The same suite took 18 to 22 minutes
    on the same 2-core machine in different hours of its shared host; this figure, taken at the start and at the
    end of a run, says how fast the host was then, so that two runs' times can be compared."""
    data = bytes((i * 7919 + (i >> 7)) & 0xFF for i in range(1 << 20))
    best = float("inf")
    for _ in range(rounds):
        started = time.process_time()
        table = {(i * 2_654_435_761) % 1_000_003: i for i in range(200_000)}
        sorted(table.items(), key=lambda kv: kv[1] ^ kv[0])
        zlib.compress(data, 6)
        best = min(best, time.process_time() - started)
    return best * 1000
