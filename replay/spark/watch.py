"""Continuous ingestion (`kraft-replay watch`): a Structured Streaming query over a directory where dumps arrive.

Each micro-batch is the files that appeared since the last one (the stream's checkpoint remembers which it has
seen): the clusters they belong to are ingested together (`replay.spark.ingest.ingest_clusters`: one decoding job
and one commit per table; idempotent, so a batch run again after a failure adds nothing twice) and replayed. A
scheduled job runs it with the available-now trigger (everything new, then stop); a long-running one with a
processing-time trigger.

Files are listed by name and size only (Spark's `binaryFile` source; Auto Loader's `cloudFiles` on Databricks), never
read on the driver. Spark's listing skips names starting with `_` or `.`, and so every `__cluster_metadata-0`
directory: those are watched through a second stream over a glob that names them. A file must arrive whole and
never change afterwards (copy it under another name, then rename it; a new dump is a new directory): the stream
takes each path once.
"""

from __future__ import annotations

import dataclasses
import logging
import os
import posixpath
import re
from collections.abc import Callable
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql.streaming.query import StreamingQuery
from pyspark.sql.types import BinaryType, LongType, StringType, StructField, StructType, TimestampType

from replay.kafka import files as kfiles
from replay.progress import say
from replay.spark.ingest import IngestError, ingest_clusters
from replay.spark.ingest_plan import classify_listing, local_path_of
from replay.spark.replay import replay_lake
from replay.spark.session import on_databricks
from replay.spark.tables import Lake

log = logging.getLogger("replay.spark.watch")

AVAILABLE_NOW = "available-now"
_INTERVAL_RE = re.compile(r"^\s*(\d+)\s*(s|sec|secs|second|seconds|m|min|mins|minute|minutes|h|hour|hours)\s*$")
_UNIT = {"s": "seconds", "m": "minutes", "h": "hours"}
# Clusters ingested together, in one decoding job and one commit per table (`ingest_new_files`): a micro-batch of
# more is ingested in parts of this many, so that no plan grows with the fleet.
CLUSTERS_PER_INGEST = 50
# The directories Spark's listing skips, named by a glob (up to four levels below the root).
_METADATA_DIRS = "{,*/,*/*/,*/*/*/}" + kfiles.METADATA_PARTITION_DIR.rsplit("-", 1)[0] + "-*"


# The binaryFile source's columns (a stream must be given them); only path and length are read.
BINARY_FILE_SCHEMA = StructType([StructField("path", StringType()), StructField("modificationTime", TimestampType()),
                                 StructField("length", LongType()), StructField("content", BinaryType())])


class WatchError(ValueError):
    """A watch that cannot start as asked (a bad trigger, no cluster name, no checkpoint location)."""


def trigger_of(text: str) -> dict[str, Any]:
    """`available-now` or an interval such as `30s`, `5 minutes`, `1h` as `DataStreamWriter.trigger` keywords."""
    if text.strip().lower() in (AVAILABLE_NOW, "availablenow", "once"):
        return {"availableNow": True}
    m = _INTERVAL_RE.match(text.lower())
    if m is None:
        raise WatchError(f"unknown trigger {text!r}: give {AVAILABLE_NOW} (everything new, then stop) or an "
                         "interval such as 30s, 5m or 1h (keep watching)")
    return {"processingTime": f"{int(m.group(1))} {_UNIT[m.group(2)[0]]}"}


@dataclasses.dataclass
class WatchedBatch:
    """What one micro-batch did."""

    batch_id: int
    files: int
    ingested: dict[str, int]  # per cluster: new records
    ignored: int
    unplaced: list[str]
    replayed: list[str]

    def line(self) -> str:
        parts = ", ".join(f"{c} ({n:,} new record(s))" for c, n in sorted(self.ingested.items())) or "nothing to ingest"
        text = f"watch: batch {self.batch_id}: {self.files} new file(s): {parts}"
        if self.ignored:
            text += f"; {self.ignored} file(s) not part of a dump"
        if self.unplaced:
            text += f"; {len(self.unplaced)} file(s) in no cluster's directory, not ingested"
        if self.replayed:
            text += f"; replayed {', '.join(sorted(self.replayed))}"
        return text


def _root_uri(root: str) -> str:
    return os.path.abspath(os.path.expanduser(root)) if ":" not in root.split("/", 1)[0] else root.rstrip("/")


def new_files(spark: SparkSession, root: str, source: str = "binaryFile") -> DataFrame:
    """A stream of (path, length) for every file that appears under `root`, dump directories included."""
    def stream(path: str, recursive: bool) -> DataFrame:
        reader = spark.readStream
        if source == "cloudFiles":
            reader = reader.format("cloudFiles").option("cloudFiles.format", "binaryFile")
        else:
            reader = reader.format("binaryFile")
        if recursive:
            reader = reader.option("recursiveFileLookup", "true")
        return reader.schema(BINARY_FILE_SCHEMA).load(path).select("path", "length")

    return stream(root, True).unionByName(stream(f"{root}/{_METADATA_DIRS}", True))


def cluster_of(uri: str, root: str) -> str | None:
    """The first directory below `root` on the way to the file (None for a file directly in it)."""
    local, base = local_path_of(uri), local_path_of(root)
    rel = (os.path.relpath(local, base) if local is not None and base is not None
           else uri[len(root):].lstrip("/") if uri.startswith(root.rstrip("/") + "/") else None)
    if rel is None or rel.startswith(".."):
        return None
    parts = rel.replace(os.sep, "/").split("/")
    return parts[0] if len(parts) > 1 else None


def ingest_batch(lake: Lake, root: str, listed: list[tuple[str, int]], batch_id: int, cluster: str | None,
                 replay: bool = True, show_secrets: bool = False, high_watermark: int | None = None,
                 ) -> WatchedBatch:
    """Ingest a micro-batch's files (`listed`: path and length) per cluster, then replay the clusters they touched."""
    by_cluster: dict[str, list[tuple[str, int]]] = {}
    unplaced = []
    for uri, length in listed:
        name = cluster or cluster_of(uri, root)
        if name is None:
            unplaced.append(uri)
        else:
            by_cluster.setdefault(name, []).append((uri, length))
    if unplaced:
        log.warning("not ingested (put each cluster's dumps under %s/<cluster>/...): %s", root,
                    ", ".join(sorted(unplaced)[:20]))
    ignored = 0
    work: dict[str, list[tuple[str, int]]] = {}
    for name, files in sorted(by_cluster.items()):
        planned, skipped = classify_listing([root], files)  # as a directory ingest would: indexes etc. left out
        ignored += len(skipped)
        if planned:
            work[name] = [(f.uri, f.length) for f in planned]
    ingested = ingest_new_files(lake, root, work, show_secrets)
    touched = sorted(ingested)
    if replay and touched:
        replay_lake(lake, touched, high_watermark=high_watermark, progress=False)
    return WatchedBatch(batch_id, len(listed), ingested, ignored, unplaced, touched if replay else [])


def ingest_new_files(lake: Lake, root: str, work: dict[str, list[tuple[str, int]]], show_secrets: bool = False
                     ) -> dict[str, int]:
    """Ingest each cluster's new files (`work`: cluster -> (uri, length) as the stream listed them, not listed
    again) together, `CLUSTERS_PER_INGEST` clusters an ingest (`replay.spark.ingest.ingest_clusters`: one decoding
    job and one commit per table for all of them); returns each cluster's new records. A cluster that cannot be
    ingested does not stop the others: the first such error is raised after them (a batch run again re-ingests
    nothing that was written: ingests are idempotent)."""
    new: dict[str, int] = {}
    failed: dict[str, Exception] = {}
    names = sorted(work)
    for i in range(0, len(names), CLUSTERS_PER_INGEST):
        some = names[i:i + CLUSTERS_PER_INGEST]
        reports, errors = ingest_clusters(lake.spark, {n: [root] for n in some}, lake, progress=False,
                                          listed={n: work[n] for n in some}, show_secrets=show_secrets)
        new.update({n: r.records_new for n, r in reports.items()})
        failed.update(errors)
    for name, error in sorted(failed.items())[1:]:
        log.error("watch: the ingest of cluster %s failed too: %s", name, error)
    if failed:
        first = min(failed)
        if isinstance(failed[first], IngestError):  # its message names the root: say which cluster
            raise IngestError(f"cluster {first}: {failed[first]}") from failed[first]
        raise failed[first]
    return new


def default_checkpoint(lake: Lake, root: str) -> str:
    """Beside a directory lake's tables, one per watched root; a catalog lake needs one given (a Volume path)."""
    if lake.is_catalog:
        raise WatchError("give --checkpoint (for example a Volume path): a catalog lake has no directory of its "
                         "own to keep the stream's progress in")
    key = re.sub(r"[^A-Za-z0-9]+", "_", _root_uri(root)).strip("_")[-80:]
    return f"{lake.location}/_checkpoints/watch_{key}"


def watch(lake: Lake, root: str, *, cluster: str | None = None, cluster_from_path: bool = False,
          checkpoint: str | None = None, trigger: str = AVAILABLE_NOW, replay: bool = True,
          show_secrets: bool = False, high_watermark: int | None = None, source: str | None = None,
          progress: bool = True, on_batch: Callable[[WatchedBatch], None] | None = None) -> StreamingQuery:
    """Start watching `root` for new dump files into `lake` (see the module docstring); returns the running query.

    One of `cluster` (every file belongs to it) or `cluster_from_path` (the first directory below `root` names the
    cluster: `root/<cluster>/...`). `source`: `binaryFile` (default) or `cloudFiles` (Auto Loader; the default on
    Databricks). `on_batch` gets each micro-batch's `WatchedBatch` (the status line is printed too)."""
    if (cluster is None) == (not cluster_from_path):
        raise WatchError("name the cluster (--lake-cluster NAME) or take it from the path (--cluster-from-path: "
                         "ROOT/<cluster>/...), one of the two")
    spark = lake.spark
    root = _root_uri(root)
    if local_path_of(root) is not None and not os.path.isdir(local_path_of(root) or ""):
        raise WatchError(f"{root} is not a directory: watch the directory the dumps arrive in")
    kind = source or _default_source()
    how = trigger_of(trigger)
    where = checkpoint or default_checkpoint(lake, root)

    def each(batch: DataFrame, batch_id: int) -> None:
        listed = [(str(r["path"]), int(r["length"])) for r in batch.collect()]  # one small row per new file
        if not listed:
            return
        done = ingest_batch(lake, root, listed, batch_id, cluster, replay, show_secrets, high_watermark)
        say(done.line(), progress)
        if on_batch is not None:
            on_batch(done)

    query = (new_files(spark, root, kind).writeStream.foreachBatch(each)
             .option("checkpointLocation", where).trigger(**how).queryName(_query_name(root)).start())
    say(f"watch: {root} -> {lake.location}, trigger {trigger}, checkpoint {where}", progress)
    return query


_RAISED_RE = re.compile(r"^(?:[A-Za-z_]\w*\.)*([A-Za-z_]\w*(?:Error|Exception|Exit)): (.+)$", re.M)


def stopped_because(error_text: str) -> str:
    """Why a watch's stream stopped, in one line: the exception its batch raised (Spark wraps it in a Python
    traceback whose first line says only that the Python side raised), else the error's first line."""
    head = error_text.split("=== Streaming Query ===", 1)[0]
    raised = _RAISED_RE.findall(head)
    if raised:
        name, message = raised[-1]
        return f"{message.strip()} ({name})"
    return (error_text.strip().splitlines() or ["(no message)"])[0]


def _query_name(root: str) -> str:
    return "kraft_replay_watch_" + re.sub(r"[^A-Za-z0-9]+", "_", posixpath.basename(root.rstrip("/")) or "root")


def _default_source() -> str:
    return "cloudFiles" if on_databricks() else "binaryFile"
