"""The lake: names, creation with properties and partitioning, schema growth, time travel."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from replay.spark.tables import (
    METADATA_RECORDS,
    QUARANTINE,
    SCHEMAS,
    Lake,
    ddl_columns,
    is_catalog_location,
)


def test_catalog_or_directory() -> None:
    assert is_catalog_location("main.audit")
    assert is_catalog_location("`my-cat`.audit")
    assert not is_catalog_location("lakehouse")
    assert not is_catalog_location("./a.b")
    assert not is_catalog_location("/data/lake")
    assert not is_catalog_location("dbfs:/lake")
    assert not is_catalog_location("s3://bucket/lake")


def test_every_table_has_cluster_id_first() -> None:
    assert set(SCHEMAS) == {"metadata_records", "quarantine", "acl_events", "acl_history", "log_coverage",
                            "anomalies", "offset_times", "replay_state"}
    for schema in SCHEMAS.values():
        assert schema.fields[0].name == "cluster_id" and not schema.fields[0].nullable


def test_ddl_columns() -> None:
    schema = StructType([StructField("a", LongType(), False, {"comment": "it's"}), StructField("b", StringType())])
    assert ddl_columns(schema) == "`a` BIGINT NOT NULL COMMENT 'it\\'s', `b` STRING"


@pytest.mark.spark
def test_table_refs(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    assert lake.table_ref("quarantine") == f"delta.`{tmp_path}/lake/quarantine`"
    assert Lake(spark, "main.audit").table_ref("anomalies") == "`main`.`audit`.`anomalies`"
    assert Lake(spark, "dbfs:/lake/").table_ref("x") == "delta.`dbfs:/lake/x`"


@pytest.mark.spark
def test_ensure_creates_once_and_grows_columns(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    assert not lake.exists(QUARANTINE) and lake.version(QUARANTINE) is None
    lake.ensure(QUARANTINE)
    assert lake.version(QUARANTINE) == 0
    detail = spark.sql(f"DESCRIBE DETAIL {lake.table_ref(QUARANTINE)}").first()
    assert detail["partitionColumns"] == ["cluster_id"]
    assert detail["properties"]["delta.enableInCommitTimestamps"] == "true"
    assert detail["properties"]["delta.logRetentionDuration"] == "interval 3650 days"
    assert lake.read(QUARANTINE).schema.fieldNames() == SCHEMAS[QUARANTINE].fieldNames()
    lake.ensure(QUARANTINE)
    assert lake.version(QUARANTINE) == 0  # nothing to do the second time

    grown = StructType([*SCHEMAS[QUARANTINE].fields, StructField("note", StringType(), True, {"comment": "new"})])
    lake.ensure(QUARANTINE, grown)
    assert lake.read(QUARANTINE).schema.fieldNames()[-1] == "note"
    assert lake.read(QUARANTINE, version=0).schema.fieldNames() == SCHEMAS[QUARANTINE].fieldNames()


@pytest.mark.spark
def test_ensure_all(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure_all()
    for name in SCHEMAS:
        assert lake.read(name).count() == 0
    assert lake.read(METADATA_RECORDS).schema["append_ts"].dataType.simpleString() == "timestamp"
