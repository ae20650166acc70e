"""The replayer's spans (rows and time index entries kept per megabyte of a file, not per batch) change no answer.

Dumps from random histories, several overlapping ones among them (other segment boundaries, a node with a
divergent suffix), are replayed with spans of a few batches (so that spans overlap, are split, and hold snapshot
points) and without spans (a row per batch): every output must be the same, and so must every time lookup.
"""

from __future__ import annotations

import os
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import replayer, synth
from replay.kafka.dump import replay_paths
from tests.histories import CUTS, STEPS


def _replay(span_bytes: int, paths: list[str], needed_only: bool, high_watermark: int | None) -> Any:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(replayer, "SPAN_BYTES", span_bytes)
        return replay_paths(paths, high_watermark=high_watermark, needed_only=needed_only)


def _same(a: Any, b: Any) -> None:
    assert a.lifetimes == b.lifetimes
    assert a.events == b.events
    assert a.coverage == b.coverage
    assert a.anomalies == b.anomalies
    assert a.last_offset == b.last_offset and a.incomplete == b.incomplete
    pairs = list(b.times)
    assert list(a.times) == pairs and len(a.times) == len(pairs) and a.times[::2] == pairs[::2]
    end = (b.last_offset or 0) + 2
    for offset in range(-1, end):
        assert a.time_of(offset) == b.time_of(offset), offset
    for time in sorted({t + d for _, t in pairs for d in (-1, 0, 1)}):
        assert a.offset_at_time(time) == b.offset_at_time(time), time


@settings(max_examples=120, deadline=None)
@given(steps=STEPS, cuts=CUTS, segment_every=st.sampled_from([4, 9, 30]), other_every=st.sampled_from([5, 13]),
       copies=st.sampled_from(["one", "overlap", "divergent"]), span_bytes=st.sampled_from([150, 400, 2000]),
       needed_only=st.booleans(), watermark=st.sampled_from([None, 0.5, 0.9]), at_batch=st.integers(0, 6),
       skew=st.booleans())
def test_spans_change_no_answer(tmp_path_factory: Any, steps: list[tuple[Any, ...]], cuts: list[int], segment_every: int, other_every: int,
                                copies: str, span_bytes: int, needed_only: bool, watermark: float | None,
                                at_batch: int, skew: bool) -> None:
    log = synth.log_from_steps(steps)
    if skew:  # append times that do not grow with offsets (leaders with other clocks)
        log = synth.SynthLog([synth.SynthBatch(b.base_offset, b.records, b.epoch, b.time - 7 * (i % 3), b.control)
                              for i, b in enumerate(log.batches)])
    snaps = synth.quiet_snapshot_ends(log, cuts)
    first = str(tmp_path_factory.mktemp("dump"))
    paths = [first]
    if copies == "divergent" and log.batches:
        committed, stale = synth.divergent_copy(log, min(at_batch, len(log.batches) - 1), seed=len(steps))
        synth.write_dump(committed, first, synth.Layout(segment_every=segment_every, snapshot_at=snaps))
        second = str(tmp_path_factory.mktemp("stale"))
        synth.write_dump(stale, second, synth.Layout(segment_every=other_every))
        paths.append(second)
    else:
        synth.write_dump(log, first, synth.Layout(segment_every=segment_every, snapshot_at=snaps))
        if copies == "overlap":
            second = str(tmp_path_factory.mktemp("other"))
            synth.write_dump(log, second, synth.Layout(segment_every=other_every,
                                                       drop_segments=(0,) if len(steps) % 2 else ()))
            paths.append(second)
    hw = None if watermark is None else int(log.end_offset * watermark)
    spans = _replay(span_bytes, paths, needed_only, hw)
    rows = _replay(0, paths, needed_only, hw)
    _same(spans, rows)


def test_a_span_read_again_from_a_changed_file_is_an_error(tmp_path: Any) -> None:
    """The time index reads spans again from their files; a file changed since says so instead of answering."""
    log = synth.generate(seed=3, n_batches=40)
    synth.write_dump(log, str(tmp_path), synth.Layout(segment_every=10_000))
    result = replay_paths([str(tmp_path)], needed_only=True)
    assert result.times.spans, "a single clean segment is kept as spans"
    segment = next(os.path.join(r, f) for r, _, fs in os.walk(tmp_path) for f in fs if f.endswith(".log"))
    with open(segment, "r+b") as f:
        f.truncate(os.path.getsize(segment) // 2)
    with pytest.raises(OSError, match="read differently now"):
        list(result.times)


@pytest.mark.parametrize("seed", range(4))
def test_spans_of_overlapping_dumps_change_no_answer(tmp_path: Any, seed: int) -> None:
    """Longer logs than the property test's: spans of one dump cross the segments of the other and are split."""
    log = synth.generate(seed=seed, n_batches=80)
    one, other = str(tmp_path / "one"), str(tmp_path / "other")
    synth.write_dump(log, one, synth.Layout(segment_every=9, snapshot_at=synth.quiet_snapshot_ends(log, [20, 50])))
    synth.write_dump(log, other, synth.Layout(segment_every=13, drop_segments=(1,)))
    alone = _replay(1500, [one], True, None)
    assert alone.times.spans
    _same(alone, _replay(0, [one], True, None))
    _same(_replay(1500, [one, other], True, None), _replay(0, [one, other], True, None))
