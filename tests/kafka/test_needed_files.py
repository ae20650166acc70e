"""`acls PATH` answered from the files the moment needs (`needed_files`) is the whole replay's answer, or is not
given: on a realistic dump with snapshots, segments, transactions and failovers, at every 61st offset, every
snapshot's edges, the end, and many times; on the samples; and on dumps with a problem after the snapshot."""

from __future__ import annotations

import io
import re
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench.realistic_log import LogShape, generate
from replay import cli
from replay.kafka import batch, native, samples
from replay.kafka.dump import discover, replay_sources
from replay.kafka.model import Batch, SourceFile, SourceKind
from replay.kafka.needed_files import MomentAnswer, replay_for_moment
from replay.kafka.replayer import ReplayResult

SHAPE = LogShape(records=20_000, segment_bytes=128 << 10, snapshot_every=1500, failover_every=3000, live_acls=300)


@pytest.fixture(scope="module")
def dump(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("realistic")
    generate(SHAPE, root)
    return root / "__cluster_metadata-0"


def assert_same(moment: MomentAnswer, full: ReplayResult, offset: int) -> None:
    mine, theirs = moment.result.state_at(offset), full.state_at(offset)
    assert moment.offset == offset
    assert (mine.certain, mine.uncertain, mine.covered, mine.complete, mine.unpublished) == (
        theirs.certain, theirs.uncertain, theirs.covered, theirs.complete, theirs.unpublished), offset
    assert moment.result.time_of(offset) == full.time_of(offset), offset


def offsets_to_ask(sources: list[SourceFile], last: int) -> Iterator[int]:
    for s in sources:
        if s.kind == SourceKind.SNAPSHOT and s.snapshot_end_offset:
            yield from (s.snapshot_end_offset - 2, s.snapshot_end_offset - 1, s.snapshot_end_offset)
    yield from range(0, last + 1, 61)
    yield last


@pytest.mark.slow  # a replay per offset asked: 20-40 s
def test_the_needed_files_give_the_whole_replays_answer_at_every_offset_asked(dump: Path) -> None:
    sources, _ = discover([str(dump)])
    full = replay_sources(sources, needed_only=True)
    assert full.last_offset == SHAPE.records - 1 and not full.anomalies
    first_snapshot = min(s.snapshot_end_offset or 0 for s in sources if s.kind == SourceKind.SNAPSHOT)
    asked = answered = 0
    for offset in sorted(set(offsets_to_ask(sources, full.last_offset))):
        moment = replay_for_moment(sources, offset=offset)
        if offset < first_snapshot - 1:
            assert moment is None, offset  # no snapshot before it: only the whole log knows
            continue
        asked += 1
        if moment is not None:
            answered += 1
            assert_same(moment, full, offset)
            assert len(moment.read) < len(sources) / 3 and moment.unread
    # the shortcut declines only where a transaction is open at the end of what it read, or at the last segment
    assert answered >= 0.9 * asked, (answered, asked)
    end = replay_for_moment(sources)
    assert end is not None and end.offset == full.last_offset
    assert_same(end, full, full.last_offset)


def test_the_needed_files_find_the_offset_of_a_time_as_the_whole_replay_does(dump: Path) -> None:
    sources, _ = discover([str(dump)])
    full = replay_sources(sources, needed_only=True)
    first, last = full.time_of(0), full.time_of(full.last_offset)
    assert first is not None and last is not None
    answered = 0
    for k in range(60):
        when = first + (last - first) * k // 59 + (k % 3) - 1
        moment = replay_for_moment(sources, time=when)
        if moment is None:
            continue
        answered += 1
        assert moment.offset == full.offset_at_time(when), when
        assert_same(moment, full, moment.offset)
    assert answered >= 45


def test_the_samples_get_the_same_answer_whichever_way_they_are_read() -> None:
    data = samples.default_data_dir()
    assert data is not None, "the samples in data/ are part of the repository"
    taken = 0
    for sample in samples.sample_dirs(data):
        sources, _ = discover([str(sample)])
        full = replay_sources(sources, needed_only=True)
        assert full.last_offset is not None
        for offset in range(full.last_offset + 1):
            moment = replay_for_moment(sources, offset=offset)
            if moment is not None:
                taken += 1
                assert_same(moment, full, offset)
    assert taken > 0


def test_a_problem_after_the_snapshot_or_a_snapshot_that_does_not_load_sends_the_question_to_the_whole_replay(
        dump: Path, tmp_path: Path) -> None:
    sources, _ = discover([str(dump)])
    offset = SHAPE.records - 100
    moment = replay_for_moment(sources, offset=offset)
    assert moment is not None
    segment = next(s for s in moment.read if s.kind == SourceKind.SEGMENT)
    snapshot = moment.snapshot
    for broken in (segment, snapshot):
        copy = tmp_path / broken.name
        shutil.rmtree(copy, ignore_errors=True)
        shutil.copytree(dump, copy)
        target = copy / broken.name
        data = bytearray(target.read_bytes())
        data[len(data) // 2] ^= 0xFF  # a bad CRC inside the file the shortcut would read
        target.write_bytes(bytes(data))
        damaged, _ = discover([str(copy)])
        assert replay_for_moment(damaged, offset=offset) is None, broken.name
        full = replay_sources(damaged, needed_only=True)
        assert full.anomalies  # the whole replay says what is wrong (and still answers where it can)


def test_kraft_replay_acls_says_which_files_it_read_and_read_all_gives_the_same_listing(
        dump: Path, capsys: pytest.CaptureFixture[str]) -> None:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        out = io.StringIO()
        code = cli.main(["acls", str(dump), *argv], out)
        return code, out.getvalue(), capsys.readouterr().err

    for question in (["--as-of-offset", str(SHAPE.records - 500)], []):
        code, shortcut, err = run(*question)
        assert code == 0 and "was not needed and was not read" in err, err
        assert re.search(r"^no problems found in the [23] files read$", err, re.M), err
        code, whole, err_all = run(*question, "--read-all")
        assert code == 0 and "not read" not in err_all and "no problems found\n" in err_all
        assert shortcut == whole and shortcut.count("(principal=") > 100
        code, strict, err_strict = run(*question, "--strict")
        assert (code, strict) == (0, whole) and "not read" not in err_strict


def test_a_segment_is_entered_at_the_batch_holding_an_offset(dump: Path, tmp_path: Path) -> None:
    segment = sorted(dump.glob("*.log"))[1]
    batches = [b for b in batch.read_file(str(segment)) if isinstance(b, Batch)]
    for b in batches[:: max(1, len(batches) // 40)] + batches[-1:]:
        for offset in (b.header.base_offset, b.header.last_offset):
            assert batch.batch_position(str(segment), offset) == (b.header.position, b.header.base_offset)
    assert batch.batch_position(str(segment), batches[-1].header.last_offset + 1) is None  # past its end
    data = bytearray(segment.read_bytes())
    data[batches[3].header.position + 16] = 1  # a magic byte that is not 2: the walk cannot be trusted
    broken = tmp_path / segment.name
    broken.write_bytes(bytes(data))
    assert batch.batch_position(str(broken), batches[2].header.base_offset) is not None  # before the damage
    assert batch.batch_position(str(broken), batches[-1].header.base_offset) is None


def test_the_pure_python_decoder_answers_from_the_needed_files_as_the_compiled_one(
        dump: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    sources, _ = discover([str(dump)])
    full = replay_sources(sources, needed_only=True)
    offsets = (SHAPE.records // 2 + 7, SHAPE.records - 300)
    try:
        for pure in ("1", "0"):
            monkeypatch.setenv(native.PURE_PYTHON_ENV, pure)
            native.refresh()
            for offset in offsets:
                moment = replay_for_moment(sources, offset=offset)
                assert moment is not None and moment.log_from is not None and moment.log_from > 0
                assert_same(moment, full, offset)
    finally:
        monkeypatch.undo()
        native.refresh()
