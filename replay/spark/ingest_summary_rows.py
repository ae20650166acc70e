"""The rows the ingest's summary pass reads, as its executors make them: log records counted per task, every other
row as it is, to the few columns the summary reads (`SUMMARY_FIELDS`).

The summary (`ingest_summary.summarise`) needs of a log record only its count and offset range: log records are
not judged as copies, so no digest is taken of them, and they are nearly all the rows. Sending each one to the JVM
as a wide row only to count it cost more than decoding it: the realistic 2M log's pass took 5.7 s and 6.0 s of JVM
CPU that way, 3.5 s and 1.4 s this way (warm, one session; the Python workers 5 s either way). So each task sends
one row per group of its log records, with the count (`_n`) and the lowest and highest offset (`_lo`, `_hi`);
snapshot and bootstrap records (each copy gets a digest), problems and skipped files go as they are, with `_n` 1.
Runs inside Spark tasks: pyarrow only.
"""

from __future__ import annotations

from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from replay.spark.ingest_rows import DECODED_FIELDS
from replay.spark.ingest_tally import one_value_each

_TYPES = dict(DECODED_FIELDS)
# The decoded columns the summary reads: its grouping, the copies' digests, the skipped files' names.
READ = ("row_type", "stream", "snapshot_end_offset", "snapshot_epoch", "kind", "source_file", "text_section",
        "offset", "content_hash", "leader_epoch", "crc_ok")
# What is grouped on when log records are counted: the summary's grouping of a row that is not a copy.
COUNTED_BY = ("row_type", "stream", "snapshot_end_offset", "snapshot_epoch", "kind")
SUMMARY_FIELDS: list[tuple[str, pa.DataType]] = [
    *[(name, _TYPES[name]) for name in READ], ("_n", pa.int64()), ("_lo", pa.int64()), ("_hi", pa.int64())]
_SCHEMA = pa.schema(SUMMARY_FIELDS)


def is_counted(batch: Any) -> Any:
    """Record rows that are no copy: the log's (and those with no stream, which the summary treats alike)."""
    record = pc.equal(batch.column("row_type"), "R")
    log = pc.fill_null(pc.equal(batch.column("stream"), "log"), True)
    return pc.fill_null(pc.and_(record, log), False)


class LogCounts:
    """One task's log records, counted per `COUNTED_BY` group as the batches pass (`shape`); `last` at the end."""

    def __init__(self) -> None:
        self._parts: list[Any] = []  # per batch: a row per group with its count, lowest and highest offset

    def shape(self, batch: Any) -> Any | None:
        """The batch's rows that go as they are, in `SUMMARY_FIELDS` (None when there are none); its log records
        are counted."""
        counted = is_counted(batch)
        if pc.all(counted).as_py() and (key := one_value_each(batch, COUNTED_BY)) is not None:
            # a chunk of one file's log records (nearly every batch): counted without grouping or copying it
            offsets = batch.column("offset")
            self._parts.append(pa.table(
                [*(pa.array([v], _TYPES[c]) for c, v in zip(COUNTED_BY, key, strict=True)),
                 pa.array([len(offsets)], pa.int64()), pa.array([pc.min(offsets).as_py()], pa.int64()),
                 pa.array([pc.max(offsets).as_py()], pa.int64())], names=_GROUPED))
            return None
        if pc.any(counted).as_py():
            self._parts.append(_grouped(pa.Table.from_batches([batch.filter(counted)]), [
                ("offset", "count", pc.CountOptions(mode="all")), ("offset", "min"), ("offset", "max")]))
            batch = batch.filter(pc.invert(counted))
        if batch.num_rows == 0:
            return None
        offset = batch.column("offset")
        ones = pa.array([1] * batch.num_rows, pa.int64())
        return pa.RecordBatch.from_arrays([*(batch.column(name) for name in READ), ones, offset, offset],
                                          schema=_SCHEMA)

    def last(self) -> Any | None:
        """One row per group of the task's log records (None when it had none)."""
        if not self._parts:
            return None
        groups = _grouped(pa.concat_tables(self._parts), [
            ("offset_count", "sum"), ("offset_min", "min"), ("offset_max", "max")]).combine_chunks()

        def column(name: str) -> Any:
            return groups.column(name).chunk(0)

        arrays = [column(name) if name in COUNTED_BY else pa.nulls(groups.num_rows, _TYPES[name]) for name in READ]
        arrays += [column(c) for c in _GROUPED[len(COUNTED_BY):]]
        return pa.RecordBatch.from_arrays(arrays, schema=_SCHEMA)


# A group's row as the task keeps it: its values, then its count, lowest and highest offset.
_GROUPED = [*COUNTED_BY, "offset_count", "offset_min", "offset_max"]


def _grouped(table: Any, aggregates: list[Any]) -> Any:
    """One row per group of `table` (`_GROUPED`: the three `aggregates` give its count, lowest and highest offset)."""
    grouped = table.group_by(list(COUNTED_BY), use_threads=False).aggregate(aggregates)
    named = dict(zip([f"{a[0]}_{a[1]}" for a in aggregates], _GROUPED[len(COUNTED_BY):], strict=True))
    return grouped.rename_columns([named.get(n, n) for n in grouped.column_names]).select(_GROUPED)
