"""Streaming decoder for files of v2 record batches: segments, snapshots and `bootstrap.checkpoint` (spec §2–§5).

A file is read batch by batch, never whole: the 17 bytes up to the magic, then the rest of the batch. Memory is
bounded by the largest batch (`max_batch_size`), whatever the size of the file. Items come out in file order:
`Problem`s first, then the `Batch` they concern.

Framing follows Kafka's `FileLogInputStream`:

* fewer than 17 bytes left, or a batch whose declared length runs past the end of the file: a partial tail,
  `truncated_tail` ("Found N invalid bytes at the end of ..."), and the scan stops;
* `batchLength < 14`: the length cannot be trusted, so nothing after it can be framed: `batch_too_short`, the
  rest of the file kept raw (up to `MAX_RAW_BYTES`) and the scan stops;
* magic ≠ 2: `bad_magic`; the batch is skipped by its length when that length lands inside the file (kept raw),
  otherwise the rest of the file is undecodable and the scan stops;
* the very first batch of a file not being a v2 batch at all (text, random bytes, an old-format log, a
  kafka-dump-log text): `not_a_metadata_log`, and the scan stops.

Inside a batch (`decode_batch`): a CRC-32C mismatch is `bad_crc` but the records are still decoded (the header
says `crc_ok=False`); an unknown codec or a failed decompression yields the batch with no records; records are
read per spec §3 with `record_overrun`, `trailing_bytes`, `record_count_mismatch` and `bad_record` for what does
not fit. Record values are decoded with `message` (metadata frames for data batches, control bodies for control
batches); a value that does not decode keeps its raw bytes, gets `Record.error`, and adds a problem of the
error's kind. Nothing is fatal unless `strict=True`, which raises `DecodeError` at the first problem.
"""

from __future__ import annotations

import contextlib
import io
import struct
from collections.abc import Iterator
from typing import BinaryIO, NamedTuple

from . import codecs
from .crc import crc32c
from .message import MessageError, decode_control_value, decode_metadata_value, peek_frame
from .model import Batch, BatchHeader, Problem, ProblemKind, Record

LOG_OVERHEAD = 12  # baseOffset + batchLength
HEADER_SIZE_UP_TO_MAGIC = 17
RECORD_BATCH_OVERHEAD = 61
MIN_BATCH_LENGTH = 14  # Kafka: MIN_RECORD_BATCH_SIZE (26) - LOG_OVERHEAD
CRC_START = 21
CURRENT_MAGIC = 2

# A KRaft writer never makes a batch above 8 MiB; a declared size beyond this is treated as a corrupt length.
DEFAULT_MAX_BATCH_SIZE = 64 * 1024 * 1024
# How many raw bytes a problem keeps when the rest of a file is undecodable.
MAX_RAW_BYTES = 1024 * 1024
_CHUNK = 1024 * 1024

_HEADER = struct.Struct(">qiibIhiqqqhii")
assert _HEADER.size == RECORD_BATCH_OVERHEAD
_PREFIX = struct.Struct(">qi")
_OFFSET = struct.Struct(">q")


class DecodeError(Exception):
    """Raised in strict mode at the first problem; `problem` says what and where."""

    def __init__(self, problem: Problem) -> None:
        super().__init__(problem.describe())
        self.problem = problem


class Frame(NamedTuple):
    """The raw bytes of one magic-2 batch and its byte position in the file."""

    position: int
    data: bytes


# ---- reading helpers -----------------------------------------------------------------------------------------


def _read(stream: BinaryIO, n: int) -> bytes:
    """Up to `n` bytes; fewer only at the end of the stream. Reads in bounded chunks."""
    if n <= 0:
        return b""
    first = stream.read(min(n, _CHUNK))
    if not first or len(first) == n:
        return first or b""
    parts = [first]
    got = len(first)
    while got < n:
        chunk = stream.read(min(_CHUNK, n - got))
        if not chunk:
            break
        parts.append(chunk)
        got += len(chunk)
    return b"".join(parts)


def _drain(stream: BinaryIO, keep: int) -> tuple[bytes, int]:
    """Read to the end of the stream, keeping the first `keep` bytes; returns them and the count read."""
    kept = _read(stream, keep)
    count = len(kept)
    if count == keep:
        while True:
            chunk = stream.read(_CHUNK)
            if not chunk:
                break
            count += len(chunk)
    return kept, count


def _looks_like_text(data: bytes) -> bool:
    return bool(data) and all(b in b"\t\n\r" or 32 <= b < 127 for b in data)


def _crc_matches(data: bytes) -> bool:
    return len(data) >= RECORD_BATCH_OVERHEAD and struct.unpack_from(">I", data, 17)[0] == crc32c(
        memoryview(data)[CRC_START:]
    )


# ---- framing -------------------------------------------------------------------------------------------------


def iter_batch_frames(
    stream: BinaryIO,
    source: str = "",
    start_position: int = 0,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> Iterator[Frame | Problem]:
    """Split a stream into raw batches (`Frame`) without decoding them; framing problems come as `Problem`s.

    Cheap (no CRC, no records): for splitting work, e.g. handing frames to Spark executors. `start_position` is
    the file position of the stream's current point (for reading from the middle of a file).
    """
    pos = start_position
    first = start_position == 0
    while True:
        head = _read(stream, HEADER_SIZE_UP_TO_MAGIC)
        if not head:
            return
        offset = _OFFSET.unpack_from(head)[0] if len(head) >= 8 else None
        if first and head.startswith(b"Dumping "):
            yield Problem(
                ProblemKind.NOT_A_METADATA_LOG,
                "this is kafka-dump-log text output, not a binary metadata log; read it as dump-log text",
                source, pos, None, head + _read(stream, MAX_RAW_BYTES - len(head)),
            )
            return
        if len(head) < HEADER_SIZE_UP_TO_MAGIC:
            kind = ProblemKind.NOT_A_METADATA_LOG if first and _looks_like_text(head) else ProblemKind.TRUNCATED_TAIL
            yield Problem(kind, f"Found {len(head)} invalid bytes at the end of {source or 'the input'} "
                          f"(fewer than the {HEADER_SIZE_UP_TO_MAGIC} bytes of a batch header)",
                          source, pos, offset, head)
            return
        base_offset, batch_length = _PREFIX.unpack_from(head)
        magic = head[16]
        size = batch_length + LOG_OVERHEAD

        if first:
            # Nothing valid seen yet: unless this looks like a real v2 batch, the file is something else.
            data = b""
            plausible = (base_offset >= 0 and batch_length >= RECORD_BATCH_OVERHEAD - LOG_OVERHEAD
                         and size <= max_batch_size and not _looks_like_text(head))
            if plausible and magic != CURRENT_MAGIC:
                # The magic byte is not covered by the CRC: a batch whose CRC matches only has a bad magic byte.
                data = head + _read(stream, size - HEADER_SIZE_UP_TO_MAGIC)
                plausible = len(data) == size and _crc_matches(data)
            if not plausible:
                raw = data or head + _read(stream, MAX_RAW_BYTES - len(head))
                yield Problem(
                    ProblemKind.NOT_A_METADATA_LOG,
                    f"not a KRaft metadata log: the first bytes are not a v2 record batch "
                    f"(base offset {base_offset}, length {batch_length}, magic {magic})",
                    source, pos, None, raw[:MAX_RAW_BYTES],
                )
                return
            if data:
                yield Problem(ProblemKind.BAD_MAGIC,
                              f"magic {magic} (expected {CURRENT_MAGIC}) but the CRC matches; skipped {size} bytes",
                              source, pos, base_offset, data)
                pos += size
                first = False
                continue

        if batch_length < MIN_BATCH_LENGTH or size > max_batch_size:
            why = (f"batch length {batch_length} is below the minimum of {MIN_BATCH_LENGTH}"
                   if batch_length < MIN_BATCH_LENGTH
                   else f"batch length {batch_length} is above the limit of {max_batch_size - LOG_OVERHEAD}")
            kept, count = _drain(stream, MAX_RAW_BYTES - len(head))
            left = count + len(head)
            if batch_length >= MIN_BATCH_LENGTH and left < size and magic == CURRENT_MAGIC:
                yield Problem(ProblemKind.TRUNCATED_TAIL,
                              f"Found {left} invalid bytes at the end of {source or 'the input'} "
                              f"(a batch declaring {size} bytes)", source, pos, base_offset, head + kept)
                return
            zeros = " (all zero: preallocated or unflushed space)" if not (head + kept).strip(b"\x00") else ""
            yield Problem(
                ProblemKind.BATCH_TOO_SHORT,
                f"{why}; the length cannot be trusted, so the remaining {left} bytes of the file cannot be "
                f"framed and are not decoded{zeros}",
                source, pos, base_offset, head + kept,
            )
            return

        data = head + _read(stream, size - HEADER_SIZE_UP_TO_MAGIC)
        if len(data) < size:
            if magic != CURRENT_MAGIC:
                yield Problem(ProblemKind.BAD_MAGIC,
                              f"magic {magic} (expected {CURRENT_MAGIC}) and a length of {size} bytes that runs past "
                              f"the end of the file; the remaining {len(data)} bytes are not decoded",
                              source, pos, base_offset, data[:MAX_RAW_BYTES])
            else:
                yield Problem(ProblemKind.TRUNCATED_TAIL,
                              f"Found {len(data)} invalid bytes at the end of {source or 'the input'} "
                              f"(a batch declaring {size} bytes)", source, pos, base_offset, data)
            return
        if magic != CURRENT_MAGIC:
            yield Problem(ProblemKind.BAD_MAGIC,
                          f"magic {magic} (expected {CURRENT_MAGIC}); skipped {size} bytes by its length",
                          source, pos, base_offset, data)
        else:
            yield Frame(pos, data)
        pos += size
        first = False


# ---- varints (spec §3) ---------------------------------------------------------------------------------------


class _Overrun(Exception):
    pass


class _BadRecord(Exception):
    pass


def _varint(buf: bytes, pos: int, end: int, max_bytes: int = 5) -> tuple[int, int]:
    """A zig-zag varint (max_bytes 5) or varlong (10) at `pos`; returns the value and the next position."""
    u = 0
    shift = 0
    for _ in range(max_bytes):
        if pos >= end:
            raise _Overrun("varint runs past the end")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            u &= 0xFFFFFFFF if max_bytes == 5 else 0xFFFFFFFFFFFFFFFF
            return (u >> 1) ^ -(u & 1), pos
        shift += 7
    raise _BadRecord(f"varint longer than {max_bytes} bytes")


def read_uvarint(buf: bytes, pos: int = 0) -> tuple[int, int]:
    """An unsigned varint (up to 5 bytes) at `pos`: value and next position. Raises ValueError."""
    u = 0
    shift = 0
    for _ in range(5):
        if pos >= len(buf):
            raise ValueError("unsigned varint runs past the end of the data")
        b = buf[pos]
        pos += 1
        u |= (b & 0x7F) << shift
        if b < 0x80:
            return u & 0xFFFFFFFF, pos
        shift += 7
    raise ValueError("unsigned varint longer than 5 bytes")


def read_varint(buf: bytes, pos: int = 0, long: bool = False) -> tuple[int, int]:
    """A zig-zag varint (or varlong) at `pos`: value and next position. Raises ValueError."""
    try:
        return _varint(buf, pos, len(buf), 10 if long else 5)
    except (_Overrun, _BadRecord) as e:
        raise ValueError(str(e)) from None


# ---- batches -------------------------------------------------------------------------------------------------


def parse_header(data: bytes, position: int = 0, crc_ok: bool | None = None) -> BatchHeader:
    """The 61-byte header at the start of `data`; `crc_ok` is computed unless given."""
    (base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta, base_timestamp,
     max_timestamp, producer_id, producer_epoch, base_sequence, records_count) = _HEADER.unpack_from(data)
    if crc_ok is None:
        crc_ok = crc == crc32c(memoryview(data)[CRC_START : batch_length + LOG_OVERHEAD])
    return BatchHeader(position, base_offset, batch_length, leader_epoch, magic, crc, attributes, last_offset_delta,
                       base_timestamp, max_timestamp, producer_id, producer_epoch, base_sequence, records_count,
                       crc_ok)


def decode_batch(
    data: bytes, position: int = 0, source: str = "", decode_values: bool = True
) -> list[Batch | Problem]:
    """Decode one whole batch (its bytes from `baseOffset` on): its problems, then the batch if it has a header."""
    problems: list[Batch | Problem] = []
    if len(data) < RECORD_BATCH_OVERHEAD:
        offset = _OFFSET.unpack_from(data)[0] if len(data) >= 8 else None
        return [Problem(ProblemKind.BATCH_TOO_SHORT,
                        f"a batch of {len(data)} bytes is shorter than the {RECORD_BATCH_OVERHEAD}-byte v2 header; "
                        "skipped by its length", source, position, offset, bytes(data))]
    if data[16] != CURRENT_MAGIC:
        return [Problem(ProblemKind.BAD_MAGIC, f"magic {data[16]} (expected {CURRENT_MAGIC})", source, position,
                        _PREFIX.unpack_from(data)[0], bytes(data))]
    view = memoryview(data)
    header = parse_header(data, position)
    if header.batch_length + LOG_OVERHEAD != len(data):
        problems.append(Problem(ProblemKind.TRAILING_BYTES if header.size < len(data) else ProblemKind.TRUNCATED_TAIL,
                                f"batch declares {header.size} bytes but {len(data)} were given",
                                source, position, header.base_offset, bytes(data)))
        if header.size > len(data):
            return problems
        view = view[: header.size]
    if not header.crc_ok:
        computed = crc32c(view[CRC_START:])
        problems.append(Problem(ProblemKind.BAD_CRC,
                                f"stored CRC {header.crc} but computed {computed}; records decoded anyway, "
                                "the batch is marked crc_ok=false", source, position, header.base_offset,
                                bytes(view)))
    batch = Batch(header, [], source)
    try:
        records_area = codecs.decompress(header.codec, view[RECORD_BATCH_OVERHEAD:])
    except codecs.UnknownCodecError as e:
        problems.append(Problem(ProblemKind.UNKNOWN_CODEC, f"{e}; records not decoded", source, position,
                                header.base_offset, bytes(view)))
        return [*problems, batch]
    except codecs.CodecError as e:
        problems.append(Problem(ProblemKind.DECOMPRESSION_FAILED,
                                f"{header.codec_name} records area does not decompress: {e}; records not decoded",
                                source, position, header.base_offset, bytes(view)))
        return [*problems, batch]
    _decode_records(batch, records_area, problems, decode_values)
    return [*problems, batch]


def _decode_records(batch: Batch, buf: bytes, problems: list[Batch | Problem], decode_values: bool) -> None:
    header = batch.header
    source, position = batch.source, header.position
    uncompressed = header.codec == 0
    control = header.is_control
    log_append = bool(header.attributes & 0x08)
    end = len(buf)
    count = header.records_count
    records = batch.records

    def where(p: int) -> str:
        if uncompressed:
            return f"file byte {position + RECORD_BATCH_OVERHEAD + p}"
        return f"byte {p} of the decompressed records"

    if count < 0:
        problems.append(Problem(ProblemKind.RECORD_COUNT_MISMATCH,
                                f"invalid record count {count}; reading records to the end of the batch",
                                source, position, header.base_offset))
    p = 0
    i = 0
    overran = False
    while count < 0 or i < count:
        if p >= end:
            if count >= 0:
                problems.append(Problem(ProblemKind.RECORD_COUNT_MISMATCH,
                                        f"header says {count} records but the batch holds {i}",
                                        source, position, header.base_offset + i))
            break
        start = p
        guess = header.base_offset + i
        try:
            length, p = _varint(buf, p, end)
        except (_Overrun, _BadRecord) as e:
            problems.append(Problem(ProblemKind.RECORD_OVERRUN,
                                    f"record #{i} at {where(start)}: its length {e}", source, position, guess,
                                    bytes(buf[start:end])))
            overran = True
            break
        if length < 0 or p + length > end:
            problems.append(Problem(ProblemKind.RECORD_OVERRUN,
                                    f"record #{i} at {where(start)} declares {length} bytes but {end - p} remain "
                                    "in the batch; the rest of the batch is not decoded", source, position, guess,
                                    bytes(buf[start:end])))
            overran = True
            break
        body_end = p + length
        try:
            record, q = _parse_record(buf, p, body_end, header, log_append)
        except _Overrun:
            problems.append(Problem(ProblemKind.RECORD_OVERRUN,
                                    f"record #{i} at {where(start)}: its fields run past its length of {length} bytes; "
                                    "record skipped", source, position, guess, bytes(buf[start:body_end])))
            p = body_end
            i += 1
            continue
        except _BadRecord as e:
            problems.append(Problem(ProblemKind.BAD_RECORD, f"record #{i} at {where(start)}: {e}; record skipped",
                                    source, position, guess, bytes(buf[start:body_end])))
            p = body_end
            i += 1
            continue
        if q != body_end:
            problems.append(Problem(ProblemKind.TRAILING_BYTES,
                                    f"{body_end - q} bytes left after the body of record #{i} at {where(start)}",
                                    source, position, record.offset, bytes(buf[q:body_end])))
        if control:
            _control_key(record, problems, source, position)
        if decode_values:
            _decode_value(record, control, problems, source, position)
        records.append(record)
        p = body_end
        i += 1
    if not overran and p < end:
        problems.append(Problem(ProblemKind.TRAILING_BYTES,
                                f"{end - p} bytes left after the last of {i} records at {where(p)}",
                                source, position, header.base_offset + max(i - 1, 0), bytes(buf[p:end][:MAX_RAW_BYTES])))


def _parse_record(buf: bytes, p: int, end: int, header: BatchHeader, log_append: bool) -> tuple[Record, int]:
    if p >= end:
        raise _Overrun()
    attributes = buf[p]
    p += 1
    ts_delta, p = _varint(buf, p, end, 10)
    offset_delta, p = _varint(buf, p, end)
    key_len, p = _varint(buf, p, end)
    if key_len < -1:
        raise _BadRecord(f"invalid key length {key_len}")
    key: bytes | None = None
    if key_len >= 0:
        if p + key_len > end:
            raise _Overrun()
        key = bytes(buf[p : p + key_len])
        p += key_len
    value_len, p = _varint(buf, p, end)
    if value_len < -1:
        raise _BadRecord(f"invalid value length {value_len}")
    value: bytes | None = None
    if value_len >= 0:
        if p + value_len > end:
            raise _Overrun()
        value = bytes(buf[p : p + value_len])
        p += value_len
    header_count, p = _varint(buf, p, end)
    if header_count < 0:
        raise _BadRecord(f"invalid header count {header_count}")
    headers: list[tuple[str, bytes | None]] = []
    for _ in range(header_count):
        hk_len, p = _varint(buf, p, end)
        if hk_len < 0:
            raise _BadRecord(f"invalid header key length {hk_len}")
        if p + hk_len > end:
            raise _Overrun()
        hkey = bytes(buf[p : p + hk_len]).decode("utf-8", errors="replace")
        p += hk_len
        hv_len, p = _varint(buf, p, end)
        if hv_len < -1:
            raise _BadRecord(f"invalid header value length {hv_len}")
        hval: bytes | None = None
        if hv_len >= 0:
            if p + hv_len > end:
                raise _Overrun()
            hval = bytes(buf[p : p + hv_len])
            p += hv_len
        headers.append((hkey, hval))
    timestamp = header.max_timestamp if log_append else header.base_timestamp + ts_delta
    record = Record(
        offset=header.base_offset + offset_delta,
        timestamp=timestamp,
        key=key,
        value=value,
        attributes=attributes,
        timestamp_delta=ts_delta,
        headers=tuple(headers),
    )
    return record, p


def _control_key(record: Record, problems: list[Batch | Problem], source: str, position: int) -> None:
    """Read the control key (int16 version, int16 type); an unreadable key leaves control_type -1 (UNKNOWN)."""
    key = record.key
    if key is None or len(key) < 4:
        record.control_type = -1
        record.error = f"control record key is {'null' if key is None else f'{len(key)} bytes'}; expected 4"
    else:
        version, ctype = struct.unpack_from(">hh", key)
        record.control_type = ctype
        if version < 0:
            record.error = f"control record key has a negative version {version}"
    if record.error:
        problems.append(Problem(ProblemKind.BAD_RECORD, record.error, source, position, record.offset,
                                record.key))


def _decode_value(record: Record, control: bool, problems: list[Batch | Problem], source: str, position: int) -> None:
    if record.error:
        return
    value = record.value
    try:
        if value is None:
            raise MessageError(ProblemKind.BAD_RECORD, "record value is null")
        if control:
            assert record.control_type is not None
            decoded = decode_control_value(record.control_type, value)
        else:
            decoded = decode_metadata_value(value)
    except MessageError as e:
        record.error = e.message
        if not control and value is not None:
            with contextlib.suppress(MessageError):  # a bad frame leaves api_key/version unset
                _frame, record.api_key, record.version = peek_frame(value)
        problems.append(Problem(e.kind, f"record at offset {record.offset}: {e.message}", source, position,
                                record.offset, value))
        return
    if not control:
        record.api_key = decoded.api_key
    record.version = decoded.version
    record.type_name = decoded.type_name
    record.data = decoded.data
    record.unknown_tags = dict(decoded.unknown_tags or {})


# ---- files and streams ---------------------------------------------------------------------------------------


def read_batches(
    stream: BinaryIO,
    source: str = "",
    strict: bool = False,
    *,
    start_position: int = 0,
    decode_values: bool = True,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
) -> Iterator[Batch | Problem]:
    """Decode a stream of batches into `Batch` and `Problem` items in file order, one batch in memory at a time.

    With `strict=True` the first problem raises `DecodeError` instead of being yielded.
    """
    for frame in iter_batch_frames(stream, source, start_position, max_batch_size):
        items: list[Batch | Problem]
        if isinstance(frame, Problem):
            items = [frame]
        else:
            items = decode_batch(frame.data, frame.position, source, decode_values)
        for item in items:
            if strict and isinstance(item, Problem):
                raise DecodeError(item)
            yield item


def read_file(path: str, strict: bool = False, **options: object) -> Iterator[Batch | Problem]:
    """`read_batches` over a file; a file that cannot be opened or read is an `unreadable_file` problem."""
    try:
        stream = open(path, "rb", buffering=_CHUNK)  # noqa: SIM115 - closed in the finally below
    except OSError as e:
        problem = Problem(ProblemKind.UNREADABLE_FILE, f"cannot open: {e}", path, None, None)
        if strict:
            raise DecodeError(problem) from e
        yield problem
        return
    try:
        yield from read_batches(stream, path, strict, **options)  # type: ignore[arg-type]
    except OSError as e:
        problem = Problem(ProblemKind.UNREADABLE_FILE, f"read failed: {e}", path, None, None)
        if strict:
            raise DecodeError(problem) from e
        yield problem
    finally:
        stream.close()


def read_bytes(data: bytes, source: str = "", strict: bool = False, **options: object) -> list[Batch | Problem]:
    """Everything in an in-memory file image (small inputs and tests)."""
    return list(read_batches(io.BytesIO(data), source, strict, **options))  # type: ignore[arg-type]
