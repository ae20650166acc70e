"""The one pass over the decoded rows that the driver collects (counts, offset ranges, snapshot copies and their
digests: nothing that grows with the log), and what it decides: which snapshot copies repeat one already held.

A snapshot or bootstrap copy whose records equal those of a clean copy the lake or this ingest already holds (the
same snapshot in a later dump, on another node, or as dump-log text) is not stored again; a copy with problems is
always kept.
"""

from __future__ import annotations

import functools
from collections.abc import Mapping
from typing import Any

from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from replay.kafka.model import NOTICE_KINDS
from replay.spark.frames import join_null_safe
from replay.spark.ingest_summary_rows import READ
from replay.spark.ingest_tally import COPY_ID_COLUMNS
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, Lake

# Snapshot and bootstrap rows belong to one copy (a file, or a section of a dump-log text).
COPY_KEY = ("source_file", "text_section")
SNAPSHOT_ID = ("stream", "snapshot_end_offset", "snapshot_epoch")


def summarise(rows: DataFrame) -> list[Any]:
    """One aggregate row per (row type, stream, snapshot, problem kind, copy) of the summary pass's `rows`
    (`ingest_summary_rows.SUMMARY_FIELDS`: each stands for `_n` decoded rows with offsets `_lo` to `_hi`): the only
    thing collected from the data. A copy is a snapshot or bootstrap file (or dump-log text section) for record rows,
    the file (or section) for problems, none for log records; a copy's row carries its digest
    (`_copy_digest_columns`), so which copies are repeats is decided from this one pass (`copies_to_drop`). Rows
    that carry a `cluster_id` (an ingest of many clusters) are summarised per cluster too."""
    by_cluster = ["cluster_id"] if "cluster_id" in rows.columns else []
    is_record_copy = (F.col("row_type") == "R") & (F.col("stream") != "log")
    is_copy = (F.col("row_type") == "Q") | is_record_copy
    h1, h2 = _copy_digest_columns()
    return (
        rows.groupBy(*by_cluster, "row_type", "stream", "snapshot_end_offset", "snapshot_epoch", "kind",
                     *[F.when(is_copy, F.col(c)).alias(c) for c in COPY_KEY])
        .agg(
            F.sum("_n").alias("n"),
            F.min("_lo").alias("min_offset"),
            F.max("_hi").alias("max_offset"),
            F.collect_set(F.when(F.col("row_type") == "I", F.col("source_file"))).alias("ignored"),
            # digests of copies only: log rows are not judged as copies, and theirs cost as much as the rest
            F.sum(F.when(is_record_copy, h1)).alias("_h1"),
            F.sum(F.when(is_record_copy, h2)).alias("_h2"),
        )
        .collect()
    )


def summary_rows(decoded: DataFrame) -> DataFrame:
    """The summary pass's rows of decoded rows already at hand (cached), one each: what the executors send
    (`ingest_summary_rows`) when they decode for the summary (with the cluster, where the rows carry one)."""
    by_cluster = ["cluster_id"] if "cluster_id" in decoded.columns else []
    return decoded.select(*READ, F.lit(1).cast("long").alias("_n"), F.col("offset").alias("_lo"),
                          F.col("offset").alias("_hi"), *by_cluster)


def rows_per_copy(summary: list[Any]) -> dict[tuple[Any, ...], int]:
    """The summary's record rows per copy (`ingest_tally.CopyId`: log rows are one copy, a snapshot or bootstrap
    file or section one each)."""
    out: dict[tuple[Any, ...], int] = {}
    for r in summary:
        if r["row_type"] == "R":
            key = tuple(r[c] for c in COPY_ID_COLUMNS)
            out[key] = out.get(key, 0) + int(r["n"])
    return out


def _copy_digest_columns() -> tuple[Column, Column]:
    """A record's two parts of its copy's digest (summed over the copy): over its offset, hash, epoch and CRC state,
    so two copies with the same records have the same digest in any order, wherever they were read from."""
    item = [F.col("offset"), F.col("content_hash"), F.col("leader_epoch"), F.col("crc_ok")]
    return F.xxhash64(*item).cast("decimal(38,0)"), F.hash(*item).cast("long")


def _copy_digests(rows: DataFrame) -> DataFrame:
    """Per cluster and snapshot or bootstrap copy (`SNAPSHOT_ID` + `COPY_KEY`): its record count and digest."""
    h1, h2 = _copy_digest_columns()
    return rows.groupBy("cluster_id", *SNAPSHOT_ID, *COPY_KEY).agg(
        F.count(F.lit(1)).alias("_n"), F.sum(h1).alias("_h1"), F.sum(h2).alias("_h2"))


def _clean(copies: DataFrame, problems: DataFrame) -> DataFrame:
    """The copies no problem other than a notice names (a copy with one is judged on its own by the replay)."""
    bad = problems.where(~F.col("kind").isin(*sorted(k.value for k in NOTICE_KINDS)))
    return join_null_safe(copies, bad, ["cluster_id", *COPY_KEY], "left_anti")


Copy = tuple[Any, ...]  # (stream, snapshot_end_offset, snapshot_epoch, source_file, text_section)


def copies_to_drop(summaries: Mapping[str, list[Any]], lake: Lake | None) -> dict[str, list[Copy]]:
    """Per cluster (`summaries`: each one's summary rows), the snapshot and bootstrap copies of this ingest not to
    store: those whose exact content the lake (when given) or an earlier copy of this ingest already holds in a
    clean copy of that cluster (the same snapshot in tomorrow's dump, or from another node). A copy with problems is
    always kept, under its own file. What the lake holds is read in one query for all the clusters (a day's dumps
    of a fleet, each repeating snapshots the lake holds, asked once per cluster took about six Spark jobs each)."""
    notices = {k.value for k in NOTICE_KINDS}

    def copy(r: Any) -> Copy:
        return tuple(r[c] for c in (*SNAPSHOT_ID, *COPY_KEY))

    def content(r: Any) -> tuple[Any, ...]:
        return (*(r[c] for c in SNAPSHOT_ID), r["n"], r["_h1"], r["_h2"])

    def first_by_copy_key(r: Any) -> tuple[Any, ...]:  # ascending, nulls first, as the table orders them
        return tuple(x for c in COPY_KEY for x in (r[c] is not None, r[c] or ""))

    drop: dict[str, list[Copy]] = {}
    kept: dict[str, dict[tuple[Any, ...], Any]] = {}
    for cluster, summary in summaries.items():
        bad = {(r["source_file"], r["text_section"]) for r in summary
               if r["row_type"] == "Q" and r["kind"] not in notices}
        clean = [r for r in summary if r["row_type"] == "R" and r["source_file"] is not None
                 and (r["source_file"], r["text_section"]) not in bad]
        drop[cluster], kept[cluster] = [], {}
        for r in sorted(clean, key=first_by_copy_key):
            if content(r) in kept[cluster]:
                drop[cluster].append(copy(r))
            else:
                kept[cluster][content(r)] = r
    asked = {c: k for c, k in kept.items() if k}
    if lake is None or not asked or not lake.exists(METADATA_RECORDS):
        return drop

    def any_of(columns: list[Column]) -> Column:
        return functools.reduce(lambda a, b: a | b, columns)

    def same(ids: tuple[Any, ...]) -> Column:
        return functools.reduce(lambda a, b: a & b,
                                [F.col(c).eqNullSafe(F.lit(v)) for c, v in zip(SNAPSHOT_ID, ids, strict=True)])

    wanted = any_of([(F.col("cluster_id") == cluster) & any_of([same(i) for i in sorted(
        {key[:3] for key in copies}, key=repr)]) for cluster, copies in sorted(asked.items())])
    clusters = F.col("cluster_id").isin(sorted(asked))
    digests = _copy_digests(lake.read(METADATA_RECORDS).where(clusters & (F.col("stream") != "log") & wanted))
    if lake.exists(QUARANTINE):
        digests = _clean(digests, lake.read(QUARANTINE).where(clusters))
    held: dict[str, set[tuple[Any, ...]]] = {}
    for d in digests.select("cluster_id", *SNAPSHOT_ID, "_n", "_h1", "_h2").distinct().collect():
        held.setdefault(d["cluster_id"], set()).add((*(d[c] for c in SNAPSHOT_ID), d["_n"], d["_h1"], d["_h2"]))
    for cluster, copies in asked.items():
        drop[cluster] += [copy(r) for key, r in copies.items() if key in held.get(cluster, set())]
    return drop
