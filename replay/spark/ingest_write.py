"""The ingest's writes: its rows into `metadata_records` and `quarantine`, one Delta commit per table whose
`userMetadata` names the cluster, the ingest, the files and the offset range.

Idempotent: a row is inserted only where the table does not hold its key (`RECORD_KEY`; for a problem, its content
hash), so re-ingesting what the lake holds makes no commit at all. `metadata_records` is written first: a crash
between the two commits leaves it ahead of `quarantine`, and rerunning the ingest completes it. A write that loses
a commit race with a concurrent ingest of the same cluster is retried; ingests of different clusters write
different `cluster_id` partitions and do not conflict.
"""

from __future__ import annotations

import contextlib
import json
import logging
import time
import uuid
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType
from pyspark.sql.window import Window

from replay.spark.frames import join_null_safe
from replay.spark.ingest_report import IngestReport
from replay.spark.ingest_summary import COPY_KEY, SNAPSHOT_ID, Copy, copies_to_drop
from replay.spark.session import CONCURRENT_WRITERS, NO_DICTIONARY
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, SCHEMAS, Lake, sql_string

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
MAX_NAMED_FILES = 200  # files named in a commit's userMetadata (the count is always there)

# The key of a metadata_records row: `stream` is log, snapshot or bootstrap, `content_hash` the hash of offset, key
# and value (`ingest_rows.record_hash`). The same log offset seen in two dumps with the same bytes, epoch and CRC
# state is one row (the first seen keeps its file and position); anything else at one offset is kept for the replay
# to choose. Snapshot and bootstrap rows also carry their copy (`COPY_KEY`): a snapshot is judged whole, copy by copy.
RECORD_KEY = ("cluster_id", "stream", "snapshot_end_offset", "snapshot_epoch", "offset", "content_hash",
              "leader_epoch", "crc_ok")
_NULLABLE_KEY = ("snapshot_end_offset", "snapshot_epoch", "leader_epoch", "crc_ok")

log = logging.getLogger("replay.spark.ingest")  # by name: the ingest's messages come from one logger


def _user_metadata(report: IngestReport, table: str, rows: int) -> str:
    files = report.files
    doc: dict[str, Any] = {
        "app": "kraft-acl-replay",
        "action": "ingest",
        "table": table,
        "cluster_id": report.cluster_id,
        "ingest_id": report.ingest_id,
        "file_count": len(files),
        "files": files[:MAX_NAMED_FILES],
        "bytes": report.bytes,
        "log_offsets": list(report.log_offsets) if report.log_offsets else None,
        "snapshots": [list(s) for s in report.snapshots[:MAX_NAMED_FILES]],
        "rows_in_input": rows,
    }
    if len(files) > MAX_NAMED_FILES:
        doc["files_truncated"] = len(files) - MAX_NAMED_FILES
    return json.dumps(doc, separators=(",", ":"))


MERGE_ATTEMPTS = 5


def _is_conflict(error: Exception) -> bool:
    """A Delta optimistic-concurrency conflict (another writer committed first): safe to retry an idempotent MERGE."""
    text = f"{type(error).__name__}: {error}"
    return "Concurrent" in text or "DELTA_CONCURRENT" in text or "MetadataChanged" in text


def insert_new(spark: SparkSession, lake: Lake, table: str, source: DataFrame, condition: str, metadata: str) -> int:
    """Insert the source rows the table does not match; return how many were inserted (0: Delta made no commit).

    The commit's userMetadata comes from the session conf (SQL MERGE has no writer option); `ingest` runs in a
    session of its own so that concurrent ingests never see each other's value. A conflict with a concurrent writer
    (another ingest of the same cluster) is retried: the MERGE is idempotent.
    """
    view = f"kraft_ingest_src_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        previous = spark.conf.get(USER_METADATA_CONF, None)
    except Exception:
        previous = None
    try:
        spark.conf.set(USER_METADATA_CONF, metadata)
    except Exception as e:  # a platform that forbids the conf: write without userMetadata rather than not at all
        log.warning("cannot set %s (%s); the commit will carry no userMetadata", USER_METADATA_CONF, e)
    sql = f"MERGE INTO {lake.table_ref(table)} AS t USING {view} AS s ON {condition} WHEN NOT MATCHED THEN INSERT *"
    try:
        for attempt in range(1, MERGE_ATTEMPTS + 1):
            try:
                result = spark.sql(sql).collect()
                break
            except Exception as e:
                if attempt == MERGE_ATTEMPTS or not _is_conflict(e):
                    raise
                log.info("MERGE into %s conflicted with a concurrent commit (attempt %d); retrying", table, attempt)
                time.sleep(0.5 * attempt)
    finally:
        with contextlib.suppress(Exception):
            if previous is None:
                spark.conf.unset(USER_METADATA_CONF)
            else:
                spark.conf.set(USER_METADATA_CONF, previous)
        spark.catalog.dropTempView(view)
    if not result:
        return 0
    row = result[0].asDict()
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



def records_source(decoded: DataFrame, cluster: str, ingest_id: str, drop: list[Copy], rows_hint: int = 0,
                   unique: bool = False) -> DataFrame:
    """The metadata_records rows of this ingest, one per key (the first by file and position), without the
    snapshot copies in `drop` (`copies_to_drop`).

    `unique`: no two rows can share a key (`ingest_tally.no_repeated_keys`), and they are written as the decoding
    tasks made them: a task's rows are one file, a piece of one, or small files of one kind in log order
    (`ingest_plan.pack_tasks`), so each written file covers one stretch of the log. Otherwise they are
    range-partitioned by stream and offset into parts of about `ROWS_PER_FILE` rows (`rows_hint` bounds the rows),
    with the same property, and the duplicate check runs inside those parts (its key holds stream and offset): the
    rows are shuffled once."""
    cols = SCHEMAS[METADATA_RECORDS].fieldNames()
    rows = decoded.filter(F.col("row_type") == "R").withColumns({
        "cluster_id": F.lit(cluster),
        "ingest_id": F.lit(ingest_id),
        "append_ts": F.timestamp_millis(F.col("append_time")),
    })
    if drop:
        key = [*SNAPSHOT_ID, *COPY_KEY]
        schema = StructType([decoded.schema[c] for c in key])
        # one row per copy: broadcast, so that the records are not shuffled to meet it
        dropped = F.broadcast(decoded.sparkSession.createDataFrame(drop, schema))
        rows = join_null_safe(rows, dropped, key, "left_anti")
    if unique:
        return rows.select(*cols)
    rows = rows.repartitionByRange(max(1, -(-rows_hint // ROWS_PER_FILE)), "stream", "offset")
    copy = [F.when(F.col("stream") != "log", F.col(c)).alias("_copy_" + c) for c in COPY_KEY]
    first = Window.partitionBy(*RECORD_KEY, *[f"_copy_{c}" for c in COPY_KEY]).orderBy(
        "source_file", "file_position", "record_index")
    rows = rows.select("*", *copy)
    return rows.withColumn("_n", F.row_number().over(first)).filter(F.col("_n") == 1).select(*cols)


def quarantine_source(decoded: DataFrame, cluster: str, ingest_id: str) -> DataFrame:
    cols = SCHEMAS[QUARANTINE].fieldNames()
    rows = decoded.filter(F.col("row_type") == "Q").withColumns(
        {"cluster_id": F.lit(cluster), "ingest_id": F.lit(ingest_id)}
    )
    return rows.dropDuplicates(["content_hash"]).select(*cols)


def _record_condition(cluster: str, log_offsets: tuple[int, int] | None = None) -> str:
    """The MERGE's match: the record key, and literal bounds on the stored rows (log records in the source's offset
    range, or snapshot rows), so Delta reads only the files that can hold a match: an ingest past what the lake
    holds reads none of them and is in effect an append. It stays a MERGE because a blind append never conflicts:
    two ingests of one dump at once would both land, where MERGE's conflict check makes the second find the first's
    rows on retry."""
    parts = [f"t.cluster_id = {sql_string(cluster)}", "t.cluster_id = s.cluster_id"]
    in_range = "FALSE" if log_offsets is None else (
        f"t.offset BETWEEN {int(log_offsets[0])} AND {int(log_offsets[1])}")
    parts.append(f"((t.stream = 'log' AND {in_range}) OR t.stream <> 'log')")
    for col in RECORD_KEY[1:]:
        op = "<=>" if col in _NULLABLE_KEY else "="
        parts.append(f"t.`{col}` {op} s.`{col}`")
    same_copy = " AND ".join(f"t.`{c}` <=> s.`{c}`" for c in COPY_KEY)
    parts.append(f"(s.stream = 'log' OR ({same_copy}))")
    return " AND ".join(parts)


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


def write_records(spark: SparkSession, lake: Lake, decoded: DataFrame, report: IngestReport,
                   copies: set[tuple[str | None, int | None, int | None]], summary: list[Any],
                   unique: bool = False) -> int:
    """Write this ingest's metadata_records rows; how many were new.

    Append first: when the lake holds none of the cluster's rows in the region these could collide with (a first
    ingest, a later dump past the stored end, new snapshots), the rows are written without a MERGE, as a
    `replaceWhere` of that empty region: one write of the rows, no join with the table, and still one commit that
    conflicts with a concurrent ingest writing into the same region (a blind append would not), so the loser
    retries and then finds the winner's rows through the MERGE. Otherwise (an overlapping dump) the MERGE inserts
    what the table does not match."""
    cluster, metadata = report.cluster_id, _user_metadata(report, METADATA_RECORDS, report.records)
    region = _collision_region(cluster, report.log_offsets, copies)
    for attempt in range(1, MERGE_ATTEMPTS + 1):
        if region is None or lake.read(METADATA_RECORDS).where(region).limit(1).count() > 0:
            break
        source = records_source(decoded, cluster, report.ingest_id, copies_to_drop(summary, None, cluster),
                                report.records, unique)
        try:
            lake.write(METADATA_RECORDS, source, metadata, replace_where=region,
                       max_rows_per_file=ROWS_PER_FILE if unique else None)
        except Exception as e:
            if not _is_conflict(e):
                raise
            log.info("the append into %s conflicted with a concurrent commit (attempt %d); looking again",
                     METADATA_RECORDS, attempt)
            continue
        return _rows_added(lake, METADATA_RECORDS, metadata)
    return insert_new(spark, lake, METADATA_RECORDS,
                  records_source(decoded, cluster, report.ingest_id, copies_to_drop(summary, lake, cluster),
                                 report.records, unique),
                  _record_condition(cluster, report.log_offsets), metadata)


def _rows_added(lake: Lake, table: str, metadata: str) -> int:
    """The rows our commit wrote (its `numOutputRows`), found in the table's recent history by its userMetadata,
    which names this ingest."""
    ours = (lake.history(table, 50).where(F.col("userMetadata") == metadata)
            .select("operationMetrics").first())
    return 0 if ours is None else int((ours["operationMetrics"] or {}).get("numOutputRows", 0))


def _quarantine_condition(cluster: str) -> str:
    return f"t.cluster_id = {sql_string(cluster)} AND t.cluster_id = s.cluster_id AND t.content_hash = s.content_hash"



def write_quarantine(spark: SparkSession, lake: Lake, decoded: DataFrame, report: IngestReport) -> int:
    """Write this ingest's quarantine rows (problems the table does not hold yet); how many were new."""
    cluster = report.cluster_id
    return insert_new(spark, lake, QUARANTINE, quarantine_source(decoded, cluster, report.ingest_id),
                  _quarantine_condition(cluster), _user_metadata(report, QUARANTINE, report.problems))
