"""Every kind of bad bytes gives the right problem, named by file, position and offset; decodable neighbours are
kept, undecodable bytes are kept raw; strict mode raises."""

from __future__ import annotations

import io
import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import batch as batch_module
from replay.kafka import files, writer
from replay.kafka.acl import AclBinding
from replay.kafka.batch import DecodeError, decode_batch, read_batches, read_bytes, read_file
from replay.kafka.dump import ProblemSummary, read_source, replay_paths
from replay.kafka.model import Batch, Problem, ProblemKind

SRC = "00000000000000000000.log"
BOB = AclBinding.of("TOPIC", "payments", "LITERAL", "User:bob", "*", "READ", "ALLOW")


def acl(i: int) -> writer.RecordInput:
    return writer.acl_record(f"AAAAAAAAAAAAAAAAAAAA{i:02d}", BOB)


def three_batches(codec: str = "none") -> list[bytes]:
    """Offsets 0..1, 2..4, 5."""
    return [
        writer.encode_batch(0, [acl(0), acl(1)], 1, 1000, codec),
        writer.encode_batch(2, [acl(2), acl(3), acl(4)], 1, 1001, codec),
        writer.encode_batch(5, [writer.noop()], 1, 1002, codec),
    ]


def split(items: list[Batch | Problem]) -> tuple[list[Batch], list[Problem]]:
    return [i for i in items if isinstance(i, Batch)], [i for i in items if isinstance(i, Problem)]


def one_problem(items: list[Batch | Problem], kind: ProblemKind) -> Problem:
    _, problems = split(items)
    assert [p.kind for p in problems] == [kind], [p.describe() for p in problems]
    p = problems[0]
    assert p.file == SRC
    return p


def raw_record_batch(base_offset: int, area: bytes, count: int, control: bool = False, codec: int = 0) -> bytes:
    return writer.assemble_batch(base_offset, area, count, max(count - 1, 0), epoch=1, timestamp=5,
                                 attributes=codec | (0x20 if control else 0))


# ---- batch level ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize("codec", ["none", "gzip", "zstd"])
def test_bad_crc_in_the_middle_keeps_all_three_batches(codec: str) -> None:
    b0, b1, b2 = three_batches(codec)
    items = read_bytes(b0 + writer.corrupt_crc(b1) + b2, SRC)
    p = one_problem(items, ProblemKind.BAD_CRC)
    assert (p.position, p.offset, p.raw) == (len(b0), 2, writer.corrupt_crc(b1))
    batches, _ = split(items)
    assert [b.base_offset for b in batches] == [0, 2, 5]
    assert [b.header.crc_ok for b in batches] == [True, False, True]
    assert [len(b.records) for b in batches] == [2, 3, 1]  # the bad-CRC batch's records are still decoded
    assert items.index(p) < items.index(batches[1])  # the problem comes before its batch


def test_flipped_body_byte_is_a_bad_crc() -> None:
    b0, b1, b2 = three_batches()
    items = read_bytes(b0 + writer.corrupt_body(b1, 30) + b2, SRC)
    p = one_problem(items, ProblemKind.BAD_CRC)
    assert p.position == len(b0)


@pytest.mark.parametrize("cut", [1, 10, 60, 100])
def test_truncated_tail(cut: int) -> None:
    b0, b1, _ = three_batches()
    partial = b1[: len(b1) - cut]
    items = read_bytes(b0 + partial, SRC)
    p = one_problem(items, ProblemKind.TRUNCATED_TAIL)
    assert p.position == len(b0) and p.offset == 2 and p.raw == partial
    assert p.message.startswith(f"Found {len(partial)} invalid bytes at the end of {SRC}")
    batches, _ = split(items)
    assert [b.base_offset for b in batches] == [0]


@pytest.mark.parametrize("tail", [1, 8, 16])
def test_tail_shorter_than_a_header(tail: int) -> None:
    b0, b1, _ = three_batches()
    items = read_bytes(b0 + b1[:tail], SRC)
    p = one_problem(items, ProblemKind.TRUNCATED_TAIL)
    assert p.position == len(b0) and p.raw == b1[:tail]
    assert f"Found {tail} invalid bytes" in p.message
    assert p.offset == 2  # from its header, or, when even that is cut, the offset after the last batch


@pytest.mark.parametrize("length", [0, 5, 13, -1])
def test_batch_length_below_14_skips_to_the_next_valid_batch(length: int) -> None:
    b0, b1, b2 = three_batches()
    items = read_bytes(b0 + writer.with_batch_length(b1, length) + b2, SRC)
    p = one_problem(items, ProblemKind.BATCH_TOO_SHORT)
    assert p.position == len(b0) and p.offset == 2
    assert p.raw == writer.with_batch_length(b1, length)  # exactly the bytes that could not be framed
    assert f"the {len(b1)} bytes before byte {len(b0) + len(b1)}, where the next valid batch starts" in p.message
    assert [b.base_offset for b in split(items)[0]] == [0, 5]


@pytest.mark.parametrize("length", [0, 5, -1])
def test_batch_length_below_14_with_nothing_valid_after_makes_the_rest_undecodable(length: int) -> None:
    b0, b1, b2 = three_batches()
    rest = writer.with_batch_length(b1, length) + writer.corrupt_crc(b2)
    items = read_bytes(b0 + rest, SRC)
    p = one_problem(items, ProblemKind.BATCH_TOO_SHORT)
    assert p.position == len(b0) and p.offset == 2 and p.raw == rest
    assert f"remaining {len(rest)} bytes" in p.message
    assert [b.base_offset for b in split(items)[0]] == [0]


def test_zero_filled_tail_is_named() -> None:
    b0, _, _ = three_batches()
    p = one_problem(read_bytes(b0 + bytes(4096), SRC), ProblemKind.BATCH_TOO_SHORT)
    assert "all zero" in p.message and len(p.raw or b"") == 4096


def test_batch_shorter_than_the_v2_header_is_skipped_by_length() -> None:
    b0, _, b2 = three_batches()
    short = writer.with_batch_length(b0[:40], 28)
    items = read_bytes(b0 + short + b2, SRC)
    p = one_problem(items, ProblemKind.BATCH_TOO_SHORT)
    assert p.position == len(b0) and p.raw == short
    assert [b.base_offset for b in split(items)[0]] == [0, 5]


def test_bad_magic_with_a_plausible_length_is_skipped() -> None:
    b0, b1, b2 = three_batches()
    items = read_bytes(b0 + writer.with_magic(b1, 1) + b2, SRC)
    p = one_problem(items, ProblemKind.BAD_MAGIC)
    assert (p.position, p.offset, p.raw) == (len(b0), 2, writer.with_magic(b1, 1))
    assert [b.base_offset for b in split(items)[0]] == [0, 5]


def test_bad_magic_with_a_length_past_the_end_skips_to_the_next_valid_batch() -> None:
    b0, b1, b2 = three_batches()
    bad = writer.with_batch_length(writer.with_magic(b1, 7), 10**6)
    items = read_bytes(b0 + bad + b2, SRC)
    p = one_problem(items, ProblemKind.BAD_MAGIC)
    assert p.position == len(b0) and p.raw == bad
    assert [b.base_offset for b in split(items)[0]] == [0, 5]
    items = read_bytes(b0 + bad + b2[:-1], SRC)  # nothing valid after it: the rest is the problem
    p = one_problem(items, ProblemKind.BAD_MAGIC)
    assert p.raw == bad + b2[:-1]
    assert [b.base_offset for b in split(items)[0]] == [0]


def test_implausibly_large_length_is_not_read_into_memory() -> None:
    b0, b1, b2 = three_batches()
    bad = writer.with_batch_length(b1, 2**31 - 1)
    p = one_problem(read_bytes(b0 + bad + b2[:-1], SRC, max_batch_size=1 << 20), ProblemKind.TRUNCATED_TAIL)
    assert p.position == len(b0) and p.raw == bad + b2[:-1]
    items = read_bytes(b0 + bad + b2, SRC, max_batch_size=1 << 20)
    p = one_problem(items, ProblemKind.BATCH_TOO_SHORT)
    assert p.position == len(b0) and p.raw == bad and "above the limit" in p.message
    assert [b.base_offset for b in split(items)[0]] == [0, 5]


def test_unknown_codec() -> None:
    b0, _, b2 = three_batches()
    area = b"".join(writer.encode_record(i, acl(i).value) for i in range(2))
    bad = raw_record_batch(2, area, 2, codec=6)
    items = read_bytes(b0 + bad + b2, SRC)
    p = one_problem(items, ProblemKind.UNKNOWN_CODEC)
    assert (p.position, p.offset, p.raw) == (len(b0), 2, bad)
    batches, _ = split(items)
    assert [b.base_offset for b in batches] == [0, 2, 5]
    assert batches[1].records == [] and batches[1].header.codec_name == "unknown(6)"


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_decompression_failure(codec: int) -> None:
    b0, _, b2 = three_batches()
    bad = raw_record_batch(2, b"\x00garbage that is not compressed" * 3, 2, codec=codec)
    items = read_bytes(b0 + bad + b2, SRC)
    p = one_problem(items, ProblemKind.DECOMPRESSION_FAILED)
    assert (p.position, p.offset, p.raw) == (len(b0), 2, bad)
    assert [b.base_offset for b in split(items)[0]] == [0, 2, 5]


# ---- record level --------------------------------------------------------------------------------------------


def test_record_length_overrunning_the_batch() -> None:
    good = writer.encode_record(0, acl(0).value)
    second = writer.encode_record(1, acl(1).value)
    area = good + writer.varint(500) + second[1:]
    items = read_bytes(raw_record_batch(10, area, 2), SRC)
    p = one_problem(items, ProblemKind.RECORD_OVERRUN)
    assert p.position == 0 and p.offset == 11 and p.raw == area[len(good):]
    assert f"file byte {61 + len(good)}" in p.message
    (batch,) = split(items)[0]
    assert [r.offset for r in batch.records] == [10]


def test_record_fields_overrunning_the_record_length_skip_only_that_record() -> None:
    body = bytes([0]) + writer.varlong(0) + writer.varint(1) + writer.varint(-1) + writer.varint(100) + b"xx"
    bad = writer.varint(len(body)) + body
    area = writer.encode_record(0, acl(0).value) + bad + writer.encode_record(2, acl(2).value)
    items = read_bytes(raw_record_batch(0, area, 3), SRC)
    p = one_problem(items, ProblemKind.RECORD_OVERRUN)
    assert p.offset == 1 and p.raw == bad
    (batch,) = split(items)[0]
    assert [r.offset for r in batch.records] == [0, 2]


def test_bytes_after_a_record_body() -> None:
    rec = writer.encode_record(0, acl(0).value)
    body = rec[1:] + b"\x07\x07"
    area = writer.varint(len(body)) + body
    items = read_bytes(raw_record_batch(0, area, 1), SRC)
    p = one_problem(items, ProblemKind.TRAILING_BYTES)
    assert p.raw == b"\x07\x07" and p.offset == 0
    (batch,) = split(items)[0]
    assert batch.records[0].data is not None  # the record itself still decodes


def test_bytes_after_the_last_record() -> None:
    area = b"".join(writer.encode_record(i, acl(i).value) for i in range(3))
    items = read_bytes(raw_record_batch(0, area, 2), SRC)
    p = one_problem(items, ProblemKind.TRAILING_BYTES)
    assert p.raw == writer.encode_record(2, acl(2).value)
    assert len(split(items)[0][0].records) == 2


@pytest.mark.parametrize("count", [5, -1])
def test_record_count_mismatch(count: int) -> None:
    area = b"".join(writer.encode_record(i, acl(i).value) for i in range(3))
    items = read_bytes(raw_record_batch(0, area, count), SRC)
    p = one_problem(items, ProblemKind.RECORD_COUNT_MISMATCH)
    assert p.position == 0
    assert len(split(items)[0][0].records) == 3


def test_negative_header_count_is_a_bad_record() -> None:
    body = bytes([0]) + writer.varlong(0) + writer.varint(0) + writer.varint(-1) + writer.varint(1) + b"x" + writer.varint(-3)
    area = writer.varint(len(body)) + body + writer.encode_record(1, acl(1).value)
    items = read_bytes(raw_record_batch(0, area, 2), SRC)
    p = one_problem(items, ProblemKind.BAD_RECORD)
    assert "header count" in p.message
    assert [r.offset for r in split(items)[0][0].records] == [1]


@pytest.mark.parametrize(
    ("value", "kind", "api_key"),
    [
        (bytes.fromhex("01ff7f00"), ProblemKind.UNKNOWN_API_KEY, 16383),
        (bytes.fromhex("011205") + b"\x00" * 20, ProblemKind.UNKNOWN_VERSION, 18),
        (bytes.fromhex("0108ffffff7f"), ProblemKind.UNKNOWN_VERSION, 8),
        (bytes.fromhex("011300") + b"\x01" * 3, ProblemKind.BAD_RECORD, 19),
        (bytes.fromhex("001400"), ProblemKind.BAD_RECORD, 20),
    ],
)
def test_value_that_does_not_decode_is_kept_raw(value: bytes, kind: ProblemKind, api_key: int) -> None:
    area = writer.encode_record(0, acl(0).value) + writer.encode_record(1, value) + writer.encode_record(2, acl(2).value)
    items = read_bytes(raw_record_batch(7, area, 3), SRC)
    p = one_problem(items, kind)
    assert (p.position, p.offset, p.raw) == (0, 8, value)
    (batch,) = split(items)[0]
    bad = batch.records[1]
    assert bad.value == value and bad.data is None and bad.error
    assert bad.api_key == api_key
    assert batch.records[0].data is not None and batch.records[2].data is not None


def test_null_value_in_a_data_batch() -> None:
    items = read_bytes(raw_record_batch(0, writer.encode_record(0, None), 1), SRC)
    p = one_problem(items, ProblemKind.BAD_RECORD)
    assert p.offset == 0 and "null" in p.message


def test_bad_record_inside_a_compressed_batch() -> None:
    recs = [acl(0), writer.RecordInput(bytes.fromhex("01ff7f00")), acl(2)]
    b0 = writer.encode_batch(0, [writer.noop()], 1, 5)
    bad = writer.encode_batch(1, recs, 1, 5, "snappy")
    items = read_bytes(b0 + bad, SRC)
    p = one_problem(items, ProblemKind.UNKNOWN_API_KEY)
    assert p.position == len(b0) and p.offset == 2


@pytest.mark.parametrize(
    ("key", "value", "kind"),
    [
        (writer.control_key(9), b"\x00\x00\x00", ProblemKind.UNKNOWN_CONTROL_TYPE),
        (writer.control_key(2, version=-1), b"", ProblemKind.BAD_RECORD),
        (b"\x00\x00", b"", ProblemKind.BAD_RECORD),
        (None, b"", ProblemKind.BAD_RECORD),
        (writer.control_key(3), b"\x00\x00\x01", ProblemKind.BAD_RECORD),
    ],
)
def test_bad_control_records(key: bytes | None, value: bytes, kind: ProblemKind) -> None:
    area = writer.encode_record(0, value, key)
    items = read_bytes(raw_record_batch(3, area, 1, control=True), SRC)
    p = one_problem(items, kind)
    assert p.offset == 3
    (batch,) = split(items)[0]
    rec = batch.records[0]
    assert rec.is_control and rec.error and rec.data is None and rec.value == value


def test_longer_control_key_is_accepted() -> None:
    area = writer.encode_record(0, writer.snapshot_footer().value, writer.control_key(4) + b"\x99\x99")
    (batch,) = split(read_bytes(raw_record_batch(0, area, 1, control=True), SRC))[0]
    assert batch.records[0].type_name == "SNAPSHOT_FOOTER"


# ---- not a metadata log --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "content",
    [
        b"Dumping /var/kafka/__cluster_metadata-0/00000000000000000000.log\nLog starting offset: 0\n",
        b"hello, this is a plain text file that is not a log\n" * 4,
        bytes(200),
        bytes(random.Random(7).randrange(256) for _ in range(5000)),
        b"\x00" * 8 + b"\x00\x00\x00\x30" + b"\x00\x00\x00\x00" + b"\x01" + b"\x00" * 48,  # message format v1
        b"short text",
    ],
)
def test_not_a_metadata_log(content: bytes) -> None:
    items = read_bytes(content, SRC)
    p = one_problem(items, ProblemKind.NOT_A_METADATA_LOG)
    assert p.position == 0 and p.raw and content.startswith(p.raw)
    assert split(items)[0] == []


def test_empty_file_has_nothing() -> None:
    assert read_bytes(b"", SRC) == []


def test_unreadable_file(tmp_path: os.PathLike[str]) -> None:
    missing = os.path.join(str(tmp_path), "nope.log")
    (p,) = list(read_file(missing))
    assert isinstance(p, Problem) and p.kind == ProblemKind.UNREADABLE_FILE and p.file == missing
    with pytest.raises(DecodeError):
        list(read_file(missing, strict=True))


# ---- strict --------------------------------------------------------------------------------------------------


def test_strict_mode_raises_at_the_first_problem(tmp_path: os.PathLike[str]) -> None:
    b0, b1, b2 = three_batches()
    data = b0 + writer.corrupt_crc(b1) + b2[:-3]
    with pytest.raises(DecodeError) as e:
        read_bytes(data, SRC, strict=True)
    assert e.value.problem.kind == ProblemKind.BAD_CRC and e.value.problem.position == len(b0)
    assert SRC in str(e.value)
    path = os.path.join(str(tmp_path), SRC)
    with open(path, "wb") as f:
        f.write(b0 + b1 + b2[:-3])
    seen: list[Batch] = []
    with pytest.raises(DecodeError) as e:
        for item in read_file(path, strict=True):
            assert isinstance(item, Batch)
            seen.append(item)
    assert e.value.problem.kind == ProblemKind.TRUNCATED_TAIL and e.value.problem.file == path
    assert [b.base_offset for b in seen] == [0, 2]  # good batches before the problem were delivered


def test_decode_batch_directly_reports_mismatched_sizes() -> None:
    b0, _, _ = three_batches()
    items = decode_batch(b0 + b"xx", 0, SRC)
    assert [i.kind for i in items if isinstance(i, Problem)] == [ProblemKind.TRAILING_BYTES]
    items = decode_batch(b0[:-5], 0, SRC)
    assert [i.kind for i in items if isinstance(i, Problem)] == [ProblemKind.TRUNCATED_TAIL]


def test_random_files_are_not_metadata_logs() -> None:
    rng = random.Random(2024)
    for _ in range(300):
        content = bytes(rng.randrange(256) for _ in range(rng.randrange(17, 3000)))
        items = read_bytes(content, SRC)
        assert [i.kind for i in items if isinstance(i, Problem)] == [ProblemKind.NOT_A_METADATA_LOG], content[:17]


def test_first_batch_with_only_a_bad_magic_byte() -> None:
    b0, b1, _ = three_batches()
    items = read_bytes(writer.with_magic(b0, 3) + b1, SRC)
    p = one_problem(items, ProblemKind.BAD_MAGIC)
    assert p.position == 0 and p.offset == 0
    assert [b.base_offset for b in split(items)[0]] == [2]


# ---- a corrupt first batch ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("corrupt", "kind", "why"),
    [
        (lambda b: writer.with_batch_length(b, 5), ProblemKind.BATCH_TOO_SHORT, "a batch length of 5, below"),
        (lambda b: writer.with_batch_length(b, 30), ProblemKind.BATCH_TOO_SHORT, "shorter than the 61-byte"),
        (lambda b: writer.corrupt_crc(writer.with_magic(b, 1)), ProblemKind.BAD_MAGIC, "magic 1 (expected 2)"),
        (lambda b: writer.corrupt_crc(b[:8].replace(bytes(8), b"\xff" * 8) + b[8:]), ProblemKind.BAD_CRC,
         "an implausible header (base offset -1)"),
    ],
    ids=["length-5", "length-30", "magic-and-crc", "negative-offset-and-crc"],
)
def test_corrupt_first_batch_is_skipped_to_the_next_valid_batch(corrupt: Any, kind: ProblemKind, why: str) -> None:
    b0, b1, b2 = three_batches()
    bad = corrupt(b0)
    items = read_bytes(bad + b1 + b2, SRC)
    p = one_problem(items, kind)
    assert p.position == 0 and p.raw == bad and why in p.message
    assert p.offset == 0  # from its header, or (base offset -1) from the name 00000000000000000000.log
    assert f"the {len(bad)} bytes before byte {len(bad)}, where the next valid batch starts" in p.message
    assert [b.base_offset for b in split(items)[0]] == [2, 5]
    assert items.index(p) == 0


def test_corrupt_first_batch_of_a_file_with_nothing_valid_is_not_a_log() -> None:
    b0, b1, _ = three_batches()
    items = read_bytes(writer.with_batch_length(b0, 5) + writer.corrupt_crc(b1), SRC)
    p = one_problem(items, ProblemKind.NOT_A_METADATA_LOG)
    assert p.position == 0 and p.offset == 0  # the name 00000000000000000000.log says where the log would start
    assert "no valid batch starts in the first" in p.message


class _CountingStream(io.BytesIO):
    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.served = 0

    def read(self, n: int | None = -1, /) -> bytes:
        data = super().read(n)
        self.served += len(data)
        return data


@pytest.mark.parametrize(("garbage", "found"), [(150, True), (400, False)])
def test_the_search_for_a_valid_batch_is_bounded(monkeypatch: pytest.MonkeyPatch, garbage: int, found: bool) -> None:
    monkeypatch.setattr(batch_module, "RESYNC_WINDOW", 300)
    b0, b1, b2 = three_batches()
    tail = b"".join(writer.encode_batch(10 + i, [writer.noop()], 1, 5) for i in range(50))
    stream = _CountingStream(writer.with_batch_length(b0, 5)[:17] + bytes(garbage - 17) + b1 + b2 + tail)
    items = list(read_batches(stream, SRC))
    if found:
        p = one_problem(items, ProblemKind.BATCH_TOO_SHORT)
        assert len(p.raw or b"") == garbage
        assert [b.base_offset for b in split(items)[0]][:2] == [2, 5] and len(split(items)[0]) == 52
    else:
        p = one_problem(items, ProblemKind.NOT_A_METADATA_LOG)
        assert split(items)[0] == []
        assert stream.served <= 300 + len(b1)  # the window, and no more than one batch beyond it
        assert len(p.raw or b"") <= stream.served


# ---- snapshot structure -----------------------------------------------------------------------------------------

SNAP = "00000000000000000010-0000000002.checkpoint"


def snapshot_parts() -> tuple[bytes, bytes, bytes]:
    data = writer.snapshot_bytes([acl(0), acl(1)], 2, 1000)
    header = writer.encode_batch(0, [writer.snapshot_header(1000)], 2, 1000, control=True)
    footer = writer.encode_batch(3, [writer.snapshot_footer()], 2, 1000, control=True)
    assert data.startswith(header) and data.endswith(footer)
    return header, data[len(header):-len(footer)], footer


def write_file(tmp_path: os.PathLike[str], name: str, data: bytes) -> str:
    path = os.path.join(str(tmp_path), name)
    with open(path, "wb") as f:
        f.write(data)
    return path


def test_a_whole_snapshot_has_no_structure_problem(tmp_path: os.PathLike[str]) -> None:
    header, body, footer = snapshot_parts()
    for name in (SNAP, "bootstrap.checkpoint"):
        items = list(read_file(write_file(tmp_path, name, header + body + footer)))
        assert split(items)[1] == [] and len(split(items)[0]) == 3


def test_snapshot_without_header(tmp_path: os.PathLike[str]) -> None:
    _, body, footer = snapshot_parts()
    path = write_file(tmp_path, SNAP, body + footer)
    items = list(read_file(path))
    (p,) = split(items)[1]
    assert (p.kind, p.file, p.position, p.offset) == (ProblemKind.SNAPSHOT_NO_HEADER, path, 0, 1)
    assert "its first batch (offsets 1..2) is a data batch" in p.message
    assert items.index(p) == 0  # reported before the batch it concerns
    leader = writer.encode_batch(0, [writer.leader_change(1, [1])], 2, 1000, control=True)
    (p,) = split(list(read_file(write_file(tmp_path, SNAP, leader + body + footer))))[1]
    assert p.kind == ProblemKind.SNAPSHOT_NO_HEADER and "whose first record is LEADER_CHANGE" in p.message


def test_snapshot_without_footer(tmp_path: os.PathLike[str]) -> None:
    header, body, footer = snapshot_parts()
    path = write_file(tmp_path, "bootstrap.checkpoint", header + body)
    items = list(read_file(path))
    (p,) = split(items)[1]
    assert (p.kind, p.file, p.position, p.offset) == (ProblemKind.SNAPSHOT_NO_FOOTER, path, len(header), 2)
    assert items[-1] is p
    cut = list(read_file(write_file(tmp_path, SNAP, header + body + footer[:-4])))  # a partial footer
    assert [q.kind for q in split(cut)[1]] == [ProblemKind.TRUNCATED_TAIL, ProblemKind.SNAPSHOT_NO_FOOTER]


def test_empty_snapshot_has_neither_header_nor_footer(tmp_path: os.PathLike[str]) -> None:
    path = write_file(tmp_path, SNAP, b"")
    problems = split(list(read_file(path)))[1]
    assert [(p.kind, p.position, p.offset) for p in problems] == [
        (ProblemKind.SNAPSHOT_NO_HEADER, 0, 0), (ProblemKind.SNAPSHOT_NO_FOOTER, 0, 0)]


def test_a_snapshot_that_is_no_log_at_all_says_only_that(tmp_path: os.PathLike[str]) -> None:
    path = write_file(tmp_path, SNAP, b"just some text, not a snapshot\n" * 4)
    assert [p.kind for p in split(list(read_file(path)))[1]] == [ProblemKind.NOT_A_METADATA_LOG]


def test_structure_is_checked_for_snapshots_only(tmp_path: os.PathLike[str]) -> None:
    _, body, _ = snapshot_parts()
    assert split(list(read_file(write_file(tmp_path, SRC, body))))[1] == []
    assert [p.kind for p in split(list(read_file(write_file(tmp_path, "x.bin", body), snapshot=True)))[1]] == [
        ProblemKind.SNAPSHOT_NO_HEADER, ProblemKind.SNAPSHOT_NO_FOOTER]
    assert [p.kind for p in split(read_bytes(body, SRC, snapshot=True))[1]] == [
        ProblemKind.SNAPSHOT_NO_HEADER, ProblemKind.SNAPSHOT_NO_FOOTER]


def test_strict_mode_raises_at_a_missing_header(tmp_path: os.PathLike[str]) -> None:
    _, body, footer = snapshot_parts()
    with pytest.raises(DecodeError) as e:
        list(read_file(write_file(tmp_path, SNAP, body + footer), strict=True))
    assert e.value.problem.kind == ProblemKind.SNAPSHOT_NO_HEADER


def test_every_reader_of_a_dump_reports_the_structure(tmp_path: os.PathLike[str]) -> None:
    header, body, _ = snapshot_parts()
    path = write_file(tmp_path, SNAP, header + body)
    (source,) = files.discover([str(tmp_path)])[0]
    assert [p.kind for p in read_source(source) if isinstance(p, Problem)] == [ProblemKind.SNAPSHOT_NO_FOOTER]
    summary = ProblemSummary()
    result = replay_paths([str(tmp_path)], summary=summary)
    assert summary.counts["snapshot_no_footer"] == 1  # counted once, though the replayer sees it too
    assert any(a.kind == ProblemKind.SNAPSHOT_NO_FOOTER and a.file == path for a in result.anomalies)


# ---- unknown tagged fields ----------------------------------------------------------------------------------------


def test_unknown_tagged_fields_are_a_notice_and_the_record_stays_decoded() -> None:
    voters = writer.control_record(writer.KRAFT_VOTERS, {"version": 0, "voters": [
        {"voterId": 1, "voterDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA",
         "endpoints": [{"name": "CONTROLLER", "host": "h", "port": 9093, "_unknownTags": {9: b"\xee"}}],
         "kRaftVersionFeature": {"minSupportedVersion": 0, "maxSupportedVersion": 1, "_unknownTags": {4: b""}},
         "_unknownTags": {10: b""}}]}, unknown_tags={3: b"\x01\x02"})
    control = writer.encode_batch(0, [voters], 1, 5, control=True)
    data = writer.encode_batch(1, [writer.metadata_record(18, 0, BOB.to_record_data("AAAAAAAAAAAAAAAAAAAA01"),
                                                          unknown_tags={5: b"\xab\xcd", 31: b""})], 1, 5)
    items = read_bytes(control + data, SRC)
    batches, problems = split(items)
    assert [p.kind for p in problems] == [ProblemKind.UNKNOWN_TAGGED_FIELD] * 2
    assert all(p.is_notice for p in problems)
    first, second = problems
    assert (first.file, first.position, first.offset) == (SRC, 0, 0)
    assert first.message == (
        "record at offset 0 (KRAFT_VOTERS v0) has unknown tagged field(s) 3 (2 bytes); in voters[0]: 10 (0 bytes); "
        "in voters[0].endpoints[0]: 9 (1 byte); in voters[0].kRaftVersionFeature: 4 (0 bytes); the record is "
        "decoded and the unknown tags are kept raw")
    assert (second.position, second.offset) == (len(control), 1)
    assert "(ACCESS_CONTROL_ENTRY_RECORD v0) has unknown tagged field(s) 5 (2 bytes), 31 (0 bytes);" in second.message
    acl_record = batches[1].records[0]
    assert acl_record.data is not None and acl_record.data["principal"] == "User:bob" and acl_record.error is None
    assert acl_record.unknown_tags == {5: b"\xab\xcd", 31: b""}
    assert batches[0].records[0].data["voters"][0]["endpoints"][0]["port"] == 9093  # type: ignore[index]


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=600))
def test_arbitrary_bytes_never_raise(content: bytes) -> None:
    items = read_bytes(content, SRC)
    assert all(isinstance(i, (Batch, Problem)) for i in items)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_mutated_files_never_raise_and_name_every_problem(data: st.DataObject) -> None:
    codec = data.draw(st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"]))
    content = bytearray(b"".join(three_batches(codec)))
    for _ in range(data.draw(st.integers(1, 4))):
        i = data.draw(st.integers(0, len(content) - 1))
        content[i] = data.draw(st.integers(0, 255))
    cut = data.draw(st.integers(0, len(content)))
    items = read_bytes(bytes(content[:cut]), SRC)
    for item in items:
        if isinstance(item, Problem):
            assert item.file == SRC and item.position is not None and item.position < max(cut, 1)
            assert item.kind is not ProblemKind.UNREADABLE_FILE
