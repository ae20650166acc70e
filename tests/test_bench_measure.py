"""The benchmark's memory figure counts each address space once (`bench.measure.tree_rss_kib`): a process cloned
from its parent and not yet running a program of its own (how the JVM starts its children) reports its parent's
memory as its own, and counting it doubled a 2M replay's peak."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time

from bench.measure import process_tree, tree_rss_kib

# the helper forks a twin of itself (same program, same address space size, nothing of its own yet) and starts a
# different program; then all three sleep
_HELPER = "import os, subprocess, time; subprocess.Popen(['sleep', '60']); os.fork(); time.sleep(60)"


def _rss_kib(pid: int) -> int:
    with open(f"/proc/{pid}/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def _exe(pid: int) -> str:
    return os.readlink(f"/proc/{pid}/exe")


def test_a_twin_of_its_parent_is_not_counted_again_and_other_programs_are() -> None:
    helper = subprocess.Popen([sys.executable, "-c", _HELPER])
    try:
        deadline = time.monotonic() + 30
        while True:
            pids = process_tree(helper.pid)
            children = [p for p in pids if p != helper.pid]
            if len(children) == 2 and any(_exe(p).endswith("sleep") for p in children):
                break
            assert time.monotonic() < deadline, f"the helper's children did not start: {pids}"
            time.sleep(0.05)
        time.sleep(0.5)  # all three idle now: their memory stays put
        sleeper = next(p for p in children if _exe(p).endswith("sleep"))
        twin = next(p for p in children if p != sleeper)
        assert _rss_kib(twin) > 0
        assert tree_rss_kib(pids) == _rss_kib(helper.pid) + _rss_kib(sleeper)
        assert tree_rss_kib([twin, sleeper]) == _rss_kib(twin) + _rss_kib(sleeper)  # without its parent: its own
    finally:
        for pid in process_tree(helper.pid)[1:]:
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)
        helper.kill()
        helper.wait()
