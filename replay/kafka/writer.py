"""Write metadata log files the way Kafka does: records, batches, segments, snapshots, bootstrap files.

For tests and benchmarks. Everything `batch.read_batches` reads can be written here, and reads back equal:

* `encode_record` / `encode_batch`: spec §2–§3 bytes with a correct CRC-32C and any codec;
* `SegmentWriter`: a `<base offset>.log` segment, batches appended with consecutive offsets;
* `write_snapshot` / `write_bootstrap`: `<end offset>-<epoch>.checkpoint` and `bootstrap.checkpoint` with
  the SnapshotHeader control batch first, data batches, the SnapshotFooter control batch last, local offsets
  from 0 and every batch at the snapshot epoch (spec §1.3, §5.3);
* builders for the records that matter here (`acl_record`, `begin_txn`, `leader_change`, ...), each a
  `RecordInput`: a value (and key for control records) ready to put in a batch;
* `corrupt_crc`, `with_magic`, ...: deliberately bad bytes for tests.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

from . import codecs
from .acl import AclBinding
from .batch import CRC_START, LOG_OVERHEAD, RECORD_BATCH_OVERHEAD
from .crc import crc32c
from .files import BOOTSTRAP_NAME, segment_name, snapshot_name
from .message import encode_control_value, encode_metadata_value
from .model import Batch, Record

ATTR_LOG_APPEND_TIME = 0x08
ATTR_TRANSACTIONAL = 0x10
ATTR_CONTROL = 0x20

# Control record types (spec §5.1).
ABORT, COMMIT, LEADER_CHANGE, SNAPSHOT_HEADER, SNAPSHOT_FOOTER, KRAFT_VERSION, KRAFT_VOTERS = range(7)


@dataclass(frozen=True, slots=True)
class RecordInput:
    """One record to write. Control records carry `control_type`; their key defaults to (version 0, type)."""

    value: bytes | None
    key: bytes | None = None
    control_type: int | None = None
    timestamp_delta: int = 0
    attributes: int = 0
    headers: tuple[tuple[str, bytes | None], ...] = ()

    @property
    def record_key(self) -> bytes | None:
        if self.key is None and self.control_type is not None:
            return control_key(self.control_type)
        return self.key


RecordLike = RecordInput | Record | bytes


def control_key(control_type: int, version: int = 0) -> bytes:
    return struct.pack(">hh", version, control_type)


def as_input(record: RecordLike) -> RecordInput:
    """A `RecordInput` from an input, a decoded `Record` (its raw key and value) or a bare value."""
    if isinstance(record, RecordInput):
        return record
    if isinstance(record, (bytes, bytearray, memoryview)):
        return RecordInput(bytes(record))
    return RecordInput(record.value, record.key, record.control_type, record.timestamp_delta, record.attributes,
                       record.headers)


# ---- varints and records -------------------------------------------------------------------------------------


def uvarint(u: int) -> bytes:
    """Unsigned LEB128."""
    out = bytearray()
    while u >= 0x80:
        out.append((u & 0x7F) | 0x80)
        u >>= 7
    out.append(u)
    return bytes(out)


def varint(n: int) -> bytes:
    """Zig-zag varint (32-bit)."""
    return uvarint(((n << 1) ^ (n >> 31)) & 0xFFFFFFFF)


def varlong(n: int) -> bytes:
    """Zig-zag varlong (64-bit)."""
    return uvarint(((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF)


def _bytes_field(data: bytes | None) -> bytes:
    return varint(-1) if data is None else varint(len(data)) + data


def encode_record(
    offset_delta: int,
    value: bytes | None,
    key: bytes | None = None,
    timestamp_delta: int = 0,
    attributes: int = 0,
    headers: Iterable[tuple[str, bytes | None]] = (),
) -> bytes:
    """One record in the v2 format (spec §3), with its length prefix."""
    headers = tuple(headers)
    parts = [bytes([attributes & 0xFF]), varlong(timestamp_delta), varint(offset_delta), _bytes_field(key),
             _bytes_field(value), varint(len(headers))]
    for hkey, hvalue in headers:
        raw_key = hkey.encode("utf-8")
        parts.append(varint(len(raw_key)) + raw_key)
        parts.append(_bytes_field(hvalue))
    body = b"".join(parts)
    return varint(len(body)) + body


# ---- batches -------------------------------------------------------------------------------------------------

_HEADER_AFTER_CRC = struct.Struct(">hiqqqhii")


def encode_batch(
    base_offset: int,
    records: Sequence[RecordLike],
    epoch: int = 0,
    timestamp: int = 0,
    codec: int | str = 0,
    control: bool = False,
    *,
    max_timestamp: int | None = None,
    log_append_time: bool = False,
    transactional: bool = False,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    offset_deltas: Sequence[int] | None = None,
    records_count: int | None = None,
    last_offset_delta: int | None = None,
    extra_attributes: int = 0,
    magic: int = 2,
) -> bytes:
    """A whole v2 batch with a correct CRC. KRaft's shape by default: base = max timestamp, no producer.

    `offset_deltas` default to the record indexes; `records_count` and `last_offset_delta` default to what the
    records say (override them to make inconsistent batches for tests).
    """
    codec_id = codecs.codec_id(codec)
    inputs = [as_input(r) for r in records]
    deltas = list(offset_deltas) if offset_deltas is not None else list(range(len(inputs)))
    if len(deltas) != len(inputs):
        raise ValueError("offset_deltas must have one entry per record")
    area = b"".join(
        encode_record(d, r.value, r.record_key, r.timestamp_delta, r.attributes, r.headers)
        for d, r in zip(deltas, inputs, strict=True)
    )
    area = codecs.compress(codec_id, area)
    attributes = codec_id | extra_attributes
    if log_append_time:
        attributes |= ATTR_LOG_APPEND_TIME
    if transactional:
        attributes |= ATTR_TRANSACTIONAL
    if control:
        attributes |= ATTR_CONTROL
    return assemble_batch(
        base_offset,
        area,
        len(inputs) if records_count is None else records_count,
        (max(deltas) if deltas else 0) if last_offset_delta is None else last_offset_delta,
        epoch=epoch,
        timestamp=timestamp,
        attributes=attributes,
        max_timestamp=max_timestamp,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        base_sequence=base_sequence,
        magic=magic,
    )


def assemble_batch(
    base_offset: int,
    records_area: bytes,
    records_count: int,
    last_offset_delta: int,
    *,
    epoch: int = 0,
    timestamp: int = 0,
    attributes: int = 0,
    max_timestamp: int | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
    base_sequence: int = -1,
    magic: int = 2,
) -> bytes:
    """A batch around an already encoded (and compressed) records area, with a correct CRC. For odd batches."""
    after_crc = _HEADER_AFTER_CRC.pack(
        attributes,
        last_offset_delta,
        timestamp,
        timestamp if max_timestamp is None else max_timestamp,
        producer_id,
        producer_epoch,
        base_sequence,
        records_count,
    ) + records_area
    batch_length = RECORD_BATCH_OVERHEAD - LOG_OVERHEAD + len(records_area)
    return struct.pack(">qiibI", base_offset, batch_length, epoch, magic, crc32c(after_crc)) + after_crc


def reencode_batch(batch: Batch, codec: int | str | None = None) -> bytes:
    """A decoded batch written again from its header facts and raw records (optionally with another codec)."""
    h = batch.header
    return encode_batch(
        h.base_offset,
        batch.records,
        h.partition_leader_epoch,
        h.base_timestamp,
        h.codec if codec is None else codec,
        h.is_control,
        max_timestamp=h.max_timestamp,
        producer_id=h.producer_id,
        producer_epoch=h.producer_epoch,
        base_sequence=h.base_sequence,
        offset_deltas=[r.offset - h.base_offset for r in batch.records],
        records_count=h.records_count,
        last_offset_delta=h.last_offset_delta,
        extra_attributes=h.attributes & ~0x27 & 0xFFFF,
    )


# ---- record builders -----------------------------------------------------------------------------------------


def metadata_record(api_key: int, version: int, data: dict[str, Any],
                    unknown_tags: dict[int, bytes] | None = None) -> RecordInput:
    """A data record holding a framed metadata value (spec §6.1)."""
    return RecordInput(encode_metadata_value(api_key, version, data, unknown_tags))


def control_record(control_type: int, data: dict[str, Any],
                   unknown_tags: dict[int, bytes] | None = None) -> RecordInput:
    """A control record: key (0, type) and the control body (spec §5)."""
    return RecordInput(encode_control_value(control_type, data, unknown_tags), control_type=control_type)


def acl_record(acl_id: str, binding: AclBinding | dict[str, Any]) -> RecordInput:
    """AccessControlEntryRecord (18) for `binding` under the 22-character base64url id."""
    data = binding.to_record_data(acl_id) if isinstance(binding, AclBinding) else {"id": acl_id, **binding}
    return metadata_record(18, 0, data)


def remove_acl_record(acl_id: str) -> RecordInput:
    return metadata_record(19, 0, {"id": acl_id})


def begin_txn(name: str | None = None) -> RecordInput:
    return metadata_record(23, 0, {"name": name})


def end_txn() -> RecordInput:
    return metadata_record(24, 0, {})


def abort_txn(reason: str | None = None) -> RecordInput:
    return metadata_record(25, 0, {"reason": reason})


def noop() -> RecordInput:
    return metadata_record(20, 0, {})


def feature_level(name: str, level: int) -> RecordInput:
    return metadata_record(12, 0, {"name": name, "featureLevel": level})


def leader_change(leader_id: int, voters: Sequence[int], granting_voters: Sequence[int] | None = None) -> RecordInput:
    """LEADER_CHANGE at body version 0, as a new Raft leader writes it."""
    granting = voters if granting_voters is None else granting_voters
    return control_record(LEADER_CHANGE, {
        "version": 0,
        "leaderId": leader_id,
        "voters": [{"voterId": v} for v in voters],
        "grantingVoters": [{"voterId": v} for v in granting],
    })


def snapshot_header(last_contained_timestamp: int) -> RecordInput:
    return control_record(SNAPSHOT_HEADER, {"version": 0, "lastContainedLogTimestamp": last_contained_timestamp})


def snapshot_footer() -> RecordInput:
    return control_record(SNAPSHOT_FOOTER, {"version": 0})


def kraft_version(level: int) -> RecordInput:
    return control_record(KRAFT_VERSION, {"version": 0, "kRaftVersion": level})


# ---- files ---------------------------------------------------------------------------------------------------


class SegmentWriter:
    """Appends batches to `<directory>/<base offset, 20 digits>.log` with consecutive offsets.

    Each `append` writes one batch and returns its base offset. `timestamp` is the append time of the next batch
    and advances by `time_step` per batch unless given per call.
    """

    def __init__(self, directory: str, base_offset: int = 0, *, epoch: int = 0, timestamp: int = 0,
                 time_step: int = 0, codec: int | str = 0) -> None:
        os.makedirs(directory, exist_ok=True)
        self.path = os.path.join(directory, segment_name(base_offset))
        self.base_offset = base_offset
        self.next_offset = base_offset
        self.epoch = epoch
        self.timestamp = timestamp
        self.time_step = time_step
        self.codec = codec
        self.position = 0
        self._file: BinaryIO = open(self.path, "wb")  # noqa: SIM115 - closed by close()

    def append(self, records: Sequence[RecordLike], *, control: bool = False, epoch: int | None = None,
               timestamp: int | None = None, codec: int | str | None = None) -> int:
        if not records:
            raise ValueError("a batch needs at least one record")
        if timestamp is None:
            timestamp = self.timestamp
            self.timestamp += self.time_step
        if epoch is not None:
            self.epoch = epoch
        data = encode_batch(self.next_offset, records, self.epoch, timestamp,
                            self.codec if codec is None else codec, control)
        base = self.next_offset
        self.write_raw(data)
        self.next_offset += len(records)
        return base

    def append_control(self, records: Sequence[RecordLike], **options: Any) -> int:
        return self.append(records, control=True, **options)

    def append_leader_change(self, leader_id: int, voters: Sequence[int], epoch: int | None = None,
                             timestamp: int | None = None) -> int:
        """The LEADER_CHANGE control batch a new leader writes at the start of `epoch`."""
        return self.append([leader_change(leader_id, voters)], control=True, epoch=epoch, timestamp=timestamp,
                           codec=0)

    def write_raw(self, data: bytes) -> int:
        """Write bytes as they are (for bad files); returns their position."""
        pos = self.position
        self._file.write(data)
        self.position += len(data)
        return pos

    def close(self) -> None:
        self._file.close()

    def __enter__(self) -> SegmentWriter:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def snapshot_bytes(
    records: Sequence[RecordLike],
    epoch: int,
    last_contained_timestamp: int,
    *,
    kraft_version_records: Sequence[RecordLike] = (),
    batch_size: int = 1000,
    codec: int | str = 0,
    timestamp: int | None = None,
) -> bytes:
    """A snapshot file image: header control batch, data batches of `batch_size` records, footer control batch."""
    if batch_size < 1:
        raise ValueError("batch_size must be at least 1")
    ts = last_contained_timestamp if timestamp is None else timestamp
    parts: list[bytes] = []
    offset = 0
    head = [snapshot_header(last_contained_timestamp), *kraft_version_records]
    parts.append(encode_batch(offset, head, epoch, ts, 0, control=True))
    offset += len(head)
    for start in range(0, len(records), batch_size):
        chunk = records[start : start + batch_size]
        parts.append(encode_batch(offset, chunk, epoch, ts, codec))
        offset += len(chunk)
    parts.append(encode_batch(offset, [snapshot_footer()], epoch, ts, 0, control=True))
    return b"".join(parts)


def write_snapshot(
    directory: str,
    end_offset: int,
    epoch: int,
    records: Sequence[RecordLike],
    last_contained_timestamp: int,
    *,
    kraft_version_records: Sequence[RecordLike] = (),
    batch_size: int = 1000,
    codec: int | str = 0,
    timestamp: int | None = None,
) -> str:
    """Write `<end offset>-<epoch>.checkpoint` into `directory`; returns its path."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, snapshot_name(end_offset, epoch))
    data = snapshot_bytes(records, epoch, last_contained_timestamp, kraft_version_records=kraft_version_records,
                          batch_size=batch_size, codec=codec, timestamp=timestamp)
    with open(path, "wb") as f:
        f.write(data)
    return path


def write_bootstrap(directory: str, records: Sequence[RecordLike], *, batch_size: int = 1000,
                    codec: int | str = 0, timestamp: int = 0) -> str:
    """`bootstrap.checkpoint` as `kafka-storage format` writes it: epoch 0, header timestamp 0."""
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, BOOTSTRAP_NAME)
    with open(path, "wb") as f:
        f.write(snapshot_bytes(records, 0, 0, batch_size=batch_size, codec=codec, timestamp=timestamp))
    return path


# ---- deliberately bad bytes ----------------------------------------------------------------------------------


def corrupt_crc(batch: bytes) -> bytes:
    """The batch with its stored CRC changed (the content is intact)."""
    b = bytearray(batch)
    b[17] ^= 0xFF
    return bytes(b)


def corrupt_body(batch: bytes, at: int = -1) -> bytes:
    """The batch with one byte inside the CRC-covered part flipped (so the stored CRC no longer matches)."""
    b = bytearray(batch)
    index = at if at >= 0 else len(b) + at
    if index < CRC_START:
        raise ValueError("flip a byte at or after the attributes field")
    b[index] ^= 0x01
    return bytes(b)


def with_magic(batch: bytes, magic: int) -> bytes:
    b = bytearray(batch)
    b[16] = magic & 0xFF
    return bytes(b)


def with_batch_length(batch: bytes, batch_length: int) -> bytes:
    return batch[:8] + struct.pack(">i", batch_length) + batch[12:]
