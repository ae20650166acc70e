"""Batch as-of authorization at scale: a history of 100,000 ACL lifetimes, 1,000,000 access tuples, next to Kafka.

    python -m bench.bench_authorize [--acls 100000] [--requests 1000000] [--master local[*]] [--memory 6g]
                                    [--no-kafka] [--keep]

Both are generated inside Spark (no Python loop over rows) and written as Parquet under a temporary directory,
so the authorization reads files as it would read the lake's Delta tables. The decisions are written to Parquet
too (the measured job includes the write). Printed: generation and authorization wall time, decisions by kind,
and peak memory of the **whole process tree** (this Python driver, the JVM it started, and the Python workers the
JVM forks from its own threads -- found by walking /proc/<pid>/task/*/children recursively), sampled every 50 ms
separately for each phase, plus the JVM's VmHWM and heap pools' peak.

Then (unless --no-kafka) Kafka 4.3.1's own StandardAuthorizer answers the same questions in the same run, through
the Java oracle of the differential test (`tests.harness.oracle`): the ACL lifetimes are replayed into it in offset
order (addAcl at `valid_from_offset`, removeAcl at `valid_to_offset`, i.e. one state the history allows) and
every access tuple is asked at its `as_of_offset`, streamed from the decisions (sorted; never collected). Printed:
Kafka's wall time and peak tree memory for that phase, and how many of our *certain* decisions it confirms
(must be all; UNKNOWN answers and requests outside known history are not comparable and are counted apart).

The shape is meant to be realistic rather than adversarial: 2,000 user principals plus `User:*`, 20,000 topics,
LITERAL ACLs on topics, PREFIXED ACLs on team prefixes, a few LITERAL `*` ACLs, 10% DENY, 5% host-specific,
30% of the lifetimes ended, 3% with an uncertain bound, a hole in coverage; requests hit existing topics, names
under team prefixes, and unknown names, 10% by time instead of offset.
"""

from __future__ import annotations

import argparse
import os
import shutil
import tempfile
import time
from collections.abc import Iterator
from typing import Any
from urllib.parse import quote

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from bench.measure import TreeMemory, jvm_pid

MAX_OFFSET = 250_000
T0 = 1_700_000_000_000


def _pick(seed: int, values: list[str]) -> Any:
    arr = F.array(*[F.lit(v) for v in values])
    return F.element_at(arr, (F.floor(F.rand(seed) * len(values)) + 1).cast("int"))


def history(spark: SparkSession, n: int) -> DataFrame:
    r = F.rand
    kind = r(1)
    name = (F.when(kind < 0.70, F.concat(F.lit("topic-"), F.floor(r(2) * 20_000).cast("string")))
            .when(kind < 0.97, F.concat(F.lit("team-"), F.floor(r(3) * 300).cast("string"), F.lit("-")))
            .otherwise(F.lit("*")))
    pattern = F.when((kind >= 0.70) & (kind < 0.97), F.lit("PREFIXED")).otherwise(F.lit("LITERAL"))
    principal = F.when(r(4) < 0.01, F.lit("User:*")).otherwise(
        F.concat(F.lit("User:u"), F.floor(r(5) * 2000).cast("string")))
    host = F.when(r(6) < 0.05, F.concat(F.lit("10.0.0."), F.floor(r(7) * 50).cast("string"))).otherwise(F.lit("*"))
    op = _pick(8, ["READ", "READ", "WRITE", "WRITE", "DESCRIBE", "DELETE", "ALTER", "DESCRIBE_CONFIGS",
                   "ALTER_CONFIGS", "CREATE", "ALL"])
    perm = F.when(r(9) < 0.10, F.lit("DENY")).otherwise(F.lit("ALLOW"))
    ended = r(11) < 0.30
    unsure = r(13) < 0.03
    # the start is drawn once and the end computed from the column: two `rand(10)` expressions need not agree
    df = spark.range(n).select(
        F.lit("bench").alias("cluster_id"), F.concat(F.lit("acl-"), F.col("id").cast("string")).alias("acl_id"),
        F.lit("TOPIC").alias("resource_type"), name.alias("resource_name"), pattern.alias("pattern_type"),
        principal.alias("principal"), host.alias("host"), op.alias("operation"), perm.alias("permission_type"),
        F.floor(r(10) * MAX_OFFSET).cast("long").alias("valid_from_offset"),
        F.when(ended, 1 + F.floor(r(12) * 50_000).cast("long")).alias("_length"), unsure.alias("_unsure"))
    df = df.withColumn("valid_to_offset", F.col("valid_from_offset") + F.col("_length")).drop("_length")
    return df.select(
        "cluster_id", "acl_id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
        "permission_type", "valid_from_offset",
        F.when(F.col("_unsure"), F.greatest(F.lit(0), F.col("valid_from_offset") - 500))
        .otherwise(F.col("valid_from_offset")).alias("valid_from_min_offset"),
        (~F.col("_unsure")).alias("valid_from_exact"),
        (F.lit(T0) + F.col("valid_from_offset") * 10).alias("valid_from_time"), F.lit("RECORD").alias("began_by"),
        "valid_to_offset", F.col("valid_to_offset").alias("valid_to_min_offset"),
        F.when(F.col("valid_to_offset").isNotNull(), F.lit(True)).alias("valid_to_exact"),
        (F.lit(T0) + F.col("valid_to_offset") * 10).alias("valid_to_time"),
        F.when(F.col("valid_to_offset").isNotNull(), F.lit("RECORD")).alias("ended_by"))


def requests(spark: SparkSession, n: int) -> DataFrame:
    r = F.rand
    kind = r(21)
    name = (F.when(kind < 0.6, F.concat(F.lit("topic-"), F.floor(r(22) * 20_000).cast("string")))
            .when(kind < 0.9, F.concat(F.lit("team-"), F.floor(r(23) * 300).cast("string"), F.lit("-app-"),
                                       F.floor(r(24) * 100).cast("string")))
            .otherwise(F.concat(F.lit("other-"), F.floor(r(25) * 1000).cast("string"))))
    by_time = r(26) < 0.1
    at = F.floor(r(27) * (MAX_OFFSET + 5_000)).cast("long")
    return spark.range(n).select(
        F.col("id").alias("request_id"), F.lit("bench").alias("cluster_id"),
        F.concat(F.lit("User:u"), F.floor(r(28) * 2000).cast("string")).alias("principal"),
        F.concat(F.lit("10.0.0."), F.floor(r(29) * 60).cast("string")).alias("host"),
        _pick(30, ["READ", "WRITE", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER", "DELETE"]).alias("operation"),
        F.lit("TOPIC").alias("resource_type"), name.alias("resource_name"),
        F.when(~by_time, at).alias("offset"), F.when(by_time, F.lit(T0) + at * 10).alias("time"))


class FileLake:
    def __init__(self, spark: SparkSession, root: str) -> None:
        self.spark, self.root = spark, root

    def read(self, name: str) -> DataFrame:
        return self.spark.read.parquet(os.path.join(self.root, name))


def jvm_memory(spark: SparkSession) -> dict[str, float]:
    jvm = spark.sparkContext._jvm
    assert jvm is not None
    pid = jvm_pid(spark)
    hwm = rss = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                hwm = int(line.split()[1])
            elif line.startswith("VmRSS:"):
                rss = int(line.split()[1])
    peak_heap = 0
    for pool in jvm.java.lang.management.ManagementFactory.getMemoryPoolMXBeans():
        if str(pool.getType()) == "Heap memory":
            peak_heap += int(pool.getPeakUsage().getUsed())
    return {"jvm_rss_peak_mib": hwm / 1024, "jvm_rss_now_mib": rss / 1024, "jvm_heap_pools_peak_mib": peak_heap / 2**20}


def _events(history: DataFrame) -> Iterator[tuple[int, int, Any]]:
    """(offset, 0 = remove / 1 = add, row) for every lifetime bound, in offset order (removes first)."""
    fields = ["acl_id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
              "permission_type"]
    ev = history.select(*fields, F.explode(F.array(
        F.struct(F.col("valid_from_offset").alias("o"), F.lit(1).alias("k")),
        F.struct(F.col("valid_to_offset").alias("o"), F.lit(0).alias("k")))).alias("e"))
    ev = ev.where(F.col("e.o").isNotNull()).select(F.col("e.o").alias("o"), F.col("e.k").alias("k"), *fields)
    for r in ev.orderBy("o", "k").toLocalIterator(prefetchPartitions=True):
        yield int(r["o"]), int(r["k"]), r


def compare_with_kafka(spark: SparkSession, root: str, super_users: str, chunk: int = 20_000) -> dict[str, Any]:
    """Replay the history into Kafka's StandardAuthorizer (oracle JVM) and ask it every decided question at its
    as_of_offset; count agreement with our certain decisions. Streams both sides; nothing is collected."""
    from replay.kafka.acl import AclBinding
    from tests.harness.oracle import AuthorizerOracle, acl_command, authorize_command

    history = spark.read.parquet(os.path.join(root, "acl_history"))
    decided = (spark.read.parquet(os.path.join(root, "decisions")).where(F.col("as_of_offset").isNotNull())
               .select("as_of_offset", "principal", "host", "operation", "resource_type", "resource_name",
                       "decision", "certain").orderBy("as_of_offset"))
    counts = {"asked": 0, "agree": 0, "disagree": 0, "not comparable (UNKNOWN)": 0, "kafka errors": 0}
    examples: list[str] = []
    live: dict[AclBinding, tuple[str, int]] = {}  # content -> (id given to Kafka, live copies): Kafka refuses twins
    with AuthorizerOracle(timeout_ms=60_000) as oracle:
        oracle.configure(super_users=super_users, allow_everyone=False)
        oracle.complete_initial_load()
        events = _events(history)
        pending = next(events, None)
        commands: list[str] = []
        expected: list[tuple[Any, ...] | None] = []

        def flush() -> None:
            answers = oracle.send(commands)
            for want, got in zip(expected, answers, strict=True):
                if want is None:
                    if got != "OK":
                        counts["kafka errors"] += 1
                    continue
                counts["asked"] += 1
                if got.startswith("ERROR") or got == "TIMEOUT":
                    counts["kafka errors"] += 1
                elif want[-1] is None:
                    counts["not comparable (UNKNOWN)"] += 1
                elif got == want[-1]:
                    counts["agree"] += 1
                else:
                    counts["disagree"] += 1
                    if len(examples) < 5:
                        examples.append(f"{want[:-1]}: ours {want[-1]}, Kafka {got}")
            commands.clear()
            expected.clear()

        for d in decided.toLocalIterator(prefetchPartitions=True):
            at = int(d["as_of_offset"])
            while pending is not None and pending[0] <= at:
                _, kind, r = pending
                b = AclBinding(r["resource_type"], r["resource_name"], r["pattern_type"], r["principal"], r["host"],
                               r["operation"], r["permission_type"])
                kafka_id, copies = live.get(b, (r["acl_id"], 0))
                if kind == 1:
                    live[b] = (kafka_id, copies + 1)
                    if copies == 0:
                        commands.append(acl_command(kafka_id, b))
                        expected.append(None)
                elif copies <= 1:
                    live.pop(b, None)
                    commands.append(f"R\t{quote(kafka_id, safe='')}")
                    expected.append(None)
                else:
                    live[b] = (kafka_id, copies - 1)
                pending = next(events, None)
            ours = d["decision"] if d["certain"] and d["decision"] in ("ALLOWED", "DENIED") else None
            commands.append(authorize_command(d["principal"], d["host"], d["operation"], d["resource_type"],
                                              d["resource_name"]))
            expected.append((at, d["principal"], d["host"], d["operation"], d["resource_name"], ours))
            if len(commands) >= chunk:
                flush()
        if commands:
            flush()
    return {"counts": counts, "examples": examples}


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    ap.add_argument("--acls", type=int, default=100_000)
    ap.add_argument("--requests", type=int, default=1_000_000)
    ap.add_argument("--master", default=None)
    ap.add_argument("--memory", default=None)
    ap.add_argument("--no-kafka", action="store_true", help="skip the comparison with Kafka's StandardAuthorizer")
    ap.add_argument("--keep", action="store_true", help="keep the generated files")
    args = ap.parse_args(argv)

    from replay.spark.authorize import authorize
    from replay.spark.session import get_spark

    memory = TreeMemory()
    spark = get_spark(args.master, memory=args.memory)
    root = tempfile.mkdtemp(prefix="bench-authorize-")
    super_users = "User:u0"
    try:
        t = time.perf_counter()
        with memory.phase("generate"):
            history(spark, args.acls).write.parquet(os.path.join(root, "acl_history"))
            spark.createDataFrame([("bench", 0, 120_000, "log", None), ("bench", 120_001, 120_400, "missing", None),
                                   ("bench", 120_401, MAX_OFFSET, "log", None)],
                                  "cluster_id string, start_offset long, end_offset long, kind string, source string"
                                  ).write.parquet(os.path.join(root, "log_coverage"))
            spark.range(0, MAX_OFFSET + 1, 100).select(
                F.lit("bench").alias("cluster_id"), F.col("id").alias("offset"),
                (F.lit(T0) + F.col("id") * 10).alias("time")
            ).write.parquet(os.path.join(root, "offset_times"))
            requests(spark, args.requests).write.parquet(os.path.join(root, "requests"))
        gen = time.perf_counter() - t

        lake = FileLake(spark, root)
        reqs = spark.read.parquet(os.path.join(root, "requests"))
        t = time.perf_counter()
        with memory.phase("authorize"):
            out = authorize(reqs, lake, super_users=super_users, allow_everyone=False)
            out.write.parquet(os.path.join(root, "decisions"))
        took = time.perf_counter() - t

        decided = spark.read.parquet(os.path.join(root, "decisions"))
        counts = {f"{r['decision']}/{r['reason']}": r["count"] for r in
                  decided.groupBy("decision", "reason").count().orderBy("decision", "reason").collect()}
        total = sum(counts.values())
        mem = jvm_memory(spark)
        print(f"ACL lifetimes: {args.acls:,}  access tuples: {args.requests:,}  decided rows: {total:,}")
        print(f"generate + write inputs: {gen:.1f} s (peak tree RSS {memory.text('generate')})")
        print(f"authorize + write decisions: {took:.1f} s  ({args.requests / took:,.0f} tuples/s)")
        for k, v in counts.items():
            print(f"  {k:40s} {v:>10,}")
        print(f"peak memory while authorizing: whole process tree RSS {memory.text('authorize')} "
              f"(JVM VmHWM {mem['jvm_rss_peak_mib']:,.0f} MiB, JVM heap pools peak "
              f"{mem['jvm_heap_pools_peak_mib']:,.0f} MiB; driver memory {spark.conf.get('spark.driver.memory', '?')}, "
              f"master {spark.conf.get('spark.master')}, {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f})")
        if not args.no_kafka:
            t = time.perf_counter()
            with memory.phase("kafka"):
                kafka = compare_with_kafka(spark, root, super_users)
            k_took = time.perf_counter() - t
            c = kafka["counts"]
            print(f"Kafka 4.3.1 StandardAuthorizer (oracle JVM, replaying the lifetimes in offset order): "
                  f"{c['asked']:,} questions in {k_took:.1f} s including streaming both sides "
                  f"({c['asked'] / k_took:,.0f} questions/s), peak tree RSS {memory.text('kafka')}")
            print(f"  our certain decisions confirmed: {c['agree']:,}; disagreeing: {c['disagree']:,}; "
                  f"not comparable (UNKNOWN): {c['not comparable (UNKNOWN)']:,}; Kafka errors: {c['kafka errors']:,}")
            for line in kafka["examples"]:
                print(f"  mismatch: {line}")
    finally:
        memory.close()
        if args.keep:
            print(f"inputs and decisions kept in {root}")
        else:
            shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    main()
