"""Streaming decoder for files of v2 record batches: segments, snapshots and `bootstrap.checkpoint` (spec §2–§5).

A file is read batch by batch, never whole: the 17 bytes up to the magic, then the rest of the batch. Memory is
bounded by the largest batch (`max_batch_size`), whatever the size of the file. Items come out in file order:
`Problem`s first, then the `Batch` they concern.

Framing follows Kafka's `FileLogInputStream`:

* fewer than 17 bytes left, or a batch whose declared length runs past the end of the file: a partial tail,
  `truncated_tail` ("Found N invalid bytes at the end of ..."), and the scan stops;
* `batchLength < 14` (or above `max_batch_size`): the length cannot be trusted: `batch_too_short`;
* magic ≠ 2: `bad_magic`; the batch is skipped by its length when that length lands inside the file (kept raw);
* a first batch that cannot be framed (a bad length, or a bad magic byte or implausible header with no matching
  CRC): `batch_too_short`, `bad_magic` or `bad_crc`, unless nothing in the file frames as a batch (below):
  then the file is `not_a_metadata_log` (text, random bytes, an old-format log, a kafka-dump-log text).

Where the length cannot be followed (the last three, and a bad magic byte whose length runs past the end), the next
`RESYNC_WINDOW` bytes are searched for a position where a v2 batch with a matching CRC starts: the bytes before it
are the problem (kept raw, up to `MAX_RAW_BYTES`) and decoding goes on from there. When there is none, the rest of
the file is the problem and the scan stops. Memory stays bounded: the window plus one batch.

Inside a batch (`decode_batch`): a CRC-32C mismatch is `bad_crc` but the records are still decoded (the header
says `crc_ok=False`); an unknown codec or a failed decompression yields the batch with no records; records are
read per spec §3 with `record_overrun`, `trailing_bytes`, `record_count_mismatch` and `bad_record` for what does
not fit. Record values are decoded with `message` (metadata frames for data batches, control bodies for control
batches); a value that does not decode keeps its raw bytes, gets `Record.error`, and adds a problem of the
error's kind. A value that decodes but holds tagged fields its schema does not know adds the notice
`unknown_tagged_field` (the record stays decoded, the tags are kept raw). Snapshots (`snapshot=True`, by default
for `*.checkpoint` files in `read_file`) also get `snapshot_no_header` / `snapshot_no_footer` (`SnapshotStructure`).
Problems without a readable offset of their own carry the offset the bytes should hold (from the file's name at
its start, else the offset after the previous batch). Nothing is fatal unless `strict=True`, which raises
`DecodeError` at the first problem.
"""

from __future__ import annotations

import contextlib
import functools
import io
import mmap
import re
import struct
from collections import deque
from collections.abc import Callable, Generator, Iterable, Iterator
from typing import BinaryIO, NamedTuple, Protocol, TypeVar

from . import codecs, native, secrets
from .crc import crc32c
from .files import first_offset_from_name
from .message import (
    MessageError,
    decode_control_value,
    decode_metadata_value,
    peek_frame,
    unknown_tags_by_path,
)
from .model import CODEC_NAMES, Batch, BatchHeader, Problem, ProblemKind, Record

T = TypeVar("T")

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
# How far into a file whose first batch cannot be framed to look for a valid batch (the largest KRaft batch).
RESYNC_WINDOW = 8 * 1024 * 1024
# While searching for the next valid batch, the CRCs of candidates may cost at most this many times the bytes of the
# stream up to the candidate's end (counted over the whole stream); past it the search stops (reported).
RESYNC_CRC_FACTOR = 8
# Records of one batch that may fail to frame before the rest of the batch is taken as garbage: one problem each up
# to here, then one for the rest (a records area of zero bytes would otherwise be one problem per byte).
MAX_UNFRAMED_RECORDS = 100
# The problems of one kind a file lists one by one; past this they are counted, and one problem at the end of the
# file gives the count (`read_batches`).
MAX_PROBLEMS_OF_A_KIND = 1000
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


class _Readable(Protocol):
    def read(self, n: int = -1, /) -> bytes: ...


class _Stream:
    """The stream a scan reads from, with bytes already read put back in front of it (`unread`), each byte copied
    once however often bytes are put back; and where the stream ends, once a read has found its end."""

    __slots__ = ("_at", "_parts", "_stream", "end", "read_from_stream")

    def __init__(self, stream: _Readable, start_position: int) -> None:
        self._stream = stream
        self._parts: deque[memoryview] = deque()  # views: trimming one on `unread` copies nothing
        self._at = 0  # read so far of _parts[0]
        self.read_from_stream = start_position  # the file position after the last byte read from the stream
        self.end: int | None = None  # the file position of the stream's end, once known

    def unread(self, data: bytes) -> None:
        if self._parts and self._at:
            self._parts[0] = self._parts[0][self._at :]
        self._at = 0
        if data:
            self._parts.appendleft(memoryview(data))

    def read(self, n: int = -1, /) -> bytes:
        if not self._parts:
            return self._from_stream(n)
        if n < 0:
            rest = [self._parts[0][self._at :], *list(self._parts)[1:]]
            self._parts.clear()
            self._at = 0
            return b"".join(rest) + self._from_stream(-1)
        head = self._parts[0]
        data = bytes(head[self._at : self._at + n])
        self._at += len(data)
        if self._at >= len(head):
            self._parts.popleft()
            self._at = 0
        return data

    def _from_stream(self, n: int) -> bytes:
        data = self._stream.read(n)
        self.read_from_stream += len(data)
        if n < 0 or (n > 0 and not data):
            self.end = self.read_from_stream
        return data


def _read(stream: _Readable, n: int) -> bytes:
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


def _drain(stream: _Readable, keep: int) -> tuple[bytes, int]:
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


def _crc_matches(data: bytes | memoryview) -> bool:
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
    return _Framer(stream, source, start_position, max_batch_size).frames()


class _Framer:
    """One scan of a file: what it reads from, where it is, and the offset the next bytes should hold (from the
    file's name at its start, then after each batch)."""

    def __init__(self, stream: _Readable, source: str, start_position: int, max_batch_size: int) -> None:
        self.reader = _Stream(stream, start_position)
        self.source = source
        self.start = start_position
        self.pos = start_position
        self.max_batch_size = max_batch_size
        self.next_offset = first_offset_from_name(source) if start_position == 0 else None
        self.crc_spent = 0  # bytes checksummed for candidates while searching for a valid batch (`_candidate_at`)
        self.crc_checked = 0  # how many candidates that was
        self.gave_up = ""  # why the last search stopped before its window's end, if it did

    def frames(self) -> Iterator[Frame | Problem]:
        first = self.pos == 0
        go_on = True
        while go_on:
            head = _read(self.reader, HEADER_SIZE_UP_TO_MAGIC)
            if not head:
                return
            if len(head) < HEADER_SIZE_UP_TO_MAGIC:
                yield self._short(head, first)
                return
            if first and not _plausible_start(head, self.max_batch_size):
                go_on = yield from self._unframeable_start(head)
            else:
                go_on = yield from self._batch(head)
            first = False

    def _problem(self, kind: ProblemKind, message: str, offset: int | None, raw: bytes) -> Problem:
        return Problem(kind, message, self.source, self.pos, offset, raw)

    def _skip(self, found: int, window: bytearray) -> None:
        """Go on `found` bytes further, where a valid batch starts; `window` holds the bytes read ahead."""
        self.reader.unread(bytes(window[found:]))
        self.pos += found
        self.next_offset = None

    def _short(self, head: bytes, first: bool) -> Problem:
        """Fewer than 17 bytes left: a partial tail, or, as the whole file, text."""
        kind, offset = ProblemKind.NOT_A_METADATA_LOG, self.next_offset
        if not (first and _looks_like_text(head)):
            kind = ProblemKind.TRUNCATED_TAIL
            offset = _OFFSET.unpack_from(head)[0] if len(head) >= 8 else self.next_offset
        return self._problem(kind, f"Found {len(head)} invalid bytes at the end of {self.source or 'the input'} "
                             f"(fewer than the {HEADER_SIZE_UP_TO_MAGIC} bytes of a batch header)", offset, head)

    def _unframeable_start(self, head: bytes) -> Generator[Frame | Problem, None, bool]:
        """A file whose first bytes are no plausible batch. A whole batch whose CRC matches has one bad header byte;
        otherwise the bytes up to the next valid batch are the problem, and with none the file is not a log."""
        base_offset, batch_length = _PREFIX.unpack_from(head)
        magic, size = head[16], batch_length + LOG_OVERHEAD
        if head.startswith(b"Dumping "):
            yield self._problem(ProblemKind.NOT_A_METADATA_LOG, "this is kafka-dump-log text output, not a binary "
                                "metadata log; read it as dump-log text", self.next_offset,
                                head + _read(self.reader, MAX_RAW_BYTES - len(head)))
            return False
        data = head
        if RECORD_BATCH_OVERHEAD <= size <= self.max_batch_size:
            data = head + _read(self.reader, size - HEADER_SIZE_UP_TO_MAGIC)
        if len(data) == size and _crc_matches(data):
            if magic != CURRENT_MAGIC:
                yield self._problem(ProblemKind.BAD_MAGIC, f"magic {magic} (expected {CURRENT_MAGIC}) but the CRC "
                                    f"matches; skipped {size} bytes", base_offset, data)
            else:
                yield Frame(self.pos, data)
            self.pos += size
            self.next_offset = _offset_after(data)
            return True
        found, window = self._look_ahead(data)
        if found is None:
            yield self._problem(ProblemKind.NOT_A_METADATA_LOG,
                                f"not a KRaft metadata log: the first bytes are not a v2 record batch (base offset "
                                f"{base_offset}, length {batch_length}, magic {magic}) and "
                                f"{self._searched(window)}",
                                self.next_offset, bytes(window[:MAX_RAW_BYTES]))
            return False
        yield _corrupt_start(head, self.max_batch_size, found, _OFFSET.unpack_from(window, found)[0], self.source,
                             self.pos, self.next_offset, bytes(window[: min(found, MAX_RAW_BYTES)]))
        self._skip(found, window)
        return True

    def _batch(self, head: bytes) -> Generator[Frame | Problem, None, bool]:
        """The batch whose first 17 bytes are `head`, or the problem framing it; whether the scan goes on."""
        base_offset, batch_length = _PREFIX.unpack_from(head)
        magic, size = head[16], batch_length + LOG_OVERHEAD
        if batch_length < MIN_BATCH_LENGTH or size > self.max_batch_size:
            return (yield from self._untrusted_length(head))
        data = head + _read(self.reader, size - HEADER_SIZE_UP_TO_MAGIC)
        if len(data) < size:
            if magic == CURRENT_MAGIC:
                yield self._problem(ProblemKind.TRUNCATED_TAIL,
                                    f"Found {len(data)} invalid bytes at the end of {self.source or 'the input'} "
                                    f"(a batch declaring {size} bytes)", base_offset, data)
                return False
            why = f"magic {magic} (expected {CURRENT_MAGIC}) and a length of {size} bytes that runs past the end of " \
                  "the file"
            return (yield from self._resync_or_stop(ProblemKind.BAD_MAGIC, why, base_offset, data))
        if magic != CURRENT_MAGIC:
            yield self._problem(ProblemKind.BAD_MAGIC, f"magic {magic} (expected {CURRENT_MAGIC}); skipped {size} "
                                "bytes by its length", base_offset, data)
        else:
            yield Frame(self.pos, data)
        self.pos += size
        self.next_offset = _offset_after(data)
        return True

    def _untrusted_length(self, head: bytes) -> Generator[Frame | Problem, None, bool]:
        """A batch length below 14 or above `max_batch_size`."""
        base_offset, batch_length = _PREFIX.unpack_from(head)
        size = batch_length + LOG_OVERHEAD
        why = (f"batch length {batch_length} is below the minimum of {MIN_BATCH_LENGTH}"
               if batch_length < MIN_BATCH_LENGTH
               else f"batch length {batch_length} is above the limit of {self.max_batch_size - LOG_OVERHEAD}")
        found, window = self._look_ahead(head)
        if found is not None:
            return (yield from self._resync_or_stop(ProblemKind.BATCH_TOO_SHORT, f"{why}; the length cannot be "
                                                    "trusted", base_offset, head, (found, window)))
        raw = bytes(window[:MAX_RAW_BYTES])
        left = len(window) + _drain(self.reader, 0)[1]
        if batch_length >= MIN_BATCH_LENGTH and left < size and head[16] == CURRENT_MAGIC:
            yield self._problem(ProblemKind.TRUNCATED_TAIL,
                                f"Found {left} invalid bytes at the end of {self.source or 'the input'} "
                                f"(a batch declaring {size} bytes){self._gave_up_note()}", base_offset, raw)
            return False
        zeros = " (all zero: preallocated or unflushed space)" if not raw.strip(b"\x00") else ""
        yield self._problem(ProblemKind.BATCH_TOO_SHORT,
                            f"{why}; the length cannot be trusted and no valid batch follows, so the remaining {left} "
                            f"bytes of the file are not decoded{zeros}{self._gave_up_note()}", base_offset, raw)
        return False

    def _resync_or_stop(self, kind: ProblemKind, why: str, offset: int, data: bytes,
                        looked: tuple[int | None, bytearray] | None = None) -> Generator[Problem, None, bool]:
        """The bytes from here to the next valid batch are a `kind` problem, and the scan goes on there; with no
        valid batch ahead, the rest of the file is the problem and the scan stops."""
        found, window = looked if looked is not None else self._look_ahead(data)
        if found is None:
            left = len(window) + _drain(self.reader, 0)[1]
            yield self._problem(kind, f"{why}; the remaining {left} bytes are not decoded{self._gave_up_note()}", offset,
                                bytes(window[:MAX_RAW_BYTES]))
            return False
        yield self._problem(kind, f"{why}, so the {found} bytes before byte {self.pos + found}, where the next valid "
                            "batch starts, are not decoded", offset, bytes(window[: min(found, MAX_RAW_BYTES)]))
        self._skip(found, window)
        return True

    # ---- the search for the next valid batch (linear in the bytes it reads) ----

    def _look_ahead(self, data: bytes) -> tuple[int | None, bytearray]:
        """`data` (read from a place where no batch can be framed) and the bytes after it, and the first position
        after 0 in them, below `RESYNC_WINDOW`, where a valid batch starts (None when there is none, or when the
        search gave up: `gave_up` says why). The bytes are read as the search goes, at least `RESYNC_WINDOW` of
        them (when the stream has them) when nothing is found."""
        window = bytearray(data)
        self.gave_up = ""
        found = None
        p, step = 1, 64 * 1024
        while p < RESYNC_WINDOW and found is None:
            region_end = min(p + step, RESYNC_WINDOW)
            self._fill(window, region_end + RECORD_BATCH_OVERHEAD)
            found = self._search(window, p, region_end)
            if self.gave_up or region_end + RECORD_BATCH_OVERHEAD > len(window):
                break  # the stream ends within this region
            p, step = region_end, step * 2
        if found is None and not self.gave_up:
            self._fill(window, RESYNC_WINDOW)  # what the problem reports as searched
        return found, window

    def _searched(self, window: bytearray) -> str:
        """What the last search found nothing in."""
        return self.gave_up or f"no valid batch starts in the first {min(len(window), RESYNC_WINDOW)} bytes"

    def _gave_up_note(self) -> str:
        return f" ({self.gave_up})" if self.gave_up else ""

    def _fill(self, window: bytearray, size: int) -> None:
        if len(window) < size:
            window += _read(self.reader, size - len(window))

    def _search(self, window: bytearray, p: int, region_end: int) -> int | None:
        """The first position in [p, region_end) of `window` where a valid batch starts. Candidates are found by a
        pattern of the header bytes they need (`_candidates`, in C), then checked one by one (`_candidate_at`)."""
        while p < region_end:
            pattern = _candidates(self._longest_batch(p))
            m = pattern.search(window, p, min(len(window), region_end - 1 + _PATTERN_SPAN))
            if m is None:
                return None
            p = m.start()
            verdict = self._candidate_at(window, p)
            if verdict is None:
                return None  # gave up
            if verdict:
                return p
            p += 1
        return None

    def _longest_batch(self, p: int) -> int:
        """The largest size a batch starting `p` bytes ahead can have: `max_batch_size`, or less near the end of the
        stream once it is known."""
        end = self.reader.end
        return self.max_batch_size if end is None else min(self.max_batch_size, end - (self.pos + p))

    def _candidate_at(self, window: bytearray, p: int) -> bool | None:
        """Whether a valid v2 batch (its CRC matching) starts at `p` of `window`; None when checking its CRC would
        make the search's cost pass `RESYNC_CRC_FACTOR` times the bytes of the stream up to its end (the search
        stops: `gave_up`). Reads the candidate's bytes into `window` (not when the stream is known to end first),
        each byte once: the CRCs are what could be repeated, so they are what is bounded."""
        base_offset, batch_length = _PREFIX.unpack_from(window, p)
        size = batch_length + LOG_OVERHEAD
        end = p + size
        if base_offset < 0 or size < RECORD_BATCH_OVERHEAD or size > self.max_batch_size:
            return False
        self._fill(window, p + RECORD_BATCH_OVERHEAD)
        if p + RECORD_BATCH_OVERHEAD > len(window):
            return False
        attributes, last_delta = struct.unpack_from(">hi", window, p + CRC_START)
        count = struct.unpack_from(">i", window, p + 57)[0]
        if attributes & 0x07 >= len(CODEC_NAMES) or attributes & ~_ATTRIBUTE_BITS or last_delta < 0 or count < 0:
            return False
        if size > self._longest_batch(p):
            return False  # the stream ends before the candidate does (known without reading)
        self._fill(window, end)
        if end > len(window):
            return False
        if self.crc_spent + size > RESYNC_CRC_FACTOR * (self.pos + end - self.start):
            self.gave_up = (f"the search for a valid batch stopped at byte {self.pos + p}: the CRCs of "
                            f"{self.crc_checked} candidates checked so far cost {self.crc_spent} bytes, and this "
                            f"one's {size} more would pass {RESYNC_CRC_FACTOR} times the bytes up to its end")
            return None
        self.crc_spent += size
        self.crc_checked += 1
        with memoryview(window) as view:
            return _crc_matches(view[p:end])


def _candidate_pattern(longest: int) -> re.Pattern[bytes]:
    """The header bytes a batch of at most `longest` bytes needs at its start, as a lookahead that matches at each
    such position: base offset ≥ 0, batch length ≤ `longest - 12` (its first byte), magic 2, attributes with a
    known codec and no unused bit, last offset delta ≥ 0, record count ≥ 0. A superset of the candidates
    `_candidate_at` accepts."""
    top = max(0, min(0x7F, (longest - LOG_OVERHEAD) >> 24))
    low = b"".join(re.escape(bytes([b])) for b in range(_ATTRIBUTE_BITS + 1) if b & 0x07 < len(CODEC_NAMES))
    return re.compile(rb"(?=[\x00-\x7f].{7}[\x00-" + re.escape(bytes([top])) + rb"].{7}\x02.{4}\x00[" + low
                      + rb"][\x00-\x7f].{33}[\x00-\x7f])", re.DOTALL)


# The attribute bits Kafka uses (codec, timestamp type, transactional, control, delete horizon); a header with
# another one set is no batch Kafka wrote, and not taken as the place to resume after corrupt bytes.
_ATTRIBUTE_BITS = 0x7F
_PATTERN_SPAN = 58  # the bytes `_candidate_pattern` looks at from a candidate's start
_candidates = functools.lru_cache(maxsize=None)(_candidate_pattern)


def _plausible_start(head: bytes, max_batch_size: int) -> bool:
    """Whether the first 17 bytes of a file can start a v2 batch (else the file may not be a log at all)."""
    base_offset, batch_length = _PREFIX.unpack_from(head)
    return (base_offset >= 0 and head[16] == CURRENT_MAGIC and not _looks_like_text(head)
            and RECORD_BATCH_OVERHEAD <= batch_length + LOG_OVERHEAD <= max_batch_size)


def _offset_after(data: bytes) -> int | None:
    """The offset after the batch whose bytes start `data` (its base offset + last offset delta + 1)."""
    if len(data) < RECORD_BATCH_OVERHEAD:
        return None
    return int(_OFFSET.unpack_from(data)[0]) + int(struct.unpack_from(">i", data, 23)[0]) + 1


def _corrupt_start(head: bytes, max_batch_size: int, skipped: int, next_base: int, source: str, pos: int,
                   name_offset: int | None, raw: bytes) -> Problem:
    """The problem for a first batch that cannot be framed when a valid batch starts `skipped` bytes later."""
    base_offset, batch_length = _PREFIX.unpack_from(head)
    magic = head[16]
    size = batch_length + LOG_OVERHEAD
    kind = ProblemKind.BATCH_TOO_SHORT
    if batch_length < MIN_BATCH_LENGTH:
        why = f"a batch length of {batch_length}, below the minimum of {MIN_BATCH_LENGTH}"
    elif size < RECORD_BATCH_OVERHEAD:
        why = f"a size of {size} bytes, shorter than the {RECORD_BATCH_OVERHEAD}-byte v2 header"
    elif size > max_batch_size:
        why = f"a batch length of {batch_length}, above the limit of {max_batch_size - LOG_OVERHEAD}"
    elif magic != CURRENT_MAGIC:
        kind, why = ProblemKind.BAD_MAGIC, f"magic {magic} (expected {CURRENT_MAGIC}) and no matching CRC"
    else:
        kind, why = ProblemKind.BAD_CRC, f"an implausible header (base offset {base_offset}) and no matching CRC"
    offset = base_offset if 0 <= base_offset <= next_base else name_offset
    return Problem(kind, f"the first batch has {why}, so it cannot be framed; the {skipped} bytes before byte "
                   f"{pos + skipped}, where the next valid batch starts, are not decoded", source, pos, offset, raw)


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
    data: bytes, position: int = 0, source: str = "", decode_values: bool = True,
    records_for: frozenset[int] | None = None, decompressed_limit: int = codecs.DEFAULT_LIMIT,
) -> list[Batch | Problem]:
    """Decode one whole batch (its bytes from `baseOffset` on): its problems, then the batch if it has a header.

    `records_for` (api keys): keep only control records and the metadata records of these types (`wanted`); the
    others are framed (their framing problems are still found) but neither kept nor value-decoded.
    `decompressed_limit`: the most bytes a compressed records area may decompress to; past it the batch keeps no
    records and gets a `decompression_limit` problem.
    """
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
        records_area = codecs.decompress(header.codec, view[RECORD_BATCH_OVERHEAD:], decompressed_limit)
    except codecs.UnknownCodecError as e:
        problems.append(Problem(ProblemKind.UNKNOWN_CODEC, f"{e}; records not decoded", source, position,
                                header.base_offset, bytes(view)))
        return [*problems, batch]
    except codecs.DecompressionLimitError as e:
        problems.append(Problem(ProblemKind.DECOMPRESSION_LIMIT,
                                f"{header.codec_name} records area decompresses to more than the limit of {e.limit} "
                                f"bytes ({len(view) - RECORD_BATCH_OVERHEAD} bytes compressed); records not "
                                "decoded (the limit is the `decompressed_limit` option)", source, position,
                                header.base_offset, bytes(view)))
        return [*problems, batch]
    except codecs.CodecError as e:
        problems.append(Problem(ProblemKind.DECOMPRESSION_FAILED,
                                f"{header.codec_name} records area does not decompress: {e}; records not decoded",
                                source, position, header.base_offset, bytes(view)))
        return [*problems, batch]
    _decode_records(batch, records_area, problems, decode_values, records_for)
    return [*problems, batch]


def wanted(record: Record, control: bool, records_for: frozenset[int] | None) -> bool:
    """Whether `records_for` keeps a record: every control record, and a metadata record whose value's frame names
    one of its api keys (`peek_frame`, without decoding the body). A null value or a frame that cannot be read
    names none. Without `records_for` every record is kept."""
    if records_for is None or control:
        return True
    if record.value is None:
        return False
    try:
        return peek_frame(record.value)[1] in records_for
    except MessageError:
        return False


def _decode_records(batch: Batch, buf: bytes, problems: list[Batch | Problem], decode_values: bool,
                    records_for: frozenset[int] | None = None) -> None:
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

    if records_for is not None and not control and count >= 0 and _none_wanted(buf, count, records_for):
        return
    if count < 0:
        problems.append(Problem(ProblemKind.RECORD_COUNT_MISMATCH,
                                f"invalid record count {count}; reading records to the end of the batch",
                                source, position, header.base_offset))
    p = 0
    i = 0
    overran = False
    unframed = 0  # records skipped or with bytes left over: past MAX_UNFRAMED_RECORDS the batch is taken as garbage
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
        if unframed >= MAX_UNFRAMED_RECORDS:
            problems.append(Problem(ProblemKind.RECORD_OVERRUN,
                                    f"{unframed} records of this batch did not frame (see the problems before); the "
                                    f"remaining {end - start} bytes of its records, from record #{i} at "
                                    f"{where(start)}, are not decoded", source, position, guess,
                                    bytes(buf[start : min(end, start + MAX_RAW_BYTES)])))
            overran = True
            break
        try:
            record, q = _parse_record(buf, p, body_end, header, log_append)
        except _Overrun:
            problems.append(Problem(ProblemKind.RECORD_OVERRUN,
                                    f"record #{i} at {where(start)}: its fields run past its length of {length} bytes; "
                                    "record skipped", source, position, guess, bytes(buf[start:body_end])))
            p = body_end
            i += 1
            unframed += 1
            continue
        except _BadRecord as e:
            problems.append(Problem(ProblemKind.BAD_RECORD, f"record #{i} at {where(start)}: {e}; record skipped",
                                    source, position, guess, bytes(buf[start:body_end])))
            p = body_end
            i += 1
            unframed += 1
            continue
        if q != body_end:
            problems.append(Problem(ProblemKind.TRAILING_BYTES,
                                    f"{body_end - q} bytes left after the body of record #{i} at {where(start)}",
                                    source, position, record.offset, bytes(buf[q:body_end])))
            unframed += 1
        if not wanted(record, control, records_for):
            p = body_end
            i += 1
            continue
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


def _none_wanted(buf: bytes, count: int, records_for: frozenset[int]) -> bool:
    """Whether the `count` records of a data batch all frame cleanly, exactly filling `buf`, without headers, and
    none is one `records_for` keeps (its value's frame is three one-byte varints naming another type): then
    `_decode_records` would keep no record and find no problem, so the batch is done without building records.
    Anything else (a problem, a wanted record, an unusual frame) answers False and the batch is read in full."""
    end = len(buf)
    p = 0
    try:
        for _ in range(count):
            b = buf[p]
            if b < 0x80:
                length, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                length, p = _varint(buf, p, end)
            body_end = p + length
            if length < 0 or body_end > end:
                return False
            p += 1  # attributes
            if buf[p] < 0x80:  # timestamp delta
                p += 1
            else:
                _, p = _varint(buf, p, body_end, 10)
            if buf[p] < 0x80:  # offset delta
                p += 1
            else:
                _, p = _varint(buf, p, body_end)
            b = buf[p]
            if b < 0x80:
                key_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                key_len, p = _varint(buf, p, body_end)
            if key_len < -1:
                return False
            p += max(key_len, 0)
            b = buf[p]
            if b < 0x80:
                value_len, p = (b >> 1) ^ -(b & 1), p + 1
            else:
                value_len, p = _varint(buf, p, body_end)
            v = p
            p += value_len
            if value_len < 3 or p >= body_end:
                return False
            if buf[v] >= 0x80 or buf[v + 1] >= 0x80 or buf[v + 2] >= 0x80 or buf[v + 1] in records_for:
                return False
            if buf[p] != 0 or p + 1 != body_end:  # no headers, nothing after them
                return False
            p = body_end
    except (IndexError, _Overrun, _BadRecord):
        return False
    return p == end


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
    unknown = unknown_tags_by_path(record.data if decoded.nests else None, record.unknown_tags)
    if unknown:
        problems.append(Problem(ProblemKind.UNKNOWN_TAGGED_FIELD,
                                f"record at offset {record.offset} ({record.type_name} v{record.version}) has "
                                f"{describe_unknown_tags(unknown)}; the record is decoded and the unknown tags are "
                                "kept raw", source, position, record.offset))


def describe_unknown_tags(unknown: dict[str, dict[int, bytes]]) -> str:
    """`unknown tagged field(s) 5 (2 bytes), 31 (0 bytes); in voters[0]: 10 (0 bytes)` for messages."""
    parts = []
    for path, tags in unknown.items():
        listed = ", ".join(f"{tag} ({len(raw)} byte{'' if len(raw) == 1 else 's'})" for tag, raw in sorted(tags.items()))
        parts.append(f"in {path}: {listed}" if path else listed)
    return "unknown tagged field(s) " + "; ".join(parts)


# ---- snapshot structure (spec §5.3) ----------------------------------------------------------------------------

SNAPSHOT_HEADER_TYPE = 3
SNAPSHOT_FOOTER_TYPE = 4
_FILE_LEVEL = frozenset({ProblemKind.NOT_A_METADATA_LOG, ProblemKind.UNREADABLE_FILE})


class SnapshotStructure:
    """Checks a snapshot's items, in file order, against spec §5.3: the first batch is a control batch whose first
    record is a SnapshotHeader, the last batch a control batch holding the SnapshotFooter.

    `see` each item (it returns the `snapshot_no_header` problem to report before the first batch when that batch
    is not the header), then `finish` (the `snapshot_no_footer` problem, if any). A file that could not be read or
    is not a log at all gets no structure problems: its file-level problem says it all. Offsets are the
    snapshot's own (local, from 0). `unprinted_ok` is for kafka-dump-log text made with --skip-record-metadata,
    which prints control records as empty lines: a control record of unknown type is then not held against it.
    """

    def __init__(self, source: str, unprinted_ok: bool = False) -> None:
        self.source = source
        self.unprinted_ok = unprinted_ok
        self.first: Batch | None = None
        self.last: Batch | None = None
        self.file_level = False

    def _is(self, record: Record, control_type: int) -> bool:
        if record.control_type == control_type:
            return True
        return self.unprinted_ok and record.control_type == -1 and record.error is None

    def see(self, item: Batch | Problem) -> Problem | None:
        if isinstance(item, Problem):
            self.file_level = self.file_level or item.kind in _FILE_LEVEL
            return None
        self.last = item
        if self.first is not None:
            return None
        self.first = item
        h = item.header
        if h.is_control and item.records and self._is(item.records[0], SNAPSHOT_HEADER_TYPE):
            return None
        if not h.is_control:
            what = "a data batch"
        elif not item.records:
            what = "a control batch without records"
        else:
            what = f"a control batch whose first record is {item.records[0].type_name or 'not readable'}"
        return Problem(ProblemKind.SNAPSHOT_NO_HEADER,
                       f"the snapshot does not start with a SnapshotHeader: its first batch (offsets {h.base_offset}.."
                       f"{h.last_offset}) is {what}", self.source, h.position, h.base_offset)

    def finish(self) -> list[Problem]:
        if self.file_level:
            return []
        if self.first is None or self.last is None:
            return [Problem(kind, f"the snapshot holds no batch, so no {name}", self.source, 0, 0)
                    for kind, name in ((ProblemKind.SNAPSHOT_NO_HEADER, "SnapshotHeader"),
                                       (ProblemKind.SNAPSHOT_NO_FOOTER, "SnapshotFooter"))]
        last = self.last
        h = last.header
        if h.is_control and any(self._is(r, SNAPSHOT_FOOTER_TYPE) for r in last.records):
            return []
        what = "a data batch" if not h.is_control else "a control batch without a SnapshotFooter"
        return [Problem(ProblemKind.SNAPSHOT_NO_FOOTER,
                        f"the snapshot does not end with a SnapshotFooter, so it may be incomplete: its last batch "
                        f"(offsets {h.base_offset}..{h.last_offset}) is {what}", self.source, h.position,
                        h.last_offset)]


def check_snapshot(items: Iterable[Batch | Problem], source: str,
                   unprinted_ok: bool = False) -> Iterator[Batch | Problem]:
    """A snapshot's items with its structure problems added where they belong (see `SnapshotStructure`)."""
    structure = SnapshotStructure(source, unprinted_ok)
    for item in items:
        problem = structure.see(item)
        if problem is not None:
            yield problem
        yield item
    yield from structure.finish()


def is_snapshot_path(path: str) -> bool:
    """Snapshots and `bootstrap.checkpoint`: what kafka-dump-log, too, reads by the `.checkpoint` suffix."""
    return path.endswith(".checkpoint")


# ---- files and streams ---------------------------------------------------------------------------------------


def read_batches(
    stream: BinaryIO,
    source: str = "",
    strict: bool = False,
    *,
    start_position: int = 0,
    decode_values: bool = True,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    snapshot: bool = False,
    records_for: frozenset[int] | None = None,
    decompressed_limit: int = codecs.DEFAULT_LIMIT,
    show_secrets: bool = False,
) -> Iterator[Batch | Problem]:
    """Decode a stream of batches into `Batch` and `Problem` items in file order, one batch in memory at a time.

    `records_for`, `decompressed_limit`: see `decode_batch` (each batch keeps its header as read, with its
    `records_count`). A stream lists at most `MAX_PROBLEMS_OF_A_KIND` problems of one kind (`limit_problems`).
    SCRAM credentials and password configs come redacted (`secrets`) unless `show_secrets`.

    `snapshot=True` (a whole snapshot or bootstrap file, read from its start) adds the structure problems
    `snapshot_no_header` and `snapshot_no_footer` (`check_snapshot`). With `strict=True` the first problem raises
    `DecodeError` instead of being yielded. Decodes through the compiled extension when it is installed
    (`native.enabled`); the items are the same.
    """
    items: Iterable[Batch | Problem]
    if native.enabled():
        items = native.read_batches(stream, source, start_position=start_position, decode_values=decode_values,
                                    max_batch_size=max_batch_size, resync_window=RESYNC_WINDOW, snapshot=snapshot,
                                    records_for=records_for, decompressed_limit=decompressed_limit)
    else:
        items = _decode_frames(iter_batch_frames(stream, source, start_position, max_batch_size), source,
                               decode_values, records_for, decompressed_limit)
        if snapshot:
            items = check_snapshot(items, source)
    return _finished(items, source, strict, records_for, show_secrets)


def _finished(items: Iterable[T], source: str, strict: bool, records_for: frozenset[int] | None,
              show_secrets: bool) -> Iterator[T | Problem]:
    """What both decoders' items go through: the problems limited, the secrets redacted, strictness applied."""
    limited = limit_problems(items, source)
    # only records of these types can hold a secret; a selection without them needs no look (`acls PATH`)
    if not show_secrets and (records_for is None or not records_for.isdisjoint(secrets.MAY_HOLD_SECRETS)):
        limited = secrets.redact_items(limited)
    for item in limited:
        if strict and isinstance(item, Problem):
            raise DecodeError(item)
        yield item


def read_rows(
    stream: BinaryIO,
    source: str = "",
    *,
    start_position: int = 0,
    max_batch_size: int = DEFAULT_MAX_BATCH_SIZE,
    snapshot: bool = False,
    decompressed_limit: int = codecs.DEFAULT_LIMIT,
    show_secrets: bool = False,
    max_rows: int = 2048,
    max_bytes: int = 16 * 1024 * 1024,
    ordered: bool = False,
) -> Iterator[Batch | Problem | native.RowChunk]:
    """`read_batches` for the ingest when the compiled decoder is in use (`native.enabled()`): most batches' records
    come as `native.RowChunk`s of Arrow buffers (at most `max_rows` rows, about `max_bytes`) instead of `Batch`
    objects, not in file order with the rest unless `ordered`; the rest is as `read_batches` gives it (same
    problems, same redaction). The rows are those the ingest makes of the `Batch` objects
    (`tests/kafka/test_native_decoder.py` holds them equal)."""
    items = native.read_rows(stream, source, start_position=start_position, max_batch_size=max_batch_size,
                             resync_window=RESYNC_WINDOW, snapshot=snapshot, decompressed_limit=decompressed_limit,
                             max_rows=max_rows, max_bytes=max_bytes, show_secrets=show_secrets, ordered=ordered)
    return _finished(items, source, False, None, show_secrets)


def _decode_frames(frames: Iterable[Frame | Problem], source: str, decode_values: bool,
                   records_for: frozenset[int] | None = None,
                   decompressed_limit: int = codecs.DEFAULT_LIMIT) -> Iterator[Batch | Problem]:
    for frame in frames:
        if isinstance(frame, Problem):
            yield frame
        else:
            yield from decode_batch(frame.data, frame.position, source, decode_values, records_for,
                                    decompressed_limit)


def limit_problems(items: Iterable[T], source: str, most: int = MAX_PROBLEMS_OF_A_KIND) -> Iterator[T | Problem]:
    """The items with at most `most` problems of each kind; the others of a kind are counted, and one problem of
    that kind at the end says how many there were and where the first and last were. A file of a million corrupt
    batches then makes a few thousand problems, not a million (each keeping its raw bytes)."""
    seen: dict[ProblemKind, int] = {}
    unlisted: dict[ProblemKind, list[Problem]] = {}  # [first, last] past `most`
    counts: dict[ProblemKind, int] = {}
    for item in items:
        if isinstance(item, Problem):
            n = seen[item.kind] = seen.get(item.kind, 0) + 1
            if n > most:
                ends = unlisted.setdefault(item.kind, [item, item])
                ends[1] = item
                counts[item.kind] = n - most
                continue
        yield item
    for kind, (first, last) in unlisted.items():
        yield Problem(kind, f"{counts[kind]} more {kind.value} problems in {source or 'the input'} after the first "
                      f"{most} are not listed one by one: the first of them at byte {first.position} (offset "
                      f"{first.offset}), the last at byte {last.position} (offset {last.offset})", source,
                      first.position, first.offset)


def read_file(path: str, strict: bool = False, *, snapshot: bool | None = None,
              **options: object) -> Iterator[Batch | Problem]:
    """`read_batches` over a file; a file that cannot be opened or read is an `unreadable_file` problem.

    `snapshot`: check the snapshot structure; by default for `*.checkpoint` files (`is_snapshot_path`).
    """
    if snapshot is None:
        snapshot = is_snapshot_path(path)
    checked = snapshot
    return _from_file(path, strict, lambda stream: read_batches(stream, path, strict, snapshot=checked,
                                                                **options))  # type: ignore[arg-type]


def read_file_for_dump_log(path: str, *, show_secrets: bool, skip_record_metadata: bool, bare_prefix: str,
                           gap_from_minus_one: bool, kafka_keys: frozenset[int]
                           ) -> Iterator[Batch | Problem | native.DumpLogText]:
    """`read_file` for kafka-dump-log's text (`dumplog.DumpLogRenderer`): with the compiled decoder, most batches
    come already printed (`native.read_dump_log`, with the renderer's options); the same items otherwise."""
    if not native.enabled():
        return read_file(path, show_secrets=show_secrets)
    snapshot = is_snapshot_path(path)

    def read(stream: BinaryIO) -> Iterator[Batch | Problem | native.DumpLogText]:
        items = native.read_dump_log(
            stream, path, max_batch_size=DEFAULT_MAX_BATCH_SIZE, resync_window=RESYNC_WINDOW, snapshot=snapshot,
            decompressed_limit=codecs.DEFAULT_LIMIT, show_secrets=show_secrets,
            skip_record_metadata=skip_record_metadata, bare_prefix=bare_prefix,
            gap_from_minus_one=gap_from_minus_one, kafka_keys=kafka_keys)
        return _finished(items, path, False, None, show_secrets)

    return _from_file(path, False, read)


def read_log_file_in_runs(path: str, strict: bool, records_for: frozenset[int], start_position: int = 0
                          ) -> Iterator[Batch | Problem | native.BatchRun]:
    """`read_file(path, strict, records_for=records_for)` of a log segment for the replayer, from
    `start_position` (where a batch starts, `batch_position`) on: with the compiled decoder, the batches that keep
    no record come together as `native.BatchRun`s; the same items otherwise."""

    def read(stream: BinaryIO) -> Iterator[Batch | Problem | native.BatchRun]:
        stream.seek(start_position)
        if not native.enabled():
            return read_batches(stream, path, strict, start_position=start_position, records_for=records_for)
        items = native.read_batches_in_runs(stream, path, start_position=start_position,
                                            max_batch_size=DEFAULT_MAX_BATCH_SIZE, resync_window=RESYNC_WINDOW,
                                            records_for=records_for, decompressed_limit=codecs.DEFAULT_LIMIT)
        return _finished(items, path, strict, records_for, False)

    return _from_file(path, strict, read)


def batch_position(path: str, offset: int) -> tuple[int, int] | None:
    """Where in a log segment the batch holding `offset` starts (or the first batch after it), and that batch's
    base offset, found from the batches' lengths alone (no CRC, no records): to read a segment from there. None
    where the walk meets anything but well-formed magic-2 headers with growing offsets (the caller then reads the
    whole file, whose reader says what is wrong) or the segment ends first."""
    try:
        with open(path, "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as data:
            return _walk_to(data, offset)
    except (OSError, ValueError):  # unreadable, or empty (mmap of 0 bytes)
        return None


def _walk_to(data: mmap.mmap, offset: int) -> tuple[int, int] | None:
    pos, previous, end = 0, -1, len(data)
    while pos + RECORD_BATCH_OVERHEAD <= end:
        base, length, _epoch, magic, _crc, _attributes, last_delta, *_ = _HEADER.unpack_from(data, pos)
        last = base + last_delta
        if magic != 2 or base <= previous or last < base or not (
                RECORD_BATCH_OVERHEAD - 12 <= length <= end - pos - 12):
            return None
        if last >= offset:
            return pos, base
        pos, previous = pos + 12 + length, last
    return None


def _from_file(path: str, strict: bool, read: Callable[[BinaryIO], Iterator[T]]) -> Iterator[T | Problem]:
    """`read(stream)` over the opened file; a file that cannot be opened or read is an `unreadable_file` problem
    (raised as `DecodeError` when `strict`)."""
    try:
        stream = open(path, "rb", buffering=_CHUNK)  # noqa: SIM115 - closed in the finally below
    except OSError as e:
        problem = Problem(ProblemKind.UNREADABLE_FILE, f"cannot open: {e}", path, None, None)
        if strict:
            raise DecodeError(problem) from e
        yield problem
        return
    try:
        yield from read(stream)
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
