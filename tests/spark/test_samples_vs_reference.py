"""Issue 4: ingesting the real sample dumps in data/ gives, as of every offset, the same ACLs as the reference."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from spark_dumps import SAMPLES

from replay.kafka.acl import AclBinding
from replay.kafka.dump import replay_paths

pytestmark = pytest.mark.spark

FIELDS = ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type"]


def _state(rows: list[Any], offset: int) -> tuple[dict[str, AclBinding], dict[str, AclBinding]]:
    """The certain and uncertain ACLs as of `offset`, by the same range predicate the lake queries use."""
    certain, uncertain = {}, {}
    for r in rows:
        live = r.valid_from_offset <= offset and (r.valid_to_min_offset is None or offset < r.valid_to_min_offset)
        maybe = r.valid_from_min_offset <= offset and (
            r.valid_to_min_offset is None or r.valid_to_offset is None or offset < r.valid_to_offset)
        binding = AclBinding(*(getattr(r, f) for f in FIELDS))
        if live:
            certain[r.acl_id] = binding
        elif maybe:
            uncertain[r.acl_id] = binding
    return certain, uncertain


def test_samples_exist() -> None:
    assert len(SAMPLES) >= 2, "data/ must hold the real sample dumps (python -m tests.harness.make_samples)"


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_sample_as_of_every_offset_equals_reference(sample_lake: Any, sample: Path) -> None:
    """The sample, ingested and replayed in the shared `sample_lake` (conftest.py) as cluster `sample.name`."""
    from pyspark.sql import functions as F

    from replay.spark.queries import states_at

    lake = sample_lake
    reference = replay_paths([str(sample)])
    assert reference.last_offset is not None

    rows = lake.read("acl_history").where(F.col("cluster_id") == sample.name).collect()
    for offset in range(reference.last_offset + 1):
        want = reference.state_at(offset)
        certain, uncertain = _state(rows, offset)
        assert certain == want.certain, offset
        assert uncertain == want.uncertain, offset
    # and the lake's own query agrees at the end and in the middle
    for offset, got in states_at(lake, sample.name, [reference.last_offset, reference.last_offset // 2]).items():
        want = reference.state_at(offset)
        assert (got.certain, got.uncertain, got.covered, got.complete) == (
            want.certain, want.uncertain, want.covered, want.complete)
