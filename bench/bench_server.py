"""The fixed cost with and without `kraft-replay server`, next to Kafka's own DumpLogSegments on the same files.

    python -m bench.bench_server                       # 250k records, 3 rounds
    python -m bench.bench_server --sizes 20k,250k --rounds 2

For each size: the realistic dump of `bench_pipeline` (cached under bench/out/logs/), then a server started with
`kraft-replay server start` (its own state directory under bench/out/server/, never the user's), then rounds of,
alternating:

    Kafka DumpLogSegments --cluster-metadata-decoder on every segment and snapshot (output discarded)
    kraft-replay ingest DIR                 (the README's main job, in a new process with a Spark session of its own:
                                             KRAFT_REPLAY_SERVER=off), into a fresh lake
    kraft-replay ingest DIR                 (the same command, which finds the server and runs its Spark work there),
                                             into another fresh lake; in round 1 it is the server's first work
    kraft-replay sql --lake ... 'SELECT count(*) FROM acl_state_at(...)'   (own session, then through the server)

and the server is stopped. Each lake's answer (`acls --lake`, delta-rs) is checked against the live ACLs the
generator recorded. Wall times only: the server's CPU is not in the client's process tree (its JVM's own CPU time
is reported from /proc). JSON in bench/out/server-<time>.json. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from bench import realistic_log
from bench.bench_pipeline import (
    CLUSTER,
    OUT,
    acl_answer,
    cli,
    dump_log_segments_command,
    new_results,
    read_files,
    run,
)
from bench.measure import process_tree, tree_rss_kib


def timed(cmd: list[str], env: dict[str, str], log: Path, stdout: Path | None = None) -> dict[str, Any]:
    """Run a client command to its end: wall seconds, exit code, the load average before."""
    load = os.getloadavg()[0]
    began = time.monotonic()
    with open(log, "wb") as err, (open(stdout, "wb") if stdout else open(os.devnull, "wb")) as out:
        code = subprocess.run(cmd, env=env, stdout=out, stderr=err).returncode
    wall = time.monotonic() - began
    if code:
        print(f"  !! {' '.join(cmd[2:5])} exited with {code}\n{log.read_text(errors='replace')[-3000:]}",
              file=sys.stderr)
    return {"wall_s": round(wall, 2), "exit": code, "load_before": round(load, 2)}


class ServerPeak:
    """The peak summed RSS of the server's process tree (its JVM and Python workers), sampled in a thread."""

    def __init__(self, pid: int, interval: float = 0.2) -> None:
        self.pid, self.interval, self.kib = pid, interval, 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.kib = max(self.kib, tree_rss_kib(process_tree(self.pid)))

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def jvm_cpu_seconds(pid: int) -> float:
    """User + system CPU of one process so far (/proc/PID/stat)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def one_size(args: argparse.Namespace, shape: realistic_log.LogShape) -> dict[str, Any]:
    work = args.out / "server-runs" / shape.name
    shutil.rmtree(work, ignore_errors=True)
    work.mkdir(parents=True)
    dump, manifest = realistic_log.cached(shape, args.out / "logs")
    paths = realistic_log.dump_files(dump)
    read_files(paths)
    answers = manifest["live_acls_after"]
    at = min((k for k in answers if int(k) >= shape.question_offsets()[0]), key=int)
    env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY=args.memory, KRAFT_REPLAY_PROGRESS="0",
               KRAFT_REPLAY_SERVER_DIR=str(work / "server"))
    env.pop("SPARK_REMOTE", None)
    own = dict(env, KRAFT_REPLAY_SERVER="off")
    print(f"{shape.name}: {manifest['records']:,} records, {manifest['input_bytes'] / 2**20:,.1f} MiB", flush=True)

    started = timed(cli("server", "start", "--memory", args.memory, "--output", "json"), env, work / "start.log",
                    work / "start.json")
    server = json.loads((work / "start.json").read_text())
    cpu_at_start = jvm_cpu_seconds(server["pid"])
    print(f"  server start: {started['wall_s']} s (pid {server['pid']})", flush=True)
    rounds: list[dict[str, Any]] = []
    peak = ServerPeak(server["pid"])
    question = f"SELECT count(*) AS n FROM acl_state_at('{CLUSTER}', {int(at)})"
    for k in range(1, args.rounds + 1):
        r: dict[str, Any] = {"round": k}
        kafka = run(f"kafka_{k}", dump_log_segments_command(paths), own)
        r["kafka_s"] = kafka.wall_s
        for mode, mode_env in (("own", own), ("server", env)):
            lake = work / f"lake-{mode}-{k}"
            cpu = jvm_cpu_seconds(server["pid"])
            r[f"main_job_{mode}"] = timed(cli("ingest", str(dump), "--lake", str(lake), "--lake-cluster", CLUSTER,
                                              "--no-progress"), mode_env, work / f"main-{mode}-{k}.log")
            r[f"main_job_{mode}"]["server_jvm_cpu_s"] = round(jvm_cpu_seconds(server["pid"]) - cpu, 1)
            r[f"sql_{mode}"] = timed(cli("sql", "--lake", str(lake), "--output", "json", question), mode_env,
                                     work / f"sql-{mode}-{k}.log", work / f"sql-{mode}-{k}.json")
            answer_file = work / f"acls-{mode}-{k}.json"
            timed(cli("acls", "--lake", str(lake), "--lake-cluster", CLUSTER, "--as-of-offset", str(at), "--output",
                      "json"), own, work / f"acls-{mode}-{k}.log", answer_file)
            r[f"answer_{mode}"] = acl_answer(answer_file).get("acls")
            r[f"sql_answer_{mode}"] = json.loads((work / f"sql-{mode}-{k}.json").read_text() or "[{}]")[0].get("n")
            shutil.rmtree(lake, ignore_errors=True)
        rounds.append(r)
        print(f"  round {k}: Kafka's tool {r['kafka_s']:.1f} s; main job {r['main_job_own']['wall_s']:.1f} s in its "
              f"own session, {r['main_job_server']['wall_s']:.1f} s through the server; sql "
              f"{r['sql_own']['wall_s']:.1f} s / {r['sql_server']['wall_s']:.1f} s; answers "
              f"{r['answer_own']}/{r['answer_server']} (expected {answers[at]})", flush=True)
    server_cpu = round(jvm_cpu_seconds(server["pid"]) - cpu_at_start, 1)
    peak.close()
    stopped = timed(cli("server", "stop"), env, work / "stop.log")
    later = [r for r in rounds if r["round"] > 1] or rounds
    return {
        "name": shape.name, "records": manifest["records"], "input_bytes": manifest["input_bytes"],
        "as_of_offset": int(at), "expected_live_acls": answers[at], "server_start_s": started["wall_s"],
        "server_stop_s": stopped["wall_s"], "server_jvm_cpu_s": server_cpu,
        "server_peak_rss_mib": round(peak.kib / 1024), "rounds": rounds,
        "kafka_s_min": min(r["kafka_s"] for r in rounds),
        "main_job_own_median_s": statistics.median(r["main_job_own"]["wall_s"] for r in rounds),
        "main_job_server_first_s": rounds[0]["main_job_server"]["wall_s"],
        "main_job_server_warm_median_s": statistics.median(r["main_job_server"]["wall_s"] for r in later),
        "sql_own_median_s": statistics.median(r["sql_own"]["wall_s"] for r in rounds),
        "sql_server_warm_median_s": statistics.median(r["sql_server"]["wall_s"] for r in later),
        "answers_as_expected": all(r[f"answer_{m}"] == answers[at] for r in rounds for m in ("own", "server"))
        and all(r["sql_answer_own"] == r["sql_answer_server"] for r in rounds),
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="250k", help="comma-separated record counts: 20k, 250k, 1m, 2m, 10m")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--memory", default="5g", help="driver memory of every session and of the server")
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args(argv)
    stamp, doc = new_results(args.out)
    for n in [realistic_log.parse_count(s) for s in args.sizes.split(",")]:
        doc["results"].append(one_size(args, realistic_log.LogShape(n, args.seed, "none")))
        doc["load_end"] = os.getloadavg()
        (args.out / f"server-{stamp}.json").write_text(json.dumps(doc, indent=1) + "\n")
    for r in doc["results"]:
        print(f"{r['name']}: Kafka's tool {r['kafka_s_min']:.1f} s; main job {r['main_job_own_median_s']:.1f} s in "
              f"its own session, {r['main_job_server_first_s']:.1f} s as the server's first, "
              f"{r['main_job_server_warm_median_s']:.1f} s warm; sql {r['sql_own_median_s']:.1f} s / "
              f"{r['sql_server_warm_median_s']:.1f} s; server start {r['server_start_s']:.1f} s, peak "
              f"{r['server_peak_rss_mib']} MiB; answers as expected: {r['answers_as_expected']}")
    print(f"load {doc['load_start'][0]:.2f} -> {doc['load_end'][0]:.2f}; results: "
          f"{args.out / f'server-{stamp}.json'}")


if __name__ == "__main__":
    main()
