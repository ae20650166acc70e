"""The Spark settings of the suite: the session every Spark test shares (`conftest.spark`) and the servers and
child processes some tests start (a Spark Connect server, a crashed ingest), so that each runs as the others do."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from replay.spark import class_archive
from replay.spark.session import QUICK_JVM_OPTIONS, STATUS_RETENTION, WORK_JVM_OPTIONS

SPARK_TEST_CONF = {
    "spark.sql.shuffle.partitions": "2",
    "spark.default.parallelism": "2",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.databricks.delta.snapshotPartitions": "2",
    "spark.sql.sources.parallelPartitionDiscovery.parallelism": "2",
    # room for every table of a few lakes (a lake has about a dozen): with 3, the replay's tables pushed each other
    # out and every reader computed its table's snapshot again (3 Spark jobs each). Four warm full replays of a
    # sample, twice each way: 85.7 and 90.6 s of wall and 142 and 150 s of JVM CPU with room for 1,000 against 100.2
    # and 109.1 s and 155 and 161 s with 3. Delta's default (what users get) is 10,000; a bound keeps the suite's
    # long session from holding the snapshots of every lake its tests made.
    "spark.databricks.delta.delta.log.cacheSize": "64",
    "spark.sql.adaptive.coalescePartitions.initialPartitionNum": "2",
    # the tests' data are tiny: compiling Java for every new plan costs more than running it (a warm replay of a
    # sample took 52 s with code generation, 28 s without); results are Spark's to keep equal in both modes, and
    # the benchmarks (bench/, which check every answer) run with Spark's defaults
    "spark.sql.codegen.wholeStage": "false",
    "spark.sql.codegen.factoryMode": "NO_CODEGEN",
    "kraft.replay.bucketOffsets": "16",  # tiny offset ranges, so that every running value is carried across them
    **STATUS_RETENTION,  # what `get_spark` gives its sessions, for the Connect servers and children started here too
}

# The suite's two long-lived sessions hold about 1 GB live after an hour (the plans of the DataFrames the tests and
# their module fixtures keep): with a 2g heap the serial collector ran 117 full collections in the first hour of one
# session (its VM thread, where they run, used 344 s of CPU, 16% of the JVM's); a 3g heap leaves three times the
# room between them.
SESSION_MEMORY = "3g"

# the JVMs of the suite (its session, the Connect servers, the crashed and the cluster runs): a 1-2 GiB heap on two
# cores, beside two or three other JVMs. The serial collector has no concurrent threads to compete for the cores
# (the default G1 has), and no perf-data file is mapped per JVM. Measured on one process doing three ingests and
# replays of the crash test's dump: 201 s of CPU with Spark's defaults, 186 s with the serial collector, 165 s with
# both (warm runs 26-28 s against 20-22 s). Only the collector and the JVM's bookkeeping change, never a result.
JVM_OPTIONS = "-XX:+UseSerialGC -XX:-UsePerfData"
# drivers also map the class archive `make setup` built (`replay.spark.class_archive`), as the CLI's do: a session
# with the suite's options ready in 3.7-3.9 s and its first job in 1.2 s, against 6.5-6.9 s and 2.7 s without
DRIVER_JVM_OPTIONS = f"{JVM_OPTIONS} {class_archive.jvm_options()}".strip()
# The suite's long-lived sessions also get room for 1 GiB of compiled code (the default reserves 240 MiB with both
# compilers, split between the profiled and the optimized code). A warm replay of a sample still spent 9-13 s of its
# 40-50 s of JVM CPU in the compiler threads after five replays in one session, with 162 MiB of compiled code live.
# Measured on one session (the retention-gap sample ingested, then six full replays; two pairs, 2026-12-02): the
# JVM's CPU 318 and 315 s with the larger cache against 345 and 328 s without, replays 2-6 205 and 211 s against
# 227 and 219 s. Only where the JIT keeps its code changes, never a result.
# They also start with their whole heap (`-Xms`), and so with the serial collector's full young generation, a third
# of it (1 GiB of 3): from the JVM's small default initial heap the young generation starts at a third of that and
# grows only as the old generation does, so the objects of one query (plans, shuffle and broadcast blocks) outlived a
# young collection, were copied into the old generation and cost full collections later. Measured on two sessions
# side by side (test_feed, test_incremental_replay and test_replay_visibility, `make test`'s selection, 2026-12-05):
# the collector's thread 18.8 s of CPU against 32.9 s, the JVM 526 s against 542 s. Only the heap's layout changes.
# And, as every driver that does long work, C2 inlines less deeply (`session.WORK_JVM_OPTIONS`): the suite's sessions
# run tiny data through Spark's planner, and the JIT kept compiling its layers of small methods to the end of the run.
# A cold then four warm full replays of a sample in one session (2026-12-05): the C2 thread 20.3 s of CPU against
# 45.6 and 49.5 s with JDK 17's defaults, the JVM 141.7 s against 149.1 and 166.5 s; CI (`.ci/run`, same host speed):
# 2,134 and 2,214 s of machine CPU, 18 min 18 s and 19 min 4 s of tests, against 2,255-2,277 s and 19 min 15-25 s in
# the three runs before.
LONG_LIVED_JVM_OPTIONS = (f"{DRIVER_JVM_OPTIONS} -XX:ReservedCodeCacheSize=1g -Xms{SESSION_MEMORY} "
                          f"{WORK_JVM_OPTIONS}")
SPARK_TEST_CONF["spark.driver.extraJavaOptions"] = LONG_LIVED_JVM_OPTIONS

# a JVM that lives for one or two ingests and replays (a crashed run, the cluster test's driver and executors, the
# atomicity test's child): only the quick C1 compiler, with room for all its code (at its default 48 MiB code cache
# the JIT filled it and stopped compiling). In one process doing ingests and replays of the crash test's dump, C2 compilation was 44% of the JVM's
# CPU in the first three runs: C1 only cut the first run from 85 to 55 s of CPU and the second from 34 to 30, and
# was dearer from the fourth run on (28 against 20-26 s), so the suite's long-lived session keeps both compilers
# (checked again at stop 41: the feed and visibility modules in one session, C1 only 636 s wall and 884 s of
# machine CPU against 468 s and 769 s with both, though the JIT's compile time was 230 s of a 6-minute run; and at
# stop 59 in CI itself: 960 passed in 1811 s with 3,598 s of machine CPU against 1452 s with both compilers, though
# six replays of a sample alone used 27% less JVM CPU with C1 only).
SHORT_LIVED_JVM_OPTIONS = f"{DRIVER_JVM_OPTIONS} {QUICK_JVM_OPTIONS}"  # what the CLI gives a question's driver
LEAN_JVMS = {"spark.driver.extraJavaOptions": SHORT_LIVED_JVM_OPTIONS,
             "spark.executor.extraJavaOptions": f"{JVM_OPTIONS} {QUICK_JVM_OPTIONS}"}  # another class path: no archive
# A Spark Connect server of one test (an ingest and a few dozen queries, or one notebook): the pipeline test's
# server with its ingest and eight questions used 155 s of machine CPU with C1 only against 193 s with both compilers
# (alone, quiet machine; wall 123 s against 115 s).
# Its clients mostly ask questions, so adaptive execution is off there, as the local tests that ask them run
# (`aqe_off`).
SHORT_LIVED_SERVER_CONF = {**SPARK_TEST_CONF, **LEAN_JVMS, "spark.sql.adaptive.enabled": "false"}

# the code generation part alone, for processes that keep Spark's other defaults
NO_CODEGEN = {k: v for k, v in SPARK_TEST_CONF.items() if k.startswith("spark.sql.codegen.")}


@contextlib.contextmanager
def aqe_off(spark: Any) -> Iterator[None]:
    """Adaptive execution off while the block runs. The audit and authorize queries are deep plans over a handful
    of rows: AQE runs each of their shuffles as a job of its own (a warm who_can: 38 jobs and 7 s with it, 8 jobs
    and 4 s without). The answers are the same either way. The replay tests keep it on, as it is by default, except
    a few that mostly ask questions (and one incremental replay, where Spark 4.2 failed inside a union with it off
    until the replay guarded it: `replay.spark.session.safe_unions`)."""
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    try:
        yield
    finally:
        spark.conf.set(key, before)
