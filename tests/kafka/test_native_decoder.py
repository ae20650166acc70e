"""The compiled decoder (`native/`, through `replay.kafka.native`) against the pure-Python reference: every sample
file, the writer's round trips, the bad inputs of the decoder tests and a seeded fuzzed corpus (bit flips,
truncations, inflated lengths and counts, garbage, broken values, every codec) decode to identical batches,
records and problems (kind, message, file, position, offset, raw), also with `records_for`, without value
decoding, as snapshots and in strict mode; the payload JSON and content hash the extension computes for the ingest's
rows are those of the ingest's Python functions, and the ingest's rows made by the extension directly (Arrow
buffers, `batch.read_rows`) are, as a set, the rows the ingest makes of the reference's batches.

`make test` builds the extension first. Where it is not built these tests fail and say how to build it, except on
a machine without cargo, where they are skipped (the project then runs on the pure-Python decoder alone)."""

from __future__ import annotations

import contextlib
import glob
import io
import itertools
import os
import random
import struct
import tempfile
from collections.abc import Iterator
from typing import Any

import pytest

from replay.kafka import batch as batch_module
from replay.kafka import codecs, dumplog, native, writer
from replay.kafka.acl import AclBinding
from replay.kafka.batch import DecodeError
from replay.kafka.message import UNKNOWN_TAGS_KEY
from replay.kafka.model import Batch, Problem
from replay.kafka.replayer import NEEDED_RECORDS
from replay.kafka.schemas import CONTROL_SCHEMAS, METADATA_SCHEMAS, Field, Struct, uuid_text
from replay.kafka.secrets import MAY_HOLD_SECRETS
from tests.compiled_decoder import require_compiled_decoder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
SEGMENT = "00000000000000000042.log"
SNAPSHOT = "00000000000000000010-0000000002.checkpoint"


@pytest.fixture(autouse=True)
def _needs_extension() -> None:
    require_compiled_decoder()


@contextlib.contextmanager
def _pure(on: bool) -> Iterator[None]:
    old = os.environ.get(native.PURE_PYTHON_ENV)
    os.environ[native.PURE_PYTHON_ENV] = "1" if on else "0"
    native.refresh()
    try:
        yield
    finally:
        if old is None:
            del os.environ[native.PURE_PYTHON_ENV]
        else:
            os.environ[native.PURE_PYTHON_ENV] = old
        native.refresh()


def _items(data: bytes, source: str, pure: bool, **options: Any) -> list[Batch | Problem] | DecodeError:
    with _pure(pure):
        try:
            return list(batch_module.read_batches(io.BytesIO(data), source, **options))
        except DecodeError as e:
            return e


def _same(a: object, b: object) -> bool:
    return a == b or repr(a) == repr(b)  # repr: NaN floats inside record data compare unequal to themselves


def assert_same(data: bytes, source: str = SEGMENT, **options: Any) -> list[Batch | Problem]:
    """Decode `data` both ways; the items must be identical."""
    ref = _items(data, source, True, **options)
    got = _items(data, source, False, **options)
    if isinstance(ref, DecodeError) or isinstance(got, DecodeError):
        assert isinstance(ref, DecodeError) and isinstance(got, DecodeError), (ref, got)
        assert _same(ref.problem, got.problem)
        return []
    if not _same(ref, got):
        for i, (x, y) in enumerate(zip(ref, got, strict=False)):
            assert _same(x, y), f"item {i} of {len(ref)} differs (options {options}):\npython {x!r}\nnative {y!r}"
        assert len(ref) == len(got), f"python gives {len(ref)} items, native {len(got)}"
    return ref


def assert_same_extras(items: list[Batch | Problem]) -> None:
    """`native.record_extras` against the ingest's `_payload_json` and `record_hash`: equal where given, and given
    for every record with a decoded value (transaction markers and the records that may hold a secret aside) and
    an int64 offset."""
    from replay.spark.ingest_rows import _payload_json, record_hash

    with _pure(False):
        for batch in (i for i in items if isinstance(i, Batch)):
            extras = native.record_extras(batch.records)
            assert extras is not None and len(extras) == len(batch.records)
            for rec, (payload, digest) in zip(batch.records, extras, strict=True):
                if rec.data is not None and rec.control_type not in (0, 1) and rec.api_key not in MAY_HOLD_SECRETS:
                    assert payload is not None, rec
                if rec.api_key in MAY_HOLD_SECRETS and not rec.is_control:  # rendered from the data, by Python
                    assert payload is None, rec
                if payload is not None:
                    assert payload == _payload_json(rec), rec
                if -(2**63) <= rec.offset < 2**63:
                    assert digest == record_hash(rec.offset, rec.key, rec.value), rec
                else:
                    assert digest is None


def _kind_of(source: str) -> str:
    if source.endswith("bootstrap.checkpoint"):
        return "bootstrap"
    return "snapshot" if source.endswith(".checkpoint") else "segment"


def ingest_rows(data: bytes, source: str, pure: bool, show_secrets: bool = False) -> tuple[list[Any], int]:
    """The ingest's decoded rows of `data` (`ingest_decode.decode_rows` into Arrow batches, as an executor makes
    them), sorted, and how many of them the extension made as row chunks."""
    import pyarrow as pa

    from replay.spark.ingest_decode import PlannedFile, _emit, decode_rows
    from replay.spark.ingest_rows import RowBuffer, arrow_schema

    entry = PlannedFile(uri=source, length=len(data), kind=_kind_of(source), show_secrets=show_secrets)
    chunked = 0
    out = []
    with _pure(pure):
        buf = RowBuffer()
        for row in decode_rows(entry, io.BytesIO(data)):
            if not isinstance(row, tuple):
                chunked += row.num_rows
            out.extend(_emit([row], buf))
        if buf.rows:
            out.append(buf.flush())
    rows = pa.Table.from_batches(out, schema=arrow_schema()).to_pylist()
    return sorted(rows, key=repr), chunked


def assert_same_rows(data: bytes, source: str = SEGMENT, show_secrets: bool = False) -> int:
    """The ingest's rows both ways must be the same set; returns how many the extension made itself."""
    ref, none_chunked = ingest_rows(data, source, True, show_secrets)
    got, chunked = ingest_rows(data, source, False, show_secrets)
    assert none_chunked == 0
    if ref != got:
        for i, (x, y) in enumerate(zip(ref, got, strict=False)):
            assert x == y, f"row {i} of {len(ref)} differs:\npython {x!r}\nnative {y!r}"
        assert len(ref) == len(got), f"python gives {len(ref)} rows, native {len(got)}"
    return chunked


def dump_log(path: str, pure: bool, variant: str, skip: bool, show_secrets: bool) -> tuple[Any, ...]:
    """Everything a kafka-dump-log run over `path` gives: stdout lines, stderr lines, the failure, the problems."""
    with _pure(pure):
        renderer = dumplog.DumpLogRenderer(variant=variant, skip_record_metadata=skip, show_secrets=show_secrets)
        lines = list(renderer.render_files([path]))
    return lines, renderer.stderr, renderer.failed, renderer.problems


def assert_same_dump_log(data: bytes, source: str = SEGMENT, variants: tuple[str, ...] = ("4.3", "4.1")) -> int:
    """`inspect --format dump-log` of `data` (as a file named `source`) both ways, in each variant, with and
    without the record metadata, secrets shown and not: the same lines, stderr, failure and problems. Returns how
    many batches the extension printed itself (with the first variant's options)."""
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, source or SEGMENT)
        with open(path, "wb") as f:
            f.write(data)
        for variant in variants:
            for skip in (False, True):
                for show in (False, True):
                    ref = dump_log(path, True, variant, skip, show)
                    got = dump_log(path, False, variant, skip, show)
                    if ref != got:
                        for i, (x, y) in enumerate(zip(ref[0], got[0], strict=False)):
                            assert x == y, f"line {i + 1} differs ({variant}, skip {skip}):\npython {x}\nnative {y}"
                        assert ref == got, (variant, skip, show)
        with _pure(False):
            return sum(isinstance(i, native.DumpLogText) for i in batch_module.read_file_for_dump_log(
                path, show_secrets=False, skip_record_metadata=False, bare_prefix="| ", gap_from_minus_one=True,
                kafka_keys=dumplog.KAFKA_43_API_KEYS))


def assert_same_runs(data: bytes, source: str = SEGMENT) -> int:
    """The replayer's reading of a segment (`native.read_batches_in_runs`, with `NEEDED_RECORDS`) against the
    reference's items: each batch of a run is one the reference gives without records, its CRC matching, its
    record count its offsets' span, not right after a problem, and following the batch before it in the run (file
    position, offsets, epoch); every other item is the reference's. Returns how many batches came in runs."""
    ref = _items(data, source, True, records_for=NEEDED_RECORDS)
    if isinstance(ref, DecodeError):
        return 0
    with _pure(False):
        items = native.read_batches_in_runs(io.BytesIO(data), source, max_batch_size=batch_module.DEFAULT_MAX_BATCH_SIZE,
                                            resync_window=batch_module.RESYNC_WINDOW, records_for=NEEDED_RECORDS,
                                            decompressed_limit=codecs.DEFAULT_LIMIT)
        got = list(batch_module._finished(items, source, False, NEEDED_RECORDS, False))
    expanded: list[Any] = []
    for item in got:
        if not isinstance(item, native.BatchRun):
            expanded.append(item)
            continue
        run = list(zip(item.positions, item.sizes, item.base_offsets, item.last_offsets, item.epochs, item.times,
                       strict=True))
        assert run and item.source == source
        for before, after in itertools.pairwise(run):
            assert after[0] == before[0] + before[1] and after[2] == before[3] + 1 and after[4] == before[4]
        expanded += [("run", *batch) for batch in run]
    expected: list[Any] = []
    after_problem = False
    for item in ref:
        h = item.header if isinstance(item, Batch) else None
        if (isinstance(item, Batch) and h is not None and not item.records and h.crc_ok and not after_problem
                and h.records_count == h.last_offset_delta + 1 > 0):
            expected.append(("run", h.position, h.size, h.base_offset, h.last_offset, h.partition_leader_epoch,
                             h.max_timestamp))
        else:
            expected.append(item)
        after_problem = isinstance(item, Problem)
    assert len(expanded) == len(expected)
    for i, (x, y) in enumerate(zip(expected, expanded, strict=True)):
        assert _same(x, y), f"item {i} of {len(expected)} differs:\npython {x!r}\nnative {y!r}"
    return sum(1 for x in expanded if isinstance(x, tuple))


def assert_same_all_ways(data: bytes, source: str = SEGMENT, rng: random.Random | None = None) -> None:
    assert_same_extras(assert_same(data, source))
    assert_same_rows(data, source)
    assert_same_runs(data, source)
    if source:
        assert_same_dump_log(data, source, variants=("4.3",) if rng is not None else ("4.3", "4.1"))
    assert_same(data, source, snapshot=True)
    assert_same(data, source, decode_values=False)
    assert_same(data, source, strict=True)
    keys = frozenset({18, 19})
    if rng is not None:
        keys = frozenset(rng.sample(range(0, 30), rng.randint(0, 5)))
    assert_same(data, source, records_for=keys)


# ---- inputs ----------------------------------------------------------------------------------------------------

_INTS = {"int8": 8, "int16": 16, "int32": 32, "int64": 64}
_FLOATS = (0.0, -0.0, 1.0, 1e7, 9999999.0, 1e-3, 0.001 - 1e-18, 5e-324, 1.7976931348623157e308, -2.5, 0.1, 1e22,
           123456.789, float("nan"), float("inf"), float("-inf"))
_TEXTS = ("", "a", "payments", "User:alice", "*", "é", "日本", "\x00\x1f\"\\", "tab\tnew\nline", "\U0001f600",
          "x" * 40)


def _scalar(rng: random.Random, kind: str) -> Any:
    if kind in _INTS:
        bits = _INTS[kind]
        return rng.choice([0, -1, 1, 2 ** (bits - 1) - 1, -(2 ** (bits - 1)), rng.randint(-(2 ** (bits - 1)),
                                                                                          2 ** (bits - 1) - 1)])
    if kind == "uint16":
        return rng.choice([0, 65535, rng.randint(0, 65535)])
    if kind == "uint32":
        return rng.choice([0, 2**32 - 1, rng.randint(0, 2**32 - 1)])
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice([*_FLOATS, rng.uniform(-1e9, 1e9), rng.random() * 10 ** rng.randint(-30, 30)])
    if kind == "string":
        return rng.choice(_TEXTS)
    if kind == "bytes":
        return rng.randbytes(rng.randint(0, 6))
    if kind == "uuid":
        return uuid_text(rng.randbytes(16))
    raise AssertionError(kind)


def _value(rng: random.Random, fld: Field, version: int) -> Any:
    if fld.tagged_in(version) and rng.random() < 0.4:
        return fld.default_value(version)
    if fld.nullable_in(version) and rng.random() < 0.2:
        return None
    if fld.is_array:
        return [_element(rng, fld, version) for _ in range(rng.randint(0, 3))]
    return _element(rng, fld, version)


def _element(rng: random.Random, fld: Field, version: int) -> Any:
    if fld.struct is not None:
        return random_body(rng, fld.struct, version, nested=True)
    return _scalar(rng, fld.element_type)


def random_body(rng: random.Random, struct_: Struct, version: int, nested: bool = False) -> dict[str, Any]:
    body = {f.json_name: _value(rng, f, version) for f in struct_.fields if f.present_in(version)}
    if nested and rng.random() < 0.1:
        body[UNKNOWN_TAGS_KEY] = {rng.randint(40, 60): rng.randbytes(rng.randint(0, 3))}
    return body


def random_record(rng: random.Random, control: bool) -> writer.RecordInput:
    if control:
        ct = rng.choice([0, 1, *sorted(CONTROL_SCHEMAS)])
        if ct in (0, 1):
            return writer.RecordInput(struct.pack(">hi", 0, rng.randint(0, 9)), control_type=ct)
        body = random_body(rng, CONTROL_SCHEMAS[ct].struct, 0)
        body["version"] = rng.choice([0, 0, 1, 5])
        return writer.control_record(ct, body, {rng.randint(10, 20): b"x"} if rng.random() < 0.1 else None)
    api_key = rng.choice(sorted(METADATA_SCHEMAS))
    schema = METADATA_SCHEMAS[api_key]
    version = rng.randint(schema.valid_versions.lo, schema.max_version)
    tags = {rng.randint(30, 40): rng.randbytes(rng.randint(0, 4))} if rng.random() < 0.1 else None
    rec = writer.metadata_record(api_key, version, random_body(rng, schema.struct, version), tags)
    if rng.random() < 0.1:
        rec = writer.RecordInput(rec.value, key=rng.randbytes(3), timestamp_delta=rng.randint(-5, 5),
                                 headers=(("h", b"v"), ("\xe9", None)))
    return rec


def random_segment(rng: random.Random, batches: int, codec: str | None = None) -> bytes:
    parts = []
    offset = rng.choice([0, 42, 2**40])
    for _ in range(batches):
        control = rng.random() < 0.25
        n = rng.randint(1, 4)
        records = [random_record(rng, control) for _ in range(n)]
        parts.append(writer.encode_batch(offset, records, rng.randint(0, 3), 1_700_000_000_000 + offset,
                                         codec or rng.choice(CODECS), control,
                                         log_append_time=rng.random() < 0.1, transactional=rng.random() < 0.2))
        offset += n
    return b"".join(parts)


def broken_values(rng: random.Random) -> bytes:
    """Batches with correct CRCs whose record values are damaged: value decoding errors of every kind."""
    parts = []
    offset = 0
    for _ in range(3):
        control = rng.random() < 0.3
        records = []
        for _ in range(rng.randint(1, 3)):
            rec = random_record(rng, control)
            value = bytearray(rec.value or b"")
            how = rng.randrange(5)
            if how == 0 and value:
                value[rng.randrange(len(value))] ^= 1 << rng.randrange(8)
            elif how == 1:
                del value[rng.randrange(len(value) + 1):]
            elif how == 2:
                value += rng.randbytes(rng.randint(1, 3))
            elif how == 3 and value:
                value[rng.randrange(len(value))] = rng.choice([0x00, 0x7F, 0x80, 0xFF, 0xC3, 0xED])
            else:
                value = bytearray(rng.randbytes(rng.randint(0, 12)))
            key = rec.key
            if control and rng.random() < 0.2:
                key = rng.choice([None, b"", b"\x00", b"\xff\xff\x00\x03", b"\x00\x00\x00\x09\x01"])
            records.append(writer.RecordInput(bytes(value) if rng.random() > 0.05 else None, key=key,
                                              control_type=rec.control_type))
        parts.append(writer.encode_batch(offset, records, 1, 1000, rng.choice(CODECS), control))
        offset += len(records)
    return b"".join(parts)


def _batch_starts(data: bytes) -> list[int]:
    starts, pos = [], 0
    while pos + 12 <= len(data):
        starts.append(pos)
        length = struct.unpack_from(">i", data, pos + 8)[0]
        if length < 14:
            break
        pos += length + 12
    return starts


def mutate(rng: random.Random, data: bytes) -> bytes:
    """One or two random damages to a file image."""
    out = bytearray(data)
    for _ in range(rng.randint(1, 2)):
        how = rng.randrange(11)
        starts = _batch_starts(bytes(out)) or [0]
        at = rng.choice(starts)
        if how == 0 and out:  # bit flips
            for _ in range(rng.randint(1, 3)):
                i = rng.randrange(len(out))
                out[i] ^= 1 << rng.randrange(8)
        elif how == 1:  # truncation
            del out[rng.randrange(len(out) + 1):]
        elif how == 2 and at + 12 <= len(out):  # batch length inflated or shrunk
            new = rng.choice([0, 5, 13, 14, 48, 49, -1, 2**31 - 1, 70 * 1024 * 1024,
                              struct.unpack_from(">i", out, at + 8)[0] + rng.randint(-20, 20)])
            struct.pack_into(">i", out, at + 8, new)
        elif how == 3 and at + 61 <= len(out):  # record count
            struct.pack_into(">i", out, at + 57, rng.choice([-1, 0, 1, 2**31 - 1, rng.randint(0, 9)]))
        elif how == 4 and at + 17 <= len(out):  # magic
            out[at + 16] = rng.choice([0, 1, 3, 255])
        elif how == 5:  # garbage inserted
            i = rng.randrange(len(out) + 1)
            out[i:i] = rng.randbytes(rng.randint(1, 100))
        elif how == 6 and out:  # a range deleted
            i = rng.randrange(len(out))
            del out[i:i + rng.randint(1, 30)]
        elif how == 7 and at + 27 <= len(out):  # attributes: codec, control, timestamp type
            struct.pack_into(">h", out, at + 21, rng.choice([5, 6, 7, 0x20, 0x08, 0x24, -1, rng.randint(0, 127)]))
        elif how == 8 and at + 8 <= len(out):  # base offset
            struct.pack_into(">q", out, at, rng.choice([-1, 0, 2**63 - 1, rng.randint(0, 1000)]))
        elif how == 9 and out:  # zero-filled tail
            i = rng.randrange(len(out))
            out[i:] = bytes(rng.randint(1, 200))
        elif at + 27 <= len(out):  # last offset delta
            struct.pack_into(">i", out, at + 23, rng.choice([-1, 0, 2**31 - 1, rng.randint(0, 9)]))
    return bytes(out)


def recrc(data: bytes) -> bytes:
    """The same bytes with every batch that frames given a correct CRC (damage then reaches the records)."""
    out = bytearray(data)
    for at in _batch_starts(data):
        end = at + struct.unpack_from(">i", out, at + 8)[0] + 12
        if end <= len(out) and end - at >= 61:
            from replay.kafka.crc import crc32c

            struct.pack_into(">I", out, at + 17, crc32c(bytes(out[at + 21:end])))
    return bytes(out)


def sample_files() -> list[str]:
    paths = [p for p in glob.glob(os.path.join(ROOT, "data", "**", "*"), recursive=True) if os.path.isfile(p)]
    assert paths, "no sample files under data/"
    return sorted(paths)


# ---- tests -----------------------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", sample_files(), ids=lambda p: os.path.relpath(p, ROOT))
def test_sample_files(path: str) -> None:
    with _pure(True):
        ref = list(batch_module.read_file(path))
    with _pure(False):
        got = list(batch_module.read_file(path))
    assert _same(ref, got)
    with open(path, "rb") as f:
        data = f.read()
    assert_same_all_ways(data, os.path.basename(path))
    assert_same_rows(data, os.path.basename(path), show_secrets=True)


@pytest.mark.slow  # both decoders, every schema and codec: about a minute
def test_writer_round_trips_every_schema_and_codec() -> None:
    rng = random.Random(7)
    for api_key, schema in sorted(METADATA_SCHEMAS.items()):
        for version in range(schema.valid_versions.lo, schema.max_version + 1):
            for codec in CODECS:
                records = [writer.metadata_record(api_key, version, random_body(rng, schema.struct, version))
                           for _ in range(3)]
                data = writer.encode_batch(5, records, 1, 1000, codec)
                assert_same_extras(assert_same(data))
                assert_same_rows(data)
    for codec in CODECS:
        for seed in range(20):
            assert_same_all_ways(random_segment(random.Random(seed), 6, codec), rng=rng)


def test_snapshots_and_bootstrap(tmp_path: Any) -> None:
    rng = random.Random(3)
    acls = [writer.acl_record(uuid_text(rng.randbytes(16)),
                              AclBinding.of("TOPIC", f"t{i}", "LITERAL", "User:a", "*", "READ", "ALLOW"))
            for i in range(30)]
    for codec in CODECS:
        image = writer.snapshot_bytes([*acls, writer.noop()], 2, 1_700_000_000_000, batch_size=7, codec=codec,
                                      kraft_version_records=[writer.kraft_version(1)])
        assert_same_all_ways(image, SNAPSHOT)
        parts = _batch_starts(image)
        assert_same(image[parts[1]:], SNAPSHOT, snapshot=True)  # no header
        assert_same(image[:parts[-1]], SNAPSHOT, snapshot=True)  # no footer
    assert_same(b"", SNAPSHOT, snapshot=True)
    path = writer.write_bootstrap(str(tmp_path), acls[:3])
    with open(path, "rb") as f:
        assert_same_all_ways(f.read(), "bootstrap.checkpoint")


def test_bad_inputs_of_the_decoder_tests() -> None:
    """The damaged files `test_bad_input.py` is about, built the same way."""
    three = b"".join(writer.encode_batch(i * 3, [writer.noop()] * 2, 1, 1000 + i) for i in range(3))
    cases = [
        writer.corrupt_crc(three[:100]) + three[100:],
        three[:-10],
        three + b"\x00" * 7,
        three + b"\x00" * 300,
        writer.with_batch_length(three[:100], 5) + three[100:],
        writer.with_batch_length(three[:100], 2**30) + three[100:],
        writer.with_magic(three[:100], 1) + three[100:],
        b"Dumping /tmp/00000000000000000000.log\nStarting offset: 0\n",
        b"hello world, this is plain text\n" * 3,
        bytes(range(256)) * 4,
        b"\x00" * 50,
        b"abc",
        b"",
        writer.encode_batch(0, [writer.noop()], codec="zstd")[:-3] + b"\x00\x00\x00",
        writer.assemble_batch(0, b"\x02\x00", 1, 0, attributes=0),
        writer.assemble_batch(0, writer.encode_record(0, b"\x01\x14\x00\x00") + b"\xff\xff", 2, 1),
        writer.assemble_batch(0, b"", 3, 2, attributes=1),
        writer.assemble_batch(0, b"garbage", 1, 0, attributes=2),
        writer.assemble_batch(0, b"\x82SNAPPY\x00" + b"\x00" * 8 + b"\x00\x00\x00\x05abc", 1, 0, attributes=2),
        writer.assemble_batch(0, b"garbage", 1, 0, attributes=3),
        writer.assemble_batch(0, b"\x28\xb5\x2f\xfd" + b"\x00" * 5, 1, 0, attributes=4),
        writer.assemble_batch(0, b"", 0, 0, attributes=0x20),
    ]
    for data in cases:
        assert_same_all_ways(data)
        assert_same_all_ways(data, "")


@pytest.mark.slow  # both decoders over the whole fuzzed corpus: 1.5-2.5 minutes
def test_fuzzed_corpus() -> None:
    """A few thousand seeded mutations of valid files (written here in every codec, and the samples Kafka wrote),
    and batches with broken values."""
    rng = random.Random(20251125)
    bases = [random_segment(random.Random(s), rng.randint(2, 5)) for s in range(40)]
    bases += [writer.snapshot_bytes([random_record(random.Random(s), False) for _ in range(5)], 1, 5, batch_size=2,
                                    codec=CODECS[s % 5]) for s in range(10)]
    for path in sample_files():
        if path.endswith((".log", ".checkpoint")):
            with open(path, "rb") as f:
                bases.append(f.read())
    for i in range(2500):
        data = mutate(rng, rng.choice(bases))
        if i % 3 == 0:
            data = recrc(data)
        name = rng.choice([SEGMENT, SNAPSHOT, "", "bootstrap.checkpoint"])
        if i % 5 == 0:
            assert_same_all_ways(data, name, rng)
        else:
            assert_same(data, name, snapshot=name.endswith(".checkpoint"))
    for _ in range(600):
        data = broken_values(rng)
        assert_same_runs(data)
        assert_same_extras(assert_same(data))
        assert_same_rows(data)
        assert_same(data, records_for=frozenset(rng.sample(range(30), 3)))


def test_records_for_keeps_control_records_and_the_chosen_types() -> None:
    """Records of other types are framed (framing problems stay) but neither kept nor value-decoded (so the
    unknown type 99 at offset 4 is no problem here, as in `batch.wanted`); an ACL record with a broken body is kept
    with its error."""
    records = [writer.noop(), writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", AclBinding.of(
        "TOPIC", "t", "LITERAL", "User:a", "*", "READ", "ALLOW")), writer.feature_level("x", 1)]
    data = (writer.encode_batch(0, records) + writer.encode_batch(3, [writer.leader_change(1, [1])], control=True)
            + writer.encode_batch(4, [writer.RecordInput(b"\x01\x63\x00")])
            + writer.corrupt_crc(writer.encode_batch(5, [writer.RecordInput(b"\x01\x12\x00\x07")])))
    for pure in (True, False):
        items = _items(data, SEGMENT, pure, records_for=frozenset({18}))
        assert not isinstance(items, DecodeError)
        batches = [i for i in items if isinstance(i, Batch)]
        assert [[r.offset for r in b.records] for b in batches] == [[1], [3], [], [5]]
        assert [b.header.records_count for b in batches] == [3, 1, 1, 1]
        assert batches[3].records[0].api_key == 18 and batches[3].records[0].error
        assert [(p.kind.value, p.offset) for p in items if isinstance(p, Problem)] == [
            ("bad_crc", 5), ("bad_record", 5)]
        everything = _items(data, SEGMENT, pure)
        assert not isinstance(everything, DecodeError)
        assert [(p.kind.value, p.offset) for p in everything if isinstance(p, Problem)] == [
            ("unknown_api_key", 4), ("bad_crc", 5), ("bad_record", 5)]


def test_lossy_utf8_matches_python() -> None:
    """Strings in the columnar output are decoded in Rust; Python's `decode("utf-8", "replace")` is the rule."""
    ext: Any = native._ext
    rng = random.Random(1)
    for _ in range(5000):
        raw = bytes(rng.choice([0x41, 0x80, 0xBF, 0xC0, 0xC3, 0xE0, 0xED, 0xA0, 0xF0, 0xF4, 0x90, 0xFF, 0x9F])
                    for _ in range(rng.randint(0, 8)))
        assert ext.lossy_utf8(raw) == raw.decode("utf-8", "replace"), raw


def test_an_extension_built_from_other_sources_is_not_used(monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed extension whose `API` differs from `native.API` (a wheel built from an older checkout) would
    be called with arguments it does not take: it is not used, and the reason names the rebuild."""
    import importlib
    import types

    stale = types.ModuleType("kraft_replay_native")
    vars(stale)["API"] = native.API - 1
    monkeypatch.setattr(importlib, "import_module", lambda name: stale)
    ext, why = native._load()
    assert ext is None and why is not None and "rebuild" in why and f"API {native.API - 1}" in why


def test_the_ingest_rows_come_from_the_extension_except_where_python_must_make_them() -> None:
    """Row chunks are what the extension makes of ordinary batches (so the fast path is really taken); a batch with
    a secret, a SCRAM credential or an ACL text that is not UTF-8 is left to Python, which redacts or decodes it;
    with `show_secrets` a password config goes the fast way too. The rows are the same either way."""
    acl = writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", AclBinding.of("TOPIC", "pay", "PREFIXED", "User:a", "*",
                                                                  "WRITE", "DENY"))

    def config(name: str, value: str | None) -> writer.RecordInput:
        return writer.metadata_record(4, 0, {"resourceType": 4, "resourceName": "1", "name": name, "value": value})

    plain = writer.encode_batch(0, [writer.noop(), acl, writer.remove_acl_record("AAAAAAAAAAAAAAAAAAAAAA"),
                                    config("min.insync.replicas", "2"), config("ssl.keystore.password", None)], 1, 5)
    assert assert_same_rows(plain) == 5
    password = writer.encode_batch(5, [writer.noop(), config("ssl.keystore.password", "hunter2")], 1, 6)
    scram = writer.encode_batch(7, [writer.metadata_record(11, 0, {
        "name": "alice", "mechanism": 1, "salt": b"s", "storedKey": b"k", "serverKey": b"v", "iterations": 4096})],
        1, 7)
    assert assert_same_rows(plain + password + scram) == 5
    assert assert_same_rows(plain + password + scram, show_secrets=True) == 7
    rows, _ = ingest_rows(password, SEGMENT, False)
    assert "hunter2" not in repr(rows)
    not_utf8 = writer.encode_batch(8, [writer.metadata_record(18, 0, {
        "id": "AAAAAAAAAAAAAAAAAAAAAA", "resourceType": 2, "resourceName": b"\xff\xfe".decode("latin-1"),
        "patternType": 3, "principal": "User:a", "host": "*", "operation": 3, "permissionType": 3})], 1, 8)
    assert assert_same_rows(plain + not_utf8) >= 5


def test_dump_log_lines_come_from_the_extension_except_where_python_must_print_them() -> None:
    """`inspect --format dump-log`: the extension prints ordinary data batches itself (so the fast path is really
    taken); a control batch, a password config or a SCRAM credential (while secrets are hidden) is printed by
    Python from the `Batch`, redacted. The text is the same either way, in file order, with the offset jumps."""
    acl = writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", AclBinding.of("TOPIC", "pay", "PREFIXED", "User:a", "*",
                                                                  "WRITE", "DENY"))

    def config(name: str, value: str | None) -> writer.RecordInput:
        return writer.metadata_record(4, 0, {"resourceType": 4, "resourceName": "1", "name": name, "value": value})

    plain = writer.encode_batch(42, [writer.noop(), acl, config("min.insync.replicas", "2")], 1, 5)
    password = writer.encode_batch(45, [writer.noop(), config("ssl.keystore.password", "hunter2")], 1, 6)
    control = writer.encode_batch(47, [writer.leader_change(1, [1])], 1, 7, control=True)
    later = writer.encode_batch(60, [writer.noop()], 1, 8)  # a jump in offsets: 47 is followed by 60
    scram = writer.encode_batch(61, [writer.metadata_record(11, 0, {
        "name": "alice", "mechanism": 1, "salt": b"s", "storedKey": b"k", "serverKey": b"v", "iterations": 4096})],
        1, 9)
    data = plain + password + control + later + plain + scram
    assert assert_same_dump_log(data) == 2  # plain, then later + plain together; the rest by Python
    with tempfile.TemporaryDirectory() as d:
        path = os.path.join(d, SEGMENT)
        with open(path, "wb") as f:
            f.write(data)
        lines, stderr, failed, problems = dump_log(path, False, "4.3", False, False)
    text = "\n".join(lines)
    assert "hunter2" not in text and '"value":"(redacted ' in text
    assert failed is None and problems == []
    # 4.3 reports the start at -1 too, and lists the jumps by the earlier offset
    assert [line for line in stderr if "is followed by" in line] == [
        "  -1 is followed by 42", "  44 is followed by 61", "  47 is followed by 60", "  60 is followed by 42"]


def test_the_replayer_reads_plain_batches_in_runs() -> None:
    """A segment's NoOp and cluster batches come as runs, broken where a batch keeps a record (an ACL, a
    transaction marker), follows a problem, fails its CRC, or does not follow the one before (an epoch change)."""
    acl = writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", AclBinding.of("TOPIC", "pay", "LITERAL", "User:a", "*",
                                                                  "READ", "ALLOW"))
    noops = b"".join(writer.encode_batch(i, [writer.noop()], 1, 1000 + i) for i in range(5))
    data = (noops + writer.encode_batch(5, [acl], 1, 1005)
            + b"".join(writer.encode_batch(6 + i, [writer.noop()], 2, 1006 + i) for i in range(3))
            + writer.corrupt_crc(writer.encode_batch(9, [writer.noop()], 2, 1009))
            + writer.encode_batch(10, [writer.feature_level("x", 1)], 3, 1010)
            + writer.encode_batch(11, [writer.noop()], 3, 1011))
    assert assert_same_runs(data) == 5 + 3 + 2
    empty = writer.assemble_batch(12, b"", 0, -1)  # no record at all: no row holds it, so no run either
    assert assert_same_runs(data + empty + writer.encode_batch(12, [writer.noop()], 3, 1012)) == 5 + 3 + 2 + 1
    with _pure(False):
        items = list(native.read_batches_in_runs(io.BytesIO(data), SEGMENT, records_for=NEEDED_RECORDS,
                                                 max_batch_size=batch_module.DEFAULT_MAX_BATCH_SIZE,
                                                 resync_window=batch_module.RESYNC_WINDOW,
                                                 decompressed_limit=codecs.DEFAULT_LIMIT))
    kinds = [type(i).__name__ if not isinstance(i, native.BatchRun) else f"run{len(i.positions)}" for i in items]
    assert kinds == ["run5", "Batch", "run3", "Problem", "Batch", "run2"]
