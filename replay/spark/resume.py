"""Incremental replay: when new dumps arrive, replay a cluster from its last settled snapshot, not from offset 0.

A loaded snapshot fixes the whole ACL state at its offset `q` (rule 4), so the replay after `q` needs the log
before it only through a few facts, which every replay stores per cluster in the `replay_state` table:

* the highest leader epoch before `q` (rule 6: a later record with a lower epoch is a truncated suffix);
* the last transaction marker at or before `q`, and the last offset in no dump at or before `q` (rule 2: whether
  the records after `q` are held, or follow a hole where a Begin may have been lost);
* which ids were observed before `q` (read back from `acl_events` and the `unknown_remove` anomalies): a remove of
  such an id is not one of an id never seen.

A snapshot is *settled* when no record at or before it can change fate with records after it: the last marker
before it is not a Begin (no transaction open across it), and when a hole lies after that marker, no marker
follows at all (the next marker decides the records after such a hole). The latest settled loaded snapshot is the
resume point. The next replay resumes there when everything ingested since lies after it (log offsets and
snapshots beyond `q`, problems with an offset beyond `q`) and, after a hole, brings no marker; it reads only the
bronze rows after `q` (Delta skips the files before), replays them with the rules of `replay.spark.replay_rules`,
and writes only them (`splice`), as a replay writes (beside the visible rows, then switched in `replay_state`:
`replay.spark.replay`); the rows the visible replays wrote up to `q` stay in place, and readers see them through the
cluster's chain of replays (`replay.spark.visibility`). Anything else (a first replay, a replay that did not finish,
rows that arrived before `q`, a high watermark, a chain of `MAX_CHAIN` replays, `full=True`) is a full replay. Both
give the same tables: `tests/spark/test_incremental_replay.py` holds them to each other and to the reference
replayer.
"""

from __future__ import annotations

import dataclasses
import datetime
import json
import uuid
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replay.kafka.model import ABORT_TRANSACTION_RECORD as TXN_ABORT
from replay.kafka.model import BEGIN_TRANSACTION_RECORD as TXN_BEGIN
from replay.kafka.model import END_TRANSACTION_RECORD as TXN_END
from replay.spark import staging
from replay.spark.merge import MATERIALIZE_SOURCE_CONF, merge
from replay.spark.ordered import with_missing
from replay.spark.replay_rules import TXN_ROWS
from replay.spark.session import expected_task_failures
from replay.spark.tables import (
    REPLAY_ID,
    REPLAY_STATE,
    STATE_SCHEMA,
    Lake,
    sql_string,
)
from replay.spark.visibility import (
    MAX_CHAIN,
    ROW_KEYS,
    Chain,
    as_rows,
    chain_of,
    cut_back,
    full_chain,
    ids,
    newest,
    resumed_chain,
)

_RESUME_FIELDS = ["resume_offset", "epoch_floor", "marker_offset", "marker_key", "marker_time", "marker_file",
                  "marker_position", "gap_end", "hole_since_marker"]
_MARKERS = (TXN_BEGIN, TXN_END, TXN_ABORT)


@dataclasses.dataclass
class Plan:
    """How one cluster is replayed: from `resume_offset` (incremental) or from the start (None), and why."""

    cluster: str
    resume_offset: int | None
    reason: str
    state: dict[str, Any] | None = None  # the stored state resumed from
    ingest_ids: list[str] = dataclasses.field(default_factory=list)
    unchanged: bool = False  # nothing arrived since the last replay: nothing to do
    span: int = 0  # how many log offsets the replay reads (from the resume point, or the first, to the last)
    ingested: bool = True  # False: the lake holds no row of the cluster and never replayed it (a mistyped name)

    @property
    def mode(self) -> str:
        return "incremental" if self.resume_offset is not None else "full"

    def describe(self) -> str:
        if self.unchanged:
            return f"replay {self.cluster}: up to date ({self.reason})"
        if self.resume_offset is not None:
            return f"replay {self.cluster}: incremental, from the snapshot at offset {self.resume_offset} ({self.reason})"
        return f"replay {self.cluster}: full ({self.reason})"


# ---- where a replay can resume --------------------------------------------------------------------------------
def resume_points(resolved: DataFrame, snaps: DataFrame, gaps: DataFrame, resume: DataFrame | None) -> DataFrame:
    """Per cluster, the latest settled loaded snapshot and the facts a replay resuming there needs.

    `resolved`, `snaps`, `gaps` are the replay's intermediate frames; `resume` the seeds it ran with (a suffix
    replay: the facts before its first row). One pass in offset order over markers, gaps, epoch starts and
    snapshot points (all small next to the log)."""
    c = F.col
    none_m = F.lit(None).cast("struct<marker_offset:bigint,marker_key:int,marker_time:bigint,marker_file:string,"
                              "marker_position:bigint>")

    def rows(df: DataFrame, o: Column, tag: int, m: Column | None = None, ge: Column | None = None,
             ep: Column | None = None) -> DataFrame:
        return df.select("cluster_id", o.cast("long").alias("o"), F.lit(tag).alias("_t"),
                         (m if m is not None else none_m).alias("_m"),
                         (ge if ge is not None else F.lit(None)).cast("long").alias("_ge"),
                         (ep if ep is not None else F.lit(None)).cast("int").alias("_ep"))

    def marker(off: str, key: str, t: str, f: str, pos: str) -> Column:
        return F.struct(c(off).cast("long").alias("marker_offset"), c(key).cast("int").alias("marker_key"),
                        c(t).cast("long").alias("marker_time"), c(f).alias("marker_file"),
                        c(pos).cast("long").alias("marker_position"))

    markers = resolved.where(c(TXN_ROWS) & c("api_key").isin(*_MARKERS))
    parts = [
        rows(markers, c("offset"), 0, m=marker("offset", "api_key", "append_time", "source_file", "file_position")),
        rows(gaps, c("gap_start"), 0, ge=c("gap_end")),
        rows(resolved.groupBy("cluster_id", "leader_epoch").agg(F.min("offset").alias("o")), c("o"), 0,
             ep=c("leader_epoch")),
        rows(snaps, c("q"), 1),
    ]
    if resume is not None:
        parts.append(rows(resume.where(c("marker_offset").isNotNull()), c("marker_offset"), 0,
                          m=marker("marker_offset", "marker_key", "marker_time", "marker_file", "marker_position")))
        parts.append(rows(resume, F.lit(-1), 0, ep=c("epoch_floor")))
    u = parts[0]
    for p in parts[1:]:
        u = u.unionByName(p)
    upto = Window.partitionBy("cluster_id").orderBy("o", "_t").rowsBetween(Window.unboundedPreceding, 0)
    later = Window.partitionBy("cluster_id").orderBy(c("o").desc(), c("_t").desc()).rowsBetween(
        Window.unboundedPreceding, -1)
    gap = F.when(c("_ge").isNotNull(), F.struct(c("o").alias("s"), c("_ge").alias("e")))
    pts = u.select(
        "*", F.last("_m", ignorenulls=True).over(upto).alias("_lm"), F.last(gap, ignorenulls=True).over(upto).alias("_lg"),
        F.max("_ep").over(upto).alias("_fe"),
        F.max(F.when(c("_m").isNotNull(), F.lit(1))).over(later).alias("_later_marker"),
    ).where(c("_t") == 1)
    gap_end = F.when(c("_lg").isNotNull(), F.least(c("_lg.e"), c("o")))  # (least skips nulls)
    hole = F.coalesce(gap_end, F.lit(-1)) > F.coalesce(c("_lm.marker_offset"), F.lit(-1))
    held = F.coalesce(c("_lm.marker_key") == TXN_BEGIN, F.lit(False))
    settled = ~held & ~(hole & c("_later_marker").isNotNull())
    best = Window.partitionBy("cluster_id").orderBy(c("o").desc())
    return (pts.where(settled).withColumn("_n", F.row_number().over(best)).where("_n = 1")
            .select("cluster_id", c("o").alias("resume_offset"), c("_fe").alias("epoch_floor"), "_lm.*",
                    gap_end.alias("gap_end"), hole.alias("hole_since_marker")))


# ---- deciding ------------------------------------------------------------------------------------------------
def read_states(lake: Lake, clusters: list[str]) -> dict[str, dict[str, Any]]:
    """Each cluster's `replay_state` row (none for a cluster never replayed); a table never written is not read (a
    first replay into a new lake)."""
    lake.ensure(REPLAY_STATE, STATE_SCHEMA)
    if lake.never_written(REPLAY_STATE):
        return {}
    rows = lake.read(REPLAY_STATE).where(F.col("cluster_id").isin(clusters)).collect()
    return {r["cluster_id"]: r.asDict(recursive=True) for r in rows}


def plan(records: DataFrame, quarantine: DataFrame, states: dict[str, dict[str, Any]], clusters: list[str],
         high_watermark: int | None, full: bool) -> dict[str, Plan]:
    """Decide per cluster: incremental from its stored resume point, full, or nothing to do.

    Reads per ingest of each cluster the least offset it brought (a scan of a few bronze columns, grouped: one row
    per ingest reaches the driver)."""
    c = F.col
    snap_q = F.when((c("stream") == "snapshot") & (c("snapshot_end_offset") > 0), c("snapshot_end_offset") - 1)
    per_ingest: dict[str, dict[str, dict[str, Any]]] = {cl: {} for cl in clusters}
    rec = records.groupBy("cluster_id", "ingest_id").agg(
        F.min(F.when(c("stream") == "log", c("offset"))).alias("log_min"), F.min(snap_q).alias("snap_min"),
        F.max(F.when(c("stream") == "log", c("offset"))).alias("log_max"),
        F.sum(F.when((c("stream") == "log") & c("api_key").isin(*_MARKERS) & ~c("is_control"), 1).otherwise(0))
        .alias("markers"))
    qua = quarantine.groupBy("cluster_id", "ingest_id").agg(
        F.min("offset").alias("problem_min"), F.sum(F.when(c("offset").isNull(), 1).otherwise(0)).alias("no_offset"))
    for r in rec.collect() + qua.collect():
        per_ingest[r["cluster_id"]].setdefault(r["ingest_id"], {}).update(
            {k: v for k, v in r.asDict().items() if k not in ("cluster_id", "ingest_id")})

    plans: dict[str, Plan] = {}
    for cluster in clusters:
        ingests = per_ingest[cluster]
        ids = sorted(i for i in ingests if i is not None)
        state = states.get(cluster)

        def full_plan(reason: str, cluster: str = cluster, ids: list[str] = ids,
                      ingested: bool = bool(ingests) or state is not None) -> Plan:
            return Plan(cluster, None, reason, ingest_ids=ids, ingested=ingested)

        if full:
            plans[cluster] = full_plan("asked for a full replay")
        elif high_watermark is not None:
            plans[cluster] = full_plan(f"a high watermark ({high_watermark}) replays from the start")
        elif state is None:
            plans[cluster] = full_plan("first replay of this cluster")
        elif state["status"] != "done":
            plans[cluster] = full_plan("the previous replay did not finish")
        else:
            before = set(state["ingest_ids"] or [])
            new = [i for i in ids if i not in before]
            q = state["resume_offset"]
            lows = [v for i in new for k in ("log_min", "snap_min", "problem_min")
                    if (v := ingests[i].get(k)) is not None]
            if before - set(ids):
                plans[cluster] = full_plan("rows the previous replay read are no longer in the lake")
            elif state["high_watermark"] is not None:
                plans[cluster] = full_plan(f"the previous replay stopped at high watermark {state['high_watermark']}")
            elif not new:
                plans[cluster] = Plan(cluster, None, "nothing ingested since the last replay", state, ids,
                                      unchanged=True)
            elif q is None:
                plans[cluster] = full_plan("the previous replay found no settled snapshot to resume from")
            elif state.get("visible_replay_id") is None:
                plans[cluster] = full_plan("the rows readers see were written before replays were tagged")
            elif len(chain_of(state)) >= MAX_CHAIN:
                plans[cluster] = full_plan(f"{MAX_CHAIN} replays in a row resumed: a full one writes their rows "
                                           "together again")
            elif any(ingests[i].get("no_offset") for i in new):
                plans[cluster] = full_plan("new problems without an offset")
            elif lows and min(lows) <= q:
                plans[cluster] = full_plan(f"new rows at offset {min(lows)}, at or before the resume point {q}")
            elif state["hole_since_marker"] and any(ingests[i].get("markers") for i in new):
                plans[cluster] = full_plan(f"a transaction marker arrived after the hole before offset {q}")
            else:
                plans[cluster] = Plan(cluster, q, f"{len(new)} new ingest(s), all after it", state, ids)
        highs = [v for i in ids if (v := ingests[i].get("log_max")) is not None]
        lows = [v for i in ids if (v := ingests[i].get("log_min")) is not None]
        if highs and lows:
            start = plans[cluster].resume_offset
            plans[cluster].span = max(highs) - (start if start is not None else min(lows))
    return plans


# ---- the suffix's input --------------------------------------------------------------------------------------
def suffix_filter(plans: dict[str, Plan]) -> Column:
    """Bronze rows a replay needs: all of a full cluster's; a resumed cluster's log after the resume point and its
    snapshots from the resume point on (literal bounds, so Delta skips the files before)."""
    c = F.col
    conds = []
    for p in plans.values():
        here = c("cluster_id") == p.cluster
        if p.resume_offset is not None:
            q = p.resume_offset
            here = here & (((c("stream") == "log") & (c("offset") > q))
                           | ((c("stream") == "snapshot") & (c("snapshot_end_offset") - 1 >= q)))
        conds.append(here)
    out = conds[0]
    for cond in conds[1:]:
        out = out | cond
    return out


def seeds(spark: SparkSession, plans: dict[str, Plan]) -> DataFrame | None:
    """The stored facts of each resumed cluster, as the `resume` frame of `replay_records`."""
    rows = [{"cluster_id": p.cluster, **{k: p.state[k] for k in _RESUME_FIELDS}}
            for p in plans.values() if p.resume_offset is not None and p.state is not None]
    if not rows:
        return None
    schema = T.StructType([STATE_SCHEMA["cluster_id"], *[STATE_SCHEMA[k] for k in _RESUME_FIELDS]])
    return spark.createDataFrame(rows, schema)


def _bounds(spark: SparkSession, plans: dict[str, Plan]) -> DataFrame:
    return F.broadcast(spark.createDataFrame(
        [(p.cluster, p.resume_offset) for p in plans.values() if p.resume_offset is not None],
        "cluster_id string, _q long"))


def seen_ids(lake: Lake, plans: dict[str, Plan]) -> DataFrame | None:
    """Ids observed before each resume point: in an event, or in a remove of an id never seen (an anomaly)."""
    if not any(p.resume_offset is not None for p in plans.values()):
        return None
    b = _bounds(lake.spark, plans)
    events = lake.read("acl_events").join(b, "cluster_id").where(F.col("offset") <= F.col("_q"))
    unknown = (lake.read("anomalies").join(b, "cluster_id")
               .where((F.col("kind") == "unknown_remove") & (F.col("offset") <= F.col("_q")))
               .select("cluster_id", F.regexp_extract("message", r"unknown ACL id (\S+?);", 1).alias("acl_id")))
    return events.select("cluster_id", "acl_id").unionByName(unknown).where(F.col("acl_id") != "")


# ---- joining the suffix to what was kept ---------------------------------------------------------------------
def splice(lake: Lake, frames: dict[str, DataFrame], plans: dict[str, Plan]) -> dict[str, DataFrame]:
    """The rows to write per table: a full cluster's as replayed; a resumed cluster's past its resume point (by
    `visibility.ROW_KEYS`: the rows up to it stay where the visible replays wrote them), joined to those (event
    numbers continue, lifetimes open at the resume point keep their start, log runs join across it: its coverage
    is written whole)."""
    if not any(p.resume_offset is not None for p in plans.values()):
        return frames
    c = F.col
    b = _bounds(lake.spark, plans)

    def after(df: DataFrame, col: str, keep_null: bool = False) -> DataFrame:
        cond = c("_q").isNull() | (c(col) > c("_q"))
        if keep_null:
            cond = cond | c(col).isNull()
        return df.join(b, "cluster_id", "left").where(cond)

    base = (lake.read("acl_events").join(b, "cluster_id").where(c("offset") <= c("_q"))
            .groupBy("cluster_id").agg(F.count(F.lit(1)).alias("_base")))
    renumber = Window.partitionBy("cluster_id").orderBy("seq")
    events = (after(frames["acl_events"], "offset").join(base, "cluster_id", "left")
              .withColumn("seq", F.when(c("_q").isNull(), c("seq"))
                          .otherwise(F.coalesce(c("_base"), F.lit(0)) + F.row_number().over(renumber)))
              .drop("_q", "_base"))

    start = ["valid_from_offset", "valid_from_min_offset", "valid_from_exact", "valid_from_time", "began_by"]
    open_then = (lake.read("acl_history").join(b, "cluster_id")
                 .where((c("valid_from_offset") <= c("_q"))
                        & (c("valid_to_offset").isNull() | (c("valid_to_offset") > c("_q"))))
                 .select("cluster_id", "acl_id", *[c(f).alias("_o_" + f) for f in start]))
    history = frames["acl_history"].join(b, "cluster_id", "left").join(open_then, ["cluster_id", "acl_id"], "left")
    continued = c("_q").isNotNull() & (c("valid_from_offset") <= c("_q"))
    history = history.select(*[F.when(continued, c("_o_" + f)).otherwise(c(f)).alias(f) if f in start else c(f)
                               for f in [*frames["acl_history"].columns, "_q"]])

    open_past = c("_q").isNull() | c("valid_to_offset").isNull() | (c("valid_to_offset") > c("_q"))
    return {
        "acl_events": events,
        "acl_history": history.where(open_past).drop("_q"),
        "anomalies": after(frames["anomalies"], "offset", keep_null=True).drop("_q"),
        "offset_times": after(frames["offset_times"], "offset").drop("_q"),
        "log_coverage": _coverage(lake, frames["log_coverage"], b),
    }


def _coverage(lake: Lake, replayed: DataFrame, b: DataFrame) -> DataFrame:
    """A resumed cluster's coverage: the kept rows up to the resume point and the suffix's after it, with the log
    run across the resume point joined and the missing stretches drawn again (a handful of rows per cluster)."""
    c = F.col
    full = replayed.join(b, "cluster_id", "left_anti")
    old = lake.read("log_coverage").join(b, "cluster_id").where(c("start_offset") <= c("_q"))
    new = replayed.join(b, "cluster_id").where(c("start_offset") > c("_q"))
    runs = (old.where(c("kind") == "log").withColumn("end_offset", F.least("end_offset", "_q"))
            .unionByName(new.where(c("kind") == "log")))
    w = Window.partitionBy("cluster_id").orderBy("start_offset")
    fresh = c("start_offset") > F.coalesce(F.max("end_offset").over(w.rowsBetween(Window.unboundedPreceding, -1)),
                                           F.lit(-2)) + 1
    runs = (runs.withColumn("_g", F.sum(fresh.cast("int")).over(w))
            .groupBy("cluster_id", "_g").agg(F.min("start_offset").alias("start_offset"),
                                             F.max("end_offset").alias("end_offset"))
            .select("cluster_id", "start_offset", "end_offset", F.lit("log").alias("kind"),
                    F.lit(None).cast("string").alias("source")))
    cols = ["cluster_id", "start_offset", "end_offset", "kind", "source"]
    points = old.where(c("kind") == "snapshot").select(*cols).unionByName(
        new.where(c("kind") == "snapshot").select(*cols))
    incomplete = old.where(c("kind") == "incomplete").select(*cols).unionByName(
        new.where(c("kind") == "incomplete").select(*cols))
    return full.select(*cols).unionByName(with_missing(runs.unionByName(points))).unionByName(incomplete)


# ---- writing ------------------------------------------------------------------------------------------------
def clusters_predicate(plans: dict[str, Plan]) -> str:
    """The rows of the planned clusters, as a SQL predicate."""
    return " OR ".join(f"(cluster_id = {sql_string(p.cluster)})" for p in plans.values())


def others_predicate(keep: Mapping[str, Chain]) -> str:
    """Rows of these clusters that no replay of the chain `keep` names for each wrote (an empty chain: every
    tagged row), but for those of replays started after the chain's newest (by their ids' start times): another
    replay of the cluster that began after this one switched is that one's to keep or remove. Partition columns only,
    so Delta drops whole files without reading them."""
    def one(cluster: str, chain: Chain) -> str:
        names = ", ".join(sql_string(r) for r in ids(chain))
        other = f"{REPLAY_ID} IS NULL OR {REPLAY_ID} NOT IN ({names})" if names else f"{REPLAY_ID} IS NOT NULL"
        own = newest(chain)
        if own is not None and staging.started_at(own) is not None:  # not the rows of a replay started after it
            other = (f"{REPLAY_ID} IS NULL OR ({REPLAY_ID} NOT IN ({names}) AND NOT ({REPLAY_ID} > {sql_string(own)} "
                     f"AND {REPLAY_ID} RLIKE {sql_string(staging.ID_TIME_PATTERN)}))")
        return f"(cluster_id = {sql_string(cluster)} AND ({other}))"
    return " OR ".join(one(c, chain) for c, chain in keep.items())


def chains_after(plans: Mapping[str, Plan], shown: Mapping[str, Chain], replay_id: str) -> dict[str, Chain]:
    """Each planned cluster's chain once `replay_id` is done: its own alone after a full replay; after a resumed
    one, the chain shown before, cut back to the resume point, then it (`visibility.resumed_chain`)."""
    return {c: full_chain(replay_id) if p.resume_offset is None else resumed_chain(shown[c], replay_id, p.resume_offset)
            for c, p in plans.items()}


def unseen_predicate(name: str, before: Mapping[str, Chain], after: Mapping[str, Chain]) -> str:
    """What of table `name` readers no longer see once the chains are `after`, as one DELETE predicate: the rows of
    replays that left the chain, and the rows of replays whose range was cut back that lie past its new end (by
    `visibility.ROW_KEYS`; `log_coverage`'s rows have no key, so the cut-back replay's go whole). Without a cut (a
    full replay) it names partitions only, and Delta drops whole files without reading them; with one, Delta reads
    the files that may hold such rows (the previous replay's, by their offset statistics) and writes back the rest
    of them. One statement per table: each DELETE costs several Spark jobs before it reads anything."""
    parts = [others_predicate(after)]
    key = ROW_KEYS[name]
    for cluster, chain in after.items():
        for rid, end in cut_back(before.get(cluster, ()), chain):
            past = "" if key is None else f" AND ({key} IS NULL OR {key} > {int(end)})"
            parts.append(f"(cluster_id = {sql_string(cluster)} AND {REPLAY_ID} = {sql_string(rid)}{past})")
    return " OR ".join(parts)


class ReplayOvertakenError(RuntimeError):
    """Another replay of the cluster marked it `running` after this one did: that one is the replay the lake shows
    once it ends (a replay cannot tell a dead replay's `running` row from a live one's, so the later one goes on)."""


_OVERTAKEN = "kraft-replay overtaken:"


def write_states(lake: Lake, plans: dict[str, Plan], replay_id: str, status: str, high_watermark: int | None,
                 visible: Mapping[str, Chain], points: dict[str, dict[str, Any]] | None = None,
                 last: dict[str, int] | None = None) -> None:
    """One commit to `replay_state` for these clusters: status `running` before the tables are written (replacing
    their rows), `done` with the resume point after (a replay that dies between leaves `running`, and the next one
    is full). `visible` is each cluster's chain of replays readers see: the previous one while running, the one that
    ends with this replay when done.

    The `done` commit is the switch, and switches only if every cluster's row is still this replay's `running` one:
    a MERGE that fails whole (`raise_error`) otherwise, and runs again when another writer of those rows commits
    while it runs (it then reads that commit), so two replays of a cluster at once never both switch: the one that
    marked it running last does, the other raises `ReplayOvertakenError`."""
    now = datetime.datetime.now(datetime.timezone.utc).replace(tzinfo=None)
    rows = []
    for p in plans.values():
        point = (points or {}).get(p.cluster, {}) if high_watermark is None else {}
        rows.append({"cluster_id": p.cluster, "replay_id": replay_id, "replayed_at": now, "status": status,
                     "mode": p.mode, "reason": p.reason, "high_watermark": high_watermark,
                     "ingest_ids": p.ingest_ids, "visible_replay_id": newest(visible.get(p.cluster, ())),
                     "visible_ranges": as_rows(visible.get(p.cluster, ())) or None,
                     "last_offset": (last or {}).get(p.cluster), **{k: point.get(k) for k in _RESUME_FIELDS}})
    df = lake.spark.createDataFrame(rows, STATE_SCHEMA)
    meta = f'{{"operation": "replay {status}", "replay_id": "{replay_id}"}}'
    if status != "done":
        lake.write(REPLAY_STATE, df, meta, replace_where=clusters_predicate(plans))
        return
    names = ", ".join(sql_string(c) for c in plans)

    def fail(fields: str) -> str:  # the cluster's row as found (JSON: names are data), in the error
        return f"CAST(raise_error(concat({sql_string(_OVERTAKEN)}, ' ', to_json(named_struct({fields})))) AS STRING)"

    found_other = fail("'cluster', t.cluster_id, 'replay_id', t.replay_id")
    found_none = fail("'cluster', s.cluster_id")

    try:
        with expected_task_failures(lake.spark):
            merge(lake.spark, lake, REPLAY_STATE, df, f"t.cluster_id = s.cluster_id AND t.cluster_id IN ({names})",
                  f"WHEN MATCHED AND t.replay_id = s.replay_id AND t.status = 'running' THEN UPDATE SET * "
                  f"WHEN MATCHED THEN UPDATE SET t.status = {found_other} "
                  f"WHEN NOT MATCHED THEN INSERT (cluster_id) VALUES ({found_none})", meta,
                  {MATERIALIZE_SOURCE_CONF: "none"})  # its source is a few literal rows
    except Exception as e:
        text = str(e)
        at = text.find(_OVERTAKEN)
        if at < 0:
            raise
        row, _ = json.JSONDecoder().raw_decode(text, at + len(_OVERTAKEN) + 1)  # names are data: any character
        raise overtaken(replay_id, row) from None


def overtaken(replay_id: str, row: Mapping[str, Any]) -> ReplayOvertakenError:
    """The error of a replay whose switch found its cluster's `replay_state` row another replay's (or none)."""
    other = row.get("replay_id")
    done = "This one made no switch and readers never saw its rows; they are removed"
    if other is None:
        return ReplayOvertakenError(
            f"replay {replay_id} of cluster {row.get('cluster')!r} found no replay_state row of the cluster at its "
            f"switch (removed while it ran?). {done}. Run the replay again")
    return ReplayOvertakenError(
        f"replay {replay_id} of cluster {row.get('cluster')!r} was overtaken: replay {other} marked it running "
        f"after this one did, so that replay is the one the lake shows (once it ends). {done}. Run one replay of "
        f"a cluster at a time (a scheduled job, `watch` and a replay by hand each replay what they ingest); if the "
        f"other replay failed, run `kraft-replay replay` again")


def new_replay_id() -> str:
    """Unique, and starting with its UTC start time (`20261127t001500-...`): what a replay leaves behind when it dies
    (its stages) can be told stale by name alone (`staging.sweep_stale`)."""
    started = datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%dt%H%M%S")
    return f"{started}_{uuid.uuid4().hex[:20]}"
