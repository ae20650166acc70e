"""The ingest's writes: its rows into `metadata_records` and `quarantine`, one Delta commit per table whose
`userMetadata` names the cluster, the ingest, the files and the offset range (an ingest of many clusters at once: each
of them).

Idempotent: a row is inserted only where the table does not hold its key (`RECORD_KEY`; for a problem, its content
hash), so re-ingesting what the lake holds makes no commit at all. `metadata_records` is written first: a crash
between the two commits leaves it ahead of `quarantine`, and rerunning the ingest completes it. A write that loses
a commit race with a concurrent ingest of the same cluster is retried; ingests of different clusters write
different `cluster_id` partitions and do not conflict.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import logging
from collections.abc import Callable, Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.sql.window import Window

from replay.spark.frames import join_null_safe, observed
from replay.spark.ingest_report import IngestReport
from replay.spark.ingest_summary import COPY_KEY, SNAPSHOT_ID, Copy, copies_to_drop
from replay.spark.merge import MERGE_ATTEMPTS, is_conflict, merge
from replay.spark.session import CONCURRENT_WRITERS, NO_DICTIONARY
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, SCHEMAS, Lake, sql_string

MAX_NAMED_FILES = 200  # files named in a commit's userMetadata (the count is always there)

# The key of a metadata_records row: `stream` is log, snapshot or bootstrap, `content_hash` the hash of offset, key
# and value (`ingest_rows.record_hash`). The same log offset seen in two dumps with the same bytes, epoch and CRC
# state is one row (the first seen keeps its file and position); anything else at one offset is kept for the replay
# to choose. Snapshot and bootstrap rows also carry their copy (`COPY_KEY`): a snapshot is judged whole, copy by copy.
RECORD_KEY = ("cluster_id", "stream", "snapshot_end_offset", "snapshot_epoch", "offset", "content_hash",
              "leader_epoch", "crc_ok")
_NULLABLE_KEY = ("snapshot_end_offset", "snapshot_epoch", "leader_epoch", "crc_ok")

log = logging.getLogger("replay.spark.ingest")  # by name: the ingest's messages come from one logger


def _ingest_doc(report: IngestReport, rows: int, named_files: int) -> dict[str, Any]:
    """What a commit's userMetadata says of one cluster's ingest: its ids, files and what they cover."""
    files = report.files
    doc: dict[str, Any] = {
        "cluster_id": report.cluster_id,
        "ingest_id": report.ingest_id,
        "file_count": len(files),
        "files": files[:named_files],
        "bytes": report.bytes,
        "log_offsets": list(report.log_offsets) if report.log_offsets else None,
        "snapshots": [list(s) for s in report.snapshots[:named_files]],
        "rows_in_input": rows,
    }
    if len(files) > named_files:
        doc["files_truncated"] = len(files) - named_files
    return doc


def _user_metadata(reports: Sequence[IngestReport], table: str, rows: dict[str, int]) -> str:
    """A commit's userMetadata: one cluster's ingest in the top-level fields; a commit of many clusters (a watch's
    micro-batch) lists them in `cluster_ids` and each one's ingest in `ingests`, naming `MAX_NAMED_FILES` files in
    all."""
    head: dict[str, Any] = {"app": "kraft-acl-replay", "action": "ingest", "table": table}
    if len(reports) == 1:
        doc = {**head, **_ingest_doc(reports[0], rows[reports[0].cluster_id], MAX_NAMED_FILES)}
    else:
        each = max(1, MAX_NAMED_FILES // len(reports))
        doc = {**head, "cluster_ids": [r.cluster_id for r in reports],
               "ingests": [_ingest_doc(r, rows[r.cluster_id], each) for r in reports]}
    return json.dumps(doc, separators=(",", ":"))


def insert_new(spark: SparkSession, lake: Lake, table: str, source: DataFrame, condition: str, metadata: str) -> int:
    """Insert the source rows the table does not match; return how many were inserted (0: Delta made no commit).
    `ingest` runs in a session of its own (the commit's userMetadata is a session conf: `replay.spark.merge`), so
    concurrent ingests never see each other's value; a conflict with another ingest of the same cluster is retried
    (the MERGE is idempotent)."""
    row = merge(spark, lake, table, source, condition, "WHEN NOT MATCHED THEN INSERT *", metadata)
    return int(row.get("num_inserted_rows") or row.get("num_affected_rows") or 0)


ROWS_PER_FILE = 250_000  # 15-20 MiB of Parquet per file; a task's sort of that many rows fits a 2g driver unspilled


def own_session(spark: SparkSession) -> SparkSession:
    """A session sharing `spark`'s context and cache but with its own SQL conf and temp views (Spark Connect: the
    same session)."""
    try:
        own = spark.newSession()
    except Exception:
        own = spark
    with contextlib.suppress(Exception):  # MERGE would otherwise funnel a cluster's rows (one partition) into one task
        own.conf.set("spark.databricks.delta.merge.repartitionBeforeWrite.enabled", "false")
    for key, value in {**CONCURRENT_WRITERS, **NO_DICTIONARY}.items():  # a session we did not start (Databricks)
        with contextlib.suppress(Exception):                               # too: see the constants
            own.conf.set(key, value)
    return own


@dataclasses.dataclass
class ClusterRows:
    """One cluster's part of an ingest's write: its report, its summary (`ingest_summary`), the (stream, end
    offset, epoch) of its snapshot and bootstrap rows, and whether no two of its record rows can share a key
    (`ingest_tally.no_repeated_keys`)."""

    report: IngestReport
    summary: list[Any] = dataclasses.field(default_factory=list)
    copies: set[tuple[str | None, int | None, int | None]] = dataclasses.field(default_factory=set)
    unique: bool = False

    @property
    def cluster(self) -> str:
        return self.report.cluster_id


# The decoded rows (`cluster_id` among them) of the clusters named.
RowsOf = Callable[[Sequence[str]], DataFrame]


def ingest_ids(parts: Sequence[ClusterRows]) -> Column:
    """Each row's ingest id, by its cluster."""
    if len(parts) == 1:
        return F.lit(parts[0].report.ingest_id)
    pairs = [F.lit(x) for p in parts for x in (p.cluster, p.report.ingest_id)]
    return F.element_at(F.create_map(*pairs), F.col("cluster_id"))


def records_source(decoded: DataFrame, parts: Sequence[ClusterRows], drop: list[tuple[str, Copy]],
                   unique: bool = False) -> DataFrame:
    """The metadata_records rows of these clusters' ingest (`decoded`: theirs, with `cluster_id`), one per key (the
    first by file and position), without the snapshot copies in `drop` (cluster, `copies_to_drop`'s copy).

    `unique`: no two rows can share a key (`ingest_tally.no_repeated_keys`), and they are written as the decoding
    tasks made them: a task's rows of a cluster are one file, a piece of one, or small files of one kind in log
    order (`ingest_plan.pack_tasks`), so each written file covers one stretch of the log. Otherwise they are
    range-partitioned by cluster, stream and offset into parts of about `ROWS_PER_FILE` rows (the records decoded
    bound the rows), with the same property, and the duplicate check runs inside those parts (its key holds them):
    the rows are shuffled once."""
    cols = SCHEMAS[METADATA_RECORDS].fieldNames()
    rows = decoded.filter(F.col("row_type") == "R").withColumns({
        "ingest_id": ingest_ids(parts),
        "append_ts": F.timestamp_millis(F.col("append_time")),
    })
    if drop:
        key = ["cluster_id", *SNAPSHOT_ID, *COPY_KEY]
        schema = StructType([decoded.schema[c] for c in key])
        # one row per copy: broadcast, so that the records are not shuffled to meet it
        dropped = F.broadcast(decoded.sparkSession.createDataFrame([(c, *copy) for c, copy in drop], schema))
        rows = join_null_safe(rows, dropped, key, "left_anti")
    if unique:
        return rows.select(*cols)
    hint = sum(p.report.records for p in parts)
    rows = rows.repartitionByRange(max(1, -(-hint // ROWS_PER_FILE)), "cluster_id", "stream", "offset")
    copy = [F.when(F.col("stream") != "log", F.col(c)).alias("_copy_" + c) for c in COPY_KEY]
    first = Window.partitionBy(*RECORD_KEY, *[f"_copy_{c}" for c in COPY_KEY]).orderBy(
        "source_file", "file_position", "record_index")
    rows = rows.select("*", *copy)
    return rows.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).select(*cols)


def quarantine_source(decoded: DataFrame, parts: Sequence[ClusterRows]) -> DataFrame:
    cols = SCHEMAS[QUARANTINE].fieldNames()
    rows = decoded.filter(F.col("row_type") == "Q").withColumn("ingest_id", ingest_ids(parts))
    return rows.dropDuplicates(["cluster_id", "content_hash"]).select(*cols)


def _record_condition(parts: Sequence[ClusterRows]) -> str:
    """The MERGE's match: the record key, and literal bounds on the stored rows (each cluster's log records in its
    source's offset range, or snapshot rows), so Delta reads only the files that can hold a match: an ingest past
    what the lake holds reads none of them and is in effect an append. It stays a MERGE because a blind append never
    conflicts: two ingests of one dump at once would both land, where MERGE's conflict check makes the second find
    the first's rows on retry."""
    def bounds(p: ClusterRows) -> str:
        offsets = p.report.log_offsets
        in_range = "FALSE" if offsets is None else f"t.offset BETWEEN {int(offsets[0])} AND {int(offsets[1])}"
        return f"((t.stream = 'log' AND {in_range}) OR t.stream <> 'log')"

    if len(parts) == 1:
        head = [f"t.cluster_id = {sql_string(parts[0].cluster)}", "t.cluster_id = s.cluster_id", bounds(parts[0])]
    else:
        named = ", ".join(sql_string(p.cluster) for p in parts)
        each = " OR ".join(f"(t.cluster_id = {sql_string(p.cluster)} AND {bounds(p)})" for p in parts)
        head = [f"t.cluster_id IN ({named})", "t.cluster_id = s.cluster_id", f"({each})"]
    for col in RECORD_KEY[1:]:
        op = "<=>" if col in _NULLABLE_KEY else "="
        head.append(f"t.`{col}` {op} s.`{col}`")
    same_copy = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in COPY_KEY)
    head.append(f"(s.stream = 'log' OR ({same_copy}))")
    return " AND ".join(head)


def _collision_region(cluster: str, log_offsets: tuple[int, int] | None,
                      copies: set[tuple[str | None, int | None, int | None]]) -> str | None:
    """A predicate on metadata_records for the rows this ingest's records could be equal to: the cluster's log rows
    in the ingest's offset range and its rows of the same snapshots (any copy). None when a record row has no
    stream (a dump-log text line outside any section), which the region cannot name."""

    def literal(v: int | None) -> str:
        return "NULL" if v is None else str(int(v))

    parts = []
    if log_offsets is not None:
        parts.append(f"(stream = 'log' AND offset BETWEEN {int(log_offsets[0])} AND {int(log_offsets[1])})")
    for stream, end, epoch in sorted(copies, key=repr):
        if stream is None:
            return None
        parts.append(f"(stream = {sql_string(stream)} AND snapshot_end_offset <=> {literal(end)} "
                     f"AND snapshot_epoch <=> {literal(epoch)})")
    if not parts:
        return None
    return f"cluster_id = {sql_string(cluster)} AND ({' OR '.join(parts)})"


def write_records(spark: SparkSession, lake: Lake, parts: Sequence[ClusterRows], rows_of: RowsOf) -> dict[str, int]:
    """Write the metadata_records rows of an ingest's clusters; how many were new, per cluster.

    Append first: the clusters for which the lake holds none of the rows in the region theirs could collide with (a
    first ingest, a later dump past the stored end, new snapshots) are written together without a MERGE, as one
    `replaceWhere` of those empty regions: one write of the rows, no join with the table, and still one commit that
    conflicts with a concurrent ingest writing into the same region (a blind append would not), so the loser
    retries and then finds the winner's rows through the MERGE. The other clusters (overlapping dumps) are one
    MERGE that inserts what the table does not match."""
    new: dict[str, int] = {}
    waiting = list(parts)
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        regions = {p.cluster: r for p in waiting
                   if (r := _collision_region(p.cluster, p.report.log_offsets, p.copies)) is not None}
        held = _clusters_holding_rows(lake, regions)
        appended = [p for p in waiting if p.cluster in regions and p.cluster not in held]
        if not appended:
            break
        metadata = _user_metadata([p.report for p in appended], METADATA_RECORDS,
                                  {p.cluster: p.report.records for p in appended})
        drop = _dropped(appended, None)
        source = records_source(rows_of([p.cluster for p in appended]), appended, drop,
                                unique=all(p.unique for p in appended))
        counts = Observation(f"rows of {METADATA_RECORDS}")
        source = source.observe(counts, *[F.count_if(F.col("cluster_id") == p.cluster).alias(f"c{i}")
                                          for i, p in enumerate(appended)])
        try:
            lake.write(METADATA_RECORDS, source, metadata,
                       replace_where=" OR ".join(f"({regions[p.cluster]})" for p in appended),
                       max_rows_per_file=ROWS_PER_FILE if all(p.unique for p in appended) else None)
        except Exception as e:
            if not is_conflict(e):
                raise
            log.info("the append into %s conflicted with a concurrent commit (attempt %d); looking again",
                     METADATA_RECORDS, attempt)
            continue
        seen = {p.cluster: observed(counts, f"c{i}") for i, p in enumerate(appended)}
        new.update({c: int(n) for c, n in seen.items()} if None not in seen.values()
                   else _rows_added(lake, METADATA_RECORDS, metadata, [p.report for p in appended]))
        waiting = [p for p in waiting if p.cluster not in new]
        break
    if waiting:
        drop = _dropped(waiting, lake)
        source = records_source(rows_of([p.cluster for p in waiting]), waiting, drop,
                                unique=all(p.unique for p in waiting))
        reports = [p.report for p in waiting]
        added = insert_new(spark, lake, METADATA_RECORDS, source, _record_condition(waiting),
                           _user_metadata(reports, METADATA_RECORDS, {p.cluster: p.report.records for p in waiting}))
        new.update(_per_cluster(lake, METADATA_RECORDS, reports, added))
    return new


def _dropped(parts: Sequence[ClusterRows], lake: Lake | None) -> list[tuple[str, Copy]]:
    """The (cluster, copy) of the snapshot and bootstrap copies not to store (`copies_to_drop`)."""
    found = copies_to_drop({p.cluster: p.summary for p in parts}, lake)
    return [(cluster, c) for cluster, copies in found.items() for c in copies]


def _clusters_holding_rows(lake: Lake, regions: dict[str, str]) -> set[str]:
    """The clusters of `regions` (cluster -> predicate) for which metadata_records holds a row in the region: one
    Spark job for all of them; none when the table was never written (a first ingest into a new lake: reading the
    empty table took two jobs and about 1.5 s)."""
    if not regions or lake.never_written(METADATA_RECORDS):
        return set()
    found = (lake.read(METADATA_RECORDS).where(" OR ".join(f"({r})" for r in regions.values()))
             .select("cluster_id").distinct().collect())
    return {str(r["cluster_id"]) for r in found}


def _rows_added(lake: Lake, table: str, metadata: str, reports: Sequence[IngestReport]) -> dict[str, int]:
    """The rows our commit wrote per cluster, where Spark did not report them while writing (Spark Connect): for
    one cluster its `numOutputRows`, found in the table's recent history by its userMetadata, which names this
    ingest; for many, the rows that carry their ingest ids. Reading them back cost 0.4-1.3 s an ingest."""
    if len(reports) > 1:
        return rows_per_cluster(lake, table, reports)
    ours = (lake.history(table, 50).where(F.col("userMetadata") == metadata)
            .select("operationMetrics").first())
    return {reports[0].cluster_id: 0 if ours is None else int((ours["operationMetrics"] or {}).get("numOutputRows", 0))}


def _per_cluster(lake: Lake, table: str, reports: Sequence[IngestReport], added: int) -> dict[str, int]:
    """A MERGE's inserted rows (`added`) per cluster: counted by their ingest ids when there are several."""
    if len(reports) == 1:
        return {reports[0].cluster_id: added}
    return rows_per_cluster(lake, table, reports) if added else {r.cluster_id: 0 for r in reports}


def rows_per_cluster(lake: Lake, table: str, reports: Sequence[IngestReport]) -> dict[str, int]:
    """How many rows of `table` each report's ingest wrote (its rows carry its ingest id): one Spark job."""
    counts = (lake.read(table)
              .where(F.col("cluster_id").isin([r.cluster_id for r in reports])
                     & F.col("ingest_id").isin([r.ingest_id for r in reports]))
              .groupBy("cluster_id").count().collect())
    found = {str(r["cluster_id"]): int(r["count"]) for r in counts}
    return {r.cluster_id: found.get(r.cluster_id, 0) for r in reports}


def _quarantine_condition(clusters: Sequence[str]) -> str:
    named = ", ".join(sql_string(c) for c in clusters)
    return f"t.cluster_id IN ({named}) AND t.cluster_id = s.cluster_id AND t.content_hash = s.content_hash"


def write_quarantine(spark: SparkSession, lake: Lake, parts: Sequence[ClusterRows], rows_of: RowsOf
                     ) -> dict[str, int]:
    """Write the quarantine rows of an ingest's clusters (problems the table does not hold yet) in one MERGE; how
    many were new, per cluster."""
    reports = [p.report for p in parts]
    source = quarantine_source(rows_of([p.cluster for p in parts]), parts)
    added = insert_new(spark, lake, QUARANTINE, source, _quarantine_condition([p.cluster for p in parts]),
                       _user_metadata(reports, QUARANTINE, {p.cluster: p.report.problems for p in parts}))
    return _per_cluster(lake, QUARANTINE, reports, added)
