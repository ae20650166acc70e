"""The local file system without child processes (`replay.spark.local_fs`): a local session writes through it, and on
what it changes (permissions, links, `FileContext` renames) it answers as Hadoop's own local file system does, the
oracle, side by side in the same JVM."""

from __future__ import annotations

import os
import stat
from pathlib import Path
from typing import Any

import pytest

from replay.spark import local_fs

pytestmark = pytest.mark.spark


def test_a_local_session_writes_through_it(spark: Any) -> None:
    assert local_fs.built_jar() is not None, "the jar is built by `make setup` (python -m replay.spark.local_fs)"
    jvm = spark.sparkContext._jvm
    conf = spark.sparkContext._jsc.hadoopConfiguration()
    uri = jvm.java.net.URI("file:///")
    assert jvm.org.apache.hadoop.fs.FileSystem.get(uri, conf).getClass().getName() == local_fs.FILE_SYSTEM
    context = jvm.org.apache.hadoop.fs.FileContext.getFileContext(uri, conf)
    assert context.getDefaultFileSystem().getClass().getName() == local_fs.ABSTRACT_FILE_SYSTEM


def test_a_class_path_set_by_the_caller_keeps_hadoops_own(monkeypatch: pytest.MonkeyPatch) -> None:
    ours = {local_fs.CLASS_PATH: "/x/local-fs.jar", "spark.hadoop.fs.file.impl": local_fs.FILE_SYSTEM,
            "spark.hadoop.fs.AbstractFileSystem.file.impl": local_fs.ABSTRACT_FILE_SYSTEM}
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    kept = dict(ours)
    local_fs.keep_consistent(kept, ours)
    assert kept == ours
    theirs = {**ours, local_fs.CLASS_PATH: "/their/jar.jar"}
    local_fs.keep_consistent(theirs, ours)
    assert theirs == {local_fs.CLASS_PATH: "/their/jar.jar"}
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-class-path /their/jar.jar pyspark-shell")
    submitted = dict(ours)
    local_fs.keep_consistent(submitted, ours)
    assert submitted == {local_fs.CLASS_PATH: "/x/local-fs.jar"}
    assert local_fs.spark_conf("spark://host:7077") == {}  # a cluster's executors do not have the jar


def _file_systems(spark: Any) -> dict[str, Any]:
    """Hadoop's own local file system and ours, each initialized afresh."""
    jvm = spark.sparkContext._jvm
    conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
    stock = jvm.org.apache.hadoop.fs.LocalFileSystem()
    ours = jvm.kraftreplay.fs.NioLocalFileSystem()
    for fs in (stock, ours):
        fs.initialize(jvm.java.net.URI("file:///"), conf)
    return {"stock": stock, "ours": ours}


def _outcome(call: Any) -> Any:
    """What a call returned, or the Java exception class it raised."""
    from py4j.protocol import Py4JJavaError

    try:
        return call()
    except Py4JJavaError as e:
        return ("raised", e.java_exception.getClass().getName())


def test_permissions_and_links_as_hadoops_own(spark: Any, tmp_path: Path) -> None:
    jvm = spark.sparkContext._jvm
    hadoop = jvm.org.apache.hadoop.fs
    seen: dict[str, dict[str, Any]] = {}
    for name, fs in _file_systems(spark).items():
        root = tmp_path / name
        root.mkdir()
        mode = hadoop.permission.FsPermission
        assert fs.mkdirs(hadoop.Path(f"file:{root}/d"), mode("0750"))
        fs.create(hadoop.Path(f"file:{root}/d/f"), mode("0640"), True, 4096, 1, 1 << 20, None).close()
        (root / "g").write_text("x")
        fs.setPermission(hadoop.Path(f"file:{root}/g"), mode("0604"))
        (root / "s").mkdir()
        fs.setPermission(hadoop.Path(str(root / "s")), mode("1777"))  # beyond rwx: still chmod's work
        os.symlink(root / "g", root / "link")
        os.symlink(root / "gone", root / "dangling")

        def link(path: str, fs: Any = fs) -> Any:
            status = fs.getFileLinkStatus(hadoop.Path(path))
            return (status.isSymlink(), status.isDirectory(), status.getLen(),
                    status.getSymlink().toString() if status.isSymlink() else None)

        seen[name] = {
            "modes": {p: stat.S_IMODE((root / p).stat().st_mode) for p in ("d", "d/f", "g", "s")},
            "missing chmod raises": isinstance(_outcome(lambda fs=fs, root=root, mode=mode: fs.setPermission(
                hadoop.Path(f"file:{root}/none"), mode("0644"))), tuple),
            "file": link(f"file:{root}/g"),
            "directory": link(f"file:{root}/d"),
            "link by its text": link(str(root / "link")),
            "link qualified": link(f"file:{root}/link"),
            "dangling link": _outcome(lambda root=root: link(str(root / "dangling"))),
            "missing": _outcome(lambda root=root: link(f"file:{root}/none")),
        }
        for key in ("link by its text", "dangling link"):  # the targets name each side's own directory
            seen[name][key] = str(seen[name][key]).replace(str(root), "ROOT")
    assert seen["ours"] == seen["stock"], seen
    assert seen["ours"]["modes"]["g"] == 0o604 and seen["ours"]["modes"]["s"] == 0o1777
    assert seen["ours"]["missing chmod raises"]
    assert seen["ours"]["link by its text"].startswith("(True, False")
    assert "FileNotFoundException" in str(seen["ours"]["missing"])


def test_file_context_renames_as_hadoops_own(spark: Any, tmp_path: Path) -> None:
    """Delta commits by renaming through `FileContext`, which must not replace a commit already there."""
    jvm = spark.sparkContext._jvm
    gateway = spark.sparkContext._gateway
    hadoop = jvm.org.apache.hadoop.fs
    rename_options = getattr(hadoop, "Options$Rename")
    none = gateway.new_array(rename_options, 1)
    none[0] = rename_options.NONE
    outcomes = {}
    for name, impl in (("stock", "org.apache.hadoop.fs.local.LocalFs"), ("ours", local_fs.ABSTRACT_FILE_SYSTEM)):
        conf = jvm.org.apache.hadoop.conf.Configuration(spark.sparkContext._jsc.hadoopConfiguration())
        conf.set("fs.AbstractFileSystem.file.impl", impl)
        context = hadoop.FileContext.getFileContext(jvm.java.net.URI("file:///"), conf)
        assert context.getDefaultFileSystem().getClass().getName() == impl
        root = tmp_path / name
        root.mkdir()
        for f in ("tmp1", "tmp2"):
            (root / f).write_text(f)
        first = _outcome(lambda c=context, r=root: c.rename(hadoop.Path(f"file:{r}/tmp1"), hadoop.Path(f"file:{r}/00.json"), none))
        second = _outcome(lambda c=context, r=root: c.rename(hadoop.Path(f"file:{r}/tmp2"), hadoop.Path(f"file:{r}/00.json"), none))
        outcomes[name] = (first, second, sorted(p.name for p in root.iterdir()), (root / "00.json").read_text())
    assert outcomes["ours"] == outcomes["stock"]
    assert outcomes["ours"][0] is None and "FileAlreadyExistsException" in str(outcomes["ours"][1])
    assert outcomes["ours"][3] == "tmp1"
