"""Stages a dead replay left behind (issue 18 item 4): the next replay removes those of replays that started more
than `STALE_AFTER` ago, by the start time in their replay id, and leaves younger ones (a replay that may still be
running, for another cluster) and names it does not know alone."""

from __future__ import annotations

import datetime
import os
from typing import Any

import pytest

from replay.spark.resume import new_replay_id
from replay.spark.staging import STALE_AFTER, Stages, started_at, sweep_stale
from replay.spark.tables import Lake

NOW = datetime.datetime(2026, 11, 27, 12, 0, tzinfo=datetime.timezone.utc)
OLD = "20261125t110000_0123456789abcdef0123"  # two days before NOW
YOUNG = "20261127t100000_89abcdef0123456789ab"  # two hours before NOW
LEGACY = "0123456789abcdef0123456789abcdef"  # an id of an earlier version: no time in it


def test_a_replay_id_starts_with_its_start_time() -> None:
    before = datetime.datetime.now(datetime.timezone.utc).replace(microsecond=0)
    started = started_at(new_replay_id())
    assert started is not None and before <= started <= before + datetime.timedelta(seconds=2)
    assert started_at(LEGACY) is None
    assert NOW - started_at(OLD) > STALE_AFTER > NOW - started_at(YOUNG)  # type: ignore[operator]


@pytest.mark.spark
def test_stale_stages_of_a_directory_lake_are_removed(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    for rid in (OLD, YOUNG, LEGACY):
        os.makedirs(tmp_path / "lake" / "_staging" / rid / "coverage")
        (tmp_path / "lake" / "_staging" / rid / "coverage" / "part-0.parquet").write_bytes(b"x")
    assert sweep_stale(lake, NOW) == [OLD]
    assert sorted(os.listdir(tmp_path / "lake" / "_staging")) == sorted([YOUNG, LEGACY])
    long_ago = "20200101t000000_00112233445566778899"
    os.makedirs(tmp_path / "lake" / "_staging" / long_ago)
    with Stages(lake, new_replay_id()):  # a replay sweeps as it starts
        assert not (tmp_path / "lake" / "_staging" / long_ago).exists()
    assert LEGACY in os.listdir(tmp_path / "lake" / "_staging")


@pytest.mark.spark
def test_stale_stages_of_a_catalog_lake_are_dropped(spark: Any, tmp_path: Any) -> None:
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS kraft_staging_test LOCATION '{tmp_path / 'schema'}'")
    try:
        lake = Lake(spark, "spark_catalog.kraft_staging_test")
        for rid in (OLD, YOUNG):
            spark.range(3).write.format("delta").saveAsTable(f"kraft_staging_test._kraft_stage_{rid}_coverage")
        spark.range(1).write.format("delta").saveAsTable("kraft_staging_test.acl_history")
        assert sweep_stale(lake, NOW) == [OLD]
        left = sorted(r["tableName"] for r in spark.sql("SHOW TABLES IN kraft_staging_test").collect()
                      if not r["isTemporary"])  # the session's temporary views are listed in every schema
        assert left == ["_kraft_stage_" + YOUNG + "_coverage", "acl_history"]
    finally:
        spark.sql("DROP SCHEMA kraft_staging_test CASCADE")
