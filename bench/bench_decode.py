"""In-process decoding speed: the pure-Python reference decoder against the compiled one (`native/`), same files.

    python -m bench.bench_decode PATH [PATH ...] [--repeat 3] [--no-rows]

PATH: segment, snapshot or checkpoint files, or directories (every `*.log` and `*.checkpoint` under them). Each
decoder reads every file through `batch.read_batches` (the API `inspect`, `acls PATH` and the ingest use), in one
process, the files read from the page cache once before timing. Printed per mode, best of `--repeat` runs: CPU
seconds of this process and records per CPU second, for

- `full`: every record with its value decoded (what the ingest and `inspect` need),
- `acls`: `records_for` the ACL types (what `acls PATH` needs: other records framed, not kept nor decoded),
- `rows`: the ingest's executor side without Spark: `ingest_decode.decode_rows` into Arrow record batches as its
  `mapInArrow` function builds them (decoding, payload JSON, content hash, row dicts, Arrow),

with the load average (another process on the machine makes CPU time grow too). Generate a realistic log with
`bench.bench_ingest`'s generator or any `__cluster_metadata` dump.
"""

from __future__ import annotations

import argparse
import glob
import os
import time
from collections.abc import Callable

from replay.kafka import batch, native
from replay.kafka.model import Batch, SourceKind

ACL_KEYS = frozenset({18, 19})  # AccessControlEntryRecord, RemoveAccessControlEntryRecord


def files_of(paths: list[str]) -> list[str]:
    out: list[str] = []
    for p in paths:
        if os.path.isdir(p):
            out += sorted(glob.glob(os.path.join(p, "**", "*.log"), recursive=True))
            out += sorted(glob.glob(os.path.join(p, "**", "*.checkpoint"), recursive=True))
        else:
            out.append(p)
    return out


def decode_all(files: list[str], records_for: frozenset[int] | None) -> tuple[int, int]:
    """(records kept, records in the headers) of every file."""
    kept = counted = 0
    for path in files:
        for item in batch.read_file(path, records_for=records_for):
            if isinstance(item, Batch):
                kept += len(item.records)
                counted += max(item.header.records_count, 0)
    return kept, counted


def ingest_rows(paths: list[str]) -> tuple[int, int]:
    """(rows, rows) the ingest's decoding makes of every file, into Arrow batches (`_emit` and `RowBuffer`)."""
    from replay.spark.ingest_decode import PlannedFile, _emit, decode_rows
    from replay.spark.ingest_rows import RowBuffer

    rows = 0
    for path in paths:
        kind = SourceKind.SNAPSHOT.value if batch.is_snapshot_path(path) else SourceKind.SEGMENT.value
        entry = PlannedFile(path, os.path.getsize(path), kind, local_path=path)
        buf = RowBuffer()
        with open(path, "rb") as stream:
            for arrow in _emit(decode_rows(entry, stream), buf):
                rows += arrow.num_rows
        if buf.rows:
            rows += buf.flush().num_rows
    return rows, rows


def best_of(repeat: int, run: Callable[[], tuple[int, int]]) -> tuple[float, float, tuple[int, int]]:
    """The least CPU time of `repeat` runs, with its wall time and the run's counts."""
    best: tuple[float, float, tuple[int, int]] | None = None
    for _ in range(repeat):
        c0, w0 = time.process_time(), time.perf_counter()
        counts = run()
        cpu, wall = time.process_time() - c0, time.perf_counter() - w0
        if best is None or cpu < best[0]:
            best = (cpu, wall, counts)
    assert best is not None
    return best


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("paths", nargs="+")
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--no-rows", action="store_true", help="skip the ingest's row building (imports pyspark)")
    args = ap.parse_args()
    files = files_of(args.paths)
    size = sum(os.path.getsize(f) for f in files)
    for f in files:
        with open(f, "rb") as fh:
            while fh.read(1 << 24):
                pass
    print(f"{len(files)} files, {size / 2**20:.1f} MiB; load average before: {os.getloadavg()}")
    if not native.installed():
        print(f"compiled decoder not available: {native.IMPORT_ERROR}")
    modes = [("python", "1")] + ([("native", "0")] if native.installed() else [])
    results: dict[tuple[str, str], float] = {}
    runs: list[tuple[str, Callable[[], tuple[int, int]]]] = [
        ("full", lambda: decode_all(files, None)), ("acls", lambda: decode_all(files, ACL_KEYS))]
    if not args.no_rows:
        runs.append(("rows", lambda: ingest_rows(files)))
    for what, run in runs:
        for name, pure in modes:
            os.environ[native.PURE_PYTHON_ENV] = pure
            native.refresh()
            cpu, wall, (kept, counted) = best_of(args.repeat, run)
            rate = counted / cpu if cpu else float("inf")
            results[(what, name)] = rate
            print(f"{what:5} {name:7} {counted:,} records ({kept:,} kept): {cpu:.2f} s CPU, {wall:.2f} s wall, "
                  f"{rate:,.0f} records/s per CPU second")
        if (what, "native") in results:
            print(f"{what:5} native / python: {results[(what, 'native')] / results[(what, 'python')]:.1f} times")
    print(f"load average after: {os.getloadavg()}")


if __name__ == "__main__":
    main()
