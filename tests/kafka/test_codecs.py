"""Codecs both ways, and interop with streams made directly by the reference libraries (spec §4)."""

from __future__ import annotations

import gzip
import os
import struct

import cramjam
import lz4.frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import codecs

SAMPLES = [b"", b"a", b"metadata" * 3, os.urandom(5000), bytes(200_000), b"".join(os.urandom(64) * 50 for _ in range(40))]


@pytest.mark.parametrize("codec", [0, 1, 2, 3, 4])
@pytest.mark.parametrize("index", range(len(SAMPLES)))
def test_round_trip(codec: int, index: int) -> None:
    data = SAMPLES[index]
    assert codecs.decompress(codec, codecs.compress(codec, data)) == data


@settings(max_examples=50, deadline=None)
@given(st.sampled_from([0, 1, 2, 3, 4]), st.binary(max_size=100_000))
def test_round_trip_property(codec: int, data: bytes) -> None:
    assert codecs.decompress(codec, codecs.compress(codec, data)) == data


def test_codec_names() -> None:
    assert [codecs.codec_id(n) for n in ("none", "gzip", "snappy", "lz4", "ZSTD")] == [0, 1, 2, 3, 4]
    assert codecs.compress("gzip", b"x") == codecs.compress(1, b"x")  # deterministic (mtime 0)
    with pytest.raises(codecs.UnknownCodecError):
        codecs.codec_id("brotli")


@pytest.mark.parametrize("codec", [5, 6, 7, -1])
def test_unknown_codec(codec: int) -> None:
    with pytest.raises(codecs.UnknownCodecError, match=f"unknown compression codec id {codec}"):
        codecs.decompress(codec, b"abc")
    with pytest.raises(codecs.UnknownCodecError):
        codecs.compress(codec, b"abc")


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_garbage_is_a_codec_error(codec: int) -> None:
    with pytest.raises(codecs.CodecError):
        codecs.decompress(codec, b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01\x00\x00\x00\x09garbage!!"
                          if codec == 2 else b"this is not compressed at all")


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_truncated_stream_is_a_codec_error(codec: int) -> None:
    blob = codecs.compress(codec, os.urandom(3000) * 3)
    with pytest.raises(codecs.CodecError):
        codecs.decompress(codec, blob[: len(blob) // 2])


@pytest.mark.parametrize("codec", [1, 2, 3, 4])
def test_output_limit(codec: int) -> None:
    blob = codecs.compress(codec, bytes(1_000_000))
    with pytest.raises(codecs.CodecError, match="limit"):
        codecs.decompress(codec, blob, limit=100_000)
    assert len(codecs.decompress(codec, blob, limit=1_000_000)) == 1_000_000


# ---- gzip ----------------------------------------------------------------------------------------------------


def test_gzip_interop() -> None:
    data = os.urandom(1000) * 4
    assert codecs.decompress(1, gzip.compress(data)) == data
    assert codecs.decompress(1, gzip.compress(data[:10]) + gzip.compress(data[10:])) == data  # two members
    assert gzip.decompress(codecs.compress(1, data)) == data
    assert codecs.compress(1, data)[:2] == b"\x1f\x8b"


# ---- snappy --------------------------------------------------------------------------------------------------


def xerial(data: bytes, block: int) -> bytes:
    out = [b"\x82SNAPPY\x00", struct.pack(">ii", 1, 1)]
    for i in range(0, len(data), block):
        raw = bytes(cramjam.snappy.compress_raw(data[i : i + block]))
        out += [struct.pack(">i", len(raw)), raw]
    return b"".join(out)


def test_snappy_xerial_interop() -> None:
    data = os.urandom(100) * 2000
    assert codecs.decompress(2, xerial(data, 8192)) == data
    assert codecs.decompress(2, xerial(data[:500], 100) + xerial(data[500:], 70000)) == data  # concatenated streams
    ours = codecs.compress(2, data)
    assert ours[:16] == b"\x82SNAPPY\x00\x00\x00\x00\x01\x00\x00\x00\x01"
    # Chunks are raw snappy blocks of at most 32 KiB of input each, as snappy-java writes.
    pos, out = 16, b""
    while pos < len(ours):
        (n,) = struct.unpack_from(">i", ours, pos)
        chunk = bytes(cramjam.snappy.decompress_raw(ours[pos + 4 : pos + 4 + n]))
        assert len(chunk) <= 32 * 1024
        out += chunk
        pos += 4 + n
    assert out == data


def test_snappy_plain_raw_block() -> None:
    data = b"plain raw snappy " * 100
    assert codecs.decompress(2, bytes(cramjam.snappy.compress_raw(data))) == data


# ---- lz4 -----------------------------------------------------------------------------------------------------


def test_lz4_kafka_frame_shape() -> None:
    data = os.urandom(64) * 4000  # > 64 KiB: several blocks
    ours = codecs.compress(3, data)
    assert ours[:4] == b"\x04\x22\x4d\x18"
    assert ours[4] == 0x60  # version 01, independent blocks, no block/content checksum, no content size
    assert ours[5] == 0x40  # 64 KiB max block size
    assert ours[-4:] == b"\x00\x00\x00\x00"  # end mark, no content checksum
    assert lz4.frame.decompress(ours) == data
    info = lz4.frame.get_frame_info(ours)
    assert info["block_size"] == 65536 and not info["block_linked"] and not info["content_checksum"]
    assert info["content_size"] == 0


def test_lz4_interop_reference_frames() -> None:
    data = os.urandom(64) * 3000
    for options in (
        {},
        {"block_size": lz4.frame.BLOCKSIZE_MAX64KB, "block_linked": True, "content_checksum": True},
        {"store_size": False, "block_checksum": True},
        {"compression_level": 9, "block_size": lz4.frame.BLOCKSIZE_MAX4MB},
    ):
        assert codecs.decompress(3, lz4.frame.compress(data, **options)) == data
    assert codecs.decompress(3, lz4.frame.compress(data[:7]) + lz4.frame.compress(data[7:])) == data


def test_lz4_uncompressed_block() -> None:
    """A block size word with the high bit set holds the block uncompressed (Kafka writes these for
    incompressible data)."""
    header = codecs.compress(3, b"")[:7]  # magic, FLG 0x60, BD 0x40, header checksum
    payload = os.urandom(1000)
    frame = header + struct.pack("<I", len(payload) | 0x80000000) + payload + b"\x00\x00\x00\x00"
    assert codecs.decompress(3, frame) == payload


# ---- zstd ----------------------------------------------------------------------------------------------------


def test_zstd_interop() -> None:
    data = os.urandom(128) * 1000
    with_size = zstandard.ZstdCompressor().compress(data)
    assert zstandard.get_frame_parameters(with_size).content_size == len(data)
    assert codecs.decompress(4, with_size) == data
    cobj = zstandard.ZstdCompressor(level=1).compressobj()
    streamed = cobj.compress(data) + cobj.flush()
    assert zstandard.get_frame_parameters(streamed).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert codecs.decompress(4, streamed) == data
    assert codecs.decompress(4, with_size + streamed) == data + data  # two frames
    ours = codecs.compress(4, data)
    assert zstandard.get_frame_parameters(ours).content_size == zstandard.CONTENTSIZE_UNKNOWN  # like zstd-jni streams
    assert zstandard.ZstdDecompressor().decompressobj().decompress(ours) == data
