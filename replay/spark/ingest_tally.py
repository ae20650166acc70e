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
    """The offsets of one task's record rows, per copy, as the Arrow batches pass (`add`); `tallies` at the end."""

    def __init__(self) -> None:
        self._offsets: dict[CopyId, list[Any]] = defaultdict(list)

    def add(self, batch: Any) -> None:
        rows = batch.filter(pc.equal(batch.column("row_type"), "R"))
        if rows.num_rows == 0:
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
        for key, offsets in zip(keys, lists, strict=True):
            self._offsets[key].append(offsets)

    def tallies(self) -> list[Tally]:
        out: list[Tally] = []
        for key, parts in self._offsets.items():
            offsets = pa.concat_arrays(parts)
            n = len(offsets)
            distinct = offsets.null_count == 0 and pc.count_distinct(offsets).as_py() == n
            bounds = pc.min_max(offsets)
            out.append((key, n, distinct, bounds["min"].as_py(), bounds["max"].as_py()))
        return out


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
