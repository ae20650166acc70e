"""The replay's rules in Spark, the DataFrame twin of `replay.kafka.replayer`: `metadata_records` and `quarantine`
-> `acl_events`, `acl_history`, `log_coverage`, `anomalies`, `offset_times` (`replay_records`).

Every rule of DESIGN.md §3 is a Spark operation over offsets: window functions and joins, no per-cluster Python
loop. The reference replayer (`replay.kafka.replayer`) states the same rules one record at a time; it is not used
here, and the tests hold the two to each other. The steps:

1. **Copies** (rule 6): one record per offset. Copies with one leader epoch are one record (a binary copy before a
   dump-log text one); the highest epoch wins; a record after the first offset of a higher epoch is a truncated
   suffix (a table of the epochs' first offsets says so, no running value over the records).
2. **Runs and gaps**: the log offsets as maximal runs (gaps and islands), and the offsets in no dump.
3. **Snapshots** (rule 4): a copy loads only when it decoded cleanly (header first, footer, CRCs, nothing
   quarantined inside it); the highest epoch wins per end offset.
4. **Transactions** (rule 2): over the ACL and transaction records in offset order, the previous Begin/End/Abort
   says whether a record is held, and the next End or Abort decides its fate (visible with the End, dropped at
   Abort, pending when none follows). A change is visible where a node publishes it: the last offset of its batch
   (of the End's batch), `published_offset`.
5. **Observations** (rules 3–5): per ACL id, its visible records and its presence in each snapshot, plus an absence
   at the first snapshot that lacks a live id. The state after an observation depends on that observation alone,
   so every transition (create, duplicate, replace, remove, unknown remove, snapshot load) is a function of an
   observation and its predecessor (`lag`). A change only a snapshot shows happened in the offsets in no dump
   between the id's previous observation and the snapshot (a range join with the gaps); none there means the log
   contradicts the snapshot (`snapshot_mismatch`).
6. **Events and lifetimes**: events are numbered in application order; a lifetime pairs a create with the next
   remove of its id (`lead`).
7. **Completeness, coverage, anomalies**: where ACLs nobody recorded could have been live, per stretch between
   snapshots; log, snapshot-only and missing ranges; every finding, decoder problems from `quarantine` included.

`replay.spark.replay` runs them for a lake: which clusters, from where, and the writes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F
from pyspark.sql.types import BooleanType

from replay.kafka import anomaly_text as msg
from replay.kafka.model import (
    ABORT_TRANSACTION_RECORD,
    ACL_ENTRY_RECORD,
    BEGIN_TRANSACTION_RECORD,
    END_TRANSACTION_RECORD,
    NOTICE_KINDS,
    REMOVE_ACL_ENTRY_RECORD,
    ProblemKind,
)
from replay.spark.frames import filled
from replay.spark.ordered import Running, as_of, bucket_offsets, islands, with_missing, with_running
from replay.spark.staging import Stages
from replay.spark.tables import ACL_FIELDS as _ACL_FIELDS

ACL_ENTRY, ACL_REMOVE = ACL_ENTRY_RECORD, REMOVE_ACL_ENTRY_RECORD
TXN_BEGIN, TXN_END, TXN_ABORT = BEGIN_TRANSACTION_RECORD, END_TRANSACTION_RECORD, ABORT_TRANSACTION_RECORD

# The bronze columns the replay reads (payload_json is kept for snapshot headers only: their time).
_BRONZE_COLUMNS = ["cluster_id", "stream", "source_kind", "source_file", "text_section", "snapshot_end_offset",
                   "snapshot_epoch", "file_position", "batch_base_offset", "batch_last_offset", "offset",
                   "record_index", "leader_epoch", "append_time", "crc_ok", "is_control", "api_key", "record_type",
                   "decode_error", "content_hash", "acl_id", *_ACL_FIELDS]

_UNBOUNDED = Window.unboundedPreceding

# The resolved log's columns that later steps read (runs, transactions, the time index, resume points).
_RESOLVED_COLUMNS = ["cluster_id", "offset", "leader_epoch", "append_time", "source_file", "file_position",
                     "batch_base_offset", "batch_last_offset", "is_control", "api_key", "decode_error", "acl_id",
                     *_ACL_FIELDS]


def _anomaly(df: DataFrame, kind: ProblemKind, offset: Column | str, source_file: Column | str | None,
             position: Column | str | None, message: Column) -> DataFrame:
    def col(c: Column | str | None, dtype: str) -> Column:
        if c is None:
            return F.lit(None).cast(dtype)
        return (F.col(c) if isinstance(c, str) else c).cast(dtype)

    return df.select("cluster_id", F.lit(kind.value).alias("kind"), col(offset, "long").alias("offset"),
                     col(source_file, "string").alias("source_file"),
                     col(position, "long").alias("file_position"), message.alias("message"))


def _binding_key(prefix: str = "") -> Column:
    """The ACL's seven fields as one comparable value (null fields kept distinct from empty ones)."""
    return F.concat_ws("\u0001", *[F.coalesce(F.col(prefix + c), F.lit("\u0000")) for c in _ACL_FIELDS])


def _py_list(ids: Column) -> Column:
    """The first sorted ids rendered like a Python list (`['a', 'b']`), as the reference's messages are."""
    quoted = F.transform(F.slice(F.array_sort(ids), 1, msg.MISMATCH_LISTED), lambda x: F.concat(F.lit("'"), x, F.lit("'")))
    return F.concat(F.lit("["), F.array_join(quoted, ", "), F.lit("]"))


class Keep(Protocol):
    """How a step keeps a frame that later steps read (`Stages.keep`): written once and read back, or as it is."""

    def __call__(self, df: DataFrame, step: str, partition_by: str | None = None) -> DataFrame: ...


def unstaged(df: DataFrame, step: str, partition_by: str | None = None) -> DataFrame:
    """No staging: the frame stays a plan (small inputs and tests)."""
    return df


# The staged copies are written in two parts by this column, so that the steps that read only ACL records and
# transaction markers (the transactions, the resume points' markers) read their part alone (836k of the 10M rows
# of the realistic log) where they scanned every record. Writing two parts cost the 10M copies 2.9 s of task CPU;
# the transactions and resume points saved 5 s.
TXN_ROWS = "_txn_rows"
EPOCH_START = "_epoch_start"  # a staged copy at its epoch's first offset (`truncated`)


def transaction_record() -> Column:
    """Whether a record is one the transaction rules read: an ACL record or a transaction marker whose value decoded
    (never a control record). Never null (a part of the staged copies each)."""
    return F.coalesce(F.col("api_key").isin(ACL_ENTRY, ACL_REMOVE, TXN_BEGIN, TXN_END, TXN_ABORT)
                      & ~F.col("is_control") & F.col("decode_error").isNull(), F.lit(False))


# ---- 1. copies -------------------------------------------------------------------------------------------------
def resolve_log(records: DataFrame, high_watermark: int | None = None, resume: DataFrame | None = None,
                keep: Keep = unstaged) -> tuple[DataFrame, DataFrame]:
    """One copy per offset (see the module docstring). Returns (resolved rows, their anomalies).

    `resume` (cluster_id, epoch_floor): the highest epoch of the log before these rows, when they are a suffix.
    The ranked copies, each marked truncated or not, are kept (`keep`) in one write: the winners and the anomalies
    are read from them rather than ranking every record again (a second write of the winners alone cost 27 s of task
    time at 10M records).
    """
    log = records.where(F.col("stream") == "log")
    if high_watermark is not None:
        log = log.where(F.col("offset") < high_watermark)
    bad = (log.where(~F.col("crc_ok"))
           .groupBy("cluster_id", "source_file", "file_position").agg(F.min("batch_base_offset").alias("offset")))
    anomalies = _anomaly(bad, ProblemKind.SKIPPED_BAD_BATCH, "offset", "source_file", "file_position",
                         filled(msg.BAD_CRC_BATCH))
    good = log.where(F.col("crc_ok")).withColumn("is_text", F.col("source_kind") == "dump_log_text")
    # The winner of an offset is its first copy by epoch (highest) and preference; the other copies that are the
    # same record (same epoch and bytes) are not findings, and each other record found there is reported once.
    pref = [F.col("is_text").asc(), F.col("source_file").asc(), F.col("file_position").asc()]
    starts = _epoch_starts(good)
    ranked = keep(truncated(_ranked_copies(good, pref, keep), starts, resume).withColumn(
        TXN_ROWS, transaction_record()), "copies", TXN_ROWS)
    same_record = Window.partitionBy("cluster_id", "offset", "leader_epoch", "content_hash").orderBy(*pref)
    losers = (ranked.where((F.col("_rank") > 1) & ~((F.col("leader_epoch") == F.col("_w_epoch"))
                                                    & F.col("content_hash").eqNullSafe(F.col("_w_hash"))))
              .withColumn("_r", F.row_number().over(same_record)).where("_r = 1"))
    older = losers.where(F.col("leader_epoch") != F.col("_w_epoch"))
    anomalies = anomalies.unionByName(_anomaly(
        older, ProblemKind.DIVERGENCE, "offset", "source_file", "file_position",
        filled(msg.TWO_RECORDS, offset="offset", why=filled(
            msg.OLDER_EPOCH_LOSES, winner_epoch="_w_epoch", winner_source="_w_src", epoch="leader_epoch",
            source="source_file"))))
    damaged = losers.where((F.col("leader_epoch") == F.col("_w_epoch")) & (F.col("is_text") == F.col("_w_text")))
    anomalies = anomalies.unionByName(_anomaly(
        damaged, ProblemKind.DIVERGENCE, "offset", "source_file", "file_position",
        filled(msg.TWO_RECORDS, offset="offset", why=filled(
            msg.DAMAGED_COPY, epoch="_w_epoch", winner_source="_w_src", source="source_file"))))
    marked = ranked.where("_rank = 1").select(*_RESOLVED_COLUMNS, TXN_ROWS, "_truncated", "_floor")
    # the epochs' first offsets read again from the staged copies marked as one: the anomalies' write then reads no
    # bronze row, and of the copies only the row groups holding an epoch's start (grouping every copy read 10M rows
    # in 6.4 s of a task at 10M records, in the replay's write phase)
    below = _epoch_before(marked.where("_truncated"), _epoch_starts(ranked.where(F.col(EPOCH_START))))
    anomalies = anomalies.unionByName(_anomaly(
        below, ProblemKind.DIVERGENCE, "offset", "source_file", "file_position",
        filled(msg.EPOCH_BELOW_EARLIER, offset="offset", epoch="leader_epoch", max_epoch="_prev_max")))
    resolved = marked.where(~F.col("_truncated") & F.col("leader_epoch").isNotNull()).drop("_truncated", "_floor")
    return resolved, anomalies


def _ranked_copies(good: DataFrame, pref: list[Column], keep: Keep) -> DataFrame:
    """Each copy with its rank at its offset (`_rank`) and the epoch, text flag, file and hash of the offset's winner
    (`_w_epoch`, `_w_text`, `_w_src`, `_w_hash`).

    Only offsets held more than once need ranking, and the bronze rows hold copies that are the same record once, so
    those are the offsets where copies diverge: a few, or none. They are found first (`_offsets_held_twice`) and kept,
    so that the copies meet them in a broadcast join when they are few; only their rows are sorted, and every other
    row is its own offset's winner. Ranking every record (2M: a sort of all the wide rows) took 8.9-9.8 s and 16-18 s
    of JVM CPU against 7.7-8.3 s and 14-15 s (warm, one session, 2026-12-05)."""
    key = ["cluster_id", "offset"]
    shared = keep(_offsets_held_twice(good), "shared_offsets")
    by_offset = Window.partitionBy(*key).orderBy(F.col("leader_epoch").desc(), *pref)
    winner = {"_w_epoch": "leader_epoch", "_w_text": "is_text", "_w_src": "source_file", "_w_hash": "content_hash"}

    def with_rank(rows: DataFrame, rank: Column, of_winner: Callable[[str], Column],
                  own: Callable[[str], Column] = F.col) -> DataFrame:
        return rows.select(*_RESOLVED_COLUMNS, *[own(c).alias(c) for c in ("is_text", "content_hash")],
                           rank.alias("_rank"), *[of_winner(c).alias(name) for name, c in winner.items()])

    def unused(c: str) -> Column:
        return F.lit(None).cast(good.schema[c].dataType)

    # a copy alone at its offset is its winner and no loser: the columns losers are compared by stay empty (nulls
    # cost next to nothing to write: at 2M records the step's task time over three replays fell from 25 s to 18 s)
    alone = with_rank(good.join(shared, key, "left_anti"), F.lit(1), unused, unused)
    ranked = with_rank(good.join(shared, key, "left_semi"), F.row_number().over(by_offset),
                       lambda c: F.first(c).over(by_offset))
    return alone.unionByName(ranked)


def _offsets_held_twice(copies: DataFrame) -> DataFrame:
    """(cluster_id, offset) of the offsets that more than one of `copies` holds (an offset without a value is never
    one: it matches no other).

    Counting the rows of every offset is a shuffle of every record to find a few offsets, or none. So first, per
    range of offsets (a bitmap's bucket, 32,768 offsets), the rows are counted against their distinct offsets (the
    range's bitmap, merged before the shuffle: one row per range and task crosses it); only the rows of ranges that
    hold an offset twice are counted per offset, and when there are none, adaptive execution skips that scan."""
    known = copies.where(F.col("offset").isNotNull()).select(
        "cluster_id", "offset", F.bitmap_bucket_number("offset").alias("_range"))
    twice = (known.groupBy("cluster_id", "_range")
             .agg(F.count(F.lit(1)).alias("_rows"),
                  F.bitmap_count(F.bitmap_construct_agg(F.bitmap_bit_position("offset"))).alias("_offsets"))
             .where(F.col("_rows") > F.col("_offsets")).select("cluster_id", "_range"))
    return (known.join(F.broadcast(twice), ["cluster_id", "_range"], "left_semi")
            .groupBy("cluster_id", "offset").agg(F.count(F.lit(1)).alias("_n")).where("_n > 1").drop("_n"))


def _epoch_starts(copies: DataFrame) -> DataFrame:
    """Each leader epoch's first offset among the copies (cluster_id, leader_epoch, _first): a few rows per cluster,
    one per election, which stand in for a running maximum over every record.

    Read from all copies, not the winners, so that it needs no ranking first: what `truncated` and `_epoch_before`
    ask of it is the same either way. A winner holds the highest epoch of its offset, so the first offset where some
    copy has an epoch above e is the first whose winner has one, and the highest epoch before an offset is the
    highest of the winners there."""
    return (copies.where(F.col("leader_epoch").isNotNull())
            .groupBy("cluster_id", "leader_epoch").agg(F.min("offset").alias("_first")))


def truncated(winners: DataFrame, starts: DataFrame, resume: DataFrame | None = None) -> DataFrame:
    """The winners with `_truncated` (given every copy, each is marked as if it won): an earlier offset has a higher
    epoch (or the log before a suffix had one, `resume`'s epoch_floor, kept as `_floor`), so the record is a suffix
    a new leader truncated (rule 6).

    A record of epoch e at offset o is truncated when a higher epoch starts before o, so per epoch the least first
    offset of the higher ones (`_cut`, from `starts`: `_epoch_starts`) decides it: a join with a table of epochs,
    no sort of the log. Each copy at its epoch's first offset also gets `EPOCH_START`."""
    higher = Window.partitionBy("cluster_id").orderBy(F.col("leader_epoch").desc()).rowsBetween(_UNBOUNDED, -1)
    cuts = F.broadcast(starts.select("cluster_id", "leader_epoch", "_first",
                                     F.min("_first").over(higher).alias("_cut")))
    marked = winners.join(cuts, ["cluster_id", "leader_epoch"], "left")
    # the copies at their epoch's first offset, marked: a reader of the marked copies who needs `starts` again
    # reads those rows, a few, not every copy (`resolve_log`'s anomalies)
    marked = marked.withColumn(EPOCH_START, F.coalesce(F.col("offset") == F.col("_first"), F.lit(False))).drop("_first")
    if resume is None:
        marked = marked.withColumn("_floor", F.lit(None).cast("int"))
    else:
        marked = marked.join(F.broadcast(resume.select("cluster_id", F.col("epoch_floor").alias("_floor"))),
                             "cluster_id", "left")
    below = F.coalesce(F.col("offset") > F.col("_cut"), F.lit(False)) | F.coalesce(
        F.col("leader_epoch") < F.col("_floor"), F.lit(False))
    return marked.withColumn("_truncated", below).drop("_cut")


def _epoch_before(rows: DataFrame, starts: DataFrame) -> DataFrame:
    """Truncated `rows` (from `truncated`) with `_prev_max`: the highest epoch at an offset before theirs, or
    before the suffix (`_floor`), which the anomaly names. Only truncated rows are asked, rarely many."""
    epochs = F.broadcast(starts.select(F.col("cluster_id").alias("_ec"), F.col("leader_epoch").alias("_ee"),
                                       "_first"))
    return (rows.join(epochs, (F.col("cluster_id") == F.col("_ec")) & (F.col("_first") < F.col("offset")), "left")
            .groupBy(*rows.columns).agg(F.max("_ee").alias("_prev_max"))
            .withColumn("_prev_max", F.greatest("_prev_max", "_floor")))


# ---- 2. runs and gaps ------------------------------------------------------------------------------------------
def log_ranges(resolved: DataFrame, size: int | None = None) -> DataFrame:
    """Gaps and islands: maximal runs of consecutive offsets, one row each (start_offset, end_offset). `resolved`
    holds one row per offset."""
    return islands(resolved, "offset", size)


def unknown_gaps(ranges: DataFrame, last: DataFrame) -> DataFrame:
    """The offsets of [0, last] that no log record covers, as (cluster_id, gap_start, gap_end) stretches.

    `last` holds each cluster's last known offset (`last_offset`). Snapshot points are in these gaps: a snapshot
    tells the state there, not which record sits there.
    """
    w = Window.partitionBy("cluster_id").orderBy("start_offset")
    between = (ranges.withColumn("_prev_end", F.lag("end_offset").over(w))
               .select("cluster_id", (F.coalesce(F.col("_prev_end"), F.lit(-1)) + 1).alias("gap_start"),
                       (F.col("start_offset") - 1).alias("gap_end")))
    tail = (last.join(ranges.groupBy("cluster_id").agg(F.max("end_offset").alias("_log_end")), "cluster_id", "left")
            .select("cluster_id", (F.coalesce(F.col("_log_end"), F.lit(-1)) + 1).alias("gap_start"),
                    F.col("last_offset").alias("gap_end")))
    return between.unionByName(tail).where(F.col("gap_start") <= F.col("gap_end"))


def unknown_bounds(pairs: DataFrame, gaps: DataFrame) -> DataFrame:
    """For each distinct (cluster_id, _p, _q): the least and greatest offset in (_p, _q] in no dump (or null)."""
    return with_unknown_bounds(pairs.select("cluster_id", "_p", "_q").distinct(), gaps)


def with_unknown_bounds(rows: DataFrame, gaps: DataFrame) -> DataFrame:
    """`rows` (with cluster_id, _p and _q) each with `_wmin` and `_wmax`: the least and greatest offset in (_p, _q]
    in no dump (or null).

    Each cluster's stretches come as one list (a handful of rows in all, broadcast) and are searched per row:
    no join of `rows` with anything their size. Joined back by (_p, _q), a cluster's ~400k open lifetimes were
    broadcast twice as 66-70 MiB hash tables, one task building them for 6.2 s (the 10M benchmark)."""
    c = F.col
    lists = F.broadcast(gaps.groupBy(c("cluster_id").alias("_gc")).agg(
        F.collect_list(F.struct(c("gap_start").alias("s"), c("gap_end").alias("e"))).alias("_gaps")))
    inside = F.filter(c("_gaps"), lambda g: (g["e"] > c("_p")) & (g["s"] <= c("_q")))  # no list (no stretch): null
    return (rows.join(lists, c("cluster_id") == c("_gc"), "left")
            .select(*[c(n) for n in rows.columns],
                    F.array_min(F.transform(inside, lambda g: F.greatest(g["s"], c("_p") + 1))).alias("_wmin"),
                    F.array_max(F.transform(inside, lambda g: F.least(g["e"], c("_q")))).alias("_wmax")))


# ---- 3. snapshots ----------------------------------------------------------------------------------------------
_COPY = ["cluster_id", "copy"]  # a snapshot copy: one file, or one section of a dump-log text


def snapshots(records: DataFrame, quarantine: DataFrame, high_watermark: int | None = None,
              keep: Keep = unstaged) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The loaded snapshots, their ACL rows, and the snapshot anomalies. A copy with any problem inside it (a
    quarantined finding other than a notice, a bad CRC, no header first, no footer) is not loaded.

    Returns (snaps: cluster_id, copy, idx, q, snap_end, epoch, snap_time, source_file — numbered from 1 by end
    offset), (ACL rows of the loaded copies: cluster_id, idx, acl_id, ACL fields), anomalies.
    """
    snap = (records.where((F.col("stream") == "snapshot") & (F.col("snapshot_end_offset") > 0))
            .withColumnRenamed("snapshot_end_offset", "snap_end").withColumnRenamed("snapshot_epoch", "epoch")
            .withColumn("copy", F.concat_ws("\u0000", "source_file", F.coalesce("text_section", F.lit("")),
                                            F.col("snap_end").cast("string"), F.col("epoch").cast("string"))))
    if high_watermark is not None:
        snap = snap.where(F.col("snap_end") <= high_watermark)
    # a copy's first record (by position) must be its header, whose time is the snapshot's: taken with `min_by` in
    # one aggregate, which each task combines before the shuffle (a window numbering every row shuffled them all:
    # 811k snapshot rows at 10M records, 305 MiB, sorted again for each of the four anomalies that read the copies)
    first = F.struct("file_position", "record_index", "offset")
    header = F.coalesce(F.col("record_type") == "SNAPSHOT_HEADER", F.lit(False))
    header_time = F.get_json_object("payload_json", "$.lastContainedLogTimestamp").cast("long")
    per_copy = (snap.groupBy(*_COPY, "source_file", "text_section", "snap_end", "epoch")
                .agg(F.min_by(header, first).alias("has_header"),
                     F.max(F.col("record_type") == "SNAPSHOT_FOOTER").alias("has_footer"),
                     F.min("crc_ok").alias("crc_ok"),
                     F.min_by(F.when(header, header_time), first).alias("_t")))
    per_copy = per_copy.withColumn("snap_time", F.when(F.col("_t") != 0, F.col("_t"))).drop("_t")
    q = quarantine.where(~F.col("kind").isin(*sorted(k.value for k in NOTICE_KINDS))).select(
        F.col("cluster_id").alias("_qc"), F.col("source_file").alias("_qf"), F.col("text_section").alias("_qs"),
        "kind")
    found = (per_copy.join(q, (per_copy.cluster_id == q._qc) & (per_copy.source_file == q._qf)
                           & per_copy.text_section.eqNullSafe(q._qs), "left")
             .groupBy(*per_copy.columns).agg(F.collect_set("kind").alias("_found")))
    none = F.array().cast("array<string>")
    problems = F.array_sort(F.array_distinct(F.concat(
        F.col("_found"),
        F.when(~F.col("crc_ok"), F.array(F.lit("bad_crc"))).otherwise(none),
        F.when(~F.col("has_header"), F.array(F.lit("snapshot_no_header"))).otherwise(none),
        F.when(~F.col("has_footer"), F.array(F.lit("snapshot_no_footer"))).otherwise(none))))
    copies = found.withColumn("problems", problems)
    at = F.col("snap_end") - 1
    anomalies = (
        _anomaly(copies.where(~F.col("has_header") & ~F.array_contains("_found", "snapshot_no_header")),
                 ProblemKind.SNAPSHOT_NO_HEADER, at, "source_file", F.lit(0),
                 filled(msg.SNAPSHOT_NO_HEADER))
        .unionByName(_anomaly(copies.where(~F.col("has_footer") & ~F.array_contains("_found", "snapshot_no_footer")),
                              ProblemKind.SNAPSHOT_NO_FOOTER, at, "source_file", None,
                              filled(msg.SNAPSHOT_NO_FOOTER)))
        .unionByName(_anomaly(copies.where(F.size("problems") > 0), ProblemKind.SNAPSHOT_NOT_LOADED, at,
                              "source_file", None,
                              filled(msg.SNAPSHOT_NOT_LOADED, end_offset="snap_end", epoch="epoch",
                                     kinds=F.array_join("problems", ", "))))
    )
    loadable = copies.where(F.size("problems") == 0).select(*_COPY, "source_file", "text_section", "snap_end",
                                                             "epoch", "snap_time")
    acl = snap.where((F.col("api_key") == ACL_ENTRY) & ~F.col("is_control") & F.col("acl_id").isNotNull()
                     & F.col("decode_error").isNull())
    last_per_id = Window.partitionBy(*_COPY, "acl_id").orderBy(F.col("file_position").desc(),
                                                               F.col("record_index").desc())
    acl = keep(acl.withColumn("_n", F.row_number().over(last_per_id)).where("_n = 1")  # a snapshot is a map by id
               .select(*_COPY, "acl_id", *_ACL_FIELDS), "snapshot_acls")
    fingerprint = (acl.groupBy(*_COPY).agg(F.sha2(F.array_join(F.array_sort(F.collect_list(
        F.concat_ws("\u0002", "acl_id", _binding_key()))), "\u0003"), 256).alias("_fp")))
    rank = Window.partitionBy("cluster_id", "snap_end").orderBy(F.col("epoch").desc(), "source_file", "copy")
    ranked = (loadable.join(fingerprint, _COPY, "left")
              .withColumn("_fp", F.coalesce("_fp", F.lit("")))
              .select("*", F.row_number().over(rank).alias("_rank"), F.first("_fp").over(rank).alias("_w_fp"),
                      F.first("epoch").over(rank).alias("_w_epoch"), F.first("source_file").over(rank).alias("_w_src")))
    anomalies = anomalies.unionByName(_anomaly(
        ranked.where((F.col("_rank") > 1) & (F.col("_fp") != F.col("_w_fp"))), ProblemKind.DIVERGENCE, at,
        "source_file", None,
        filled(msg.SNAPSHOTS_DIFFER, end_offset="snap_end", winner_epoch="_w_epoch", winner_source="_w_src")))
    order = Window.partitionBy("cluster_id").orderBy("snap_end")
    snaps = keep(ranked.where("_rank = 1").select(*_COPY, "source_file", "snap_end", "epoch", "snap_time")
                 .withColumn("idx", F.row_number().over(order)).withColumn("q", F.col("snap_end") - 1), "snapshots")
    snap_acls = acl.join(snaps.select(*_COPY, "idx"), _COPY).select("cluster_id", "idx", "acl_id", *_ACL_FIELDS)
    return snaps, snap_acls, anomalies


# ---- 4. transactions -------------------------------------------------------------------------------------------
def published_offset(offset: Column, batch_last_offset: Column, high_watermark: int | None) -> Column:
    """Where the change of the record at `offset` becomes visible: nodes apply and publish whole batches (DESIGN.md
    §2), so at its batch's last offset, or at the last offset kept when a high watermark cuts the batch
    (`replay.kafka.replayer.LogRuns.published_offset`)."""
    last = F.greatest(F.coalesce(batch_last_offset, offset), offset)
    return last if high_watermark is None else F.least(last, F.lit(high_watermark - 1))


def visible_acl_records(resolved: DataFrame, gaps: DataFrame, bounds: DataFrame, resume: DataFrame | None = None,
                        size: int | None = None,
                        keep: Keep = unstaged,
                        high_watermark: int | None = None,
                        ) -> tuple[DataFrame, DataFrame, DataFrame]:
    """The ACL records that become visible (at which offset, time and cause), the transaction anomalies, and the
    Ends whose transaction spans a hole (`replay.kafka.replayer.resolve_transactions` states the rules). A change is
    visible where its batch (a transaction's: its End's batch) is published (`published_offset`).

    What decides a record's fate (the last marker and hole before it, the next ones after it) changes only at the
    markers and holes, which are few (36k markers among 836k ACL records and markers at 10M records). So the running
    values are computed over those points alone (`_transaction_points`), and each ACL record takes them from the
    interval between points that holds it (`ordered.as_of`), a join rather than a sort of every ACL record (10M:
    the step's task CPU 10.4 -> 6.0 s, with the copies split by `TXN_ROWS`).

    `bounds`: each cluster's first and last known offset. `resume` (a suffix replay): the last transaction marker
    before the suffix, placed before its rows. The ACL records and markers with their neighbouring markers are kept
    once (`keep`): all three results read them.
    """
    rel = resolved.where(F.col(TXN_ROWS)).select(
        "cluster_id", "offset", "api_key", "acl_id", *_ACL_FIELDS, F.col("append_time").alias("time"), "source_file",
        "file_position", published_offset(F.col("offset"), F.col("batch_last_offset"), high_watermark).alias("_pub"))
    if resume is not None:
        rel = rel.unionByName(resume.where(F.col("marker_offset").isNotNull()).select(
            "cluster_id", F.col("marker_offset").alias("offset"), F.col("marker_key").alias("api_key"),
            F.col("marker_time").alias("time"), F.col("marker_file").alias("source_file"),
            F.col("marker_position").alias("file_position")), allowMissingColumns=True)
    key = F.col("api_key")
    is_marker = key.isin(TXN_BEGIN, TXN_END, TXN_ABORT)
    points = keep(_transaction_points(rel.where(is_marker), gaps, bounds, size), "transaction_points")
    values = ["_last_ge", "_next_gs", "_pm", "_pm_key", "_nm", "_nc"]
    marker_rows = points.where(is_marker).select(*rel.columns, *values)
    # the interval after each point: its values after it, and its own up to and including it
    intervals = points.select("cluster_id", F.col("offset").alias("_from"), F.col("_next_point").alias("_to"),
                              F.col("_upto_ge").alias("_last_ge"), F.col("_upto_pm").alias("_pm"),
                              F.col("_upto_pm_key").alias("_pm_key"), "_next_gs", "_nm", "_nc")
    acl_rows = as_of(rel.where(key.isin(ACL_ENTRY, ACL_REMOVE)), "offset", intervals, bounds, size)
    u = acl_rows.select(*rel.columns, *values).unionByName(marker_rows)
    u = (u.withColumn("_last_ge", F.coalesce(F.col("_last_ge"), F.lit(-1)))
         .withColumn("_pm", F.coalesce(F.col("_pm"), F.lit(-1))))
    u = keep(u.withColumn("_hole", F.col("_last_ge") > F.col("_pm")).withColumn(
        "_held", F.col("_pm_key").eqNullSafe(TXN_BEGIN)), "transactions")

    # markers: nested Begins, closes without a Begin, Ends whose transaction spans a hole, a pending transaction
    markers = u.where(is_marker)
    nested = (key == TXN_BEGIN) & F.col("_held") & ~F.col("_hole")
    markers = with_running(markers, "offset", ["offset"], [
        Running("_opener", "last_upto", F.when((key == TXN_BEGIN) & ~nested, F.col("offset")))], size)
    unmatched = (key != TXN_BEGIN) & ~F.col("_held") & ~F.col("_hole")

    # ACL records: where each becomes visible (null: not visible, or its fate is unknown)
    acl = u.where(key.isin(ACL_ENTRY, ACL_REMOVE) & F.col("acl_id").isNotNull())
    known_state = ~F.col("_hole")
    nc, nm = F.col("_nc"), F.col("_nm")
    pending = known_state & F.col("_held") & nc.isNull()
    closes_at = (F.when(known_state & ~F.col("_held"), F.col("offset"))
                 .when(known_state & (nc.k == TXN_END) & ~F.coalesce(F.col("_next_gs") < nc.o, F.lit(False)), nc.o)
                 .when(~known_state & nm.isNull() & ~F.col("_held"), F.col("offset"))
                 .when(~known_state & F.coalesce(F.col("_next_gs") < nm.o, F.lit(False)), F.lit(None))
                 .when(~known_state & (nm.k == TXN_BEGIN), F.col("offset"))
                 .when(~known_state & (nm.k == TXN_END), nm.o))
    acl = acl.withColumn("pos", closes_at).withColumn("_pending", pending)
    held_pending = acl.groupBy("cluster_id").agg(F.sum(F.col("_pending").cast("long")).alias("_n_pending"))

    last_marker = markers.where(F.col("_nm").isNull() & (key == TXN_BEGIN) & F.col("_next_gs").isNull())
    pending_rows = (last_marker.join(held_pending, "cluster_id", "left")
                    .join(markers.select("cluster_id", F.col("offset").alias("_opener"),
                                         F.col("source_file").alias("_o_file"),
                                         F.col("file_position").alias("_o_pos")), ["cluster_id", "_opener"]))
    anomalies = (
        _anomaly(markers.where(nested), ProblemKind.NESTED_BEGIN, "offset", "source_file", "file_position",
                 filled(msg.NESTED_BEGIN, opener="_opener"))
        .unionByName(_anomaly(markers.where(unmatched & (key == TXN_END)), ProblemKind.END_WITHOUT_BEGIN, "offset",
                              "source_file", "file_position", filled(msg.WITHOUT_BEGIN, marker=F.lit("EndTransaction"))))
        .unionByName(_anomaly(markers.where(unmatched & (key == TXN_ABORT)), ProblemKind.ABORT_WITHOUT_BEGIN,
                              "offset", "source_file", "file_position",
                              filled(msg.WITHOUT_BEGIN, marker=F.lit("AbortTransaction"))))
        .unionByName(_anomaly(pending_rows, ProblemKind.PENDING_TRANSACTION, "_opener", "_o_file", "_o_pos",
                              filled(msg.PENDING_TRANSACTION, opener="_opener",
                                     held=F.coalesce(F.col("_n_pending"), F.lit(0)))))
    )
    spanning_ends = markers.where((key == TXN_END) & F.col("_hole")).select(
        "cluster_id", F.col("offset").alias("gap_start"), F.col("offset").alias("gap_end"))
    through_end = F.col("pos") != F.col("offset")
    published = F.when(~through_end, F.col("_pub")).when(known_state, nc.p).otherwise(nm.p)
    visible = acl.where(F.col("pos").isNotNull()).select(
        "cluster_id", "acl_id", *_ACL_FIELDS, "source_file", "file_position", F.col("offset").alias("rec_off"),
        published.alias("pos"),
        F.when(through_end, F.when(~known_state, nm.t).otherwise(nc.t)).otherwise(F.col("time")).alias("time"),
        F.when(through_end, F.lit("TRANSACTION")).otherwise(F.lit("RECORD")).alias("cause"),
        F.when(key == ACL_ENTRY, F.lit("CREATE")).otherwise(F.lit("REMOVE")).alias("op"))
    return visible, anomalies, spanning_ends


def _transaction_points(markers: DataFrame, gaps: DataFrame, bounds: DataFrame, size: int | None) -> DataFrame:
    """The transaction markers, the holes' starts and a first point before every offset of each cluster (offset -1),
    in offset order, each with the running values a row there needs: the last hole end (`_last_ge`), marker offset
    (`_pm`) and marker type (`_pm_key`) before it, and the next hole start (`_next_gs`), marker (`_nm`) and End or
    Abort (`_nc`) after it (`_nm` and `_nc` as structs: offset, type, time, publishing offset).

    For the records between a point and the next (`_next_point`), the values after them are the point's, and the
    values before them are the point's own up to and including itself (`_upto_ge`, `_upto_pm`, `_upto_pm_key`)."""
    key = F.col("api_key")
    is_marker = key.isin(TXN_BEGIN, TXN_END, TXN_ABORT)
    point = F.struct(F.col("offset").alias("o"), key.alias("k"), F.col("time").alias("t"),
                     F.coalesce(F.col("_pub"), F.col("offset")).alias("p"))
    holes = gaps.select("cluster_id", F.col("gap_start").alias("offset"), F.col("gap_start").alias("_gs"),
                        F.col("gap_end").alias("_ge"))
    first = bounds.select("cluster_id", F.lit(-1).cast("long").alias("offset"))
    rows = (markers.unionByName(holes, allowMissingColumns=True).unionByName(first, allowMissingColumns=True))
    marker_offset, marker_key = F.when(is_marker, F.col("offset")), F.when(is_marker, key)
    return with_running(rows, "offset", ["offset"], [
        Running("_last_ge", "last_before", F.col("_ge")), Running("_upto_ge", "last_upto", F.col("_ge")),
        Running("_pm", "last_before", marker_offset), Running("_upto_pm", "last_upto", marker_offset),
        Running("_pm_key", "last_before", marker_key), Running("_upto_pm_key", "last_upto", marker_key),
        Running("_next_gs", "first_after", F.col("_gs")),
        Running("_nm", "first_after", F.when(is_marker, point)),
        Running("_nc", "first_after", F.when(key.isin(TXN_END, TXN_ABORT), point)),
        Running("_next_point", "first_after", F.col("offset")),
    ], size)


# ---- 5. observations and transitions ---------------------------------------------------------------------------
def observations(visible: DataFrame, snaps: DataFrame, snap_acls: DataFrame, bounds: DataFrame,
                 size: int | None = None) -> DataFrame:
    """Every observation of every ACL id in the log and the loaded snapshots: (pos, kind) with kind 0 for a record,
    1 for a snapshot (`with_predecessors` adds the absences they imply).

    `sidx` is the snapshot an observation is at (kind 1) or the next snapshot after it (kind 0; n+1 when none): for
    a record, the snapshot that ends the interval between snapshots that holds its position (`ordered.as_of`; a
    snapshot at a record's position comes after it). `bounds`: each cluster's first and last known offset.
    Counting the snapshots before every record in order (a running sum over the records and snapshots) cost the 10M
    log 11.6 s of task CPU in this step, the lookup 8.0 s.
    """
    between = Window.partitionBy("cluster_id").orderBy("q")  # over the snapshots alone: a few per million offsets
    intervals = snaps.select("cluster_id", F.col("q").alias("_from"), F.lead("q").over(between).alias("_to"),
                             F.col("idx").alias("_before"))
    logged = (as_of(visible, "pos", intervals, bounds, size)
              .withColumn("sidx", F.coalesce(F.col("_before"), F.lit(0)) + 1).withColumn("kind", F.lit(0))
              .drop("_before"))
    present = snap_acls.join(snaps.select("cluster_id", "idx", "q", "snap_time"), ["cluster_id", "idx"]).select(
        "cluster_id", "acl_id", *_ACL_FIELDS, F.lit(None).cast("string").alias("source_file"),
        F.lit(None).cast("long").alias("file_position"), F.lit(None).cast("long").alias("rec_off"),
        F.col("q").alias("pos"), F.col("snap_time").alias("time"), F.lit("SNAPSHOT_LOAD").alias("cause"),
        F.lit("PRESENT").alias("op"), F.lit(1).alias("kind"), F.col("idx").alias("sidx"))
    return logged.unionByName(present)


def with_predecessors(obs: DataFrame, snaps: DataFrame) -> DataFrame:
    """The observations and the absences they imply, each with its predecessor's op, position and binding (`_p_op`,
    `_p_pos`, `_p_<field>`; null for an id's first) and whether it is its id's last (`_last`).

    An id live after an observation and missing from the next snapshot (its next observation comes later, or never)
    is observed absent there: an ABSENT row between the two, which becomes the later one's predecessor. One window
    over the observations gives both, the next observation's position deciding an absence and the previous one's
    values (and whether it left an absence) making a predecessor. A second window over the observations with their
    absences sorted the same rows again (10M records: the two steps' task CPU 17.1-19.1 s, one window 15.8-15.9 s)."""
    by_id = Window.partitionBy("cluster_id", "acl_id").orderBy("pos", "kind", "rec_off")
    nxt = snaps.select("cluster_id", F.col("idx").alias("_nidx"), F.col("q").alias("_nq"),
                       F.col("snap_time").alias("_nt"))
    live = F.col("op").isin("CREATE", "PRESENT")
    w = (obs.withColumn("_nidx", F.col("sidx") + F.col("kind"))
         .join(nxt, ["cluster_id", "_nidx"], "left")
         .withColumn("_nq", F.when(live, F.col("_nq")))  # where an absence would be: only a live id can leave one
         .select("*", F.lead("pos").over(by_id).alias("_lead_pos"), F.lag("_nq").over(by_id).alias("_p_nq"),
                 F.lag("op").over(by_id).alias("_lag_op"), F.lag("pos").over(by_id).alias("_lag_pos"),
                 *[F.lag(c).over(by_id).alias("_lag_" + c) for c in _ACL_FIELDS]))
    leaves = F.col("_nq").isNotNull() & (F.col("_lead_pos").isNull() | (F.col("_lead_pos") > F.col("_nq")))
    after = F.col("_p_nq").isNotNull() & (F.col("pos") > F.col("_p_nq"))  # the previous one left an absence
    observed = {
        **{c: F.col(c) for c in obs.columns}, "_p_op": F.when(after, F.lit("ABSENT")).otherwise(F.col("_lag_op")),
        "_p_pos": F.when(after, F.col("_p_nq")).otherwise(F.col("_lag_pos")),
        **{"_p_" + c: F.when(~after, F.col("_lag_" + c)) for c in _ACL_FIELDS},
        "_last": F.col("_lead_pos").isNull() & ~leaves}
    absent = {
        **{c: F.lit(None) for c in obs.columns}, "cluster_id": F.col("cluster_id"), "acl_id": F.col("acl_id"),
        "pos": F.col("_nq"), "time": F.col("_nt"), "cause": F.lit("SNAPSHOT_LOAD"), "op": F.lit("ABSENT"),
        "kind": F.lit(1), "sidx": F.col("_nidx"), "_p_op": F.col("op"), "_p_pos": F.col("pos"),
        **{"_p_" + c: F.col(c) for c in _ACL_FIELDS}, "_last": F.col("_lead_pos").isNull()}
    types = {**{f.name: f.dataType for f in obs.schema.fields}, "_p_op": obs.schema["op"].dataType,
             "_p_pos": obs.schema["pos"].dataType, "_last": BooleanType(),
             **{"_p_" + c: obs.schema[c].dataType for c in _ACL_FIELDS}}

    def row(values: dict[str, Column]) -> Column:
        return F.struct(*[values[name].cast(types[name]).alias(name) for name in observed])

    # both rows from one pass over the window's output (a union of two selects of it sorted the rows twice)
    return w.select(F.inline(F.filter(F.array(row(observed), F.when(leaves, row(absent))), lambda r: r.isNotNull())))


def transitions(obs: DataFrame, snaps: DataFrame, gaps: DataFrame, spanning_ends: DataFrame,
                keep: Keep = unstaged) -> DataFrame:
    """Each observation (and absence: `with_predecessors`) with its predecessor and, for changes only a snapshot
    shows, where they happened (the offsets in no dump, and the Ends of transactions that span a hole, after the
    id's previous observation).

    The observations with their predecessors are kept (`keep`) before the places are looked up: the lookups' two
    broadcasts and the final rows each ran the window over every observation again (at 2M records, three sorts of
    253,420 rows). A snapshot's presence that confirms the id's live binding changes nothing and shows no finding,
    so it is kept only as the id's last observation (`_last`, whose position `lifetimes` reads): at 10M records
    most of the observations are such presences (`confirms`)."""
    prev_q = snaps.select("cluster_id", (F.col("idx") + 1).alias("sidx"), F.col("q").alias("_prev_q"))
    # the binding compared field by field with the previous one: a key made of the fields would be carried twice
    # more through the window and the staged rows, which are mostly these strings
    same = functools.reduce(Column.__and__, [F.col(c).eqNullSafe(F.col("_p_" + c)) for c in _ACL_FIELDS],
                            F.col("_p_op").isNotNull())
    t = (with_predecessors(obs, snaps)
         .join(prev_q, ["cluster_id", "sidx"], "left")
         .withColumn("_prev_q", F.coalesce("_prev_q", F.lit(-1)))
         .withColumn("_was_live", F.coalesce(F.col("_p_op").isin("CREATE", "PRESENT"), F.lit(False)))
         .withColumn("_same", same))
    t = t.where(~confirms() | F.col("_last"))
    # where a snapshot-shown change lies: offsets in no dump after the id's previous observation
    reveals = (F.col("kind") == 1) & ((F.col("op") == "ABSENT") | ((F.col("op") == "PRESENT") & ~confirms()))
    stray = (F.col("op") == "REMOVE") & ~F.col("_was_live") & F.col("_p_op").isNull()
    t = (t.withColumn("_p", F.when(reveals | stray, F.when(reveals, F.greatest(F.coalesce("_p_pos", F.lit(-1)),
                                                                              F.col("_prev_q")))
                                    .otherwise(F.col("_prev_q"))))
         .withColumn("_q", F.when(reveals, F.col("pos")).when(stray, F.col("pos") - 1))
         .withColumn("_reveals", reveals))
    t = keep(t, "predecessors")
    # Broadcast: the bounds are one row per distinct (previous observation, snapshot) of the changes only a snapshot
    # shows, few, while `_p` and `_q` are null on nearly every observation, so a shuffle of `t` by them put all its
    # rows in one task (the 2M benchmark: one task read 253,420 rows, 144 MiB, to match none).
    window_bounds = unknown_bounds(t.where(F.col("_reveals")), gaps.unionByName(spanning_ends))
    stray_bounds = unknown_bounds(t.where(stray), gaps)
    key = ["cluster_id", "_p", "_q", "_reveals"]
    return (t.join(F.broadcast(window_bounds.withColumn("_reveals", F.lit(True))), key, "left")
            .join(F.broadcast(stray_bounds.withColumnsRenamed({"_wmin": "_smin", "_wmax": "_smax"})
                              .withColumn("_reveals", F.lit(False))), key, "left")
            .withColumn("_wmin", F.coalesce("_wmin", "_smin")).withColumn("_wmax", F.coalesce("_wmax", "_smax"))
            .drop("_smin", "_smax"))


def confirms() -> Column:
    """A snapshot's presence of an id live with the same binding: no event, no finding, no bound of a hole."""
    return (F.col("op") == "PRESENT") & F.col("_was_live") & F.col("_same")


def _event_rows(t: DataFrame) -> DataFrame:
    """The visible changes (see `replay.kafka.replayer.event_order` for the numbering)."""
    def rows(df: DataFrame, change: str, cause: Column, prev_binding: bool, lo: Column, hi: Column,
             time: Column) -> DataFrame:
        fields = [F.col(("_p_" if prev_binding else "") + c).alias(c) for c in _ACL_FIELDS]
        return df.select("cluster_id", "acl_id", hi.alias("offset"), lo.alias("offset_min"), time.alias("time"),
                         F.lit(change).alias("change"), cause.alias("cause"), "rec_off", *fields)

    op, live, same = F.col("op"), F.col("_was_live"), F.col("_same")
    pos, cause = F.col("pos"), F.col("cause")
    # a snapshot-shown change: in [_wmin, _wmax], or at the snapshot when the log leaves no room for it
    hi = F.coalesce(F.col("_wmax"), pos)
    lo = F.coalesce(F.col("_wmin"), pos)
    snap_time = F.when(hi == pos, F.col("time"))
    replace = F.lit("REPLACE")
    return (
        rows(t.where((op == "CREATE") & ~live), "CREATE", cause, False, pos, pos, F.col("time"))
        .unionByName(rows(t.where((op == "CREATE") & live & ~same), "REMOVE", replace, True, pos, pos, F.col("time")))
        .unionByName(rows(t.where((op == "CREATE") & live & ~same), "CREATE", replace, False, pos, pos,
                          F.col("time")))
        .unionByName(rows(t.where((op == "REMOVE") & live), "REMOVE", cause, True, pos, pos, F.col("time")))
        .unionByName(rows(t.where(((op == "PRESENT") & live & ~same) | (op == "ABSENT")), "REMOVE", cause, True, lo,
                          hi, snap_time))
        .unionByName(rows(t.where((op == "PRESENT") & ~confirms()), "CREATE", cause, False, lo, hi, snap_time))
    )


def number_events(events: DataFrame, size: int | None = None) -> DataFrame:
    """`seq` in application order: offset; records (by record offset) before snapshot loads; remove before create;
    then id."""
    order = [F.col("offset"), F.col("rec_off").isNull(), F.coalesce(F.col("rec_off"), F.lit(-1)),
             F.when(F.col("change") == "REMOVE", 0).otherwise(1), F.col("acl_id")]
    return (with_running(events, "offset", order, [Running("seq", "row_number")], size)
            .withColumn("seq", F.col("seq").cast("long"))
            .withColumn("exact", F.col("offset_min") == F.col("offset")))


def lifetimes(events: DataFrame, t: DataFrame, last: DataFrame, gaps: DataFrame) -> DataFrame:
    """One row per lifetime: a create and the next remove of its id; open ones may end in a later hole (after the
    id's last observation, which `transitions` keeps)."""
    by_id = Window.partitionBy("cluster_id", "acl_id").orderBy("seq")
    paired = (events.select("*", *[F.lead(c).over(by_id).alias("_n_" + c) for c in
                                   ("offset", "offset_min", "time", "cause", "change")])
              .where(F.col("change") == "CREATE"))
    last_seen = t.where(F.col("_last")).groupBy("cluster_id", "acl_id").agg(F.max("pos").alias("_p"))
    open_end = (last_seen.join(last.select("cluster_id", F.col("last_offset").alias("_q")), "cluster_id"))
    open_end = with_unknown_bounds(open_end, gaps).select("cluster_id", "acl_id", F.col("_wmin").alias("_open_to_min"))
    closed = F.col("_n_change") == "REMOVE"
    h = paired.join(open_end, ["cluster_id", "acl_id"], "left")
    to = F.when(closed, F.col("_n_offset"))
    to_min = F.when(closed, F.col("_n_offset_min")).otherwise(F.col("_open_to_min"))
    return h.select(
        "cluster_id", "acl_id", *_ACL_FIELDS, F.col("offset").alias("valid_from_offset"),
        F.col("offset_min").alias("valid_from_min_offset"),
        (F.col("offset_min") == F.col("offset")).alias("valid_from_exact"), F.col("time").alias("valid_from_time"),
        F.col("cause").alias("began_by"), to.alias("valid_to_offset"), to_min.alias("valid_to_min_offset"),
        F.when(to.isNull() & to_min.isNull(), F.lit(None).cast("boolean"))
        .otherwise(F.coalesce(to_min == to, F.lit(False))).alias("valid_to_exact"),
        F.when(closed, F.col("_n_time")).alias("valid_to_time"), F.when(closed, F.col("_n_cause")).alias("ended_by"))


def acl_anomalies(t: DataFrame, snaps: DataFrame) -> DataFrame:
    """Duplicate ids, unknown removes and snapshot mismatches."""
    op, live, same = F.col("op"), F.col("_was_live"), F.col("_same")
    dup = _anomaly(t.where((op == "CREATE") & live), ProblemKind.DUPLICATE_ID, "rec_off", "source_file",
                   "file_position",
                   filled(msg.DUPLICATE_ID, acl_id="acl_id", content=F.when(same, "same").otherwise("different")))
    from_hole = F.col("_p_op").isNull() & F.col("_wmin").isNotNull()
    unknown = _anomaly(t.where((op == "REMOVE") & ~live), ProblemKind.UNKNOWN_REMOVE, "rec_off", "source_file",
                       "file_position",
                       filled(msg.UNKNOWN_REMOVE, acl_id="acl_id",
                              hint=F.when(from_hole, msg.UNKNOWN_REMOVE_FROM_HOLE).otherwise("")))
    contradicts = (F.col("kind") == 1) & F.col("_wmin").isNull() & (
        (op == "ABSENT") | ((op == "PRESENT") & ~confirms()))
    cat = (F.when(op == "ABSENT", "only_log").when(live, "changed").otherwise("only_snap"))
    m = (t.where(contradicts).withColumn("_cat", cat)
         .groupBy("cluster_id", "sidx")
         .agg(*[F.collect_list(F.when(F.col("_cat") == c, F.col("acl_id"))).alias(c)
                for c in ("only_snap", "only_log", "changed")])
         .join(snaps.select("cluster_id", F.col("idx").alias("sidx"), "q", "snap_end", "epoch", "source_file"),
               ["cluster_id", "sidx"]))
    mismatch = _anomaly(m, ProblemKind.SNAPSHOT_MISMATCH, "q", "source_file", None, filled(
        msg.SNAPSHOT_MISMATCH, end_offset="snap_end", epoch="epoch", n_only_snap=F.size("only_snap"),
        only_snap=_py_list(F.col("only_snap")), n_only_log=F.size("only_log"), only_log=_py_list(F.col("only_log")),
        n_changed=F.size("changed"), changed=_py_list(F.col("changed"))))
    return dup.unionByName(unknown).unionByName(mismatch)


# ---- 7. completeness, coverage, anomalies ----------------------------------------------------------------------
def incomplete_ranges(snaps: DataFrame, t: DataFrame, last: DataFrame, gaps: DataFrame,
                      spanning_ends: DataFrame) -> DataFrame:
    """Where ACLs nobody recorded could have been live (see `replay.kafka.replayer`), as (cluster_id, start, end).
    A remove inside a hole takes effect only at the End of its transaction when that End lies after the hole, so
    such Ends (`spanning_ends`) bound the stretch like the holes do."""
    segs = (snaps.select("cluster_id", "idx", F.col("q").alias("_q"))
            .withColumn("_p", F.coalesce(F.lag("_q").over(Window.partitionBy("cluster_id").orderBy("idx")),
                                         F.lit(-1))))
    stray = (t.where((F.col("op") == "REMOVE") & ~F.col("_was_live") & F.col("_p_op").isNull()
                     & F.col("_wmin").isNotNull())
             .groupBy("cluster_id", F.col("sidx").alias("idx")).agg(F.max("pos").alias("_stray")))
    ends = with_unknown_bounds(segs, spanning_ends).select(*segs.columns, F.col("_wmax").alias("_ends"))
    closed = (with_unknown_bounds(ends, gaps)
              .join(stray, ["cluster_id", "idx"], "left")
              .withColumn("_end", F.greatest(F.coalesce("_wmax", "_wmin"), F.coalesce("_stray", F.lit(-1)),
                                             F.coalesce("_ends", F.lit(-1))) - 1)
              .where(F.col("_wmin").isNotNull() & (F.col("_end") >= F.col("_wmin")))
              .select("cluster_id", F.col("_wmin").alias("start_offset"), F.col("_end").alias("end_offset")))
    trailing = (last.join(snaps.groupBy("cluster_id").agg(F.max("q").alias("_p")), "cluster_id", "left")
                .select("cluster_id", F.coalesce("_p", F.lit(-1)).alias("_p"), F.col("last_offset").alias("_q")))
    trailing = (with_unknown_bounds(trailing, gaps)
                .where(F.col("_wmin").isNotNull())
                .select("cluster_id", F.col("_wmin").alias("start_offset"), F.col("_q").alias("end_offset")))
    return closed.unionByName(trailing)


def coverage_frame(ranges: DataFrame, snaps: DataFrame, incomplete: DataFrame) -> DataFrame:
    """Log runs, snapshot-only points, the missing stretches between them, and the incomplete stretches."""
    log = ranges.select("cluster_id", "start_offset", "end_offset", F.lit("log").alias("kind"),
                        F.lit(None).cast("string").alias("source"))
    points = snaps.select("cluster_id", F.col("q").alias("at"), F.col("source_file").alias("source"))
    runs = ranges.select(F.col("cluster_id").alias("_rc"), F.col("start_offset").alias("_rs"),
                         F.col("end_offset").alias("_re"))
    snap_only = (points.join(runs, (points.cluster_id == runs._rc) & (points.at >= runs._rs)
                             & (points.at <= runs._re), "left_anti")
                 .select("cluster_id", F.col("at").alias("start_offset"), F.col("at").alias("end_offset"),
                         F.lit("snapshot").alias("kind"), "source"))
    incomplete_rows = incomplete.select("cluster_id", "start_offset", "end_offset", F.lit("incomplete").alias("kind"),
                                        F.lit(None).cast("string").alias("source"))
    return with_missing(log.unionByName(snap_only)).unionByName(incomplete_rows)


def gap_anomalies(coverage: DataFrame, snaps: DataFrame) -> DataFrame:
    """One `gap` per missing stretch, saying whether a later snapshot bridges it (as the reference says it)."""
    missing = coverage.where(F.col("kind") == "missing")
    pts = snaps.select(F.col("cluster_id").alias("_c"), "q")
    first_after = (missing.join(pts, (missing.cluster_id == pts._c) & (pts.q > missing.end_offset), "left")
                   .groupBy("cluster_id", "start_offset", "end_offset").agg(F.min("q").alias("_bridge")))
    tail = F.when(F.col("_bridge").isNotNull(), filled(msg.GAP_BRIDGED, bridge="_bridge")).otherwise(
        filled(msg.GAP_NOT_BRIDGED))
    return _anomaly(first_after, ProblemKind.GAP, "start_offset", None, None,
                    filled(msg.GAP, start="start_offset", end="end_offset", tail=tail))


def offset_times(resolved: DataFrame, ranges: DataFrame, snaps: DataFrame,
                 keep: Keep = unstaged) -> DataFrame:
    """The time index: per batch its last offset (when that offset is in the resolved log) and append time; per
    snapshot its last contained offset and header time; the greatest time where several meet.

    Every row carries its batch's last offset and append time, so a row at its batch's last offset is that batch's
    entry as it is. Nearly every entry is such a row, alone at its offset: it is written as it is, with no shuffle
    (grouping every entry by offset: at 2M records, 19-21 s of task time over three replays against 15 s now).
    The other entries are few and kept (`keep`, so that the join below knows how few): the snapshots', and those of
    batches whose last record did not win its offset from the same copy (it lost its offset, lay past the high
    watermark, was truncated, or another copy won there) when that offset is in the log's runs (`ranges`). Only
    the rows at their offsets meet them in a group."""
    at_end = F.col("offset") == F.col("batch_last_offset")
    own = resolved.where(at_end).select("cluster_id", "offset", F.col("append_time").alias("time"))
    # rows of batches of more than one offset (a one-offset batch's row is at its end): per copy of a batch,
    # whether its last record is in the resolved log from that copy, in which case `own` holds its entry
    one_offset = F.coalesce(at_end & (F.col("batch_base_offset") == F.col("batch_last_offset")), F.lit(False))
    cut = (resolved.where(~one_offset & F.col("batch_last_offset").isNotNull())
           .groupBy("cluster_id", "source_file", "file_position", "batch_last_offset", "append_time")
           .agg(F.max(F.coalesce(at_end, F.lit(False))).alias("_ended"))
           .where(~F.col("_ended"))
           .select("cluster_id", F.col("batch_last_offset").alias("offset"), F.col("append_time").alias("time")))
    runs = F.broadcast(ranges.select(F.col("cluster_id").alias("_rc"), F.col("start_offset").alias("_rs"),
                                     F.col("end_offset").alias("_re")))
    cut = cut.join(runs, (F.col("cluster_id") == F.col("_rc")) & F.col("offset").between(F.col("_rs"), F.col("_re")),
                   "left_semi")
    points = snaps.where(F.col("snap_time").isNotNull()).select("cluster_id", F.col("q").alias("offset"),
                                                               F.col("snap_time").alias("time"))
    others = keep(cut.unionByName(points), "time_index_others")
    key = ["cluster_id", "offset"]
    met = others.select(*key).distinct()
    return (own.join(met, key, "left_anti")
            .unionByName(own.join(met, key, "left_semi").unionByName(others)
                         .groupBy(*key).agg(F.max("time").alias("time"))))


def replay_records(records: DataFrame, quarantine: DataFrame, high_watermark: int | None = None,
                   resume: DataFrame | None = None, seen: DataFrame | None = None, *, stages: Stages | None = None,
                   span: int | None = None) -> tuple[dict[str, DataFrame], dict[str, DataFrame]]:
    """All replay tables for every cluster in `records` (the bronze rows) and `quarantine`, as DataFrames, and the
    intermediate frames `replay.spark.resume` reads (resolved log, snapshots, gaps, last offsets).

    Frames that several later steps read are written once to `stages` (Delta, removed when the replay ends) and read
    back; without `stages` they stay plans (small inputs and tests only). Running values over a cluster's history
    are computed per offset range (`replay.spark.ordered`), so no step sorts a cluster's whole history in one task;
    `span` (the most log offsets any cluster's rows cover, when the caller knows it) saves a scan to find it.

    A cluster with a row in `resume` is replayed from a suffix: its `records` hold only what lies after the
    snapshot at `resume_offset` (that snapshot included), and `resume` carries the state of the log before it
    (`replay.spark.resume` says which and why); `seen` lists ids observed before it. Rows at or before
    `resume_offset` come out wrong for such a cluster and are the caller's to drop.
    """
    def keep(df: DataFrame, step: str, partition_by: str | None = None) -> DataFrame:
        return df if stages is None else stages.keep(df, step, partition_by)

    size = _bucket_size(records, span)
    records = records.select(*_BRONZE_COLUMNS, F.when(F.col("record_type") == "SNAPSHOT_HEADER",
                                                      F.col("payload_json")).alias("payload_json"))
    quarantine = quarantine.select("cluster_id", "kind", "offset", "source_file", "text_section", "file_position",
                                   "message")
    # Steps that do not need each other's rows are written at the same time (`beside`): on a small log each step is
    # mostly the driver's planning and Spark's scheduling, which overlap.
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="kraft-replay-beside") as beside:
        snapshot_parts = beside.submit(snapshots, records, quarantine, high_watermark, keep)
        resolved, log_anomalies = resolve_log(records, high_watermark, resume, keep)
        ranges = keep(log_ranges(resolved, size), "runs")
        snaps, snap_acls, snap_anomalies = snapshot_parts.result()
        # each cluster's first and last known offset: `last_offset` is what the steps below call `last`
        bounds = (ranges.select("cluster_id", F.col("start_offset").alias("o"))
                  .unionByName(ranges.select("cluster_id", F.col("end_offset").alias("o")))
                  .unionByName(snaps.select("cluster_id", F.col("q").alias("o")))
                  .groupBy("cluster_id").agg(F.min("o").alias("first_offset"), F.max("o").alias("last_offset")))
        last = bounds.select("cluster_id", "last_offset")
        gaps = unknown_gaps(ranges, last)
        if resume is not None:
            gaps = _resumed_gaps(gaps, resume)
        visible, txn_anomalies, spanning_ends = visible_acl_records(resolved, gaps, bounds, resume, size, keep,
                                                                    high_watermark)
        obs = observations(visible, snaps, snap_acls, bounds, size)  # not kept: `transitions`' window reads it
        t = keep(transitions(obs if seen is None else obs.unionByName(_seen_before(obs, seen)), snaps, gaps,
                             spanning_ends, keep), "transitions")
        incomplete = incomplete_ranges(snaps, t, last, gaps, spanning_ends)
        coverage_part = beside.submit(keep, coverage_frame(ranges, snaps, incomplete), "coverage")
        events = keep(number_events(_event_rows(t), size), "events")
        coverage = coverage_part.result()  # log_coverage and the gap anomalies
    history = lifetimes(events, t, last, gaps)
    quarantined = quarantine.drop("text_section")
    anomalies = (log_anomalies.unionByName(snap_anomalies).unionByName(txn_anomalies)
                 .unionByName(acl_anomalies(t, snaps)).unionByName(gap_anomalies(coverage, snaps))
                 .unionByName(quarantined))
    frames = {
        "acl_events": events.withColumnRenamed("rec_off", "record_offset"),
        "acl_history": history,
        "log_coverage": coverage,
        "anomalies": anomalies,
        "offset_times": offset_times(resolved, ranges, snaps, keep),
    }
    return frames, {"resolved": resolved, "snapshots": snaps, "gaps": gaps, "last": last}


def _bucket_size(records: DataFrame, span: int | None) -> int | None:
    """Offsets per range for the running values, or None when every cluster's log fits in one range (then plain
    windows per cluster are cheaper: no per-range summaries to carry)."""
    size = bucket_offsets(records.sparkSession)
    if span is None:
        row = (records.where(F.col("stream") == "log").groupBy("cluster_id")
               .agg((F.max("offset") - F.min("offset")).alias("_span")).agg(F.max("_span")).first())
        span = row[0] if row is not None else None
    return None if span is None or span < size else size


def _resumed_gaps(gaps: DataFrame, resume: DataFrame) -> DataFrame:
    """A suffix's gaps: those after the resume point as they are (the first one clipped to start after it; the
    suffix's own start looks like a hole), and the last gap before it as `gap_end` recalls it."""
    r = resume.select("cluster_id", F.col("resume_offset").alias("_rq"), F.col("gap_end").alias("_rge"))
    after = (gaps.join(r, "cluster_id", "left")
             .where(F.col("_rq").isNull() | (F.col("gap_end") > F.col("_rq")))
             .select("cluster_id", F.greatest("gap_start", F.coalesce(F.col("_rq") + 1, F.lit(0))).alias("gap_start"),
                     "gap_end"))
    before = r.where(F.col("_rge").isNotNull() & (F.col("_rge") <= F.col("_rq"))).select(
        "cluster_id", F.col("_rge").alias("gap_start"), F.col("_rge").alias("gap_end"))
    return after.unionByName(before)


def _seen_before(obs: DataFrame, seen: DataFrame) -> DataFrame:
    """A first observation (op SEEN, before everything) for each id a suffix removes that was observed before the
    suffix: its remove is then not one of an id never seen (which would mark history incomplete)."""
    removed = obs.where(F.col("op") == "REMOVE").select("cluster_id", "acl_id").distinct()
    ids = seen.select("cluster_id", "acl_id").distinct().join(removed, ["cluster_id", "acl_id"], "left_semi")
    return ids.select(
        "cluster_id", "acl_id", *[F.lit(None).cast("string").alias(c) for c in _ACL_FIELDS],
        F.lit(None).cast("string").alias("source_file"), F.lit(None).cast("long").alias("file_position"),
        F.lit(-1).cast("long").alias("rec_off"), F.lit(-1).cast("long").alias("pos"),
        F.lit(None).cast("long").alias("time"), F.lit("SEEN").alias("cause"), F.lit("SEEN").alias("op"),
        F.lit(0).alias("kind"), F.lit(0).alias("sidx"))
