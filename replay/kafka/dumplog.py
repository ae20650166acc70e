"""`kafka-dump-log --cluster-metadata-decoder` text: print it from our decoded files, and read it back.

Three flavours of the tool exist (spec §10); `variant` picks one, and `choose_variant` the one of the release that
wrote the files (from their metadata.version):

* ``"4.0"``: the Scala tool up to 4.0. A LEADER_CHANGE control record prints ` controlType: LEADER_CHANGE(2)`.
* ``"4.1"``: the Scala tool in 4.1 and 4.2. LEADER_CHANGE prints ` LeaderChange: {json}`.
* ``"4.3"``: the Java tool (`org.apache.kafka.tools.DumpLogSegments`) from 4.3 on. As 4.1, except that
  `--skip-record-metadata` prints data records as `| payload: {json}` (Scala: ` payload: {json}`), and the
  non-consecutive-offsets report on stderr also flags the first record of a file when it is not offset 0.

`render_file` / `DumpLogRenderer` give the stdout lines, line for line; the stderr lines (unknown files,
non-consecutive offsets, the exception Kafka dies with) are kept apart. `parse_text` reads such text (any variant,
with or without `--skip-record-metadata`, several `Dumping` sections in one text) back into `Batch`es;
`parse_text_sections` also marks where each dumped file's items begin. `record_json_text` / `problem_json` give the lines `inspect --output jsonl` prints.
"""

from __future__ import annotations

import base64
import dataclasses
import json
import os
import re
import struct
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import IO, Any

from . import batch as batch_reader
from . import kafkajson, message, native, schemas, secrets, writer
from .batch import SNAPSHOT_FOOTER_TYPE, SNAPSHOT_HEADER_TYPE, SnapshotStructure
from .files import classify_name, first_offset_from_name
from .model import (
    CODEC_NAMES,
    CONTROL_TYPES,
    FEATURE_LEVEL_RECORD,
    Batch,
    BatchHeader,
    Problem,
    ProblemKind,
    Record,
    SourceKind,
)

VARIANTS = ("4.0", "4.1", "4.3")
BOOTSTRAP_FILENAME = "bootstrap.checkpoint"

# What each control type prints before its JSON (4.1+; LEADER_CHANGE is special-cased for 4.0).
_CONTROL_LABELS = {
    2: " LeaderChange: ",
    3: " SnapshotHeader ",
    4: " SnapshotFooter ",
    5: " KRaftVersion ",
    6: " KRaftVoters ",
}
_CONTROL_BY_NAME = {name: type_id for type_id, name in CONTROL_TYPES.items()}

# apiKeys Kafka 4.3.1's MetadataRecordType knows; others print "Unknown metadata id N" (checked with the tool:
# 29, UnregisterControllerRecord on trunk, is not in 4.3.1).
KAFKA_43_API_KEYS = frozenset(k for k, s in schemas.METADATA_SCHEMAS.items() if s.in_kafka_431)

_INT_MAX = 0x7FFFFFFF

# Decoder findings about framing the file: where the tool stops reading it or dies (see `_tool_stops_reading`).
_FRAMING = frozenset([
    ProblemKind.NOT_A_METADATA_LOG, ProblemKind.UNREADABLE_FILE, ProblemKind.TRUNCATED_TAIL,
    ProblemKind.BATCH_TOO_SHORT, ProblemKind.BAD_MAGIC,
])

# Decoder findings inside a batch at which the tool, iterating the batch's records, throws.
_FATAL_IN_BATCH = frozenset([
    ProblemKind.RECORD_OVERRUN, ProblemKind.DECOMPRESSION_FAILED, ProblemKind.DECOMPRESSION_LIMIT,
    ProblemKind.UNKNOWN_CODEC, ProblemKind.TRAILING_BYTES, ProblemKind.RECORD_COUNT_MISMATCH,
])


def _check_variant(variant: str) -> None:
    if variant not in VARIANTS:
        raise ValueError(f"unknown dump-log variant {variant!r}; expected one of {', '.join(VARIANTS)}")


# ---- which variant a log asks for ----------------------------------------------------------------------------
# Kafka's MetadataVersion feature levels (read from MetadataVersion.VERSIONS of 4.3.1): the release each level came
# with, and from which level on each flavour of the tool is the one of the release that wrote the log.
_FIRST_LEVELS = (("3.3-IV3", 7), ("3.4-IV0", 8), ("3.5-IV0", 9), ("3.5-IV1", 10), ("3.5-IV2", 11),
                 ("3.6-IV0", 12), ("3.6-IV1", 13), ("3.6-IV2", 14), ("3.7-IV0", 15), ("3.7-IV1", 16),
                 ("3.7-IV2", 17), ("3.7-IV3", 18), ("3.7-IV4", 19), ("3.8-IV0", 20), ("3.9-IV0", 21),
                 ("4.0-IV0", 22), ("4.0-IV1", 23), ("4.0-IV2", 24), ("4.0-IV3", 25), ("4.1-IV0", 26),
                 ("4.1-IV1", 27), ("4.2-IV0", 28), ("4.2-IV1", 29), ("4.3-IV0", 30), ("4.4-IV0", 31))
_VARIANT_SINCE_LEVEL = ((30, "4.3"), (26, "4.1"), (0, "4.0"))
METADATA_VERSION = "metadata.version"


def metadata_version_name(level: int) -> str:
    """`3.9-IV0` for feature level 21; a level this table does not know is named by its number."""
    return next((name for name, lv in _FIRST_LEVELS if lv == level), f"feature level {level}")


def variant_for_level(level: int) -> str:
    """The kafka-dump-log flavour of the release whose metadata.version has this feature level."""
    return next(variant for since, variant in _VARIANT_SINCE_LEVEL if level >= since)


@dataclass(frozen=True)
class VariantChoice:
    """The variant `--variant auto` took, and why (one line for the user)."""

    variant: str
    reason: str


def choose_variant(paths: Iterable[str]) -> VariantChoice:
    """The variant of the release that wrote these files: from the metadata.version feature level in force at the
    highest log offset the files record it (a FeatureLevelRecord in a segment; in a snapshot, as of its last
    offset; the bootstrap checkpoint before everything; only those records' values are decoded). Files it cannot
    read are left to the rendering, which reports them. Without such a record, the newest variant."""
    found: tuple[int, int, str] | None = None  # (log offset, level, file)
    for path in paths:
        source = classify_name(path)
        if source is None:
            continue
        where: int | None = None  # the log offset of every record of a snapshot or the bootstrap file
        if source.kind == SourceKind.SNAPSHOT:
            where = (source.snapshot_end_offset or 0) - 1
        elif source.kind == SourceKind.BOOTSTRAP:
            where = -1
        try:
            with open(path, "rb") as f:
                for item in batch_reader.read_batches(f, path, records_for=frozenset([FEATURE_LEVEL_RECORD])):
                    if not isinstance(item, Batch):
                        continue
                    for r in item.records:
                        at = r.offset if where is None else where
                        if (r.api_key == FEATURE_LEVEL_RECORD and r.data is not None
                                and r.data.get("name") == METADATA_VERSION and (found is None or at >= found[0])):
                            found = (at, int(r.data["featureLevel"]), path)
        except OSError:
            continue
    if found is None:
        return VariantChoice(VARIANTS[-1], f"no metadata.version record in these files: variant {VARIANTS[-1]}, "
                                           "the newest; --variant picks another")
    offset, level, path = found
    variant = variant_for_level(level)
    return VariantChoice(variant, f"metadata.version {metadata_version_name(level)} (level {level}) at offset "
                                  f"{offset} in {path}: variant {variant}; --variant picks another")


def java_file_string(path: str) -> str:
    """`java.io.File(path).toString()`: repeated separators collapsed, a trailing one dropped."""
    text = re.sub(r"/+", "/", path)
    if len(text) > 1 and text.endswith("/"):
        text = text[:-1]
    return text


def java_string_hash(text: str) -> int:
    """`String.hashCode()` over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be", errors="surrogatepass")
    for i in range(0, len(data), 2):
        h = (31 * h + (data[i] << 8 | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h & 0x80000000 else h


def java_hashmap_order(keys: list[str]) -> list[str]:
    """The iteration order of a `java.util.HashMap<String, _>` filled with `keys` in this order (default
    capacity 16, load factor 0.75): by bucket, and by insertion inside a bucket."""
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    return [k for _, _, k in sorted((bucket(k), i, k) for i, k in enumerate(keys))]


def _java_parse_long(text: str) -> int | None:
    return int(text) if re.fullmatch(r"[+-]?[0-9]+", text) else None


class KafkaWouldFail(Exception):
    """The real tool stops here with an exception (its message is what it prints on stderr)."""


@dataclass(slots=True)
class DumpLogRenderer:
    """One run of the tool over several files: `render(path)` per file, then `finish()` for the stderr report.
    Yields lines, or with `text_chunks` pieces of text of one or more whole lines (no newline at the end).

    `stderr` collects what the tool prints on stderr (in order, except that the non-consecutive-offsets report
    is added by `finish()`, as the tool prints it after all files). `problems` collects what the decoder
    reported. When the real tool would die (a batch length under 14 with bytes left, an undecodable control
    record, a name it cannot parse), rendering stops there: the line being printed is yielded as far as the
    tool printed it, `failed` holds the reason and later files print nothing, as with the tool. Unlike the tool,
    it prints SCRAM credentials and password configs redacted unless `show_secrets` (`secrets`).
    """

    variant: str = "4.3"
    skip_record_metadata: bool = False
    show_secrets: bool = False
    cwd: str | None = None  # for the absolute paths of the stderr report; default os.getcwd()
    stderr: list[str] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    failed: str | None = None
    on_problem: Callable[[Problem], None] | None = None
    text_chunks: bool = False  # items may be several lines joined by newlines (fewer, longer writes for a CLI)
    _gaps: dict[str, list[tuple[int, int]]] = field(default_factory=dict)

    def __post_init__(self) -> None:
        _check_variant(self.variant)

    @property
    def _bare_prefix(self) -> str:
        """What comes before `payload:` when the record metadata is skipped."""
        return "| " if self.variant == "4.3" else " "

    # ---- whole files -------------------------------------------------------------------------------------

    def render_files(self, paths: Iterable[str]) -> Iterator[str]:
        for path in paths:
            yield from self.render(path)
            if self.failed:
                return
        self.finish()

    def render(self, path: str) -> Iterator[str]:
        """The stdout lines for one file, streaming batch by batch."""
        if self.failed:
            return
        shown = java_file_string(path)
        yield f"Dumping {shown}"
        name = shown.rsplit("/", 1)[-1]
        dot = name.rfind(".")
        if dot < 0:
            self._fail(f"begin -1, end {len(name)}, length {len(name)}")
            return
        suffix = name[dot:]
        if suffix in (".index", ".timeindex", ".snapshot", ".txnindex"):
            raise ValueError(f"{path}: kafka-dump-log dumps {suffix} files with other code; only .log and "
                             ".checkpoint files are rendered here")
        if suffix not in (".log", ".checkpoint"):
            self.stderr.append(f"Ignoring unknown file {shown}")
            return
        try:
            yield from self._dump_log(path, shown, name)
        except KafkaWouldFail as exc:
            self._fail(str(exc))

    def finish(self) -> list[str]:
        """Add the non-consecutive-offsets report to `stderr` (as the tool prints it after all files); return it.

        The tool keeps the files in a hash map: for 4.3 (java.util.HashMap) its order is reproduced; for the
        Scala variants (scala.collection.mutable.HashMap) the files come in the order first seen.
        """
        lines: list[str] = []
        paths = list(self._gaps)
        if self.variant == "4.3":
            paths = java_hashmap_order(paths)
        for abs_path in paths:
            pairs = self._gaps[abs_path]
            lines.append(f"Non-consecutive offsets in {abs_path}")
            if self.variant == "4.3":
                ordered: dict[int, int] = {}
                for first, second in pairs:
                    ordered[first] = second  # a TreeMap keyed by the earlier offset: a repeat replaces
                items = sorted(ordered.items())
            else:
                items = list(reversed(pairs))  # a Scala list built by prepending
            lines += [f"  {first} is followed by {second}" for first, second in items]
        self._gaps.clear()
        self.stderr += lines
        return lines

    def _fail(self, message_text: str) -> None:
        self.failed = message_text
        self.stderr.append(f'Exception in thread "main" {message_text}')

    # ---- one .log / .checkpoint ---------------------------------------------------------------------------

    def _header_line(self, name: str) -> str:
        if name.endswith(".log"):
            start = _java_parse_long(name.split(".")[0])
            if start is None:
                raise KafkaWouldFail(f'java.lang.NumberFormatException: For input string: "{name.split(".")[0]}"')
            return f"Log starting offset: {start}"
        if name == BOOTSTRAP_FILENAME:
            return "KRaft bootstrap snapshot"
        if len(name) < 31:
            raise KafkaWouldFail(f"java.lang.StringIndexOutOfBoundsException: name {name} is too short")
        end, epoch = _java_parse_long(name[:20]), _java_parse_long(name[21:31])
        if end is None or epoch is None:
            raise KafkaWouldFail(f"java.lang.NumberFormatException: not a snapshot name: {name}")
        return f"Snapshot end offset: {end}, epoch: {epoch}"

    def _dump_log(self, path: str, shown: str, name: str) -> Iterator[str]:
        yield self._header_line(name)
        abs_path = shown if shown.startswith("/") else f"{self.cwd or os.getcwd()}/{shown}"
        try:
            size: int | None = os.path.getsize(path)
        except OSError:
            size = None  # the reader says why
        valid = 0
        last_offset = -1
        pending: list[Problem] = []  # the decoder reports a batch's problems before the batch
        items = batch_reader.read_file_for_dump_log(
            path, show_secrets=self.show_secrets, skip_record_metadata=self.skip_record_metadata,
            bare_prefix=self._bare_prefix, gap_from_minus_one=self.variant == "4.3", kafka_keys=KAFKA_43_API_KEYS)
        for item in items:
            if isinstance(item, native.DumpLogText):  # batches the compiled decoder printed as we would
                if item.first_offset is not None and item.last_offset is not None:
                    if item.first_offset != last_offset + 1 and (self.variant == "4.3" or last_offset != -1):
                        self._gaps.setdefault(abs_path, []).append((last_offset, item.first_offset))
                    if item.gaps:
                        self._gaps.setdefault(abs_path, []).extend(item.gaps)
                    last_offset = item.last_offset
                if self.text_chunks:
                    yield item.text
                else:
                    yield from item.text.split("\n")
                self._after_batch(pending)
                pending = []
                valid += item.size
                continue
            if isinstance(item, Problem):
                self._note(item)
                if self._tool_stops_reading(item, path, shown, size, items):
                    break
                pending.append(item)
                continue
            yield self.batch_line(item.header)
            for rec in item.records:
                if rec.offset != last_offset + 1 and (self.variant == "4.3" or last_offset != -1):
                    self._gaps.setdefault(abs_path, []).append((last_offset, rec.offset))
                last_offset = rec.offset
                yield from self._record_line(item, rec)
            self._after_batch(pending)
            pending = []
            valid += item.header.size
        if size is not None and size - valid > 0:
            yield f"Found {size - valid} invalid bytes at the end of {name}"

    def _note(self, problem: Problem) -> None:
        self.problems.append(problem)
        if self.on_problem is not None:
            self.on_problem(problem)

    @staticmethod
    def _after_batch(problems: list[Problem]) -> None:
        """Where the tool dies inside a batch it has printed: records it cannot frame, a codec it cannot read."""
        for problem in problems:
            if problem.kind in _FATAL_IN_BATCH or (
                problem.kind == ProblemKind.BAD_RECORD and "record skipped" in problem.message
            ):
                raise KafkaWouldFail(f"{problem.kind.value}: {problem.message}")

    def _tool_stops_reading(self, problem: Problem, path: str, shown: str, size: int | None,
                            rest: Iterator[Batch | Problem | native.DumpLogText]) -> bool:
        """Whether the tool stops at a problem found while framing the file, as its `FileLogInputStream` does:
        fewer than 17 bytes left, or a length that runs past the end of the file, end the file quietly (True; the
        "Found N invalid bytes" line follows); a length under 14 kills it, and so, here, does any other batch it
        cannot read (KafkaWouldFail). The rest of the file is still decoded for the problems it holds."""
        if problem.kind not in _FRAMING:
            return False
        for item in rest:  # the tool reads no further; the problems further on are still reported
            if isinstance(item, Problem):
                self._note(item)
        position = problem.position or 0
        raw = problem.raw or b""
        if problem.kind == ProblemKind.UNREADABLE_FILE:
            if not os.path.exists(path):
                raise KafkaWouldFail(f"java.nio.file.NoSuchFileException: {shown}")
        elif size is not None and size - position < batch_reader.HEADER_SIZE_UP_TO_MAGIC:
            return True
        elif len(raw) >= batch_reader.LOG_OVERHEAD:
            length = struct.unpack_from(">i", raw, 8)[0]
            if length < batch_reader.MIN_BATCH_LENGTH:
                raise KafkaWouldFail(
                    f"org.apache.kafka.common.errors.CorruptRecordException: Found record size {length} smaller "
                    f"than minimum record overhead ({batch_reader.MIN_BATCH_LENGTH}) in file {shown}.")
            if size is not None and position + batch_reader.LOG_OVERHEAD + length > size:
                return True
        raise KafkaWouldFail(f"{problem.kind.value}: {problem.message}")

    # ---- lines ----------------------------------------------------------------------------------------------

    @staticmethod
    def batch_line(h: BatchHeader) -> str:
        horizon = h.delete_horizon_ms
        return (
            f"baseOffset: {h.base_offset} lastOffset: {h.last_offset} count: {h.records_count} "
            f"baseSequence: {h.base_sequence} lastSequence: {h.last_sequence} producerId: {h.producer_id} "
            f"producerEpoch: {h.producer_epoch} partitionLeaderEpoch: {h.partition_leader_epoch} "
            f"isTransactional: {_jbool(h.is_transactional)} isControl: {_jbool(h.is_control)} "
            f"deleteHorizonMs: {'OptionalLong.empty' if horizon is None else f'OptionalLong[{horizon}]'} "
            f"position: {h.position} {h.timestamp_type}: {h.max_timestamp} size: {h.size} magic: {h.magic} "
            f"compresscodec: {h.codec_name} crc: {h.crc} isvalid: {_jbool(h.crc_ok)}"
        )

    def _record_line(self, b: Batch, rec: Record) -> Iterator[str]:
        h = b.header
        line = ""
        if not self.skip_record_metadata:
            seq = -1 if h.base_sequence < 0 else _increment_sequence(h.base_sequence, rec.offset - h.base_offset)
            keys = ",".join(k for k, _ in rec.headers)
            line = (
                f"| offset: {rec.offset} {h.timestamp_type}: {rec.timestamp} keySize: {_size(rec.key)} "
                f"valueSize: {_size(rec.value)} sequence: {seq} headerKeys: [{keys}]"
            )
            if h.is_control:
                try:
                    line += self.control_tail(rec)
                except KafkaWouldFail:
                    yield line
                    raise
        if not h.is_control:
            prefix = self._bare_prefix if self.skip_record_metadata else " "
            line += f"{prefix}payload: {payload_text(rec)}"
        yield line

    def control_tail(self, rec: Record) -> str:
        """What follows the record metadata for a record of a control batch."""
        key = rec.key
        if key is None:
            raise KafkaWouldFail("java.lang.NullPointerException (control record without a key)")
        if len(key) < 4:
            raise KafkaWouldFail(
                "org.apache.kafka.common.InvalidRecordException: Invalid value size found for end control record "
                f"key. Must have at least 4 bytes, but found only {len(key)}")
        key_version, type_id = struct.unpack_from(">hh", key)
        if key_version < 0:
            raise KafkaWouldFail(
                f"org.apache.kafka.common.InvalidRecordException: Invalid version found for control record: {key_version}."
                " May indicate data corruption")
        if type_id in (0, 1):
            value = rec.value or b""
            if len(value) < 6:
                raise KafkaWouldFail(f"end transaction marker value of {len(value)} bytes is too short")
            marker_version, epoch = struct.unpack_from(">hi", value)
            if marker_version < 0:
                raise KafkaWouldFail(f"Invalid version found for end transaction marker: {marker_version}.")
            return f" endTxnMarker: {CONTROL_TYPES[type_id]} coordinatorEpoch: {epoch}"
        if type_id == 2 and self.variant == "4.0":
            return " controlType: LEADER_CHANGE(2)"
        if type_id in _CONTROL_LABELS:
            if rec.data is None:
                raise KafkaWouldFail(f"control record {CONTROL_TYPES[type_id]} does not decode: {rec.error}")
            return _CONTROL_LABELS[type_id] + kafkajson.control_json(CONTROL_TYPES[type_id], rec.data)
        return f" controlType: UNKNOWN({type_id})"


def _jbool(value: bool) -> str:
    return "true" if value else "false"


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _increment_sequence(sequence: int, increment: int) -> int:
    if sequence > _INT_MAX - increment:
        return increment - (_INT_MAX - sequence) - 1
    return sequence + increment


def payload_text(rec: Record) -> str:
    """The text after `payload: ` for a data record: Kafka's JSON, or its `Error at …` line."""
    if (rec.data is not None and rec.type_name is not None and rec.version is not None
            and (rec.api_key is None or rec.api_key in KAFKA_43_API_KEYS)):
        return kafkajson.payload_json(rec.type_name, rec.version, rec.data)
    lenient = _decode_as_kafka_would(rec)
    if lenient is not None:
        return lenient
    return f"Error at {rec.offset}, skipping. {kafka_error_text(rec)}"


def _decode_as_kafka_would(rec: Record) -> str | None:
    """Kafka reads a version above the highest it knows with the layout of the versions it knows (its generated
    readers check `version >= n`, never an upper bound). Read such a value at our highest version and print it
    under its own version number, as Kafka does; None when that does not decode either."""
    if rec.value is None or rec.error is None or not rec.error.startswith("Can't read version"):
        return None
    try:
        frame, pos = batch_reader.read_uvarint(rec.value, 0)
        api_key, pos = batch_reader.read_uvarint(rec.value, pos)
        version, pos = batch_reader.read_uvarint(rec.value, pos)
        schema = schemas.metadata_schema(api_key)
        if frame != 1 or schema is None or api_key not in KAFKA_43_API_KEYS or version < schema.max_version:
            return None
        reframed = bytes([1]) + writer.uvarint(api_key) + writer.uvarint(schema.max_version) + rec.value[pos:]
        decoded = message.decode_metadata_value(reframed)
        return kafkajson.payload_json(decoded.type_name, version, decoded.data)
    except Exception:
        return None


def _read_uvarint_java(value: bytes, pos: int) -> tuple[int, int] | None:
    """ByteUtils.readUnsignedVarint: up to 5 bytes into a Java int; None where Java throws."""
    result = 0
    shift = 0
    while True:
        if pos >= len(value):
            return None
        b = value[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if not b & 0x80:
            break
        shift += 7
        if shift > 28:
            return None
    result &= 0xFFFFFFFF
    if result & 0x80000000:
        result -= 1 << 32
    return result, pos


def _to_short(v: int) -> int:
    return ((v & 0xFFFF) ^ 0x8000) - 0x8000


def kafka_error_text(rec: Record) -> str:
    """The exception message Kafka's MetadataRecordSerde gives for this record value (AbstractApiMessageSerde).

    The frame checks are replayed exactly; for a body that does not decode, the message codec's reason decides
    between Kafka's two texts (garbage after the body, or a body that does not read).
    """
    value = rec.value or b""
    pos = 0
    fields: list[int] = []
    for entity in ("frame version", "type", "version"):
        got = _read_uvarint_java(value, pos)
        if got is None:
            return f"Error while reading {entity}"
        raw, pos = got
        if raw > 0x7FFF:
            return f"Value for {entity} was too large."
        fields.append(_to_short(raw))
        if entity == "frame version":
            if fields[0] == 0:
                return ("Could not deserialize metadata record with frame version 0. Note that upgrades from the "
                        "preview release of KRaft in 2.8 to newer versions are not supported.")
            if fields[0] != 1:
                return (f"Could not deserialize metadata record due to unknown frame version {fields[0]}"
                        "(only frame version 1 is supported)")
    api_key = fields[1]
    if api_key not in KAFKA_43_API_KEYS:
        return f"org.apache.kafka.common.errors.UnsupportedVersionException: Unknown metadata id {api_key}"
    if rec.error and (m := re.match(r"Found (\d+) byte\(s\) of garbage after", rec.error)):
        return f"Found {m.group(1)} byte(s) of garbage after {api_key}"
    return f"Failed to deserialize record with type {api_key}"


# ---- render_file ----------------------------------------------------------------------------------------------


def render_file(
    path: str,
    variant: str = "4.3",
    skip_record_metadata: bool = False,
    problems: Callable[[Problem], None] | None = None,
    show_secrets: bool = False,
) -> Iterator[str]:
    """The stdout lines of `kafka-dump-log --cluster-metadata-decoder --files path` for one file (secrets redacted
    unless `show_secrets`).

    `problems`, when given, is called with each decoder problem as it is found. For the stderr lines
    (non-consecutive offsets, unknown files, a failure) use `DumpLogRenderer`.
    """
    renderer = DumpLogRenderer(variant=variant, skip_record_metadata=skip_record_metadata, on_problem=problems,
                               show_secrets=show_secrets)
    yield from renderer.render(path)


def render_files(
    paths: Iterable[str], variant: str = "4.3", skip_record_metadata: bool = False, stderr: list[str] | None = None,
    show_secrets: bool = False,
) -> Iterator[str]:
    """`--files a,b,c`: stdout lines of the whole run; stderr lines go to `stderr` when given."""
    renderer = DumpLogRenderer(variant=variant, skip_record_metadata=skip_record_metadata, show_secrets=show_secrets)
    if stderr is not None:
        renderer.stderr = stderr
    yield from renderer.render_files(paths)


# ---- reading the text back ------------------------------------------------------------------------------------


@dataclass(slots=True)
class Section:
    """One `Dumping <path>` section of a text: the file it printed and what its header line said."""

    path: str
    line: int | None = None  # where its `Dumping` line is in the text (None when derived from a batch's source)
    kind: str | None = None  # "segment", "snapshot", "bootstrap" or None (header not seen)
    log_start_offset: int | None = None
    snapshot_end_offset: int | None = None
    snapshot_epoch: int | None = None
    invalid_tail_bytes: int | None = None
    batches: int = 0
    end_position: int = 0  # where the bytes after the last batch read so far begin in the dumped file
    next_offset: int | None = None  # the offset after the last batch read so far

    @property
    def name(self) -> str:
        return self.path.rstrip("/").rsplit("/", 1)[-1]

    @property
    def is_bootstrap(self) -> bool:
        return self.facts().kind == "bootstrap"

    @property
    def is_snapshot_like(self) -> bool:
        """A snapshot or `bootstrap.checkpoint`: its batches must run from a SnapshotHeader to a SnapshotFooter."""
        return self.facts().kind in ("snapshot", "bootstrap")

    def facts(self) -> Section:
        """This section when its header line was read, else what the tool would derive from the file's name."""
        return self if self.kind is not None else Section.from_path(self.path)

    @classmethod
    def from_path(cls, path: str) -> Section:
        """The facts kafka-dump-log's header line would give, derived from the name the way the tool does."""
        section = cls(path)
        name = section.name
        if name == BOOTSTRAP_FILENAME:
            section.kind = "bootstrap"
        elif name.endswith(".checkpoint"):
            end, epoch = _java_parse_long(name[:20]), _java_parse_long(name[21:31])
            if end is not None and epoch is not None:
                section.kind, section.snapshot_end_offset, section.snapshot_epoch = "snapshot", end, epoch
        elif name.endswith(".log"):
            start = _java_parse_long(name.split(".")[0])
            if start is not None:
                section.kind, section.log_start_offset = "segment", start
        return section


DumpSection = Section


def parse_text_sections(stream_or_lines: IO[str] | Iterable[str], source: str,
                        show_secrets: bool = False) -> Iterator[Section | Batch | Problem]:
    """`parse_text`'s items with each `Section` before the first item that belongs to it, so that a caller can
    route every file's batches and problems (log, snapshot with its end offset and epoch, bootstrap). A section's
    facts from its header line may arrive after its marker: read them when the section is over."""
    reader = DumpTextReader(source, show_secrets)
    seen = 0
    for item in reader.read(stream_or_lines):
        while seen < len(reader.sections):
            yield reader.sections[seen]
            seen += 1
        yield item


_BATCH_RE = re.compile(
    r"baseOffset: (-?\d+) lastOffset: (-?\d+) count: (-?\d+|null) baseSequence: (-?\d+) lastSequence: (-?\d+) "
    r"producerId: (-?\d+) producerEpoch: (-?\d+) partitionLeaderEpoch: (-?\d+) isTransactional: (true|false) "
    r"isControl: (true|false) deleteHorizonMs: (OptionalLong\.empty|OptionalLong\[-?\d+\]) position: (\d+) "
    r"(CreateTime|LogAppendTime|NoTimestampType): (-?\d+) size: (\d+) magic: (-?\d+) "
    r"compresscodec: (\w+) crc: (\d+) isvalid: (true|false)$"
)
_RECORD_RE = re.compile(
    r"\| offset: (-?\d+) (CreateTime|LogAppendTime|NoTimestampType): (-?\d+) keySize: (-?\d+) "
    r"valueSize: (-?\d+) sequence: (-?\d+) headerKeys: \[([^\]]*)\](.*)$"
)
_ERROR_RE = re.compile(r"Error at (-?\d+), skipping\. ?(.*)$", re.S)
_TXN_RE = re.compile(r" endTxnMarker: (COMMIT|ABORT) coordinatorEpoch: (-?\d+)$")
_CONTROL_TYPE_RE = re.compile(r" controlType: (\w+)\((-?\d+)\)$")
_CONTROL_JSON_RE = re.compile(r" (LeaderChange:|SnapshotHeader|SnapshotFooter|KRaftVersion|KRaftVoters) (\{.*\})$")
_CONTROL_LABEL_TYPES = {"LeaderChange:": 2, "SnapshotHeader": 3, "SnapshotFooter": 4, "KRaftVersion": 5,
                        "KRaftVoters": 6}
_TRAILING_RE = re.compile(r"Found (\d+) invalid bytes at the end of (.*)$")
_SNAPSHOT_RE = re.compile(r"Snapshot end offset: (-?\d+), epoch: (-?\d+)$")
# Lines of stderr a user may have captured with 2>&1: known, carry no records.
_STDERR_RE = re.compile(
    r"(Non-consecutive offsets in .*|  -?\d+ is followed by -?\d+|Ignoring unknown file .*|SLF4J: .*)$"
)


@dataclass(slots=True)
class _OpenBatch:
    line: int
    groups: tuple[str, ...]
    records: list[Record] = field(default_factory=list)
    lines: list[int] = field(default_factory=list)
    control_data_lines: int = 0


class DumpTextReader:
    """Reads dump-log text into `Batch`es and `Problem`s; `sections` lists the `Dumping` sections seen so far.

    Each `Batch.source` is the path its section dumped. Values are re-encoded from the printed JSON with the
    message codec (the text does not hold the bytes); keys of control records are rebuilt from their type.
    With `--skip-record-metadata` text, record offsets are base offset + index, timestamps the batch's
    timestamp, and control records (printed as empty lines) have no data and `control_type` -1 (`UNKNOWN`), except
    what a snapshot's place says: its first record is its SnapshotHeader, its last its SnapshotFooter (so the
    snapshot loads as from the binary file); each section's others are one `untyped_record` notice.
    A section dumping a snapshot or `bootstrap.checkpoint` gets `snapshot_no_header` before its first batch and
    `snapshot_no_footer` when it ends (`batch.SnapshotStructure`), while it is still `section`. Secrets in the
    text (SCRAM credentials, password configs) come redacted unless `show_secrets` (`secrets`).
    """

    def __init__(self, source: str, show_secrets: bool = False) -> None:
        self.source = source
        self.show_secrets = show_secrets
        self.sections: list[Section] = []
        self._batch: _OpenBatch | None = None
        self._structure: SnapshotStructure | None = None  # the current section's, when it is a snapshot
        self._last_batch_line: int | None = None
        self._held: Batch | None = None  # a snapshot section's control batch that may be its last (the footer's)
        self._untyped: list[int] = []  # offsets of the current section's control records of unknown type

    @property
    def section(self) -> Section | None:
        return self.sections[-1] if self.sections else None

    def _bad(self, lineno: int, text: str, why: str) -> Problem:
        where = f" (in the section dumping {self.section.path})" if self.section else ""
        shown = text if len(text) <= 200 else text[:200] + "…"
        return Problem(ProblemKind.BAD_TEXT_LINE, f"{why}{where}: {shown!r}", file=self.source, line=lineno)

    def _found(self, kind: ProblemKind, lineno: int, why: str, offset: int | None = None) -> Problem:
        """A finding about the dumped file of the current section, at the open batch (its byte position)."""
        position = int(self._batch.groups[11]) if self._batch is not None else None
        return Problem(kind, f"{why} (read from the dump-log text {self.source})", file=self._section_path(),
                       position=position, offset=offset, line=lineno)

    def read(self, lines: Iterable[str]) -> Iterator[Batch | Problem]:
        items = self._read(lines)
        yield from items if self.show_secrets else secrets.redact_items(items)

    def _read(self, lines: Iterable[str]) -> Iterator[Batch | Problem]:
        lineno = 0
        for lineno, raw in enumerate(lines, 1):
            text = raw.rstrip("\r\n")
            yield from self._line(lineno, text)
        yield from self._close_batch(lineno + 1)
        yield from self._close_section(lineno + 1)

    def _line(self, lineno: int, text: str) -> Iterator[Batch | Problem]:
        if text.startswith("Dumping "):
            yield from self._close_batch(lineno)
            yield from self._close_section(lineno)
            self.sections.append(Section(path=text[len("Dumping "):], line=lineno))
            return
        if text.startswith("baseOffset: "):
            yield from self._close_batch(lineno)
            m = _BATCH_RE.fullmatch(text)
            if m is None or self.section is None:
                yield self._bad(lineno, text, "not a batch line" if m is None else "batch line before any 'Dumping'")
                return
            self._batch = _OpenBatch(lineno, m.groups())
            return
        if self._batch is not None and (text.startswith("|") or text == "" or text.startswith(" payload: ")):
            yield from self._record(lineno, text)
            return
        if _STDERR_RE.fullmatch(text):
            return
        section = self.section
        if section is not None and section.batches == 0 and section.kind is None and self._batch is None:
            if text.startswith("Log starting offset: ") and (n := _java_parse_long(text[21:])) is not None:
                section.kind, section.log_start_offset = "segment", n
                return
            if text == "KRaft bootstrap snapshot":
                section.kind = "bootstrap"
                return
            if m := _SNAPSHOT_RE.fullmatch(text):
                section.kind = "snapshot"
                section.snapshot_end_offset, section.snapshot_epoch = int(m.group(1)), int(m.group(2))
                return
        if section is not None and (m := _TRAILING_RE.fullmatch(text)):
            yield from self._close_batch(lineno)
            section.invalid_tail_bytes = int(m.group(1))
            offset = section.next_offset if section.batches else first_offset_from_name(section.path)
            yield Problem(ProblemKind.TRUNCATED_TAIL,
                          f"kafka-dump-log found {m.group(1)} invalid bytes at the end of {m.group(2)}, after the last "
                          f"batch it printed (read from the dump-log text {self.source})",
                          file=section.path, position=section.end_position, offset=offset, line=lineno)
            return
        yield self._bad(lineno, text, "not a dump-log line")  # an open batch stays open: its records may follow

    # ---- records ---------------------------------------------------------------------------------------------

    def _record(self, lineno: int, text: str) -> Iterator[Problem]:
        ob = self._batch
        assert ob is not None
        g = ob.groups
        base, is_control, max_ts = int(g[0]), g[9] == "true", int(g[13])
        index = len(ob.records)
        if text.startswith("| offset: "):
            m = _RECORD_RE.fullmatch(text)
            if m is None:
                yield self._bad(lineno, text, "not a record line")
                return
            offset, ts, key_size = int(m.group(1)), int(m.group(3)), int(m.group(4))
            header_keys = m.group(7)
            headers = tuple((k, None) for k in header_keys.split(",")) if header_keys else ()
            tail = m.group(8)
        else:  # --skip-record-metadata: "| payload: …" (4.3), " payload: …" (≤4.2), "" (control records)
            offset, ts, key_size, headers = base + index, max_ts, None, ()
            tail = text[1:] if text.startswith("| payload: ") else text
            if text.startswith("|") and not text.startswith("| payload: "):
                yield self._bad(lineno, text, "not a record line")
                return
        rec = Record(offset=offset, timestamp=ts, key=None, value=None, headers=headers)
        if is_control:
            problem = self._control(rec, tail, key_size, text, lineno)
        else:
            problem = self._data(rec, tail, text, lineno)
        if problem is not None:
            yield problem
        ob.records.append(rec)
        ob.lines.append(lineno)

    def _data(self, rec: Record, tail: str, text: str, lineno: int) -> Problem | None:
        if not tail.startswith(" payload: "):
            return self._bad(lineno, text, "a data record line without a payload")
        payload = tail[len(" payload: "):]
        if m := _ERROR_RE.fullmatch(payload):
            rec.error = m.group(2)
            return self._found(ProblemKind.BAD_RECORD, lineno,
                               f"kafka-dump-log could not decode the value: {m.group(2)}", rec.offset)
        try:
            type_name, version, data = kafkajson.parse_payload_json(payload)
        except kafkajson.KafkaJsonError as exc:
            if str(exc).startswith("unknown version"):
                rec.error = f"{exc}: kept as printed, not decoded"
                return self._found(ProblemKind.UNKNOWN_VERSION, lineno,
                                   f"{exc} (Kafka printed it; we have no schema)", rec.offset)
            rec.error = f"payload does not parse: {exc}"
            return self._bad(lineno, text, f"payload does not parse ({exc})")
        except Exception as exc:  # a payload that is not Kafka's JSON
            rec.error = f"payload does not parse: {exc}"
            return self._bad(lineno, text, f"payload does not parse ({exc})")
        schema = schemas.schema_for_type_name(type_name)
        rec.type_name, rec.version, rec.data = type_name, version, data
        rec.api_key = schema.api_key if schema is not None else None
        if rec.api_key is None:
            rec.error = f"unknown record type {type_name}"
            return self._bad(lineno, text, f"unknown record type {type_name!r}")
        try:
            rec.value = message.encode_metadata_value(rec.api_key, version, data)
        except message.MessageError as exc:
            return self._found(exc.kind, lineno, f"the printed record cannot be re-encoded: {exc.message}",
                               rec.offset)
        return None

    def _section_path(self) -> str:
        return self.section.path if self.section else self.source

    def _control(self, rec: Record, tail: str, key_size: int | None, text: str, lineno: int) -> Problem | None:
        if tail == "" and key_size is None:  # skip-record-metadata prints nothing for a control record
            rec.control_type, rec.type_name = -1, "UNKNOWN"
            return None
        if m := _TXN_RE.fullmatch(tail):
            type_id = _CONTROL_BY_NAME[m.group(1)]
            rec.data = {"version": 0, "coordinatorEpoch": int(m.group(2))}
            rec.version = 0
            rec.value = struct.pack(">hi", 0, int(m.group(2)))
        elif m := _CONTROL_TYPE_RE.fullmatch(tail):
            type_id = int(m.group(2))
        elif m := _CONTROL_JSON_RE.fullmatch(tail):
            type_id = _CONTROL_LABEL_TYPES[m.group(1)]
            try:
                data = kafkajson.parse_control_json(CONTROL_TYPES[type_id], m.group(2))
            except ValueError as exc:
                return self._bad(lineno, text, f"control record JSON does not parse ({exc})")
            rec.data = data
            rec.version = data.get("version")
            try:
                rec.value = message.encode_control_value(type_id, data)
            except (message.MessageError, TypeError, ValueError) as exc:
                rec.error = f"cannot re-encode: {exc}"
        else:
            return self._bad(lineno, text, "not a control record line")
        rec.control_type = type_id
        rec.type_name = CONTROL_TYPES.get(type_id, "UNKNOWN")
        rec.key = struct.pack(">hh", 0, type_id)
        return None

    def _close_batch(self, lineno: int) -> Iterator[Batch | Problem]:
        ob = self._batch
        if ob is None:
            return
        yield from self._release(last=False)
        self._batch = None
        section = self.section
        assert section is not None
        g = ob.groups
        horizon = None if g[10] == "OptionalLong.empty" else int(g[10][len("OptionalLong["):-1])
        codec = CODEC_NAMES.index(g[16]) if g[16] in CODEC_NAMES else 7
        attributes = codec | (0x08 if g[12] == "LogAppendTime" else 0) | (0x10 if g[8] == "true" else 0)
        attributes |= (0x20 if g[9] == "true" else 0) | (0x40 if horizon is not None else 0)
        base, last, max_ts = int(g[0]), int(g[1]), int(g[13])
        first_ts = ob.records[0].timestamp if ob.records and g[12] == "CreateTime" else max_ts
        count = -1 if g[2] == "null" else int(g[2])
        header = BatchHeader(
            position=int(g[11]), base_offset=base, batch_length=int(g[14]) - 12, partition_leader_epoch=int(g[7]),
            magic=int(g[15]), crc=int(g[17]), attributes=attributes, last_offset_delta=last - base,
            base_timestamp=horizon if horizon is not None else first_ts, max_timestamp=max_ts,
            producer_id=int(g[5]), producer_epoch=int(g[6]), base_sequence=int(g[3]), records_count=count,
            crc_ok=g[18] == "true",
        )
        for rec in ob.records:
            rec.timestamp_delta = rec.timestamp - header.base_timestamp
        if ob.records and len(ob.records) != count:
            yield Problem(ProblemKind.RECORD_COUNT_MISMATCH,
                          f"the batch says count {count} but {len(ob.records)} record lines follow (read from the "
                          f"dump-log text {self.source})",
                          file=section.path, position=header.position, offset=base, line=ob.line)
        batch = Batch(header=header, records=ob.records, source=section.path)
        snapshot_like = section.is_snapshot_like
        if section.batches == 0 and snapshot_like:
            self._structure = SnapshotStructure(section.path, unprinted_ok=True)
            if header.is_control and batch.records:
                _type_unprinted(batch.records[0], SNAPSHOT_HEADER_TYPE)  # a snapshot's first record is its header
        if self._structure is not None:
            problem = self._structure.see(batch)
            if problem is not None:
                yield dataclasses.replace(problem, line=ob.line)
        section.batches += 1
        section.end_position = header.position + header.size
        section.next_offset = header.last_offset + 1
        self._last_batch_line = ob.line
        if snapshot_like and header.is_control and batch.records and batch.records[-1].control_type == -1:
            self._held = batch  # the footer's batch if the section ends after it: known at the next line
            return
        yield self._counted(batch)

    def _counted(self, batch: Batch) -> Batch:
        self._untyped += [r.offset for r in batch.records if r.control_type == -1]
        return batch

    def _release(self, last: bool) -> Iterator[Batch]:
        """The held control batch of a snapshot section; when the section ends after it (`last`), its last record
        is the SnapshotFooter, which a snapshot always ends with."""
        held, self._held = self._held, None
        if held is not None:
            if last:
                _type_unprinted(held.records[-1], SNAPSHOT_FOOTER_TYPE)
            yield self._counted(held)

    def _close_section(self, lineno: int) -> Iterator[Batch | Problem]:
        """The last batch held back, the notice about records the text does not type, and the structure problems of
        a snapshot section that ends here (a section with no batch included)."""
        section = self.section
        structure = self._structure
        self._structure = None
        yield from self._release(last=True)
        untyped, self._untyped = self._untyped, []
        if section is None:
            return
        if untyped:
            yield Problem(ProblemKind.UNTYPED_RECORD,
                          f"{len(untyped)} control record(s) at offsets {_offset_list(untyped)} are empty lines in "
                          f"this text (kafka-dump-log --skip-record-metadata prints no control record): their types "
                          f"are not known; they do not change ACLs (read from the dump-log text {self.source})",
                          file=section.path, offset=untyped[0], line=section.line)
        if structure is None:
            if section.batches or not section.is_snapshot_like:
                return
            structure = SnapshotStructure(section.path, unprinted_ok=True)
        for problem in structure.finish():
            line = section.line if structure.last is None else self._last_batch_line
            yield dataclasses.replace(problem, line=line)


def _type_unprinted(record: Record, control_type: int) -> None:
    """Give a control record printed as an empty line the type its place in a snapshot says it has."""
    if record.control_type == -1 and record.error is None:
        record.control_type, record.type_name = control_type, CONTROL_TYPES[control_type]
        record.key = struct.pack(">hh", 0, control_type)


def _offset_list(offsets: list[int], shown: int = 5) -> str:
    head = ", ".join(str(o) for o in offsets[:shown])
    return head + (f" and {len(offsets) - shown} more" if len(offsets) > shown else "")


def parse_text(stream_or_lines: IO[str] | Iterable[str], source: str,
               show_secrets: bool = False) -> Iterator[Batch | Problem]:
    """Read `kafka-dump-log --cluster-metadata-decoder` text back into batches and problems, in text order.

    `source` names the text (for problems). Each batch's `source` is the path its `Dumping` line names; for the
    section facts (snapshot end offset and epoch, log start offset) use `DumpTextReader(...).sections`.
    Lines that do not parse become `BAD_TEXT_LINE` problems (`file` the text, `line` the line number). Every
    problem read from the text has its `line`; findings about a dumped file name that file, the batch's byte
    position in it and the offset when the text gives them.
    """
    yield from DumpTextReader(source, show_secrets).read(stream_or_lines)


# ---- inspect --output jsonl -------------------------------------------------------------------------------------


def _jsonable(value: Any) -> Any:
    if isinstance(value, bytes):
        return base64.b64encode(value).decode()
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    return value


def record_json_text(batch: Batch, record: Record) -> str:
    """One line of `inspect --output jsonl`: the batch facts, then the record as Kafka prints it.

    `type`, `version` and `data` are what kafka-dump-log prints, and `data` is Kafka's JSON text itself, embedded
    as it is (so a float64 reads `1.0E7`, as Kafka writes it). A record with tagged fields its schema does not know
    adds `unknownTaggedFields`: `{"<tag>": "<hex bytes>", ..., "<path of a nested struct>": {"<tag>": "<hex>"}}`
    (Kafka never prints them). A record that did not decode has `data: null` and `error`.
    """
    h = batch.header
    fields: list[tuple[str, str]] = [(k, json.dumps(v)) for k, v in (
        ("source", batch.source), ("position", h.position), ("base_offset", h.base_offset),
        ("last_offset", h.last_offset), ("epoch", h.partition_leader_epoch), ("append_time", batch.append_time),
        ("codec", h.codec_name), ("crc_ok", h.crc_ok), ("is_control", h.is_control), ("offset", record.offset),
        ("timestamp", record.timestamp))]
    data_text = json.dumps(_jsonable(record.data))
    if record.is_control:
        control = CONTROL_TYPES.get(record.control_type, "UNKNOWN") if record.control_type is not None else "UNKNOWN"
        fields.append(("control_type", json.dumps(control)))
        if record.data is not None and record.control_type in _CONTROL_LABELS:
            data_text = kafkajson.control_json(control, record.data)
    elif record.data is not None and record.type_name is not None and record.version is not None:
        schema = schemas.schema_for_type_name(record.type_name)
        if schema is not None:
            data_text = kafkajson.data_json(schema, record.version, record.data)
    fields += [("type", json.dumps(record.type_name)), ("version", json.dumps(record.version)), ("data", data_text)]
    unknown = message.unknown_tags_by_path(record.data, record.unknown_tags)
    if unknown:
        fields.append(("unknownTaggedFields", json.dumps(unknown_tags_json(unknown))))
    if record.error is not None:
        fields.append(("error", json.dumps(record.error)))
    return "{" + ", ".join(f"{json.dumps(k)}: {v}" for k, v in fields) + "}"


def unknown_tags_json(unknown: dict[str, dict[int, bytes]]) -> dict[str, Any]:
    """`message.unknown_tags_by_path` as JSON: top-level tags as `"<tag>": "<hex>"`, nested structs' under their path."""
    out: dict[str, Any] = {}
    for path, tags in unknown.items():
        as_hex = {str(tag): raw.hex() for tag, raw in sorted(tags.items())}
        if path:
            out[path] = as_hex
        else:
            out.update(as_hex)
    return out


def record_json(batch: Batch, record: Record) -> dict[str, Any]:
    """`record_json_text` as a dict (Kafka's number formatting is lost to Python's in `data`)."""
    obj: dict[str, Any] = json.loads(record_json_text(batch, record))
    return obj


def problem_json(problem: Problem, include_raw: bool = True) -> dict[str, Any]:
    """A problem as a JSON object for `inspect --output jsonl`; `line` only for what was read from dump-log text."""
    out: dict[str, Any] = {
        "problem": problem.kind.value,
        "message": problem.message,
        "file": problem.file,
        "position": problem.position,
        "offset": problem.offset,
    }
    if problem.line is not None:
        out["line"] = problem.line
    if include_raw and problem.raw is not None:
        out["raw"] = base64.b64encode(problem.raw).decode()
    return out
