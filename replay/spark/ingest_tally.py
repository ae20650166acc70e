"""Whether two of an ingest's record rows could share a key, told without a shuffle.

Most dumps hold each offset once (one node's segments, snapshots apart). Finding the rows that repeat a key (the
same offset in two dumps, or twice in one file) takes a shuffle of every row, which cost as much as the write
itself. So each decoding task tallies the offsets of its record rows per copy of the log or of a snapshot
(`OffsetTally`, on the executors: pyarrow only, never pyspark); the driver reads the tallies (an accumulator) and,
when every copy's offsets are distinct within each task and its tasks' offset ranges do not meet, no two rows
can share a key (`no_repeated_keys`): the rows are written as decoded. Anything short of that proof, such as a
tally missing or counted twice (a task run again), leaves the shuffle in place.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from itertools import pairwise
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

# A copy of records: (stream, snapshot_end_offset, snapshot_epoch, source_file, text_section), the file and section
# only for snapshot and bootstrap rows: log rows of every file are one copy (`ingest_write.RECORD_KEY`).
CopyId = tuple[Any, Any, Any, Any, Any]
# One task's finding for one copy: (copy, rows, offsets distinct and none null, lowest offset, highest offset).
Tally = tuple[CopyId, int, bool, Any, Any]

# The columns of a `CopyId`, in its order.
COPY_ID_COLUMNS = ("stream", "snapshot_end_offset", "snapshot_epoch", "source_file", "text_section")


class OffsetTally:
    """The offsets of one task's record rows, per copy, as the Arrow batches pass (`add`); `tallies` at the end.

    A batch of one copy whose offsets rise (the compiled decoder's chunks: one file's records in file order) also
    notes its span (lowest, highest offset): when a copy's batches all rose and their spans lie apart, its offsets are
    distinct without looking at each (`_apart`); otherwise they are counted. Grouping every batch by copy and
    counting every offset cost the 10M-record ingest about 4 s of its summary's pass."""

    def __init__(self) -> None:
        self._offsets: dict[CopyId, list[Any]] = defaultdict(list)
        self._spans: dict[CopyId, list[tuple[int, int] | None]] = defaultdict(list)  # None: a batch that did not rise

    def add(self, batch: Any) -> None:
        rows = pa.RecordBatch.from_arrays([batch.column(c) for c in (*COPY_ID_COLUMNS, "offset")],
                                          names=[*COPY_ID_COLUMNS, "offset"])
        records = pc.fill_null(pc.equal(batch.column("row_type"), "R"), False)
        if not pc.all(records).as_py():
            rows = rows.filter(records)
        if rows.num_rows == 0:
            return
        key = _one_copy(rows)
        if key is not None:
            offsets = rows.column("offset")
            self._offsets[key].append(offsets)
            self._spans[key].append((offsets[0].as_py(), offsets[-1].as_py()) if _rising(offsets) else None)
            return
        stream = rows.column("stream")
        whole_log = pc.fill_null(pc.equal(stream, "log"), True)  # a row with no stream: like log (no copy)
        cols = {name: rows.column(name) for name in COPY_ID_COLUMNS}
        for name in ("source_file", "text_section"):
            cols[name] = pc.if_else(whole_log, pa.scalar(None, cols[name].type), cols[name])
        table = pa.table({**cols, "offset": rows.column("offset")})
        grouped = table.group_by(list(COPY_ID_COLUMNS), use_threads=False).aggregate([("offset", "list")])
        keys = zip(*(grouped.column(name).to_pylist() for name in COPY_ID_COLUMNS), strict=True)
        lists = [chunk[i].values for chunk in grouped.column("offset_list").chunks for i in range(len(chunk))]
        for copy, offsets in zip(keys, lists, strict=True):
            self._offsets[copy].append(offsets)
            self._spans[copy].append(None)

    def tallies(self) -> list[Tally]:
        out: list[Tally] = []
        for key, parts in self._offsets.items():
            offsets = pa.concat_arrays(parts)
            n = len(offsets)
            distinct = offsets.null_count == 0 and (
                _apart(self._spans[key]) or pc.count_distinct(offsets).as_py() == n)
            bounds = pc.min_max(offsets)
            out.append((key, n, distinct, bounds["min"].as_py(), bounds["max"].as_py()))
        return out


def _one_copy(rows: Any) -> CopyId | None:
    """The copy of all `rows` when they are of one (a file's rows: every chunk the compiled decoder makes), else None.
    Log rows (and rows with no stream) of every file are one copy."""
    key = one_value_each(rows, COPY_ID_COLUMNS)
    if key is None:
        return None
    if key[0] in (None, "log"):
        key = (*key[:3], None, None)
    return key


def one_value_each(rows: Any, columns: Iterable[str]) -> tuple[Any, ...] | None:
    """The value each of `columns` has in every one of `rows` (None for a column of nulls), or None when one of
    them holds two values (or values and nulls). Told by the columns' lowest and highest values: no hashing."""
    values: list[Any] = []
    for name in columns:
        col = rows.column(name)
        if col.null_count == len(col):
            values.append(None)
            continue
        if col.null_count:
            return None
        bounds = pc.min_max(col)
        if bounds["min"] != bounds["max"]:
            return None
        values.append(bounds["min"].as_py())
    return tuple(values)


def _rising(offsets: Any) -> bool:
    """Whether the offsets are known and each is above the one before."""
    n = len(offsets)
    if offsets.null_count or n == 0:
        return False
    return n == 1 or bool(pc.all(pc.greater(offsets.slice(1), offsets.slice(0, n - 1))).as_py())


def _apart(spans: list[tuple[int, int] | None]) -> bool:
    """Whether every batch rose and no two batches' spans meet (then no offset is in two of them)."""
    if None in spans:
        return False
    ordered = sorted(s for s in spans if s is not None)
    return all(later[0] > earlier[1] for earlier, later in pairwise(ordered))


def no_repeated_keys(tallies: Iterable[Tally], rows_per_copy: dict[CopyId, int]) -> bool:
    """True when no two record rows can share a key: the tallies account for exactly `rows_per_copy` (the
    summary's count of each copy), every task's offsets are distinct and present, and no two tasks' offset ranges
    of one copy meet."""
    ranges: dict[CopyId, list[tuple[Any, Any]]] = defaultdict(list)
    counted: dict[CopyId, int] = defaultdict(int)
    for key, n, distinct, lo, hi in tallies:
        if not distinct:
            return False
        counted[tuple(key)] += n
        ranges[tuple(key)].append((lo, hi))
    if dict(counted) != {k: n for k, n in rows_per_copy.items() if n}:
        return False
    for spans in ranges.values():
        spans.sort()
        if any(later[0] <= earlier[1] for earlier, later in pairwise(spans)):
            return False
    return True
