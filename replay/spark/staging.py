"""Intermediate replay results written once and read back, so later steps read them instead of recomputing.

Spark's `checkpoint`/`localCheckpoint` and caching do not exist on Databricks serverless and Spark Connect, and a
plan that reuses a frame many times would otherwise recompute it (or grow with every step). A stage is Parquet
files beside the lake's tables (`_staging/<replay id>/<name>` in a directory lake) or a Delta table
`_kraft_stage_<id>_<name>` in a catalog lake's schema, written once per replay and removed when the replay ends.
A replay that dies (killed, a lost driver) cannot remove its stages; the next replay removes those of replays that
started more than `STALE_AFTER` ago (a replay id starts with its start time), never one that may still be running.
"""

from __future__ import annotations

import contextlib
import datetime
import logging
import os
import re
import shutil
import time
from typing import Any

from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from replay.spark.session import step
from replay.spark.tables import Lake, quote_ident

log = logging.getLogger("replay.spark.staging")

_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:/")
# a replay id with its start time, for Python and for SQL (RLIKE)
ID_TIME_PATTERN = "^([0-9]{8}t[0-9]{6})_[0-9a-f]+$"
_ID_TIME_RE = re.compile(ID_TIME_PATTERN)
STALE_AFTER = datetime.timedelta(hours=24)  # far longer than any replay runs


class Stages:
    """The stages of one replay. Use as a context manager: the stages are removed on exit."""

    def __init__(self, lake: Lake, replay_id: str) -> None:
        self.lake = lake
        self.replay_id = replay_id
        self.written: list[str] = []

    def _path(self, name: str) -> str | None:
        if self.lake.is_catalog:
            return None
        return f"{self.lake.location}/_staging/{self.replay_id}/{name}"

    def _ref(self, name: str) -> str:
        return f"{self.lake.schema_ref}.{quote_ident(f'_kraft_stage_{self.replay_id}_{name}')}"

    def keep(self, df: DataFrame, name: str, partition_by: str | None = None) -> DataFrame:
        """Write `df` once and return a frame that reads what was written. `partition_by`: a column whose values
        each get a part of their own, so that a reader that filters on it reads only that part."""
        started = time.monotonic()
        # fresh column identities: frames derived from one source keep its column ids, which confuses later joins
        df = df.select(*[F.col(c).alias(c) for c in df.columns])
        path = self._path(name)
        spark = self.lake.spark
        parts = [partition_by] if partition_by else []
        with step(spark, f"replay: {name}"):
            if path is None:
                df.write.format("delta").mode("overwrite").partitionBy(*parts).saveAsTable(self._ref(name))
                out = spark.read.table(self._ref(name))
            else:  # plain Parquet: written once, read by this replay only, so Delta's log would be pure cost, and
                # snappy: speed over size. Read with the schema it was written with (no job to infer it again).
                df.write.mode("overwrite").partitionBy(*parts).option("compression", "snappy").parquet(path)
                out = spark.read.schema(df.schema).parquet(path)
        self.written.append(name)
        log.debug("replay stage %s: %.1fs", name, time.monotonic() - started)
        return out

    def drop(self) -> None:
        """Remove what this replay staged (best effort: a leftover stage is only disk space)."""
        if self.lake.is_catalog:
            for name in self.written:
                with contextlib.suppress(Exception):
                    self.lake.spark.sql(f"DROP TABLE IF EXISTS {self._ref(name)}")
            return
        root = f"{self.lake.location}/_staging/{self.replay_id}"
        if not _URI_RE.match(root) or root.startswith("file:"):
            shutil.rmtree(root.removeprefix("file:"), ignore_errors=True)
            parent = os.path.dirname(root.removeprefix("file:"))
            with contextlib.suppress(OSError):
                os.rmdir(parent)  # only when no other replay is staging
            return
        _remove_remote(self.lake, root)

    def __enter__(self) -> Stages:
        with contextlib.suppress(Exception):  # best effort: leftovers are only disk space
            sweep_stale(self.lake)
        return self

    def __exit__(self, *exc: object) -> None:
        self.drop()


def _remove_remote(lake: Lake, root: str) -> None:
    """A staging directory on a remote file system, through Hadoop where the session has a JVM gateway."""
    try:
        jvm: Any = lake.spark.sparkContext._jvm
        conf = lake.spark.sparkContext._jsc.hadoopConfiguration()
        path = jvm.org.apache.hadoop.fs.Path(root)
        path.getFileSystem(conf).delete(path, True)
    except Exception as e:  # Spark Connect: no gateway; the directory stays (named by replay id)
        log.warning("could not remove the replay's staging directory %s (%s); it can be deleted", root, e)


def started_at(replay_id: str) -> datetime.datetime | None:
    """When the replay of this id started (None for an id without its time: those of older versions)."""
    m = _ID_TIME_RE.match(replay_id)
    if m is None:
        return None
    return datetime.datetime.strptime(m.group(1), "%Y%m%dt%H%M%S").replace(tzinfo=datetime.timezone.utc)


def _stale(replay_id: str, now: datetime.datetime) -> bool:
    started = started_at(replay_id)
    return started is not None and now - started > STALE_AFTER


def sweep_stale(lake: Lake, now: datetime.datetime | None = None) -> list[str]:
    """Remove the stages of replays that started more than `STALE_AFTER` before `now` (they died before removing
    them); returns their replay ids."""
    now = now or datetime.datetime.now(datetime.timezone.utc)
    if lake.is_catalog:
        prefix = "_kraft_stage_"
        tables = [r["tableName"] for r in lake.spark.sql(f"SHOW TABLES IN {lake.schema_ref}").collect()
                  if r["tableName"].startswith(prefix) and not r["isTemporary"]]
        stale = sorted({m.group(1) for t in tables
                        if (m := re.match(r"^_kraft_stage_(\d{8}t\d{6}_[0-9a-f]+)_", t)) and _stale(m.group(1), now)})
        for t in tables:
            if any(t.startswith(f"{prefix}{i}_") for i in stale):
                lake.spark.sql(f"DROP TABLE IF EXISTS {lake.schema_ref}.{quote_ident(t)}")
        return stale
    root = f"{lake.location}/_staging"
    if _URI_RE.match(root) and not root.startswith("file:"):
        try:
            jvm: Any = lake.spark.sparkContext._jvm
            path = jvm.org.apache.hadoop.fs.Path(root)
            fs = path.getFileSystem(lake.spark.sparkContext._jsc.hadoopConfiguration())
            names = [s.getPath().getName() for s in fs.listStatus(path)] if fs.exists(path) else []
        except Exception:  # Spark Connect: no gateway to list with; the stages stay, named by start time
            return []
        stale = sorted(name for name in names if _stale(name, now))
        for name in stale:
            _remove_remote(lake, f"{root}/{name}")
        return stale
    local = root.removeprefix("file:")
    if not os.path.isdir(local):
        return []
    stale = sorted(name for name in os.listdir(local) if _stale(name, now))
    for name in stale:
        shutil.rmtree(os.path.join(local, name), ignore_errors=True)
    return stale
