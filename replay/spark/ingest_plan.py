"""The ingest's plan: which files, of which kind, opened how, in which pieces (the driver's side: no file is read).

The inputs are listed with Spark's `binaryFile` source, selecting only `path` and `length`, so every filesystem
Spark reads works (local paths, `file:`, `dbfs:`, `/Volumes/...`, `s3a://`, `abfss://`...), and classified by name
as `replay.kafka.files` does; names it cannot place are sniffed on the executors. Spark's listing skips "hidden"
names (`_*`, `.*`) and so every `__cluster_metadata-0` directory: those are added as explicit roots; other
directories whose names start with `_` or `.` must be named explicitly. Local segment and snapshot files are
decoded in pieces when large, or when fewer files than cores would leave cores idle.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import posixpath
import re
from collections.abc import Iterable, Sequence

from pyarrow import fs as pafs
from pyspark.sql import SparkSession

from replay.kafka import files as kfiles
from replay.kafka.model import SourceKind
from replay.spark.ingest_decode import UNKNOWN_KIND, PlannedFile
from replay.spark.ingest_report import IngestError

_SCHEME_RE = re.compile(r"^([A-Za-z][A-Za-z0-9+.-]*):")


def _scheme(uri: str) -> str | None:
    m = _SCHEME_RE.match(uri)
    if m is None or (len(m.group(1)) == 1 and os.name == "nt"):  # C:\ on Windows
        return None
    return m.group(1).lower()


def local_path_of(uri: str) -> str | None:
    """The local filesystem path for a URI when this machine can open it directly, else None."""
    scheme = _scheme(uri)
    if scheme is None:
        return uri
    if scheme == "file":
        rest = uri[5:]
        if rest.startswith("//"):  # file://host/path or file:///path
            rest = rest[2:]
            rest = rest[rest.index("/"):] if "/" in rest else "/"
        return rest
    if scheme == "dbfs":
        rest = "/" + uri[5:].lstrip("/")
        if rest.startswith("/Volumes/") and os.path.isdir("/Volumes"):
            return rest
        if os.path.isdir("/dbfs"):
            return "/dbfs" + rest
    return None


@functools.lru_cache(maxsize=65536)
def _norm(uri: str) -> str:
    """A comparable form: the real path for local files, the URI without a trailing slash otherwise."""
    local = local_path_of(uri)
    return os.path.realpath(local) if local is not None else uri.rstrip("/")


def input_roots(paths: Sequence[str]) -> list[str]:
    """Inputs as Spark should list them: local paths made absolute, URIs as given."""
    roots = []
    for p in paths:
        p = str(p)
        roots.append(os.path.abspath(os.path.expanduser(p)) if _scheme(p) is None else p)
    return roots


def classify_listing(
    roots: Sequence[str], listed: Iterable[tuple[str, int]]
) -> tuple[list[PlannedFile], list[str]]:
    """Classify listed files `(uri, length)` by name, as `replay.kafka.files.discover` does for local directories.

    Returns the files to decode (in replay order) and the ignored ones. Pure Python: no Spark, no file access.
    """
    listed = sorted(set(listed))
    uris = [u for u, _ in listed]
    root_dirs = {r.rstrip("/") for r in roots}
    names_by_dir: dict[str, set[str]] = {}
    for u in uris:
        d, n = posixpath.split(u)
        names_by_dir.setdefault(d, set()).add(n)
    subdirs_by_dir: dict[str, set[str]] = {}
    for d in list(names_by_dir):
        while True:
            parent, name = posixpath.split(d)
            if not name or parent == d:
                break
            subdirs_by_dir.setdefault(parent, set()).add(name)
            d = parent

    def other_partition_dir(d: str) -> bool:
        parent, name = posixpath.split(d)
        if name.startswith(kfiles.METADATA_PARTITION_DIR) or kfiles._PARTITION_DIR_RE.match(name) is None:
            return False
        if "partition.metadata" in names_by_dir.get(d, set()):
            return True
        return "meta.properties" in names_by_dir.get(parent, set()) or kfiles.METADATA_PARTITION_DIR in \
            subdirs_by_dir.get(parent, set())

    root_norms = {_norm(r) for r in root_dirs}

    def skipped_by_dir(uri: str) -> bool:
        d = posixpath.dirname(uri)
        while d and _norm(d) not in root_norms:
            if other_partition_dir(d):
                return True
            parent = posixpath.dirname(d)
            if parent == d:
                break
            d = parent
        return False

    planned: list[PlannedFile] = []
    ignored: list[str] = []
    for uri, length in listed:
        explicit = _norm(uri) in root_norms
        name = posixpath.basename(uri)
        if not explicit and (kfiles.is_ignored_name(name) or skipped_by_dir(uri)):
            ignored.append(uri)
            continue
        source = kfiles.classify_name(uri)
        if source is None:
            if kfiles.is_ignored_name(name) and not explicit:
                ignored.append(uri)
                continue
            planned.append(PlannedFile(uri, int(length), UNKNOWN_KIND, explicit=explicit))
        else:
            planned.append(PlannedFile(uri, int(length), source.kind.value, source.snapshot_end_offset,
                                       source.snapshot_epoch, explicit))
    order = {SourceKind.BOOTSTRAP.value: 0, SourceKind.SNAPSHOT.value: 1, SourceKind.SEGMENT.value: 2}
    planned.sort(key=lambda f: (order.get(f.kind, 3), f.snapshot_end_offset or 0, f.snapshot_epoch or 0, f.name,
                                f.uri))
    return planned, ignored


def choose_opener(uri: str, probes: dict[str, str]) -> tuple[str, str | None]:
    """How executors will open `uri`: ("local", path) | ("fsspec", None) | ("pyarrow", None) | ("spark", None)."""
    local = local_path_of(uri)
    if local is not None:
        return "local", local
    scheme = _scheme(uri) or ""
    if scheme not in probes:
        probes[scheme] = _probe(uri)
    return probes[scheme], None


def _probe(uri: str) -> str:
    try:
        import fsspec

        with fsspec.open(uri, "rb") as f:
            f.read(1)
        return "fsspec"
    except Exception:
        pass
    try:
        filesystem, path = pafs.FileSystem.from_uri(uri)
        with filesystem.open_input_stream(path) as f:
            f.read(1)
        return "pyarrow"
    except Exception:
        return "spark"


# Spark's file listing skips names that start with "_" or "." (Hadoop "hidden" files), and with them every
# `__cluster_metadata-0` directory found while walking. They are added as explicit roots: found with os.walk for local
# inputs, and through this glob (up to four directory levels below the input) for other filesystems.
METADATA_DIR_GLOB = "{,*/,*/*/,*/*/*/,*/*/*/*/}" + kfiles.METADATA_PARTITION_DIR.rsplit("-", 1)[0] + "-*"


def _listing(spark: SparkSession, paths: list[str]) -> list[tuple[str, int]]:
    df = spark.read.format("binaryFile").option("recursiveFileLookup", "true").load(paths).select("path", "length")
    return [(str(r["path"]), int(r["length"])) for r in df.collect()]  # one small row per file, not the log


def _hidden_metadata_dirs(local_dir: str) -> list[str]:
    found = []
    for dirpath, dirnames, _files in os.walk(local_dir):
        for d in dirnames:
            if d.startswith(kfiles.METADATA_PARTITION_DIR.rsplit("-", 1)[0]):
                found.append(os.path.join(dirpath, d))
    return sorted(found)


def list_inputs(spark: SparkSession, roots: Sequence[str]) -> list[tuple[str, int]]:
    """Every file under `roots` as `(uri, length)`, listed by Spark's binaryFile source without reading content.

    The roots on this machine are listed together, in one Spark job: a watch's micro-batch names each new file, and
    a job per file cost about 70 ms a file (a cluster's 5 files, warm: 340-480 ms against 110-130 ms). Should that
    listing fail, each root is listed alone, so that the error names the one that failed."""
    out: list[tuple[str, int]] = []
    here: list[tuple[str, list[str]]] = []  # local roots, each with its hidden metadata directories
    for root in roots:
        local = local_path_of(root)
        if local is not None and not os.path.exists(local) and _scheme(root) is None:
            local = None  # not on this machine: Spark resolves it on its default filesystem (DBFS, HDFS, ...)
        if local is not None:
            if not os.path.exists(local):
                raise IngestError(f"{root} does not exist")
            here.append((root, [root, *(_hidden_metadata_dirs(local) if os.path.isdir(local) else [])]))
            continue
        try:  # two paths: Spark then skips its metadata-directory probe (a stack trace in the log for globs)
            out += _listing(spark, [root, root.rstrip("/") + "/" + METADATA_DIR_GLOB])
        except Exception:
            try:
                out += _listing(spark, [root])
            except Exception as e:
                if _scheme(root) is None:
                    raise IngestError(f"{root} does not exist (neither here nor on Spark's default filesystem)"
                                      ) from e
                raise IngestError(f"cannot list {root}: {_first_line(e)}") from e
    if here:
        try:
            out += _listing(spark, [p for _root, paths in here for p in paths])
        except Exception:
            for root, paths in here:
                try:
                    out += _listing(spark, paths)
                except Exception as e:
                    raise IngestError(f"cannot list {root}: {_first_line(e)}") from e
    return out


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__


def plan_files(spark: SparkSession, paths: Sequence[str], listed: Sequence[tuple[str, int]] | None = None
               ) -> tuple[list[PlannedFile], list[str]]:
    """List `paths` with Spark (names and sizes only) and decide each file's kind and how executors open it.
    `listed`: the files under `paths` as `(uri, length)`, listed already (a watch's new files): not listed again."""
    roots = input_roots(paths)
    planned, ignored = classify_listing(roots, list_inputs(spark, roots) if listed is None else listed)
    probes: dict[str, str] = {}
    out = []
    for f in planned:
        how, local = choose_opener(f.uri, probes)
        out.append(PlannedFile(f.uri, f.length, f.kind, f.snapshot_end_offset, f.snapshot_epoch, f.explicit, how,
                               local))
    return out, ignored


def _splittable(f: PlannedFile) -> bool:
    """A local binary segment or snapshot: one a task can seek in and start reading at a batch boundary."""
    return f.open_with == "local" and f.kind in (SourceKind.SEGMENT.value, SourceKind.SNAPSHOT.value)


def split_plan(plan: list[PlannedFile], split_bytes: int) -> list[PlannedFile]:
    """Large local segment and snapshot files as pieces of about `split_bytes`, so one file uses many cores (an
    entry that is a piece already, the part of a file past what the lake holds, is split over its own range)."""
    if split_bytes <= 0:
        return list(plan)
    out: list[PlannedFile] = []
    for f in plan:
        if not _splittable(f) or f.size <= split_bytes:
            out.append(f)
            continue
        stop = f.length if f.end is None else min(f.end, f.length)
        for start in range(f.start, stop, split_bytes):
            out.append(dataclasses.replace(f, start=start, end=min(start + split_bytes, stop)))
    return out


DEFAULT_SPLIT_BYTES = 64 * 1024 * 1024
MIN_SPLIT_BYTES = 4 * 1024 * 1024


def split_for_cores(plan: list[PlannedFile], split_bytes: int, cores: int) -> int:
    """The piece size that keeps `cores` tasks busy: at most `split_bytes`, and smaller when the splittable bytes
    would otherwise leave cores idle (one 20 MiB segment on 2 cores: two 10 MiB pieces), never below
    `MIN_SPLIT_BYTES` (a piece costs a walk over the batch headers before it and a task)."""
    if split_bytes <= 0:
        return split_bytes
    splittable = sum(f.size for f in plan if _splittable(f))
    per_core = -(-splittable // max(cores, 1))
    return min(split_bytes, max(MIN_SPLIT_BYTES, per_core))


# Small files are decoded together, up to this many bytes a task: a task costs about 35 ms of scheduling and
# Python worker time, as much as decoding 4 MB. The realistic 10M log's summary pass (11 segments and 99 snapshots
# of 0.6 MB) took 9.8-12.2 s in 111 tasks, 5.8-6.6 s in 12-24 (one local[2] session, 2026-12-06).
TASK_BYTES = 16 * 1024 * 1024
MAX_TASKS = 4096


def pack_tasks(plan: Sequence[PlannedFile], cores: int) -> list[list[PlannedFile]]:
    """The entries each decoding task takes: an entry of `TASK_BYTES` or more alone; smaller ones together, of one
    kind, cluster by cluster and in log order (snapshots by end offset, segments by base offset), so that a task's
    rows of a cluster, and so the files it writes, cover one stretch of offsets. Less than `TASK_BYTES` a task when
    the input is small, so that every core gets work; the biggest tasks first."""
    total = sum(f.size for f in plan)
    target = max(1, min(TASK_BYTES, -(-total // (2 * max(cores, 1)))))
    tasks: list[list[PlannedFile]] = []
    small: dict[str, list[PlannedFile]] = {}
    for f in plan:
        if f.size >= target:
            tasks.append([f])
        else:
            small.setdefault(f.kind, []).append(f)
    for files in small.values():
        group: list[PlannedFile] = []
        size = 0
        for f in sorted(files, key=_log_order):
            if group and size + f.size > target:
                tasks.append(group)
                group, size = [], 0
            group.append(f)
            size += f.size
        if group:
            tasks.append(group)
    tasks.sort(key=lambda t: -sum(f.size for f in t))
    if len(tasks) > MAX_TASKS:
        tasks = [[f for t in tasks[i::MAX_TASKS] for f in t] for i in range(MAX_TASKS)]
    return tasks


def _log_order(f: PlannedFile) -> tuple[str, int, int, str, int]:
    first = f.snapshot_end_offset if f.snapshot_end_offset is not None else kfiles.first_offset_from_name(f.uri)
    return (f.cluster or "", -1 if first is None else first, f.snapshot_epoch or 0, f.uri, f.start)
