"""The file path without Spark streams: replaying a longer log of the same ACLs takes no more memory.

A log of NoOp batches (one record each, as the controller writes one every 500 ms) around a fixed set of ACL
records is replayed from its segment, and the state and times asked for, with a log of N and of 4N batches. The
peak of traced memory may grow with the ACL records (the same in both) but not with the number of batches: the
bound is far below what keeping even 16 bytes per batch would cost.
"""

from __future__ import annotations

import gc
import os
import random
import tracemalloc
from typing import Any

import pytest

from replay.kafka import files, replayer, synth, writer
from replay.kafka.dump import discover, replay_sources

BASE_TIME = 1_700_000_000_000


def _write_log(directory: str, noops: int, rng: random.Random) -> int:
    """ACL creates (some in transactions), `noops` NoOp batches, then removes of half of them; the last offset."""
    part = os.path.join(directory, files.METADATA_PARTITION_DIR)
    os.makedirs(part, exist_ok=True)
    ids = [synth.new_acl_id(rng) for _ in range(60)]
    batches = [[writer.acl_record(i, synth.random_binding(rng)) for i in ids[k:k + 6]] for k in range(0, 60, 6)]
    batches[3] = [writer.begin_txn(), *batches[3], writer.end_txn()]
    batches += [[writer.noop()] for _ in range(noops)]
    batches += [[writer.remove_acl_record(i)] for i in ids[::2]]
    offset = 0
    with open(os.path.join(part, files.segment_name(0)), "wb") as f:
        for i, records in enumerate(batches):
            f.write(writer.encode_batch(offset, records, 1, BASE_TIME + 500 * i))
            offset += len(records)
    return offset - 1


def _peak_of_answer(directory: str, last: int) -> tuple[int, Any]:
    """Peak traced bytes above the start while replaying and asking for the state and the times at a few points."""
    sources, _ = discover([directory])
    gc.collect()
    tracemalloc.reset_peak()
    start = tracemalloc.get_traced_memory()[0]
    result = replay_sources(sources, needed_only=True)
    answers = [(result.state_at(o).certain, result.time_of(o)) for o in (5, last // 2, last)]
    answers.append(result.offset_at_time(BASE_TIME + 500 * 123))
    peak = tracemalloc.get_traced_memory()[1] - start
    return peak, (result.lifetimes, answers)


def test_memory_does_not_grow_with_the_log(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(replayer, "SPAN_BYTES", 64 << 10)  # both logs hold many spans, each read again is small
    n = 3000
    logs = {}
    for name, noops in (("warm", n), ("n", n), ("4n", 4 * n)):
        logs[name] = (str(tmp_path / name), _write_log(str(tmp_path / name), noops, random.Random(5)))
    tracemalloc.start()
    try:
        _peak_of_answer(*logs["warm"])  # caches (schemas, codecs) filled once
        peak_n, answer_n = _peak_of_answer(*logs["n"])
        peak_4n, answer_4n = _peak_of_answer(*logs["4n"])
    finally:
        tracemalloc.stop()
    lifetimes_n, lifetimes_4n = answer_n[0], answer_4n[0]
    assert len(lifetimes_n) == len(lifetimes_4n) == 60 and answer_n[1][0] == answer_4n[1][0]
    extra_batches = 3 * n
    assert peak_4n - peak_n < 16 * extra_batches // 4, (peak_n, peak_4n)
