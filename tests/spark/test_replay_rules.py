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
