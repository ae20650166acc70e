"""Ingest of dumps into metadata_records / quarantine: rows, idempotence, bad input, strict mode, many clusters."""

from __future__ import annotations

import glob
import json
import os
import shutil
from typing import Any

import pyarrow as pa
import pytest
from pyspark.sql import SparkSession
from spark_dumps import (
    ALICE_READ,
    BOB_WRITE,
    DATA,
    T0,
    acl_id,
    write_bad_segment,
    write_batches,
    write_dump,
)

from replay.kafka import dumplog, writer
from replay.spark import ingest_decode, ingest_plan, ingest_write
from replay.spark.ingest import IngestError, StrictIngestError, decode_plan, ingest
from replay.spark.ingest_decode import PlannedFile, decode_file
from replay.spark.ingest_plan import (
    DEFAULT_SPLIT_BYTES,
    MIN_SPLIT_BYTES,
    TASK_BYTES,
    classify_listing,
    local_path_of,
    pack_tasks,
    split_for_cores,
    split_plan,
)
from replay.spark.ingest_rows import arrow_schema, record_hash
from replay.spark.ingest_summary import summarise, summary_rows
from replay.spark.ingest_summary_rows import SUMMARY_FIELDS, LogCounts
from replay.spark.ingest_tally import OffsetTally, no_repeated_keys
from replay.spark.session import get_spark
from replay.spark.tables import METADATA_RECORDS, QUARANTINE, Lake

# ---- pure Python: planning and hashing (no Spark) ----------------------------------------------------------------


def test_classify_listing_like_files_discover() -> None:
    root = "file:/d/logdir"
    listed = [
        (f"{root}/bootstrap.checkpoint", 10),
        (f"{root}/meta.properties", 5),
        (f"{root}/__cluster_metadata-0/00000000000000000000.log", 100),
        (f"{root}/__cluster_metadata-0/00000000000000000000.index", 8),
        (f"{root}/__cluster_metadata-0/00000000000000000042-0000000003.checkpoint", 50),
        (f"{root}/__cluster_metadata-0/leader-epoch-checkpoint", 3),
        (f"{root}/orders-0/00000000000000000000.log", 999),  # another topic's partition: skipped
        (f"{root}/notes.txt", 7),  # unknown name: sniffed on the executor
    ]
    planned, ignored = classify_listing([root], listed)
    kinds = {p.name: p.kind for p in planned}
    assert kinds == {
        "bootstrap.checkpoint": "bootstrap",
        "00000000000000000042-0000000003.checkpoint": "snapshot",
        "00000000000000000000.log": "segment",
        "notes.txt": "unknown",
    }
    assert [p.kind for p in planned] == ["bootstrap", "snapshot", "segment", "unknown"]  # replay order
    snap = next(p for p in planned if p.kind == "snapshot")
    assert (snap.snapshot_end_offset, snap.snapshot_epoch) == (42, 3)
    assert f"{root}/orders-0/00000000000000000000.log" in ignored
    assert f"{root}/__cluster_metadata-0/00000000000000000000.index" in ignored
    assert not any(p.explicit for p in planned)


def test_classify_listing_explicit_file_is_always_kept() -> None:
    planned, ignored = classify_listing(["/x/garbage.bin"], [("file:/x/garbage.bin", 3)])
    assert ignored == []
    assert planned == [PlannedFile("file:/x/garbage.bin", 3, "unknown", explicit=True)]


def test_local_path_of() -> None:
    assert local_path_of("file:/tmp/a.log") == "/tmp/a.log"
    assert local_path_of("file:///tmp/a.log") == "/tmp/a.log"
    assert local_path_of("/tmp/a.log") == "/tmp/a.log"
    assert local_path_of("s3a://bucket/a.log") is None


def _bad_files(tmp_path: Any) -> list[str]:
    """Segments with every kind of framing damage, next to good batches."""
    g = [writer.encode_batch(i, [writer.acl_record(acl_id(i + 1), ALICE_READ)], 1, T0 + i) for i in range(4)]
    cases = {
        "crc-and-tail": None,
        "too-short": g[0] + g[1] + writer.with_batch_length(g[2], 5) + g[3],
        "zeros": g[0] + g[1] + b"\0" * 300,
        "oversize": g[0] + writer.with_batch_length(g[1], 2**30) + g[2],
        "bad-magic": g[0] + writer.with_magic(g[1], 1) + g[2] + g[3],
        "bad-magic-past-end": g[0] + g[1] + writer.with_batch_length(writer.with_magic(g[2], 7), 5000),
        "garbage": b"not a kafka log at all, just text " * 10,
        "short-tail": g[0] + g[1] + g[2][:10],
        "empty": b"",
    }
    paths = []
    for name, data in cases.items():
        d = tmp_path / name
        if data is None:
            paths.append(write_bad_segment(str(d))[0])
        else:
            paths.append(write_batches(str(d), [data]))
    return paths


def test_pieces_decode_exactly_like_the_whole_file(tmp_path: Any) -> None:
    """Every split size of damaged files gives the rows of the whole file, in the same order."""
    def rows(entries: list[PlannedFile]) -> list[tuple[Any, ...]]:
        out = []
        for e in entries:
            with open(e.uri, "rb") as f:
                out += [(r["row_type"], r.get("offset"), r.get("file_position"), r.get("kind"), r.get("content_hash"),
                         r.get("message")) for r in decode_file(e, f)]
        return out

    for path in _bad_files(tmp_path):
        whole = PlannedFile(path, os.path.getsize(path), "segment", explicit=True)
        expected = rows([whole])
        for split in range(1, whole.length + 2):
            pieces = split_plan([whole], split)
            assert rows(pieces) == expected, (path, split)


def test_split_keeps_the_cores_busy_without_tiny_pieces() -> None:
    mib = 1 << 20
    one = [PlannedFile("/d/00000000000000000000.log", 20 * mib, "segment")]
    assert split_for_cores(one, DEFAULT_SPLIT_BYTES, 2) == 10 * mib
    assert [(p.start, p.end) for p in split_plan(one, 10 * mib)] == [(0, 10 * mib), (10 * mib, 20 * mib)]
    assert split_for_cores(one, DEFAULT_SPLIT_BYTES, 64) == MIN_SPLIT_BYTES  # never pieces below 4 MiB
    assert split_for_cores(one, DEFAULT_SPLIT_BYTES, 1) == 20 * mib  # one core: the whole file, one task
    big = [PlannedFile(f"/d/{i:020d}.log", 1024 * mib, "segment") for i in range(2)]
    assert split_for_cores(big, DEFAULT_SPLIT_BYTES, 2) == DEFAULT_SPLIT_BYTES  # capped at split_bytes
    assert split_for_cores(one, 0, 2) == 0  # 0 still means never split
    # files that cannot be split (text, or read through Spark) do not count
    text = [PlannedFile("/d/dump.txt", 20 * mib, "dump_log_text"),
            PlannedFile("s3://b/00000000000000000000.log", 20 * mib, "segment", open_with="spark")]
    assert split_for_cores(text, DEFAULT_SPLIT_BYTES, 2) == MIN_SPLIT_BYTES
    assert split_plan(text, MIN_SPLIT_BYTES) == text


def test_small_files_are_decoded_together_in_log_order_and_big_ones_alone() -> None:
    """A decoding task costs about as much as 4 MB of decoding: files far smaller go together, of one kind and in
    log order, so that what a task writes covers one stretch of offsets; a small input still gives every core work."""
    mib = 1 << 20

    def snap(end: int, size: int = mib // 2) -> PlannedFile:
        return PlannedFile(f"/d/{end:020d}-{2:010d}.checkpoint", size, "snapshot", end, 2)

    segments = [PlannedFile(f"/d/{i * 1000:020d}.log", 64 * mib, "segment") for i in range(3)]
    snaps = [snap(end) for end in range(100, 10_000, 100)]  # 99 of half a MiB
    tasks = pack_tasks([*snaps[::-1], *segments], cores=2)
    assert [len(t) for t in tasks] == [1, 1, 1, 32, 32, 32, 3]
    assert all(t[0].kind == "segment" for t in tasks[:3])
    ends = [[f.snapshot_end_offset for f in t] for t in tasks[3:]]
    assert [e for t in ends for e in t] == list(range(100, 10_000, 100))  # consecutive snapshots per task
    assert all(sum(f.size for f in t) <= TASK_BYTES for t in tasks[3:])
    # a small input: at least two tasks a core
    few = [snap(end, 100) for end in range(1, 9)]
    assert len(pack_tasks(few, cores=2)) == 4 and len(pack_tasks(few, cores=8)) == 8
    # kinds apart: a small segment is not decoded with snapshots
    mixed = pack_tasks([snap(5), PlannedFile("/d/00000000000000000000.log", mib // 2, "segment")], cores=1)
    assert sorted(t[0].kind for t in mixed) == ["segment", "snapshot"] and all(len(t) == 1 for t in mixed)


def test_a_task_of_several_clusters_keeps_each_ones_rows_tally_and_counts_apart(tmp_path: Any) -> None:
    """An ingest of many clusters packs their small files together, cluster by cluster and each in log order; a
    task's rows carry their cluster, and its offset tallies and log-record counts are per cluster (the same offsets
    in two clusters are no repeated key), as two tasks of one cluster each would give them."""
    from replay.spark.ingest_decode import make_stream_decoder

    dumps = {c: write_batches(str(tmp_path / c / "__cluster_metadata-0"), [
        writer.encode_batch(0, [writer.noop()], 1, T0),
        writer.encode_batch(1, [writer.acl_record(acl_id(1), ALICE_READ)], 1, T0 + 1)]) for c in ("a", "b")}
    small = [PlannedFile(f"/d/{c}/{i * 100:020d}.log", 1000, "segment", cluster=c)
             for c in ("c", "b", "a") for i in range(3, -1, -1)]
    packed = pack_tasks(small, cores=1)  # two tasks of six files
    assert [[(f.cluster, f.name[:-4].lstrip("0") or "0") for f in t] for t in packed] == [
        [("a", "0"), ("a", "100"), ("a", "200"), ("a", "300"), ("b", "0"), ("b", "100")],
        [("b", "200"), ("b", "300"), ("c", "0"), ("c", "100"), ("c", "200"), ("c", "300")]]
    tasks = [[PlannedFile(path, os.path.getsize(path), "segment", cluster=c, local_path=path)
              for c, path in sorted(dumps.items())]]  # one task: a's file, then b's

    class Counter:
        def __init__(self) -> None:
            self.value: list[Any] = []

        def add(self, items: Any) -> None:
            self.value = self.value + items if isinstance(items, list) else self.value

    for summary in (False, True):
        counters = (Counter(), Counter(), Counter())
        out = pa.Table.from_batches(list(make_stream_decoder(tasks, counters, summary)(
            iter([pa.record_batch([pa.array([0], pa.int64())], names=["id"])]))))
        if summary:  # one row a cluster counts its two log records
            got = out.group_by("cluster_id").aggregate([("_n", "sum"), ("_n", "count")]).to_pylist()
            assert sorted((r["cluster_id"], r["_n_sum"], r["_n_count"]) for r in got) == [("a", 2, 1), ("b", 2, 1)]
        else:
            got = out.group_by("cluster_id").aggregate([("offset", "count")]).to_pylist()
            assert sorted((r["cluster_id"], r["offset_count"]) for r in got) == [("a", 2), ("b", 2)]
        tallies = counters[2].value
        assert sorted((c, t[1], t[2]) for c, t in tallies) == [("a", 2, True), ("b", 2, True)]


def _decoded(rows: list[dict[str, Any]]) -> Any:
    """An Arrow batch of decoded rows (`DECODED_FIELDS`), the columns not given null."""
    schema = arrow_schema()
    return pa.RecordBatch.from_arrays([pa.array([r.get(f.name) for r in rows], f.type) for f in schema],
                                      schema=schema)


def test_offset_tallies_prove_that_no_key_repeats_and_nothing_less() -> None:
    """The write skips its duplicate check only on proof: every copy's offsets distinct within each task, tasks'
    ranges apart, and the tallies accounting for every row the summary counted."""
    log = ("log", None, None, None, None)
    snap = ("snapshot", 9, 1, "/d/a.checkpoint", None)

    def task(*batches: list[dict[str, Any]]) -> list[Any]:
        tally = OffsetTally()
        for rows in batches:
            tally.add(_decoded(rows))
        return tally.tallies()

    def records(offsets: range | list[int], **more: Any) -> list[dict[str, Any]]:
        return [{"row_type": "R", "stream": "log", "offset": o, "source_file": "/d/x.log", **more} for o in offsets]

    snapshot_rows = [{"row_type": "R", "stream": "snapshot", "snapshot_end_offset": 9, "snapshot_epoch": 1,
                      "offset": o, "source_file": "/d/a.checkpoint"} for o in range(3)]
    first = task([*records(range(0, 5)), {"row_type": "Q", "offset": 2}], snapshot_rows)
    second = task(records(range(5, 8), source_file="/d/y.log"))  # log rows of all files are one copy
    assert sorted(first + second) == sorted([(log, 5, True, 0, 4), (snap, 3, True, 0, 2), (log, 3, True, 5, 7)])
    assert no_repeated_keys(first + second, {log: 8, snap: 3})
    # another file's copy of the same snapshot is a copy of its own: its offsets may repeat the first one's
    other = task([{**r, "source_file": "/d/b.checkpoint"} for r in snapshot_rows])
    assert no_repeated_keys(first + second + other, {log: 8, snap: 3, (*snap[:3], "/d/b.checkpoint", None): 3})

    assert not no_repeated_keys(first + first, {log: 10, snap: 6})  # a task counted twice (run again)
    assert not no_repeated_keys(first + task(records(range(4, 6))), {log: 7, snap: 3})  # ranges meet
    assert not no_repeated_keys(task(records([0, 1]), records([1, 2])), {log: 4})  # one offset twice in a task
    assert not no_repeated_keys(task(records([0, None])), {log: 2})  # an offset unknown
    assert not no_repeated_keys(first, {log: 8, snap: 3})  # the rows of a task nobody tallied
    assert no_repeated_keys([], {})


def test_rising_batches_of_one_copy_are_tallied_by_their_spans() -> None:
    """A batch of one copy whose offsets rise (a compiled decoder's chunk) notes its span: spans apart prove the
    offsets distinct without counting them; batches that interleave, or do not rise, are counted offset by offset."""
    log = ("log", None, None, None, None)

    def rows(offsets: list[int | None], source: str = "/d/x.log") -> Any:
        return _decoded([{"row_type": "R", "stream": "log", "offset": o, "source_file": source} for o in offsets])

    def tally(*batches: Any) -> list[Any]:
        t = OffsetTally()
        for b in batches:
            t.add(b)
        return t.tallies()

    assert tally(rows([0, 1, 2]), rows([5, 9]), rows([3, 4], "/d/y.log")) == [(log, 7, True, 0, 9)]
    assert tally(rows([0, 2, 4]), rows([1, 3])) == [(log, 5, True, 0, 4)]  # interleaved: counted
    assert tally(rows([0, 2, 4]), rows([1, 2])) == [(log, 5, False, 0, 4)]
    assert tally(rows([0, 1, 2]), rows([9, 7, 5])) == [(log, 6, True, 0, 9)]  # not rising: counted
    assert tally(rows([0, 1, 2]), rows([9, 7, 1])) == [(log, 6, False, 0, 9)]
    assert tally(rows([0, 1]), rows([7, 7])) == [(log, 4, False, 0, 7)]
    assert tally(rows([0, None, 2])) == [(log, 3, False, 0, 2)]
    mixed = _decoded([{"row_type": "R", "stream": "snapshot", "snapshot_end_offset": 9, "snapshot_epoch": 1,
                       "offset": 0, "source_file": "/d/a.checkpoint"},
                      {"row_type": "R", "stream": "log", "offset": 0, "source_file": "/d/x.log"}])
    assert sorted(tally(mixed, rows([1, 2]))) == [(log, 3, True, 0, 2), (("snapshot", 9, 1, "/d/a.checkpoint", None),
                                                                        1, True, 0, 0)]


def test_log_counts_stand_for_the_log_records_they_count() -> None:
    """The summary pass's executors send a task's log records (and records with no stream) as one row per group
    with their count and offset range, across batches and with offsets unknown; every other row goes as it is."""
    counts = LogCounts()
    first = counts.shape(_decoded([
        {"row_type": "R", "stream": "log", "offset": 7, "source_file": "/d/x.log"},
        {"row_type": "R", "stream": "log", "offset": 3, "source_file": "/d/x.log"},
        {"row_type": "R", "stream": None, "offset": None},
        {"row_type": "R", "stream": "snapshot", "snapshot_end_offset": 9, "snapshot_epoch": 1, "offset": 2,
         "source_file": "/d/a.checkpoint", "content_hash": b"h"},
        {"row_type": "Q", "stream": "log", "kind": "CRC_MISMATCH", "offset": 5, "source_file": "/d/x.log"},
    ]))
    assert first is not None
    assert [(r["row_type"], r["stream"], r["offset"], r["_n"], r["_lo"], r["_hi"], r["content_hash"])
            for r in first.to_pylist()] == [("R", "snapshot", 2, 1, 2, 2, b"h"), ("Q", "log", 5, 1, 5, 5, None)]
    assert counts.shape(_decoded([{"row_type": "R", "stream": "log", "offset": o} for o in (11, 1)])) is None
    last = counts.last()
    assert last is not None and last.schema.names == [n for n, _ in SUMMARY_FIELDS]
    assert sorted(((r["stream"] or ""), r["_n"], r["_lo"], r["_hi"], r["source_file"]) for r in last.to_pylist()) == [
        ("", 1, None, None, None), ("log", 4, 1, 11, None)]
    assert LogCounts().last() is None
    # a batch of one file's log records only (the compiled decoder's chunks) is counted without grouping
    chunked = LogCounts()
    assert chunked.shape(_decoded([{"row_type": "R", "stream": "log", "offset": o} for o in (4, 5, 6)])) is None
    assert chunked.shape(_decoded([{"row_type": "R", "stream": "log", "offset": o} for o in (2, None)])) is None
    counted = chunked.last()
    assert counted is not None
    assert [(r["stream"], r["_n"], r["_lo"], r["_hi"]) for r in counted.to_pylist()] == [("log", 5, 2, 6)]


def test_record_hash_tells_null_from_empty() -> None:
    assert record_hash(1, None, b"") != record_hash(1, b"", None)
    assert record_hash(1, None, b"v") != record_hash(2, None, b"v")
    assert len(record_hash(1, None, b"v")) == 16  # a compact binary identity


# ---- Spark --------------------------------------------------------------------------------------------------------


def _rows(lake: Lake, table: str, cluster: str | None = None) -> list[dict[str, Any]]:
    df = lake.read(table)
    if cluster is not None:
        df = df.filter(df.cluster_id == cluster)
    rows = [r.asDict() for r in df.collect()]
    return sorted(rows, key=lambda r: tuple(str(r.get(k)) for k in ("cluster_id", "stream", "snapshot_end_offset",
                                                                    "offset", "content_hash", "file_position")))


@pytest.mark.spark
def test_ingest_gives_expected_rows(spark: Any, tmp_path: Any) -> None:
    dump = write_dump(str(tmp_path / "node1"))
    lake = Lake(spark, str(tmp_path / "lake"))
    report = ingest(spark, [dump], "c1", lake, progress=False)

    assert report.records == report.records_new == 12
    assert report.records_by_stream == {"log": 6, "snapshot": 3, "bootstrap": 3}
    assert report.log_offsets == (0, 5)
    assert report.snapshots == [(3, 1)]
    assert report.problems == 0
    assert sorted(os.path.basename(f) for f in report.files) == [
        "00000000000000000000.log", "00000000000000000003-0000000001.checkpoint", "bootstrap.checkpoint"]
    assert sorted(os.path.basename(f) for f in report.ignored) == ["00000000000000000000.index", "meta.properties"]
    assert report.committed == {METADATA_RECORDS: True, QUARANTINE: False}

    rows = _rows(lake, METADATA_RECORDS)
    log = [r for r in rows if r["stream"] == "log"]
    assert [r["offset"] for r in log] == [0, 1, 2, 3, 4, 5]
    assert [r["record_type"] for r in log] == [
        "LEADER_CHANGE", "ACCESS_CONTROL_ENTRY_RECORD", "BEGIN_TRANSACTION_RECORD", "ACCESS_CONTROL_ENTRY_RECORD",
        "END_TRANSACTION_RECORD", "REMOVE_ACCESS_CONTROL_ENTRY_RECORD"]
    leader, create = log[0], log[1]
    assert leader["is_control"] and leader["control_type"] == "LEADER_CHANGE" and leader["api_key"] is None
    assert json.loads(leader["payload_json"])["leaderId"] == 1
    assert create["acl_id"] == acl_id(1)
    assert (create["resource_type"], create["resource_name"], create["pattern_type"], create["principal"],
            create["host"], create["operation"], create["permission_type"]) == (
        "TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW")
    assert json.loads(create["payload_json"])["type"] == "ACCESS_CONTROL_ENTRY_RECORD"
    assert create["api_key"] == 18 and create["record_version"] == 0 and not create["is_control"]
    assert create["append_time"] == T0 + 1000 and create["append_ts"].timestamp() * 1000 == T0 + 1000
    assert create["leader_epoch"] == 1 and create["crc_ok"] and create["codec"] == "none"
    assert create["source_kind"] == "segment" and create["source_file"].endswith("00000000000000000000.log")
    assert create["snapshot_end_offset"] is None and create["snapshot_epoch"] is None
    assert create["content_hash"] == record_hash(1, create["raw_key"], create["raw_value"])
    assert create["ingest_id"] == report.ingest_id and create["cluster_id"] == "c1"
    txn = log[3]  # the create inside the transaction: batch 2..4, second record
    assert (txn["batch_base_offset"], txn["batch_last_offset"], txn["record_index"]) == (2, 4, 1)
    assert (txn["acl_id"], txn["operation"], txn["permission_type"]) == (acl_id(2), "WRITE", "DENY")
    remove = log[5]
    assert remove["acl_id"] == acl_id(1) and remove["resource_type"] is None

    snap = [r for r in rows if r["stream"] == "snapshot"]
    assert [(r["offset"], r["record_type"]) for r in snap] == [
        (0, "SNAPSHOT_HEADER"), (1, "ACCESS_CONTROL_ENTRY_RECORD"), (2, "SNAPSHOT_FOOTER")]
    assert {(r["snapshot_end_offset"], r["snapshot_epoch"], r["source_kind"]) for r in snap} == {(3, 1, "snapshot")}
    boot = [r for r in rows if r["stream"] == "bootstrap"]
    assert [r["record_type"] for r in boot] == ["SNAPSHOT_HEADER", "NO_OP_RECORD", "SNAPSHOT_FOOTER"]

    history = lake.history(METADATA_RECORDS).collect()
    meta = json.loads(history[0]["userMetadata"])
    assert history[0]["operation"] == "WRITE"  # a first ingest is appended: a replaceWhere of an empty region
    assert meta["cluster_id"] == "c1" and meta["ingest_id"] == report.ingest_id
    assert meta["log_offsets"] == [0, 5] and meta["file_count"] == 3 and len(meta["files"]) == 3
    props = {r["key"]: r["value"] for r in spark.sql(f"SHOW TBLPROPERTIES {lake.table_ref(METADATA_RECORDS)}").collect()}
    assert props["delta.enableInCommitTimestamps"] == "true"


@pytest.mark.spark
def test_reingest_changes_nothing_and_a_later_dump_extends(spark: Any, tmp_path: Any) -> None:
    dump = write_dump(str(tmp_path / "node1"))
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [dump], "c1", lake, progress=False)
    before = _rows(lake, METADATA_RECORDS)
    versions = {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)}

    # Same files again, and a copy of them from another node: nothing new, and Delta makes no commit.
    copy = str(tmp_path / "node2")
    shutil.copytree(dump, copy)
    again = ingest(spark, [dump, copy], "c1", lake, progress=False, decode_all=True)
    # the ingest works in a session of its own (here it made a DataFrame of local rows there: the stored copies to
    # leave out); the caller's session stays the active one, what get_spark() hands back
    assert SparkSession.getActiveSession() is spark and get_spark() is spark
    assert again.records == 24 and again.records_new == 0 and again.problems_new == 0
    assert again.committed == {METADATA_RECORDS: False, QUARANTINE: False}
    assert {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)} == versions
    assert _rows(lake, METADATA_RECORDS) == before
    # without `decode_all` the files are known by their digests (`ingest_held`) and not decoded at all
    known = ingest(spark, [dump, copy], "c1", lake, progress=False)
    assert (known.records, known.records_new, known.held_files) == (0, 0, len(again.files))
    assert {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)} == versions

    # A later dump of node2: the log grew by two batches (offsets 6, 7). Only those are added, in one commit; only
    # they are decoded, the rest of the file being the bytes the lake holds.
    part = os.path.join(copy, "__cluster_metadata-0")
    with open(os.path.join(part, "00000000000000000000.log"), "ab") as f:
        f.write(writer.encode_batch(6, [writer.acl_record(acl_id(3), ALICE_READ)], 1, T0 + 6000))
        f.write(writer.encode_batch(7, [writer.remove_acl_record(acl_id(3))], 1, T0 + 7000))
    later = ingest(spark, [copy], "c1", lake, progress=False)
    assert later.records_new == later.records == 2 and later.log_offsets == (6, 7) and later.held_bytes > 0
    assert lake.version(METADATA_RECORDS) == versions[METADATA_RECORDS] + 1
    rows = _rows(lake, METADATA_RECORDS)
    assert len(rows) == len(before) + 2
    new = [r for r in rows if r["ingest_id"] == later.ingest_id]
    assert sorted(r["offset"] for r in new) == [6, 7]
    assert all("node2" in r["source_file"] for r in new)
    # the rows already known keep the file that first brought them
    assert all("node1" in r["source_file"] for r in rows if r["ingest_id"] != later.ingest_id)


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
@pytest.mark.spark
def test_a_snapshot_copy_is_stored_once_unless_the_stored_copy_has_problems(spark: Any, tmp_path: Any) -> None:
    """The same snapshot in a later dump adds nothing; a clean copy after a damaged one is stored (and loads)."""
    from replay.spark.replay import replay_lake

    snapshot = "00000000000000000003-0000000001.checkpoint"
    damaged = write_dump(str(tmp_path / "day1"), with_bootstrap=False)
    with open(os.path.join(damaged, "__cluster_metadata-0", snapshot), "ab") as f:
        f.write(b"\x00\x01not a batch")  # bytes after the footer: a problem inside this copy
    lake = Lake(spark, str(tmp_path / "lake"))
    first = ingest(spark, [damaged], "c1", lake, progress=False)
    assert first.records_new == 9 and first.problems > 0

    clean = write_dump(str(tmp_path / "day2"), with_bootstrap=False)
    second = ingest(spark, [clean], "c1", lake, progress=False)
    assert second.records_new == 3  # the log is known; the clean snapshot copy is new, as the stored one is damaged
    third = ingest(spark, [write_dump(str(tmp_path / "day3"), with_bootstrap=False)], "c1", lake, progress=False)
    assert third.records_new == 0 and third.committed[METADATA_RECORDS] is False

    snap_files = {r["source_file"].split("/")[-3] for r in _rows(lake, METADATA_RECORDS) if r["stream"] == "snapshot"}
    assert snap_files == {"day1", "day2"}
    replay_lake(lake, ["c1"])
    anomalies = lake.read("anomalies").where("kind = 'snapshot_not_loaded'").collect()
    assert [a["source_file"].split("/")[-3] for a in anomalies] == ["day1"]
    coverage = {(r["kind"], r["start_offset"], r["end_offset"]) for r in lake.read("log_coverage").collect()}
    assert ("log", 0, 5) in coverage


@pytest.mark.spark
def test_different_bytes_at_one_offset_are_both_kept(spark: Any, tmp_path: Any) -> None:
    """A node that held an uncommitted suffix: offset 1 differs between two dumps (the replay picks by epoch)."""
    a = write_batches(str(tmp_path / "a" / "__cluster_metadata-0"), [
        writer.encode_batch(0, [writer.noop()], 1, T0),
        writer.encode_batch(1, [writer.acl_record(acl_id(1), ALICE_READ)], 1, T0 + 1)])
    b = write_batches(str(tmp_path / "b" / "__cluster_metadata-0"), [
        writer.encode_batch(0, [writer.noop()], 1, T0),
        writer.encode_batch(1, [writer.acl_record(acl_id(9), BOB_WRITE)], 2, T0 + 5)])
    lake = Lake(spark, str(tmp_path / "lake"))
    report = ingest(spark, [a, b], "c1", lake, progress=False)
    assert report.records == 4 and report.records_new == 3
    rows = _rows(lake, METADATA_RECORDS)
    at1 = sorted((r["leader_epoch"], r["acl_id"]) for r in rows if r["offset"] == 1)
    assert at1 == [(1, acl_id(1)), (2, acl_id(9))]
    assert len([r for r in rows if r["offset"] == 0]) == 1


@pytest.mark.spark
def test_a_batch_twice_in_one_file_is_stored_once_and_one_node_without_a_check(
        spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """One node's files are written as decoded (their offset tallies prove that no key repeats); a file that holds
    a batch twice is not, and its records are stored once."""
    unique: list[bool] = []
    checked = ingest_write.records_source

    def spy(*args: Any, **kwargs: Any) -> Any:
        unique.append(kwargs.get("unique", args[5] if len(args) > 5 else False))
        return checked(*args, **kwargs)

    monkeypatch.setattr(ingest_write, "records_source", spy)
    lake = Lake(spark, str(tmp_path / "lake"))
    noop, create = writer.encode_batch(0, [writer.noop()], 1, T0), writer.encode_batch(
        1, [writer.acl_record(acl_id(1), ALICE_READ)], 1, T0 + 1)
    once = ingest(spark, [write_batches(str(tmp_path / "a" / "__cluster_metadata-0"), [noop, create])], "c1", lake,
                  progress=False)
    assert (once.records, once.records_new, unique) == (2, 2, [True])
    twice = ingest(spark, [write_batches(str(tmp_path / "b" / "__cluster_metadata-0"), [noop, create, create])],
                   "c2", lake, progress=False)
    assert (twice.records, twice.records_new, unique) == (3, 2, [True, False])
    assert sorted(r["offset"] for r in _rows(lake, METADATA_RECORDS, "c2")) == [0, 1]


@pytest.mark.spark
def test_bad_input_goes_to_quarantine(spark: Any, tmp_path: Any) -> None:
    seg, pos = write_bad_segment(str(tmp_path / "bad" / "__cluster_metadata-0"))
    garbage = tmp_path / "garbage.bin"
    garbage.write_bytes(b"certainly not a kafka log " * 4)
    lake = Lake(spark, str(tmp_path / "lake"))
    # decoded in pieces of 50 bytes (many tasks per file): the same rows as whole files, see the re-ingest below
    report = ingest(spark, [str(tmp_path / "bad"), str(garbage)], "c1", lake, progress=False, split_bytes=50)

    assert report.problems_by_kind == {"bad_crc": 1, "truncated_tail": 1, "not_a_metadata_log": 1}
    assert report.problems_new == 3 and report.committed == {METADATA_RECORDS: True, QUARANTINE: True}
    q = {r["kind"]: r for r in _rows(lake, QUARANTINE)}
    crc = q["bad_crc"]
    assert crc["source_file"].endswith(os.path.basename(seg)) and crc["source_kind"] == "segment"
    assert (crc["file_position"], crc["offset"]) == (pos["bad_crc"], 1)
    assert crc["raw"] and len(crc["raw"]) > 61 and crc["message"] and crc["ingest_id"] == report.ingest_id
    tail = q["truncated_tail"]
    assert (tail["file_position"], tail["offset"], len(tail["raw"])) == (pos["tail"], 3, 30)
    assert q["not_a_metadata_log"]["source_file"].endswith("garbage.bin")
    assert q["not_a_metadata_log"]["file_position"] == 0

    # decodable neighbours are kept; the bad-CRC batch's records are kept too, marked crc_ok = false
    recs = {r["offset"]: r for r in _rows(lake, METADATA_RECORDS)}
    assert sorted(recs) == [0, 1, 2]
    assert [recs[o]["crc_ok"] for o in (0, 1, 2)] == [True, False, True]

    versions = {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)}
    again = ingest(spark, [str(tmp_path / "bad"), str(garbage)], "c1", lake, progress=False)
    assert again.problems == 3 and again.problems_new == 0 and again.records_new == 0
    assert {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)} == versions


@pytest.mark.spark
def test_strict_raises_before_writing(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    good = write_dump(str(tmp_path / "good"), with_snapshot=False, with_bootstrap=False)
    ingest(spark, [good], "c1", lake, strict=True, progress=False)  # clean input passes strict mode
    versions = {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)}
    before = _rows(lake, METADATA_RECORDS)

    write_bad_segment(str(tmp_path / "bad" / "__cluster_metadata-0"))
    with pytest.raises(StrictIngestError) as err:
        ingest(spark, [str(tmp_path / "bad")], "c1", lake, strict=True, progress=False)
    assert err.value.counts == {"bad_crc": 1, "truncated_tail": 1}
    assert "nothing was written" in str(err.value) and "bad_crc" in str(err.value)
    assert "00000000000000000000.log, byte 114, offset 1" in str(err.value)
    assert {t: lake.version(t) for t in (METADATA_RECORDS, QUARANTINE)} == versions
    assert _rows(lake, METADATA_RECORDS) == before
    assert lake.read(QUARANTINE).count() == 0

    fresh = Lake(spark, str(tmp_path / "fresh"))
    with pytest.raises(StrictIngestError):
        ingest(spark, [str(tmp_path / "bad")], "c1", fresh, strict=True, progress=False)
    assert not fresh.exists(METADATA_RECORDS) and not fresh.exists(QUARANTINE)


@pytest.mark.spark
def test_two_clusters_share_a_lake(spark: Any, tmp_path: Any) -> None:
    dump = write_dump(str(tmp_path / "node1"), with_snapshot=False, with_bootstrap=False)
    lake = Lake(spark, str(tmp_path / "lake"))
    ingest(spark, [dump], "cluster-a", lake, progress=False)
    b = ingest(spark, [dump], "cluster-b", lake, progress=False)
    assert b.records_new == 6  # the same bytes are new for another cluster
    a_rows = _rows(lake, METADATA_RECORDS, "cluster-a")
    b_rows = _rows(lake, METADATA_RECORDS, "cluster-b")
    assert len(a_rows) == len(b_rows) == 6
    strip = [{k: v for k, v in r.items() if k not in ("cluster_id", "ingest_id")} for r in a_rows]
    assert strip == [{k: v for k, v in r.items() if k not in ("cluster_id", "ingest_id")} for r in b_rows]
    parts = sorted(os.listdir(lake.table_path(METADATA_RECORDS)))
    assert "cluster_id=cluster-a" in parts and "cluster_id=cluster-b" in parts
    again = ingest(spark, [dump], "cluster-a", lake, progress=False)
    assert again.records_new == 0


@pytest.mark.spark
def test_dump_log_text_is_the_same_log(spark: Any, tmp_path: Any) -> None:
    """kafka-dump-log text of the segment and the snapshot gives the same records (same hashes: no new rows)."""
    dump = write_dump(str(tmp_path / "node1"), with_bootstrap=False)
    part = os.path.join(dump, "__cluster_metadata-0")
    text = tmp_path / "text" / "node1-dump.txt"
    text.parent.mkdir()
    with open(text, "w") as f:
        for name in ("00000000000000000000.log", "00000000000000000003-0000000001.checkpoint"):
            for line in dumplog.render_file(os.path.join(part, name)):
                f.write(line + "\n")
    lake = Lake(spark, str(tmp_path / "lake"))
    from_text = ingest(spark, [str(text.parent)], "c1", lake, progress=False)
    assert from_text.records_by_stream == {"log": 6, "snapshot": 3} and from_text.problems == 0
    rows = _rows(lake, METADATA_RECORDS)
    assert {r["source_kind"] for r in rows} == {"dump_log_text"}
    assert {r["text_section"] for r in rows if r["stream"] == "snapshot"} == {
        os.path.join(part, "00000000000000000003-0000000001.checkpoint")}
    assert {(r["snapshot_end_offset"], r["snapshot_epoch"]) for r in rows if r["stream"] == "snapshot"} == {(3, 1)}
    binary = ingest(spark, [dump], "c1", lake, progress=False)
    assert binary.records == 9 and binary.records_new == 0


@pytest.mark.spark
def test_catalog_lake(spark: Any, tmp_path: Any) -> None:
    dump = write_dump(str(tmp_path / "node1"), with_snapshot=False, with_bootstrap=False)
    spark.sql(f"CREATE SCHEMA IF NOT EXISTS kraft_ingest_test LOCATION '{tmp_path / 'schema'}'")
    lake = Lake(spark, "spark_catalog.kraft_ingest_test")
    assert lake.is_catalog
    report = ingest(spark, [dump], "c1", lake, progress=False)
    assert report.records_new == 6
    assert spark.sql("SELECT count(*) FROM spark_catalog.kraft_ingest_test.metadata_records").first()[0] == 6
    spark.sql("DROP SCHEMA kraft_ingest_test CASCADE")


@pytest.mark.spark
def test_a_bare_schema_is_in_the_current_catalog_and_an_in_memory_catalog_is_named(
        spark: Any, tmp_path: Any, capsys: pytest.CaptureFixture[str]) -> None:
    """`--catalog SCHEMA` is a schema of the session's current catalog (it was taken for a directory named SCHEMA),
    and a local session whose catalog lives in memory says that the tables will be forgotten."""
    import io
    import json

    from replay import cli

    spark.sql(f"CREATE SCHEMA IF NOT EXISTS kraft_bare_test LOCATION '{tmp_path / 'schema'}'")
    dump = write_dump(str(tmp_path / "node1"), with_snapshot=False, with_bootstrap=False)
    out = io.StringIO()
    capsys.readouterr()
    code = cli.main(["ingest", dump, "--catalog", "kraft_bare_test", "--lake-cluster", "c1", "--no-replay",
                     "--no-progress", "--output", "json"], out)
    err = capsys.readouterr().err
    assert code == 0, err
    assert json.loads(out.getvalue())["lake"] == "`spark_catalog`.kraft_bare_test"
    assert spark.sql("SELECT count(*) FROM spark_catalog.kraft_bare_test.metadata_records").first()[0] == 6
    assert not (tmp_path / "kraft_bare_test").exists() and not os.path.exists("kraft_bare_test")
    assert "keeps its catalog in memory" in err and "--lake DIR" in err
    spark.sql("DROP SCHEMA kraft_bare_test CASCADE")


@pytest.mark.spark
def test_nothing_to_read(spark: Any, tmp_path: Any) -> None:
    lake = Lake(spark, str(tmp_path / "lake"))
    with pytest.raises(IngestError, match="does not exist"):
        ingest(spark, [str(tmp_path / "missing")], "c1", lake, progress=False)
    (tmp_path / "empty").mkdir()
    (tmp_path / "empty" / "readme.txt").write_text("hello")
    with pytest.raises(IngestError, match="no metadata log files"):
        ingest(spark, [str(tmp_path / "empty")], "c1", lake, progress=False)
    with pytest.raises(IngestError, match="cluster"):
        ingest(spark, [str(tmp_path / "empty")], " ", lake, progress=False)
    assert not lake.exists(METADATA_RECORDS)


@pytest.mark.spark
def test_local_inputs_are_listed_in_one_job_and_a_failure_names_its_root(
        spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """A watch names each new file: listed together (one Spark job), not one job a file; when that listing fails,
    the error names the input that could not be listed, not the first one given."""
    for name in ("00000000000000000000.log", "00000000000000000010.log", "00000000000000000005-0000000001.checkpoint"):
        (tmp_path / name).write_bytes(b"x" * 10)
    given = sorted(str(f) for f in tmp_path.iterdir())
    real = ingest_plan._listing
    calls: list[list[str]] = []

    def listing(session: Any, paths: list[str]) -> list[tuple[str, int]]:
        calls.append(paths)
        if any(p.endswith("010.log") for p in paths):
            raise RuntimeError("permission denied")
        return real(session, paths)

    monkeypatch.setattr(ingest_plan, "_listing", listing)
    listed = ingest_plan.list_inputs(spark, [g for g in given if not g.endswith("010.log")])
    assert len(calls) == 1 and sorted(u.removeprefix("file:") for u, _ in listed) == \
        [g for g in given if not g.endswith("010.log")]
    calls.clear()
    with pytest.raises(IngestError, match=r"cannot list .*00000000000000000010\.log: permission denied"):
        ingest_plan.list_inputs(spark, given)
    assert len(calls) > 1  # together, then one by one until the one that fails


@pytest.mark.spark
def test_files_no_executor_can_open_fail_the_ingest(spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch
                                                    ) -> None:
    """A cluster whose executors cannot see the driver's disk: every file is unreadable there, and the ingest says
    so instead of writing an empty history."""
    import dataclasses

    import replay.spark.ingest as ingest_module

    dump = write_dump(str(tmp_path / "dump"))
    real = ingest_module.decode_plan

    def elsewhere(spark_: Any, plan: list[PlannedFile], counters: Any = None, summary: bool = False,
                  **more: Any) -> Any:
        moved = [dataclasses.replace(f, local_path=str(tmp_path / "not-on-the-executors" / os.path.basename(f.uri)))
                 for f in plan]
        return real(spark_, moved, counters, summary, **more)

    monkeypatch.setattr(ingest_module, "decode_plan", elsewhere)
    lake = Lake(spark, str(tmp_path / "lake"))
    with pytest.raises(IngestError, match="could not open any of the"):
        ingest(spark, [dump], "c1", lake, progress=False)
    assert not lake.exists(METADATA_RECORDS)


@pytest.mark.spark
def test_a_later_dump_that_repeats_held_offsets_and_goes_on_adds_what_differs_and_what_is_new(
        spark: Any, tmp_path: Any) -> None:
    """A dump that repeats part of what the lake holds and goes on is merged on each row's identity: what lies past
    the held log is inserted, and in the stretch it repeats only what differs (here the new leader's records at the
    offsets where a cut-off follower, ingested first, held others). The lake then holds what one ingest of both
    dumps gives, and each cluster's new rows are counted apiece, for one cluster (`ingest`) and for two ingested
    together (`ingest_clusters`, counted by ingest id)."""
    from pyspark.sql import functions as F

    from replay.kafka import synth
    from replay.spark.ingest import ingest_clusters

    names = ["a", "b", "c"]
    committed, stale = synth.divergent_copy(synth.generate(7, n_batches=30), 10, seed=2)
    for name in names:
        synth.write_dump(stale, str(tmp_path / "stale" / name), synth.Layout(segment_every=15))
        synth.write_dump(committed, str(tmp_path / "leader" / name), synth.Layout(segment_every=15))
    lake, once = Lake(spark, str(tmp_path / "lake")), Lake(spark, str(tmp_path / "once"))
    first, failed = ingest_clusters(spark, {n: [str(tmp_path / "stale" / n)] for n in names}, lake, progress=False)
    assert not failed
    later = {"a": ingest(spark, [str(tmp_path / "leader" / "a")], cluster="a", lake=lake, progress=False)}
    joint, failed = ingest_clusters(spark, {n: [str(tmp_path / "leader" / n)] for n in names[1:]}, lake,
                                    progress=False)
    assert not failed
    later.update(joint)
    for name in names:
        ingest(spark, [str(tmp_path / "stale" / name), str(tmp_path / "leader" / name)], cluster=name, lake=once,
               progress=False)
    ignored = ("source_file", "file_position", "ingest_id")

    def held(at: Lake, name: str) -> list[tuple[Any, ...]]:
        return sorted(tuple(str(v) for k, v in r.items() if k not in ignored) for r in _rows(at, METADATA_RECORDS, name))

    stale_end = stale.end_offset - 1
    for name in names:
        rows = held(lake, name)
        assert rows == held(once, name)
        assert first[name].records_new + later[name].records_new == len(rows)
        assert later[name].records_new > 0
    commits = [(r["operation"], json.loads(r["userMetadata"])) for r in reversed(lake.history(METADATA_RECORDS).collect())
               if r["operation"] in ("MERGE", "WRITE")]
    assert [(op, m.get("cluster_ids") or [m["cluster_id"]]) for op, m in commits] == [
        ("WRITE", names), ("MERGE", ["a"]), ("MERGE", names[1:])]
    leader_rows = lake.read(METADATA_RECORDS).where(F.col("ingest_id").isin([later[n].ingest_id for n in names]))
    # the leader's records at the follower's offsets, and past them
    assert leader_rows.where(f"offset <= {stale_end}").count() > 0
    assert leader_rows.where(f"offset > {stale_end}").count() > 0


@pytest.mark.spark
def test_concurrent_ingests_in_one_session(spark: Any, tmp_path: Any) -> None:
    """Ingests running at once from threads of one session: each commit carries its own userMetadata, and the same
    dump ingested twice at once still lands once (the append that conflicts looks again and MERGEs nothing)."""
    from concurrent.futures import ThreadPoolExecutor

    dump = write_dump(str(tmp_path / "node1"), with_snapshot=False, with_bootstrap=False)
    lake = Lake(spark, str(tmp_path / "lake"))
    lake.ensure(METADATA_RECORDS)
    lake.ensure(QUARANTINE)
    jobs = [("cluster-a", dump), ("cluster-a", dump), ("cluster-b", dump)]
    with ThreadPoolExecutor(3) as pool:
        reports = list(pool.map(lambda job: ingest(spark, [job[1]], job[0], lake, progress=False), jobs))
    assert sorted(r.records_new for r in reports if r.cluster_id == "cluster-a") == [0, 6]
    assert len(_rows(lake, METADATA_RECORDS, "cluster-a")) == len(_rows(lake, METADATA_RECORDS, "cluster-b")) == 6
    commits = [json.loads(r["userMetadata"]) for r in lake.history(METADATA_RECORDS).collect()
               if r["operation"] in ("MERGE", "WRITE")]
    assert sorted((c["cluster_id"], c["ingest_id"]) for c in commits) == sorted(
        (r.cluster_id, r.ingest_id) for r in reports if r.records_new)


@pytest.mark.spark
def test_the_summary_pass_gives_the_summary_of_every_decoded_row(spark: Any, tmp_path: Any) -> None:
    """The summary pass decodes into one row per task for its log records (`ingest_summary_rows`): the summary it
    gives equals the one of every decoded row, on a sample with snapshots, damaged segments, an empty file, a file
    that is no log, dump-log text and files decoded in pieces by several tasks."""
    text = tmp_path / "text" / "dump.txt"
    text.parent.mkdir()
    part = str(DATA / "small-snapshots")
    segment = sorted(glob.glob(os.path.join(part, "__cluster_metadata-0", "*.log")))[0]
    text.write_text("".join(line + "\n" for line in dumplog.render_file(segment)))
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "readme.log").write_text("not a log at all\n")
    plan, _ = ingest_plan.plan_files(spark, [part, *_bad_files(tmp_path / "bad"), str(text.parent),
                                             str(tmp_path / "notes")])
    parts = split_plan(plan, 1000)  # pieces of 1,000 bytes: the sample's segments in several tasks each

    def summary(rows: Any) -> list[tuple[Any, ...]]:
        return sorted((tuple(sorted(v) if isinstance(v, list) else v for v in r.asDict().values())
                       for r in summarise(rows)), key=repr)

    counted = summary(decode_plan(spark, parts, summary=True))
    assert counted == summary(summary_rows(decode_plan(spark, parts)))
    kinds = {(r[0], r[1]) for r in counted}
    assert {("R", "log"), ("R", "snapshot"), ("Q", "log"), ("I", None)} <= kinds, kinds
    assert len(parts) > len(plan)


@pytest.mark.spark
def test_large_inputs_are_cached_on_disk_only(spark: Any) -> None:
    """The decoded rows of a large ingest are cached on disk, not in the heap: cached in memory, a 10M-record dump
    ran a 2 GiB driver out of heap while the decode job built its blocks. Small inputs stay in memory."""
    from pyspark import StorageLevel

    from replay.spark import ingest as ingest_module

    small, large = spark.range(3), spark.range(4)  # two plans: one cache entry each
    try:
        assert ingest_module.persist_decoded(small, 20 * 1024 * 1024)
        assert ingest_module.persist_decoded(large, ingest_module.CACHE_IN_MEMORY_BYTES + 1)
        assert small.storageLevel == StorageLevel.MEMORY_AND_DISK
        assert large.storageLevel == StorageLevel.DISK_ONLY
        assert large.count() == 4
    finally:
        small.unpersist()
        large.unpersist()


def test_decode_file_through_pyarrow_stream(tmp_path: Any) -> None:
    """The opener used for URIs pyarrow can read (here a local file:// URI) streams the same rows."""
    dump = write_dump(str(tmp_path / "node1"), with_snapshot=False, with_bootstrap=False)
    seg = os.path.join(dump, "__cluster_metadata-0", "00000000000000000000.log")
    direct = PlannedFile(seg, os.path.getsize(seg), "segment", open_with="local", local_path=seg)
    arrow = PlannedFile("file://" + seg, os.path.getsize(seg), "segment", open_with="pyarrow")
    rows = []
    for entry in (direct, arrow):
        stream = ingest_decode.open_planned(entry)
        try:
            rows.append([(r["offset"], r["content_hash"]) for r in decode_file(entry, stream)])
        finally:
            stream.close()
    assert rows[0] == rows[1] and len(rows[0]) == 6


@pytest.mark.spark
def test_files_read_through_spark_binaryfile(spark: Any, tmp_path: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fallback for filesystems executors cannot open: Spark reads the content, the result is the same."""
    dump = write_dump(str(tmp_path / "node1"))
    text = tmp_path / "node1" / "dump.txt"  # an unknown name: sniffed on the executor from the content
    text.write_text("\n".join(dumplog.render_file(os.path.join(dump, "__cluster_metadata-0",
                                                               "00000000000000000000.log"))) + "\n")
    normal = Lake(spark, str(tmp_path / "normal"))
    ingest(spark, [dump], "c1", normal, progress=False)
    monkeypatch.setattr(ingest_plan, "choose_opener", lambda uri, probes: ("spark", None))
    via_spark = Lake(spark, str(tmp_path / "via-spark"))
    report = ingest(spark, [dump], "c1", via_spark, progress=False)
    assert report.records == 18 and report.records_new == 12  # the text repeats the segment's 6 records

    def key(rows: list[dict[str, Any]]) -> list[tuple[Any, ...]]:
        return [(r["stream"], r["offset"], r["content_hash"]) for r in rows]

    assert key(_rows(via_spark, METADATA_RECORDS)) == key(_rows(normal, METADATA_RECORDS))
