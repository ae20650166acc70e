"""Where the CPU of a warm replay goes, per JVM thread group, for some sets of JVM options side by side.

    python -m bench.replay_cpu                                  # the suite's options, 6 full replays of a sample
    python -m bench.replay_cpu --jvm= --jvm=-XX:ReservedCodeCacheSize=1g --pairs 2

Each set of options runs in a process of its own (alternating, `--pairs` times): one local Spark session with the
test suite's settings (`tests/spark/spark_conf.py`) and the given driver options, the sample ingested into a fresh
lake, then `--replays` full replays. After each replay it prints the wall time and the CPU the JVM's threads used,
summed per group (the JIT's compiler threads, the driver's py4j threads, the executor tasks, the VM thread where the
serial collector runs, the DAG scheduler). Linux only (`/proc`). Nothing is asserted.
"""

from __future__ import annotations

import argparse
import collections
import glob
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import jvm_pid

ROOT = Path(__file__).resolve().parents[1]
_GROUPS = [("compiler", r"^C\d CompilerThre"), ("driver (py4j)", r"^Thread-\d+"),
           ("executor tasks", r"^Executor task"), ("GC (VM thread)", r"^VM Thread"),
           ("DAG scheduler", r"^dag-scheduler"), ("code sweeper", r"^Sweeper")]


def thread_cpu(pid: int) -> dict[str, float]:
    """CPU seconds per thread group of process `pid` so far (threads that have ended are not counted)."""
    tick = os.sysconf("SC_CLK_TCK")
    out: dict[str, float] = collections.defaultdict(float)
    for task in glob.glob(f"/proc/{pid}/task/*"):
        try:
            name = Path(task, "comm").read_text().strip()
            fields = Path(task, "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        group = next((g for g, pattern in _GROUPS if re.match(pattern, name)), "other")
        out[group] += (int(fields[11]) + int(fields[12])) / tick
    return out


def child(sample: str, replays: int, options: str) -> None:
    """One session: ingest `sample`, then `replays` full replays; one JSON line per replay on stdout."""
    sys.path.insert(0, str(ROOT / "tests" / "spark"))
    from spark_conf import SESSION_MEMORY, SPARK_TEST_CONF

    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.session import get_spark
    from replay.spark.tables import Lake

    spark = get_spark(master="local[2]", memory=SESSION_MEMORY,
                      conf={**SPARK_TEST_CONF, "spark.driver.extraJavaOptions": options})
    jvm = jvm_pid(spark)
    location = tempfile.mkdtemp(prefix="replay-cpu-")
    try:
        lake = Lake(spark, location)
        ingest(spark, [sample], "c1", lake, progress=False)
        replay_lake(lake, ["c1"], progress=False)
        for n in range(1, replays + 1):
            before, started = thread_cpu(jvm), time.monotonic()
            replay_lake(lake, ["c1"], progress=False, full=True)
            wall = time.monotonic() - started
            after = thread_cpu(jvm)
            cpu = {g: round(after[g] - before.get(g, 0.0), 1) for g in after}
            print(json.dumps({"replay": n, "wall": round(wall, 1), "cpu": round(sum(cpu.values()), 1),
                              "threads": cpu}), flush=True)
    finally:
        spark.stop()
        shutil.rmtree(location, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sample", default=str(ROOT / "data" / "retention-gap"))
    ap.add_argument("--replays", type=int, default=6, help="full replays after the first (default 6)")
    ap.add_argument("--jvm", action="append", dest="options", metavar="=OPTIONS",
                    help="a set of driver JVM options to compare, as --jvm=OPTIONS (repeat it; default: the "
                         "suite's long-lived session's)")
    ap.add_argument("--pairs", type=int, default=1, help="how many times each set runs, alternating")
    ap.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        child(args.sample, args.replays, (args.options or [""])[0])
        return 0
    if args.options is None:
        sys.path.insert(0, str(ROOT / "tests" / "spark"))
        from spark_conf import LONG_LIVED_JVM_OPTIONS
        args.options = [LONG_LIVED_JVM_OPTIONS]
    print(f"load average {os.getloadavg()[0]:.2f}; {args.replays} full replays of {args.sample} per session")
    totals: dict[str, list[float]] = collections.defaultdict(list)
    for _ in range(args.pairs):
        for options in args.options:
            cmd = [sys.executable, "-m", "bench.replay_cpu", "--child", "--sample", args.sample,
                   "--replays", str(args.replays), f"--jvm={options}"]
            proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, check=True)
            runs = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
            print(f"options {options!r}:")
            for r in runs:
                top = sorted(r["threads"].items(), key=lambda kv: -kv[1])[:5]
                print(f"  replay {r['replay']}: {r['wall']:5.1f} s wall, {r['cpu']:5.1f} s JVM CPU  "
                      + ", ".join(f"{g} {s}" for g, s in top))
            totals[options].append(sum(r["cpu"] for r in runs))
    print(f"load average {os.getloadavg()[0]:.2f}")
    for options, cpus in totals.items():
        print(f"JVM CPU of the replays, per session: {', '.join(f'{c:.0f} s' for c in cpus)}  ({options!r})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
