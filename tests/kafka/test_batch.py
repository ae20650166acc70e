"""The batch decoder on known bytes (spec §12.2), on files the writer makes, and with bounded memory."""

from __future__ import annotations

import io
import os
import struct
import tracemalloc

import pytest

from replay.kafka import writer
from replay.kafka.acl import AclBinding
from replay.kafka.batch import (
    Frame,
    decode_batch,
    iter_batch_frames,
    parse_header,
    read_batches,
    read_bytes,
    read_file,
    read_uvarint,
    read_varint,
)
from replay.kafka.crc import crc32c, crc32c_py
from replay.kafka.model import Batch, Problem

TS = 0x0000018BCFE56800  # 1700000000000

# Spec §12.2, byte for byte.
CONTROL_BATCH = bytes.fromhex(
    "0000000000000000 0000004f 00000001 02 1154eaf9 0020 00000000 0000018bcfe56800 0000018bcfe56800"
    "ffffffffffffffff ffff ffffffff 00000001"
    "3a 00 00 00 08 0000 0002 26 0000 00000001 02 00000001 00 02 00000001 00 00 00".replace(" ", "")
)
_RECORDS = bytes.fromhex(
    (
        "3a 00 00 00 01 2e" + "01 0c 00 11" + b"metadata.version".hex() + "0015 00" + "00"
        + "5e 00 00 02 01 52" + "01 12 00 0123456789abcdef0fedcba987654321 02 04" + b"foo".hex()
        + "03 0b" + b"User:alice".hex() + "02" + b"*".hex() + "03 03 00" + "00"
        + "14 00 00 04 01 08" + "01 14 00 00" + "00"
    ).replace(" ", "")
)
DATA_BATCH = (
    struct.pack(">qiibI", 1, 138, 1, 2, 3306994175)
    + struct.pack(">hiqqqhii", 0, 2, TS, TS, -1, -1, -1, 3)
    + _RECORDS
)
ALICE_ID = "ASNFZ4mrze8P7cuph2VDIQ"  # 0123456789abcdef0fedcba987654321
ALICE = AclBinding.of("TOPIC", "foo", "LITERAL", "User:alice", "*", "READ", "ALLOW")


def only_batches(items: list[Batch | Problem]) -> list[Batch]:
    problems = [i for i in items if isinstance(i, Problem)]
    assert not problems, [p.describe() for p in problems]
    return [i for i in items if isinstance(i, Batch)]


def test_crc32c_check_value_and_fallback() -> None:
    assert crc32c(b"123456789") == 0xE3069283
    assert crc32c_py(b"123456789") == 0xE3069283
    data = os.urandom(1000)
    assert crc32c_py(data) == crc32c(data)
    assert crc32c(data[500:], crc32c(data[:500])) == crc32c(data)
    assert crc32c_py(data[500:], crc32c_py(data[:500])) == crc32c(data)


def test_varints() -> None:
    assert read_uvarint(b"\x96\x01") == (150, 2)
    assert read_varint(b"\x01") == (-1, 1)
    assert read_varint(b"\x02") == (1, 1)
    assert read_varint(writer.varint(-(2**31))) == (-(2**31), 5)
    assert read_varint(writer.varint(2**31 - 1)) == (2**31 - 1, 5)
    assert read_varint(writer.varlong(-(2**63)), long=True) == (-(2**63), 10)
    with pytest.raises(ValueError):
        read_varint(b"\x80\x80\x80\x80\x80\x01")  # 6 bytes: too long for a varint
    with pytest.raises(ValueError):
        read_varint(b"\x80")


def test_spec_annotated_control_batch() -> None:
    assert len(CONTROL_BATCH) == 91
    (batch,) = only_batches(read_bytes(CONTROL_BATCH, "s.log"))
    h = batch.header
    assert (h.position, h.base_offset, h.batch_length, h.size) == (0, 0, 79, 91)
    assert (h.partition_leader_epoch, h.magic, h.crc, h.crc_ok) == (1, 2, 290777849, True)
    assert (h.attributes, h.is_control, h.codec_name, h.timestamp_type) == (0x20, True, "none", "CreateTime")
    assert (h.last_offset_delta, h.base_timestamp, h.max_timestamp) == (0, TS, TS)
    assert (h.producer_id, h.producer_epoch, h.base_sequence, h.records_count) == (-1, -1, -1, 1)
    (rec,) = batch.records
    assert rec.is_control and rec.control_type == 2 and rec.type_name == "LEADER_CHANGE"
    assert rec.key == b"\x00\x00\x00\x02" and rec.offset == 0 and rec.timestamp == TS
    assert rec.data == {"version": 0, "leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]}
    assert batch.source == "s.log"


def test_spec_annotated_data_batch() -> None:
    assert len(DATA_BATCH) == 150
    items = read_bytes(CONTROL_BATCH + DATA_BATCH, "s.log")
    _, batch = only_batches(items)
    h = batch.header
    assert (h.position, h.base_offset, h.batch_length, h.partition_leader_epoch) == (91, 1, 138, 1)
    assert (h.crc, h.crc_ok, h.attributes, h.last_offset_delta, h.last_offset) == (3306994175, True, 0, 2, 3)
    assert (h.records_count, h.is_control) == (3, False)
    fl, acl, noop = batch.records
    assert [r.offset for r in batch.records] == [1, 2, 3]
    assert (fl.api_key, fl.version, fl.type_name) == (12, 0, "FEATURE_LEVEL_RECORD")
    assert fl.data == {"name": "metadata.version", "featureLevel": 21}
    assert acl.type_name == "ACCESS_CONTROL_ENTRY_RECORD" and acl.key is None
    assert acl.data == ALICE.to_record_data(ALICE_ID)
    assert (noop.api_key, noop.type_name, noop.data) == (20, "NO_OP_RECORD", {})


def test_writer_reproduces_the_spec_bytes() -> None:
    assert writer.encode_batch(0, [writer.leader_change(1, [1])], epoch=1, timestamp=TS, control=True) == CONTROL_BATCH
    records = [writer.feature_level("metadata.version", 21), writer.acl_record(ALICE_ID, ALICE), writer.noop()]
    assert writer.encode_batch(1, records, epoch=1, timestamp=TS) == DATA_BATCH


def test_parse_header_and_frames() -> None:
    h = parse_header(DATA_BATCH, 91)
    assert h.crc_ok and h.position == 91 and h.size == 150
    frames = list(iter_batch_frames(io.BytesIO(CONTROL_BATCH + DATA_BATCH), "f"))
    assert frames == [Frame(0, CONTROL_BATCH), Frame(91, DATA_BATCH)]
    assert isinstance(decode_batch(DATA_BATCH, 91, "f")[-1], Batch)


def test_decode_values_off_keeps_raw_and_control_type() -> None:
    items = read_bytes(CONTROL_BATCH + DATA_BATCH, "f", decode_values=False)
    ctrl, data = only_batches(items)
    assert ctrl.records[0].control_type == 2 and ctrl.records[0].data is None
    assert data.records[1].value == writer.acl_record(ALICE_ID, ALICE).value and data.records[1].data is None


def test_segment_writer_snapshot_and_bootstrap(tmp_path: os.PathLike[str]) -> None:
    d = str(tmp_path)
    with writer.SegmentWriter(d, base_offset=100, epoch=3, timestamp=1000, time_step=10) as seg:
        assert seg.append_leader_change(1, [1, 2, 3]) == 100
        assert seg.append([writer.begin_txn("t"), writer.acl_record(ALICE_ID, ALICE), writer.end_txn()],
                          codec="zstd") == 101
        assert seg.append([writer.remove_acl_record(ALICE_ID)], epoch=4) == 104
    assert os.path.basename(seg.path) == "00000000000000000100.log"
    batches = only_batches(list(read_file(seg.path)))
    assert [b.base_offset for b in batches] == [100, 101, 104]
    assert [b.header.partition_leader_epoch for b in batches] == [3, 3, 4]
    assert [b.append_time for b in batches] == [1000, 1010, 1020]
    assert batches[1].header.codec_name == "zstd"
    assert [r.type_name for r in batches[1].records] == [
        "BEGIN_TRANSACTION_RECORD", "ACCESS_CONTROL_ENTRY_RECORD", "END_TRANSACTION_RECORD"]
    assert batches[1].records[0].data == {"name": "t"}

    acls = [writer.acl_record(f"AAAAAAAAAAAAAAAAAAAA{i:02d}"[:22], ALICE) for i in range(5)]
    path = writer.write_snapshot(d, 105, 4, acls, 1020, kraft_version_records=[writer.kraft_version(1)],
                                 batch_size=2, codec="lz4")
    assert os.path.basename(path) == "00000000000000000105-0000000004.checkpoint"
    snap = only_batches(list(read_file(path)))
    assert [b.base_offset for b in snap] == [0, 2, 4, 6, 7]
    assert all(b.header.partition_leader_epoch == 4 for b in snap)
    assert snap[0].header.is_control and snap[-1].header.is_control
    assert [r.type_name for r in snap[0].records] == ["SNAPSHOT_HEADER", "KRAFT_VERSION"]
    assert snap[0].records[0].data == {"version": 0, "lastContainedLogTimestamp": 1020}
    assert [r.type_name for r in snap[-1].records] == ["SNAPSHOT_FOOTER"]
    assert sum(len(b.records) for b in snap[1:-1]) == 5

    boot = writer.write_bootstrap(d, [writer.feature_level("metadata.version", 21)])
    assert os.path.basename(boot) == "bootstrap.checkpoint"
    bb = only_batches(list(read_file(boot)))
    assert bb[0].records[0].data == {"version": 0, "lastContainedLogTimestamp": 0}
    assert bb[1].records[0].data == {"name": "metadata.version", "featureLevel": 21}
    assert all(b.header.partition_leader_epoch == 0 for b in bb)


def test_log_append_time_and_headers() -> None:
    rec = writer.RecordInput(b"v", key=b"k", timestamp_delta=7, headers=(("h1", b"x"), ("h2", None)))
    data = writer.encode_batch(5, [rec, rec], 0, 100, max_timestamp=500, log_append_time=True)
    items = read_bytes(data, "f", decode_values=False)
    (batch,) = only_batches(items)
    assert batch.header.timestamp_type == "LogAppendTime"
    assert [r.timestamp for r in batch.records] == [500, 500]
    assert batch.records[0].headers == (("h1", b"x"), ("h2", None))
    assert batch.records[1].offset == 6 and batch.records[1].timestamp_delta == 7
    created = writer.encode_batch(5, [rec], 0, 100, max_timestamp=500)
    (batch,) = only_batches(read_bytes(created, "f", decode_values=False))
    assert batch.records[0].timestamp == 107


def test_large_segment_is_read_with_bounded_memory(tmp_path: os.PathLike[str]) -> None:
    """A 50 MB segment decodes batch by batch: peak traced memory stays far below the file size."""
    d = str(tmp_path)
    binding = AclBinding.of("TOPIC", "t" * 30000, "PREFIXED", "User:bob", "*", "WRITE", "ALLOW")
    per_batch = 8
    records = [writer.acl_record(f"{i:022d}", binding) for i in range(per_batch)]
    with writer.SegmentWriter(d, codec="none") as seg:
        while seg.position < 50 * 1024 * 1024:
            seg.append(records)
    size = os.path.getsize(seg.path)
    assert size >= 50 * 1024 * 1024
    tracemalloc.start()
    try:
        count = batches = 0
        for item in read_file(seg.path):
            assert isinstance(item, Batch)
            batches += 1
            count += len(item.records)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert count == seg.next_offset and batches == count // per_batch
    assert 0 < peak < 8 * 1024 * 1024, f"peak {peak} bytes for a {size}-byte file"


def test_read_batches_from_non_seekable_stream() -> None:
    class Pipe(io.RawIOBase):
        def __init__(self, data: bytes) -> None:
            self._data = data

        def readable(self) -> bool:
            return True

        def readinto(self, b: bytearray) -> int:  # type: ignore[override]
            n = min(len(b), 7, len(self._data))  # tiny short reads
            b[:n] = self._data[:n]
            self._data = self._data[n:]
            return n

    items = list(read_batches(Pipe(CONTROL_BATCH + DATA_BATCH), "pipe"))  # type: ignore[arg-type]
    assert [b.base_offset for b in only_batches(items)] == [0, 1]
