"""`replay.spark.merge.merge`: the statement's own session settings (its `userMetadata`, and those a caller gives,
such as the replay switch's source that Delta need not materialize) hold for that statement only."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytestmark = pytest.mark.spark

AUTO_MERGE = "spark.databricks.delta.schema.autoMerge.enabled"


def test_a_merges_settings_hold_for_it_alone(spark: Any, tmp_path: Path) -> None:
    from replay.spark.merge import MATERIALIZE_SOURCE_CONF, USER_METADATA_CONF, merge
    from replay.spark.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    spark.range(3).selectExpr("id", "'a' AS v").write.format("delta").save(lake.table_path("t"))
    spark.conf.set(MATERIALIZE_SOURCE_CONF, "all")  # a setting of the session's own: put back as it was
    try:
        source = spark.createDataFrame([(1, "b", 10), (7, "c", 70)], "id long, v string, extra int")
        got = merge(spark, lake, "t", source, "t.id = s.id", "WHEN MATCHED THEN UPDATE SET * WHEN NOT MATCHED THEN INSERT *",
                    '{"operation": "test"}', {AUTO_MERGE: "true", MATERIALIZE_SOURCE_CONF: "none"})
        assert (got["num_updated_rows"], got["num_inserted_rows"]) == (1, 1)
        table = spark.read.format("delta").load(lake.table_path("t"))
        # the schema evolved: the setting held for the statement
        assert sorted(map(tuple, table.select("id", "v", "extra").collect())) == [
            (0, "a", None), (1, "b", 10), (2, "a", None), (7, "c", 70)]
        last = spark.sql(f"DESCRIBE HISTORY delta.`{lake.table_path('t')}` LIMIT 1").collect()[0]
        assert json.loads(last["userMetadata"]) == {"operation": "test"}
        # and after it, the session's settings are what they were
        assert spark.conf.get(MATERIALIZE_SOURCE_CONF) == "all"
        assert spark.conf.get(AUTO_MERGE, None) in (None, "false")
        assert spark.conf.get(USER_METADATA_CONF, None) is None
        # a statement without the setting: no schema evolution (Delta leaves the source's new column out)
        again = spark.createDataFrame([(8, "d", 80, 1.5)], "id long, v string, extra int, more double")
        merge(spark, lake, "t", again, "t.id = s.id", "WHEN NOT MATCHED THEN INSERT *", '{"operation": "again"}')
        table = spark.read.format("delta").load(lake.table_path("t"))
        assert table.columns == ["id", "v", "extra"] and table.count() == 5
    finally:
        spark.conf.unset(MATERIALIZE_SOURCE_CONF)
