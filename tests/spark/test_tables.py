"""The lake: names, creation with properties and partitioning, schema growth, time travel."""

from __future__ import annotations

from typing import Any

import pytest
from pyspark.sql.types import LongType, StringType, StructField, StructType

from replay.spark.tables import (
    METADATA_RECORDS,
    QUARANTINE,
    RECORD_STATS_COLUMNS,
    SCHEMAS,
    STATS_COLUMNS_PROPERTY,
    TABLE_COMMENTS,
    Lake,
    ddl_columns,
    has_commit,
    is_catalog_location,
    newest_commit,
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
                            "anomalies", "offset_times", "replay_state", "acl_event_feed", "access_events",
                            "ingested_files"}
    for schema in SCHEMAS.values():
        assert schema.fields[0].name == "cluster_id" and not schema.fields[0].nullable


def test_every_table_and_column_says_what_it_holds() -> None:
    assert set(TABLE_COMMENTS) == set(SCHEMAS)
    for name, schema in SCHEMAS.items():
        undocumented = [f.name for f in schema.fields if not f.metadata.get("comment", "").strip()]
        assert not undocumented, (name, undocumented)


def test_a_table_exists_once_its_log_holds_a_commit(tmp_path: Any) -> None:
    """A writer creating a table leaves its `_delta_log` empty for a moment: a reader that took the directory for the
    table failed with "table doesn't exist" (a running watch's first replay, seen by CI)."""
    log = tmp_path / "t" / "_delta_log"
    assert not has_commit(str(log))  # no directory
    log.mkdir(parents=True)
    assert not has_commit(str(log))  # created, nothing committed yet
    (log / ".00000000000000000000.json.3f1c.tmp").write_text("{}")  # a commit being written, not renamed yet
    (log / "_commits").mkdir()
    assert not has_commit(str(log))
    (log / "00000000000000000000.json").write_text("{}")
    assert has_commit(str(log))
    only_checkpoint = tmp_path / "u" / "_delta_log"  # older commits removed by log retention
    only_checkpoint.mkdir(parents=True)
    (only_checkpoint / "00000000000000000010.checkpoint.parquet").write_bytes(b"")
    assert has_commit(str(only_checkpoint))


def test_the_newest_commit_is_the_highest_numbered_commit_file(tmp_path: Any) -> None:
    """`Lake.version` of a local table reads it here, without Spark: a commit being written, a compacted range of
    commits and a checksum are not commits."""
    log = tmp_path / "_delta_log"
    assert newest_commit(str(log)) is None
    log.mkdir()
    for name in ["00000000000000000000.json", "00000000000000000001.json", "00000000000000000001.crc",
                 "00000000000000000000.00000000000000000001.compacted.json", ".00000000000000000002.json.9a.tmp",
                 "_last_checkpoint"]:
        (log / name).write_text("{}")
    assert newest_commit(str(log)) == "00000000000000000001.json"


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
    # a replayed table: every replay replaces its files, so VACUUM may reclaim them after 30 days
    lake.ensure("acl_history")
    replayed = spark.sql(f"DESCRIBE DETAIL {lake.table_ref('acl_history')}").first()["properties"]
    assert replayed["delta.deletedFileRetentionDuration"] == "interval 30 days"
    assert replayed["delta.enableInCommitTimestamps"] == "true"
    lake.ensure(QUARANTINE)
    assert lake.version(QUARANTINE) == 0  # nothing to do the second time

    grown = StructType([*SCHEMAS[QUARANTINE].fields, StructField("note", StringType(), True, {"comment": "new"})])
    lake.ensure(QUARANTINE, grown)
    assert lake.read(QUARANTINE).schema.fieldNames()[-1] == "note"
    assert lake.read(QUARANTINE, version=0).schema.fieldNames() == SCHEMAS[QUARANTINE].fieldNames()


@pytest.mark.spark
def test_a_lake_with_deletion_vectors_turned_on_reads_what_a_delete_left(spark: Any, tmp_path: Any) -> None:
    """The tables go without deletion vectors (README: measured slower for the replay), but an owner may turn
    them on, e.g. to delete rows by hand: the lake reads through Delta, so rows a deletion vector marks are gone
    for it, and time travel still shows them."""
    import json

    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure(QUARANTINE)
    features = spark.sql(f"DESCRIBE DETAIL {lake.table_ref(QUARANTINE)}").first()["tableFeatures"]
    assert "deletionVectors" not in features
    spark.sql(f"ALTER TABLE {lake.table_ref(QUARANTINE)} SET TBLPROPERTIES ('delta.enableDeletionVectors' = 'true')")
    schema = SCHEMAS[QUARANTINE]
    given = [{"cluster_id": "c", "kind": "gap", "offset": i, "message": f"m{i}"} for i in range(3)]
    rows = spark.createDataFrame([tuple(g.get(f.name) for f in schema.fields) for g in given], schema)
    rows.coalesce(1).write.format("delta").mode("append").save(lake.table_path(QUARANTINE))
    spark.sql(f"DELETE FROM {lake.table_ref(QUARANTINE)} WHERE offset = 1")
    log = sorted((tmp_path / "lake" / QUARANTINE / "_delta_log").glob("*.json"))[-1]
    actions = [json.loads(line) for line in log.read_text().splitlines()]
    assert any((a.get("add") or {}).get("deletionVector") for a in actions), actions  # marked, not rewritten
    assert sorted(r.offset for r in lake.read(QUARANTINE).collect()) == [0, 2]
    assert lake.read(QUARANTINE, version=lake.version(QUARANTINE) - 1).count() == 3


@pytest.mark.spark
def test_ensure_all(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure_all()
    for name in SCHEMAS:
        assert lake.read(name).count() == 0
    assert lake.read(METADATA_RECORDS).schema["append_ts"].dataType.simpleString() == "timestamp"


def _described(spark: Any, ref: str) -> tuple[dict[str, str], str]:
    """(column -> comment, the table's comment) as `DESCRIBE TABLE EXTENDED` shows them to a SQL user."""
    rows = spark.sql(f"DESCRIBE TABLE EXTENDED {ref}").collect()
    columns: dict[str, str] = {}
    for r in rows:
        if not r.col_name or r.col_name.startswith("#"):
            break
        columns[r.col_name] = r.comment or ""
    table = next((r.data_type for r in rows if r.col_name == "Comment"), "")
    return columns, table


@pytest.mark.spark
def test_describe_shows_every_comment_and_an_older_lake_gets_them(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure_all()
    for name, schema in SCHEMAS.items():
        columns, table = _described(spark, lake.table_ref(name))
        assert columns == {f.name: f.metadata["comment"] for f in schema.fields}, name
        assert table == TABLE_COMMENTS[name], name
    assert "certainly live on" in _described(spark, lake.table_ref("acl_history"))[1]

    # a table written by an older version: no comments; `document` adds them, once
    older = Lake(spark, str(tmp_path / "older"))
    plain = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in SCHEMAS["anomalies"].fields)
    spark.sql(f"CREATE TABLE {older.table_ref('anomalies')} ({plain}) USING DELTA")
    assert set(_described(spark, older.table_ref("anomalies"))[0].values()) == {""}
    done = older.document("anomalies")
    assert len(done) == len(SCHEMAS["anomalies"].fields) + 1
    columns, table = _described(spark, older.table_ref("anomalies"))
    assert columns["message"] == "what was found, in words" and table == TABLE_COMMENTS["anomalies"]
    assert older.document("anomalies") == []

    # metadata_records keeps statistics of the columns readers select by only; an older lake's table gets the
    # property from `document` (its comments too), and a new lake's has it from the start
    assert _properties(spark, lake.table_ref(METADATA_RECORDS))[STATS_COLUMNS_PROPERTY] == ",".join(
        RECORD_STATS_COLUMNS)
    plain = ", ".join(f"`{f.name}` {f.dataType.simpleString()}" for f in SCHEMAS[METADATA_RECORDS].fields)
    spark.sql(f"CREATE TABLE {older.table_ref(METADATA_RECORDS)} ({plain}) USING DELTA")
    assert STATS_COLUMNS_PROPERTY not in _properties(spark, older.table_ref(METADATA_RECORDS))
    assert any(STATS_COLUMNS_PROPERTY in s for s in older.document(METADATA_RECORDS))
    assert _properties(spark, older.table_ref(METADATA_RECORDS))[STATS_COLUMNS_PROPERTY] == ",".join(
        RECORD_STATS_COLUMNS)
    assert older.document(METADATA_RECORDS) == []


def _properties(spark: Any, ref: str) -> dict[str, str]:
    return dict(spark.sql(f"DESCRIBE DETAIL {ref}").first()["properties"])
