"""decode(write(x)) == x over codecs, batch sizes, control and data records (hypothesis)."""

from __future__ import annotations

import base64
import os
import tempfile

from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import writer
from replay.kafka.batch import read_bytes, read_file
from replay.kafka.message import encode_control_value, encode_metadata_value
from replay.kafka.model import Batch, Problem

ids = st.binary(min_size=16, max_size=16).map(lambda b: base64.urlsafe_b64encode(b).decode().rstrip("="))
texts = st.text(max_size=30)
int16 = st.integers(-(2**15), 2**15 - 1)
int32 = st.integers(-(2**31), 2**31 - 1)
int64 = st.integers(-(2**63), 2**63 - 1)

acl_data = st.fixed_dictionaries({
    "resourceType": st.integers(0, 7),
    "resourceName": texts,
    "patternType": st.integers(0, 4),
    "principal": texts,
    "host": texts,
    "operation": st.integers(0, 15),
    "permissionType": st.integers(0, 3),
})

data_records = st.one_of(
    st.builds(writer.acl_record, ids, acl_data),
    st.builds(writer.remove_acl_record, ids),
    st.builds(writer.begin_txn, st.none() | texts),
    st.just(writer.end_txn()),
    st.builds(writer.abort_txn, st.none() | texts),
    st.just(writer.noop()),
    st.builds(writer.feature_level, texts, int16),
)
control_records = st.one_of(
    st.builds(writer.leader_change, int32, st.lists(int32, max_size=5)),
    st.builds(writer.kraft_version, int16),
    st.builds(writer.snapshot_header, int64),
    st.just(writer.snapshot_footer()),
)
codecs_ = st.sampled_from(["none", "gzip", "snappy", "lz4", "zstd"])


@st.composite
def batch_specs(draw: st.DrawFn) -> tuple[bool, list[writer.RecordInput], str, int, int]:
    control = draw(st.booleans())
    records = draw(st.lists(control_records if control else data_records, min_size=1, max_size=30))
    return control, records, draw(codecs_), draw(st.integers(0, 2**31 - 1)), draw(st.integers(0, 2**45))


def check_record(rec_in: writer.RecordInput, rec: object) -> None:
    from replay.kafka.model import Record

    assert isinstance(rec, Record)
    assert rec.error is None, rec.error
    assert rec.value == rec_in.value and rec.key == rec_in.record_key
    assert rec.control_type == rec_in.control_type
    assert rec.data is not None
    if rec.control_type is not None:
        assert encode_control_value(rec.control_type, rec.data, rec.unknown_tags) == rec.value
    else:
        assert rec.api_key is not None and rec.version is not None
        assert encode_metadata_value(rec.api_key, rec.version, rec.data, rec.unknown_tags) == rec.value


@settings(max_examples=60, deadline=None)
@given(st.lists(batch_specs(), min_size=1, max_size=6), st.integers(0, 10**12))
def test_segment_round_trip(specs: list[tuple[bool, list[writer.RecordInput], str, int, int]], base: int) -> None:
    blobs = []
    offset = base
    for control, records, codec, epoch, ts in specs:
        blobs.append(writer.encode_batch(offset, records, epoch, ts, codec, control))
        offset += len(records)
    items = read_bytes(b"".join(blobs), "seg")
    assert all(isinstance(i, Batch) for i in items), [i.describe() for i in items if isinstance(i, Problem)]
    assert len(items) == len(specs)
    position = 0
    offset = base
    for item, blob, (control, records, codec, epoch, ts) in zip(items, blobs, specs, strict=True):
        assert isinstance(item, Batch)
        h = item.header
        assert (h.position, h.size, h.base_offset, h.last_offset) == (position, len(blob), offset, offset + len(records) - 1)
        assert (h.is_control, h.codec_name, h.partition_leader_epoch, h.crc_ok) == (control, codec, epoch, True)
        assert (h.base_timestamp, h.max_timestamp, h.records_count) == (ts, ts, len(records))
        assert [r.offset for r in item.records] == list(range(offset, offset + len(records)))
        assert all(r.timestamp == ts for r in item.records)
        for rec_in, rec in zip(records, item.records, strict=True):
            check_record(rec_in, rec)
        assert writer.reencode_batch(item) == blob  # every codec is deterministic
        position += len(blob)
        offset += len(records)


raw_records = st.builds(
    writer.RecordInput,
    value=st.none() | st.binary(max_size=300),
    key=st.none() | st.binary(max_size=50),
    timestamp_delta=st.integers(-(2**40), 2**40),
    attributes=st.integers(0, 255),
    headers=st.lists(st.tuples(texts, st.none() | st.binary(max_size=20)), max_size=4).map(tuple),
)


@settings(max_examples=60, deadline=None)
@given(st.lists(raw_records, min_size=1, max_size=20), codecs_, st.booleans(), st.integers(-(2**62), 2**62))
def test_raw_record_fields_round_trip(records: list[writer.RecordInput], codec: str, log_append: bool, ts: int) -> None:
    blob = writer.encode_batch(42, records, 3, ts, codec, max_timestamp=ts + 1, log_append_time=log_append)
    (batch,) = read_bytes(blob, "raw", decode_values=False)
    assert isinstance(batch, Batch)
    for i, (rin, rec) in enumerate(zip(records, batch.records, strict=True)):
        assert (rec.offset, rec.key, rec.value, rec.attributes) == (42 + i, rin.key, rin.value, rin.attributes)
        assert rec.headers == rin.headers and rec.timestamp_delta == rin.timestamp_delta
        assert rec.timestamp == (ts + 1 if log_append else ts + rin.timestamp_delta)
    assert writer.reencode_batch(batch) == blob


@settings(max_examples=25, deadline=None)
@given(st.lists(data_records, max_size=40), st.integers(1, 12), codecs_, st.integers(0, 1000), st.integers(1, 10**9),
       st.booleans())
def test_snapshot_round_trip(records: list[writer.RecordInput], batch_size: int, codec: str, epoch: int,
                             end_offset: int, kraft: bool) -> None:
    extra = [writer.kraft_version(1)] if kraft else []
    with tempfile.TemporaryDirectory() as d:
        path = writer.write_snapshot(d, end_offset, epoch, records, 777, kraft_version_records=extra,
                                     batch_size=batch_size, codec=codec)
        assert os.path.basename(path) == f"{end_offset:020d}-{epoch:010d}.checkpoint"
        items = list(read_file(path))
    assert all(isinstance(i, Batch) for i in items)
    batches = [i for i in items if isinstance(i, Batch)]
    head, *data, foot = batches
    assert head.header.is_control and foot.header.is_control and not any(b.header.is_control for b in data)
    assert [r.type_name for r in head.records] == ["SNAPSHOT_HEADER"] + (["KRAFT_VERSION"] if kraft else [])
    assert head.records[0].data == {"version": 0, "lastContainedLogTimestamp": 777}
    assert [r.type_name for r in foot.records] == ["SNAPSHOT_FOOTER"]
    assert all(b.header.partition_leader_epoch == epoch for b in batches)
    assert all(len(b.records) <= batch_size for b in data)
    offsets = [r.offset for b in batches for r in b.records]
    assert offsets == list(range(len(offsets)))  # local offsets from 0, contiguous
    for rin, rec in zip(records, [r for b in data for r in b.records], strict=True):
        check_record(rin, rec)


def test_builders_data() -> None:
    from replay.kafka.message import decode_control_value, decode_metadata_value

    assert decode_metadata_value(writer.begin_txn().value or b"").data == {"name": None}
    assert decode_metadata_value(writer.abort_txn("Controller failover").value or b"").data == {
        "reason": "Controller failover"}
    # Spec §12.2 values.
    assert writer.abort_txn("Controller failover").value == bytes.fromhex("01190001001414") + b"Controller failover"
    assert writer.snapshot_header(1700000000003).value == bytes.fromhex("00000000018bcfe5680300")
    assert writer.kraft_version(1).value == bytes.fromhex("0000000100")
    lc = decode_control_value(2, writer.leader_change(3, [1, 2, 3], [3]).value or b"")
    assert lc.data == {"version": 0, "leaderId": 3, "voters": [{"voterId": 1}, {"voterId": 2}, {"voterId": 3}],
                       "grantingVoters": [{"voterId": 3}]}


def test_bad_bytes_helpers() -> None:
    blob = writer.encode_batch(0, [writer.noop()])
    assert writer.corrupt_crc(blob)[17] != blob[17] and writer.corrupt_crc(blob)[18:] == blob[18:]
    assert writer.with_magic(blob, 1)[16] == 1
    assert writer.with_batch_length(blob, 3)[8:12] == b"\x00\x00\x00\x03"
    assert writer.corrupt_body(blob)[-1] != blob[-1]
