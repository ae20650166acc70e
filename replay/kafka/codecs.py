"""Record-batch compression codecs (spec §4): none, gzip, snappy (xerial framing), lz4 (frame), zstd.

`decompress(codec, data)` turns the compressed records area of a batch back into the concatenated records;
`compress(codec, data)` makes what Kafka's own writers make, so files we write are readable by Kafka:

* gzip: one RFC 1952 member (mtime 0, so output is deterministic);
* snappy: snappy-java's stream framing (`SnappyOutputStream`): the 16-byte header then
  `[int32 length][raw snappy block]` chunks of at most 32 KiB of input each;
* lz4: an LZ4 frame with FLG=0x60 (independent blocks, no checksums, no content size) and BD=0x40 (64 KiB);
* zstd: a streaming zstd frame without a content size, as zstd-jni's stream writes.

Decompression is lenient where Kafka's readers are: several concatenated gzip members / lz4 frames / zstd frames,
a plain raw snappy block where the xerial header is missing, and repeated xerial headers. Every failure is a
`CodecError` (an `UnknownCodecError` for a codec id outside 0..4); output is limited to `limit` bytes so a
corrupt or hostile batch cannot exhaust memory (a `DecompressionLimitError` once it is passed; the output grows in
steps of at most about 2 MiB past the limit before that is noticed).
"""

from __future__ import annotations

import gzip
import struct
import zlib

import cramjam
import lz4.frame
import zstandard

NONE, GZIP, SNAPPY, LZ4, ZSTD = 0, 1, 2, 3, 4
CODEC_IDS = {"none": NONE, "gzip": GZIP, "snappy": SNAPPY, "lz4": LZ4, "zstd": ZSTD}

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + struct.pack(">ii", 1, 1)
XERIAL_BLOCK_SIZE = 32 * 1024  # snappy-java SnappyOutputStream default block size

# Decompressed bytes allowed per batch: eight times the largest batch a KRaft writer makes (8 MiB), far above what
# metadata records compress from; a bound against decompression bombs (a 3 KB zstd batch can hold 100 MiB of zeros).
DEFAULT_LIMIT = 64 * 1024 * 1024


class CodecError(Exception):
    """Data that does not decompress (or compress) with the given codec."""


class UnknownCodecError(CodecError):
    """A codec id that is not 0..4."""

    def __init__(self, codec: int) -> None:
        super().__init__(f"unknown compression codec id {codec} (known: 0 none, 1 gzip, 2 snappy, 3 lz4, 4 zstd)")
        self.codec = codec


class DecompressionLimitError(CodecError):
    """The data decompresses to more than the limit allowed (`limit`, in bytes)."""

    def __init__(self, limit: int) -> None:
        super().__init__(f"decompressed data exceeds the limit of {limit} bytes")
        self.limit = limit


def codec_id(codec: int | str) -> int:
    """A codec id from an id or a name (`"zstd"`)."""
    if isinstance(codec, str):
        try:
            return CODEC_IDS[codec.lower()]
        except KeyError:
            raise UnknownCodecError(-1) from None
    if codec not in (NONE, GZIP, SNAPPY, LZ4, ZSTD):
        raise UnknownCodecError(codec)
    return codec


def _check_limit(size: int, limit: int | None) -> None:
    if limit is not None and size > limit:
        raise DecompressionLimitError(limit)


# ---- gzip ----------------------------------------------------------------------------------------------------


def _gunzip(data: bytes, limit: int | None) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = data
    while True:
        d = zlib.decompressobj(wbits=31)
        max_len = 0 if limit is None else limit - total + 1
        chunk = d.decompress(rest, max_len)
        total += len(chunk)
        _check_limit(total, limit)
        out.append(chunk)
        if not d.eof:
            raise CodecError("gzip stream is truncated")
        rest = d.unused_data
        # GZIPInputStream reads concatenated members; trailing zero padding is tolerated like gzip(1) does.
        if not rest or not rest.strip(b"\x00"):
            break
        if rest[:2] != b"\x1f\x8b":
            raise CodecError(f"{len(rest)} bytes of garbage after the gzip stream")
    return b"".join(out)


# ---- snappy --------------------------------------------------------------------------------------------------


def _unsnappy_raw(block: bytes, limit: int | None, before: int = 0) -> bytes:
    """One raw snappy block; `before`: the bytes the blocks before it made (against `limit`)."""
    try:
        _check_limit(before + int(cramjam.snappy.decompress_raw_len(block)), limit)
        return bytes(cramjam.snappy.decompress_raw(block))
    except CodecError:
        raise
    except Exception as e:  # cramjam raises its own DecompressionError / ValueError
        raise CodecError(f"bad snappy block: {e}") from e


def _unsnappy(data: bytes, limit: int | None) -> bytes:
    if not data.startswith(XERIAL_MAGIC):
        return _unsnappy_raw(data, limit)
    out: list[bytes] = []
    total = 0
    pos = 0
    n = len(data)
    while pos < n:
        if data.startswith(XERIAL_MAGIC, pos):
            if pos + 16 > n:
                raise CodecError("truncated xerial snappy header")
            _version, compatible = struct.unpack_from(">ii", data, pos + 8)
            if compatible > 1:
                raise CodecError(f"xerial snappy stream needs reader version {compatible}")
            pos += 16
            continue
        if pos + 4 > n:
            raise CodecError("truncated xerial snappy chunk length")
        (size,) = struct.unpack_from(">i", data, pos)
        pos += 4
        if size < 0 or pos + size > n:
            raise CodecError(f"xerial snappy chunk of {size} bytes runs past the end of the data")
        chunk = _unsnappy_raw(data[pos : pos + size], limit, total)
        total += len(chunk)
        out.append(chunk)
        pos += size
    return b"".join(out)


def _snappy(data: bytes) -> bytes:
    parts = [XERIAL_HEADER]
    for start in range(0, len(data), XERIAL_BLOCK_SIZE):
        block = bytes(cramjam.snappy.compress_raw(data[start : start + XERIAL_BLOCK_SIZE]))
        parts.append(struct.pack(">i", len(block)))
        parts.append(block)
    return b"".join(parts)


# ---- lz4 -----------------------------------------------------------------------------------------------------


def _unlz4(data: bytes, limit: int | None) -> bytes:
    out: list[bytes] = []
    total = 0
    rest = data
    try:
        while True:
            d = lz4.frame.LZ4FrameDecompressor()
            chunk = d.decompress(rest, max_length=-1 if limit is None else limit - total + 1)
            total += len(chunk)
            _check_limit(total, limit)
            out.append(chunk)
            if not d.eof:
                raise CodecError("lz4 frame is truncated")
            rest = d.unused_data
            if not rest:
                break
    except CodecError:
        raise
    except Exception as e:  # lz4 raises RuntimeError for bad frames
        raise CodecError(f"bad lz4 frame: {e}") from e
    return b"".join(out)


def _lz4(data: bytes) -> bytes:
    framed: bytes = lz4.frame.compress(
        data,
        block_size=lz4.frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )
    return framed


# ---- zstd ----------------------------------------------------------------------------------------------------


_ZSTD_SLICE = 64  # input fed per step, so output is checked against the limit as it grows (64 bytes: about 2 MiB)


def _unzstd(data: bytes, limit: int | None) -> bytes:
    out: list[bytes] = []
    total = 0
    dctx = zstandard.ZstdDecompressor()
    d = dctx.decompressobj()
    pos = 0
    try:
        while pos < len(data):
            piece = data[pos : pos + _ZSTD_SLICE]
            pos += len(piece)
            chunk = d.decompress(piece)  # content size may be absent (streamed frames): no size needed here
            total += len(chunk)
            _check_limit(total, limit)
            out.append(chunk)
            if d.eof:
                data = d.unused_data + data[pos:]  # another frame may follow
                pos = 0
                if data:
                    d = dctx.decompressobj()
    except zstandard.ZstdError as e:
        raise CodecError(f"bad zstd frame: {e}") from e
    if not d.eof:
        raise CodecError("zstd frame is truncated")
    return b"".join(out)


def _zstd(data: bytes) -> bytes:
    cobj = zstandard.ZstdCompressor(level=3).compressobj()
    return cobj.compress(data) + cobj.flush()


# ---- public --------------------------------------------------------------------------------------------------


def decompress(codec: int, data: bytes | bytearray | memoryview, limit: int | None = DEFAULT_LIMIT) -> bytes:
    """The records area of a batch compressed with `codec` (0..4), decompressed. Raises `CodecError`."""
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        try:
            return _gunzip(data, limit)
        except zlib.error as e:
            raise CodecError(f"bad gzip stream: {e}") from e
    if codec == SNAPPY:
        return _unsnappy(data, limit)
    if codec == LZ4:
        return _unlz4(data, limit)
    if codec == ZSTD:
        return _unzstd(data, limit)
    raise UnknownCodecError(codec)


def compress(codec: int | str, data: bytes | bytearray | memoryview) -> bytes:
    """`data` compressed the way Kafka's producer-side writers do for `codec` (id or name)."""
    codec = codec_id(codec)
    data = bytes(data)
    if codec == NONE:
        return data
    if codec == GZIP:
        return gzip.compress(data, compresslevel=6, mtime=0)
    if codec == SNAPPY:
        return _snappy(data)
    if codec == LZ4:
        return _lz4(data)
    return _zstd(data)
