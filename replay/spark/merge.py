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
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from pyspark.sql import DataFrame, SparkSession

from replay.spark.tables import Lake

log = logging.getLogger("replay.spark.merge")

USER_METADATA_CONF = "spark.databricks.delta.commitInfo.userMetadata"
# Delta materializes a MERGE's source that is not a Delta table (by `localCheckpoint`, with a warning printed when
# it lets it go) so that both of its passes read the same rows; "none" for a source of literal rows, which cannot change.
MATERIALIZE_SOURCE_CONF = "spark.databricks.delta.merge.materializeSource"
MERGE_ATTEMPTS = 5
T = TypeVar("T")


def is_conflict(error: Exception) -> bool:
    """A Delta optimistic-concurrency conflict (another writer committed first): the statement made no commit."""
    text = f"{type(error).__name__}: {error}"
    return "Concurrent" in text or "DELTA_CONCURRENT" in text or "MetadataChanged" in text


def merge(spark: SparkSession, lake: Lake, table: str, source: DataFrame, on: str, clauses: str,
          metadata: str, settings: Mapping[str, str] | None = None) -> dict[str, Any]:
    """`MERGE INTO table AS t USING source AS s ON <on> <clauses>`; returns Delta's row of metrics
    (`num_inserted_rows`, `num_updated_rows`, ...), empty when it reported none. `settings`: session confs for this
    statement only, like its `userMetadata`."""
    view = f"kraft_merge_src_{uuid.uuid4().hex}"
    source.createOrReplaceTempView(view)
    sql = f"MERGE INTO {lake.table_ref(table)} AS t USING {view} AS s ON {on} {clauses}"
    try:
        with _statement_confs(spark, {USER_METADATA_CONF: metadata, **(settings or {})}):
            result = again_on_conflict(lambda: spark.sql(sql).collect(), f"MERGE into {table}")
    finally:
        spark.catalog.dropTempView(view)
    return result[0].asDict() if result else {}


@contextlib.contextmanager
def _statement_confs(spark: SparkSession, confs: Mapping[str, str]) -> Iterator[None]:
    """The session confs set for one statement and put back after. A platform that forbids one: the statement runs
    without it (a commit without userMetadata rather than none at all)."""
    previous: dict[str, str | None] = {}
    for key, value in confs.items():
        try:
            previous[key] = spark.conf.get(key, None)
            spark.conf.set(key, value)
        except Exception as e:
            log.warning("cannot set %s (%s); the statement runs without it", key, e)
    try:
        yield
    finally:
        for key, before in previous.items():
            with contextlib.suppress(Exception):
                if before is None:
                    spark.conf.unset(key)
                else:
                    spark.conf.set(key, before)


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
