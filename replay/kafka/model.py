"""Decoded forms shared by the decoder, the writer, the dump-log text reader and the replayer.

A file decodes to a stream of `Batch` and `Problem` items in file order. A `Batch` holds its header facts and its
records; each `Record` keeps its raw key and value and, when they decode, the record type and its fields in the
form Kafka's JSON uses (lowerCamel keys, schema order). Nothing here imports Spark.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

CODEC_NAMES = ("none", "gzip", "snappy", "lz4", "zstd")

# Control record types (the int16 in a control record's key).
# The metadata record types the replay rules read, by api key (`schemas.METADATA_SCHEMAS` has them all).
FEATURE_LEVEL_RECORD = 12
ACL_ENTRY_RECORD = 18
REMOVE_ACL_ENTRY_RECORD = 19
BEGIN_TRANSACTION_RECORD = 23
END_TRANSACTION_RECORD = 24
ABORT_TRANSACTION_RECORD = 25

CONTROL_TYPES = {
    0: "ABORT",
    1: "COMMIT",
    2: "LEADER_CHANGE",
    3: "SNAPSHOT_HEADER",
    4: "SNAPSHOT_FOOTER",
    5: "KRAFT_VERSION",
    6: "KRAFT_VOTERS",
}


class QuestionError(ValueError):
    """A question that cannot be answered as asked (a negative offset, a time before all history, an unknown
    cluster, an operation or principal Kafka would not parse): answering it with an empty state would read as "no
    ACLs were live", so it is refused with a message that says what can be asked instead."""


class UnknownClusterError(QuestionError):
    """The lake holds no replayed history for the cluster named."""


def check_offset(offset: int | None) -> None:
    """Offsets of `__cluster_metadata` start at 0: a negative one is a mistake, not a moment before history."""
    if offset is not None and offset < 0:
        raise QuestionError(f"offset {offset} is negative: offsets of __cluster_metadata start at 0")


class ProblemKind(str, Enum):
    """Everything the decoder or the replayer can find wrong. The value is the name used in tables and JSON."""

    # file level
    NOT_A_METADATA_LOG = "not_a_metadata_log"
    UNREADABLE_FILE = "unreadable_file"
    # batch level
    TRUNCATED_TAIL = "truncated_tail"
    BAD_MAGIC = "bad_magic"
    BATCH_TOO_SHORT = "batch_too_short"
    BAD_CRC = "bad_crc"
    UNKNOWN_CODEC = "unknown_codec"
    DECOMPRESSION_FAILED = "decompression_failed"
    DECOMPRESSION_LIMIT = "decompression_limit"  # the records area decompresses to more than the limit allowed
    RECORD_OVERRUN = "record_overrun"  # a record runs past the end of its batch
    TRAILING_BYTES = "trailing_bytes"  # bytes left after the last record of a batch, or after a record body
    RECORD_COUNT_MISMATCH = "record_count_mismatch"
    # record level
    BAD_RECORD = "bad_record"  # a record value that does not decode against its schema
    UNKNOWN_API_KEY = "unknown_api_key"
    UNKNOWN_VERSION = "unknown_version"
    UNKNOWN_CONTROL_TYPE = "unknown_control_type"
    UNKNOWN_TAGGED_FIELD = "unknown_tagged_field"  # a notice: the record decoded; tags it does not know are kept raw
    # snapshots
    SNAPSHOT_NO_HEADER = "snapshot_no_header"
    SNAPSHOT_NO_FOOTER = "snapshot_no_footer"
    # dump-log text
    BAD_TEXT_LINE = "bad_text_line"
    UNTYPED_RECORD = "untyped_record"  # a notice: control records the text prints as empty lines
    # replay anomalies (DESIGN.md §3)
    NESTED_BEGIN = "nested_begin"
    END_WITHOUT_BEGIN = "end_without_begin"
    ABORT_WITHOUT_BEGIN = "abort_without_begin"
    PENDING_TRANSACTION = "pending_transaction"
    DUPLICATE_ID = "duplicate_id"
    UNKNOWN_REMOVE = "unknown_remove"
    SNAPSHOT_MISMATCH = "snapshot_mismatch"
    DIVERGENCE = "divergence"
    GAP = "gap"
    SKIPPED_BAD_BATCH = "skipped_bad_batch"
    SNAPSHOT_NOT_LOADED = "snapshot_not_loaded"  # a snapshot with any problem inside: its ACL set is not known


# Findings that are reported (counted in summaries, and failing `--strict`) although nothing is wrong with the data:
# the record decoded and Kafka would apply it the same way. They do not make a snapshot unreadable.
NOTICE_KINDS = frozenset({ProblemKind.UNKNOWN_TAGGED_FIELD, ProblemKind.UNTYPED_RECORD})


@dataclass(frozen=True, slots=True)
class Problem:
    """One finding, with where it is: file, byte position in that file, and log offset when known.

    For what was read from kafka-dump-log text, `file` is the text (or, for findings about a dumped file, the path
    its `Dumping` line names), `line` the line number in the text, and `position` the byte position in the dumped
    file as the text gives it (a batch's `position:`), never a line number.
    """

    kind: ProblemKind
    message: str
    file: str | None = None
    position: int | None = None
    offset: int | None = None
    raw: bytes | None = None  # the undecodable bytes, for the quarantine table
    line: int | None = None  # line number in a kafka-dump-log text

    @property
    def is_notice(self) -> bool:
        return self.kind in NOTICE_KINDS

    def describe(self) -> str:
        where = [self.file] if self.file else []  # replay findings (gaps, mismatches) belong to no file
        if self.line is not None:
            where.append(f"line {self.line}")
        if self.position is not None:
            where.append(f"byte {self.position}")
        if self.offset is not None:
            where.append(f"offset {self.offset}")
        return f"{self.kind.value}: {', '.join(where)}: {self.message}" if where else f"{self.kind.value}: {self.message}"


@dataclass(frozen=True, slots=True)
class BatchHeader:
    """The 61-byte v2 batch header plus where it sits and whether its CRC matched."""

    position: int
    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int
    crc_ok: bool = True

    @property
    def size(self) -> int:
        return self.batch_length + 12

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def codec(self) -> int:
        return self.attributes & 0x07

    @property
    def codec_name(self) -> str:
        return CODEC_NAMES[self.codec] if self.codec < len(CODEC_NAMES) else f"unknown({self.codec})"

    @property
    def timestamp_type(self) -> str:
        return "LogAppendTime" if self.attributes & 0x08 else "CreateTime"

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & 0x10)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & 0x20)

    @property
    def delete_horizon_ms(self) -> int | None:
        return self.base_timestamp if self.attributes & 0x40 else None

    @property
    def last_sequence(self) -> int:
        if self.base_sequence == -1:
            return -1
        return (self.base_sequence + self.last_offset_delta) & 0x7FFFFFFF


@dataclass(slots=True)
class Record:
    """One record of a batch: raw parts always; the decoded type and fields when they decode.

    For data records `api_key`/`version` come from the metadata frame and `type_name` is the
    MetadataRecordType name (`ACCESS_CONTROL_ENTRY_RECORD`). For control records `control_type` is the key's type,
    `version` the body's Version field and `type_name` the control name (`SNAPSHOT_HEADER`). `data` holds every
    field present in that version (tagged ones at their default when absent) with lowerCamel keys in schema
    order: ints, bools, floats, str, uuids as their 22-character base64url text, bytes as bytes, structs as
    dicts, arrays as lists. Tags the schema does not know are kept in `unknown_tags` (tag -> raw bytes).
    `error` says why the value did not decode; `data` is then None and the raw value is still here.
    """

    offset: int
    timestamp: int
    key: bytes | None
    value: bytes | None
    attributes: int = 0
    timestamp_delta: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()
    control_type: int | None = None
    api_key: int | None = None
    version: int | None = None
    type_name: str | None = None
    data: dict[str, Any] | None = None
    unknown_tags: dict[int, bytes] = field(default_factory=dict)
    error: str | None = None

    @property
    def is_control(self) -> bool:
        return self.control_type is not None


@dataclass(slots=True)
class Batch:
    """A decoded batch from one source file."""

    header: BatchHeader
    records: list[Record]
    source: str = ""

    @property
    def base_offset(self) -> int:
        return self.header.base_offset

    @property
    def append_time(self) -> int:
        """DESIGN.md §3.8: a record's time is its batch's append time (max timestamp)."""
        return self.header.max_timestamp


class SourceKind(str, Enum):
    SEGMENT = "segment"
    SNAPSHOT = "snapshot"
    BOOTSTRAP = "bootstrap"
    DUMP_LOG_TEXT = "dump_log_text"


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A file a dump holds, classified by its name (spec §1.3)."""

    path: str
    kind: SourceKind
    base_offset: int | None = None  # segments: from the name
    snapshot_end_offset: int | None = None  # snapshots: exclusive end offset from the name
    snapshot_epoch: int | None = None

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]
