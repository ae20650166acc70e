"""A class-data archive for the Spark drivers this package starts (Java's dynamic AppCDS).

A driver JVM spends seconds loading and verifying the same thousands of Spark, Scala and Hadoop classes every time it
starts. Java can store the classes a run loaded in an archive (`-XX:ArchiveClassesAtExit`) that later JVMs map
instead (`-XX:SharedArchiveFile`). Measured on the 2-core machine (2026-12-04): a local session ready in 4.2-4.3 s
and its first job in 1.5-1.6 s with the archive, against 6.4-6.8 s and 2.5 s without: seconds off every command that
starts Spark.

`make setup` builds the archive (`python -m replay.spark.build_class_archive`): a driver that does a little Delta
work writes it as it exits. It lives in the user's cache, named after what it depends on (the Java binary, PySpark,
Delta, the local file system's jar on the class path, `replay.spark.local_fs`), so another Java or Spark simply
finds none. A JVM that cannot use an archive (one of another class path, a Connect server say) runs without it:
the archive only ever changes how fast classes load.
`KRAFT_REPLAY_CLASS_ARCHIVE=off` leaves it out; a path there names another file.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from replay.maven import cache_root
from replay.spark import local_fs
from replay.spark.java_jar import java_identity, turned_off

ENV = "KRAFT_REPLAY_CLASS_ARCHIVE"
# the JVM says nothing about the archive (a rejected one would otherwise print a warning on every start)
_QUIET = "-Xshare:auto -Xlog:cds=off -Xlog:cds+dynamic=off"


def archive_path() -> Path | None:
    """Where the archive of this Java, PySpark and Delta is (or would be); None when it is turned off or there is no
    java to run."""
    chosen = os.environ.get(ENV, "").strip()
    if turned_off(ENV):
        return None
    if chosen:
        return Path(chosen)
    identity = java_identity()
    if identity is None:
        return None
    class_path = local_fs.built_jar()  # a driver's class path must begin as the archive's did
    key = hashlib.sha256(f"{identity}|{class_path}".encode()).hexdigest()[:16]
    return cache_root() / "class-archive" / f"driver-{key}.jsa"


def jvm_options() -> str:
    """The driver's options that map the archive, or "" when there is none."""
    path = archive_path()
    return f"-XX:SharedArchiveFile={path} {_QUIET}" if path is not None and path.is_file() else ""
