"""The reference replayer against the truth, on random histories (hypothesis).

The truth is the whole log replayed with nothing missing. Dumps then lose segments to retention and keep
snapshots, as real ones do, and the answers from what is left must stay honest at every offset:

* what is called certain is live in truth;
* where the history is complete, everything live in truth is certain or uncertain;
* an exact answer is the truth;
* with nothing missing, every answer is exact, and snapshots that agree with the log change nothing.
"""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from replay.kafka import synth
from replay.kafka.model import ProblemKind
from replay.kafka.replayer import Replayer
from tests.histories import CUTS, NO_TRANSACTIONS, STEPS


def replay_dump(directory: str) -> Any:
    from replay.kafka.dump import replay_paths

    return replay_paths([directory])


def truth_of(log: synth.SynthLog) -> Any:
    r = Replayer()
    r.add_log(synth.model_batches(log))
    return r.run()


def assert_honest(truth: Any, got: Any) -> None:
    last = -1 if got.last_offset is None else got.last_offset  # beyond it nothing is known (not covered)
    for offset in range(last + 1):
        real = truth.state_at(offset).certain
        answer = got.state_at(offset)
        assert answer.certain.items() <= real.items(), offset
        if answer.complete:
            assert real.keys() <= answer.certain.keys() | answer.uncertain.keys(), offset
        if answer.exact:
            assert answer.certain == real, offset
    for life in got.lifetimes:  # bounds are ordered
        assert life.valid_from_min_offset <= life.valid_from_offset
        if life.valid_to_offset is not None:
            assert life.valid_from_offset <= life.valid_to_offset
            assert life.valid_to_min_offset is not None and life.valid_to_min_offset <= life.valid_to_offset


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, cuts=CUTS.filter(bool), keep_from=st.integers(0, 3), segment_every=st.sampled_from([3, 7, 15]))
def test_answers_after_retention_are_honest(tmp_path_factory: Any, steps: list[tuple[Any, ...]], cuts: list[int],
                                            keep_from: int, segment_every: int) -> None:
    """Retention as Kafka does it: segments below a snapshot's end offset are gone, the snapshots remain."""
    log = synth.log_from_steps(steps, valid=True)
    snaps = synth.quiet_snapshot_ends(log, cuts)
    directory = str(tmp_path_factory.mktemp("dump"))
    synth.write_dump(log, directory, synth.Layout(segment_every=segment_every, snapshot_at=snaps))
    if snaps:
        synth.apply_retention(directory, snaps[min(keep_from, len(snaps) - 1)])
    got = replay_dump(directory)
    assert ProblemKind.SNAPSHOT_MISMATCH not in {p.kind for p in got.anomalies}  # snapshots come from the log
    assert_honest(truth_of(log), got)


@settings(max_examples=200, deadline=None)
@given(steps=NO_TRANSACTIONS, cuts=CUTS,
       drop=st.lists(st.integers(0, 8), max_size=3, unique=True), segment_every=st.sampled_from([3, 7, 15]))
def test_answers_from_partial_dumps_are_honest(tmp_path_factory: Any, steps: list[tuple[Any, ...]],
                                               cuts: list[int], drop: list[int], segment_every: int) -> None:
    """Any segments missing (a user copied only some files), with or without snapshots around the holes.

    Transactions are left out: one whose Begin or End falls in a hole that no snapshot bridges cannot be told
    apart from committed records (Kafka itself never leaves such a hole; see `test_replayer.py`).
    """
    log = synth.log_from_steps(steps, valid=True)
    snaps = synth.quiet_snapshot_ends(log, cuts)
    directory = str(tmp_path_factory.mktemp("dump"))
    synth.write_dump(log, directory, synth.Layout(segment_every=segment_every, snapshot_at=snaps,
                                                  drop_segments=tuple(drop)))
    got = replay_dump(directory)
    assert ProblemKind.SNAPSHOT_MISMATCH not in {p.kind for p in got.anomalies}
    assert_honest(truth_of(log), got)


@settings(max_examples=200, deadline=None)
@given(steps=STEPS, cuts=CUTS)
def test_nothing_missing_means_every_answer_is_exact(tmp_path_factory: Any, steps: list[tuple[Any, ...]],
                                                     cuts: list[int]) -> None:
    """Any log, anomalies included: with every offset present, snapshots add nothing and every answer is exact."""
    log = synth.log_from_steps(steps)
    end = log.end_offset
    truth = truth_of(log)
    directory = str(tmp_path_factory.mktemp("dump"))
    synth.write_dump(log, directory, synth.Layout(segment_every=5, snapshot_at=synth.quiet_snapshot_ends(log, cuts)))
    got = replay_dump(directory)
    assert {p.kind for p in got.anomalies} <= {ProblemKind.DUPLICATE_ID, ProblemKind.UNKNOWN_REMOVE,
                                               ProblemKind.NESTED_BEGIN, ProblemKind.END_WITHOUT_BEGIN,
                                               ProblemKind.ABORT_WITHOUT_BEGIN, ProblemKind.PENDING_TRANSACTION}
    assert all(e.cause.value != "SNAPSHOT_LOAD" for e in got.events)
    for offset in range(end):
        answer = got.state_at(offset)
        assert answer.exact, offset
        assert answer.certain == truth.state_at(offset).certain, offset


def test_a_hole_ending_inside_a_transaction_stays_incomplete_until_its_end(tmp_path: Any) -> None:
    """Found by hypothesis: create 0, begin, delete 0 | end, retention up to the snapshot after the End. Offset 2
    lies in the hole and the delete there takes effect only at the End (offset 3), so ACL 0 is live at 2 in
    truth: the answer at 2 must not be complete without it."""
    steps: list[tuple[Any, ...]] = [("create", 0), ("begin",), ("delete", 0), ("new_batch",), ("end",)]
    log = synth.log_from_steps(steps, valid=True)
    snaps = synth.quiet_snapshot_ends(log, [4])
    synth.write_dump(log, str(tmp_path), synth.Layout(segment_every=3, snapshot_at=snaps))
    synth.apply_retention(str(tmp_path), snaps[0])
    assert_honest(truth_of(log), replay_dump(str(tmp_path)))
