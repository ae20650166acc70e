"""Files of a dump: classify by name (spec §1.3), walk directories, and read the small text files.

`discover(paths)` accepts `__cluster_metadata-0` directories, their parent log directories (which hold
`bootstrap.checkpoint` and `meta.properties`), directories of many such copies, and single files. It returns the
metadata files in replay order, bootstrap first, then snapshots by (end offset, epoch), then segments by base
offset, then kafka-dump-log text files, plus the paths it ignored.

Inside a walked directory only names Kafka gives metadata files are taken; other topics' partition directories in
a log dir are skipped. A file named explicitly is always returned: by name when the name says what it is, as
dump-log text when it starts with "Dumping ", otherwise as a segment of unknown base offset, so the batch reader
can report `not_a_metadata_log` for it rather than it vanishing silently.
"""

from __future__ import annotations

import json
import os
import re
from typing import Any

from .model import SourceFile, SourceKind

METADATA_PARTITION_DIR = "__cluster_metadata-0"
METADATA_TOPIC_ID = "AAAAAAAAAAAAAAAAAAAAAQ"
BOOTSTRAP_NAME = "bootstrap.checkpoint"

SEGMENT_RE = re.compile(r"^(\d{20})\.log$")
SNAPSHOT_RE = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
_PARTITION_DIR_RE = re.compile(r"^(.+)-(\d+)(\.[0-9a-f]{32}-(delete|future|stray))?$")

# Names that are part of a metadata log dump but hold nothing to decode.
IGNORED_NAMES = frozenset({
    "partition.metadata", "leader-epoch-checkpoint", "quorum-state", "quorum-state.tmp", "meta.properties",
    ".lock", "replication-offset-checkpoint", "recovery-point-offset-checkpoint", "log-start-offset-checkpoint",
    "cleaner-offset-checkpoint", ".kafka_cleanshutdown",
})
IGNORED_SUFFIXES = (
    ".index", ".timeindex", ".snapshot", ".txnindex", ".deleted", ".cleaned", ".swap", ".checkpoint.part",
    ".checkpoint.deleted", ".part", ".tmp",
)

DUMP_LOG_TEXT_PREFIX = b"Dumping "


def segment_name(base_offset: int) -> str:
    return f"{base_offset:020d}.log"


def snapshot_name(end_offset: int, epoch: int) -> str:
    return f"{end_offset:020d}-{epoch:010d}.checkpoint"


def classify_name(path: str) -> SourceFile | None:
    """A `SourceFile` when the file's name says it is a segment, a snapshot or the bootstrap file; else None."""
    name = os.path.basename(path.rstrip("/"))
    m = SEGMENT_RE.match(name)
    if m:
        return SourceFile(path, SourceKind.SEGMENT, base_offset=int(m.group(1)))
    m = SNAPSHOT_RE.match(name)
    if m:
        return SourceFile(path, SourceKind.SNAPSHOT, snapshot_end_offset=int(m.group(1)), snapshot_epoch=int(m.group(2)))
    if name == BOOTSTRAP_NAME:
        return SourceFile(path, SourceKind.BOOTSTRAP)
    return None


def first_offset_from_name(path: str) -> int | None:
    """The offset a file's first batch should have, by its name: a segment's base offset, 0 for a snapshot or the
    bootstrap file (their offsets are local, from 0); None when the name says nothing."""
    source = classify_name(path) if path else None
    if source is None:
        return None
    return source.base_offset if source.kind == SourceKind.SEGMENT else 0


def is_ignored_name(name: str) -> bool:
    """Names Kafka keeps next to the metadata log that are not decoded (indexes, temp files, state files)."""
    return name in IGNORED_NAMES or name.endswith(IGNORED_SUFFIXES)


def looks_like_dump_log_text(path: str) -> bool:
    try:
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError:
        return False
    return head.lstrip(b"\xef\xbb\xbf").startswith(DUMP_LOG_TEXT_PREFIX)


def classify(path: str, explicit: bool = False) -> SourceFile | None:
    """Classify one file by name, then by content. `explicit` (named by the user): never None."""
    source = classify_name(path)
    if source is not None:
        return source
    name = os.path.basename(path)
    if looks_like_dump_log_text(path):
        return SourceFile(path, SourceKind.DUMP_LOG_TEXT)
    if explicit and not is_ignored_name(name):
        return SourceFile(path, SourceKind.SEGMENT)  # unknown base offset: the reader says what it is
    return None


def _is_other_partition_dir(path: str, name: str) -> bool:
    """A partition directory of another topic (to skip in a log dir)."""
    if name.startswith(METADATA_PARTITION_DIR):
        return False
    meta = os.path.join(path, "partition.metadata")
    if os.path.isfile(meta):
        topic_id = read_partition_metadata(meta).get("topic_id")
        return topic_id is not None and topic_id != METADATA_TOPIC_ID
    if _PARTITION_DIR_RE.match(name) is None:
        return False
    parent = os.path.dirname(path)
    return os.path.isfile(os.path.join(parent, "meta.properties")) or os.path.isdir(
        os.path.join(parent, METADATA_PARTITION_DIR)
    )


def sort_key(source: SourceFile) -> tuple[Any, ...]:
    if source.kind == SourceKind.BOOTSTRAP:
        return (0, 0, 0, source.path)
    if source.kind == SourceKind.SNAPSHOT:
        return (1, source.snapshot_end_offset, source.snapshot_epoch, source.path)
    if source.kind == SourceKind.SEGMENT:
        base = source.base_offset
        return (2, 0 if base is not None else 1, base or 0, source.path)
    return (3, 0, 0, source.path)


def discover(paths: list[str]) -> tuple[list[SourceFile], list[str]]:
    """The metadata files under `paths` in replay order, and the paths that were ignored."""
    found: dict[str, SourceFile] = {}
    ignored: list[str] = []

    def add(source: SourceFile) -> None:
        found.setdefault(os.path.realpath(source.path), source)

    for top in paths:
        if os.path.isdir(top):
            for dirpath, dirnames, filenames in os.walk(top):
                keep_dirs = []
                for d in sorted(dirnames):
                    full = os.path.join(dirpath, d)
                    if _is_other_partition_dir(full, d):
                        ignored.append(full)
                    else:
                        keep_dirs.append(d)
                dirnames[:] = keep_dirs
                for name in sorted(filenames):
                    full = os.path.join(dirpath, name)
                    source = None if is_ignored_name(name) else classify(full)
                    if source is None:
                        ignored.append(full)
                    else:
                        add(source)
        elif os.path.exists(top):
            source = classify(top, explicit=True)
            if source is None:
                ignored.append(top)
            else:
                add(source)
        else:
            ignored.append(top)
    return sorted(found.values(), key=sort_key), ignored


# ---- small text files ----------------------------------------------------------------------------------------


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file, the simple subset Kafka writes: `key=value` lines, `#`/`!` comments."""
    props: dict[str, str] = {}
    for raw in text.splitlines():
        line = raw.strip()
        if not line or line[0] in "#!":
            continue
        m = re.match(r"^((?:\\.|[^=:\s])+)\s*[=:\s]\s*(.*)$", line)
        if m:
            key, value = m.group(1), m.group(2)
        else:
            key, value = line, ""
        props[key.replace("\\", "")] = value.replace("\\:", ":").replace("\\=", "=").replace("\\\\", "\\")
    return props


def read_meta_properties(path: str) -> dict[str, str]:
    """`meta.properties` (a file, or a log dir holding one): version, cluster.id, node.id, directory.id."""
    if os.path.isdir(path):
        path = os.path.join(path, "meta.properties")
    with open(path, encoding="utf-8") as f:
        return parse_properties(f.read())


def find_cluster_id(paths: list[str]) -> str | None:
    """The cluster id from the first `meta.properties` found in or next to `paths`, or from a v0 quorum-state."""
    candidates: list[str] = []
    for top in paths:
        base = top if os.path.isdir(top) else os.path.dirname(top)
        candidates += [os.path.join(base, "meta.properties"), os.path.join(os.path.dirname(base), "meta.properties")]
        if os.path.isdir(top):
            for dirpath, _dirs, filenames in os.walk(top):
                if "meta.properties" in filenames:
                    candidates.append(os.path.join(dirpath, "meta.properties"))
    for cand in candidates:
        if os.path.isfile(cand):
            cluster = read_meta_properties(cand).get("cluster.id")
            if cluster:
                return cluster
    for top in paths:
        base = top if os.path.isdir(top) else os.path.dirname(top)
        for cand in (os.path.join(base, "quorum-state"), os.path.join(base, METADATA_PARTITION_DIR, "quorum-state")):
            if os.path.isfile(cand):
                cluster = read_quorum_state(cand).get("clusterId")
                if cluster:
                    return str(cluster)
    return None


def read_quorum_state(path: str) -> dict[str, Any]:
    """`quorum-state`: one line of JSON (v0 has clusterId and currentVoters; v1 has votedDirectoryId)."""
    with open(path, encoding="utf-8") as f:
        data = json.loads(f.read().strip() or "{}")
    return data if isinstance(data, dict) else {}


def read_partition_metadata(path: str) -> dict[str, str]:
    """`partition.metadata`: `version: 0` and `topic_id: <uuid>` lines."""
    out: dict[str, str] = {}
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            for line in f:
                parts = line.split(":", 1)
                if len(parts) == 2:
                    out[parts[0].strip()] = parts[1].strip()
    except OSError:
        pass
    return out


def read_leader_epoch_checkpoint(path: str) -> list[tuple[int, int]]:
    """`leader-epoch-checkpoint`: (leader epoch, start offset) entries."""
    with open(path, encoding="utf-8") as f:
        lines = [ln.split() for ln in f.read().splitlines() if ln.strip()]
    if len(lines) < 2:
        return []
    count = int(lines[1][0])
    return [(int(a), int(b)) for a, b, *_ in lines[2 : 2 + count]]
