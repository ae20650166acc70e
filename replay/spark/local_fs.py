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

import os
from collections.abc import Mapping
from pathlib import Path

from replay.spark.java_jar import JavaJar, turned_off

ENV = "KRAFT_REPLAY_LOCAL_FS"
FILE_SYSTEM = "kraftreplay.fs.NioLocalFileSystem"  # fs.file.impl
ABSTRACT_FILE_SYSTEM = "kraftreplay.fs.NioLocalFs"  # fs.AbstractFileSystem.file.impl (FileContext)
CLASS_PATH = "spark.driver.extraClassPath"
JAR = JavaJar("local-fs", Path(__file__).parent / "local_fs_java", ("hadoop-client-api-*.jar",))


def built_jar() -> Path | None:
    """The jar, when it has been built and is not turned off."""
    return None if turned_off(ENV) else JAR.built()


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
    """Compile the classes into the jar when it is missing; returns whether the jar is there afterwards."""
    return not turned_off(ENV) and JAR.build("the local file system classes", say)


if __name__ == "__main__":
    build()  # a missing jar is a note, not a failure: setup goes on
