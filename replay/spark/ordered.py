"""Running values over a cluster's log without running its whole history through one task.

A window partitioned by `cluster_id` alone sorts and scans every row of a cluster in a single task. The replay's
running values (the highest epoch so far, the last transaction marker before a record, the next one after it, a
row's number) are instead computed per offset range ("bucket") in parallel, with what the earlier (or later)
buckets contribute carried in from a small per-bucket summary: one row per bucket, so the only per-cluster window
left runs over a few rows. The bucket size is `kraft.replay.bucketOffsets` in the Spark conf (a test makes it tiny
so that every carry is exercised).
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence

from pyspark.sql import Column, DataFrame, SparkSession, Window
from pyspark.sql import functions as F

BUCKET_CONF = "kraft.replay.bucketOffsets"
BUCKET_ENV = "KRAFT_REPLAY_BUCKET_OFFSETS"
DEFAULT_BUCKET_OFFSETS = 1 << 18

_UNBOUNDED = Window.unboundedPreceding


def bucket_offsets(spark: SparkSession) -> int:
    """Offsets per bucket: the Spark conf, else the environment, else the default."""
    value = spark.conf.get(BUCKET_CONF, None) or os.environ.get(BUCKET_ENV)
    size = int(value) if value else DEFAULT_BUCKET_OFFSETS
    if size < 1:
        raise ValueError(f"{BUCKET_CONF} must be at least 1, not {size}")
    return size


def bucket_of(offset: Column | str, size: int) -> Column:
    o = F.col(offset) if isinstance(offset, str) else offset
    return F.floor(o / F.lit(size)).cast("long")


@dataclasses.dataclass(frozen=True)
class Running:
    """One running value to add as column `name`.

    kind:
    * `last_before` / `last_upto`: the last non-null `value` among the rows before this one (or up to and
      including it);
    * `first_after`: the first non-null `value` among the rows after this one;
    * `max_before` / `max_upto`: the greatest `value` among the rows before (up to) this one;
    * `sum_upto`: the sum of `value` over the rows up to this one (nulls count as 0);
    * `row_number`: this row's number in the order, from 1.
    """

    name: str
    kind: str
    value: Column = dataclasses.field(default_factory=lambda: F.lit(1))


_KINDS = {"last_before", "last_upto", "first_after", "max_before", "max_upto", "sum_upto", "row_number"}


def with_running(df: DataFrame, offset: str, order: Sequence[Column | str], values: Sequence[Running],
                 size: int | None) -> DataFrame:
    """`df` with the running `values`, in the order `order` within each cluster, whose first key must be
    `offset` ascending (the bucket is taken from it, so rows of one offset share a bucket). `size` None: every
    cluster's rows fit in one bucket, so plain windows per cluster do it without the carrying."""
    for v in values:
        if v.kind not in _KINDS:
            raise ValueError(f"unknown running kind {v.kind}")
    if size is None:
        return _whole(df, order, values)
    c = F.col
    keys = [c(o) if isinstance(o, str) else o for o in order]
    rank = F.struct(*[k.alias(f"k{i}") for i, k in enumerate(_ascending(order))])
    d = df.withColumn("_bk", bucket_of(offset, size))
    for i, v in enumerate(values):
        d = d.withColumn(f"_v{i}", v.value)
    summary = []
    for i, v in enumerate(values):
        val = c(f"_v{i}")
        if v.kind in ("last_before", "last_upto"):
            summary.append(F.max_by(val, F.when(val.isNotNull(), rank)).alias(f"_s{i}"))
        elif v.kind == "first_after":
            summary.append(F.min_by(val, F.when(val.isNotNull(), rank)).alias(f"_s{i}"))
        elif v.kind in ("max_before", "max_upto"):
            summary.append(F.max(val).alias(f"_s{i}"))
        elif v.kind == "sum_upto":
            summary.append(F.sum(val).alias(f"_s{i}"))
        else:
            summary.append(F.count(F.lit(1)).alias(f"_s{i}"))
    per_bucket = d.groupBy("cluster_id", "_bk").agg(*summary)
    earlier = Window.partitionBy("cluster_id").orderBy("_bk").rowsBetween(_UNBOUNDED, -1)
    later = Window.partitionBy("cluster_id").orderBy(c("_bk").desc()).rowsBetween(_UNBOUNDED, -1)
    carries = []
    for i, v in enumerate(values):
        s = c(f"_s{i}")
        if v.kind in ("last_before", "last_upto"):
            carries.append(F.last(s, ignorenulls=True).over(earlier).alias(f"_c{i}"))
        elif v.kind == "first_after":
            carries.append(F.last(s, ignorenulls=True).over(later).alias(f"_c{i}"))
        elif v.kind in ("max_before", "max_upto"):
            carries.append(F.max(s).over(earlier).alias(f"_c{i}"))
        else:
            carries.append(F.sum(s).over(earlier).alias(f"_c{i}"))
    carry = per_bucket.select("cluster_id", "_bk", *carries)
    d = d.join(carry, ["cluster_id", "_bk"], "left")
    inside = Window.partitionBy("cluster_id", "_bk").orderBy(*keys)
    inside_desc = Window.partitionBy("cluster_id", "_bk").orderBy(*[k.desc() for k in _ascending(order)])
    out = []
    for i, v in enumerate(values):
        val, carried = c(f"_v{i}"), c(f"_c{i}")
        if v.kind == "last_before":
            here = F.last(val, ignorenulls=True).over(inside.rowsBetween(_UNBOUNDED, -1))
            out.append(F.coalesce(here, carried).alias(v.name))
        elif v.kind == "last_upto":
            here = F.last(val, ignorenulls=True).over(inside.rowsBetween(_UNBOUNDED, 0))
            out.append(F.coalesce(here, carried).alias(v.name))
        elif v.kind == "first_after":
            here = F.last(val, ignorenulls=True).over(inside_desc.rowsBetween(_UNBOUNDED, -1))
            out.append(F.coalesce(here, carried).alias(v.name))
        elif v.kind == "max_before":
            out.append(F.greatest(F.max(val).over(inside.rowsBetween(_UNBOUNDED, -1)), carried).alias(v.name))
        elif v.kind == "max_upto":
            out.append(F.greatest(F.max(val).over(inside.rowsBetween(_UNBOUNDED, 0)), carried).alias(v.name))
        elif v.kind == "sum_upto":
            here = F.sum(val).over(inside.rowsBetween(_UNBOUNDED, 0))
            out.append((F.coalesce(here, F.lit(0)) + F.coalesce(carried, F.lit(0))).alias(v.name))
        else:
            out.append((F.row_number().over(inside) + F.coalesce(carried, F.lit(0))).alias(v.name))
    temp = ["_bk", *[f"_v{i}" for i in range(len(values))], *[f"_c{i}" for i in range(len(values))]]
    return d.select("*", *out).drop(*temp)


def _whole(df: DataFrame, order: Sequence[Column | str], values: Sequence[Running]) -> DataFrame:
    keys = _ascending(order)
    w = Window.partitionBy("cluster_id").orderBy(*keys)
    desc = Window.partitionBy("cluster_id").orderBy(*[k.desc() for k in keys])
    before, upto = w.rowsBetween(_UNBOUNDED, -1), w.rowsBetween(_UNBOUNDED, 0)
    out = []
    for v in values:
        if v.kind == "last_before":
            out.append(F.last(v.value, ignorenulls=True).over(before).alias(v.name))
        elif v.kind == "last_upto":
            out.append(F.last(v.value, ignorenulls=True).over(upto).alias(v.name))
        elif v.kind == "first_after":
            out.append(F.last(v.value, ignorenulls=True).over(desc.rowsBetween(_UNBOUNDED, -1)).alias(v.name))
        elif v.kind == "max_before":
            out.append(F.max(v.value).over(before).alias(v.name))
        elif v.kind == "max_upto":
            out.append(F.max(v.value).over(upto).alias(v.name))
        elif v.kind == "sum_upto":
            out.append(F.coalesce(F.sum(v.value).over(upto), F.lit(0)).alias(v.name))
        else:
            out.append(F.row_number().over(w).alias(v.name))
    return df.select("*", *out)


def _ascending(order: Sequence[Column | str]) -> list[Column]:
    """The order keys as plain columns (descending keys are passed as `Column.desc()`)."""
    return [F.col(o) if isinstance(o, str) else o for o in order]


def islands(df: DataFrame, offset: str, size: int | None) -> DataFrame:
    """Gaps and islands: the maximal runs of consecutive `offset`s per cluster (one row per offset in `df`), as
    (cluster_id, start_offset, end_offset). Runs are found per bucket, then the few runs that touch across a
    bucket boundary are joined.

    A bucket whose offsets are as many as its span (`whole_buckets`: nearly every bucket of a log) is one run
    without sorting its rows; only the rows of the other buckets are numbered in order. Sorting every offset cost
    the 10M-record log 5 s of task CPU, the shuffle of all its offsets included."""
    c = F.col
    d = df.select("cluster_id", c(offset).alias("_o"),
                  (bucket_of(offset, size) if size is not None else F.lit(0)).alias("_bk"))
    whole = whole_buckets(d)
    w = Window.partitionBy("cluster_id", "_bk").orderBy("_o")
    pieces = (d.join(F.broadcast(whole.select("cluster_id", "_bk")), ["cluster_id", "_bk"], "left_anti")
              .withColumn("_g", c("_o") - F.row_number().over(w))
              .groupBy("cluster_id", "_bk", "_g").agg(F.min("_o").alias("start_offset"),
                                                      F.max("_o").alias("end_offset")))
    return merge_touching(pieces.select("cluster_id", "start_offset", "end_offset")
                          .unionByName(whole.select("cluster_id", "start_offset", "end_offset")))


def whole_buckets(d: DataFrame) -> DataFrame:
    """The buckets of `d` (cluster_id, _bk, _o: one row per offset) whose offsets leave no hole between their least
    and greatest, with those (start_offset, end_offset): a count, a min and a max, aggregated before the shuffle (a
    row per bucket and task crosses it). A bucket of offsets without a value is never whole."""
    spans = d.groupBy("cluster_id", "_bk").agg(F.count("_o").alias("_n"), F.min("_o").alias("start_offset"),
                                               F.max("_o").alias("end_offset"))
    return spans.where(F.col("_n") == F.col("end_offset") - F.col("start_offset") + 1).drop("_n")


# Offsets per key of `as_of`'s join: an interval is listed once for every range of this many offsets it touches, so a
# row meets the few intervals of its range (about 15 markers' in the realistic log) and nothing is sorted.
AS_OF_OFFSETS = 1 << 12


def as_of(rows: DataFrame, offset: str, intervals: DataFrame, bounds: DataFrame, size: int | None) -> DataFrame:
    """`rows` with the columns of the interval (`_from`, `_to`] of their cluster that holds each row's `offset`
    (nulls where none does): a running value that changes only at a few points (transaction markers, snapshots),
    looked up rather than carried through every row in order.

    `intervals`: cluster_id, `_from`, `_to` (null: up to the cluster's last offset), and the columns to give.
    `bounds`: each cluster's `first_offset` and `last_offset`; no row of `rows` lies outside them. Each interval is
    listed once per range of offsets it touches within the bounds (`AS_OF_OFFSETS`, or `size` when smaller: tests
    make the ranges tiny), so the listing grows with the offsets the rows span, not with where the log began (an
    interval from -1 in a log whose retained part starts at offset 10^9 would otherwise list 244k ranges). A row
    joins the intervals of its range and keeps the one that holds it. Read from staged points, the intervals are
    small and Spark broadcasts them: the rows are neither shuffled nor sorted."""
    c = F.col
    n = F.lit(min(size or AS_OF_OFFSETS, AS_OF_OFFSETS))
    given = [name for name in intervals.columns if name not in ("cluster_id", "_from", "_to")]
    listed = (intervals.join(bounds.select("cluster_id", "first_offset", "last_offset"), "cluster_id")
              .select(c("cluster_id").alias("_ic"), "_from", "_to", *given,
                      F.floor(F.greatest(c("_from") + 1, c("first_offset")) / n).cast("long").alias("_lo"),
                      F.floor(F.coalesce(c("_to"), c("last_offset")) / n).cast("long").alias("_hi"))
              .where(c("_hi") >= c("_lo"))
              .select("*", F.explode(F.sequence("_lo", "_hi")).alias("_ik")).drop("_lo", "_hi"))
    keyed = rows.withColumn("_rk", F.floor(c(offset) / n).cast("long"))
    holds = ((c("cluster_id") == c("_ic")) & (c("_rk") == c("_ik")) & (c(offset) > c("_from"))
             & (c("_to").isNull() | (c(offset) <= c("_to"))))
    return keyed.join(listed, holds, "left").drop("_rk", "_ic", "_ik", "_from", "_to")


def merge_touching(runs: DataFrame) -> DataFrame:
    """Runs that overlap or touch (start at most one past an earlier end) become one (a few rows per cluster)."""
    c = F.col
    w = Window.partitionBy("cluster_id").orderBy("start_offset", "end_offset")
    prev_end = F.max("end_offset").over(w.rowsBetween(_UNBOUNDED, -1))
    fresh = F.coalesce(c("start_offset") > prev_end + 1, F.lit(True))
    return (runs.withColumn("_run", F.sum(fresh.cast("int")).over(w.rowsBetween(_UNBOUNDED, 0)))
            .groupBy("cluster_id", "_run").agg(F.min("start_offset").alias("start_offset"),
                                               F.max("end_offset").alias("end_offset"))
            .drop("_run"))


def with_missing(known: DataFrame) -> DataFrame:
    """Coverage rows of what is known (log runs, snapshot-only points) and the missing stretches between them."""
    w = Window.partitionBy("cluster_id").orderBy("start_offset")
    prev_end = F.max("end_offset").over(w.rowsBetween(_UNBOUNDED, -1))
    missing = (known.withColumn("_prev", F.coalesce(prev_end, F.lit(-1)))
               .where(F.col("start_offset") > F.col("_prev") + 1)
               .select("cluster_id", (F.col("_prev") + 1).alias("start_offset"),
                       (F.col("start_offset") - 1).alias("end_offset"), F.lit("missing").alias("kind"),
                       F.lit(None).cast("string").alias("source")))
    return known.unionByName(missing)
