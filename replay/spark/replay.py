"""Replay a lake: bring the replay tables of some clusters up to date with their bronze rows, by the rules of
`replay.spark.replay_rules`.

Readers see one finished replay's history of each cluster at every moment: a replay writes its rows beside the
visible ones and switches them in one `replay_state` commit (`_replay_planned`); other clusters' rows are untouched.
A cluster replayed before resumes from its last settled snapshot when what arrived since lies after it
(`replay.spark.resume`), and writes only what lies after it (the earlier rows stay, seen through the cluster's chain
of replays: `replay.spark.visibility`); else its history is recomputed from all its bronze rows (a new dump can add
snapshots or copies that change earlier answers).
"""

from __future__ import annotations

import functools
import json
import logging
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import DataFrame, Observation
from pyspark.sql import functions as F

from replay.kafka.dump import ProblemSummary
from replay.kafka.model import UnknownClusterError
from replay.spark import feed, findings, resume
from replay.spark.frames import observed
from replay.spark.merge import again_on_conflict
from replay.spark.queries import named_clusters
from replay.spark.replay_rules import replay_records
from replay.spark.session import safe_unions, step
from replay.spark.staging import Stages
from replay.spark.tables import LOG_SOURCE_KIND, REPLAY_ID, REPLAY_SCHEMAS, Lake, sql_string
from replay.spark.visibility import ROW_KEYS, chain_of

log = logging.getLogger("replay.spark.replay")


def replay_lake(lake: Lake, clusters: list[str], high_watermark: int | None = None,
                note: dict[str, Any] | None = None, full: bool = False, progress: bool = True) -> TableCounts:
    """Bring the replay tables of `clusters` up to date with `metadata_records` and `quarantine`.

    A cluster replayed before resumes from its last settled snapshot when everything ingested since lies after it
    (`replay.spark.resume`); otherwise (or with `full=True`) it is replayed from the start; a cluster with nothing
    new is left as it is. Readers see either the old or the new history of a cluster, whole (`_replay_planned`),
    and other clusters' rows are untouched. One status line per cluster says which it did and why (also kept in `replay_state`). Returns the
    row count per table for these clusters, counted when first read.
    """
    from replay import progress as progress_ui

    def of_clusters(table: str) -> DataFrame:
        lake.ensure(table)
        return lake.read(table).where(F.col("cluster_id").isin(clusters))

    with step(lake.spark, "replay: plan"):
        records = of_clusters("metadata_records")  # the dumps' problems only: not those of authorizer logs
        quarantine = of_clusters("quarantine").where(~F.col("source_kind").eqNullSafe(LOG_SOURCE_KIND))

        def lay_out(name: str) -> None:  # created in a new lake; laid out again once, on a lake an older version wrote
            with step(lake.spark, "replay: plan"):
                if lake.lay_out(name):
                    progress_ui.say(f"{name}: partitioned by cluster and replay (its rows written again, once)",
                                    progress)

        at_once([functools.partial(lay_out, name) for name in REPLAY_SCHEMAS])  # commits to different tables
        states = resume.read_states(lake, clusters)
        plans = resume.plan(records, quarantine, states, clusters, high_watermark, full)
        never = [c for c, p in plans.items() if not p.ingested]
        if never:  # before anything is written: a replay of a mistyped name would read as a cluster without ACLs
            raise nothing_ingested(lake, never)
    for p in plans.values():
        progress_ui.say(p.describe(), progress)
    todo = {c: p for c, p in plans.items() if not p.unchanged}
    written: dict[str, int] | None = {}
    cleanup: list[Callable[[], None]] = []
    if todo:
        with safe_unions(lake.spark):
            written, cleanup = _replay_planned(lake, records, quarantine, todo, high_watermark, note, states)

    shown_before = {c: (states.get(c) or {}).get("visible_replay_id") for c in clusters}
    replayed = {c: p.resume_offset for c, p in todo.items()}

    def fed() -> None:
        with step(lake.spark, "replay: feed"):  # after the switch, and for every cluster: a replay that died after
            feed.append_feed(lake, clusters, shown_before, replayed)  # its switch left its changes unfed: fed now

    at_once([fed, *cleanup])  # the feed reads the visible rows, the cleanup removes the others: no conflict
    unchanged = [c for c in clusters if c not in todo]
    kept = {c: p.resume_offset for c, p in todo.items() if p.resume_offset is not None}
    return TableCounts(lake, list(REPLAY_SCHEMAS), clusters, written, unchanged, kept)


def nothing_ingested(lake: Lake, clusters: list[str]) -> UnknownClusterError:
    """The error for a replay of clusters the lake holds no row of, naming those whose dumps it holds."""
    held = sorted(r[0] for r in lake.read("metadata_records").select("cluster_id").distinct().collect())
    return UnknownClusterError(
        f"nothing of cluster {', '.join(map(repr, clusters))} is in the lake {lake.location} "
        f"({f'it holds {named_clusters(held)}' if held else 'it holds no dump yet'}); nothing was replayed. Ingest its dumps "
        f"first (kraft-replay ingest DUMP --lake ... --lake-cluster {clusters[0]}), or name a cluster it holds")


class TableCounts(Mapping[str, int]):
    """Rows per table for some clusters. What the replay wrote is counted while it was written (`written`, rows of
    the replayed clusters); the rows of the others (`counted`: left as they were) and those a resumed replay kept in
    place (`kept`: cluster to its resume point) are counted in one query when first read, so a caller that does not
    print them does not pay the 16-24 Spark jobs (3-5 s) of reading freshly written Delta tables. `written=None`:
    every cluster is counted when first read."""

    def __init__(self, lake: Lake, tables: list[str], clusters: list[str], written: dict[str, int] | None = None,
                 counted: list[str] | None = None, kept: Mapping[str, int] | None = None) -> None:
        self._lake, self._tables, self._clusters = lake, tables, clusters
        self._written = written
        self._counted = clusters if written is None or counted is None else counted
        self._kept = dict(kept or {}) if written is not None else {}
        self._counts: dict[str, int] | None = None

    def _all(self) -> dict[str, int]:
        if self._counts is None:
            counts = dict.fromkeys(self._tables, 0)
            if self._counted or self._kept:
                with step(self._lake.spark, "replay: count"):
                    counts = table_counts(self._lake, self._tables, self._counted, self._kept)
            self._counts = {name: n + (self._written or {}).get(name, 0) for name, n in counts.items()}
        return self._counts

    def __getitem__(self, table: str) -> int:
        return self._all()[table]

    def __iter__(self) -> Iterator[str]:
        return iter(self._tables)

    def __len__(self) -> int:
        return len(self._tables)

    def __repr__(self) -> str:
        return repr(self._all())

    def findings(self) -> ProblemSummary:
        """What the replay found for these clusters (and the decoder's problems), as `acls PATH` prints it. Nothing,
        without reading `anomalies`, when this replay wrote no row there and readers see only its rows of every
        cluster (each replayed in full): a read of the table's new version costs 3-4 Spark jobs."""
        if self._written is not None and self._written.get("anomalies") == 0 and not self._counted and not self._kept:
            return ProblemSummary()
        return findings.summary(self._lake, self._clusters)


def table_counts(lake: Lake, tables: list[str], clusters: list[str],
                 upto: Mapping[str, int] | None = None) -> dict[str, int]:
    """Rows per table for `clusters`, and for the clusters of `upto` those at or before its offset there (by
    `visibility.ROW_KEYS`: what a replay resumed there kept in place), in one query (a count per table would be one
    Spark job or more each)."""
    parts = [lake.read(name).where(F.col("cluster_id").isin(clusters)).select(F.lit(name).alias("_table"))
             for name in tables if clusters]
    if upto:
        bound = F.element_at(F.create_map(*[F.lit(x) for kv in upto.items() for x in kv]), F.col("cluster_id"))
        parts += [lake.read(name).where(F.col("cluster_id").isin(list(upto)) & (F.col(key) <= bound))
                  .select(F.lit(name).alias("_table")) for name in tables if (key := ROW_KEYS[name]) is not None]
    if not parts:
        return dict.fromkeys(tables, 0)
    union = functools.reduce(DataFrame.unionByName, parts)
    found = {r["_table"]: r["count"] for r in union.groupBy("_table").count().collect()}
    return {name: found.get(name, 0) for name in tables}


def _replay_planned(lake: Lake, records: DataFrame, quarantine: DataFrame, plans: dict[str, Any],
                    high_watermark: int | None, note: dict[str, Any] | None,
                    states: dict[str, dict[str, Any]]) -> tuple[dict[str, int] | None, list[Callable[[], None]]]:
    """Replay the planned clusters. Readers see one finished replay of each cluster throughout: every table gets this
    replay's rows beside the visible ones (one append each), then one `replay_state` commit makes them the visible
    ones. Returns the rows written per table (None when Spark did not report them), and the deletes of the rows
    readers no longer see, one per table, for the caller to run while the feed is written: the previous replay's,
    and those of a replay that died before its switch (it left its cluster a `running` state, so the cluster is in
    `states`). An append, not a `replaceWhere` of those rows in the same commit: measured, Delta then finds the
    files to replace before writing (3-4 Spark jobs), about 0.5 s more per table on a warm session and 0.7-2.7 s on
    a new one, on the replay's critical path; the DELETE after the switch pays that beside the feed."""
    names = list(plans)
    replay_id = resume.new_replay_id()
    shown = {c: chain_of(states.get(c)) for c in names}

    def mark_running() -> None:  # beside the staged steps: they write to no table, and the first write waits for it
        with step(lake.spark, "replay: state"):
            resume.write_states(lake, plans, replay_id, "running", high_watermark, shown)

    seeds = resume.seeds(lake.spark, plans)
    meta = json.dumps({"operation": "replay", "replay_id": replay_id, "clusters": names,
                       "modes": {c: p.mode for c, p in plans.items()}, "high_watermark": high_watermark,
                       **(note or {})})
    with (ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-replay-state") as beside,
          Stages(lake, replay_id) as stages):
        running = beside.submit(mark_running)
        frames, parts = replay_records(
            records.where(resume.suffix_filter(plans)),
            quarantine.where(F.col("cluster_id").isin(names)), high_watermark, seeds, resume.seen_ids(lake, plans),
            stages=stages, span=max(p.span for p in plans.values()))
        frames = resume.splice(lake, frames, plans)
        running.result()  # committed before any table is written
        found: dict[str, dict[str, Any]] = {}

        def resume_points() -> None:  # asked while the tables are written: they need nothing of each other
            with step(lake.spark, "replay: resume points"):
                found["points"] = {r["cluster_id"]: r.asDict() for r in resume.resume_points(
                    parts["resolved"], parts["snapshots"], parts["gaps"], seeds).collect()}
                found["last"] = {r["cluster_id"]: r["last_offset"] for r in parts["last"].collect()}

        observations = {name: Observation(f"rows of {name}") for name in frames}

        def write(name: str) -> None:
            df = frames[name].withColumn(REPLAY_ID, F.lit(replay_id)).select(
                *[F.col(f.name).cast(f.dataType) for f in REPLAY_SCHEMAS[name].fields])
            with step(lake.spark, f"replay: write {name}"):
                lake.write(name, df.observe(observations[name], F.count(F.lit(1)).alias("rows")), meta)

        at_once([resume_points, *[functools.partial(write, name) for name in frames]])  # none seen until the switch
        chains = resume.chains_after(plans, shown, replay_id)
        with step(lake.spark, "replay: state"):
            try:
                resume.write_states(lake, plans, replay_id, "done", high_watermark, chains, found["points"],
                                    found["last"])
            except resume.ReplayOvertakenError:
                at_once([functools.partial(_remove_own, lake, name, names, replay_id) for name in frames])
                raise
    replaced = {c: chains[c] for c in names if c in states}  # clusters that had rows of an earlier replay

    def drop(name: str) -> None:
        with step(lake.spark, "replay: drop the previous rows"):  # the tables are partitioned by replay: whole
            _delete(lake, name, resume.unseen_predicate(name, shown, replaced))  # files, but for a range cut back

    counts = {name: observed(o) for name, o in observations.items()}
    written = None if None in counts.values() else {name: int(n or 0) for name, n in counts.items()}
    return written, [functools.partial(drop, name) for name in frames] if replaced else []


def _delete(lake: Lake, name: str, where: str) -> None:
    """`DELETE FROM name WHERE where`, again when it loses a commit race (an overtaken replay of the cluster may
    still be writing its rows)."""
    again_on_conflict(lambda: lake.spark.sql(f"DELETE FROM {lake.table_ref(name)} WHERE {where}"), f"DELETE from {name}")


def _remove_own(lake: Lake, name: str, clusters: list[str], replay_id: str) -> None:
    """Remove the rows an overtaken replay wrote (no reader ever saw them). Best effort: what is left, the next
    replay of the cluster removes (`resume.others_predicate`)."""
    where = f"cluster_id IN ({', '.join(map(sql_string, clusters))}) AND {REPLAY_ID} = {sql_string(replay_id)}"
    with step(lake.spark, "replay: remove an overtaken replay's rows"):
        try:
            _delete(lake, name, where)
        except Exception as e:
            log.warning("could not remove the rows replay %s wrote to %s (%s); the next replay of %s removes them",
                        replay_id, name, e, ", ".join(clusters))


def at_once(tasks: list[Callable[[], None]]) -> None:
    """Run the tasks (each a commit to its own table) at once: Delta commits to different tables do not conflict,
    and on small data a write is mostly driver time (planning, the commit) that several can overlap. The first error
    is raised once all have ended."""
    with ThreadPoolExecutor(max_workers=len(tasks) or 1, thread_name_prefix="kraft-replay-write") as pool:
        for future in [pool.submit(task) for task in tasks]:
            future.result()
