"""Issue 18 item 1: the decoder's work and memory are bounded by the input's real size or a documented limit,
whatever the bytes claim. Each crafted input that once made it run away is here, decoded by both decoders (the
compiled one and the pure-Python reference must give identical items), with the problems it must name.

The limits (`replay.kafka.codecs.DEFAULT_LIMIT`, `batch.MAX_UNFRAMED_RECORDS`, `batch.MAX_PROBLEMS_OF_A_KIND`,
`batch.RESYNC_CRC_FACTOR`) are documented where they are defined and in the README."""

from __future__ import annotations

import gzip
import io
import struct
import tracemalloc

import pytest
import zstandard

from replay.kafka import batch as batch_module
from replay.kafka import codecs, writer
from replay.kafka.model import Batch, Problem, ProblemKind
from tests.kafka.test_native_decoder import SEGMENT, _pure, assert_same


def _kinds(items: list[Batch | Problem]) -> list[str]:
    return [i.kind.value for i in items if isinstance(i, Problem)]


def _zstd(data: bytes) -> bytes:
    return zstandard.ZstdCompressor(level=19).compress(data)


def test_a_small_batch_that_inflates_past_the_limit_is_one_problem() -> None:
    """A 3 KB zstd batch whose records area is 100 MiB of zero bytes (and whose record count is -1): once one
    `record_overrun` per byte, now one `decompression_limit` problem and the batch without records."""
    data = writer.assemble_batch(7, _zstd(bytes(100 * 1024 * 1024)), -1, 0, attributes=codecs.ZSTD)
    assert len(data) < 4096
    items = assert_same(data)
    assert _kinds(items) == ["decompression_limit"]
    problem, kept = items
    assert isinstance(problem, Problem) and isinstance(kept, Batch)
    assert (problem.file, problem.position, problem.offset) == (SEGMENT, 0, 7)
    assert f"more than the limit of {codecs.DEFAULT_LIMIT} bytes" in problem.message
    assert problem.raw == data  # the batch is kept raw, so nothing is lost
    assert kept.records == [] and kept.header.base_offset == 7


def test_the_limit_is_an_option() -> None:
    area = _zstd(bytes(2 * 1024 * 1024))
    data = writer.assemble_batch(0, area, -1, 0, attributes=codecs.ZSTD)
    assert _kinds(assert_same(data, decompressed_limit=1024 * 1024)) == ["decompression_limit"]
    assert "decompression_limit" not in _kinds(assert_same(data))


def test_zero_bytes_under_the_limit_make_a_bounded_number_of_problems() -> None:
    """The same batch with 1 MiB of zeros (under the limit): `MAX_UNFRAMED_RECORDS` problems, then one for the
    rest of the batch, not a million."""
    data = writer.assemble_batch(0, _zstd(bytes(1024 * 1024)), -1, 0, attributes=codecs.ZSTD)
    items = assert_same(data)
    kinds = _kinds(items)
    assert kinds[0] == "record_count_mismatch"
    assert kinds[1:] == ["record_overrun"] * (batch_module.MAX_UNFRAMED_RECORDS + 1)
    last = [i for i in items if isinstance(i, Problem)][-1]
    rest = 1024 * 1024 - batch_module.MAX_UNFRAMED_RECORDS
    assert f"the remaining {rest} bytes of its records, from record #100 at byte 100 of the decompressed records, " \
           "are not decoded" in last.message
    assert last.raw == bytes(min(rest, batch_module.MAX_RAW_BYTES))


def test_a_gzip_bomb_stops_at_the_limit() -> None:
    """1 GiB of zeros in a 1 MB gzip batch (64 concatenated members of 16 MiB, which Kafka's reader reads as one
    stream): the reference decoder allocates about the limit, not the gigabyte."""
    member = gzip.compress(bytes(16 * 1024 * 1024), compresslevel=9)
    data = writer.assemble_batch(0, member * 64, 1, 0, attributes=codecs.GZIP)
    assert _kinds(assert_same(data)) == ["decompression_limit"]
    with _pure(True):
        tracemalloc.start()
        try:
            items = list(batch_module.read_batches(io.BytesIO(data), SEGMENT))
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert _kinds(items) == ["decompression_limit"]
    assert peak < 3 * codecs.DEFAULT_LIMIT, peak


def _no_batch_then_0x02(size: int) -> bytes:
    """A zero header with a batch length of 0xFFFFFFFF, then `0x02` bytes: every byte is a magic byte of a
    candidate batch for the search for the next valid batch."""
    return bytes(8) + b"\xff\xff\xff\xff" + b"\x02" * (size - 12)


def test_a_file_of_magic_bytes_is_searched_once() -> None:
    """9 MiB (once 13 s: every `0x02` tried as a batch start, each reading to the end of the file)."""
    items = assert_same(_no_batch_then_0x02(9 * 1024 * 1024))
    assert _kinds(items) == ["not_a_metadata_log"]
    assert "no valid batch starts in the first 8388608 bytes" in items[0].message  # type: ignore[union-attr]


def test_a_larger_file_of_magic_bytes_is_searched_once() -> None:
    """48 MiB: the candidates' lengths now fit in the file, so each would be checksummed over 33 MB."""
    items = assert_same(_no_batch_then_0x02(48 * 1024 * 1024))
    assert _kinds(items) == ["not_a_metadata_log"]


def _fake_header(length: int) -> bytes:
    """61 bytes that look like a v2 batch header of `length` bytes (base offset 0, no compression, one record) but
    whose CRC cannot match."""
    return struct.pack(">qiibIhiqqqhii", 0, length - 12, 0, 2, 0, 0, 0, 0, 0, -1, -1, -1, 1)


def test_the_crc_work_of_a_search_is_bounded_by_the_bytes() -> None:
    """A header the framer cannot trust, then a fake header of a 1 MiB batch every 61 bytes for 4 MiB, then a real
    batch: every fake header is a candidate that only its CRC rules out. The CRCs checked may cost at most
    `RESYNC_CRC_FACTOR` times the bytes up to the candidate's end; then the search stops and says so."""
    fakes = _fake_header(1024 * 1024) * (4 * 1024 * 1024 // 61)
    first, second, third = (writer.encode_batch(i, [writer.noop()], 1, 5) for i in range(3))
    data = first + writer.with_batch_length(second, 5) + fakes + third
    items = assert_same(data)
    assert _kinds(items) == ["batch_too_short"]
    problem = items[1]
    assert isinstance(items[0], Batch) and isinstance(problem, Problem)
    assert (problem.position, problem.offset) == (len(first), 1)
    assert problem.message.startswith("batch length 5 is below the minimum of 14; the length cannot be trusted and "
                                      f"no valid batch follows, so the remaining {len(data) - len(first)} bytes of "
                                      "the file are not decoded (the search for a valid batch stopped at byte ")
    assert f"would pass {batch_module.RESYNC_CRC_FACTOR} times the bytes up to its end)" in problem.message


@pytest.mark.slow  # about 20 s of decoding on purpose
def test_many_searches_in_one_file_stay_linear() -> None:
    """20,000 valid batches, each after 16 bytes of garbage whose batch length is 0: 20,000 searches, each finding
    the next batch 16 bytes on (each once read the whole window ahead, and put it back, for every search)."""
    garbage = b"\xee" * 8 + bytes(4) + b"\xee" * 4
    data = b"".join(garbage + writer.encode_batch(i, [writer.noop()], 1, 5) for i in range(20_000))
    items = assert_same(data)
    assert len([i for i in items if isinstance(i, Batch)]) == 20_000
    assert _kinds(items) == ["batch_too_short"] * (batch_module.MAX_PROBLEMS_OF_A_KIND + 1)


def test_a_file_lists_a_bounded_number_of_problems_of_a_kind() -> None:
    """1,500 batches with a wrong CRC: the first `MAX_PROBLEMS_OF_A_KIND` are listed, the rest counted in one
    problem at the end that says where they were; every batch is still decoded."""
    n = 1500
    data = b"".join(writer.corrupt_crc(writer.encode_batch(i, [writer.noop()], 1, 5)) for i in range(n))
    items = assert_same(data)
    problems = [i for i in items if isinstance(i, Problem)]
    most = batch_module.MAX_PROBLEMS_OF_A_KIND
    assert [p.kind for p in problems] == [ProblemKind.BAD_CRC] * (most + 1)
    size = len(data) // n
    last = problems[-1]
    assert last.message.startswith(f"{n - most} more bad_crc problems in {SEGMENT} after the first {most} are not "
                                   f"listed one by one: the first of them at byte {most * size} (offset {most}), the "
                                   f"last at byte {(n - 1) * size} (offset {n - 1})")
    assert (last.position, last.offset) == (most * size, most)
    assert len([i for i in items if isinstance(i, Batch)]) == n
