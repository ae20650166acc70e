"""Ingest brokers' authorizer logs into the lake's `access_events` table (issue 17 item 1): what really happened,
beside what the ACLs allowed.

    report = ingest_access_logs(spark, ["/logs/broker-1", "dbfs:/logs/broker-2/kafka-authorizer.log.gz"],
                                cluster="prod-a", lake=lake, zone="Europe/Berlin")

Every file under the paths is read on the executors (`access_decode`: plain or gzip, Kafka's authorizer lines and
Confluent's audit events; lines that are not decisions are passed over). One row per logged decision goes to
`access_events`, one row per line that looks like a decision and does not read to `quarantine` (kind
`unreadable_log_line`, with file, line and byte position; the replay does not read these). Idempotent like the dump
ingest: a row is inserted only where the table does not hold its key (broker, line number and text: a rotated,
renamed or compressed copy of a log is the same rows), so ingesting a log again commits nothing.
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import BinaryType, DataType, IntegerType, LongType, StringType, StructField, StructType

from replay import progress as progress_ui
from replay.kafka.authorizer_log import parse_zone
from replay.spark.access_decode import LOG_FIELDS, make_log_content_reader, make_log_reader
from replay.spark.ingest import persist_decoded
from replay.spark.ingest_decode import PlannedFile
from replay.spark.ingest_plan import choose_opener, input_roots, list_inputs
from replay.spark.ingest_report import IngestError, StrictIngestError
from replay.spark.ingest_write import insert_new, own_session
from replay.spark.session import step
from replay.spark.tables import (
    ACCESS_EVENTS,
    LOG_SOURCE_KIND,
    QUARANTINE,
    SCHEMAS,
    UNREADABLE_LOG_LINE,
    Lake,
    sql_string,
)

_SPARK_TYPES: dict[Any, DataType] = {pa.string(): StringType(), pa.int64(): LongType(), pa.int32(): IntegerType(),
                                     pa.binary(): BinaryType()}
LOG_ROWS_SCHEMA = StructType([StructField(n, _SPARK_TYPES[t], True) for n, t in LOG_FIELDS])


@dataclass
class AccessIngestReport:
    """What one ingest of authorizer logs read and wrote (`*_new`: rows the tables did not hold before)."""

    ingest_id: str
    cluster_id: str
    lake: str
    files: list[str] = field(default_factory=list)
    bytes: int = 0
    decisions: int = 0
    decisions_new: int = 0
    by_decision: dict[str, int] = field(default_factory=dict)
    brokers: list[str] = field(default_factory=list)
    first_time: int | None = None
    last_time: int | None = None
    problems: int = 0
    problems_new: int = 0
    seconds: float = 0.0

    def lines(self) -> list[str]:
        from replay.kafka.times import format_time

        kinds = ", ".join(f"{v:,} {k.lower()}" for k, v in sorted(self.by_decision.items())) or "none"
        span = (f", logged {format_time(self.first_time)} .. {format_time(self.last_time)}"
                if self.first_time is not None and self.last_time is not None else "")
        out = [f"access-log ingest {self.ingest_id} of cluster {self.cluster_id!r} into {self.lake}: "
               f"{len(self.files)} file(s), {self.bytes:,} bytes, {self.seconds:.1f} s",
               f"  decisions: {self.decisions:,} read ({kinds}{span}; brokers {', '.join(self.brokers) or 'none'}), "
               f"{self.decisions_new:,} new in {ACCESS_EVENTS}"]
        if self.problems:
            out.append(f"  unreadable decision lines: {self.problems:,}, {self.problems_new:,} new in {QUARANTINE} "
                       f"(kind {UNREADABLE_LOG_LINE})")
        if not self.by_decision.get("ALLOWED") and self.decisions:
            out.append("  note: no allowed request is logged: brokers log them only with kafka.authorizer.logger at "
                       "DEBUG (Kafka ships INFO: denials only)")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)


def plan_logs(spark: SparkSession, paths: Sequence[str]) -> list[PlannedFile]:
    """Every file under `paths` (listed by Spark, names and sizes only), and how executors open each."""
    probes: dict[str, str] = {}
    planned = []
    for uri, length in sorted(set(list_inputs(spark, input_roots(paths)))):
        how, local = choose_opener(uri, probes)
        planned.append(PlannedFile(uri, length, LOG_SOURCE_KIND, open_with=how, local_path=local))
    return planned


def read_logs(spark: SparkSession, plan: list[PlannedFile], broker: str | None = None, zone: str = "UTC"
              ) -> DataFrame:
    """The planned log files read on the executors: `LOG_ROWS_SCHEMA` rows (decisions, and problems with `problem`
    set); nothing runs until an action."""
    parse_zone(zone)  # a zone the executors cannot read fails here, on the driver
    direct = sorted((f for f in plan if f.open_with != "spark"), key=lambda f: -f.length)
    via_spark = {f.uri: f for f in plan if f.open_with == "spark"}
    frames: list[DataFrame] = []
    if direct:
        parts = min(len(direct), 4096)
        frames.append(spark.range(0, parts, 1, parts).mapInArrow(make_log_reader(direct, parts, broker, zone),
                                                                 LOG_ROWS_SCHEMA))
    if via_spark:
        content = spark.read.format("binaryFile").load(list(via_spark)).select("path", "content")
        frames.append(content.mapInArrow(make_log_content_reader(via_spark, broker, zone), LOG_ROWS_SCHEMA))
    if not frames:
        return spark.createDataFrame([], LOG_ROWS_SCHEMA)
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


def access_rows(rows: DataFrame, cluster: str, ingest_id: str | None = None) -> DataFrame:
    """The decisions of `read_logs` rows as `access_events` rows."""
    return rows.where(F.col("problem").isNull()).select(
        *[F.lit(cluster).alias(f.name) if f.name == "cluster_id" else
          F.lit(ingest_id).cast("string").alias(f.name) if f.name == "ingest_id" else
          F.col(f.name).cast(f.dataType) for f in SCHEMAS[ACCESS_EVENTS].fields])


def problem_rows(rows: DataFrame, cluster: str, ingest_id: str | None = None) -> DataFrame:
    """The unreadable lines of `read_logs` rows as `quarantine` rows."""
    values = {"cluster_id": F.lit(cluster), "source_kind": F.lit(LOG_SOURCE_KIND), "kind": F.lit(UNREADABLE_LOG_LINE),
              "message": F.col("problem"), "content_hash": F.col("event_key"), "ingest_id": F.lit(ingest_id)}
    return rows.where(F.col("problem").isNotNull()).select(
        *[values.get(f.name, F.col(f.name) if f.name in LOG_ROWS_SCHEMA.fieldNames() else F.lit(None))
          .cast(f.dataType).alias(f.name) for f in SCHEMAS[QUARANTINE].fields])


def ingest_access_logs(spark: SparkSession, paths: str | Sequence[str], cluster: str, lake: Lake | str | None = None,
                       broker: str | None = None, zone: str = "UTC", strict: bool = False, progress: bool = True,
                       ) -> AccessIngestReport:
    """Read the authorizer logs under `paths` into `lake`'s access_events (and quarantine) for `cluster` (module
    docstring). `broker`: the broker every file belongs to (default: each file's directory name); `zone`: the zone
    of log dates without one (the brokers' JVM zone); `strict`: an unreadable decision line raises
    `StrictIngestError` and nothing is written."""
    started = time.monotonic()
    lake = lake if isinstance(lake, Lake) else Lake(spark, lake)
    spark = own_session(spark)
    path_list = [paths] if isinstance(paths, str) else [str(p) for p in paths]
    if not path_list:
        raise IngestError("no log paths given")
    report = AccessIngestReport(uuid.uuid4().hex, cluster, lake.location)
    progress_ui.say(f"access-log ingest {report.ingest_id}: listing {', '.join(path_list)}", progress)
    plan = plan_logs(spark, path_list)
    if not plan:
        raise IngestError(f"no files under {', '.join(path_list)}")
    report.files, report.bytes = [f.uri for f in plan], sum(f.length for f in plan)
    progress_ui.say(f"reading {len(plan)} log file(s), {report.bytes:,} bytes, on the executors", progress)
    rows = read_logs(spark, plan, broker, zone)
    cached = persist_decoded(rows, report.bytes)  # read once: the summary, then the writes
    try:
        return _summarise_and_write(spark, lake, rows, report, cluster, strict, progress, started)
    finally:
        if cached:
            with contextlib.suppress(Exception):
                rows.unpersist()


def _summarise_and_write(spark: SparkSession, lake: Lake, rows: DataFrame, report: AccessIngestReport, cluster: str,
                         strict: bool, progress: bool, started: float) -> AccessIngestReport:
    with step(spark, "access ingest: read"):
        summary = rows.groupBy(F.col("problem").isNotNull().alias("bad"), "decision").agg(
            F.count(F.lit(1)).alias("n"), F.min("time").alias("t0"), F.max("time").alias("t1"),
            F.collect_set("broker").alias("brokers")).collect()
    for r in summary:
        if r["bad"]:
            report.problems += r["n"]
            continue
        report.decisions += r["n"]
        report.by_decision[r["decision"]] = r["n"]
        report.first_time = min(x for x in (report.first_time, r["t0"]) if x is not None) if r["t0"] is not None \
            else report.first_time
        report.last_time = max(x for x in (report.last_time, r["t1"]) if x is not None) if r["t1"] is not None \
            else report.last_time
    report.brokers = sorted({b for r in summary if not r["bad"] for b in r["brokers"]})
    if strict and report.problems:
        first = (rows.where(F.col("problem").isNotNull()).select("source_file", "line", "file_position", "problem")
                 .orderBy("source_file", "line").limit(10).collect())
        described = [f"{r['source_file']}, line {r['line']}, byte {r['file_position']}: {r['problem']}" for r in first]
        raise StrictIngestError(f"strict ingest refused: {report.problems} unreadable decision line(s) in the logs; "
                                "nothing was written.\n" + "\n".join("  " + d for d in described),
                                {UNREADABLE_LOG_LINE: report.problems}, described)
    meta = json.dumps({"app": "kraft-acl-replay", "action": "access-log ingest", "cluster_id": cluster,
                       "ingest_id": report.ingest_id, "file_count": len(report.files), "files": report.files[:200]})
    same = f"t.cluster_id = {sql_string(cluster)} AND t.cluster_id = s.cluster_id"
    if report.decisions:
        lake.ensure(ACCESS_EVENTS)
        progress_ui.say(f"writing {ACCESS_EVENTS} ({report.decisions:,} decisions read)", progress)
        with step(spark, f"access ingest: write {ACCESS_EVENTS}"):
            report.decisions_new = insert_new(spark, lake, ACCESS_EVENTS, access_rows(rows, cluster, report.ingest_id),
                                              f"{same} AND t.event_key = s.event_key", meta)
    if report.problems:
        lake.ensure(QUARANTINE)
        with step(spark, f"access ingest: write {QUARANTINE}"):
            report.problems_new = insert_new(spark, lake, QUARANTINE, problem_rows(rows, cluster, report.ingest_id),
                                             f"{same} AND t.content_hash = s.content_hash", meta)
    report.seconds = time.monotonic() - started
    return report
