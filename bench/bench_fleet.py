"""A fleet's dumps, ingested and replayed by one scheduled `kraft-replay watch`, next to Kafka's DumpLogSegments.

    python -m bench.bench_fleet                                     # 10 clusters of 200k records each
    python -m bench.bench_fleet --clusters 3 --records 20k          # a quick run (a minute or two)
    python -m bench.bench_fleet --clusters 20 --records 250k --repeat 2 --memory 4g
    python -m bench.bench_fleet --clusters 30 --records 50k --days 2  # the log grows over two days

What a scheduled job does for many clusters at once: one directory holds every cluster's dump,
`ROOT/<cluster>/__cluster_metadata-0/...`, and `kraft-replay watch ROOT --cluster-from-path --trigger available-now`
takes everything new (here: all of it, into a fresh lake), ingests it (the clusters together: one decoding job,
one commit per table) and replays the clusters it touched, then stops.

For each cluster `cNN` (N from 1) a realistic dump (`bench.realistic_log`, seed `--seed-base` + N - 1) is
generated once into `<out>/logs/` and laid out, as hard links (copies across filesystems; never symlinks, which
Spark's listing does not follow), under `<out>/runs/fleet-<clusters>x<records>/root/`. Every input is read once so
that no measured run is the one that brings it into the page cache. Then, each as its own process and alternating:

    Kafka DumpLogSegments --cluster-metadata-decoder on every segment and snapshot of every cluster (one process,
                                                    output discarded)
    kraft-replay watch ROOT --lake LAKE --cluster-from-path --trigger available-now   (a fresh lake; Spark's
                                                    event log on)
    Kafka DumpLogSegments (again)
    ... the watch and Kafka's tool again, `--repeat` times in all

With `--days D` the fleet's logs grow over D days, as a scheduled job sees them. Day N's dump of each cluster is
its log before offset N/D of the whole (cut at a batch boundary: `cut_dump`) with the snapshots taken by then, laid
out under `ROOT/<cluster>/dayN/` when its day comes; every day repeats all the earlier ones hold, as a node's dump
does while retention deletes nothing. Each day, Kafka's tool reads that day's dumps and one watch takes them into
the same lake: day 1 is a first ingest, each later day a MERGE of every cluster's whole dump (the part the lake
holds adds nothing) and a replay that resumes from each cluster's last settled snapshot. `--repeat` runs the
days again into a fresh lake. One table row per day.

Each run is measured as `bench.bench_pipeline` measures (wall, CPU of the whole process tree, its peak RSS, load
average; Spark's jobs and stages from its event log). Then the answers are checked on the last watch's lake: for
every cluster, `kraft-replay acls --lake LAKE --lake-cluster cNN --as-of-offset N --output json` (the lake's files
read with delta-rs, no Spark) must list the live ACLs the generator recorded at N, one of the cluster's question
offsets (a different one per cluster, in turn). A wrong answer is printed loudly and recorded, never asserted.

Results: a short table, and everything (each run, the machine, each cluster's answer) in
`<out>/fleet-<time>.json`. Figures are only comparable within one run on a quiet machine.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from bench import realistic_log
from bench.bench_pipeline import (
    OUT,
    Run,
    acl_answer,
    become_subreaper,
    cli,
    directory_bytes,
    dump_log_segments_command,
    machine,
    read_files,
    run,
    run_env,
)
from replay.kafka import files as kfiles
from replay.kafka.batch import batch_position
from replay.kafka.model import SourceKind

# A log line's level, and what follows it (the date in front differs from run to run): log4j's `WARN Utils: ...`,
# Python's and the JVM's `WARNING: ...`; not a quoted level (Spark's `Setting default log level to "WARN".`).
_LEVEL_RE = re.compile(r"\b(WARN|WARNING|ERROR|FATAL)\b:?\s+(\S.*)")


@dataclass
class Member:
    """One cluster of the fleet: its dump as generated (cached) and where it is laid out under the root."""

    name: str
    seed: int
    shape: realistic_log.LogShape
    source: Path  # the cached dump directory (holds __cluster_metadata-0 and manifest.json)
    manifest: dict[str, Any]
    directory: Path  # ROOT/<name>

    def files(self, day: int | None = None) -> list[Path]:
        """The dump's files as laid out: the whole dump, or one day's (`ROOT/<name>/day<N>/`)."""
        return realistic_log.dump_files(self.directory if day is None else self.directory / f"day{day}")

    def day_end(self, day: int, days: int) -> int:
        """The first offset day `day`'s dump does not hold: the log grows evenly over the days, and each day's dump
        holds it from the start (a node keeps its whole log while retention does not delete any of it)."""
        return (int(self.manifest["last_offset"]) + 1) * day // days

    def question(self, turn: int) -> str:
        """The offset to ask at (a manifest key): the generator's answer at the first NoOp at or after one of the
        shape's question offsets, chosen by `turn` so that a fleet asks at several points of the log."""
        answers: dict[str, int] = self.manifest["live_acls_after"]
        offsets = self.shape.question_offsets()
        wanted = offsets[turn % len(offsets)]
        later = [k for k in answers if int(k) >= wanted]
        return min(later, key=int) if later else max(answers, key=int)


def lay_out(source: Path, target: Path) -> str:
    """Put the dump's partition directory at `target` as hard links (the files are never written to), or as copies
    where the two are on different filesystems; returns which. Not symlinks: Spark's listing does not follow them."""
    target.mkdir(parents=True)
    how = "hard links"
    for path in sorted(source.iterdir()):
        if path.is_file() and not _link(path, target / path.name):
            how = "copies"
    return how


def cut_dump(source: Path, target: Path, end: int) -> None:
    """A node's dump of the log as it stood before offset `end`: its segments up to the batch holding `end` (cut at
    that batch's start, copied) and its snapshots ending at or before `end` (hard links, as whole segments are)."""
    target.mkdir(parents=True)
    for path in sorted(source.iterdir()):
        found = kfiles.classify_name(str(path))
        if found is not None and found.kind == SourceKind.SNAPSHOT:
            if found.snapshot_end_offset is not None and found.snapshot_end_offset <= end:
                _link(path, target / path.name)
            continue
        if found is None or found.kind != SourceKind.SEGMENT or found.base_offset is None or found.base_offset >= end:
            continue
        at = batch_position(str(path), end)
        if at is None:  # the whole segment lies before `end`
            _link(path, target / path.name)
            continue
        with path.open("rb") as f, (target / path.name).open("wb") as out:
            out.write(f.read(at[0]))


def _link(source: Path, target: Path) -> bool:
    """A hard link, or a copy where the two are on different filesystems; False for a copy."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)
        return False
    return True


def notable_lines(log: Path, limit: int = 12) -> dict[str, Any]:
    """The WARN/ERROR lines of a run's stderr, counted, with the first few distinct ones (date left off): what a
    scheduled job's log would show its operator."""
    counts = {"WARN": 0, "ERROR": 0, "FATAL": 0, "Traceback": 0}
    distinct: list[str] = []
    try:
        text = log.read_text(errors="replace")
    except OSError:
        return {"counts": counts, "first": distinct}
    for line in text.splitlines():
        if line.startswith("Traceback"):
            counts["Traceback"] += 1
        m = _LEVEL_RE.search(line)
        if m is None:
            continue
        level = "WARN" if m.group(1) == "WARNING" else m.group(1)
        counts[level] += 1
        what = f"{level} {m.group(2)}"[:300]
        if what not in distinct and len(distinct) < limit:
            distinct.append(what)
    return {"counts": counts, "first": distinct}


def source_state() -> dict[str, Any]:
    """The commit the measured code is at, and the files changed since (the watch measured is the working copy's);
    read-only git commands, without optional locks."""
    def git(*args: str) -> str:
        try:
            done = subprocess.run(["git", "--no-optional-locks", *args], capture_output=True, text=True,
                                  cwd=Path(__file__).parent, timeout=30)
        except (OSError, subprocess.SubprocessError):
            return ""
        return done.stdout.strip("\n") if done.returncode == 0 else ""  # status lines begin with a space

    return {"commit": git("rev-parse", "HEAD") or None,
            "changed": [line[3:] for line in git("status", "--porcelain", "--untracked-files=no").splitlines()]}


class Fleet:
    """Every step of one fleet run."""

    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.work: Path = args.out / "runs" / f"fleet-{args.clusters}x{realistic_log.count_label(args.records)}"
        self.root = self.work / "root"
        self.runs: list[Run] = []
        self.members: list[Member] = []
        self.layout = "hard links"

    def step(self, name: str, cmd: list[str], spark: bool = False, stdout: Path | None = None,
             quiet: bool = False) -> Run:
        env, events = run_env(self.args.memory, self.work, name if spark else None)
        r = run(name, cmd, env, stdout=stdout, log=self.work / f"{name}.stderr", spark_events=events)
        self.runs.append(r)
        if not quiet:
            extra = (f", Spark jobs {r.spark['jobs']}, stages {r.spark['stages']} "
                     f"({r.spark['single_task_stages']} single-task)") if r.spark else ""
            print(f"  {name}: {r.wall_s:,.1f} s wall, {r.cpu_s:,.1f} s CPU, peak {r.peak_rss_mib:,.0f} MiB over "
                  f"{r.processes} processes, load {r.load_before:.2f} -> {r.load_after:.2f}, exit {r.exit}{extra}",
                  flush=True)
        return r

    def prepare(self) -> None:
        """Generate (or reuse) each cluster's dump and lay the fleet out under the root."""
        a = self.args
        shutil.rmtree(self.work, ignore_errors=True)
        self.work.mkdir(parents=True)
        width = max(2, len(str(a.clusters)))
        partition = kfiles.METADATA_PARTITION_DIR
        t = time.monotonic()
        for i in range(a.clusters):
            shape = realistic_log.LogShape(a.records, a.seed_base + i)
            source, manifest = realistic_log.cached(shape, a.out / "logs")
            name = f"c{i + 1:0{width}d}"
            member = Member(name, shape.seed, shape, source, manifest, self.root / name)
            self.members.append(member)
            if a.days == 1:
                if lay_out(source / partition, self.root / name / partition) == "copies":
                    self.layout = "copies"
                continue
            for day in range(1, a.days + 1):  # laid out under the root on its day (`release`)
                cut_dump(source / partition, self.day_dump(name, day) / partition, member.day_end(day, a.days))
        records = sum(m.manifest["records"] for m in self.members)
        where = (f"{directory_bytes(self.root) / 2**20:,.1f} MiB in {len(self.all_files())} files under {self.root}"
                 if a.days == 1 else
                 f"{a.days} daily dumps of each (the last day's "
                 f"{sum(directory_bytes(self.day_dump(m.name, a.days)) for m in self.members) / 2**20:,.1f} MiB), "
                 f"under {self.work / 'days'}")
        print(f"fleet of {a.clusters} x {realistic_log.count_label(a.records)}: {records:,} records, {where} "
              f"({self.layout}; ready in {time.monotonic() - t:.1f} s)", flush=True)

    def day_dump(self, name: str, day: int) -> Path:
        """Where a cluster's dump of one day is kept until its day comes."""
        return self.work / "days" / name / f"day{day}"

    def release(self, day: int) -> list[Path]:
        """Lay each cluster's dump of `day` out under the root (`ROOT/<cluster>/day<N>/`), as it arrives that day;
        returns its files."""
        for m in self.members:
            partition = kfiles.METADATA_PARTITION_DIR
            if lay_out(self.day_dump(m.name, day) / partition, m.directory / f"day{day}" / partition) == "copies":
                self.layout = "copies"
        return [p for m in self.members for p in m.files(day)]

    def all_files(self) -> list[Path]:
        return [p for m in self.members for p in m.files()]

    def lake(self, i: int) -> Path:
        return self.work / f"lake-{i}"

    def watch(self, name: str, lake: Path) -> None:
        self.step(name, cli("watch", str(self.root), "--lake", str(lake), "--cluster-from-path",
                            "--trigger", "available-now", "--no-progress"),
                  spark=True, stdout=self.work / f"{name}.out")

    def execute(self) -> dict[str, Any]:
        a = self.args
        self.prepare()
        paths = self.all_files() if a.days == 1 else sorted(p for p in (self.work / "days").rglob("*") if p.is_file())
        read_files(paths)
        load_start = os.getloadavg()
        if a.days == 1:
            self.step("kafka_dump_all_1", dump_log_segments_command(paths))
        for i in range(1, a.repeat + 1):
            if i > 1:
                shutil.rmtree(self.lake(i - 1), ignore_errors=True)  # only the last lake is asked
            if a.days == 1:
                self.watch(f"watch_{i}", self.lake(i))
                self.step(f"kafka_dump_all_{i + 1}", dump_log_segments_command(paths))
                continue
            shutil.rmtree(self.root, ignore_errors=True)  # each repeat's days arrive one by one into a fresh lake
            for day in range(1, a.days + 1):
                self.step(f"kafka_dump_day{day}_{i}", dump_log_segments_command(self.release(day)))
                self.watch(f"watch_{i}_day{day}", self.lake(i))
        load_end = os.getloadavg()
        answers = self.check(self.lake(a.repeat))
        result = self.summary(answers, load_start, load_end)
        if not a.keep_lake:
            shutil.rmtree(self.lake(a.repeat), ignore_errors=True)
        return result

    def check(self, lake: Path) -> list[dict[str, Any]]:
        """Each cluster's live ACLs at one of its question offsets, from the lake without Spark, against the
        generator's count."""
        out: list[dict[str, Any]] = []
        for turn, m in enumerate(self.members):
            at = m.question(turn)
            expected = m.manifest["live_acls_after"][at]
            answer_file = self.work / f"acls-{m.name}.json"
            r = self.step(f"acls_{m.name}", cli("acls", "--lake", str(lake), "--lake-cluster", m.name,
                                                "--as-of-offset", at, "--output", "json"),
                          stdout=answer_file, quiet=True)
            got = {k: v for k, v in acl_answer(answer_file).items() if k != "ids"}
            log = self.work / f"acls_{m.name}.stderr"
            fell_back = log.exists() and "asking Spark instead" in log.read_text(errors="replace")
            ok = r.exit == 0 and got.get("acls") == expected and got.get("uncertain") == 0
            out.append({"cluster": m.name, "seed": m.seed, "as_of_offset": int(at), "expected": expected, **got,
                        "exit": r.exit, "seconds": r.wall_s, "asked_spark_instead": fell_back, "ok": ok})
            if not ok:
                print(f"  !!! WRONG ANSWER: {m.name} at offset {at}: expected {expected} live ACLs, got {got} "
                      f"(exit {r.exit}; {answer_file})", file=sys.stderr, flush=True)
            if fell_back:
                print(f"  !! {m.name}: acls --lake did not read the lake with delta-rs and asked Spark instead "
                      f"(see {log})", file=sys.stderr, flush=True)
        good = sum(1 for x in out if x["ok"])
        asked = ", ".join(f"{x['cluster']}@{x['as_of_offset']}: {x.get('acls')}" for x in out)
        print(f"  answers: {good}/{len(out)} as the generator recorded ({asked})", flush=True)
        return out

    def summary(self, answers: list[dict[str, Any]], load_start: tuple[float, float, float],
                load_end: tuple[float, float, float]) -> dict[str, Any]:
        """The figures of each day (one day: the whole fleet at once), best of the repeats; the top-level watch and
        Kafka figures are the last day's."""
        figures = [self.day_figures(day) for day in range(1, self.args.days + 1)]
        days = [d for d, _best in figures]
        last, best = figures[-1]
        watches = [r for r in self.runs if r.name.startswith("watch_")]
        records = sum(m.manifest["records"] for m in self.members)  # the last day's dumps hold every record
        return {
            "clusters": len(self.members), "records_per_cluster": self.args.records, "records": records, "days": days,
            "input_bytes": last["input_bytes"], "files": last["files"], "layout": self.layout, "root": str(self.root),
            "members": [{"name": m.name, "seed": m.seed, "log": m.shape.name, "records": m.manifest["records"],
                         "input_bytes": m.manifest["input_bytes"], "segments": len(m.manifest["segments"]),
                         "snapshots": len(m.manifest["snapshots"])} for m in self.members],
            "kafka_dump_all_seconds": last["kafka_seconds"], "kafka_dump_all_runs": last["kafka_runs"],
            "kafka_records_per_second": round(records / last["kafka_seconds"]),
            "watch_seconds": best.wall_s, "watch_runs": last["watch_runs"], "watch_best": best.name,
            "watch_over_kafka": last["watch_over_kafka"],
            "watch_records_per_second": round(records / best.wall_s),
            "watch_cpu_seconds": best.cpu_s, "watch_peak_rss_mib": best.peak_rss_mib,
            "watch_exit": [r.exit for r in watches], "watch_spark": best.spark,
            "watch_stdout": (self.work / f"{best.name}.out").read_text(errors="replace")
            if (self.work / f"{best.name}.out").exists() else "",
            "watch_stderr": {r.name: notable_lines(self.work / f"{r.name}.stderr") for r in watches},
            "load_start": load_start, "load_end": load_end,
            "answers": answers, "answers_ok": sum(1 for x in answers if x["ok"]), "answers_total": len(answers),
            "runs": [asdict(r) for r in self.runs],
        }

    def day_figures(self, day: int) -> tuple[dict[str, Any], Run]:
        """One day's dumps: what they hold, Kafka's tool over them, and the watch that took them (best run, also
        returned)."""
        several = self.args.days > 1
        kafka = [r for r in self.runs
                 if (r.name.startswith(f"kafka_dump_day{day}_") if several else r.name.startswith("kafka_dump_all_"))]
        watches = [r for r in self.runs
                   if r.name.startswith("watch_") and (r.name.endswith(f"_day{day}") or not several)]
        best = min(watches, key=lambda r: r.wall_s)
        files = [p for m in self.members for p in m.files(day if several else None)]
        kafka_s = min(r.wall_s for r in kafka)
        return {"day": day, "offsets": sum(m.day_end(day, self.args.days) for m in self.members),
                "input_bytes": sum(p.stat().st_size for p in files), "files": len(files),
                "kafka_seconds": kafka_s, "kafka_runs": [r.wall_s for r in kafka],
                "watch_seconds": best.wall_s, "watch_runs": [r.wall_s for r in watches],
                "watch_over_kafka": round(best.wall_s / kafka_s, 2), "watch_cpu_seconds": best.cpu_s,
                "watch_peak_rss_mib": best.peak_rss_mib, "watch_spark": best.spark}, best


def table(r: dict[str, Any]) -> list[str]:
    """The figures people compare: one line for the fleet, or one per day."""
    several = len(r["days"]) > 1
    head = (*(("day", "offsets") if several else ("clusters", "records in all")), "input MiB", "Kafka s", "watch s",
            "x Kafka", "ingest s", "replay s", "watch CPU s", "peak GiB", "Spark jobs/stages")
    rows = []
    for d in r["days"]:
        sp = d.get("watch_spark") or {}
        rows.append((*((str(d["day"]), f"{d['offsets']:,}") if several else (str(r["clusters"]), f"{r['records']:,}")),
                     f"{d['input_bytes'] / 2**20:,.1f}", f"{d['kafka_seconds']:.1f}", f"{d['watch_seconds']:.1f}",
                     f"{d['watch_over_kafka']:.1f}", *[f"{(sp.get('phases') or {}).get(phase, '-')}"
                                                       for phase in ("ingest", "replay")],
                     f"{d['watch_cpu_seconds']:.1f}",
                     f"{d['watch_peak_rss_mib'] / 1024:.2f}", f"{sp.get('jobs', '-')}/{sp.get('stages', '-')}"))
    widths = [max(len(c) for c in column) for column in zip(head, *rows, strict=True)]
    lines = ["  ".join(c.rjust(w) for c, w in zip(line, widths, strict=True)) for line in (head, *rows)]
    return [*lines, f"{r['clusters']} clusters, load {r['load_start'][0]:.2f} -> {r['load_end'][0]:.2f}, answers "
            f"{r['answers_ok']}/{r['answers_total']} as the generator recorded"]


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--clusters", type=int, default=10, help="how many clusters' dumps under the one root")
    ap.add_argument("--records", type=realistic_log.parse_count, default=realistic_log.parse_count("200k"),
                    help="records per cluster's dump: 20k, 200k, 1m")
    ap.add_argument("--seed-base", type=int, default=1, help="cluster N's dump is generated with seed SEED_BASE + N - 1")
    ap.add_argument("--memory", default="2g", help="Spark driver memory (KRAFT_REPLAY_DRIVER_MEMORY)")
    ap.add_argument("--repeat", type=int, default=1, help="watch runs, each followed by Kafka's tool again")
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--keep-lake", action="store_true", help="keep the last watch's lake (its answers are checked)")
    ap.add_argument("--days", type=int, default=1,
                    help="the log grows over DAYS days; each day every cluster's dump (the log so far) arrives under "
                         "ROOT/<cluster>/day<N>/ and one watch takes it into the same lake")
    args = ap.parse_args(argv)
    if args.clusters < 1 or args.repeat < 1 or args.days < 1:
        ap.error("--clusters, --repeat and --days must be at least 1")

    become_subreaper()
    args.out.mkdir(parents=True, exist_ok=True)
    stamp = time.strftime("%Y%m%d-%H%M%S")
    doc: dict[str, Any] = {"started": stamp, "machine": machine(), "load_start": os.getloadavg(),
                           "argv": sys.argv[1:], "source": source_state(),
                           "settings": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()}}
    print(f"{doc['machine']['cpus']} CPUs, {doc['machine']['memory_gib']} GiB, {doc['machine']['java']}; "
          f"load {' '.join(f'{x:.2f}' for x in doc['load_start'])}", flush=True)
    result = Fleet(args).execute()
    doc["result"] = result
    doc["load_end"] = os.getloadavg()
    path = args.out / f"fleet-{stamp}.json"
    path.write_text(json.dumps(doc, indent=1) + "\n")
    print("\n".join(table(result)))
    for name, seen in result["watch_stderr"].items():
        counts = {k: v for k, v in seen["counts"].items() if v}
        if counts:
            print(f"{name} stderr: {counts}; first: {seen['first'][:3]}")
    if result["answers_ok"] != result["answers_total"]:
        print(f"!!! {result['answers_total'] - result['answers_ok']} of {result['answers_total']} clusters gave a "
              "wrong answer (see `answers` in the results)", file=sys.stderr)
    print(f"results: {path}")


if __name__ == "__main__":
    main()
