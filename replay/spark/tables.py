"""The lake: where the Delta tables of DESIGN.md §4 live, their schemas, and how to create, name and read them.

A lake is either

* a **directory** (any path or URI Spark writes: `./lakehouse`, `/data/lake`, `dbfs:/…`, `s3://…`, `/Volumes/…`):
  each table is a path-based Delta table `<dir>/<table>` and is named `` delta.`<dir>/<table>` `` in SQL; or
* a **catalog schema** `catalog.schema` (Unity Catalog, or any catalog that creates Delta tables): each table is
  `catalog.schema.table`, managed by the catalog.

`Lake(spark, "main.kafka_audit")` is a catalog lake because the text is two SQL identifiers joined by a dot and
holds no `/`; anything else is a directory (`./a.b` for a directory whose name has a dot). `Lake.at_path` and
`Lake.in_catalog` say it explicitly.

Every table holds `cluster_id` as its first column and is partitioned by it, so one lake serves many clusters and
ingests of different clusters write to different partitions (Delta sees no conflict between them). Tables are
created on first use with in-commit timestamps (so `TIMESTAMP AS OF` survives copying the lake) and long log
retention (so `VERSION AS OF`/`DESCRIBE HISTORY` keep telling which dumps were known when). Creation is SQL DDL,
so it also works over Spark Connect and on Databricks.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import json
import os
import re
from collections.abc import Collection, Mapping, Sequence
from typing import Any, Self

from pyspark.sql import DataFrame, DataFrameWriter, SparkSession
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from replay.kafka.acl import AclBinding
from replay.spark.visibility import ROW_KEYS, Chain, chain_of, newest

DEFAULT_LAKE = "./lakehouse"

METADATA_RECORDS = "metadata_records"
QUARANTINE = "quarantine"
ACL_EVENTS = "acl_events"
ACL_HISTORY = "acl_history"
LOG_COVERAGE = "log_coverage"
ANOMALIES = "anomalies"
OFFSET_TIMES = "offset_times"
REPLAY_STATE = "replay_state"
ACL_EVENT_FEED = "acl_event_feed"
ACCESS_EVENTS = "access_events"
INGESTED_FILES = "ingested_files"
ALL_TABLES = (METADATA_RECORDS, QUARANTINE, ACL_EVENTS, ACL_HISTORY, LOG_COVERAGE, ANOMALIES, OFFSET_TIMES,
              REPLAY_STATE, ACL_EVENT_FEED, ACCESS_EVENTS, INGESTED_FILES)

# What each table holds, as `DESCRIBE TABLE EXTENDED` shows it (every column carries its own comment too).
TABLE_COMMENTS = {
    METADATA_RECORDS: "Bronze: one row per record of the metadata log and of each snapshot, as ingested from the "
                      "dumps (decoded fields, payload JSON, raw bytes, file and byte position, batch facts).",
    QUARANTINE: "What could not be read from the dumps: one row per undecodable piece, with where and why.",
    ACL_EVENTS: "Silver: one row per visible ACL change (CREATE or REMOVE) in the order the cluster applied them.",
    ACL_HISTORY: "Gold: one row per ACL lifetime. The state as of offset N is the rows live at N: certainly live on "
                 "[valid_from_offset, valid_to_min_offset), possibly live on [valid_from_min_offset, "
                 "valid_to_offset).",
    LOG_COVERAGE: "Which offset ranges are known from log records, from snapshots only, missing, or incomplete.",
    ANOMALIES: "Findings of the replay: snapshot mismatches, divergent copies, unknown removes, holes, pending "
               "transactions, and the problems of the quarantine.",
    OFFSET_TIMES: "Time index: the append time of each batch's last offset (as of time T = as of the last offset "
                  "whose time is <= T).",
    REPLAY_STATE: "One row per cluster: the last replay's mode, status and the state an incremental replay "
                  "resumes from.",
    ACL_EVENT_FEED: "Append-only feed of acl_events for downstream streams: after each replay, a PUBLISH row for "
                    "every visible change not published before and a RETRACT row for every published change the "
                    "replay no longer shows (a new dump changed it). Never rewritten: a Delta stream reads each "
                    "row once.",
    ACCESS_EVENTS: "Bronze: one row per authorization decision a broker logged (kafka.authorizer.logger, or a "
                   "Confluent audit-log event), as ingested from the log files; what really happened, to compare "
                   "with what the ACLs allowed.",
    INGESTED_FILES: "Segment and snapshot files an ingest read whole and without a problem, once their records "
                    "were committed: name, length and sha256, so that a later dump repeating those bytes (a node's "
                    "next dump: the same files, grown) is decoded only past them.",
}


def partition_columns(name: str, schema: StructType) -> list[str]:
    """How a table is partitioned: by cluster, and a replay table also by the replay that wrote its rows, so that a
    replay's write beside the visible rows and its removal of the previous ones drop whole files by their partition
    values (a Delta metadata-only change, no scan of the rows), and a reader reads the visible replay's files only."""
    wanted = ("cluster_id", REPLAY_ID) if name in REPLAY_SCHEMAS else ("cluster_id",)
    return [c for c in wanted if c in schema.fieldNames()]


# Properties every table gets at creation.
TABLE_PROPERTIES: dict[str, str] = {
    "delta.enableInCommitTimestamps": "true",
    # An audit trail must be able to go back: keep the Delta log (history, time travel) for ten years and never let
    # VACUUM take files younger than that. The ingest only ever appends, so nothing is removed in normal use.
    "delta.logRetentionDuration": "interval 3650 days",
    "delta.deletedFileRetentionDuration": "interval 3650 days",
}

# The replay tables (and replay_state) are recomputed from metadata_records and every replay replaces a cluster's
# files in them: ten years of replaced files would only grow. Their time travel keeps 30 days (what the lake
# answered last month), after which VACUUM may reclaim the replaced files; the history itself is in acl_history.
REPLAYED_RETENTION = {"delta.logRetentionDuration": "interval 30 days",
                      "delta.deletedFileRetentionDuration": "interval 30 days"}

# The lake's data files are Parquet compressed with zstd (Spark's default is snappy). Measured on the 250k-record
# benchmark log (metadata_records, 2026-11-27): snappy 21.5 MB, zstd 12.4 MB, and 10.4 MB with Parquet's v2 pages
# (delta-encoded offsets); v2 pages are left out because not every reader of a Delta table decodes them, while zstd
# Parquet reads everywhere Delta does. Our writes ask for it per write (`WRITE_OPTIONS`): a session we are given
# (Databricks) keeps its own settings; a session we start also sets it for MERGE and DELETE (`session.local_conf`).
PARQUET_CODEC = "zstd"
WRITE_OPTIONS = {"compression": PARQUET_CODEC}


def _f(name: str, dtype: DataType, comment: str, nullable: bool = True) -> StructField:
    return StructField(name, dtype, nullable, {"comment": comment})


_CLUSTER = _f("cluster_id", StringType(), "the cluster this row belongs to (the user's name or Kafka's cluster.id)",
              nullable=False)
# An ACL's fields, in `AclBinding`'s order (so `AclBinding(*(row[c] for c in ACL_FIELDS))` reads a row): the one list
# every table, query and SQL function of the lake takes them from.
ACL_FIELDS = [f.name for f in dataclasses.fields(AclBinding)]


def _acl_columns(comments: Sequence[str]) -> list[StructField]:
    """The ACL fields as string columns, with a comment each (in ACL_FIELDS' order)."""
    return [_f(name, StringType(), comment) for name, comment in zip(ACL_FIELDS, comments, strict=True)]


# metadata_records: what a record holds, any value a raw log may carry
_RECORD_ACL_COLUMNS = _acl_columns([
    "ResourceType enum name (TOPIC, GROUP, CLUSTER, ...)", "resource name or prefix",
    "PatternType enum name (LITERAL, PREFIXED, ...)", "principal, e.g. User:alice", "host, * for any",
    "AclOperation enum name (READ, WRITE, ALL, ...)", "AclPermissionType enum name (ALLOW, DENY)"])

METADATA_RECORDS_SCHEMA = StructType([
    _CLUSTER,
    _f("source_file", StringType(), "the file read (its URI as Spark lists it) when the row was first ingested"),
    _f("source_kind", StringType(), "kind of that file: segment, snapshot, bootstrap or dump_log_text"),
    _f("stream", StringType(), "which record sequence the row belongs to: log, snapshot or bootstrap "
       "(dump-log text sections are routed by their header); part of the row's identity"),
    _f("text_section", StringType(), "dump-log text only: the path its `Dumping` section printed"),
    _f("snapshot_end_offset", LongType(), "snapshot rows: the snapshot's exclusive end offset; null otherwise"),
    _f("snapshot_epoch", IntegerType(), "snapshot rows: the snapshot's epoch; null otherwise"),
    _f("file_position", LongType(), "byte position of the record's batch in the dumped file"),
    _f("batch_base_offset", LongType(), "the batch's base offset"),
    _f("batch_last_offset", LongType(), "the batch's last offset"),
    _f("offset", LongType(), "log offset; for snapshot rows the local offset inside the snapshot file"),
    _f("record_index", IntegerType(), "position of the record in its batch, from 0"),
    _f("leader_epoch", IntegerType(), "the batch's partition leader epoch"),
    _f("append_time", LongType(), "the batch's append time (max timestamp), epoch milliseconds: the record's time"),
    _f("append_ts", TimestampType(), "append_time as a timestamp"),
    _f("record_timestamp", LongType(), "the record's own timestamp (base timestamp + delta), epoch milliseconds"),
    _f("codec", StringType(), "the batch's compression codec"),
    _f("crc_ok", BooleanType(), "whether the batch's CRC-32C matched"),
    _f("is_control", BooleanType(), "a control record (leader change, snapshot header/footer, voters, ...)"),
    _f("control_type", StringType(), "control records: the control type name"),
    _f("api_key", IntegerType(), "data records: the metadata record type's api key"),
    _f("record_version", IntegerType(), "the record's schema version"),
    _f("record_type", StringType(), "type name, e.g. ACCESS_CONTROL_ENTRY_RECORD or SNAPSHOT_HEADER"),
    _f("payload_json", StringType(), "the record as Kafka's JSON text (what kafka-dump-log prints as payload)"),
    _f("acl_id", StringType(), "ACL records: the ACL's id (Kafka's base64url UUID text)"),
    *_RECORD_ACL_COLUMNS,
    _f("raw_key", BinaryType(), "the record's key bytes as stored"),
    _f("raw_value", BinaryType(), "the record's value bytes as stored"),
    _f("decode_error", StringType(), "why the value did not decode (the raw bytes are still here)"),
    _f("content_hash", BinaryType(), "sha256 of offset + key + value, first 16 bytes: equal at one offset is one record"),
    _f("ingest_id", StringType(), "the ingest that first brought this row"),
])

QUARANTINE_SCHEMA = StructType([
    _CLUSTER,
    _f("source_file", StringType(), "the file read"),
    _f("source_kind", StringType(), "kind of that file"),
    _f("text_section", StringType(), "dump-log text only: the file a section printed, when the problem names it"),
    _f("file_position", LongType(), "byte position in the dumped file (for dump-log text: as the text gives it)"),
    _f("offset", LongType(), "log offset, when known"),
    _f("kind", StringType(), "what is wrong (ProblemKind value: bad_crc, truncated_tail, bad_record, ...)"),
    _f("message", StringType(), "what is wrong, in words"),
    _f("line", IntegerType(), "dump-log text and authorizer logs: the line of the text, from 1"),
    _f("raw", BinaryType(), "the undecodable bytes (the decoder keeps at most 1 MiB per problem)"),
    _f("content_hash", BinaryType(), "sha256 of kind, position, offset and raw bytes, first 16 bytes (the identity)"),
    _f("ingest_id", StringType(), "the ingest that first found it"),
])

# ---- the replay's tables (DESIGN.md §4), written by replay.spark.replay; the lake owns every table's schema
ACL_COLUMNS = _acl_columns([
    "ResourceType enum name (TOPIC, GROUP, CLUSTER, ...)", "resource name, or prefix for a PREFIXED pattern",
    "PatternType enum name (LITERAL, PREFIXED)", "principal, e.g. User:alice; User:* is every principal",
    "host the ACL applies to as Kafka stores it; * for any", "AclOperation enum name (READ, WRITE, ALL, ...)",
    "AclPermissionType enum name (ALLOW, DENY)"])
_ACL_ID = _f("acl_id", StringType(), "the ACL's id as Kafka prints it (base64url UUID); never reused", nullable=False)


def _offset(name: str, comment: str, nullable: bool = False) -> StructField:
    return _f(name, LongType(), comment, nullable)


def _millis(name: str, comment: str, nullable: bool = True) -> StructField:
    return _f(name, LongType(), f"{comment}, epoch milliseconds (the batch's append time; DESIGN.md rule 8)", nullable)


EVENTS_SCHEMA = StructType([
    _CLUSTER,
    _offset("offset", "log offset at which the change became visible: the last offset of its batch (of its "
            "transaction's End batch; nodes publish whole batches), or a snapshot's last offset"),
    _offset("offset_min", "equal to offset when exact; else the change happened somewhere in [offset_min, offset]"),
    _f("exact", BooleanType(), "whether offset is the change's exact offset", nullable=False),
    _offset("seq", "1-based order in which the cluster's changes apply"),
    _millis("time", "time of offset; null when no batch time is known"),
    _ACL_ID,
    _f("change", StringType(), "CREATE or REMOVE", nullable=False),
    _f("cause", StringType(), "RECORD, TRANSACTION (committed at its end), REPLACE (an id created again) or "
       "SNAPSHOT_LOAD", nullable=False),
    _offset("record_offset", "the ACL record's own offset; null for snapshot loads", nullable=True),
    *ACL_COLUMNS,
])

HISTORY_SCHEMA = StructType([
    _CLUSTER,
    _ACL_ID,
    *ACL_COLUMNS,
    _offset("valid_from_offset", "first offset at which the ACL is certainly live"),
    _offset("valid_from_min_offset", "earliest offset at which it may be live: equal to valid_from_offset when "
            "exact, lower when it was created inside a hole that a snapshot bridges"),
    _f("valid_from_exact", BooleanType(), "whether valid_from_offset is the creation's exact offset", nullable=False),
    _millis("valid_from_time", "time of valid_from_offset"),
    _f("began_by", StringType(), "what created it: RECORD, TRANSACTION, REPLACE or SNAPSHOT_LOAD", nullable=False),
    _offset("valid_to_offset", "first offset at which it is certainly gone; null while it may still be live",
            nullable=True),
    _offset("valid_to_min_offset", "earliest offset at which it may be gone (certainly live before it); equal to "
            "valid_to_offset when exact; null while live", nullable=True),
    _f("valid_to_exact", BooleanType(), "whether valid_to_offset is the removal's exact offset; null while live"),
    _millis("valid_to_time", "time of valid_to_offset; null while live"),
    _f("ended_by", StringType(), "what removed it: RECORD, TRANSACTION, REPLACE or SNAPSHOT_LOAD; null while live"),
])

COVERAGE_SCHEMA = StructType([
    _CLUSTER,
    _offset("start_offset", "first offset of the range (inclusive)"),
    _offset("end_offset", "last offset of the range (inclusive)"),
    _f("kind", StringType(), "log (records known), snapshot (bridged by a snapshot only), missing (nothing known) or "
       "incomplete (the state is not fully known here)", nullable=False),
    _f("source", StringType(), "kind snapshot: the snapshot file that shows the state there; null otherwise"),
])

ANOMALIES_SCHEMA = StructType([
    _CLUSTER,
    _f("kind", StringType(), "what was found (ProblemKind value: snapshot_mismatch, divergence, unknown_remove, ...)",
       nullable=False),
    _offset("offset", "the log offset it concerns, when known", nullable=True),
    _f("source_file", StringType(), "the file it was found in, when one file is to blame"),
    _f("file_position", LongType(), "byte position in that file, when known"),
    _f("message", StringType(), "what was found, in words", nullable=False),
])

OFFSET_TIMES_SCHEMA = StructType([
    _CLUSTER,
    _offset("offset", "last offset of a batch, or a snapshot's last contained offset"),
    _millis("time", "time of every offset from the previous entry's offset + 1 to this one", nullable=False),
])

# Every replay table's last column: which replay wrote the row. A replay adds its rows beside the ones readers see,
# then makes them the visible ones in one commit to `replay_state` (`visible_ranges`), then removes those no longer
# seen: a reader that goes through `Lake.source`/`Lake.read` sees one finished replay's history of each cluster,
# never a mix of two (a resumed replay's history includes the rows up to its resume point that earlier replays
# wrote: `replay.spark.visibility`).
REPLAY_ID = "replay_id"
_REPLAY_ID_FIELD = _f(REPLAY_ID, StringType(), "the replay that wrote this row; readers see the rows of each "
                      "cluster's visible replays, each over its range of offsets (replay_state.visible_ranges); "
                      "null: written before replays were tagged")

# The replay tables as readers see them (`Lake.source`), and as stored (with the tag).
VISIBLE_SCHEMAS = {"acl_events": EVENTS_SCHEMA, "acl_history": HISTORY_SCHEMA, "log_coverage": COVERAGE_SCHEMA,
                   "anomalies": ANOMALIES_SCHEMA, "offset_times": OFFSET_TIMES_SCHEMA}
REPLAY_SCHEMAS = {name: StructType([*schema.fields, _REPLAY_ID_FIELD]) for name, schema in VISIBLE_SCHEMAS.items()}

STATE_SCHEMA = StructType([
    _CLUSTER,
    _f("replay_id", StringType(), "the replay that wrote this row", nullable=False),
    _f("replayed_at", TimestampType(), "when that replay started", nullable=False),
    _f("status", StringType(), "running or done (running after it finished: the replay failed)", nullable=False),
    _f("mode", StringType(), "full or incremental", nullable=False),
    _f("reason", StringType(), "why that mode, in words"),
    _offset("high_watermark", "the cut-off offset the user gave (records after it were left out); null: none",
            nullable=True),
    _f("ingest_ids", ArrayType(StringType()), "the ingests whose rows the replay read"),
    _f("visible_replay_id", StringType(), "the replay whose rows of this cluster readers see: this one once done; "
       "while it runs (or after it failed) the last one that finished; null: rows written before replays were "
       "tagged"),
    _offset("last_offset", "the last offset known after the replay", nullable=True),
    _offset("resume_offset", "the latest settled loaded snapshot's last offset, where the next replay may resume; "
            "null: no resume point", nullable=True),
    _f("epoch_floor", IntegerType(), "resume state: the highest leader epoch seen up to resume_offset"),
    _offset("marker_offset", "resume state: offset of the last transaction marker (begin, end, abort) at or "
            "before resume_offset; null: none",
            nullable=True),
    _f("marker_key", IntegerType(), "resume state: that marker's record type (api key)"),
    _millis("marker_time", "resume state: that marker's time"),
    _f("marker_file", StringType(), "resume state: the file that marker was read from"),
    _f("marker_position", LongType(), "resume state: that marker's byte position in its file"),
    _offset("gap_end", "resume state: end of the last hole in the log at or before resume_offset", nullable=True),
    _f("hole_since_marker", BooleanType(), "resume state: whether a hole lies between that marker and resume_offset"),
    # (plain fields: a nested field's comment or NOT NULL would not survive the DDL, and the stored type must equal
    # this one: `check_column_types`)
    _f("visible_ranges", ArrayType(StructType([StructField("replay_id", StringType()),
                                               StructField("after_offset", LongType()),
                                               StructField("upto_offset", LongType())])),
       "the replays whose rows readers see, oldest first: the rows of replay_id whose offset lies after after_offset "
       "and up to upto_offset (null: unbounded); a replay that resumed left the earlier ones' rows up to its resume "
       "point in place (replay.spark.visibility); null: visible_replay_id's rows, all of them"),
])

# The feed: an acl_events row (as readers see it) with what happened to it, when, by which replay, and its identity.
FEED_SCHEMA = StructType([
    _CLUSTER,
    _f("action", StringType(), "PUBLISH (the change is visible from now on) or RETRACT (a published change the "
       "latest replay no longer shows)", nullable=False),
    _f("event_key", BinaryType(), "the change's identity: a digest of its columns other than seq (equal keys are "
       "one change)", nullable=False),
    _f("fed_by", StringType(), "the replay after which this row was appended", nullable=False),
    _f("fed_at", TimestampType(), "when this row was appended (UTC)", nullable=False),
    *[f for f in EVENTS_SCHEMA.fields if f.name != "cluster_id"],
])

# quarantine rows of the authorizer logs (`replay.spark.access_ingest`): not the dumps' problems, so not the replay's
LOG_SOURCE_KIND = "authorizer_log"  # their source_kind
UNREADABLE_LOG_LINE = "unreadable_log_line"  # their kind: a line that looks like a decision and does not read

# access_events: the named ACL of a MatchingAcl rule, its fields prefixed (the request has fields of the same names)
NAMED_ACL_PREFIX = "acl_"

ACCESS_EVENTS_SCHEMA = StructType([
    _CLUSTER,
    _f("broker", StringType(), "the broker that logged it (--broker, else the name of the directory holding the "
       "file)"),
    _f("time", LongType(), "the broker's clock when it logged the decision, epoch milliseconds (its log date, read "
       "in the zone given); null when the layout has no date"),
    _f("principal", StringType(), "the requesting principal, e.g. User:alice"),
    _f("host", StringType(), "the client address as the broker printed it (Java's rendering)"),
    _f("operation", StringType(), "AclOperation enum name (READ, WRITE, DESCRIBE, ...)"),
    _f("resource_type", StringType(), "ResourceType enum name (TOPIC, GROUP, CLUSTER, ...)"),
    _f("pattern_type", StringType(), "the requested resource's pattern type (LITERAL for every request a broker "
       "authorizes)"),
    _f("resource_name", StringType(), "the requested resource's name"),
    _f("api", StringType(), "the request as the broker names it (Produce, Fetch, Metadata, ...)"),
    _f("decision", StringType(), "ALLOWED or DENIED, as logged"),
    _f("rule", StringType(), "the rule text the broker logged (null where it names none)"),
    _f("rule_kind", StringType(), "SuperUser, DefaultAllow, DefaultDeny, MatchingAcl or RBAC; null where the log "
       "names no rule"),
    *[_f(NAMED_ACL_PREFIX + name, StringType(), f"MatchingAcl: the named ACL's {name}") for name in ACL_FIELDS],
    _f("level", StringType(), "the log level of the line (INFO for denials, DEBUG for allowed requests)"),
    _f("source_file", StringType(), "the log file read (its URI as Spark lists it) when the row was first ingested"),
    _f("line", IntegerType(), "the line of that file, from 1 (of its text, for a gzip-compressed file)"),
    _f("file_position", LongType(), "byte position of the line in that file (in its text, for a gzip file)"),
    _f("event_key", BinaryType(), "the row's identity: sha256 of broker, line number and text, first 16 bytes (a "
       "renamed, rotated or compressed copy of a file is the same rows)", nullable=False),
    _f("ingest_id", StringType(), "the ingest that first brought this row"),
])

INGESTED_FILES_SCHEMA = StructType([
    _CLUSTER,
    _f("file_name", StringType(), "the file's name: a segment's base offset, a snapshot's end offset and epoch",
       nullable=False),
    _f("source_kind", StringType(), "segment, snapshot or bootstrap"),
    _f("bytes", LongType(), "the file's length when it was read: its records are in metadata_records", nullable=False),
    _f("sha256", BinaryType(), "sha256 of those bytes", nullable=False),
    _f("source_file", StringType(), "the file read (its URI as Spark lists it)"),
    _f("ingest_id", StringType(), "the ingest that read it"),
])

SCHEMAS: dict[str, StructType] = {
    METADATA_RECORDS: METADATA_RECORDS_SCHEMA,
    QUARANTINE: QUARANTINE_SCHEMA,
    **REPLAY_SCHEMAS,
    REPLAY_STATE: STATE_SCHEMA,
    ACL_EVENT_FEED: FEED_SCHEMA,
    ACCESS_EVENTS: ACCESS_EVENTS_SCHEMA,
    INGESTED_FILES: INGESTED_FILES_SCHEMA,
}

# metadata_records keeps min/max statistics (Delta's data skipping) only of the columns readers select by: the
# replay's resumed suffix and the ingest's overlap check (stream, offsets, snapshot ids), and what people ask of the
# raw records (record type, time, the ACL fields). By default Delta computes them for the first 32 columns, the
# JSON payloads and the binary keys among them: writing the 1.07M rows of the realistic log alone took 6.7 s against
# 4.8 s (one local[2] session, warm), and the ingest's write stage 10.0-10.3 s of task CPU against 11.3 s.
RECORD_STATS_COLUMNS = ("stream", "offset", "snapshot_end_offset", "snapshot_epoch", "batch_base_offset",
                        "batch_last_offset", "leader_epoch", "append_ts", "record_type", "resource_type",
                        "resource_name", "principal")
STATS_COLUMNS_PROPERTY = "delta.dataSkippingStatsColumns"
# Properties some tables have besides `TABLE_PROPERTIES`: metadata_records its statistics columns; the feed is only
# ever appended to, and Delta enforces it; the replayed tables keep replaced files 30 days.
EXTRA_PROPERTIES: dict[str, dict[str, str]] = {
    METADATA_RECORDS: {STATS_COLUMNS_PROPERTY: ",".join(RECORD_STATS_COLUMNS)},
    ACL_EVENT_FEED: {"delta.appendOnly": "true"},
    **{name: REPLAYED_RETENTION for name in (*REPLAY_SCHEMAS, REPLAY_STATE)},
}

_IDENT = r"(?:[A-Za-z_][A-Za-z0-9_]*|`(?:[^`]|``)+`)"
_CATALOG_SCHEMA_RE = re.compile(rf"^{_IDENT}\.{_IDENT}$")
_URI_RE = re.compile(r"^[A-Za-z][A-Za-z0-9+.-]*:")
_COMMIT_FILE_RE = re.compile(r"^\d{20}\.(json|checkpoint(\..+)?\.parquet)$")
_COMMIT_JSON_RE = re.compile(r"^\d{20}\.json$")  # not a compacted range (`<from>.<to>.compacted.json`)


def has_commit(log_dir: str) -> bool:
    """Whether a local Delta log directory holds a commit or a checkpoint: while a writer creates a table, its
    `_delta_log` exists empty for a moment (Delta writes each commit file whole, by rename), and a reader that took the
    directory alone for the table failed with "table doesn't exist"."""
    try:
        with os.scandir(log_dir) as entries:
            return any(_COMMIT_FILE_RE.match(e.name) for e in entries)
    except OSError:
        return False


def newest_commit(log_dir: str) -> str | None:
    """The newest commit file of a local Delta log directory (None: none, or no such directory): a commit is a new
    file, so a reader that sees the same name again knows the table has not changed."""
    try:
        with os.scandir(log_dir) as entries:
            return max((e.name for e in entries if _COMMIT_JSON_RE.match(e.name)), default=None)
    except OSError:
        return None


def _local_commit_metadata(log_dir: str, limit: int) -> list[str | None]:
    """The userMetadata of the newest `limit` commits of a local Delta log directory, newest first: each commit file's
    `commitInfo` action (a commit without one, or whose file is gone, gives None)."""
    try:
        with os.scandir(log_dir) as entries:
            names = sorted((e.name for e in entries if _COMMIT_JSON_RE.match(e.name)), reverse=True)[:limit]
    except OSError:
        return []
    found: list[str | None] = []
    for name in names:
        meta = None
        with contextlib.suppress(OSError, ValueError), open(os.path.join(log_dir, name), encoding="utf-8") as f:
            for line in f:
                info = json.loads(line).get("commitInfo")
                if info is not None:
                    meta = info.get("userMetadata")
                    break
        found.append(meta)
    return found


def quote_ident(name: str) -> str:
    """One SQL identifier in backticks (an identifier already in backticks is kept)."""
    if len(name) >= 2 and name.startswith("`") and name.endswith("`"):
        return name
    return "`" + name.replace("`", "``") + "`"


def sql_string(text: str) -> str:
    """A SQL string literal (backslash escapes, as Spark reads them)."""
    return "'" + text.replace("\\", "\\\\").replace("'", "\\'") + "'"


def sql_literal(value: Any) -> str:
    """A Python value as a Spark SQL literal: NULL, a boolean, a number, an array of literals, or a quoted string."""
    if value is None:
        return "NULL"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return f"array({', '.join(sql_literal(v) for v in value)})"
    return sql_string(str(value))


def ddl_columns(schema: StructType) -> str:
    """`name type [NOT NULL] COMMENT '...'` for each field, comma-joined (for CREATE TABLE)."""
    cols = []
    for f in schema.fields:
        col = f"{quote_ident(f.name)} {ddl_type(f.dataType)}"
        if not f.nullable:
            col += " NOT NULL"
        comment = f.metadata.get("comment")
        if comment:
            col += f" COMMENT {sql_string(comment)}"
        cols.append(col)
    return ", ".join(cols)


def ddl_type(dtype: DataType) -> str:
    """A column type for DDL: keywords in capitals, the names of a struct's fields as they are (Spark keeps the case
    a CREATE TABLE gives them)."""
    if isinstance(dtype, StructType):
        return f"STRUCT<{', '.join(f'{quote_ident(f.name)}: {ddl_type(f.dataType)}' for f in dtype.fields)}>"
    if isinstance(dtype, ArrayType):
        return f"ARRAY<{ddl_type(dtype.elementType)}>"
    if isinstance(dtype, MapType):
        return f"MAP<{ddl_type(dtype.keyType)}, {ddl_type(dtype.valueType)}>"
    return dtype.simpleString().upper()


def _table_comment(name: str) -> str:
    comment = TABLE_COMMENTS.get(name)
    return f"COMMENT {sql_string(comment)} " if comment else ""


_RANGE_FIELDS = "after_offset: BIGINT, upto_offset: BIGINT"
_CHAIN_TYPE = f"MAP<STRING, STRUCT<{_RANGE_FIELDS}>>"


def chains_sql(chains: Mapping[str, Chain]) -> str:
    """Chains known on the driver as the SQL map `Lake._visible_rows` filters by (a cluster with an empty chain:
    its untagged rows only)."""
    def bound(value: int | None) -> str:
        return f"CAST({'NULL' if value is None else int(value)} AS BIGINT)"

    def chain(ranges: Chain) -> str:
        if not ranges:
            return f"CAST(NULL AS {_CHAIN_TYPE})"
        entries = ", ".join(f"{sql_string(rid)}, named_struct('after_offset', {bound(after)}, 'upto_offset', "
                            f"{bound(upto)})" for rid, after, upto in ranges)
        return f"CAST(map({entries}) AS {_CHAIN_TYPE})"

    if not chains:
        return f"CAST(NULL AS MAP<STRING, {_CHAIN_TYPE}>)"
    return f"map({', '.join(f'{sql_string(c)}, {chain(r)}' for c, r in chains.items())})"


def is_uri(location: str) -> bool:
    """A location with a scheme (`s3a://`, `abfss://`, `dbfs:/`, `file:/`) rather than a local path."""
    return bool(_URI_RE.match(location))


def is_schema_name(name: str) -> bool:
    """One SQL identifier: a schema in the session's current catalog."""
    return bool(re.fullmatch(_IDENT, name))


def is_catalog_location(location: str) -> bool:
    """`catalog.schema` (two SQL identifiers, no slash) rather than a directory."""
    return "/" not in location and not _URI_RE.match(location) and bool(_CATALOG_SCHEMA_RE.match(location))


def covered_clusters_sql(cov: str) -> str:
    """The clusters `cov` (`log_coverage` as readers see it) holds rows of, as one SQL array: every replay writes
    coverage rows, so these are the clusters with a replayed history."""
    return f"(SELECT collect_set(c.cluster_id) FROM {cov} c)"


class Lake:
    """The tables of one lake. Cheap to make; nothing is created until `ensure` (or a write) needs it."""

    def __init__(
        self,
        spark: SparkSession,
        location: str | None = None,
        *,
        catalog: bool | None = None,
        properties: Mapping[str, str] | None = None,
    ) -> None:
        text = (location or DEFAULT_LAKE).strip()
        if not text:
            raise ValueError("empty lake location")
        self.spark = spark
        self.is_catalog = is_catalog_location(text) if catalog is None else catalog
        self.properties = {**TABLE_PROPERTIES, **(properties or {})}
        if self.is_catalog:
            self.location = text
            self.schema_ref = ".".join(quote_ident(p) for p in _split_two(text))
        else:
            self.location = text.rstrip("/") if _URI_RE.match(text) else os.path.abspath(os.path.expanduser(text))
            self.schema_ref = ""
        self._checked: set[tuple[str, str]] = set()  # (table, schema) whose stored columns this object has checked
        self._laid_out: set[str] = set()  # tables this object knows to be partitioned as `partition_columns` says
        self._tags: set[str] = set()  # replay tables known to carry replay tags
        self._visible: tuple[str | None, dict[str, Chain]] = (None, {})  # (state token, each cluster's chain)

    @classmethod
    def at_path(cls, spark: SparkSession, path: str) -> Self:
        return cls(spark, path, catalog=False)

    @classmethod
    def in_catalog(cls, spark: SparkSession, catalog_schema: str) -> Self:
        return cls(spark, catalog_schema, catalog=True)

    def __repr__(self) -> str:
        return f"Lake({'catalog ' if self.is_catalog else ''}{self.location!r})"

    # ---- names -----------------------------------------------------------------------------------------------
    def table_path(self, name: str) -> str | None:
        """The table's directory for a directory lake; None for a catalog lake (the catalog manages it)."""
        return None if self.is_catalog else f"{self.location}/{name}"

    def table_ref(self, name: str) -> str:
        """How SQL names the table: `` delta.`/lake/name` `` or `` `catalog`.`schema`.`name` ``."""
        if self.is_catalog:
            return f"{self.schema_ref}.{quote_ident(name)}"
        path = self.table_path(name)
        assert path is not None
        return f"delta.{quote_ident(path)}"

    def name_tables(self, only: Collection[str] | None = None) -> list[str]:
        """Make the lake's tables nameable by their short names in this session (`SELECT * FROM anomalies`): a
        catalog lake's schema becomes the current one; a directory lake's existing tables (those named in `only`,
        when given) become temporary views. Returns the names."""
        names = [t for t in ALL_TABLES if (only is None or t in only) and self.exists(t)]
        if self.is_catalog:
            self.spark.sql(f"USE {self.schema_ref}")
        else:
            for t in names:
                self.spark.sql(f"CREATE OR REPLACE TEMPORARY VIEW {quote_ident(t)} AS SELECT * FROM {self.source(t)}")
        return names

    # ---- state -----------------------------------------------------------------------------------------------
    def exists(self, name: str) -> bool:
        if self.is_catalog:
            return bool(self.spark.catalog.tableExists(f"{self.location}.{name}"))
        path = self.table_path(name)
        assert path is not None
        if not _URI_RE.match(path):  # a local directory: look for a commit in the Delta log without asking Spark
            return has_commit(os.path.join(path, "_delta_log"))
        return self.version(name) is not None

    def version(self, name: str) -> int | None:
        """The table's latest version, or None when it does not exist. A local directory's is its newest commit
        file's number, read without Spark (`DESCRIBE HISTORY` costs about 0.25 s a table)."""
        local = self._local_version(name)
        if local is not None:
            return local
        try:
            row = self.spark.sql(f"DESCRIBE HISTORY {self.table_ref(name)} LIMIT 1").select("version").first()
        except Exception as e:
            if _is_missing_table(e):
                return None
            raise
        return None if row is None else int(row[0])

    def never_written(self, name: str) -> bool:
        """Whether the table is still at its first version, the empty one `ensure` created, so a query needs not
        read it (planning a read of a Delta table costs a job or two). Known without Spark for a local directory's
        table only: elsewhere False."""
        return self._local_version(name) == 0

    def _local_version(self, name: str) -> int | None:
        """A local directory's table's newest commit number, from its Delta log's file names; None elsewhere or
        when it has no commit."""
        path = self.table_path(name)
        if path is None or _URI_RE.match(path):
            return None
        newest = newest_commit(os.path.join(path, "_delta_log"))
        return None if newest is None else int(newest.split(".")[0])

    def commit_metadata(self, name: str, limit: int) -> list[str | None]:
        """The userMetadata of the table's newest `limit` commits, newest first (None: a commit without). A local
        directory's are read from its Delta log without Spark; elsewhere from `DESCRIBE HISTORY`."""
        path = self.table_path(name)
        if path is not None and not _URI_RE.match(path):
            return _local_commit_metadata(os.path.join(path, "_delta_log"), limit)
        if not self.exists(name):
            return []
        rows = self.history(name, limit).select("userMetadata").collect()
        return [r[0] for r in rows]

    def history(self, name: str, limit: int | None = None) -> DataFrame:
        """`DESCRIBE HISTORY` of the table, newest first."""
        tail = f" LIMIT {int(limit)}" if limit else ""
        return self.spark.sql(f"DESCRIBE HISTORY {self.table_ref(name)}{tail}")

    # ---- reading ---------------------------------------------------------------------------------------------
    def source(self, name: str, timestamp: str | None = None) -> str:
        """How a query reads the table (a relation to put after FROM): the table itself, or for a replay table only
        the rows of each cluster's visible replay, without the `replay_id` column, so that a reader of several
        replay tables never sees one table replaced and another not yet (`replay.spark.replay` writes a replay's
        rows beside the visible ones and switches them in one `replay_state` commit). With `timestamp`, both as of
        that time. A lake whose tables predate the tags is read as it is."""
        at = f" TIMESTAMP AS OF {sql_string(timestamp)}" if timestamp is not None else ""
        if name not in REPLAY_SCHEMAS or not self._tagged(name):
            return f"{self.table_ref(name)}{at}"
        return self._visible_rows(name, self._shown_sql(at), at)

    def _shown_sql(self, at: str = "") -> str:
        """Each cluster's chain of visible replays (`replay.spark.visibility`) as one SQL map, from `replay_state`,
        cluster to (replay id to its range); a cluster whose first replay is still running is left out (looked up,
        it gives null: its untagged rows only). One uncorrelated scalar subquery, computed once per query and shared
        by every table the query reads, rather than a join per table: a warm acl_state_at ran 8 Spark jobs with a
        join, 4 without any filter. `visible_ranges` is read through JSON so that the same text reads a
        `replay_state` written before that column (as of an earlier time, or an older lake): there it is null and
        the chain is `visible_replay_id` over everything (`visibility.chain_of`, the same rule on the driver)."""
        ranges = (f"from_json(to_json(struct(*)), 'visible_ranges ARRAY<STRUCT<replay_id: STRING, "
                  f"{_RANGE_FIELDS}>>').visible_ranges")
        whole = ("array(named_struct('replay_id', visible_replay_id, 'after_offset', CAST(NULL AS BIGINT), "
                 "'upto_offset', CAST(NULL AS BIGINT)))")
        chosen = f"CASE WHEN try_element_at({ranges}, -1).replay_id = visible_replay_id THEN {ranges} ELSE {whole} END"
        chain = (f"map_from_entries(transform({chosen}, r -> struct(r.replay_id, "
                 f"named_struct('after_offset', r.after_offset, 'upto_offset', r.upto_offset))))")
        return (f"(SELECT map_from_entries(collect_list(struct(cluster_id, {chain}))) "
                f"FROM {self.table_ref(REPLAY_STATE)}{at} WHERE visible_replay_id IS NOT NULL)")

    def replayed_clusters_sql(self) -> str:
        """The clusters with a replayed history, as one SQL array (the SQL functions' check for an unknown cluster):
        the keys of the map by which `source` filters the replay tables, so a question that reads one computes it
        once and reads no other table for the check (a warm acl_state_at on the 2M benchmark lake, medians of 14
        questions: 5 Spark jobs and 379-453 ms against 7 and 494-550 ms reading `log_coverage`, same hour). A lake
        written before replay tags: the clusters its `log_coverage` holds."""
        if not self._tagged(LOG_COVERAGE):
            return covered_clusters_sql(self.source(LOG_COVERAGE))
        return f"map_keys({self._shown_sql()})"

    def replayed_clusters(self) -> list[str] | None:
        """The clusters with a replayed history (a visible replay), from `visible_replays`, which is read again only
        after `replay_state` has a new commit, so asking costs no Spark job most times; None for a lake written
        before replay tags, whose `log_coverage` says."""
        if not self._tagged(LOG_COVERAGE):
            return None
        if not self.exists(REPLAY_STATE):
            return []
        return sorted(c for c, replay in self.visible_replays().items() if replay is not None)

    def _visible_rows(self, name: str, shown: str, at: str = "") -> str:
        """The replay table's rows that its cluster's chain shows (`replay.spark.visibility`), without the tag:
        `shown` is a SQL map from cluster to (replay id to its range); a cluster missing from it shows its untagged
        rows only. The chain is looked up once per row (`_chain`); the test of the tag alone reads partition
        columns only, so Delta skips the files of replays not shown."""
        cols = ", ".join(f"t.{quote_ident(f.name)}" for f in VISIBLE_SCHEMAS[name].fields)
        seen = f"t._chain[t.{REPLAY_ID}]"
        key = ROW_KEYS[name]
        in_range = (f"{seen}.upto_offset IS NULL" if key is None else
                    f"coalesce(t.{key} > {seen}.after_offset, TRUE) "
                    f"AND coalesce(t.{key} <= {seen}.upto_offset, {seen}.upto_offset IS NULL)")
        return (f"(SELECT {cols} FROM (SELECT *, {shown}[cluster_id] AS _chain FROM {self.table_ref(name)}{at}) t "
                f"WHERE ({seen} IS NOT NULL OR (t.{REPLAY_ID} IS NULL AND t._chain IS NULL)) AND {in_range})")

    def _tagged(self, name: str) -> bool:
        """Whether the replay table carries replay tags (a lake written before them does not until its next
        replay): true for a table not created yet. Asked once per table and lake object."""
        if name not in self._tags:
            tagged = True
            if self.exists(name):
                tagged = REPLAY_ID in self.read_raw(name).columns and (
                    self.exists(REPLAY_STATE) and "visible_replay_id" in self.read_raw(REPLAY_STATE).columns)
            if not tagged:
                return False  # asked again after the next replay adds the columns
            self._tags.add(name)
        return True

    def read(self, name: str, version: int | None = None, timestamp: str | None = None) -> DataFrame:
        """The table as a DataFrame as readers see it (`source`), now or as of a timestamp; as of a Delta version,
        the table's rows as stored at that version (every replay's, with `replay_id`).

        Now, a replay table is filtered by the visible replays looked up on the driver (`visible_replays`): the
        same rows as `source` gives, without joining `replay_state` in every query."""
        if version is not None:
            return self.read_raw(name, version)
        if timestamp is None and name in REPLAY_SCHEMAS and self._tagged(name):
            return self.spark.sql(f"SELECT * FROM {self._visible_rows(name, chains_sql(self.visible_chains()))}")
        return self.spark.sql(f"SELECT * FROM {self.source(name, timestamp)}")

    def visible_replays(self) -> dict[str, str | None]:
        """Per cluster, the newest replay whose rows readers see (`replay_state.visible_replay_id`)."""
        return {cluster: newest(chain) for cluster, chain in self.visible_chains().items()}

    def visible_chains(self) -> dict[str, Chain]:
        """Per cluster, the replays whose rows readers see, each over its range (`replay.spark.visibility`). Read
        again only when `replay_state` has a new commit: for a local lake the Delta log's file names say so without
        Spark."""
        token = self._state_token()
        if token is None or token != self._visible[0]:
            state = self.read_raw(REPLAY_STATE)
            wanted = [c for c in ("cluster_id", "visible_replay_id", "visible_ranges") if c in state.columns]
            self._visible = (token, {r["cluster_id"]: chain_of(r.asDict(recursive=True))
                                    for r in state.select(*wanted).collect()})
        return self._visible[1]

    def _state_token(self) -> str | None:
        """The newest commit file of `replay_state`'s Delta log in a local directory lake; None elsewhere."""
        path = self.table_path(REPLAY_STATE)
        if path is None or _URI_RE.match(path):
            return None
        return newest_commit(os.path.join(path, "_delta_log"))

    def read_raw(self, name: str, version: int | None = None) -> DataFrame:
        """The table's rows as stored (a replay table's with `replay_id`, including a replay's not visible yet)."""
        suffix = f" VERSION AS OF {int(version)}" if version is not None else ""
        return self.spark.sql(f"SELECT * FROM {self.table_ref(name)}{suffix}")

    # ---- writing ---------------------------------------------------------------------------------------------
    def write(self, name: str, df: DataFrame, user_metadata: str, replace_where: str | None = None,
              max_rows_per_file: int | None = None) -> None:
        """`df` into table `name` in one Delta commit: appended, or with `replace_where` replacing the rows that
        match it. A replace reads the rows it matches (a scan of them where the predicate names a data column) and
        conflicts with a concurrent writer of the same rows; Delta checks an append against no other write of rows
        (only against schema or protocol changes). `max_rows_per_file` splits a task's rows into several files."""
        writer = df.write.format("delta").option("userMetadata", user_metadata).options(**WRITE_OPTIONS)
        if max_rows_per_file:
            writer = writer.option("maxRecordsPerFile", str(max_rows_per_file))
        self._save(name, writer.mode("append") if replace_where is None
                   else writer.mode("overwrite").option("replaceWhere", replace_where))

    def _save(self, name: str, writer: DataFrameWriter) -> None:
        path = self.table_path(name)
        if path is None:
            writer.saveAsTable(self.table_ref(name))
        else:
            writer.save(path)

    # ---- creating --------------------------------------------------------------------------------------------
    def ensure(self, name: str, schema: StructType | None = None) -> str:
        """Create the table if it does not exist (and add columns the schema has gained); return its SQL name."""
        schema = schema or SCHEMAS[name]
        ref = self.table_ref(name)
        key = (name, schema.simpleString())
        if self.is_catalog:
            # No privilege to create schemas: the CREATE TABLE below says what is wrong.
            with contextlib.suppress(Exception):
                self.spark.sql(f"CREATE SCHEMA IF NOT EXISTS {self.schema_ref}")
        if not self.exists(name):
            props = ", ".join(f"{sql_string(k)} = {sql_string(v)}"
                              for k, v in {**self.properties, **EXTRA_PROPERTIES.get(name, {})}.items())
            parts = partition_columns(name, schema)
            partitioned = f" PARTITIONED BY ({', '.join(quote_ident(c) for c in parts)})" if parts else ""
            try:
                self.spark.sql(
                    f"CREATE TABLE IF NOT EXISTS {ref} ({ddl_columns(schema)}) USING DELTA{partitioned} "
                    f"{_table_comment(name)}TBLPROPERTIES ({props})"
                )
            except Exception:
                if not self.exists(name):  # lost a creation race with another writer: fine; anything else: raise
                    raise
                return ref  # created by the other writer, maybe by another version: checked next time
            self._checked.add(key)  # created with this schema: nothing to check while this object lives
            self._laid_out.add(name)
            return ref
        if key in self._checked:  # reading the schema loads the table's latest snapshot: once per lake object
            return ref
        stored = {f.name: f.dataType for f in self.read_raw(name).schema.fields}
        check_column_types(ref, stored, schema)
        missing = [f for f in schema.fields if f.name not in stored]
        if missing:
            self.spark.sql(f"ALTER TABLE {ref} ADD COLUMNS ({ddl_columns(StructType(missing))})")
        self._checked.add(key)
        return ref

    def lay_out(self, name: str) -> bool:
        """Give an existing table this version's partitioning (`partition_columns`) if a version before it wrote the
        table otherwise: one commit that writes its rows again, the same rows, so readers see no change; time travel
        to its earlier versions still reads their files. Returns whether it rewrote the table. Only a writer calls
        it (the replay, for its tables): a reader reads either layout, and so does a writer.

        A catalog's table keeps its layout: changing it goes through REPLACE TABLE, which failed in open-source
        Spark's session catalog (an internal error: the catalog's partition columns out of step with the Delta log)
        and replaces the table's properties; a path's table keeps its properties, comments and history."""
        self.ensure(name)
        if name in self._laid_out or self.table_path(name) is None:
            return False
        wanted = partition_columns(name, SCHEMAS[name])
        if self.stored_partitioning(name) == wanted:
            self._laid_out.add(name)
            return False
        self._save(name, self.read_raw(name).write.format("delta").mode("overwrite").option("overwriteSchema", "true")
                   .partitionBy(*wanted).options(**WRITE_OPTIONS)
                   .option("userMetadata", json.dumps({"operation": "partition", "by": wanted})))
        self._laid_out.add(name)
        return True

    def stored_partitioning(self, name: str) -> list[str]:
        """The partition columns of the table as stored, in order. Read from `DESCRIBE TABLE` (the table's
        metadata): `DESCRIBE DETAIL` also counts its files, three Spark jobs over the Delta log in a new session."""
        rows = self.spark.sql(f"DESCRIBE TABLE {self.table_ref(name)}").collect()
        names = [str(r[0]) for r in rows]
        if "# Partition Information" not in names:
            return []
        after = names[names.index("# Partition Information") + 1:]
        columns = after[1:] if after[:1] == ["# col_name"] else after
        return list(itertools.takewhile(lambda c: c and not c.startswith("#"), columns))

    def document(self, name: str) -> list[str]:
        """Give an existing table the comments of its schema and of `TABLE_COMMENTS` where it lacks them (a lake
        written by an older version has fewer), and the statistics columns of `EXTRA_PROPERTIES` (files written
        before keep their statistics). Each change is a metadata-only commit; returns the statements run."""
        ref = self.ensure(name)
        stored = {f.name: f.metadata.get("comment") for f in self.read_raw(name).schema.fields}
        changes = [f"ALTER TABLE {ref} ALTER COLUMN {quote_ident(f.name)} COMMENT {sql_string(f.metadata['comment'])}"
                   for f in SCHEMAS[name].fields
                   if f.metadata.get("comment") and stored.get(f.name) != f.metadata["comment"]]
        comment = TABLE_COMMENTS.get(name)
        detail = self.spark.sql(f"DESCRIBE DETAIL {ref}").first()
        if comment and (detail is None or detail["description"] != comment):
            changes.append(f"ALTER TABLE {ref} SET TBLPROPERTIES ('comment' = {sql_string(comment)})")
        stats = EXTRA_PROPERTIES.get(name, {}).get(STATS_COLUMNS_PROPERTY)
        held = {} if detail is None else dict(detail["properties"] or {})
        if stats is not None and held.get(STATS_COLUMNS_PROPERTY) != stats:
            changes.append(f"ALTER TABLE {ref} SET TBLPROPERTIES "
                           f"({sql_string(STATS_COLUMNS_PROPERTY)} = {sql_string(stats)})")
        for statement in changes:
            self.spark.sql(statement)
        return changes

    def ensure_all(self, names: list[str] | None = None) -> None:
        for name in names or list(SCHEMAS):
            self.ensure(name)


class LakeVersionError(ValueError):
    """A table written by another version of this tool, with a column of another type."""


def check_column_types(ref: str, stored: dict[str, DataType], schema: StructType) -> None:
    """A column whose type changed between versions cannot be merged into: say which, and what to do."""
    changed = [f"{f.name} is {stored[f.name].simpleString()}, this version writes {f.dataType.simpleString()}"
               for f in schema.fields if f.name in stored and stored[f.name] != f.dataType]
    if changed:
        raise LakeVersionError(
            f"{ref} was written by another version of kraft-replay ({'; '.join(changed)}). Ingest the dumps again "
            "into a new lake (--lake NEW_DIR or --catalog CATALOG.NEW_SCHEMA); the old lake stays readable.")


def _split_two(text: str) -> list[str]:
    m = re.match(rf"^({_IDENT})\.({_IDENT})$", text)
    if not m:
        raise ValueError(f"not a catalog.schema name: {text!r}")
    return [m.group(1), m.group(2)]


def _is_missing_table(error: Exception) -> bool:
    text = str(error)
    return any(
        marker in text
        for marker in ("DELTA_MISSING_DELTA_TABLE", "is not a Delta table", "PATH_NOT_FOUND", "TABLE_OR_VIEW_NOT_FOUND",
                       "DELTA_TABLE_NOT_FOUND", "doesn't exist", "does not exist")
    )
