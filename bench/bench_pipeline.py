"""The whole pipeline on realistic metadata logs, next to Kafka's own DumpLogSegments on the same files.

    python -m bench.bench_pipeline                                  # 250k records, uncompressed
    python -m bench.bench_pipeline --sizes 20k                      # a quick run
    python -m bench.bench_pipeline --sizes 250k,1m,2m,10m --codecs none,zstd
    python -m bench.bench_pipeline --sizes 1m --files-only          # only the runs without Spark: Kafka's tool,
                                                                    # acls PATH, inspect
    python -m bench.bench_pipeline --plot-only bench/out/pipeline-*.json   # redraw the plot from saved results

For each size and codec: generates (once, cached under bench/out/logs/) a realistic `__cluster_metadata` dump
(`bench.realistic_log`: 70% NoOps, 20% cluster records, 8% ACL records with transactions, snapshots, 64 MiB
segments), then runs, each as its own process and in this order, so that Kafka's tool and ours alternate:

    Kafka DumpLogSegments --cluster-metadata-decoder on every segment and snapshot (output discarded)
    kraft-replay ingest DIR --no-replay            (fresh lake)
    Kafka DumpLogSegments (again)
    kraft-replay replay
    Kafka DumpLogSegments (again)
    kraft-replay acls DIR --as-of-offset N         (the file path, no Spark: the last snapshot before N and
                                                    the log from there, `replay.kafka.needed_files`)
    kraft-replay acls DIR --as-of-offset N --read-all   (the same answer from every file, as Kafka's tool reads)
    Kafka DumpLogSegments on the first segment / kraft-replay inspect --format dump-log on it   (x --repeat)
    kraft-replay acls --lake --as-of-offset N      (cold: delta-rs, then --engine spark: a new Spark session)
    kraft-replay ingest DIR                        (`--main-job`: the README's main job, ingest and replay in one
                                                    process, into a second fresh lake; its answer checked too)
    warm questions: one process, one Spark session, acl_state_at at several offsets (Python API and SQL)

Each run reports wall time, CPU time (user + system of the whole process tree: this process is a child
subreaper, so Spark's JVM and its Python workers are reaped here and counted), the peak RSS of the tree (sampled
every 0.1 s) and the load average. Spark runs write an event log (a SPARK_CONF_DIR whose spark-defaults.conf
points `spark.eventLog.dir` under bench/out/spark/), parsed for jobs, stages and single-task stages. The answers
are checked: every `acls` command must give the live ACL count the generator recorded at N.

Results: printed, written to bench/out/pipeline-<time>.json, and plotted (time against size, log-log) to
bench/out/pipeline-<time>.png. Nothing is asserted; figures are only comparable within one run on a quiet machine.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import platform
import resource
import shutil
import statistics
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from bench import realistic_log
from bench.measure import process_tree, tree_rss_kib
from tests.harness import jvm as kafka_harness

DUMP_LOG_SEGMENTS = "org.apache.kafka.tools.DumpLogSegments"
OUT = Path(__file__).parent / "out"
CLUSTER = "bench"


def dump_log_segments_command(paths: list[Path]) -> list[str]:
    """`kafka-dump-log.sh --cluster-metadata-decoder --files ...` as `kafka-run-class.sh` starts it (its default
    heap and JVM options), with the harness's quiet logging."""
    return [kafka_harness.java(), "-Xmx256M", "-server", "-XX:+UseG1GC", "-XX:MaxGCPauseMillis=20",
            "-XX:InitiatingHeapOccupancyPercent=35", "-XX:+ExplicitGCInvokesConcurrent", "-XX:MaxInlineLevel=15",
            "-Djava.awt.headless=true", *kafka_harness.UTF8_FLAGS,
            f"-Dlog4j2.configurationFile={kafka_harness.LOG4J_TOOLS}", "-cp", kafka_harness.kafka_classpath(),
            DUMP_LOG_SEGMENTS, "--cluster-metadata-decoder", "--files", ",".join(map(str, paths))]


def cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "replay.cli", *args]


# ---- measuring a process tree ---------------------------------------------------------------------------------
def become_subreaper() -> None:
    """Orphaned descendants (Spark's JVM after the driver exits, its Python daemon) are re-parented to this process
    instead of init, so they are reaped here and their CPU time lands in this process's RUSAGE_CHILDREN."""
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(36, 1, 0, 0, 0)  # PR_SET_CHILD_SUBREAPER


def _own_children() -> list[int]:
    out: list[int] = []
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/children") as f:
            out += [int(c) for c in f.read().split()]
    return out


class TreePeak:
    """The peak summed VmRSS of every process below this one (the measured command, and whatever it left behind
    that was re-parented here), sampled in a thread."""

    def __init__(self, interval: float = 0.1) -> None:
        self.interval = interval
        self.peak_kib = 0
        self.processes = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        pids = [p for c in _own_children() for p in process_tree(c)]
        self.peak_kib = max(self.peak_kib, tree_rss_kib(pids))
        self.processes = max(self.processes, len(pids))

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self._sample()

    def close(self) -> None:
        self._stop.set()
        self._thread.join()


def _reap_all(timeout: float = 120.0) -> int:
    """Wait for every remaining descendant (re-parented here); returns how many were still running at the end."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            pid, _, _ = os.wait4(-1, os.WNOHANG)
        except ChildProcessError:
            return 0
        if pid == 0:
            time.sleep(0.05)
    return len(_own_children())


@dataclass
class Run:
    """One measured command."""

    name: str
    command: list[str]
    wall_s: float
    cpu_s: float
    user_s: float
    sys_s: float
    peak_rss_mib: float
    processes: int
    exit: int
    load_before: float
    load_after: float
    spark: dict[str, Any] | None = None
    extra: dict[str, Any] = field(default_factory=dict)


def run(name: str, cmd: list[str], env: dict[str, str] | None = None, stdout: Path | None = None,
        log: Path | None = None, spark_events: Path | None = None) -> Run:
    """Run `cmd` to its end (and every process it started), measured. stdout goes to `stdout` or nowhere, stderr to
    `log`; a failure prints the end of stderr."""
    load = os.getloadavg()[0]
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    sampler = TreePeak()
    began = time.monotonic()
    with contextlib.ExitStack() as stack:
        out = stack.enter_context(open(stdout, "wb")) if stdout else subprocess.DEVNULL
        err = stack.enter_context(open(log, "wb")) if log else subprocess.DEVNULL
        proc = subprocess.Popen(cmd, stdout=out, stderr=err, env=env)
        _, status, _ = os.wait4(proc.pid, 0)
        proc.returncode = os.waitstatus_to_exitcode(status)
    wall = time.monotonic() - began
    left = _reap_all()
    sampler.close()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    user, system = after.ru_utime - before.ru_utime, after.ru_stime - before.ru_stime
    result = Run(name, cmd, round(wall, 3), round(user + system, 3), round(user, 3), round(system, 3),
                 round(sampler.peak_kib / 1024, 1), sampler.processes, proc.returncode, load, os.getloadavg()[0])
    if left:
        result.extra["processes_left_running"] = left
    if spark_events is not None:
        result.spark = spark_event_counts(spark_events)
    if proc.returncode:
        tail = log.read_text(errors="replace")[-3000:] if log else ""
        print(f"  !! {name} exited with {proc.returncode}\n{tail}", file=sys.stderr)
    return result


# ---- Spark's event log --------------------------------------------------------------------------------------
def spark_conf_dir(root: Path, label: str) -> tuple[Path, Path]:
    """A SPARK_CONF_DIR whose spark-defaults.conf turns the event log on, into a directory of its own."""
    conf, events = root / label / "conf", root / label / "events"
    shutil.rmtree(root / label, ignore_errors=True)
    conf.mkdir(parents=True)
    events.mkdir(parents=True)
    (conf / "spark-defaults.conf").write_text(
        "spark.eventLog.enabled true\n"
        f"spark.eventLog.dir {events.resolve().as_uri()}\n"
        "spark.eventLog.compress false\n"
        "spark.eventLog.rolling.enabled false\n")
    return conf, events


def spark_event_counts(events: Path) -> dict[str, Any]:
    """Jobs, stages (completed, i.e. run; skipped ones never start), single-task stages and their time, tasks, from
    every event log under `events` (one per Spark application); per step of the ingest or replay (the job
    property `replay.spark.session.step` sets) its jobs and the seconds they ran; per phase (the part of a step's
    name before its colon: `ingest`, `replay`) the wall seconds from its first job's start to its last job's end, in
    which jobs that ran at once count once; and the single-task stage that read the most rows (input and shuffle
    records), with its step: how much of the history one task had to go through."""
    jobs = stages = single = tasks = 0
    single_ms = stage_ms = 0
    apps = 0
    started: dict[tuple[int, int], tuple[str, int]] = {}  # (app, job) -> (step, submission ms)
    step_of_stage: dict[tuple[int, int], str] = {}  # (app, stage) -> step
    steps: dict[str, dict[str, float]] = {}
    spans: dict[str, list[int]] = {}  # phase -> [first job's start, last job's end] (ms)
    widest: dict[str, Any] = {"records": 0, "step": None, "seconds": 0.0}
    for path in sorted(events.iterdir()):
        apps += 1
        with open(path, encoding="utf-8") as f:
            for line in f:
                if '"Event":"SparkListenerJobStart"' in line:
                    jobs += 1
                    event = json.loads(line)
                    name = (event.get("Properties") or {}).get("kraft.replay.step", "(no step)")
                    started[(apps, event["Job ID"])] = (name, event["Submission Time"])
                    step_of_stage.update({(apps, stage): name for stage in event.get("Stage IDs", [])})
                elif '"Event":"SparkListenerJobEnd"' in line:
                    event = json.loads(line)
                    name, at = started.get((apps, event["Job ID"]), ("(no step)", event["Completion Time"]))
                    step = steps.setdefault(name, {"jobs": 0, "seconds": 0.0})
                    step["jobs"] += 1
                    step["seconds"] = round(step["seconds"] + (event["Completion Time"] - at) / 1000, 1)
                    if ":" in name:
                        span = spans.setdefault(name.split(":", 1)[0], [at, event["Completion Time"]])
                        span[0], span[1] = min(span[0], at), max(span[1], event["Completion Time"])
                elif '"Event":"SparkListenerStageCompleted"' in line:
                    info = json.loads(line)["Stage Info"]
                    n = info["Number of Tasks"]
                    took = info.get("Completion Time", 0) - info.get("Submission Time", 0)
                    stages += 1
                    tasks += n
                    stage_ms += took
                    if n == 1:
                        single += 1
                        single_ms += took
                        read = {a.get("Name"): a.get("Value") for a in info.get("Accumulables", [])}
                        rows = sum(int(read.get(k) or 0) for k in ("internal.metrics.input.recordsRead",
                                                                    "internal.metrics.shuffle.read.recordsRead"))
                        if rows > widest["records"]:
                            widest = {"records": rows, "step": step_of_stage.get((apps, info["Stage ID"])),
                                      "seconds": round(took / 1000, 1)}
    return {"applications": apps, "jobs": jobs, "stages": stages, "single_task_stages": single, "tasks": tasks,
            "stage_seconds": round(stage_ms / 1000, 1), "single_task_stage_seconds": round(single_ms / 1000, 1),
            "widest_single_task_stage": widest,
            "phases": {phase: round((end - start) / 1000, 1) for phase, (start, end) in spans.items()},
            "steps": dict(sorted(steps.items(), key=lambda kv: -kv[1]["seconds"]))}


# ---- the steps ----------------------------------------------------------------------------------------------
def directory_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def lake_sizes(lake: Path) -> dict[str, int]:
    """Bytes per top-level directory of the lake (one per table), and the total."""
    sizes = {p.name: directory_bytes(p) for p in sorted(lake.iterdir()) if p.is_dir()}
    sizes["total"] = directory_bytes(lake)
    return sizes


def acl_answer(path: Path) -> dict[str, Any]:
    """What an `acls --output json` printed: the numbers of certain and uncertain ACLs, and whether exact."""
    try:
        doc = json.loads(path.read_text())
    except (OSError, ValueError) as err:
        return {"error": str(err)}
    return {"acls": len(doc["acls"]), "uncertain": len(doc["uncertain"]), "exact": doc["exact"],
            "ids": sorted(a["id"] for a in doc["acls"])}


def read_files(paths: list[Path]) -> None:
    """Read the inputs once, so that no measured run is the one that brings them into the page cache."""
    for p in paths:
        with open(p, "rb") as f:
            while f.read(1 << 24):
                pass


def run_env(memory: str, work: Path, spark_label: str | None = None) -> tuple[dict[str, str], Path | None]:
    """A measured command's environment (the driver memory, no progress bars) and, for a Spark run named
    `spark_label`, the directory its event log goes to (`spark_conf_dir` under `work/spark`)."""
    env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY=memory, KRAFT_REPLAY_PROGRESS="0")
    if spark_label is None:
        return env, None
    conf, events = spark_conf_dir(work / "spark", spark_label)
    env["SPARK_CONF_DIR"] = str(conf)
    return env, events


class SizeRun:
    """Every step for one generated dump."""

    def __init__(self, args: argparse.Namespace, shape: realistic_log.LogShape) -> None:
        self.args = args
        self.shape = shape
        self.work = args.out / "runs" / shape.name
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        self.lake = self.work / "lake"
        self.acls_all_file = self.work / "acls-path-all.json"  # what `acls PATH --read-all` printed
        self.main_lake = self.work / "lake-main-job"  # `--main-job`: ingest and replay in one `kraft-replay ingest`
        self.main_job_file = self.work / "acls-lake-main-job.json"
        self.runs: list[Run] = []

    def env(self, spark_label: str | None = None) -> tuple[dict[str, str], Path | None]:
        return run_env(self.args.memory, self.work, spark_label)

    def step(self, name: str, cmd: list[str], spark: bool = False, stdout: Path | None = None) -> Run:
        env, events = self.env(name if spark else None)
        r = run(name, cmd, env, stdout=stdout, log=self.work / f"{name}.stderr", spark_events=events)
        self.runs.append(r)
        widest = r.spark.get("widest_single_task_stage", {}) if r.spark else {}
        extra = f", Spark jobs {r.spark['jobs']}, stages {r.spark['stages']} ({r.spark['single_task_stages']} " \
                f"single-task, the widest reading {widest.get('records', 0):,} rows in " \
                f"{widest.get('step')})" if r.spark else ""
        print(f"  {name}: {r.wall_s:,.1f} s wall, {r.cpu_s:,.1f} s CPU, peak {r.peak_rss_mib:,.0f} MiB over "
              f"{r.processes} processes, exit {r.exit}{extra}", flush=True)
        return r

    def kafka(self, name: str, paths: list[Path]) -> Run:
        return self.step(name, dump_log_segments_command(paths))

    def execute(self) -> dict[str, Any]:
        a = self.args
        t = time.monotonic()
        dump, manifest = realistic_log.cached(self.shape, a.out / "logs")
        paths = realistic_log.dump_files(dump)
        segment = dump / realistic_log.files.METADATA_PARTITION_DIR / manifest["segments"][0]
        print(f"{self.shape.name}: {manifest['records']:,} records, {manifest['input_bytes'] / 2**20:,.1f} MiB in "
              f"{len(manifest['segments'])} segment(s) and {len(manifest['snapshots'])} snapshot(s) "
              f"(ready in {time.monotonic() - t:.1f} s; generated in {manifest['seconds']} s)", flush=True)
        read_files(paths)
        answers = manifest["live_acls_after"]
        first = self.shape.question_offsets()[0]  # about 90% into the log
        at = min((k for k in answers if int(k) >= first), key=int)
        lake = ["--lake", str(self.lake), "--lake-cluster", CLUSTER]
        load_start = os.getloadavg()

        self.kafka("kafka_dump_all_1", paths)
        if not a.files_only:
            self.step("ingest", cli("ingest", str(dump), *lake, "--no-replay", "--no-progress"), spark=True)
        self.kafka("kafka_dump_all_2", paths)
        if not a.files_only:
            self.step("replay", cli("replay", *lake), spark=True)
            self.kafka("kafka_dump_all_3", paths)
        acls_file = self.work / "acls-path.json"
        self.step("acls_path", cli("acls", str(dump), "--as-of-offset", at, "--output", "json"), stdout=acls_file)
        self.step("acls_path_all", cli("acls", str(dump), "--as-of-offset", at, "--output", "json", "--read-all"),
                  stdout=self.acls_all_file)
        for i in range(1, a.repeat + 1):
            self.kafka(f"kafka_dump_segment_{i}", [segment])
            self.step(f"inspect_segment_{i}", cli("inspect", "--format", "dump-log", str(segment)))
        if a.files_only:
            result = self.files_summary(manifest, at, acls_file)
            result["load_start"], result["load_end"] = load_start, os.getloadavg()
            return result
        lake_file = self.work / "acls-lake.json"
        self.step("acls_lake_cold", cli("acls", *lake, "--as-of-offset", at, "--output", "json"), stdout=lake_file)
        self.step("acls_lake_cold_spark", cli("acls", *lake, "--as-of-offset", at, "--output", "json", "--engine",
                                              "spark"), spark=True, stdout=self.work / "acls-lake-spark.json")
        if a.main_job:  # the README's main job: ingest and replay in one process (one JVM warms up, not two)
            one = ["--lake", str(self.main_lake), "--lake-cluster", CLUSTER]
            self.step("main_job", cli("ingest", str(dump), *one, "--no-progress"), spark=True)
            self.step("main_job_acls", cli("acls", *one, "--as-of-offset", at, "--output", "json"),
                      stdout=self.main_job_file)
            shutil.rmtree(self.main_lake, ignore_errors=True)
        warm_file = self.work / "warm.json"
        self.step("warm_queries", [sys.executable, "-m", "bench.bench_pipeline", "--warm", str(self.lake), CLUSTER,
                                   ",".join(answers), "--warm-rounds", str(a.warm_rounds)], spark=True,
                  stdout=warm_file)
        result = self.summary(manifest, at, acls_file, lake_file, warm_file)
        result["load_start"], result["load_end"] = load_start, os.getloadavg()
        if not a.keep_lake:
            shutil.rmtree(self.lake, ignore_errors=True)
        return result

    def files_summary(self, manifest: dict[str, Any], at: str, acls_file: Path) -> dict[str, Any]:
        """The figures of the runs without Spark (`--files-only`): Kafka's tool, `acls PATH`, `inspect`."""
        by = {r.name: r for r in self.runs}
        kafka_all = [r.wall_s for n, r in by.items() if n.startswith("kafka_dump_all")]
        kafka_seg = [r.wall_s for n, r in by.items() if n.startswith("kafka_dump_segment")]
        inspect = [r.wall_s for n, r in by.items() if n.startswith("inspect_segment")]
        path_answer, all_answer = acl_answer(acls_file), acl_answer(self.acls_all_file)
        return {
            "name": self.shape.name, "records": manifest["records"], "codec": self.shape.codec,
            "seed": self.shape.seed, "input_bytes": manifest["input_bytes"], "segments": len(manifest["segments"]),
            "snapshots": len(manifest["snapshots"]), "generation_seconds": manifest["seconds"],
            "as_of_offset": int(at), "expected_live_acls": manifest["live_acls_after"][at],
            "kafka_dump_all_seconds": min(kafka_all), "kafka_dump_all_runs": kafka_all,
            "kafka_records_per_second": round(manifest["records"] / min(kafka_all)),
            "acls_path_seconds": by["acls_path"].wall_s,
            "acls_path_over_kafka": round(by["acls_path"].wall_s / min(kafka_all), 2),
            "acls_path_peak_rss_mib": by["acls_path"].peak_rss_mib,
            "acls_path_all_seconds": by["acls_path_all"].wall_s,
            "acls_path_all_over_kafka": round(by["acls_path_all"].wall_s / min(kafka_all), 2),
            "acls_path_all_peak_rss_mib": by["acls_path_all"].peak_rss_mib,
            "inspect_segment_seconds": min(inspect), "kafka_dump_segment_seconds": min(kafka_seg),
            "inspect_over_kafka": round(min(inspect) / min(kafka_seg), 2),
            "peak_rss_mib": max(r.peak_rss_mib for r in self.runs if not r.name.startswith("kafka")),
            "answers": {"expected": manifest["live_acls_after"][at],
                        "acls_path": {k: v for k, v in path_answer.items() if k != "ids"},
                        "acls_path_all": {k: v for k, v in all_answer.items() if k != "ids"},
                        "same_path_ids": path_answer["ids"] == all_answer["ids"]},
            "runs": [asdict(r) for r in self.runs],
        }

    def summary(self, manifest: dict[str, Any], at: str, acls_file: Path, lake_file: Path, warm_file: Path
                ) -> dict[str, Any]:
        by = {r.name: r for r in self.runs}
        records = manifest["records"]
        kafka_all = [r.wall_s for n, r in by.items() if n.startswith("kafka_dump_all")]
        pipeline = by["ingest"].wall_s + by["replay"].wall_s
        path_answer, lake_answer = acl_answer(acls_file), acl_answer(lake_file)
        answers = manifest["live_acls_after"]
        expected = answers[at]
        warm: dict[str, Any] = {}
        with contextlib.suppress(OSError, ValueError):
            warm = json.loads(warm_file.read_text())
        sizes = lake_sizes(self.lake) if self.lake.exists() else {"total": 0}
        main_job: dict[str, Any] = {}
        if "main_job" in by:
            main_answer = acl_answer(self.main_job_file)
            main_job = {"main_job_seconds": by["main_job"].wall_s,
                        "main_job_over_kafka": round(by["main_job"].wall_s / min(kafka_all), 2),
                        "main_job_spark": by["main_job"].spark,
                        "main_job_same_ids": main_answer.get("ids") == lake_answer.get("ids")}
        return {
            **main_job,
            **self.files_summary(manifest, at, acls_file),
            "ingest_seconds": by["ingest"].wall_s, "replay_seconds": by["replay"].wall_s,
            "pipeline_seconds": round(pipeline, 3), "pipeline_over_kafka": round(pipeline / min(kafka_all), 2),
            "ingest_records_per_second": round(records / by["ingest"].wall_s),
            "pipeline_records_per_second": round(records / pipeline),
            "acls_lake_cold_seconds": by["acls_lake_cold"].wall_s,
            "acls_lake_cold_spark_seconds": by["acls_lake_cold_spark"].wall_s,
            "warm": warm,
            "lake_bytes": sizes, "lake_over_input": round(sizes["total"] / manifest["input_bytes"], 3),
            "replay_spark": by["replay"].spark, "ingest_spark": by["ingest"].spark,
            "answers": {"expected": expected,
                        "acls_path": {k: v for k, v in path_answer.items() if k != "ids"},
                        "acls_path_all": {k: v for k, v in acl_answer(self.acls_all_file).items() if k != "ids"},
                        "acls_lake": {k: v for k, v in lake_answer.items() if k != "ids"},
                        "same_ids": path_answer.get("ids") == lake_answer.get("ids"),
                        "same_ids_spark": acl_answer(self.work / "acls-lake-spark.json").get("ids")
                        == lake_answer.get("ids"),
                        "warm_rows_match": bool(warm.get("rows")) and all(
                            rows == {k: answers[k] for k in rows} for rows in warm["rows"].values())},
        }


# ---- warm questions (run in a child process of their own) ------------------------------------------------------
def warm_queries(lake_dir: str, cluster: str, offsets: list[int], rounds: int) -> dict[str, Any]:
    """One Spark session; after a first question of each kind, `rounds` passes over `offsets` through
    `queries.state_at` (Spark), the Python API's `Cluster.state_at` (the lake's files with delta-rs, the cluster's
    history kept between questions) and `SELECT * FROM acl_state_at(...)` (the SQL table function)."""
    from replay.spark import api, queries, session

    began = time.monotonic()
    lake = api.Lake(session.get_spark(), lake_dir)
    queries.register_sql_functions(lake)
    start = time.monotonic() - began

    def python_api(at: int) -> int:
        return len(queries.state_at(lake, cluster, offset=at).certain)

    def api_files(at: int) -> int:
        return len(lake.cluster(cluster).state_at(offset=at).certain)

    def sql(at: int) -> int:
        rows = lake.spark.sql(f"SELECT * FROM acl_state_at('{cluster}', {at})").collect()
        return sum(1 for r in rows if r["certainty"] == "certain")

    out: dict[str, Any] = {"session_seconds": round(start, 2), "rows": {}}
    for name, ask in (("state_at", python_api), ("api_state_at", api_files), ("sql_acl_state_at", sql)):
        first = time.monotonic()
        ask(offsets[0])
        took = [time.monotonic() - first]
        for _ in range(rounds):
            for at in offsets:
                t = time.monotonic()
                out["rows"].setdefault(name, {})[str(at)] = ask(at)
                took.append(time.monotonic() - t)
        out[name] = {"first_ms": round(took[0] * 1000, 1), "median_ms": round(statistics.median(took[1:]) * 1000, 1),
                     "max_ms": round(max(took[1:]) * 1000, 1), "questions": len(took) - 1}
    return out


# ---- report -------------------------------------------------------------------------------------------------
def table(results: list[dict[str, Any]]) -> list[str]:
    """The figures people compare, one line per dump."""
    head = ("records", "codec", "input MiB", "Kafka s", "ingest s", "replay s", "total s", "x Kafka",
            "acls PATH s (all files)", "inspect/Kafka seg s", "cold lake s (Spark)", "warm SQL ms (API)", "peak GiB", "lake/input",
            "replay jobs/stages/1-task")
    rows = [head]
    def fig(r: dict[str, Any], key: str, scale: float = 1.0, fmt: str = ".1f") -> str:
        return "-" if r.get(key) is None else f"{r[key] / scale:{fmt}}"  # `--files-only` runs have no Spark figures

    for r in results:
        sp = r.get("replay_spark") or {}
        warm = (f'{r.get("warm", {}).get("sql_acl_state_at", {}).get("median_ms", "-")} '
                f'({r.get("warm", {}).get("api_state_at", {}).get("median_ms", "-")})')
        rows.append((f"{r['records']:,}", r["codec"], f"{r['input_bytes'] / 2**20:,.1f}",
                     fig(r, "kafka_dump_all_seconds"), fig(r, "ingest_seconds"), fig(r, "replay_seconds"),
                     fig(r, "pipeline_seconds") + (f" (one process {fig(r, 'main_job_seconds')})"
                                                   if r.get("main_job_seconds") else ""),
                     fig(r, "pipeline_over_kafka"),
                     f"{fig(r, 'acls_path_seconds')} ({fig(r, 'acls_path_all_seconds')})",
                     f"{r['inspect_segment_seconds']:.1f}/{r['kafka_dump_segment_seconds']:.1f}",
                     f"{fig(r, 'acls_lake_cold_seconds')} ({fig(r, 'acls_lake_cold_spark_seconds')})", warm, fig(r, "peak_rss_mib", 1024, ".2f"),
                     fig(r, "lake_over_input", 1.0, ".2f"),
                     f"{sp.get('jobs', '-')}/{sp.get('stages', '-')}/{sp.get('single_task_stages', '-')}"))
    widths = [max(len(row[i]) for row in rows) for i in range(len(head))]
    return ["  ".join(c.rjust(w) for c, w in zip(row, widths, strict=True)) for row in rows]


def plot(results: list[dict[str, Any]], path: Path, title: str) -> None:
    """Seconds against records (log-log), ours and Kafka's, one line style per codec."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    series = (("pipeline_seconds", "ours: ingest + replay", "tab:red"),
              ("main_job_seconds", "ours: kraft-replay ingest (one process)", "tab:brown"),
              ("ingest_seconds", "ours: ingest --no-replay", "tab:orange"),
              ("replay_seconds", "ours: replay", "tab:purple"),
              ("acls_path_seconds", "ours: acls PATH (no Spark)", "tab:green"),
              ("acls_path_all_seconds", "ours: acls PATH --read-all", "tab:olive"),
              ("kafka_dump_all_seconds", "Kafka DumpLogSegments", "tab:blue"))
    fig, ax = plt.subplots(figsize=(9, 6), dpi=110)
    codecs = sorted({r["codec"] for r in results})
    for codec, style in zip(codecs, ("-", "--", ":", "-."), strict=False):
        rows = sorted((r for r in results if r["codec"] == codec), key=lambda r: r["records"])
        xs = [r["records"] for r in rows]
        for key, label, colour in series:
            if any(key not in r for r in rows):  # `--files-only`: no Spark runs
                continue
            ys = [r[key] for r in rows]
            name = f"{label} ({codec})" if len(codecs) > 1 else label
            last = f"{ys[-1]:,.1f} s at {realistic_log.count_label(round(xs[-1], -3))}"
            ax.plot(xs, ys, style, marker="o", color=colour, label=f"{name}: {last}")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("records in the log")
    ax.set_ylabel("wall time (s)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="both", alpha=0.3)
    ax.legend(fontsize=8, loc="upper left")
    sizes = sorted({r["records"] for r in results})
    # a log holds a few records more than its nominal size (2,000,011 for 2M): label the nominal size
    ax.set_xticks(sizes, [realistic_log.count_label(round(s, -3)) for s in sizes])
    ax.minorticks_off()
    fig.tight_layout()
    fig.savefig(path)
    plt.close(fig)


def machine() -> dict[str, Any]:
    java = subprocess.run([kafka_harness.java(), "-version"], capture_output=True, text=True).stderr.splitlines()
    meminfo = Path("/proc/meminfo").read_text().splitlines()
    mem = next((int(line.split()[1]) for line in meminfo if line.startswith("MemTotal:")), 0)
    return {"cpus": os.cpu_count(), "memory_gib": round(mem / 2**20, 1), "python": platform.python_version(),
            "java": java[0] if java else "?", "host": platform.node()}


def new_results(out: Path) -> tuple[str, dict[str, Any]]:
    """A run's time stamp and its results document (the machine, the load), said on stdout."""
    out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    doc: dict[str, Any] = {"started": stamp, "machine": machine(), "load_start": os.getloadavg(),
                           "argv": sys.argv[1:], "results": []}
    print(f"{doc['machine']['cpus']} CPUs, {doc['machine']['memory_gib']} GiB, {doc['machine']['java']}; "
          f"load {' '.join(f'{x:.2f}' for x in doc['load_start'])}", flush=True)
    return stamp, doc


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sizes", default="250k", help="comma-separated record counts: 20k, 250k, 1m, 2m, 10m")
    ap.add_argument("--codecs", default="none", help="comma-separated: none, zstd")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--memory", default="2g", help="Spark driver memory (KRAFT_REPLAY_DRIVER_MEMORY)")
    ap.add_argument("--repeat", type=int, default=2, help="alternations of DumpLogSegments/inspect on one segment")
    ap.add_argument("--warm-rounds", type=int, default=3, help="passes over the question offsets, warm")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--keep-lake", action="store_true")
    ap.add_argument("--main-job", action="store_true",
                    help="also run the README's main job, `kraft-replay ingest DIR` (ingest and replay in one "
                         "process), into a fresh lake of its own, and check its answer")
    ap.add_argument("--files-only", action="store_true",
                    help="only the runs without Spark: Kafka's tool, acls PATH, inspect (a few minutes at 1M)")
    ap.add_argument("--plot-only", nargs="+", type=Path, metavar="JSON", help="redraw one plot from saved results")
    ap.add_argument("--warm", nargs=3, metavar=("LAKE", "CLUSTER", "OFFSETS"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.warm:
        lake_dir, cluster, offsets = args.warm
        print(json.dumps(warm_queries(lake_dir, cluster, [int(o) for o in offsets.split(",")], args.warm_rounds)))
        return
    if args.plot_only:
        docs = [json.loads(p.read_text()) for p in args.plot_only]
        results = [r for d in docs for r in d["results"]]
        args.out.mkdir(parents=True, exist_ok=True)
        path = args.out / "pipeline-combined.png"
        plot(results, path, f"realistic metadata logs, {docs[0]['machine']['cpus']} CPUs")
        print("\n".join(table(results)))
        print(f"plot: {path}")
        return

    become_subreaper()
    stamp, doc = new_results(args.out)
    for n in [realistic_log.parse_count(s) for s in args.sizes.split(",")]:
        for codec in args.codecs.split(","):
            shape = realistic_log.LogShape(n, args.seed, codec)
            doc["results"].append(SizeRun(args, shape).execute())
            doc["load_end"] = os.getloadavg()
            (args.out / f"pipeline-{stamp}.json").write_text(json.dumps(doc, indent=1) + "\n")
    png = args.out / f"pipeline-{stamp}.png"
    load = f"load {doc['load_start'][0]:.2f} -> {doc['load_end'][0]:.2f}"
    plot(doc["results"], png, f"realistic metadata logs: ours vs Kafka's DumpLogSegments "
                              f"({doc['machine']['cpus']} CPUs, {load})")
    print("\n".join(table(doc["results"])))
    for r in doc["results"]:
        ans = r["answers"]
        lake = "" if args.files_only else (
            f", acls --lake {ans['acls_lake'].get('acls')}, same ids {ans['same_ids']} (with Spark: "
            f"{ans.get('same_ids_spark')}); warm answers all as "
            f"expected: {ans['warm_rows_match']}")
        if "main_job_same_ids" in r:
            lake += f"; the main job's lake gives the same ids: {r['main_job_same_ids']}"
        every = ans.get("acls_path_all", {}).get("acls")
        print(f"{r['name']}: live ACLs at {r['as_of_offset']}: expected {ans['expected']}, acls PATH "
              f"{ans['acls_path'].get('acls')} ({every} from every file){lake}")
    print(f"{load}; results: {args.out / f'pipeline-{stamp}.json'}; plot: {png}")


if __name__ == "__main__":
    main()
