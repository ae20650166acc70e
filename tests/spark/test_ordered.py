"""Running values per offset range (`replay.spark.ordered`) equal the same values over a cluster's whole history
computed in plain Python, for every bucket size (one bucket, many, one offset per bucket)."""

from __future__ import annotations

import random
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _rows(seed: int) -> list[tuple[Any, ...]]:
    rng = random.Random(seed)
    rows = []
    for cluster in ("a", "b"):
        offset = rng.randint(0, 5)
        for _ in range(rng.randint(0, 60)):
            offset += rng.choice([1, 1, 1, 2, 7, 40])
            value = rng.choice([None, None, rng.randint(-5, 50)])
            rows.append((cluster, offset, rng.randint(0, 1), value))
    return rows


def _expected(rows: list[tuple[Any, ...]]) -> dict[tuple[str, int, int], dict[str, Any]]:
    out = {}
    for cluster in ("a", "b"):
        mine = sorted((r for r in rows if r[0] == cluster), key=lambda r: (r[1], r[2]))
        for i, (_, offset, tie, _value) in enumerate(mine):
            before = [r[3] for r in mine[:i] if r[3] is not None]
            upto = [r[3] for r in mine[: i + 1] if r[3] is not None]
            after = [r[3] for r in mine[i + 1:] if r[3] is not None]
            out[(cluster, offset, tie)] = {
                "lb": before[-1] if before else None, "lu": upto[-1] if upto else None,
                "fa": after[0] if after else None, "mb": max(before) if before else None,
                "mu": max(upto) if upto else None, "su": sum(upto), "rn": i + 1}
    return out


@pytest.mark.parametrize("size", [None, 1, 3, 16, 1 << 18])
def test_running_values_equal_whole_history_values(spark: Any, size: int | None) -> None:
    from pyspark.sql import functions as F

    from replay.spark.ordered import Running, with_running

    for seed in range(4):
        rows = _rows(seed)
        # one row per (cluster, offset, tie): duplicates in the order would make "before" ambiguous
        rows = list({(r[0], r[1], r[2]): r for r in rows}.values())
        df = spark.createDataFrame(rows, "cluster_id string, offset long, tie int, v int")
        v = F.col("v")
        got = with_running(df, "offset", ["offset", "tie"], [
            Running("lb", "last_before", v), Running("lu", "last_upto", v), Running("fa", "first_after", v),
            Running("mb", "max_before", v), Running("mu", "max_upto", v), Running("su", "sum_upto", v),
            Running("rn", "row_number")], size).collect()
        expected = _expected(rows)
        assert len(got) == len(rows)
        for r in got:
            want = expected[(r["cluster_id"], r["offset"], r["tie"])]
            assert {k: r[k] for k in want} == want, (seed, r)


@pytest.mark.parametrize("size", [None, 1, 4, 1 << 18])
def test_islands_are_the_maximal_runs(spark: Any, size: int | None) -> None:
    from replay.spark.ordered import islands

    offsets = {"a": [0, 1, 2, 3, 5, 6, 9, 10, 11, 12, 13, 30], "b": [7], "c": [4, 5, 6, 7, 8, 9, 10, 11]}
    df = spark.createDataFrame([(c, o) for c, os_ in offsets.items() for o in os_], "cluster_id string, offset long")
    got = sorted(tuple(r) for r in islands(df, "offset", size).collect())
    assert got == [("a", 0, 3), ("a", 5, 6), ("a", 9, 13), ("a", 30, 30), ("b", 7, 7), ("c", 4, 11)]


@pytest.mark.parametrize("size", [None, 2, 5, 16])
def test_islands_of_whole_and_holey_buckets_are_the_maximal_runs(spark: Any, size: int | None) -> None:
    """Buckets without a hole are taken whole (`whole_buckets`), the others row by row: the runs are the same as
    plain Python finds, wherever runs start, end or cross a bucket's edge."""
    from replay.spark.ordered import islands

    for seed in range(4):
        offsets = sorted({(r[0], r[1]) for r in _rows(seed)})
        expected: list[tuple[str, int, int]] = []
        for cluster, offset in offsets:
            if expected and expected[-1][0] == cluster and expected[-1][2] == offset - 1:
                expected[-1] = (cluster, expected[-1][1], offset)
            else:
                expected.append((cluster, offset, offset))
        df = spark.createDataFrame(offsets or [("a", 0)], "cluster_id string, offset long")
        if not offsets:
            df = df.limit(0)
        got = sorted(tuple(r) for r in islands(df, "offset", size).collect())
        assert got == expected, (seed, size)


@pytest.mark.parametrize("size", [None, 1, 5, 64])
def test_as_of_gives_each_row_the_interval_that_holds_it(spark: Any, size: int | None) -> None:
    """Rows at random offsets (some at an interval's end, some past the last point, some before the first) get the
    value of the interval (from, to] holding them, as a plain search says; the ranges of `size` offsets make the
    intervals span many of them, the first interval starts at -1 while a cluster's rows may start later, and one
    cluster has no interval at all."""
    from replay.spark.ordered import as_of

    for seed in range(3):
        rng = random.Random(seed)
        intervals, rows, bounds = [], [], []
        for cluster in ("a", "b", "c"):
            first, end = rng.randint(0, 150), rng.randint(400, 500)
            points = [-1, *sorted(rng.sample(range(0, 400), rng.randint(0, 12)))] if cluster != "c" else []
            bounds.append((cluster, first, end))
            for i, p in enumerate(points):
                intervals.append((cluster, p, points[i + 1] if i + 1 < len(points) else None, f"{cluster}{i}"))
            for o in rng.sample(range(first, end + 1), 40) + [p for p in points if p >= first]:
                rows.append((cluster, o))
        got = as_of(spark.createDataFrame(rows, "cluster_id string, offset long"), "offset",
                    spark.createDataFrame(intervals, "cluster_id string, _from long, _to long, v string"),
                    spark.createDataFrame(bounds, "cluster_id string, first_offset long, last_offset long"),
                    size).collect()

        assert sorted((r["cluster_id"], r["offset"], r["v"] or "") for r in got) == sorted(
            (c, o, _holding(intervals, c, o) or "") for c, o in rows)


def test_as_of_lists_intervals_only_where_the_rows_are(spark: Any) -> None:
    """A log whose retained part starts at offset 10^12 (the rest deleted after snapshots), with the first
    interval starting at -1 and the next point far on: the lookup lists the ranges the rows span, not the 2.4 * 10^8
    ranges back to offset 0 (which would not fit in memory), and still finds each row's interval."""
    from replay.spark.ordered import AS_OF_OFFSETS, as_of

    start = 10**12
    points = [-1, start + 5 * AS_OF_OFFSETS, start + 5 * AS_OF_OFFSETS + 3]
    intervals = [("a", p, points[i + 1] if i + 1 < len(points) else None, f"a{i}") for i, p in enumerate(points)]
    offsets = [start, start + 1, *points[1:], start + 5 * AS_OF_OFFSETS + 1, start + 9 * AS_OF_OFFSETS]
    got = as_of(spark.createDataFrame([("a", o) for o in offsets], "cluster_id string, offset long"), "offset",
                spark.createDataFrame(intervals, "cluster_id string, _from long, _to long, v string"),
                spark.createDataFrame([("a", start, start + 9 * AS_OF_OFFSETS)],
                                      "cluster_id string, first_offset long, last_offset long"), None).collect()

    assert sorted((r["offset"], r["v"]) for r in got) == sorted((o, _holding(intervals, "a", o)) for o in offsets)


def _holding(intervals: list[tuple[Any, ...]], cluster: str, o: int) -> str | None:
    """The value of the interval (from, to] of `cluster` that holds offset `o`, searched one by one."""
    held = [v for c, lo, hi, v in intervals if c == cluster and lo < o and (hi is None or o <= hi)]
    assert len(held) <= 1
    return held[0] if held else None
