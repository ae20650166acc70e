"""Ingest + replay of a large synthetic metadata log, next to Kafka's own DumpLogSegments on the same files.

    python -m bench.bench_ingest                 # 300,000 ACL creates (~390,000 records with removes)
    python -m bench.bench_ingest --acls 1000000 --keep

Writes the log as segments of `--segment-mib` (64 MiB; 1024 for Kafka's default segment size) with our writer, then
times, in separate processes so their peak memory is their own: `kraft-replay ingest --no-replay` (decode on the
executors, Delta MERGE), `kraft-replay replay` (the Spark replay), and Kafka 4.3.1's `DumpLogSegments
--cluster-metadata-decoder` over the same segments (decoding and printing every record, output discarded). Peak
memory is the whole process tree's high-water RSS, Spark's Python workers included (`bench.measure`), sampled
every 0.2 s. Nothing is asserted.
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

from bench.measure import measure
from replay.kafka import files, synth


def write_log(directory: Path, acls: int, seed: int, segment_bytes: int) -> tuple[list[Path], int, int]:
    part = directory / "__cluster_metadata-0"
    part.mkdir(parents=True)
    paths: list[Path] = []
    out = None
    size = records = 0
    for batch in synth.generate_large(seed, acls):
        if out is None or out.tell() >= segment_bytes:
            if out is not None:
                out.close()
            path = part / files.segment_name(batch.base_offset)
            paths.append(path)
            out = open(path, "wb")  # noqa: SIM115 - closed when the segment is full or at the end
        data = synth.encode(batch)
        out.write(data)
        size += len(data)
        records += len(batch.records)
    if out is not None:
        out.close()
    return paths, size, records


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acls", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--segment-mib", type=int, default=64)
    ap.add_argument("--memory", default="4g", help="Spark driver memory")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="kraft-bench-ingest-"))
    try:
        t = time.monotonic()
        paths, size, records = write_log(work / "dump", args.acls, args.seed, args.segment_mib << 20)
        print(f"wrote {records:,} records, {size / 2**20:,.1f} MiB in {len(paths)} segment(s) "
              f"in {time.monotonic() - t:.1f} s ({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")

        env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY=args.memory, KRAFT_REPLAY_PROGRESS="0")
        lake = ["--lake", str(work / "lake"), "--cluster", "bench"]
        cli = [sys.executable, "-m", "replay.cli"]
        secs, peak, rc = measure([*cli, "ingest", str(work / "dump"), *lake, "--no-progress", "--no-replay"], env)
        print(f"kraft-replay ingest (decode on the executors, Delta MERGE): {secs:,.1f} s, "
              f"{records / secs:,.0f} records/s, peak RSS {peak} (driver {args.memory}), exit {rc}")
        secs_r, peak_r, rc_r = measure([*cli, "replay", *lake], env)
        print(f"kraft-replay replay (the Spark replay into the five replay tables): {secs_r:,.1f} s, peak RSS {peak_r}, "
              f"exit {rc_r}")

        from replay.harness import jvm

        kafka = [jvm.java(), "-Xmx1g", "-cp", jvm.kafka_classpath(), "org.apache.kafka.tools.DumpLogSegments",
                 "--cluster-metadata-decoder", "--files", ",".join(map(str, paths))]
        secs_k, peak_k, rc_k = measure(kafka)
        print(f"Kafka DumpLogSegments (decode + print only): {secs_k:,.1f} s, {records / secs_k:,.0f} records/s, "
              f"peak RSS {peak_k}, exit {rc_k}")
    finally:
        if args.keep:
            print(f"kept {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
