"""Ingest: dumps of `__cluster_metadata` into the lake's `metadata_records` and `quarantine` tables.

    report = ingest(spark, ["/dumps/node1", "dbfs:/dumps/node2/dump.txt"], cluster="prod-a", lake="./lakehouse")
    reports, failed = ingest_clusters(spark, {"prod-a": ["/dumps/a"], "prod-b": ["/dumps/b"]}, lake="./lakehouse")

The steps, each in a module of its own: list and classify the inputs (`ingest_plan`); decode them on the
executors with `mapInArrow` (`ingest_decode` and `ingest_rows`, which need no Spark); check on the driver with
aggregates only (`ingest_summary`, from rows the tasks shrink to what it reads: `ingest_summary_rows`; in strict
mode any problem raises `StrictIngestError` there, before anything is written); write one commit per table
(`ingest_write`), without looking for repeated rows where the decoding tasks' offset tallies prove there are none
(`ingest_tally`). Many clusters are one ingest (`ingest_clusters`, as a watch's micro-batch takes them): their
files are decoded together, each row carrying its cluster, and each table gets one commit for all of them; the
checks, the proof and the report are per cluster. The Python decoder's rows are persisted so that files
are decoded once; the compiled decoder decodes them again for the write. The ingest runs in a session of its own
(`spark.newSession()`): the userMetadata of a SQL MERGE is a session conf, and ingests may run concurrently from
threads of one application.

Progress: while the executors decode, a bar on the driver shows bytes and files of the files *finished* (Spark
accumulators, which reach the driver when a task ends), so a single large file shows as one step; then one status
line per write. `progress=False` or `KRAFT_REPLAY_PROGRESS=0` silences it. The README says the rest.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import os
import re
import time
import uuid
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

import pyarrow as pa
from pyspark import AccumulatorParam, StorageLevel
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import (
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
)

from replay import progress as progress_ui
from replay.kafka import native
from replay.kafka.model import ProblemKind
from replay.spark.ingest_decode import PlannedFile, make_content_decoder, make_stream_decoder
from replay.spark.ingest_held import (
    Hashed,
    Recorded,
    hash_plan,
    hashable,
    read_recorded,
    record,
    to_record,
    trim,
)
from replay.spark.ingest_plan import DEFAULT_SPLIT_BYTES, pack_tasks, plan_files, split_for_cores, split_plan
from replay.spark.ingest_report import IngestError, IngestReport, StrictIngestError
from replay.spark.ingest_rows import DECODED_FIELDS
from replay.spark.ingest_summary import rows_per_copy, summarise, summary_rows
from replay.spark.ingest_summary_rows import SUMMARY_FIELDS
from replay.spark.ingest_tally import no_repeated_keys
from replay.spark.ingest_write import ClusterRows, RowsOf, own_session, write_quarantine, write_records
from replay.spark.session import keeps_active_session, step
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, Lake

# `ingest` raises these errors and returns the report: callers import them from here
__all__ = ["IngestError", "IngestReport", "StrictIngestError", "ingest", "ingest_clusters"]

log = logging.getLogger("replay.spark.ingest")

# The decoded rows as Spark sees them: `DECODED_FIELDS`' Arrow types as Spark types.
_SPARK_TYPES: dict[Any, DataType] = {pa.string(): StringType(), pa.int64(): LongType(), pa.int32(): IntegerType(),
                                     pa.bool_(): BooleanType(), pa.binary(): BinaryType()}
DECODED_SCHEMA = StructType([StructField(n, _SPARK_TYPES[t], True) for n, t in DECODED_FIELDS])
SUMMARY_SCHEMA = StructType([StructField(n, _SPARK_TYPES[t], True) for n, t in SUMMARY_FIELDS])


def decode_plan(spark: SparkSession, plan: list[PlannedFile], counters: Any = None, summary: bool = False
                ) -> DataFrame:
    """A DataFrame of `DECODED_SCHEMA` rows for the planned entries (files or pieces), or with `summary` of the
    summary pass's `SUMMARY_SCHEMA` rows (`ingest_summary_rows`), with a `cluster_id` column when the entries name
    their cluster; nothing runs until an action."""
    schema = SUMMARY_SCHEMA if summary else DECODED_SCHEMA
    if any(f.cluster is not None for f in plan):
        schema = StructType([*schema.fields, StructField("cluster_id", StringType(), True)])
    direct = [f for f in plan if f.open_with != "spark"]
    via_spark: dict[str, list[PlannedFile]] = {}
    for f in plan:
        if f.open_with == "spark":
            via_spark.setdefault(f.uri, []).append(f)
    frames: list[DataFrame] = []
    if direct:
        tasks = pack_tasks(direct, _cores(spark))
        frames.append(spark.range(0, len(tasks), 1, len(tasks)).mapInArrow(
            make_stream_decoder(tasks, counters, summary), schema))
    if via_spark:
        content = spark.read.format("binaryFile").load(list(via_spark)).select("path", "content")
        frames.append(content.mapInArrow(make_content_decoder(via_spark, counters, summary), schema))
    if not frames:
        return spark.createDataFrame([], schema)
    out = frames[0]
    for other in frames[1:]:
        out = out.unionByName(other)
    return out


class _Listed(AccumulatorParam[list[Any]]):
    """An accumulator of a list: the tasks' items, appended."""

    def zero(self, value: list[Any]) -> list[Any]:
        return []

    def addInPlace(self, value1: list[Any], value2: list[Any]) -> list[Any]:
        value1.extend(value2)
        return value1


def _counters(spark: SparkSession) -> Any:
    """(files, bytes, offset tallies) accumulators (`ingest_tally`), or None where there is no SparkContext (Spark
    Connect)."""
    try:
        sc = spark.sparkContext
        return (sc.accumulator(0), sc.accumulator(0), sc.accumulator([], _Listed()))
    except Exception:
        return None


# Task slots assumed where the session cannot say (serverless compute scales its executors with the work)
UNKNOWN_CORES = 8


def _cores(spark: SparkSession) -> int:
    """The task slots decoding can use: Spark's default parallelism; on Spark Connect (no SparkContext) the server's
    `spark.default.parallelism` or the N of a `local[N]` master, else `UNKNOWN_CORES` (a small dump in a few
    pieces costs little; in one task it decodes on one core)."""
    try:
        return max(1, int(spark.sparkContext.defaultParallelism))
    except Exception:
        pass
    try:
        value = spark.conf.get("spark.default.parallelism", None)
        if value:
            return max(1, int(value))
        master = spark.conf.get("spark.master", None) or ""
        m = re.fullmatch(r"local\[(\d+|\*)(?:,\d+)?\]", master)
        if m:
            return (os.cpu_count() or 1) if m.group(1) == "*" else max(1, int(m.group(1)))
    except Exception:
        pass
    return UNKNOWN_CORES


# Decoded rows of inputs larger than this are cached on local disk only: in memory, a 10M-record dump (733 MiB)
# filled a 2 GiB driver's heap while two tasks built their cached blocks (OutOfMemoryError in the decode job).
CACHE_IN_MEMORY_BYTES = 64 * 1024 * 1024


def persist_decoded(df: DataFrame, input_bytes: int) -> bool:
    """Cache the decoded rows, so that the files are decoded once (the summary reads them, then the write)."""
    level = StorageLevel.MEMORY_AND_DISK if input_bytes <= CACHE_IN_MEMORY_BYTES else StorageLevel.DISK_ONLY
    try:
        df.persist(level)
        return True
    except Exception:  # serverless compute has no cache: the write decodes again
        return False


def _check_cluster(cluster: str) -> str:
    text = (cluster or "").strip()
    if not text or any(ord(c) < 32 for c in text):
        raise IngestError(f"invalid cluster id {cluster!r}: give a non-empty name without control characters")
    return text


@keeps_active_session  # its own session (own_session) must not stay the caller's active one
def ingest(
    spark: SparkSession,
    paths: str | Sequence[str],
    cluster: str,
    lake: Lake | str | None = None,
    strict: bool = False,
    progress: bool = True,
    *,
    ingest_id: str | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    show_secrets: bool = False,
    decode_all: bool = False,
) -> IngestReport:
    """Read dumps under `paths` into `lake`'s metadata_records and quarantine tables for `cluster`.

    `paths`: files or directories, local or any URI Spark reads. `lake`: a `Lake`, a directory or `catalog.schema`
    (default `./lakehouse`). `strict`: any problem in the input raises `StrictIngestError` and nothing is written.
    `progress`: a bar of files and bytes decoded, and status lines, on stderr. `split_bytes`: local segment and
    snapshot files larger than this are decoded in pieces of about this size by parallel tasks, smaller pieces when
    cores would otherwise be idle (`split_for_cores`; 0: never split). `show_secrets`: store SCRAM credentials and
    password configs as the log holds them; by default `payload_json` and `raw_value` hold a redaction marker in
    their place (`replay.kafka.secrets`; the content hash is taken over the redacted value, so it still tells copies
    with different secrets apart), and a warning is logged when they are kept. `decode_all`: decode every byte,
    also where the lake holds a file's bytes already (`ingest_held`; after restoring `metadata_records` to an older
    version, say).
    Raises `IngestError` when there is nothing to read. Returns what was read and written.
    """
    path_list = [paths] if isinstance(paths, str | os.PathLike) else [str(p) for p in paths]
    reports, failed = ingest_clusters(spark, {cluster: path_list}, lake, strict, progress,
                                      ingest_ids={cluster: ingest_id} if ingest_id else None,
                                      split_bytes=split_bytes, show_secrets=show_secrets, decode_all=decode_all)
    if cluster in failed:
        raise failed[cluster]
    return reports[cluster]


@dataclasses.dataclass
class _Share:
    """One cluster's part of an ingest: its paths, what it decodes there (`plan`), the files of which the lake holds
    the bytes already, whole or in part (`held`, `ingest_held`), and its report."""

    report: IngestReport
    paths: list[str]
    plan: list[PlannedFile]
    held: list[Hashed] = dataclasses.field(default_factory=list)


@keeps_active_session
def ingest_clusters(
    spark: SparkSession,
    work: Mapping[str, Sequence[str]],
    lake: Lake | str | None = None,
    strict: bool = False,
    progress: bool = True,
    *,
    ingest_ids: Mapping[str, str] | None = None,
    listed: Mapping[str, Sequence[tuple[str, int]]] | None = None,
    split_bytes: int = DEFAULT_SPLIT_BYTES,
    show_secrets: bool = False,
    decode_all: bool = False,
) -> tuple[dict[str, IngestReport], dict[str, Exception]]:
    """Ingest the dumps of many clusters at once (`work`: cluster -> paths, as `ingest` takes them): one decoding
    pass over all their files (a task takes the small files of several clusters; each row carries its cluster), one
    summary, one commit per table (a watch's micro-batch of many small clusters paid a second or more per cluster
    in jobs and commits of its own, and thirty clusters' decoding in tasks of their own took three times as long).
    `listed`: each cluster's files under its paths, listed already (a watch's new files), so not listed again.
    A file whose bytes the lake holds already, whole or in part, is decoded only past them (`ingest_held`), unless
    `decode_all`. Returns each cluster's report, and the error of each cluster that could not be ingested (nothing
    to read, or problems under `strict`): the others are written all the same. An error in a write is raised."""
    started = time.monotonic()
    lake = lake if isinstance(lake, Lake) else Lake(spark, lake)
    spark = own_session(spark)
    shares: dict[str, _Share] = {}
    failed: dict[str, Exception] = {}
    for name, paths in work.items():
        try:
            share = _planned(spark, lake, name, list(paths), strict, (ingest_ids or {}).get(name),
                             None if listed is None else listed.get(name), show_secrets, progress)
        except Exception as e:
            failed[name] = e
            continue
        if any(s.report.cluster_id == share.report.cluster_id for s in shares.values()):
            failed[name] = IngestError(f"cluster {share.report.cluster_id!r} is named twice in one ingest")
            continue
        shares[name] = share
    if not shares:
        return {}, failed
    recorded, hashed = _held(spark, lake, shares, decode_all)
    plan = [f for share in shares.values() for f in share.plan]
    total = sum(f.size for f in plan)
    via_spark = sum(1 for f in plan if f.open_with == "spark")
    held = [h for share in shares.values() for h in share.held]
    progress_ui.say(
        f"decoding {len(plan)} file(s), {total:,} bytes"
        + (f" of {len(shares)} clusters" if len(shares) > 1 else "") + ", on the executors"
        + (f" ({via_spark} read through Spark binaryFile)" if via_spark else "")
        + (f"; {sum(h.held for h in held):,} bytes of {len(held)} file(s) the lake holds already are not decoded"
           if held else ""),
        progress,
    )
    parts = split_plan(plan, split_for_cores(plan, split_bytes, _cores(spark)))
    counters = _counters(spark)
    # The compiled decoder decodes faster than Spark caches its rows: the summary's pass and the write's decode
    # each file again (10M records: 130 s and a 2.9 GiB peak against 145 s and 3.5 GiB with the rows cached on disk)
    decoded = decode_plan(spark, parts, counters)
    cached = not native.enabled() and persist_decoded(decoded, total)
    # The summary's pass reads the cached rows, or decodes into just the rows it needs (`ingest_summary_rows`); the
    # write's decoding (`rows_of`) neither counts nor tallies.
    summarised = summary_rows(decoded) if cached else decode_plan(spark, parts, counters, summary=True)

    def rows_of(clusters: Sequence[str]) -> DataFrame:
        """The decoded rows of some of the clusters: the cached rows, or their files decoded again."""
        if cached:
            return decoded.where(F.col("cluster_id").isin(list(clusters)))
        return decode_plan(spark, [f for f in parts if f.cluster in clusters])

    try:
        summary = _summarise(spark, summarised, counters, total, len(parts), len(plan), progress)
        tallies = None if counters is None else list(counters[2].value)
        written: list[ClusterRows] = []
        for name, share in shares.items():
            cluster = share.report.cluster_id
            try:
                written.append(_checked(share, [r for r in summary if r["cluster_id"] == cluster],
                                        None if tallies is None else [t for c, t in tallies if c == cluster],
                                        rows_of, strict))
            except IngestError as e:
                failed[name] = e
        _write(spark, lake, written, rows_of, progress)
        _record(spark, lake, written, hashed, recorded)
    finally:
        if cached:
            with contextlib.suppress(Exception):
                decoded.unpersist()
    seconds = time.monotonic() - started
    for share in shares.values():
        share.report.seconds = seconds
    return {name: share.report for name, share in shares.items() if name not in failed}, failed


def _held(spark: SparkSession, lake: Lake, shares: Mapping[str, _Share], decode_all: bool
          ) -> tuple[Recorded, list[Hashed]]:
    """Each hashable file's digest and the bytes of it the lake holds (`ingest_held`); each share's plan left
    without what is held (unless `decode_all`)."""
    names = {s.report.cluster_id: [f.name for f in s.plan if hashable(f)] for s in shares.values()}
    with step(spark, "ingest: held files"):
        recorded = read_recorded(lake, names)
    hashed = hash_plan([f for s in shares.values() for f in s.plan], recorded)
    if not decode_all:
        for share in shares.values():
            share.plan, share.held = trim(share.plan, hashed)
    return recorded, hashed


def _record(spark: SparkSession, lake: Lake, written: Sequence[ClusterRows], hashed: Sequence[Hashed],
            recorded: Recorded) -> None:
    """Record the files of the clusters written that were read without a problem (after their rows' commits: a
    crash before this only means they are decoded again next time)."""
    done = {p.cluster: p.report.ingest_id for p in written}
    bad = {str(r["source_file"]) for p in written for r in p.summary if r["row_type"] != "R"}
    files = to_record([h for h in hashed if h.entry.cluster in done], recorded, bad)
    if files:
        with step(spark, "ingest: write ingested_files"):
            record(lake, files, done)


def _planned(spark: SparkSession, lake: Lake, name: str, path_list: list[str], strict: bool, ingest_id: str | None,
             listed: Sequence[tuple[str, int]] | None, show_secrets: bool, progress: bool) -> _Share:
    """One cluster's files, listed (unless `listed`) and classified; `IngestError` when there is nothing to read."""
    cluster = _check_cluster(name)
    if not path_list:
        raise IngestError("no input paths given")
    report = IngestReport(ingest_id or uuid.uuid4().hex, cluster, lake.location, strict)
    progress_ui.say(f"ingest {report.ingest_id}: listing {', '.join(map(str, path_list))}", progress)
    plan, ignored = plan_files(spark, path_list, listed)
    if show_secrets:
        log.warning("ingest %s keeps SCRAM credentials and password configs in the lake %s as the log holds them",
                    report.ingest_id, lake.location)
    plan = [dataclasses.replace(f, show_secrets=show_secrets, cluster=cluster) for f in plan]
    report.ignored = ignored
    if not plan:
        raise IngestError(
            f"no metadata log files under {', '.join(map(str, path_list))}"
            + (f" ({len(ignored)} other file(s) ignored)" if ignored else "")
        )
    return _Share(report, path_list, plan)


def _summarise(spark: SparkSession, rows: DataFrame, counters: Any, total: int, parts: int, files: int,
               progress: bool) -> list[Any]:
    """The summary pass (one Spark job), with a bar of the files decoded."""
    if counters is None:
        with step(spark, "ingest: decode"):
            return summarise(rows)
    unit = "files" if parts == files else "parts"

    def read() -> tuple[float, str]:
        return float(counters[1].value), f"{counters[0].value}/{parts} {unit}"

    with progress_ui.poll(read, total=float(total), desc="decode", unit="B", unit_scale=True,
                          enabled=progress), step(spark, "ingest: decode"):
        return summarise(rows)


def _checked(share: _Share, summary: list[Any], tallies: list[Any] | None,
             rows_of: RowsOf, strict: bool) -> ClusterRows:
    """The cluster's report filled from its summary rows, and what its write needs (`tallies`: its decoding tasks'
    offset tallies; `rows_of`: decoded rows, for the problems strict mode names); `IngestError` when none of its
    files could be read, `StrictIngestError` for problems under `strict` (nothing of it is written)."""
    report = share.report
    sniffed_out: set[str] = set()
    problems: Counter[str] = Counter()
    streams: Counter[str] = Counter()
    log_lo: int | None = None
    log_hi: int | None = None
    snapshots: set[tuple[int, int]] = set()
    copies: set[tuple[str | None, int | None, int | None]] = set()  # (stream, end, epoch) of non-log rows
    for row in summary:
        if row["row_type"] == "I":
            sniffed_out.update(row["ignored"])
        elif row["row_type"] == "Q":
            problems[row["kind"]] += int(row["n"])
        elif row["row_type"] == "R":
            streams[row["stream"] or "log"] += int(row["n"])
            if row["stream"] == "log" and row["min_offset"] is not None:
                log_lo = row["min_offset"] if log_lo is None else min(log_lo, row["min_offset"])
                log_hi = row["max_offset"] if log_hi is None else max(log_hi, row["max_offset"])
            if row["stream"] == "snapshot" and row["snapshot_end_offset"] is not None:
                snapshots.add((int(row["snapshot_end_offset"]), int(row["snapshot_epoch"] or 0)))
            if row["stream"] != "log":
                copies.add((row["stream"], row["snapshot_end_offset"], row["snapshot_epoch"]))
    whole = [h.entry for h in share.held if h.held == h.entry.length]
    report.files = [f.uri for f in [*share.plan, *whole] if f.uri not in sniffed_out]
    report.ignored = report.ignored + sorted(sniffed_out)
    report.bytes = sum(f.length for f in [*share.plan, *whole] if f.uri not in sniffed_out)
    report.held_files = len(share.held)
    report.held_bytes = sum(h.held for h in share.held)
    report.records = sum(streams.values())
    report.records_by_stream = dict(streams)
    report.problems = sum(problems.values())
    report.problems_by_kind = dict(problems)
    report.log_offsets = (int(log_lo), int(log_hi)) if log_lo is not None and log_hi is not None else None
    report.snapshots = sorted(snapshots)

    named = ", ".join(map(str, share.paths))
    if not report.files:
        raise IngestError(f"no metadata log files under {named} ({len(report.ignored)} other file(s) ignored)")
    if not streams and problems.get(ProblemKind.UNREADABLE_FILE.value, 0) >= len(report.files):
        raise IngestError(
            f"the executors could not open any of the {len(report.files)} input file(s); nothing was written. "
            "On a cluster the dumps must be where every node can read them (object storage, HDFS, a shared "
            "mount, or /Volumes on Databricks), not on the driver's local disk")
    if strict and report.problems:
        first = (
            rows_of([report.cluster_id]).filter(F.col("row_type") == "Q")
            .select("source_file", "file_position", "offset", "kind", "message")
            .orderBy("source_file", "file_position", "offset")
            .limit(10)
            .collect()
        )
        described = [
            f"{r['kind']}: {r['source_file']}"
            + (f", byte {r['file_position']}" if r["file_position"] is not None else "")
            + (f", offset {r['offset']}" if r["offset"] is not None else "")
            + f": {r['message']}"
            for r in first
        ]
        kinds = ", ".join(f"{k} {v}" for k, v in sorted(problems.items()))
        raise StrictIngestError(
            f"strict ingest refused: {report.problems} problem(s) in the input ({kinds}); nothing was written.\n"
            + "\n".join("  " + d for d in described),
            dict(problems),
            described,
        )
    # the tallies of the summary's pass (`tallies`, read right after it)
    unique = tallies is not None and no_repeated_keys(tallies, rows_per_copy(summary))
    return ClusterRows(report, summary, copies, unique)


def _write(spark: SparkSession, lake: Lake, parts: list[ClusterRows], rows_of: RowsOf,
           progress: bool) -> None:
    """Each table's rows of every cluster in one commit (`ingest_write`; `rows_of`: the decoded rows of some
    clusters), and the clusters' reports told so."""
    if not parts:
        return
    for table in (METADATA_RECORDS, QUARANTINE):
        lake.ensure(table)
    report = {p.cluster: p.report for p in parts}
    # An empty side is skipped: an insert-only MERGE of nothing would not commit anyway.
    if records := [p for p in parts if p.report.records]:
        decoded = sum(p.report.records for p in records)
        progress_ui.say(f"writing {METADATA_RECORDS} ({decoded:,} records decoded)", progress)
        with step(spark, f"ingest: write {METADATA_RECORDS}"):
            for cluster, n in write_records(spark, lake, records, rows_of).items():
                report[cluster].records_new = n
    if problems := [p for p in parts if p.report.problems]:
        progress_ui.say(f"writing {QUARANTINE} ({sum(p.report.problems for p in problems):,} problems found)",
                        progress)
        with step(spark, f"ingest: write {QUARANTINE}"):
            for cluster, n in write_quarantine(spark, lake, problems, rows_of).items():
                report[cluster].problems_new = n
    versions = {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)}
    for p in parts:
        p.report.committed = {METADATA_RECORDS: p.report.records_new > 0, QUARANTINE: p.report.problems_new > 0}
        p.report.versions = dict(versions)
