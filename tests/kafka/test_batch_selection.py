"""Decoding with `records_for` skips batches none of whose records it keeps without building records; the result
(records kept, problems found) is the same as reading every record, on valid and on damaged batches."""

from __future__ import annotations

import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import batch, synth, writer
from replay.kafka.replayer import NEEDED_RECORDS

RECORDS = st.sampled_from([
    writer.noop(),
    writer.feature_level("metadata.version", 20),
    writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", synth.random_binding(random.Random(1))),
    writer.remove_acl_record("AAAAAAAAAAAAAAAAAAAAAA"),
    writer.begin_txn("t"),
    writer.end_txn(),
    writer.RecordInput(writer.noop().value, key=b"k"),
    writer.RecordInput(writer.noop().value, headers=(("h", b"v"),)),
    writer.RecordInput(writer.noop().value, timestamp_delta=1 << 20),
    writer.RecordInput(None),
    writer.RecordInput(b"\x01"),
    writer.RecordInput(b"\x01\xff\xff\xff\x7f\x00"),
])


def _decoded(data: bytes, records_for: frozenset[int] | None) -> list[Any]:
    return batch.decode_batch(data, 0, "s.log", records_for=records_for)


@settings(max_examples=400, deadline=None)
@given(records=st.lists(RECORDS, min_size=1, max_size=6), flips=st.lists(st.tuples(st.integers(0), st.integers(1, 255)),
                                                                           max_size=3),
       codec=st.sampled_from([0, 1]), base=st.integers(0, 1 << 40))
def test_skipping_unwanted_batches_changes_nothing(records: list[Any], flips: list[tuple[int, int]], codec: int,
                                                   base: int) -> None:
    data = bytearray(writer.encode_batch(base, records, 1, 1_700_000_000_000, codec=codec))
    for at, mask in flips:
        data[batch.RECORD_BATCH_OVERHEAD + at % max(1, len(data) - batch.RECORD_BATCH_OVERHEAD)] ^= mask
    fast = _decoded(bytes(data), NEEDED_RECORDS)
    with pytest.MonkeyPatch.context() as m:
        m.setattr(batch, "_none_wanted", lambda *_: False)
        slow = _decoded(bytes(data), NEEDED_RECORDS)
    assert fast == slow


def test_a_batch_of_noops_is_framed_but_keeps_nothing() -> None:
    data = writer.encode_batch(7, [writer.noop()] * 3, 1, 5)
    called: list[bool] = []
    real = batch._none_wanted

    def spy(*args: Any) -> bool:
        called.append(real(*args))
        return called[-1]

    with pytest.MonkeyPatch.context() as m:
        m.setattr(batch, "_none_wanted", spy)
        (only,) = _decoded(data, NEEDED_RECORDS)
    assert called == [True] and only.records == [] and only.header.records_count == 3
