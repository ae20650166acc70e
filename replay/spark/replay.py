"""Replay in Spark: `metadata_records` -> `acl_events`, `acl_history`, `log_coverage`, `anomalies`, `offset_times`.

Set-wise parts are Spark operations over offsets: choosing one copy per offset (highest leader epoch), dropping
truncated suffixes (a running maximum of the epoch), coverage as gaps and islands, snapshot completeness and
the winning copy per snapshot, the time index. What is inherently sequential (transactions, atomic snapshot
loads, lifetimes with exact or uncertain bounds) runs on the executors as one ordered stream per cluster:
`mapInArrow` over a partition sorted by offset feeds `replay.kafka.replayer.ReplayState`, the same state machine
as the reference replayer, and emits rows as it goes. Only the ACL, transaction and snapshot rows and one row per
coverage range enter that stream; nothing is collected to the driver.

A cluster's history is recomputed from its bronze rows on every run (new dumps can add snapshots or copies that
change earlier answers), and written with one commit per table that replaces that cluster's rows only.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pyarrow as pa
from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replay.kafka.acl import AclBinding
from replay.kafka.model import Problem, ProblemKind, Record
from replay.kafka.replayer import AclEvent, AclLifetime, LogEntry, ReplayState, SnapshotImage

_RELEVANT = [18, 19, 23, 24, 25]
_ACL_FIELDS = ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
               "permission_type"]

# ---- output schemas --------------------------------------------------------------------------------------------
ACL_COLUMNS = [T.StructField(c, T.StringType()) for c in _ACL_FIELDS]

EVENTS_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType(), False),
    T.StructField("offset", T.LongType(), False),  # where the change became visible
    T.StructField("offset_min", T.LongType(), False),  # == offset when exact; else it happened in [min, offset]
    T.StructField("exact", T.BooleanType(), False),
    T.StructField("seq", T.LongType(), False),  # order among the events of one replay
    T.StructField("time", T.LongType()),
    T.StructField("acl_id", T.StringType(), False),
    T.StructField("change", T.StringType(), False),  # CREATE | REMOVE
    T.StructField("cause", T.StringType(), False),  # RECORD | TRANSACTION | REPLACE | SNAPSHOT_LOAD
    T.StructField("record_offset", T.LongType()),  # the record's own offset (null for snapshot loads)
    *ACL_COLUMNS,
])

HISTORY_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType(), False),
    T.StructField("acl_id", T.StringType(), False),
    *ACL_COLUMNS,
    T.StructField("valid_from_offset", T.LongType(), False),
    T.StructField("valid_from_min_offset", T.LongType(), False),
    T.StructField("valid_from_exact", T.BooleanType(), False),
    T.StructField("valid_from_time", T.LongType()),
    T.StructField("began_by", T.StringType(), False),
    T.StructField("valid_to_offset", T.LongType()),
    T.StructField("valid_to_min_offset", T.LongType()),
    T.StructField("valid_to_exact", T.BooleanType()),
    T.StructField("valid_to_time", T.LongType()),
    T.StructField("ended_by", T.StringType()),
])

COVERAGE_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType(), False),
    T.StructField("start_offset", T.LongType(), False),
    T.StructField("end_offset", T.LongType(), False),
    T.StructField("kind", T.StringType(), False),  # log | snapshot | missing | incomplete
    T.StructField("source", T.StringType()),
])

ANOMALIES_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType(), False),
    T.StructField("kind", T.StringType(), False),
    T.StructField("offset", T.LongType()),
    T.StructField("source_file", T.StringType()),
    T.StructField("file_position", T.LongType()),
    T.StructField("message", T.StringType(), False),
])

OFFSET_TIMES_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType(), False),
    T.StructField("offset", T.LongType(), False),  # last offset of a batch, or a snapshot's last contained offset
    T.StructField("time", T.LongType(), False),
])

# The stream one executor task replays, sorted by (cluster_id, ord, kind, acl_id).
_STREAM_SCHEMA = T.StructType([
    T.StructField("cluster_id", T.StringType()),
    T.StructField("ord", T.LongType()),
    T.StructField("kind", T.IntegerType()),  # 0 log range start, 1 record, 2 snapshot
    T.StructField("range_end", T.LongType()),
    T.StructField("api_key", T.IntegerType()),
    T.StructField("acl_id", T.StringType()),
    *ACL_COLUMNS,
    T.StructField("time", T.LongType()),
    T.StructField("source_file", T.StringType()),
    T.StructField("file_position", T.LongType()),
    T.StructField("epoch", T.IntegerType()),
    T.StructField("snap_end", T.LongType()),
    T.StructField("snap_time", T.LongType()),
    T.StructField("is_marker", T.BooleanType()),  # the one row every snapshot has, even without ACLs
])

_OUT_SCHEMA = T.StructType([
    T.StructField("out", T.StringType()),  # event | history | anomaly | incomplete
    *[T.StructField(f.name, f.dataType) for f in EVENTS_SCHEMA.fields if f.name not in ("cluster_id",)],
    T.StructField("cluster_id", T.StringType()),
    *[T.StructField(f.name, f.dataType) for f in HISTORY_SCHEMA.fields if f.name not in
      {"cluster_id", "acl_id", *_ACL_FIELDS}],
    T.StructField("kind", T.StringType()),
    T.StructField("source_file", T.StringType()),
    T.StructField("file_position", T.LongType()),
    T.StructField("message", T.StringType()),
    T.StructField("range_start", T.LongType()),
    T.StructField("range_stop", T.LongType()),
])


def _is_log(df: DataFrame) -> Column:
    return df.snapshot_end_offset.isNull() & (df.source_kind != "bootstrap")


def resolve_log(records: DataFrame, high_watermark: int | None = None) -> tuple[DataFrame, DataFrame]:
    """One copy per offset (highest epoch, then first source), truncated suffixes dropped.

    Returns (resolved rows, divergence and bad-batch anomalies).
    """
    log = records.where(_is_log(records))
    if high_watermark is not None:
        log = log.where(F.col("offset") < high_watermark)
    bad = (log.where(~F.col("crc_ok"))
           .groupBy("cluster_id", "source_file", "file_position").agg(F.min("batch_base_offset").alias("offset"))
           .select("cluster_id", F.lit(ProblemKind.SKIPPED_BAD_BATCH.value).alias("kind"), "offset", "source_file",
                   "file_position",
                   F.lit("batch with a bad CRC is not applied (Kafka's recovery truncates the log there)")
                   .alias("message")))
    good = log.where(F.col("crc_ok"))
    # the preferred copy of each distinct content at an offset, then the preferred content
    pref = [F.col("leader_epoch").desc(), F.col("source_file").asc(), F.col("file_position").asc()]
    by_content = Window.partitionBy("cluster_id", "offset", "content_hash").orderBy(*pref)
    copies = good.withColumn("_r", F.row_number().over(by_content)).where("_r = 1").drop("_r")
    by_offset = Window.partitionBy("cluster_id", "offset").orderBy(*pref)
    ranked = copies.withColumn("_rank", F.row_number().over(by_offset))
    winners = ranked.where("_rank = 1").drop("_rank")
    losers = ranked.where("_rank > 1").select(
        "cluster_id", F.lit(ProblemKind.DIVERGENCE.value).alias("kind"), "offset", "source_file", "file_position",
        F.lit("two different records at one offset: the copy with the higher leader epoch wins").alias("message"))
    running = Window.partitionBy("cluster_id").orderBy("offset").rowsBetween(Window.unboundedPreceding, -1)
    marked = winners.withColumn("_prev_max", F.coalesce(F.max("leader_epoch").over(running), F.lit(-1)))
    truncated = marked.where(F.col("leader_epoch") < F.col("_prev_max")).select(
        "cluster_id", F.lit(ProblemKind.DIVERGENCE.value).alias("kind"), "offset", "source_file", "file_position",
        F.lit("record with an epoch below an earlier record's: part of a truncated uncommitted suffix")
        .alias("message"))
    resolved = marked.where(F.col("leader_epoch") >= F.col("_prev_max")).drop("_prev_max")
    return resolved, bad.unionByName(losers).unionByName(truncated)


def log_ranges(resolved: DataFrame) -> DataFrame:
    """Gaps and islands: maximal runs of consecutive offsets, one row each."""
    offsets = resolved.select("cluster_id", "offset").distinct()
    w = Window.partitionBy("cluster_id").orderBy("offset")
    return (offsets.withColumn("_g", F.col("offset") - F.row_number().over(w))
            .groupBy("cluster_id", "_g").agg(F.min("offset").alias("start_offset"), F.max("offset").alias("end_offset"))
            .drop("_g"))


def snapshots(records: DataFrame, high_watermark: int | None = None) -> tuple[DataFrame, DataFrame, DataFrame]:
    """Complete snapshot copies, the winning copy per end offset, and snapshot anomalies.

    Returns (winners: cluster_id, source_file, snap_end, epoch, snap_time), (ACL rows of the winners), anomalies.
    """
    snap = records.where(F.col("snapshot_end_offset").isNotNull() & (F.col("snapshot_end_offset") > 0))
    if high_watermark is not None:
        snap = snap.where(F.col("snapshot_end_offset") <= high_watermark)
    first = Window.partitionBy("cluster_id", "source_file").orderBy("offset")
    per_file = (snap.withColumn("_first", F.row_number().over(first) == 1)
                .groupBy("cluster_id", "source_file", F.col("snapshot_end_offset").alias("snap_end"),
                         F.col("snapshot_epoch").alias("epoch"))
                .agg(F.max(F.when(F.col("_first") & (F.col("record_type") == "SNAPSHOT_HEADER"), True)
                           .otherwise(False)).alias("has_header"),
                     F.max(F.col("record_type") == "SNAPSHOT_FOOTER").alias("has_footer"),
                     F.min("crc_ok").alias("crc_ok"),
                     F.max(F.when(F.col("record_type") == "SNAPSHOT_HEADER",
                                  F.get_json_object("payload_json", "$.lastContainedLogTimestamp").cast("long")))
                     .alias("snap_time")))
    at = F.col("snap_end") - 1

    def problem(cond: Column, kind: ProblemKind, message: str) -> DataFrame:
        return per_file.where(cond).select("cluster_id", F.lit(kind.value).alias("kind"), at.alias("offset"),
                                           "source_file", F.lit(None).cast("long").alias("file_position"),
                                           F.lit(message).alias("message"))

    anomalies = (problem(~F.col("crc_ok"), ProblemKind.SKIPPED_BAD_BATCH,
                         "snapshot holds a batch with a bad CRC; not loaded")
                 .unionByName(problem(~F.col("has_header"), ProblemKind.SNAPSHOT_NO_HEADER,
                                      "snapshot does not start with a SnapshotHeader; not loaded"))
                 .unionByName(problem(~F.col("has_footer"), ProblemKind.SNAPSHOT_NO_FOOTER,
                                      "snapshot has no SnapshotFooter (incomplete); not loaded")))
    complete = per_file.where(F.col("has_header") & F.col("has_footer") & F.col("crc_ok"))
    rank = Window.partitionBy("cluster_id", "snap_end").orderBy(F.col("epoch").desc(), F.col("source_file"))
    ranked = complete.withColumn("_rank", F.row_number().over(rank))
    winners = ranked.where("_rank = 1").drop("_rank", "has_header", "has_footer", "crc_ok")
    acl_rows = snap.where((F.col("api_key") == 18) & ~F.col("is_control") & F.col("acl_id").isNotNull()).select(
        "cluster_id", "source_file", "acl_id", *_ACL_FIELDS)
    winner_acls = acl_rows.join(winners.select("cluster_id", "source_file", "snap_end"),
                                ["cluster_id", "source_file"])
    # other complete copies with a different ACL set are divergences
    others = ranked.where("_rank > 1").select("cluster_id", "source_file", "snap_end")
    other_acls = acl_rows.join(others, ["cluster_id", "source_file"])
    key = ["cluster_id", "snap_end", "acl_id", *_ACL_FIELDS]
    w_set = winner_acls.select(*key)
    differing = (others.join(
        other_acls.select("source_file", *key).join(w_set, key, "left_anti").select("cluster_id", "source_file")
        .unionByName(others.join(w_set, ["cluster_id", "snap_end"]).join(
            other_acls.select("source_file", *key), ["source_file", *key], "left_anti")
            .select("cluster_id", "source_file")).distinct(),
        ["cluster_id", "source_file"])
        .select("cluster_id", F.lit(ProblemKind.DIVERGENCE.value).alias("kind"), (F.col("snap_end") - 1).alias("offset"),
                "source_file", F.lit(None).cast("long").alias("file_position"),
                F.lit("two snapshots end at one offset with different ACLs; the higher epoch wins").alias("message")))
    return winners, winner_acls, anomalies.unionByName(differing)


def build_stream(resolved: DataFrame, ranges: DataFrame, snap_winners: DataFrame, snap_acls: DataFrame) -> DataFrame:
    """The ordered input of the per-cluster state machine."""
    none_str = F.lit(None).cast("string")
    none_long = F.lit(None).cast("long")
    acl_null = [none_str.alias(c) for c in _ACL_FIELDS]
    range_rows = ranges.select(
        "cluster_id", F.col("start_offset").alias("ord"), F.lit(0).alias("kind"), F.col("end_offset").alias("range_end"),
        F.lit(None).cast("int").alias("api_key"), none_str.alias("acl_id"), *acl_null, none_long.alias("time"),
        none_str.alias("source_file"), none_long.alias("file_position"), F.lit(None).cast("int").alias("epoch"),
        none_long.alias("snap_end"), none_long.alias("snap_time"), F.lit(False).alias("is_marker"))
    record_rows = resolved.where(F.col("api_key").isin(_RELEVANT) & ~F.col("is_control")
                                 & F.col("decode_error").isNull()).select(
        "cluster_id", F.col("offset").alias("ord"), F.lit(1).alias("kind"), none_long.alias("range_end"),
        F.col("api_key").cast("int").alias("api_key"), "acl_id", *_ACL_FIELDS, F.col("append_time").alias("time"),
        "source_file", "file_position", F.col("leader_epoch").cast("int").alias("epoch"), none_long.alias("snap_end"),
        none_long.alias("snap_time"), F.lit(False).alias("is_marker"))
    snap_cols: list[Column | str] = ["cluster_id", (F.col("snap_end") - 1).alias("ord"), F.lit(2).alias("kind"),
                 none_long.alias("range_end"), F.lit(None).cast("int").alias("api_key")]
    markers = snap_winners.select(
        *snap_cols, none_str.alias("acl_id"), *acl_null, none_long.alias("time"), "source_file",
        none_long.alias("file_position"), F.col("epoch").cast("int").alias("epoch"), "snap_end", "snap_time",
        F.lit(True).alias("is_marker"))
    acls = snap_acls.join(snap_winners.select("cluster_id", "snap_end", "epoch", "snap_time"),
                          ["cluster_id", "snap_end"]).select(
        *snap_cols, "acl_id", *_ACL_FIELDS, none_long.alias("time"), "source_file", none_long.alias("file_position"),
        F.col("epoch").cast("int").alias("epoch"), "snap_end", "snap_time", F.lit(False).alias("is_marker"))
    return range_rows.unionByName(record_rows).unionByName(markers).unionByName(acls)


def _binding(row: dict[str, Any]) -> AclBinding:
    return AclBinding(*(row[c] for c in _ACL_FIELDS))


def _record(row: dict[str, Any]) -> Record:
    key = row["api_key"]
    data: dict[str, Any] = {}
    if key == 18:
        data = {"id": row["acl_id"]}
        binding = _binding(row)
        data.update(binding.to_record_data(row["acl_id"]))
    elif key == 19:
        data = {"id": row["acl_id"]}
    return Record(offset=row["ord"], timestamp=row["time"] or 0, key=None, value=None, api_key=key, data=data)


def replay_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
    """Executor side: one sorted partition may hold several clusters, each a contiguous run of rows."""
    out_names = [f.name for f in _OUT_SCHEMA.fields]
    state: ReplayState | None = None
    cluster: str | None = None
    pending_snap: list[dict[str, Any]] = []
    buffer: list[dict[str, Any]] = []

    def flush_snapshot() -> None:
        nonlocal pending_snap
        if not pending_snap or state is None:
            pending_snap = []
            return
        head = pending_snap[0]
        acls = {r["acl_id"]: _binding(r) for r in pending_snap if not r["is_marker"]}
        state.load_snapshot(SnapshotImage(head["snap_end"], head["epoch"], head["snap_time"], acls,
                                          head["source_file"] or "", True))
        pending_snap = []

    def drain(final: bool) -> None:
        assert state is not None and cluster is not None
        for e in state.events:
            buffer.append(_event_row(cluster, e))
        state.events.clear()
        for life in state.done:
            buffer.append(_history_row(cluster, life))
        state.done.clear()
        for p in state.anomalies:
            buffer.append(_anomaly_row(cluster, p))
        state.anomalies.clear()
        if final:
            for life in state.live.values():
                buffer.append(_history_row(cluster, life))
            for lo, hi in state.incomplete:
                buffer.append({"out": "incomplete", "cluster_id": cluster, "range_start": lo, "range_stop": hi})

    def finish() -> None:
        if state is not None:
            flush_snapshot()
            state.finish()
            drain(final=True)

    def emit() -> Iterator[pa.RecordBatch]:
        if buffer:
            cols = {n: [r.get(n) for r in buffer] for n in out_names}
            buffer.clear()
            yield pa.RecordBatch.from_pydict(cols, schema=_ARROW_OUT)

    for batch in batches:
        for row in batch.to_pylist():
            if row["cluster_id"] != cluster:
                finish()
                cluster, state = row["cluster_id"], ReplayState([])
            assert state is not None
            if pending_snap and (row["kind"] != 2 or row["snap_end"] != pending_snap[0]["snap_end"]):
                flush_snapshot()
            if row["kind"] == 0:
                state.enter_range(row["ord"], row["range_end"])
            elif row["kind"] == 1:
                record = _record(row)
                state.apply(LogEntry(row["ord"], row["epoch"] or 0, row["time"] or 0, b"", record,
                                     row["source_file"] or "", row["file_position"] or 0))
            else:
                pending_snap.append(row)
            if len(buffer) > 5000:
                drain(final=False)
        if state is not None and not pending_snap:
            drain(final=False)
        yield from emit()
    finish()
    yield from emit()


def _event_row(cluster: str, e: AclEvent) -> dict[str, Any]:
    b = e.binding
    return {"out": "event", "cluster_id": cluster, "offset": e.offset, "offset_min": e.offset_min, "exact": e.exact,
            "seq": e.seq, "time": e.time, "acl_id": e.acl_id, "change": e.change.value, "cause": e.cause.value,
            "record_offset": e.record_offset, **_binding_cols(b)}


def _history_row(cluster: str, life: AclLifetime) -> dict[str, Any]:
    return {"out": "history", "cluster_id": cluster, "acl_id": life.acl_id, **_binding_cols(life.binding),
            "valid_from_offset": life.valid_from_offset, "valid_from_min_offset": life.valid_from_min_offset,
            "valid_from_exact": life.from_exact, "valid_from_time": life.valid_from_time,
            "began_by": life.began_by.value, "valid_to_offset": life.valid_to_offset,
            "valid_to_min_offset": life.valid_to_min_offset,
            "valid_to_exact": None if life.valid_to_min_offset is None and life.valid_to_offset is None
            else life.to_exact,
            "valid_to_time": life.valid_to_time, "ended_by": life.ended_by.value if life.ended_by else None}


def _anomaly_row(cluster: str, p: Problem) -> dict[str, Any]:
    return {"out": "anomaly", "cluster_id": cluster, "kind": p.kind.value, "offset": p.offset,
            "source_file": p.file, "file_position": p.position, "message": p.message}


def _binding_cols(b: AclBinding) -> dict[str, str]:
    return dict(zip(_ACL_FIELDS, (b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                                  b.permission_type), strict=True))


def _to_arrow(schema: T.StructType) -> pa.Schema:
    mapping = {T.StringType: pa.string(), T.LongType: pa.int64(), T.BooleanType: pa.bool_(),
               T.IntegerType: pa.int32()}
    return pa.schema([pa.field(f.name, mapping[type(f.dataType)]) for f in schema.fields])


_ARROW_OUT = _to_arrow(_OUT_SCHEMA)


def replay_records(records: DataFrame, high_watermark: int | None = None) -> dict[str, DataFrame]:
    """All replay tables for every cluster in `records` (the bronze rows), as DataFrames (not yet written)."""
    resolved, log_anomalies = resolve_log(records, high_watermark)
    resolved = resolved.persist()
    ranges = log_ranges(resolved)
    winners, snap_acls, snap_anomalies = snapshots(records, high_watermark)
    stream = build_stream(resolved, ranges, winners, snap_acls)
    ordered = stream.repartition("cluster_id").sortWithinPartitions("cluster_id", "ord", "kind", "snap_end", "acl_id")
    out = ordered.mapInArrow(replay_partition, _OUT_SCHEMA).persist()
    events = out.where("out = 'event'").select(*[f.name for f in EVENTS_SCHEMA.fields])
    history = out.where("out = 'history'").select(*[f.name for f in HISTORY_SCHEMA.fields])
    anomalies = (out.where("out = 'anomaly'").select(*[f.name for f in ANOMALIES_SCHEMA.fields])
                 .unionByName(log_anomalies).unionByName(snap_anomalies))
    coverage = coverage_frame(ranges, winners, out.where("out = 'incomplete'"))
    times = (resolved.groupBy("cluster_id", "source_file", "file_position")
             .agg(F.max("batch_last_offset").alias("offset"), F.max("append_time").alias("time"))
             .join(resolved.select("cluster_id", "offset").distinct(), ["cluster_id", "offset"], "left_semi")
             .groupBy("cluster_id", "offset").agg(F.max("time").alias("time"))
             .unionByName(winners.where(F.col("snap_time").isNotNull())
                          .select("cluster_id", (F.col("snap_end") - 1).alias("offset"), F.col("snap_time").alias("time")))
             .groupBy("cluster_id", "offset").agg(F.max("time").alias("time")))
    return {"acl_events": events, "acl_history": history, "log_coverage": coverage, "anomalies": anomalies,
            "offset_times": times}


def coverage_frame(ranges: DataFrame, winners: DataFrame, incomplete: DataFrame) -> DataFrame:
    """Log runs, snapshot-only points, the missing stretches between them, and the incomplete stretches."""
    log = ranges.select("cluster_id", "start_offset", "end_offset", F.lit("log").alias("kind"),
                        F.lit(None).cast("string").alias("source"))
    points = winners.select("cluster_id", (F.col("snap_end") - 1).alias("at"), F.col("source_file").alias("source"))
    snap_only = (points.join(ranges, (points.cluster_id == ranges.cluster_id)
                             & (points.at >= ranges.start_offset) & (points.at <= ranges.end_offset), "left_anti")
                 .select("cluster_id", F.col("at").alias("start_offset"), F.col("at").alias("end_offset"),
                         F.lit("snapshot").alias("kind"), "source"))
    known = log.unionByName(snap_only)
    w = Window.partitionBy("cluster_id").orderBy("start_offset")
    prev_end = F.max("end_offset").over(w.rowsBetween(Window.unboundedPreceding, -1))
    missing = (known.withColumn("_prev", F.coalesce(prev_end, F.lit(-1)))
               .where(F.col("start_offset") > F.col("_prev") + 1)
               .select("cluster_id", (F.col("_prev") + 1).alias("start_offset"),
                       (F.col("start_offset") - 1).alias("end_offset"), F.lit("missing").alias("kind"),
                       F.lit(None).cast("string").alias("source")))
    incomplete_rows = incomplete.select("cluster_id", F.col("range_start").alias("start_offset"),
                                        F.col("range_stop").alias("end_offset"), F.lit("incomplete").alias("kind"),
                                        F.lit(None).cast("string").alias("source"))
    return known.unionByName(missing).unionByName(incomplete_rows)


def empty(spark: SparkSession, schema: T.StructType) -> DataFrame:
    return spark.createDataFrame([], schema)


REPLAY_SCHEMAS = {"acl_events": EVENTS_SCHEMA, "acl_history": HISTORY_SCHEMA, "log_coverage": COVERAGE_SCHEMA,
                  "anomalies": ANOMALIES_SCHEMA, "offset_times": OFFSET_TIMES_SCHEMA}


def replay_lake(lake: Any, clusters: list[str], high_watermark: int | None = None,
                note: dict[str, Any] | None = None) -> dict[str, int]:
    """Recompute the replay tables of `clusters` from `metadata_records`; one commit per table.

    Each table's rows of these clusters are replaced atomically (Delta `replaceWhere`), so readers see either the
    old or the new history, and other clusters' rows are untouched. Returns the row count written per table.
    """
    import json

    records = lake.read("metadata_records").where(F.col("cluster_id").isin(clusters))
    frames = replay_records(records, high_watermark)
    meta = json.dumps({"operation": "replay", "clusters": clusters, "high_watermark": high_watermark,
                       **(note or {})})
    counts: dict[str, int] = {}
    for name, frame in frames.items():
        df = frame.select(*[F.col(f.name).cast(f.dataType) for f in REPLAY_SCHEMAS[name].fields]).persist()
        counts[name] = df.count()
        _replace_clusters(lake, name, df, clusters, meta)
        df.unpersist()
    return counts


def _replace_clusters(lake: Any, name: str, df: DataFrame, clusters: list[str], user_metadata: str) -> None:
    """Replace the rows of `clusters` in table `name` by `df` in one Delta commit (other clusters untouched)."""
    lake.ensure(name)
    quoted = ", ".join("'" + c.replace("'", "''") + "'" for c in clusters)
    writer = (df.write.format("delta").mode("overwrite").option("replaceWhere", f"cluster_id IN ({quoted})")
              .option("userMetadata", user_metadata))
    path = lake.table_path(name)
    if path is None:
        writer.saveAsTable(lake.table_ref(name))
    else:
        writer.save(path)
