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
`--data DIR` or `$KRAFT_REPLAY_DATA` to use real dumps. Finding the samples is `replay.kafka.samples`; the
questions the tour asks are `replay.spark.tour`, which the notebook asks too.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Sequence
from typing import TextIO

from replay.kafka.listing import render_acls
from replay.kafka.samples import (
    DATA_ENV,
    authorizer_sample_lines,
    broker_settings,
    featured_cluster,
    locate_samples,
)
from replay.kafka.times import format_time

DEFAULT_LAKE = "./lakehouse"
DEFAULT_OUT = "./demo-output"
LISTING_LINES = 24  # ACL listing lines printed in the terminal; the whole listing goes to a file


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
    # Spark at dispatch: the CLI imports this module for its arguments, and `kraft-replay inspect` needs no Spark.
    from replay.spark import findings, plots
    from replay.spark.ingest import ingest
    from replay.spark.queries import last_offset, state_at, time_of_offset
    from replay.spark.replay import replay_lake
    from replay.spark.session import get_spark
    from replay.spark.tables import Lake
    from replay.spark.tour import (
        coverage_lines,
        pick_moment,
        what_changed_lines,
        who_could_access_lines,
    )

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
        span = (f"offsets {report.log_offsets[0]}..{report.log_offsets[1]}" if report.log_offsets
                else "no log records decoded" if report.held_files else "no log records")
        held = f" ({report.held_bytes:,} held already, not decoded again)" if report.held_files else ""
        snaps = ", ".join(f"{end}-{epoch}" for end, epoch in report.snapshots) or "none"
        problems = ("none" if not report.problems else
                    ", ".join(f"{k} {v}" for k, v in sorted(report.problems_by_kind.items())))
        tour.say(f"{cluster}: {len(report.files)} file(s), {report.bytes:,} bytes{held}; {report.records:,} records "
                 f"({report.records_new:,} new), log {span}; snapshots (end offset-epoch) {snaps}; "
                 f"decoder problems: {problems}")
    counts = replay_lake(lake, clusters)
    tour.say("replayed: " + ", ".join(f"{k} {v}" for k, v in counts.items()))
    for cluster in clusters:
        tour.say(f"{cluster}: coverage " + "; ".join(coverage_lines(lake, cluster)))
        found = findings.summary(lake, [cluster]).lines()
        tour.say(f"{' ' * len(cluster)}  findings: {found[0]}")
        for line in found[1:]:
            tour.say(f"{' ' * len(cluster)}  {line}")

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

    # 6. a broker's authorizer log, against the history of its own dumps (the reference engine, on files)
    log_sample = os.path.join(os.path.dirname(str(samples[0])), "authorizer-log")
    if os.path.isfile(os.path.join(log_sample, "broker.json")):
        tour.section(f"6. Did a broker decide as its ACLs said? (its authorizer log, {log_sample})")
        for line in authorizer_sample_lines(log_sample):
            tour.say(line)
        tour.say(f"  kraft-replay audit verify-log {log_sample}/broker-logs/kafka-authorizer.log --dumps "
                 f"{log_sample}/dump --super-users 'User:ANONYMOUS;User:admin' --log-time-zone Europe/Berlin")

    # 7. where things are
    tour.section("7. Where the tables are, and what to try next")
    tour.say(f"Delta tables in {lake.location}: metadata_records, quarantine, acl_events, acl_history, "
             "log_coverage, anomalies, offset_times (one partition per cluster: " + ", ".join(clusters) + ")")
    tour.say(f"Plots and the ACL listing: {out_dir}")
    lake_opt = f"--lake {args.lake}" if args.lake != DEFAULT_LAKE else ""
    tour.say("Try:")
    tour.say(f"  kraft-replay acls {lake_opt} --lake-cluster {cluster} --as-of-offset {moment.offset}".replace("  --", " --"))
    tour.say(f"  kraft-replay changes {lake_opt} --lake-cluster {cluster} --from-offset {moment.offset}"
             .replace("  --", " --"))
    tour.say(f"  kraft-replay sql {lake_opt} \"SELECT * FROM acl_state_at('{cluster}', {moment.offset})\""
             .replace("  \"", " \""))
    tour.say("  python -m replay.notebook notebooks/kraft_acl_replay.py   (the Databricks notebook, run locally)")
    tour.say(f"done in {time.monotonic() - tour.started:.0f} s")
    return 0


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = argparse.ArgumentParser(prog="kraft-replay demo", description=__doc__.split("\n", 1)[0])
    add_arguments(parser)
    return run(parser.parse_args(argv), out or sys.stdout)


if __name__ == "__main__":
    sys.exit(main())
