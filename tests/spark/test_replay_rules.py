"""Pieces of the replay's rules (`replay.spark.replay_rules`) held to plain Python where the replay's answers alone
would not show a mistake: a piece that only makes the replay cheaper can be wrong in ways its results hide."""

from __future__ import annotations

import collections
import random
from typing import Any

import pytest

pytestmark = pytest.mark.spark


def _copies(seed: int) -> list[tuple[Any, ...]]:
    """Offsets of copies in two clusters over several bitmap ranges (32,768 offsets each), with offsets held twice
    or more at range edges and inside ranges, negative offsets, unknown (null) ones, and offsets one cluster holds
    once and the other once too (not held twice)."""
    rng = random.Random(seed)
    rows: list[tuple[Any, ...]] = []
    for cluster in ("a", "b"):
        rows += [(cluster, o) for o in range(0, 100_000, rng.choice([5, 11, 17]))]
        rows += [(cluster, o) for o in rng.sample([-32769, -32768, -1, 0, 1, 32767, 32768, 32769, 65536, 99_999],
                                                  rng.randint(0, 6))]
        rows += [(cluster, rng.randint(-40_000, 140_000)) for _ in range(rng.randint(0, 4))]
        rows += [(cluster, None)] * rng.randint(0, 3)
    rows += [("b", -7), ("b", -7), ("c", 5), ("c", 40_000)]
    return rows


@pytest.mark.parametrize("seed", range(4))
def test_offsets_held_twice_are_those_counted_more_than_once(spark: Any, seed: int) -> None:
    from replay.spark.replay_rules import _offsets_held_twice

    rows = _copies(seed)
    df = spark.createDataFrame(rows, "cluster_id string, offset long").repartition(3)
    got = sorted(tuple(r) for r in _offsets_held_twice(df).collect())
    want = sorted(k for k, n in collections.Counter(r for r in rows if r[1] is not None).items() if n > 1)
    assert got == want


def test_the_plan_gives_every_replay_the_span_of_offsets_it_reads(spark: Any) -> None:
    """The span decides whether running values are split into offset ranges (`replay_rules._bucket_size`): a plan
    that left it at 0 would run them as windows over a cluster's whole history in one task, with the same answers,
    so no answer-checking test would notice."""
    from replay.spark.resume import plan

    records = spark.createDataFrame(
        [("a", "i1", "log", o, None, 12, False) for o in range(100, 160)]
        + [("a", "i1", "snapshot", None, 120, None, False), ("a", "i2", "log", 900, None, 12, False)],
        "cluster_id string, ingest_id string, stream string, offset long, snapshot_end_offset long, api_key int, "
        "is_control boolean")
    quarantine = spark.createDataFrame([], "cluster_id string, ingest_id string, offset long")
    first = plan(records, quarantine, {}, ["a"], None, False)["a"]
    full = plan(records, quarantine, {}, ["a"], None, True)["a"]
    assert (first.resume_offset, first.span, first.ingest_ids) == (None, 800, ["i1", "i2"])
    assert (full.resume_offset, full.span) == (None, 800)
    state = {"status": "done", "ingest_ids": ["i1"], "resume_offset": 119, "high_watermark": None,
             "hole_since_marker": False, "visible_replay_id": "r1"}
    resumed = plan(records, quarantine, {"a": state}, ["a"], None, False)["a"]
    assert (resumed.resume_offset, resumed.span) == (119, 781)
