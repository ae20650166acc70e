"""Bytes of a dump that the lake holds already: found by digest, and not decoded again.

A node's dumps repeat each other: tomorrow's copy of `__cluster_metadata-0` holds today's segments again, grown at
the end, and today's snapshots. Their records are in `metadata_records` since today's ingest; decoding them again
only for the MERGE to find every row held made a daily watch slower each day (30 clusters, four days: the ingest's
part 22.4, 28.7, 37.0 and 46.1 s for about the same new records each day). So an ingest records each local segment
and snapshot file it read whole and without a problem in `ingested_files` (cluster, name, length, sha256), after its
records' commit; a later ingest hashes its local files of those kinds on the driver, and where a file of the same
cluster and name begins with a recorded length and digest it decodes only the rest (`trim`): a piece from there,
its batch walk starting there (`PlannedFile.batch_at`), or nothing when the whole file is held. Any other byte in
that stretch (another node's divergent copy, a log truncated and written again) changes the digest, and the file is
decoded whole as before. A snapshot is held only whole.

What the lake ends up holding is the same either way: a held stretch's rows would all have matched rows the lake
holds (same bytes, same keys), and a file with any problem is never recorded. The hashing reads each file once
(about 0.5 GB/s per thread), in threads: far less than decoding it.
"""

from __future__ import annotations

import dataclasses
import functools
import hashlib
import json
import os
from collections.abc import Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from pyspark.sql import functions as F

from replay.kafka.model import SourceKind
from replay.spark.ingest_decode import PlannedFile
from replay.spark.ingest_plan import local_path_of
from replay.spark.tables import INGESTED_FILES, SCHEMAS, Lake

_KINDS = (SourceKind.SEGMENT.value, SourceKind.SNAPSHOT.value, SourceKind.BOOTSTRAP.value)
_GROWS = SourceKind.SEGMENT.value  # the one kind whose later copies extend the earlier ones
_CHUNK = 1024 * 1024

# (cluster, file name) -> the (length, sha256) recorded for files of that name
Recorded = dict[tuple[str, str], list[tuple[int, bytes]]]


@dataclasses.dataclass(frozen=True)
class Hashed:
    """A planned file's digest (of all its bytes) and how many of its first bytes the lake holds (0: none)."""

    entry: PlannedFile
    sha256: bytes
    held: int


def hashable(entry: PlannedFile) -> bool:
    """A whole local segment or snapshot: one the driver can hash and a task can start reading at a batch."""
    return entry.open_with == "local" and entry.kind in _KINDS and not entry.is_piece and entry.cluster is not None


def prefix_digests(path: str, lengths: Iterable[int]) -> tuple[dict[int, bytes], bytes]:
    """sha256 of the file's first n bytes for each n of `lengths` within it, and of the whole file: one read."""
    marks = sorted({n for n in lengths if n >= 0})
    out: dict[int, bytes] = {}
    digest = hashlib.sha256()
    done = 0
    with open(path, "rb", buffering=0) as f:
        for mark in [*marks, None]:
            while mark is None or done < mark:
                data = f.read(_CHUNK if mark is None else min(_CHUNK, mark - done))
                if not data:
                    break
                digest.update(data)
                done += len(data)
            if mark is None:
                break
            if done < mark:  # the file is shorter than this mark, and than every later one
                break
            out[mark] = digest.copy().digest()
    return out, digest.digest()


def held_length(entry: PlannedFile, recorded: Sequence[tuple[int, bytes]], digests: Mapping[int, bytes],
                whole: bytes) -> int:
    """The longest recorded stretch the file begins with, byte for byte (a snapshot: only the whole file)."""
    best = 0
    for length, sha in recorded:
        same = whole == sha if length == entry.length else digests.get(length) == sha
        if same and length > best and (entry.kind == _GROWS or length == entry.length):
            best = length
    return best


def hash_plan(plan: Sequence[PlannedFile], recorded: Recorded, threads: int | None = None) -> list[Hashed]:
    """Each hashable file of the plan with its digest and the bytes the lake holds of it (threads: hashlib lets go
    of the GIL while it hashes). A file the driver cannot read, or that changed since it was listed, is left out:
    it is decoded whole, and the executors report what is wrong with it."""
    def one(entry: PlannedFile) -> Hashed | None:
        assert entry.cluster is not None
        known = recorded.get((entry.cluster, entry.name), [])
        path = entry.local_path or entry.uri
        try:
            digests, whole = prefix_digests(path, [n for n, _ in known if 0 < n < entry.length])
            if os.path.getsize(path) != entry.length:
                return None
        except OSError:
            return None
        return Hashed(entry, whole, held_length(entry, known, digests, whole))

    files = [f for f in plan if hashable(f)]
    if not files:
        return []
    with ThreadPoolExecutor(max_workers=max(1, min(len(files), threads or os.cpu_count() or 1))) as pool:
        return [h for h in pool.map(one, files) if h is not None]


def trim(plan: Sequence[PlannedFile], hashed: Sequence[Hashed]) -> tuple[list[PlannedFile], list[Hashed]]:
    """The plan without what the lake holds: a file held whole is left out, one held in part becomes the piece
    past that part. Returns the plan and the files held (whole or in part)."""
    held = {(h.entry.cluster, h.entry.uri): h for h in hashed if h.held > 0}
    out: list[PlannedFile] = []
    for f in plan:
        h = held.get((f.cluster, f.uri))
        if h is None:
            out.append(f)
        elif h.held < f.length:
            out.append(dataclasses.replace(f, start=h.held, end=f.length, batch_at=h.held))
    return out, list(held.values())


_RECORDED_COLUMNS = ["cluster_id", "file_name", "bytes", "sha256"]


def read_recorded(lake: Lake, names: Mapping[str, Iterable[str]]) -> Recorded:
    """What `ingested_files` records of these clusters' files (cluster -> names), nothing before the table exists.
    A lake directory the driver can read is read with delta-rs (a Spark job and Delta's first snapshot of the table
    cost a watch 4.6 s), a catalog lake through Spark. Rows are per file name and length: this grows with the
    files, not the records."""
    wanted = {c: sorted(set(n)) for c, n in names.items() if n}
    if not wanted or not lake.exists(INGESTED_FILES):
        return {}
    rows = _read_with_delta_rs(lake, wanted)
    if rows is None:
        which = functools.reduce(lambda a, b: a | b, [(F.col("cluster_id") == c) & F.col("file_name").isin(files)
                                                       for c, files in wanted.items()])
        rows = [r.asDict() for r in lake.read(INGESTED_FILES).where(which).select(*_RECORDED_COLUMNS).collect()]
    out: Recorded = {}
    for r in rows:
        key, seen = (str(r["cluster_id"]), str(r["file_name"])), (int(r["bytes"]), bytes(r["sha256"]))
        if seen not in out.setdefault(key, []):
            out[key].append(seen)
    return out


def _read_with_delta_rs(lake: Lake, wanted: Mapping[str, list[str]]) -> list[dict[str, Any]] | None:
    """The recorded rows of `wanted` read with delta-rs from a local lake directory; None where that cannot be
    done (a catalog lake, no delta-rs, a table it does not read): Spark reads them then."""
    path = lake.table_path(INGESTED_FILES)
    local = None if path is None else local_path_of(path)
    if local is None:
        return None
    try:
        import pyarrow.compute as pc
        from deltalake import DeltaTable

        which = functools.reduce(lambda a, b: a | b, [(pc.field("cluster_id") == c) & pc.field("file_name").isin(f)
                                                      for c, f in wanted.items()])
        table = DeltaTable(local).to_pyarrow_dataset().to_table(columns=_RECORDED_COLUMNS, filter=which)
    except Exception:
        return None
    rows: list[dict[str, Any]] = table.to_pylist()
    return rows


def to_record(hashed: Sequence[Hashed], recorded: Recorded, bad_files: set[str]) -> list[Hashed]:
    """The files to record: read without a problem, and not recorded already at this length and digest."""
    out = []
    for h in hashed:
        f = h.entry
        assert f.cluster is not None
        if f.uri in bad_files or (f.length, h.sha256) in recorded.get((f.cluster, f.name), []):
            continue
        out.append(h)
    return out


def record(lake: Lake, hashed: Sequence[Hashed], ingest_ids: Mapping[str, str]) -> int:
    """Append the files' rows to `ingested_files` (one commit); how many."""
    if not hashed:
        return 0
    lake.ensure(INGESTED_FILES)
    rows = [(h.entry.cluster, h.entry.name, h.entry.kind, h.entry.length, h.sha256, h.entry.uri,
             ingest_ids.get(h.entry.cluster or "")) for h in hashed]
    df = lake.spark.createDataFrame(rows, SCHEMAS[INGESTED_FILES])
    clusters = sorted({h.entry.cluster or "" for h in hashed})
    metadata = json.dumps({"app": "kraft-acl-replay", "action": "ingest", "table": INGESTED_FILES,
                           "cluster_ids": clusters, "files": len(rows)}, separators=(",", ":"))
    lake.write(INGESTED_FILES, df, metadata)
    return len(rows)
