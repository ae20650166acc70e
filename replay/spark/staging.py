"""Intermediate replay results written once and read back, so later steps read them instead of recomputing.

Spark's `checkpoint`/`localCheckpoint` and caching do not exist on Databricks serverless and Spark Connect, and a
plan that reuses a frame many times would otherwise recompute it (or grow with every step). A stage is Parquet
files beside the lake's tables (`_staging/<replay id>/<name>` in a directory lake) or a Delta table
`_kraft_stage_<id>_<name>` in a catalog lake's schema, written once per replay and removed when the replay ends.
"""

from __future__ import annotations

import contextlib
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

    def keep(self, df: DataFrame, name: str) -> DataFrame:
        """Write `df` once and return a frame that reads what was written."""
        started = time.monotonic()
        # fresh column identities: frames derived from one source keep its column ids, which confuses later joins
        df = df.select(*[F.col(c).alias(c) for c in df.columns])
        path = self._path(name)
        spark = self.lake.spark
        with step(spark, f"replay: {name}"):
            if path is None:
                df.write.format("delta").mode("overwrite").saveAsTable(self._ref(name))
                out = spark.read.table(self._ref(name))
            else:  # plain Parquet: written once, read by this replay only, so Delta's log would be pure cost
                df.write.mode("overwrite").parquet(path)
                out = spark.read.parquet(path)
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
