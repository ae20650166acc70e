"""The fleet benchmark's daily dumps (`bench.bench_fleet.cut_dump`): a day's dump is the log as it stood before that
day's end, cut at a batch boundary, with the snapshots taken by then; what it holds is exactly the whole log's
records before that point, so a later day repeats it and adds to it, as a node's next dump does."""

from __future__ import annotations

from pathlib import Path

from bench import realistic_log
from bench.bench_fleet import cut_dump
from replay.kafka import files
from replay.kafka.batch import read_file
from replay.kafka.model import Batch


def _batches(partition: Path) -> list[list[int]]:
    """Each batch's record offsets, in log order."""
    return [[r.offset for r in b.records] for p in sorted(partition.glob("*.log"))
            for b in read_file(str(p), strict=True) if isinstance(b, Batch)]


def test_a_days_dump_holds_the_log_before_its_end_and_the_snapshots_taken_by_then(tmp_path: Path) -> None:
    shape = realistic_log.LogShape(4_000, seed=3, segment_bytes=64 << 10)  # several segments
    manifest = realistic_log.generate(shape, tmp_path / "whole")
    source = tmp_path / "whole" / files.METADATA_PARTITION_DIR
    assert len(manifest["segments"]) > 2, manifest["segments"]
    whole = _batches(source)
    for end in (1, 1_500, 2_000, 3_999, manifest["last_offset"] + 1):
        target = tmp_path / f"cut-{end}" / files.METADATA_PARTITION_DIR
        cut_dump(source, target, end)
        # whole batches only: those ending before `end`; the batch holding `end` is the first left out
        assert _batches(target) == [b for b in whole if b[-1] < end]
        snapshots = sorted(p.name for p in target.glob("*.checkpoint"))
        assert snapshots == [s["file"] for s in manifest["snapshots"] if s["end_offset"] <= end]
        for p in target.iterdir():  # untouched files are the source's own (hard links), cut ones are new
            assert (p.stat().st_ino == (source / p.name).stat().st_ino) == (p.read_bytes() == (source / p.name).read_bytes())
