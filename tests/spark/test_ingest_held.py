"""Bytes of a dump the lake holds already (`replay.spark.ingest_held`): a node's next dump repeats its last one and
goes on; only what is past the bytes an earlier ingest read is decoded, and the lake ends up as if all were."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
from pathlib import Path
from typing import Any

import pytest

from bench import realistic_log
from bench.bench_fleet import cut_dump
from replay.kafka import files
from replay.kafka.batch import read_file
from replay.kafka.model import Batch
from replay.spark import ingest_held
from replay.spark.ingest_decode import PlannedFile, decode_file
from replay.spark.ingest_held import Hashed, hash_plan, held_length, prefix_digests, to_record, trim
from replay.spark.ingest_plan import split_plan
from replay.spark.tables import INGESTED_FILES, METADATA_RECORDS, QUARANTINE, Lake


def _log(tmp_path: Path) -> tuple[Path, dict[str, Any]]:
    """A realistic log of several segments with snapshots, as one node's `__cluster_metadata-0`."""
    manifest = realistic_log.generate(realistic_log.LogShape(4_000, seed=5, segment_bytes=64 << 10), tmp_path / "whole")
    return tmp_path / "whole" / files.METADATA_PARTITION_DIR, manifest


def test_the_longest_recorded_prefix_the_file_begins_with_is_held(tmp_path: Path) -> None:
    data = bytes(range(256)) * 40
    path = tmp_path / "00000000000000000000.log"
    path.write_bytes(data)
    digests, whole = prefix_digests(str(path), [100, 5000, 20_000])
    assert digests == {n: hashlib.sha256(data[:n]).digest() for n in (100, 5000)}  # 20,000 lies past the end
    assert whole == hashlib.sha256(data).digest()
    segment = PlannedFile(str(path), len(data), "segment", cluster="c")
    other = hashlib.sha256(b"x" * 5000).digest()  # another node's bytes under the same name
    recorded = [(100, digests[100]), (5000, other), (len(data), hashlib.sha256(data[:-1] + b"?").digest())]
    assert held_length(segment, recorded, digests, whole) == 100
    assert held_length(segment, [*recorded, (len(data), whole)], digests, whole) == len(data)
    assert held_length(segment, [(5000, other)], digests, whole) == 0
    snapshot = PlannedFile(str(path), len(data), "snapshot", cluster="c")  # a snapshot is held only whole
    assert held_length(snapshot, recorded, digests, whole) == 0
    assert held_length(snapshot, [(len(data), whole)], digests, whole) == len(data)
    # hashed in threads; a file gone since it was listed, or grown, is left to the decoder (which reports it)
    gone = PlannedFile(str(tmp_path / "00000000000000000100.log"), 10, "segment", cluster="c")
    listed_shorter = PlannedFile(str(path), len(data) - 1, "segment", cluster="c")
    recorded_now = {("c", path.name): [(100, digests[100])]}
    assert hash_plan([segment, gone, listed_shorter], recorded_now) == [Hashed(segment, whole, 100)]


def test_a_file_past_its_held_prefix_decodes_like_the_rest_of_the_whole_file(tmp_path: Path) -> None:
    """The piece past a held prefix (its walk starting there) and any split of it give exactly the rows the whole
    file gives for the batches that start past the prefix; a file held whole leaves the plan."""
    source, _ = _log(tmp_path)
    path = sorted(source.glob("*.log"))[0]
    whole = PlannedFile(str(path), path.stat().st_size, "segment", cluster="c")

    def rows(entries: list[PlannedFile]) -> list[tuple[Any, ...]]:
        out = []
        for e in entries:
            with open(e.uri, "rb") as f:
                out += [(r["row_type"], r.get("offset"), r.get("file_position"), r.get("content_hash"))
                        for r in decode_file(e, f)]
        return out

    expected = rows([whole])
    positions = [b.header.position for b in read_file(str(path), strict=True) if isinstance(b, Batch)]
    assert len(positions) > 20
    for held in (positions[1], positions[len(positions) // 2], positions[-1]):
        plan, kept = trim([whole], [Hashed(whole, b"", held)])
        assert [(p.start, p.end, p.batch_at) for p in plan] == [(held, whole.length, held)] and len(kept) == 1
        past = [r for r in expected if r[2] >= held]
        assert rows(plan) == past and past
        for split in (1000, 4096, 30_000):
            assert rows(split_plan(plan, split)) == past, (held, split)
    assert trim([whole], [Hashed(whole, b"", whole.length)]) == ([], [Hashed(whole, b"", whole.length)])
    assert trim([whole], [Hashed(whole, b"", 0)]) == ([whole], [])


def test_only_files_read_without_a_problem_and_not_recorded_yet_are_recorded() -> None:
    a = PlannedFile("/d/00000000000000000000.log", 10, "segment", cluster="c")
    b = PlannedFile("/d/00000000000000000100.log", 20, "segment", cluster="c")
    s = PlannedFile("/d/00000000000000000050-0000000001.checkpoint", 30, "snapshot", cluster="c")
    hashed = [Hashed(a, b"a", 0), Hashed(b, b"b", 0), Hashed(s, b"s", 30)]
    recorded = {("c", s.name): [(30, b"s")], ("c", a.name): [(5, b"a5")]}
    assert to_record(hashed, recorded, {b.uri}) == [hashed[0]]


def _records(lake: Lake, table: str = METADATA_RECORDS) -> list[tuple[Any, ...]]:
    rows = lake.read(table).drop("ingest_id").collect()
    return sorted(tuple(str(v) for v in r) for r in rows)


def _operations(lake: Lake) -> list[str]:
    return [r["operation"] for r in reversed(lake.history(METADATA_RECORDS).collect())
            if r["operation"] in ("MERGE", "WRITE")]


@pytest.mark.spark
def test_a_nodes_next_dump_is_decoded_only_past_what_its_last_one_brought(spark: Any, tmp_path: Path) -> None:
    """Day 2's dump repeats day 1's files, grown, and its snapshots: only the new bytes are decoded and appended,
    and the lake holds exactly what decoding every byte gives. Day 2 again is held whole and writes nothing; a copy
    with one byte changed in a held stretch is decoded whole, and its problem found where it is."""
    from replay.spark.ingest import ingest

    source, manifest = _log(tmp_path)
    days = {}
    for day, end in (("day1", 1_800), ("day2", manifest["last_offset"] + 1)):
        cut_dump(source, tmp_path / day / files.METADATA_PARTITION_DIR, end)
        days[day] = str(tmp_path / day)
    lake, every = Lake(spark, str(tmp_path / "lake")), Lake(spark, str(tmp_path / "every"))
    for at in (lake, every):
        first = ingest(spark, [days["day1"]], "c", at, progress=False)
        assert first.held_files == 0 and first.records_new > 0
    day2 = ingest(spark, [days["day2"]], "c", lake, progress=False)
    day2_all = ingest(spark, [days["day2"]], "c", every, progress=False, decode_all=True)
    assert _records(lake) == _records(every)
    assert _records(lake, QUARANTINE) == _records(every, QUARANTINE) == []
    assert day2.records_new == day2_all.records_new > 0
    assert day2.records < day2_all.records and day2_all.held_files == 0
    day1_files = sorted(p.name for p in (tmp_path / "day1" / files.METADATA_PARTITION_DIR).iterdir())
    day1_bytes = sum(p.stat().st_size for p in (tmp_path / "day1" / files.METADATA_PARTITION_DIR).iterdir())
    assert day2.held_files == len(day1_files) and day2.held_bytes == day1_bytes
    assert sorted(day2.files) == sorted(day2_all.files) and day2.bytes == day2_all.bytes
    # past what the lake held: an append; decoding every byte found them all held and MERGEd
    assert _operations(lake) == ["WRITE", "WRITE"] and _operations(every) == ["WRITE", "MERGE"]
    recorded = lake.read(INGESTED_FILES).collect()
    day2_names = sorted(p.name for p in (tmp_path / "day2" / files.METADATA_PARTITION_DIR).iterdir())
    assert sorted({r["file_name"] for r in recorded}) == day2_names
    grown = [n for n in day1_files if n.endswith(".log")
             and (tmp_path / "day1" / files.METADATA_PARTITION_DIR / n).stat().st_size
             < (tmp_path / "day2" / files.METADATA_PARTITION_DIR / n).stat().st_size]
    assert len(recorded) == len(day2_names) + len(grown)  # a grown segment at both lengths, the rest once
    assert all(r["sha256"] == hashlib.sha256(Path(r["source_file"].removeprefix("file:")).read_bytes()).digest()
               for r in recorded)

    version = lake.version(METADATA_RECORDS)
    again = ingest(spark, [days["day2"]], "c", lake, progress=False)
    assert (again.records, again.records_new, again.held_files) == (0, 0, len(day2_names))
    assert again.held_bytes == again.bytes == day2.bytes
    assert lake.version(METADATA_RECORDS) == version and lake.read(INGESTED_FILES).count() == len(recorded)
    assert "held already" in str(again)

    # one byte changed inside the first batch's records of the first segment: that file is decoded whole
    changed = tmp_path / "changed" / files.METADATA_PARTITION_DIR
    shutil.copytree(tmp_path / "day2" / files.METADATA_PARTITION_DIR, changed)
    segment = sorted(changed.glob("*.log"))[0]
    data = bytearray(segment.read_bytes())
    data[70] ^= 0xFF
    os.unlink(segment)
    segment.write_bytes(bytes(data))
    damaged = ingest(spark, [str(changed.parent)], "c", lake, progress=False)
    assert damaged.held_files == len(day2_names) - 1
    assert damaged.problems_by_kind.get("bad_crc") == 1, damaged.problems_by_kind
    found = lake.read(QUARANTINE).collect()
    assert len(found) == damaged.problems and all(r["source_file"].endswith(segment.name) for r in found)
    assert [r["file_position"] for r in found if r["kind"] == "bad_crc"] == [0]
    assert lake.read(INGESTED_FILES).count() == len(recorded)  # the damaged file is not recorded
    meta = json.loads(lake.history(INGESTED_FILES).first()["userMetadata"])
    assert meta["table"] == INGESTED_FILES and meta["cluster_ids"] == ["c"]

    # a lake directory's records are read with delta-rs; a catalog lake's through Spark: the same
    names = {"c": day2_names, "other": day2_names}
    found = ingest_held.read_recorded(lake, names)
    assert sum(len(v) for v in found.values()) == len(recorded) and {c for c, _ in found} == {"c"}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(ingest_held, "_read_with_delta_rs", lambda *_: None)
        by_spark = ingest_held.read_recorded(lake, names)
    assert {k: sorted(v) for k, v in by_spark.items()} == {k: sorted(v) for k, v in found.items()}
