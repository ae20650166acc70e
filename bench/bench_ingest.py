"""Ingest + replay of a large synthetic metadata log, next to Kafka's own DumpLogSegments on the same files.

    python -m bench.bench_ingest                 # 300,000 ACL creates (~390,000 records with removes)
    python -m bench.bench_ingest --acls 1000000 --keep

Writes the log as segments of `--segment-mib` (64 MiB; 1024 for Kafka's default segment size) with our writer, then
times, in separate processes so their peak memory is their own: `kraft-replay ingest --no-replay` (decode on the
executors, Delta MERGE), `kraft-replay replay` (the Spark replay), then a later dump of the last `--tail` records
(ingest, and the replay, which resumes from the snapshot the first dump ends with; and `replay --full` of the
same for comparison), and Kafka 4.3.1's `DumpLogSegments
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
from replay.kafka import files, synth, writer


def write_log(directory: Path, acls: int, seed: int, segment_bytes: int, tail: int
              ) -> tuple[list[Path], int, int, int]:
    """The log's segments under `directory/dump`, all but its last `tail` records (about), with a snapshot of the
    ACLs at that point; the rest as one segment under `directory/later` (a later dump of the new files).
    Returns (first dump's segments, their bytes, their records, the later dump's records)."""
    total = sum(len(b.records) for b in synth.generate_large(seed, acls))
    part, later = directory / "dump" / files.METADATA_PARTITION_DIR, directory / "later" / files.METADATA_PARTITION_DIR
    part.mkdir(parents=True)
    later.mkdir(parents=True)
    paths: list[Path] = []
    out = None
    size = records = 0
    live: dict[str, synth.SynthRecord] = {}
    cut: int | None = None
    last_time = 0
    for batch in synth.generate_large(seed, acls):
        if cut is None and batch.base_offset >= total - tail:
            cut = batch.base_offset
            writer.write_snapshot(str(part), cut, 1, [synth.record_input(r) for r in live.values()], last_time)
            if out is not None:
                out.close()
            out = open(later / files.segment_name(cut), "wb")  # noqa: SIM115 - closed at the end
        if cut is None and (out is None or out.tell() >= segment_bytes):
            if out is not None:
                out.close()
            path = part / files.segment_name(batch.base_offset)
            paths.append(path)
            out = open(path, "wb")  # noqa: SIM115 - closed when the segment is full or at the end
        data = synth.encode(batch)
        assert out is not None
        out.write(data)
        if cut is None:
            size += len(data)
            records += len(batch.records)
            for r in batch.records:
                if r.api_key == 18:
                    live[r.data["id"]] = r
                else:
                    live.pop(r.data["id"], None)
            last_time = batch.time
    if out is not None:
        out.close()
    return paths, size, records, total - records


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--acls", type=int, default=300_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--segment-mib", type=int, default=64)
    ap.add_argument("--memory", default="4g", help="Spark driver memory")
    ap.add_argument("--tail", type=int, default=10_000, help="records in the later dump (replayed incrementally)")
    ap.add_argument("--keep", action="store_true")
    args = ap.parse_args(argv)

    work = Path(tempfile.mkdtemp(prefix="kraft-bench-ingest-"))
    try:
        t = time.monotonic()
        paths, size, records, tail = write_log(work, args.acls, args.seed, args.segment_mib << 20,
                                                         args.tail)
        print(f"wrote {records:,} records, {size / 2**20:,.1f} MiB in {len(paths)} segment(s) and a snapshot at their "
              f"end, then {tail:,} more records in a later segment, in {time.monotonic() - t:.1f} s "
              f"({os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")

        env = dict(os.environ, KRAFT_REPLAY_DRIVER_MEMORY=args.memory, KRAFT_REPLAY_PROGRESS="0")
        lake = ["--lake", str(work / "lake"), "--lake-cluster", "bench"]
        cli = [sys.executable, "-m", "replay.cli"]
        secs, peak, rc = measure([*cli, "ingest", str(work / "dump"), *lake, "--no-progress", "--no-replay"], env)
        print(f"kraft-replay ingest (decode on the executors, Delta MERGE): {secs:,.1f} s, "
              f"{records / secs:,.0f} records/s, peak RSS {peak} (driver {args.memory}), exit {rc}")
        secs_r, peak_r, rc_r = measure([*cli, "replay", *lake], env)
        print(f"kraft-replay replay (the Spark replay into the five replay tables): {secs_r:,.1f} s, peak RSS {peak_r}, "
              f"exit {rc_r}")
        secs_l, peak_l, rc_l = measure([*cli, "ingest", str(work / "later"), *lake, "--no-progress", "--no-replay"],
                                       env)
        print(f"kraft-replay ingest of the later dump ({tail:,} records): {secs_l:,.1f} s, peak RSS {peak_l}, "
              f"exit {rc_l}")
        loud = {k: v for k, v in env.items() if k != "KRAFT_REPLAY_PROGRESS"}  # the replay's status line says how
        secs_i, peak_i, rc_i = measure([*cli, "replay", *lake], loud, echo=True)
        print(f"kraft-replay replay after it (incremental): {secs_i:,.1f} s, peak RSS {peak_i}, exit {rc_i}")
        secs_f, peak_f, rc_f = measure([*cli, "replay", "--full", *lake], loud, echo=True)
        print(f"kraft-replay replay --full of the same ({records + tail:,} records): {secs_f:,.1f} s, "
              f"peak RSS {peak_f}, exit {rc_f}")

        from tests.harness import jvm

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
