"""The real dumps committed in data/ (made by `python -m tests.harness.make_samples`): Kafka reads them, Kafka's own
decoding replays to the recorded describeAcls checkpoints, and so must ours (`render_file`, `replay_paths`).

No broker: these need only Java and the cached Kafka jars (Kafka's DumpLogSegments, one JVM per sample), so they
carry the `jvm` marker and run in the fast suite.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import pytest

from replay.kafka.acl import AclBinding
from tests.harness.dumplog import acl_state, dump_each, payload_records
from tests.harness.histories import read_checkpoints

pytestmark = pytest.mark.jvm

DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(p.parent for p in DATA.glob("*/checkpoints.jsonl"))


def _files(sample: Path) -> list[Path]:
    part = sample / "__cluster_metadata-0"
    return [*sorted(part.glob("*.log")), *sorted(part.glob("*.checkpoint")), sample / "bootstrap.checkpoint"]


@functools.cache
def _kafka_dumps(sample: Path) -> dict[Path, str]:
    """Kafka's DumpLogSegments output for every file of a sample, keyed by absolute path (one JVM per sample)."""
    return dump_each(_files(sample))


def _known_states(sample: Path, dumps: dict[Path, str]) -> tuple[int, list, dict[str, AclBinding]]:
    """Where Kafka's own decoding can answer from: (first answerable offset, log records, base state)."""
    part = sample / "__cluster_metadata-0"
    segments = sorted(part.glob("*.log"))
    records = [r for seg in segments for r in payload_records(dumps[seg.resolve()])]
    first_log = int(segments[0].name[:20])
    if first_log == 0:
        return 0, records, {}
    # Log start above 0 (retention): start from the oldest snapshot that reaches the log, as Kafka does.
    snaps = sorted((int(s.name[:20]), s) for s in part.glob("*.checkpoint") if int(s.name[:20]) >= first_log)
    end, snap = snaps[0]
    base = acl_state(payload_records(dumps[snap.resolve()]))
    return end - 1, [r for r in records if r.offset is not None and r.offset >= end], base


def test_there_are_samples() -> None:
    assert len(SAMPLES) >= 2


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_sample_is_small_and_documented(sample: Path) -> None:
    assert (sample / "README.md").is_file()
    assert (sample / "meta.properties").is_file() and (sample / "bootstrap.checkpoint").is_file()
    assert list((sample / "__cluster_metadata-0").glob("*.log"))
    assert sum(f.stat().st_size for f in sample.rglob("*") if f.is_file()) < 2 * 1024 * 1024
    assert not list(sample.rglob("*.index")) and not list(sample.rglob("*.timeindex"))
    checkpoints = [json.loads(line) for line in (sample / "checkpoints.jsonl").read_text().splitlines()]
    assert checkpoints and all(cp["matches_expected"] for cp in checkpoints)


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_kafka_decoding_of_sample_matches_its_checkpoints(sample: Path) -> None:
    dumps = _kafka_dumps(sample)
    assert not any("isvalid: false" in text for text in dumps.values())
    first, records, base = _known_states(sample, dumps)
    checked = 0
    for cp in read_checkpoints(sample / "checkpoints.jsonl"):
        if cp["as_of_offset"] < first:
            continue  # before anything the dump still holds (retention)
        for offset in (cp["as_of_offset"], cp["high_watermark_after"] - 1):
            assert frozenset(acl_state(records, offset, base).values()) == cp["acls"], (cp["label"], offset)
        checked += 1
    assert checked >= 1


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_render_file_matches_kafka_on_sample(sample: Path) -> None:
    from replay.kafka.dumplog import render_file

    dumps = _kafka_dumps(sample)
    assert len(dumps) == len(_files(sample))
    for f, text in dumps.items():
        assert [line.rstrip("\n") for line in render_file(str(f))] == text.splitlines(), f.name


@pytest.mark.parametrize("sample", SAMPLES, ids=lambda p: p.name)
def test_reference_replayer_matches_sample_checkpoints(sample: Path) -> None:
    """Exact where the dump covers the offset; never a confident wrong answer where retention removed it."""
    from replay.kafka.dump import replay_paths

    result = replay_paths([str(f) for f in _files(sample)])
    first, _records, _base = _known_states(sample, _kafka_dumps(sample))
    exact = 0
    for cp in read_checkpoints(sample / "checkpoints.jsonl"):
        state = result.state_at(cp["as_of_offset"])
        if cp["as_of_offset"] >= first:
            assert state.exact, cp["label"]
            assert frozenset(state.certain.values()) == cp["acls"], cp["label"]
            exact += 1
        else:
            assert not state.exact, cp["label"]
    assert exact >= 1
