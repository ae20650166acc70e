"""`kraft-replay demo`: the main job on embedded defaults, and a short guided tour of what it gives.

1. Finds the sample dumps (`data/<sample>/`, each a real `__cluster_metadata` copy; see `data/README.md`) and
   ingests each one into the lake (`./lakehouse` by default) as a cluster named after its directory, with local
   Spark; then replays them into the ACL history tables. Ingest is idempotent, so running the demo again adds
   nothing and gives the same answers.
2. Prints what was ingested (files, records, offsets, snapshots, problems, coverage, anomalies), the ACLs of one
   cluster as of a past moment in `kafka-acls --list` format, one "who could access this resource then" and one
   "what changed between two moments" question with their answers, and where the tables are.
3. Writes the plots as PNG files (`./demo-output/*.png` by default), with the full ACL listing next to them.

Without sample dumps (an installed wheel: the samples live in the repository's `data/`, and the wheel ships none)
the demo falls back to a **synthetic** dump: made-up ACLs written by `replay.kafka.synth` into the output directory
(segments, two snapshots, a retention hole), not a real Kafka log. It says so at the start of the tour; give
`--data DIR` or `$KRAFT_REPLAY_DATA` to use real dumps.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TextIO

DATA_ENV = "KRAFT_REPLAY_DATA"
DEFAULT_LAKE = "./lakehouse"
DEFAULT_OUT = "./demo-output"
FEATURED = ("retention-gap", "small-snapshots")  # the cluster the tour looks at, in order of preference
LISTING_LINES = 24  # ACL listing lines printed in the terminal; the whole listing goes to a file


# ---- finding the samples -------------------------------------------------------------------------------------

def _has_metadata_files(directory: Path) -> bool:
    if (directory / "__cluster_metadata-0").is_dir():
        return True
    return any(p.suffix in (".log", ".checkpoint") for p in directory.iterdir() if p.is_file()
               and p.name != "bootstrap.checkpoint")


def data_dir_candidates() -> list[Path]:
    """Where the sample dumps may be: `$KRAFT_REPLAY_DATA`, `data/` next to the package (the repository root in a
    source checkout), `replay/data/` (packaged samples: none exist today, so a wheel finds nothing there), `./data`."""
    package = Path(__file__).resolve().parent
    out = []
    if os.environ.get(DATA_ENV):
        out.append(Path(os.environ[DATA_ENV]))
    out += [package.parent / "data", package / "data", Path.cwd() / "data"]
    return out


def sample_dirs(data: str | os.PathLike[str]) -> list[Path]:
    """The sample dumps under `data`: subdirectories holding metadata log files (or `data` itself if it is one)."""
    root = Path(data)
    if not root.is_dir():
        return []
    subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    found = [p for p in subs if _has_metadata_files(p)]
    if not found and _has_metadata_files(root):
        return [root]
    return found


def default_data_dir() -> str | None:
    """The first candidate directory that holds sample dumps, or None."""
    for candidate in data_dir_candidates():
        if sample_dirs(candidate):
            return str(candidate)
    return None


def synthetic_sample(directory: str, seed: int = 7) -> Path:
    """A synthetic dump (segments, two snapshots, a retention hole) for when no real samples are around."""
    from replay.kafka import synth

    target = Path(directory) / "synthetic"
    if not _has_sample(target):
        log = synth.generate(seed, n_batches=80)
        end = log.end_offset
        synth.write_dump(log, str(target), synth.Layout(segment_every=40, snapshot_at=(end // 3, 2 * end // 3),
                                                        drop_segments=(0,)))
    return target


def _has_sample(path: Path) -> bool:
    return path.is_dir() and _has_metadata_files(path)


@dataclass
class Samples:
    """The dumps the demo ingests, where they came from, and what the tour says about them."""

    dirs: list[Path]
    synthetic: bool
    note: str


def locate_samples(data: str | None, out_dir: str) -> Samples:
    """The sample dumps under `data` (default: `default_data_dir()`); without any, a synthetic dump in `out_dir`.
    An explicit `data` without dumps raises FileNotFoundError."""
    found = data or default_data_dir()
    dirs = sample_dirs(found) if found else []
    if data and not dirs:
        raise FileNotFoundError(f"no sample dumps under {data} (expected subdirectories holding "
                                "__cluster_metadata-0/ or *.log / *.checkpoint files)")
    if dirs:
        return Samples(dirs, False, f"Sample dumps in {found}: {', '.join(p.name for p in dirs)} (real Kafka "
                                    "metadata logs; see data/README.md).")
    synthetic = synthetic_sample(out_dir)
    looked = ", ".join(str(p) for p in data_dir_candidates())
    return Samples([synthetic], True,
                   f"No sample dumps found (looked in {looked}).\nFalling back to a SYNTHETIC dump written to "
                   f"{synthetic}: made-up ACLs from replay.kafka.synth, not a real Kafka log. For real dumps give "
                   f"--data DIR or set ${DATA_ENV} (the repository's data/ holds three).")


def featured_cluster(clusters: Sequence[str]) -> str:
    for name in FEATURED:
        if name in clusters:
            return name
    return clusters[0]


# ---- answers the tour prints -------------------------------------------------------------------------------------

@dataclass
class Moment:
    offset: int
    time: int | None


def pick_moment(lake: Any, cluster: str, fraction: float = 0.6) -> Moment:
    """A past moment for the tour: the last batch at or before `fraction` of the cluster's time span."""
    from pyspark.sql import functions as F

    from replay.spark.queries import offset_at_time, time_of_offset

    times = lake.read("offset_times").where(F.col("cluster_id") == cluster)
    r = times.agg(F.min("time").alias("lo"), F.max("time").alias("hi")).first()
    if r is None or r["lo"] is None:
        raise RuntimeError(f"cluster {cluster!r} has no offsets with times in the lake")
    target = int(r["lo"] + (r["hi"] - r["lo"]) * fraction)
    offset = offset_at_time(lake, cluster, target)
    assert offset is not None
    return Moment(offset, time_of_offset(lake, cluster, offset))


def coverage_lines(lake: Any, cluster: str) -> list[str]:
    from pyspark.sql import functions as F

    rows = (lake.read("log_coverage").where(F.col("cluster_id") == cluster)
            .select("start_offset", "end_offset", "kind").orderBy("start_offset", "kind").limit(50).collect())
    words = {"log": "log records", "snapshot": "snapshot only", "missing": "in no dump (hole)",
             "incomplete": "incomplete (ACLs no dump recorded may have been live)"}
    return [f"{r['start_offset']}..{r['end_offset']} {words.get(r['kind'], r['kind'])}" for r in rows]


def anomaly_counts(lake: Any, cluster: str) -> dict[str, int]:
    from pyspark.sql import functions as F

    rows = lake.read("anomalies").where(F.col("cluster_id") == cluster).groupBy("kind").count().collect()
    return {str(r["kind"]): int(r["count"]) for r in rows}


# ---- the run -----------------------------------------------------------------------------------------------------

def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--data", metavar="DIR",
                        help="directory of sample dumps, one subdirectory per cluster (default: the repository's "
                             f"data/ or ${DATA_ENV})")
    parser.add_argument("--lake", metavar="DIR", default=DEFAULT_LAKE, help=f"lake directory (default {DEFAULT_LAKE})")
    parser.add_argument("--out", metavar="DIR", default=DEFAULT_OUT,
                        help=f"where the plots and listings go (default {DEFAULT_OUT})")
    parser.add_argument("--master", help="Spark master URL (default local[*])")


class _Tour:
    def __init__(self, out: TextIO) -> None:
        self.out = out
        self.started = time.monotonic()

    def say(self, text: str = "") -> None:
        self.out.write(text + "\n")
        self.out.flush()

    def section(self, title: str) -> None:
        self.say()
        self.say(f"== {title} " + "=" * max(3, 100 - len(title)))


def run(args: argparse.Namespace, out: TextIO) -> int:
    from replay.cli import format_time
    from replay.kafka.listing import render_acls
    from replay.spark import plots
    from replay.spark.ingest import ingest
    from replay.spark.queries import last_offset, state_at, time_of_offset
    from replay.spark.replay import replay_lake
    from replay.spark.session import get_spark
    from replay.spark.tables import Lake

    tour = _Tour(out)
    out_dir = os.path.abspath(args.out)
    os.makedirs(out_dir, exist_ok=True)
    try:
        located = locate_samples(args.data, out_dir)
    except FileNotFoundError as err:
        print(f"kraft-replay demo: {err}", file=sys.stderr)
        return 2
    samples = located.dirs

    tour.section("kraft-acl-replay demo")
    for line in located.note.splitlines():
        tour.say(line)
    spark = get_spark(master=args.master)
    lake = Lake(spark, args.lake)
    tour.say(f"Lake: {lake.location}")

    # 1. ingest and replay
    tour.section("1. Ingest (idempotent: a re-run finds nothing new) and replay")
    clusters: list[str] = []
    for sample in samples:
        cluster = sample.name
        report = ingest(spark, [str(sample)], cluster=cluster, lake=lake, progress=False)
        clusters.append(cluster)
        span = f"offsets {report.log_offsets[0]}..{report.log_offsets[1]}" if report.log_offsets else "no log records"
        snaps = ", ".join(f"{end}-{epoch}" for end, epoch in report.snapshots) or "none"
        problems = ("none" if not report.problems else
                    ", ".join(f"{k} {v}" for k, v in sorted(report.problems_by_kind.items())))
        tour.say(f"{cluster}: {len(report.files)} file(s), {report.bytes:,} bytes; {report.records:,} records "
                 f"({report.records_new:,} new), log {span}; snapshots (end offset-epoch) {snaps}; "
                 f"problems: {problems}")
    counts = replay_lake(lake, clusters)
    tour.say("replayed: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for cluster in clusters:
        anomalies = anomaly_counts(lake, cluster)
        tour.say(f"{cluster}: coverage " + "; ".join(coverage_lines(lake, cluster)))
        tour.say(f"{' ' * len(cluster)}  anomalies: "
                 + (", ".join(f"{k} {v}" for k, v in sorted(anomalies.items())) or "none"))

    # 2. the state at a past moment
    cluster = featured_cluster(clusters)
    moment = pick_moment(lake, cluster)
    end = last_offset(lake, cluster)
    tour.section(f"2. The ACLs of cluster {cluster} as of {format_time(moment.time)} (offset {moment.offset})")
    state = state_at(lake, cluster, time=moment.time)
    listing = render_acls(state.certain, "kafka-acls", state.uncertain, state.meta())
    listing_path = os.path.join(out_dir, f"acls-{cluster}-at-offset-{state.offset}.txt")
    with open(listing_path, "w", encoding="utf-8") as f:
        f.write("\n".join(listing) + "\n")
    doubts = ([f"{len(state.uncertain)} ACL(s) may or may not have been live"] if state.uncertain else []) + (
        [] if state.covered else ["no dump holds this offset"]) + (
        [] if state.complete else ["ACLs that no dump recorded may have been live then"])
    certainty = "exact" if state.exact else "not certain: " + "; ".join(doubts)
    tour.say(f"{len(state.certain)} ACL(s) certainly live at offset {state.offset} ({certainty}). "
             "As `kafka-acls --list` would have printed them:")
    for line in listing[:LISTING_LINES]:
        tour.say("  " + line)
    if len(listing) > LISTING_LINES:
        tour.say(f"  ... {len(listing) - LISTING_LINES} more line(s); the whole listing is in {listing_path}")

    # 3. who could access a resource then
    tour.section("3. Who could access a resource then?")
    supers, everyone = broker_settings(samples[clusters.index(cluster)])
    for line in who_could_access_lines(spark, lake, cluster, moment.offset, super_users=supers,
                                       allow_everyone=everyone):
        tour.say(line)

    # 4. what changed between two moments
    later = end if end is not None else moment.offset
    later_time = time_of_offset(lake, cluster, later)
    tour.section(f"4. What changed between offset {moment.offset} and offset {later} ({format_time(later_time)})?")
    for line in what_changed_lines(spark, lake, cluster, moment.offset, later, supers, everyone):
        tour.say(line)

    # 5. plots
    tour.section("5. Plots")
    principal = plots.busiest_principal(lake, cluster)
    made = [
        plots.save(plots.acl_count_figure(lake, cluster, "offset", mark=moment.offset),
                   os.path.join(out_dir, "acl-count-by-offset.png")),
        plots.save(plots.acl_count_figure(lake, cluster, "time", mark=moment.time),
                   os.path.join(out_dir, "acl-count-by-time.png")),
    ]
    changes = plots.changes_per_day_figure(lake, cluster, mark=moment.time)
    made.append(plots.save(changes, os.path.join(out_dir, "changes-per-period.png")))
    if principal:
        made.append(plots.save(plots.principal_timeline_figure(lake, cluster, principal, mark=moment.time),
                               os.path.join(out_dir, "principal-timeline.png")))
    for path in made:
        tour.say(f"wrote {path}")
    tour.say("(the changes plot: " + changes.axes[0].get_title().replace("\n", " ") + ")")
    if principal:
        tour.say(f"(the timeline shows {principal}, the principal named by the most ACLs of {cluster})")

    # 6. where things are
    tour.section("6. Where the tables are, and what to try next")
    tour.say(f"Delta tables in {lake.location}: metadata_records, quarantine, acl_events, acl_history, "
             "log_coverage, anomalies, offset_times (one partition per cluster: " + ", ".join(clusters) + ")")
    tour.say(f"Plots and the ACL listing: {out_dir}")
    lake_opt = f"--lake {args.lake}" if args.lake != DEFAULT_LAKE else ""
    tour.say("Try:")
    tour.say(f"  kraft-replay acls {lake_opt} --cluster {cluster} --as-of-offset {moment.offset}".replace("  --", " --"))
    tour.say(f"  kraft-replay changes {lake_opt} --cluster {cluster} --from-offset {moment.offset}"
             .replace("  --", " --"))
    tour.say(f"  kraft-replay sql {lake_opt} \"SELECT * FROM acl_state_at('{cluster}', {moment.offset})\""
             .replace("  \"", " \""))
    tour.say("  python -m replay.notebook notebooks/kraft_acl_replay.py   (the Databricks notebook, run locally)")
    tour.say(f"done in {time.monotonic() - tour.started:.0f} s")
    return 0


_OPERATION = {"TOPIC": "READ", "GROUP": "READ", "CLUSTER": "ALTER", "TRANSACTIONAL_ID": "WRITE",
              "DELEGATION_TOKEN": "DESCRIBE", "USER": "CREATE_TOKENS"}


def broker_settings(sample: Path | None) -> tuple[str, bool]:
    """`super.users` and `allow.everyone.if.no.acl.found` from the sample's `server.properties`, when it has one."""
    supers, everyone = "", False
    props = sample / "server.properties" if sample else None
    if props is not None and props.is_file():
        for line in props.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "super.users":
                supers = value.strip()
            elif sep and key.strip() == "allow.everyone.if.no.acl.found":
                everyone = value.strip().lower() == "true"
    return supers, everyone


def busiest_resource(lake: Any, cluster: str, offset: int) -> tuple[str, str] | None:
    """The literal topic (else any literal resource) with the most ALLOW ACLs live at `offset` for the operation the
    tour asks about there (`default_operation`, or ALL) from a host a client can present, so that the question has
    someone allowed to answer."""
    from functools import reduce

    from pyspark.sql import functions as F

    from replay.spark.authorize import register_host_function
    from replay.spark.queries import state_frame

    host_of = register_host_function(lake.spark)
    asked = reduce(lambda a, b: a | b, [(F.col("resource_type") == t) & F.col("operation").isin(op, "ALL")
                                        for t, op in _OPERATION.items()])
    matchable = (F.col("host") == "*") | F.coalesce(F.call_function(host_of, "host").getField("host") == F.col("host"),
                                                    F.lit(False))
    live = state_frame(lake, cluster, offset).where(
        (F.col("pattern_type") == "LITERAL") & (F.col("resource_name") != "*") & asked & matchable
        & (F.col("permission_type") == "ALLOW"))
    row = (live.groupBy("resource_type", "resource_name").count()
           .orderBy((F.col("resource_type") != "TOPIC").cast("int"), F.desc("count"), "resource_name").first())
    return None if row is None else (str(row["resource_type"]), str(row["resource_name"]))


def default_operation(resource_type: str) -> str:
    """The operation the tour asks about for a resource type (READ for topics and groups)."""
    return _OPERATION.get(resource_type, "DESCRIBE")


@dataclass
class WhoCanAnswer:
    """One who-could-access question (`replay.spark.audits.audit_who_can`) and its rows."""

    offset: int
    operation: str
    resource_type: str
    resource_name: str
    super_users: str
    allow_everyone: bool
    rows: list[dict[str, Any]]

    def lines(self) -> list[str]:
        from replay.spark.audits import render_audit

        head = (f"Who could {self.operation} {self.resource_type} {self.resource_name!r} as of offset {self.offset} "
                f"(super.users={self.super_users or '(none)'}, "
                f"allow.everyone.if.no.acl.found={str(self.allow_everyone).lower()}):")
        return [head, *("  " + line for line in render_audit(self.rows, "who_can"))]


def who_could_access(spark: Any, lake: Any, cluster: str, offset: int, resource: tuple[str, str],
                     super_users: str = "", allow_everyone: bool = False, operation: str | None = None
                     ) -> WhoCanAnswer:
    """Who could perform `operation` (default: `default_operation`) on `resource` (type, name) at `offset`."""
    from replay.spark.audits import audit_who_can

    rtype, name = resource
    op = operation or default_operation(rtype)
    rows = audit_who_can(spark, lake, cluster, op, rtype, name, offset=offset, super_users=super_users,
                         allow_everyone=allow_everyone)
    return WhoCanAnswer(offset, op, rtype, name, super_users, allow_everyone, rows)


def who_could_access_lines(spark: Any, lake: Any, cluster: str, offset: int, resource: tuple[str, str] | None = None,
                           super_users: str = "", allow_everyone: bool = False, operation: str | None = None
                           ) -> list[str]:
    """`who_could_access` for the resource (default: the busiest literal topic then), as a table."""
    resource = resource or busiest_resource(lake, cluster, offset)
    if resource is None:
        return [f"no literal resource has ALLOW ACLs at offset {offset}"]
    return who_could_access(spark, lake, cluster, offset, resource, super_users, allow_everyone, operation).lines()


def what_changed_lines(spark: Any, lake: Any, cluster: str, start: int, end: int, super_users: str = "",
                       allow_everyone: bool = False, limit: int = 15) -> list[str]:
    """`replay.spark.audits.audit_changes` between two offsets: the ACLs added / removed and the access gained /
    lost, as tables (the first `limit` rows of each)."""
    from replay.spark.audits import audit_changes, render_audit

    found = audit_changes(spark, lake, cluster, start=start, end=end, super_users=super_users,
                          allow_everyone=allow_everyone)
    lines: list[str] = []
    for key, audit, title in (("acls", "acl_changes", "ACLs"), ("access", "access_changes", "Access")):
        rows = sorted(found[key], key=lambda r: json.dumps(r, sort_keys=True, default=str))  # same order each run
        counts: dict[str, int] = {}
        for r in rows:
            counts[str(r["change"])] = counts.get(str(r["change"]), 0) + 1
        lines.append(f"{title}: " + (", ".join(f"{v} {k}" for k, v in sorted(counts.items())) or "no change"))
        if rows:
            lines += ["  " + line for line in render_audit(rows[:limit], audit)]
            if len(rows) > limit:
                lines.append(f"  ... {len(rows) - limit} more (kraft-replay changes --cluster {cluster} "
                             f"--from-offset {start} --to-offset {end})")
    return lines


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraft-replay demo", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), out or sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
