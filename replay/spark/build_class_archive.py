"""Build the Spark driver's class archive (`replay.spark.class_archive`): `python -m replay.spark.build_class_archive`
(`make setup` runs it) writes it when it is missing, `--force` again."""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from pyspark import SparkContext
from pyspark.sql import Window
from pyspark.sql import functions as F

from replay.spark.class_archive import ENV, archive_path
from replay.spark.session import get_spark
from replay.spark.tables import Lake


def build(path: Path, say: bool = True) -> bool:
    """Write the archive at `path`: a child process runs a little Delta work in a driver that stores the classes it
    loaded as it exits. Returns whether the archive was written."""
    path.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="kraft-replay-cds-") as work:
        partial = Path(work) / "driver.jsa"
        env = {**os.environ, ENV: "off"}
        done = subprocess.run([sys.executable, "-m", "replay.spark.build_class_archive", "--workload", work, str(partial)],
                              env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, check=False)
        if done.returncode != 0 or not partial.is_file():
            tail = "\n".join(done.stderr.strip().splitlines()[-5:])
            print(f"note: no class archive for the Spark driver (it only makes Spark start faster): {tail}",
                  file=sys.stderr)
            return False
        os.replace(shutil.copy(partial, path.with_suffix(".tmp")), path)  # whole or not at all
    if say:
        print(f"class archive for the Spark driver: {path} ({path.stat().st_size / 2**20:.0f} MiB, "
              f"{time.monotonic() - started:.0f} s)", file=sys.stderr)
    return True


def _workload(work: str, archive: str) -> None:
    """Load what most commands load: a session with Delta, a Delta table written, read, joined, ranked and
    aggregated; then exit the JVM so that it writes the archive (it does so on a normal exit only). Kept small, as
    setup pays for it: the classes of a whole replay add seconds to the build for little more at start-up."""
    spark = get_spark(master="local[2]", conf={"spark.driver.extraJavaOptions": f"-XX:ArchiveClassesAtExit={archive}",
                                               "spark.ui.enabled": "false"})
    Lake(spark, os.path.join(work, "lake")).ensure("replay_state")
    rows = spark.range(1000).select(F.lit("c").alias("cluster_id"), F.col("id").alias("offset"),
                                    (F.col("id") % 7).alias("k"), F.sha2(F.col("id").cast("string"), 256).alias("h"))
    path = os.path.join(work, "t")
    rows.write.format("delta").mode("overwrite").save(path)
    back = spark.read.format("delta").load(path)
    ranked = back.withColumn("r", F.row_number().over(Window.partitionBy("k").orderBy(F.col("offset").desc())))
    ranked.join(F.broadcast(back.groupBy("k").agg(F.max("offset").alias("m"))), "k").where("r = 1").collect()
    spark.sql(f"SELECT k, count(*) FROM delta.`{path}` GROUP BY k").collect()
    gateway = SparkContext._gateway
    spark.stop()
    if gateway is not None and getattr(gateway, "proc", None) is not None:
        gateway.shutdown()
        gateway.proc.stdin.close()  # the JVM exits when its stdin closes, writing the archive
        gateway.proc.wait(timeout=600)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m replay.spark.build_class_archive",
                                 description="build the Spark driver's class archive if it is missing")
    ap.add_argument("--force", action="store_true", help="build it again")
    ap.add_argument("--workload", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.workload:
        _workload(*args.workload)
        return 0
    path = archive_path()
    if path is None:
        print(f"class archive: turned off ({ENV}) or no java found", file=sys.stderr)
        return 0
    if path.is_file() and not args.force:
        print(f"class archive for the Spark driver: {path} (there already)", file=sys.stderr)
        return 0
    build(path)
    return 0  # without an archive everything still works, only slower: setup goes on


if __name__ == "__main__":
    sys.exit(main())
