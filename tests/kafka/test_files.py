"""File naming (spec §1.3), directory discovery and the small text files of a log dir."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from replay.kafka import files, writer
from replay.kafka.batch import read_file
from replay.kafka.model import Problem, ProblemKind, SourceFile, SourceKind

SEG0 = "00000000000000000000.log"
SEG200 = "00000000000000000200.log"
SNAP100 = "00000000000000000100-0000000003.checkpoint"
SNAP50 = "00000000000000000050-0000000002.checkpoint"
SNAP100_E2 = "00000000000000000100-0000000002.checkpoint"


def touch(path: Path, data: bytes = b"") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)
    return path


def make_log_dir(root: Path) -> Path:
    """A metadata log dir as `kafka-storage format` and a running controller leave it, plus a data topic."""
    meta = root / files.METADATA_PARTITION_DIR
    touch(root / "meta.properties", b"#\n#Thu Nov 21 10:00:00 UTC 2024\nnode.id=1\ndirectory.id=q0ct3jNbRTa3kg9Q5LD-TQ\n"
          b"version=1\ncluster.id=MkU3OEVBNTcwNTJENDM2Qk\n")
    writer.write_bootstrap(str(root), [writer.feature_level("metadata.version", 21)])
    for name in ("replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
                 "cleaner-offset-checkpoint", ".lock"):
        touch(root / name, b"0\n0\n")
    with writer.SegmentWriter(str(meta), 0) as seg:
        seg.append_leader_change(1, [1])
    with writer.SegmentWriter(str(meta), 200) as seg:
        seg.append([writer.noop()])
    for name in (SNAP100, SNAP50, SNAP100_E2):
        end, epoch = int(name[:20]), int(name[21:31])
        writer.write_snapshot(str(meta), end, epoch, [writer.noop()], 0)
    for name in ("00000000000000000000.index", "00000000000000000000.timeindex", "00000000000000000059.snapshot",
                 "00000000000000000000.txnindex", "00000000000000000010.log.deleted", "00000000000000000011.log.cleaned",
                 "00000000000000000012.log.swap", SNAP100[:-11] + "-abc123.checkpoint.part",
                 "00000000000000000020-0000000001.checkpoint.deleted"):
        touch(meta / name, b"x")
    touch(meta / "partition.metadata", b"version: 0\ntopic_id: AAAAAAAAAAAAAAAAAAAAAQ\n")
    touch(meta / "leader-epoch-checkpoint", b"0\n2\n1 0\n3 150\n")
    touch(meta / "quorum-state", json.dumps({"leaderId": 1, "leaderEpoch": 3, "votedId": -1,
                                              "votedDirectoryId": "AAAAAAAAAAAAAAAAAAAAAA", "data_version": 1}).encode())
    data_topic = root / "payments-0"
    touch(data_topic / SEG0, writer.encode_batch(0, [b"not metadata"]))
    touch(data_topic / "partition.metadata", b"version: 0\ntopic_id: 7t0h1dGMR2mAnE2SO-MBdw\n")
    touch(root / "orders-3" / SEG0, b"x")  # a data partition without partition.metadata
    return root


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        (SEG0, SourceFile(SEG0, SourceKind.SEGMENT, base_offset=0)),
        ("d/" + SEG200, SourceFile("d/" + SEG200, SourceKind.SEGMENT, base_offset=200)),
        (SNAP100, SourceFile(SNAP100, SourceKind.SNAPSHOT, snapshot_end_offset=100, snapshot_epoch=3)),
        ("bootstrap.checkpoint", SourceFile("bootstrap.checkpoint", SourceKind.BOOTSTRAP)),
        ("0000000000000000000.log", None),  # 19 digits
        (SNAP100 + ".part", None),
        (SNAP100 + ".deleted", None),
        ("00000000000000000000.index", None),
        ("00000000000000000100-000000003.checkpoint", None),
        ("replication-offset-checkpoint", None),
    ],
)
def test_classify_name(name: str, expected: SourceFile | None) -> None:
    assert files.classify_name(name) == expected


def test_names() -> None:
    assert files.segment_name(59) == "00000000000000000059.log"
    assert files.snapshot_name(100, 3) == SNAP100
    assert files.is_ignored_name("quorum-state") and files.is_ignored_name("x.timeindex")
    assert not files.is_ignored_name(SEG0)


def test_discover_log_dir(tmp_path: Path) -> None:
    root = make_log_dir(tmp_path / "logs")
    sources, ignored = files.discover([str(root)])
    names = [(s.kind, s.name) for s in sources]
    assert names == [
        (SourceKind.BOOTSTRAP, "bootstrap.checkpoint"),
        (SourceKind.SNAPSHOT, SNAP50),
        (SourceKind.SNAPSHOT, SNAP100_E2),
        (SourceKind.SNAPSHOT, SNAP100),
        (SourceKind.SEGMENT, SEG0),
        (SourceKind.SEGMENT, SEG200),
    ]
    ignored_names = {os.path.basename(p) for p in ignored}
    assert {"payments-0", "orders-3", "meta.properties", "quorum-state", "00000000000000000000.index",
            "replication-offset-checkpoint", SNAP100[:-11] + "-abc123.checkpoint.part"} <= ignored_names
    assert not any("payments-0" in s.path for s in sources)


def test_discover_partition_dir_files_and_duplicates(tmp_path: Path) -> None:
    root = make_log_dir(tmp_path / "logs")
    meta = root / files.METADATA_PARTITION_DIR
    sources, _ = files.discover([str(meta), str(meta / SEG0), str(tmp_path / "missing")])
    assert [s.name for s in sources] == [SNAP50, SNAP100_E2, SNAP100, SEG0, SEG200]  # no bootstrap here; no dupes
    _, ignored = files.discover([str(tmp_path / "missing")])
    assert ignored == [str(tmp_path / "missing")]


def test_discover_many_node_dumps(tmp_path: Path) -> None:
    make_log_dir(tmp_path / "dumps" / "node-1")
    make_log_dir(tmp_path / "dumps" / "node-2")
    sources, _ = files.discover([str(tmp_path / "dumps")])
    assert [s.kind for s in sources].count(SourceKind.BOOTSTRAP) == 2
    segs = [s for s in sources if s.kind == SourceKind.SEGMENT]
    assert [(s.base_offset, "node-1" in s.path) for s in segs] == [(0, True), (0, False), (200, True), (200, False)]


def test_explicit_unknown_files(tmp_path: Path) -> None:
    text = touch(tmp_path / "dump.txt", b"Dumping /x/00000000000000000000.log\nLog starting offset: 0\n")
    junk = touch(tmp_path / "random.bin", os.urandom(3000))
    sources, ignored = files.discover([str(text), str(junk)])
    assert ignored == []
    kinds = {s.name: s for s in sources}
    assert kinds["dump.txt"].kind == SourceKind.DUMP_LOG_TEXT
    assert kinds["random.bin"].kind == SourceKind.SEGMENT and kinds["random.bin"].base_offset is None
    assert [s.name for s in sources] == ["random.bin", "dump.txt"]
    (p,) = list(read_file(str(junk)))
    assert isinstance(p, Problem) and p.kind == ProblemKind.NOT_A_METADATA_LOG
    # Inside a walked directory, a text dump is found by content; other unknown files are ignored.
    walked, ignored = files.discover([str(tmp_path)])
    assert [s.name for s in walked] == ["dump.txt"] and ignored == [str(junk)]


def test_meta_properties_and_cluster_id(tmp_path: Path) -> None:
    root = make_log_dir(tmp_path / "logs")
    props = files.read_meta_properties(str(root))
    assert props == {"node.id": "1", "directory.id": "q0ct3jNbRTa3kg9Q5LD-TQ", "version": "1",
                     "cluster.id": "MkU3OEVBNTcwNTJENDM2Qk"}
    assert files.find_cluster_id([str(root)]) == "MkU3OEVBNTcwNTJENDM2Qk"
    assert files.find_cluster_id([str(root / files.METADATA_PARTITION_DIR)]) == "MkU3OEVBNTcwNTJENDM2Qk"
    assert files.find_cluster_id([str(root / files.METADATA_PARTITION_DIR / SEG0)]) == "MkU3OEVBNTcwNTJENDM2Qk"
    assert files.find_cluster_id([str(tmp_path / "nothing")]) is None
    assert files.parse_properties("a = b\nc:d\n! x\ne\\:f=g h\n") == {"a": "b", "c": "d", "e:f": "g h"}


def test_quorum_state_and_other_text_files(tmp_path: Path) -> None:
    root = make_log_dir(tmp_path / "logs")
    meta = root / files.METADATA_PARTITION_DIR
    assert files.read_quorum_state(str(meta / "quorum-state"))["leaderEpoch"] == 3
    v0 = touch(tmp_path / "v0" / "quorum-state", json.dumps({
        "clusterId": "abc", "leaderId": 1, "leaderEpoch": 2, "votedId": -1, "appliedOffset": 0,
        "currentVoters": [{"voterId": 1}], "data_version": 0}).encode())
    assert files.read_quorum_state(str(v0))["currentVoters"] == [{"voterId": 1}]
    assert files.find_cluster_id([str(v0.parent)]) == "abc"
    assert files.read_leader_epoch_checkpoint(str(meta / "leader-epoch-checkpoint")) == [(1, 0), (3, 150)]
    assert files.read_partition_metadata(str(meta / "partition.metadata"))["topic_id"] == files.METADATA_TOPIC_ID


@pytest.mark.parametrize(("name", "offset"), [
    (SEG200, 200), (SNAP100, 0), ("bootstrap.checkpoint", 0), ("notes.txt", None), ("", None),
    (f"file:/var/kafka/__cluster_metadata-0/{SEG200}", 200),
])
def test_first_offset_from_name(name: str, offset: int | None) -> None:
    """Where a file's first batch should be: snapshots count their offsets from 0, segments from their name."""
    assert files.first_offset_from_name(name) == offset
