"""The replayer's spans (rows and time index entries kept per megabyte of a file, not per batch) change no answer.

Dumps from random histories, several overlapping ones among them (other segment boundaries, a node with a
divergent suffix), are replayed with spans of a few batches (so that spans overlap, are split, and hold snapshot
points) and without spans (a row per batch): every output must be the same, and so must every time lookup.
"""

from __future__ import annotations

import glob
import os
import random
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import batch, native, replayer, synth
from replay.kafka.dump import replay_paths
from tests.compiled_decoder import require_compiled_decoder
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


@settings(max_examples=150, deadline=None)
@given(times=st.lists(st.integers(0, 40), min_size=1, max_size=30), cut=st.integers(1, 29),
       extra=st.lists(st.tuples(st.integers(-2, 70), st.integers(0, 45)), max_size=6))
def test_time_lookups_through_spans_match_the_merged_index(tmp_path_factory: Any, times: list[int], cut: int,
                                                           extra: list[tuple[int, int]]) -> None:
    """Batches of two records (last offsets 1, 3, 5, ...) in two spans, and column entries (snapshot points) before,
    inside, between and after them, at batch ends too, with greater or smaller times: every lookup answers as the
    plain merged list does."""
    from replay.kafka import writer

    path = str(tmp_path_factory.mktemp("spans") / "00000000000000000000.log")
    positions = [0]
    with open(path, "wb") as f:
        for i, t in enumerate(times):
            f.write(writer.encode_batch(2 * i, [writer.noop(), writer.noop()], 1, t))
            positions.append(f.tell())
    cut = min(cut, len(times))
    parts = [(0, cut), (cut, len(times))] if cut < len(times) else [(0, cut)]
    spans = [replayer.TimeSpan(2 * a + 1, 2 * b - 1, times[b - 1], min(times[a:b]), path, positions[a],
                               positions[b] - positions[a]) for a, b in parts]
    columns = dict(sorted(extra))
    merged = {2 * i + 1: t for i, t in enumerate(times)}
    for offset, t in columns.items():
        merged[offset] = max(t, merged.get(offset, t))
    truth = replayer.OffsetTimes(sorted(merged.items()))
    index = replayer.OffsetTimes(sorted(columns.items()), spans)
    assert list(index) == list(truth)
    for offset in range(-3, 72):
        assert index.time_of(offset) == truth.time_of(offset), offset
    for t in range(-1, 47):
        assert index.offset_at_time(t) == truth.offset_at_time(t), t


@pytest.mark.parametrize("seed", range(3))
def test_batches_read_in_runs_change_no_answer(tmp_path: Any, monkeypatch: pytest.MonkeyPatch, seed: int) -> None:
    """With the compiled decoder, `needed_only` reads hand the replayer runs of plain batches (`native.BatchRun`),
    put on spans many at a time: every output is the one of the pure-Python decoder's batches, one at a time, with
    spans of every size, a high watermark inside the log, and overlapping dumps."""
    require_compiled_decoder("the compiled decoder (the only source of batch runs)")
    rng = random.Random(seed)
    steps: list[tuple[object, ...]] = []
    for i in range(400):  # mostly NoOp batches, as a controller writes them, with ACL batches and transactions
        roll = rng.random()
        steps += ([("create", i)] if roll < 0.1 else [("delete", i)] if roll < 0.15
                  else [("begin",), ("create", i), ("new_batch",), ("end",)] if roll < 0.17
                  else [("new_leader",)] if roll < 0.18 else [("noop",)])
        steps.append(("new_batch",))
    log = synth.log_from_steps(steps, seed=seed, valid=True)
    log = synth.SynthLog([synth.SynthBatch(b.base_offset, b.records, b.epoch, b.time - 1700 * (i % 3), b.control)
                          for i, b in enumerate(log.batches)])  # append times that do not always grow
    one, other = str(tmp_path / "one"), str(tmp_path / "other")
    synth.write_dump(log, one, synth.Layout(segment_every=40, snapshot_at=synth.quiet_snapshot_ends(log, [30])))
    synth.write_dump(log, other, synth.Layout(segment_every=13, drop_segments=(1,)))
    runs = [i for f in glob.glob(f"{one}/**/*.log", recursive=True)
            for i in batch.read_log_file_in_runs(f, False, replayer.NEEDED_RECORDS) if isinstance(i, native.BatchRun)]
    assert sum(len(r.positions) for r in runs) > 200, "most batches come in runs"
    try:
        for span_bytes in (replayer.SPAN_BYTES, 1500, 150):
            for hw in (None, log.end_offset // 2):
                for paths in ([one], [one, other]):
                    monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
                    native.refresh()
                    in_runs = _replay(span_bytes, paths, True, hw)
                    monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
                    native.refresh()
                    reference = _replay(span_bytes, paths, True, hw)
                    _same(in_runs, reference)
    finally:
        monkeypatch.undo()
        native.refresh()


def test_runs_around_odd_batches_change_no_answer(tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """Runs broken by a batch of no record, a batch whose CRC fails, an epoch change and an ACL batch replay as the
    pure-Python decoder's batches do, one at a time."""
    require_compiled_decoder("the compiled decoder (the only source of batch runs)")
    from replay.kafka import files, writer
    from replay.kafka.acl import AclBinding

    def noops(first: int, n: int, epoch: int) -> bytes:
        return b"".join(writer.encode_batch(first + i, [writer.noop()], epoch, 1000 + first + i) for i in range(n))

    acl = writer.acl_record("AAAAAAAAAAAAAAAAAAAAAA", AclBinding.of("TOPIC", "t", "LITERAL", "User:a", "*", "READ",
                                                                  "ALLOW"))
    data = (noops(0, 20, 1) + writer.assemble_batch(20, b"", 0, -1, epoch=1) + noops(20, 10, 1)
            + writer.corrupt_crc(writer.encode_batch(30, [writer.noop()], 1, 1030)) + noops(31, 10, 1)
            + noops(41, 10, 2) + writer.encode_batch(51, [acl], 2, 1051) + noops(52, 30, 2))
    part = tmp_path / files.METADATA_PARTITION_DIR
    part.mkdir()
    (part / files.segment_name(0)).write_bytes(data)
    try:
        for hw in (None, 25, 45, 60):
            monkeypatch.setenv(native.PURE_PYTHON_ENV, "0")
            native.refresh()
            in_runs = _replay(400, [str(tmp_path)], True, hw)
            monkeypatch.setenv(native.PURE_PYTHON_ENV, "1")
            native.refresh()
            _same(in_runs, _replay(400, [str(tmp_path)], True, hw))
    finally:
        monkeypatch.undo()
        native.refresh()
