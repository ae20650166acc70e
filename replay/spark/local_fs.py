"""Hadoop's local file system without child processes, for the local Spark drivers this package starts.

Without Hadoop's native library (PySpark ships none), Hadoop's local file system starts a `chmod` process for
every file and directory it creates and a `readlink` process for every rename Delta commits through `FileContext`:
about 550 processes for one small ingest and replay, at 2 ms or more each (the JVM starts a helper, which then tries
each directory of PATH). The classes in `local_fs_java/` are the same file system with those two done in the JVM
(`java.nio`); everything else is Hadoop's own. The small sample's ingest and replay took 43.3-49.2 s with them
against 53.6-54.6 s without.

`make setup` compiles them into a jar in the user's cache (`python -m replay.spark.local_fs`), named after the
sources and the Hadoop they compile against. A local session uses the jar when it is there (`spark_conf`); without
it, or with `KRAFT_REPLAY_LOCAL_FS=off`, Hadoop's own file system runs. A cluster's executors and Databricks are
left alone: the jar is only on this machine.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from collections.abc import Mapping
from pathlib import Path

import pyspark

from replay.maven import cache_root

ENV = "KRAFT_REPLAY_LOCAL_FS"
SOURCES = Path(__file__).parent / "local_fs_java"
FILE_SYSTEM = "kraftreplay.fs.NioLocalFileSystem"  # fs.file.impl
ABSTRACT_FILE_SYSTEM = "kraftreplay.fs.NioLocalFs"  # fs.AbstractFileSystem.file.impl (FileContext)
CLASS_PATH = "spark.driver.extraClassPath"


def _hadoop_jar() -> Path | None:
    """The Hadoop API jar PySpark runs with (what the classes compile against)."""
    found = sorted((Path(pyspark.__file__).parent / "jars").glob("hadoop-client-api-*.jar"))
    return found[-1] if found else None


def _sources() -> list[Path]:
    return sorted(SOURCES.rglob("*.java"))


def jar_path() -> Path | None:
    """Where the jar of these sources and this Hadoop is (or would be); None when it is turned off or cannot be."""
    if os.environ.get(ENV, "").strip().lower() in ("0", "off", "no", "false"):
        return None
    hadoop = _hadoop_jar()
    sources = _sources()
    if hadoop is None or not sources:
        return None
    digest = hashlib.sha256(hadoop.name.encode())
    for source in sources:
        digest.update(source.read_bytes())
    return cache_root() / "local-fs" / f"nio-local-fs-{digest.hexdigest()[:16]}.jar"


def built_jar() -> Path | None:
    """The jar, when it has been built."""
    path = jar_path()
    return path if path is not None and path.is_file() else None


def spark_conf(master: str) -> dict[str, str]:
    """The settings that make a local session's driver use these classes: none for another master, or when the jar
    is not built."""
    jar = built_jar()
    if jar is None or not master.startswith("local"):
        return {}
    return {CLASS_PATH: str(jar), "spark.hadoop.fs.file.impl": FILE_SYSTEM,
            "spark.hadoop.fs.AbstractFileSystem.file.impl": ABSTRACT_FILE_SYSTEM}


def keep_consistent(settings: dict[str, str], ours: Mapping[str, str]) -> None:
    """Leave Hadoop's own file system in `settings` when something else set the driver's class path over ours (the
    caller's settings, `PYSPARK_SUBMIT_ARGS`): the file system classes would not be found, and no file written."""
    if not ours:
        return
    overridden = settings.get(CLASS_PATH) != ours[CLASS_PATH]
    submit_args = os.environ.get("PYSPARK_SUBMIT_ARGS", "")
    if overridden or "--driver-class-path" in submit_args or CLASS_PATH in submit_args:
        for key in ours:
            if key != CLASS_PATH and settings.get(key) == ours[key]:
                del settings[key]


def build(say: bool = True) -> bool:
    """Compile the classes into the jar when it is missing; returns whether the jar is there afterwards. A machine
    without javac gets a note: the jar only makes local sessions faster."""
    path = jar_path()
    if path is None or path.is_file():
        return path is not None
    javac = shutil.which("javac")
    hadoop = _hadoop_jar()
    if javac is None or hadoop is None:
        print("note: no javac: local Spark sessions use Hadoop's own local file system (a little slower)",
              file=sys.stderr)
        return False
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kraft-replay-local-fs-") as work:
        done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", str(hadoop), "-d", work,
                               *map(str, _sources())], capture_output=True, text=True, check=False)
        if done.returncode != 0:
            print(f"note: the local file system classes did not compile (local sessions use Hadoop's own):\n"
                  f"{done.stderr.strip()[-2000:]}", file=sys.stderr)
            return False
        partial = Path(work) / "local-fs.jar"
        with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
            for compiled in sorted(Path(work).rglob("*.class")):
                jar.write(compiled, compiled.relative_to(work).as_posix())
        os.replace(shutil.copy(partial, path.with_suffix(".tmp")), path)  # whole or not at all
    if say:
        print(f"local file system classes: {path}")
    return True


if __name__ == "__main__":
    build()  # a missing jar is a note, not a failure: setup goes on
