"""One SQL `MERGE` into a lake table, with its commit's `userMetadata`; statements run again when they lose a commit
race.

SQL `MERGE` has no writer option for the commit's `userMetadata`: Delta takes it from a session conf, set for the
statement and put back after. A caller that may run beside other writers of the same session gives a session of
its own (`ingest_write.own_session`). A statement that conflicts with a concurrent writer's commit made none, so it
is run again, reading the table anew: the statements given here must be idempotent.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from replay.spark.tables import Lake

log = logging.getLogger("replay.spark.merge")

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
MERGE_ATTEMPTS = 5
T = TypeVar("T")


def is_conflict(error: Exception) -> bool:
    """A Delta optimistic-concurrency conflict (another writer committed first): the statement made no commit."""
    text = f"{type(error).__name__}: {error}"
    return "Concurrent" in text or "DELTA_CONCURRENT" in text or "MetadataChanged" in text


def merge(spark: SparkSession, lake: Lake, table: str, source: DataFrame, on: str, clauses: str,
          metadata: str) -> dict[str, Any]:
    """`MERGE INTO table AS t USING source AS s ON <on> <clauses>`; returns Delta's row of metrics
    (`num_inserted_rows`, `num_updated_rows`, ...), empty when it reported none."""
    view = f"kraft_merge_src_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    try:
        previous = spark.conf.get(USER_METADATA_CONF, None)
    except Exception:
        previous = None
    try:
        spark.conf.set(USER_METADATA_CONF, metadata)
    except Exception as e:  # a platform that forbids the conf: write without userMetadata rather than not at all
        log.warning("cannot set %s (%s); the commit will carry no userMetadata", USER_METADATA_CONF, e)
    sql = f"MERGE INTO {lake.table_ref(table)} AS t USING {view} AS s ON {on} {clauses}"
    try:
        result = again_on_conflict(lambda: spark.sql(sql).collect(), f"MERGE into {table}")
    finally:
        with contextlib.suppress(Exception):
            if previous is None:
                spark.conf.unset(USER_METADATA_CONF)
            else:
                spark.conf.set(USER_METADATA_CONF, previous)
        spark.catalog.dropTempView(view)
    return result[0].asDict() if result else {}


def again_on_conflict(run: Callable[[], T], what: str) -> T:
    """`run()`, and again (up to `MERGE_ATTEMPTS` in all, waiting a little longer each time) while it loses a commit
    race: for idempotent statements only."""
    for attempt in range(1, MERGE_ATTEMPTS):
        try:
            return run()
        except Exception as e:
            if not is_conflict(e):
                raise
            log.info("%s conflicted with a concurrent commit (attempt %d); retrying", what, attempt)
            time.sleep(0.5 * attempt)
    return run()
