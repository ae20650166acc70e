"""Spark's generated code compiled once per machine, not once per driver (the Java agent in `codegen_cache_java/`).

Spark compiles Java source for every stage it runs and keeps the classes only while its driver lives, so each
command that starts a driver compiles the same classes again: the small sample's ingest and replay compiled 745 of
them, 8.1 s of a 41 s run. A local driver this package starts carries a Java agent that keeps the bytecode Janino
made in the user's cache (one file per source text, under a directory named after this Java, Spark and Delta) and
loads it instead of compiling when the same source comes again. What runs is what Janino compiled from the same
text against the same jars; a file that does not load is removed and the source compiled.

`make setup` builds the agent's jar (`python -m replay.spark.codegen_cache`); without it, or with
`KRAFT_REPLAY_CODEGEN_CACHE=off`, Spark compiles as it always does; a path there names another directory. The
directory keeps at most `MAX_BYTES`: the least recently used files go first.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path

from replay.maven import cache_root
from replay.spark.java_jar import JavaJar, java_identity, turned_off

ENV = "KRAFT_REPLAY_CODEGEN_CACHE"
AGENT = "kraftreplay.codegen.CodegenCache"  # the class a driver's JVM answers the cache's counters from
JAR = JavaJar("codegen-cache", Path(__file__).parent / "codegen_cache_java",
              ("janino-*.jar", "commons-compiler-*.jar", "xbean-asm9-shaded-*.jar"),
              ("Premain-Class: kraftreplay.codegen.Agent", "Can-Redefine-Classes: true"))
# A sample's ingest and replay leave about 15 MiB; a year of varied questions stays well under this
MAX_BYTES = 256 << 20


def directory() -> Path | None:
    """The directory of the classes this Java and Spark compiled (`$KRAFT_REPLAY_CODEGEN_CACHE` when it names
    one); None without a java to run."""
    chosen = os.environ.get(ENV, "").strip()
    if chosen and not turned_off(ENV) and chosen.lower() not in ("1", "on", "yes", "true"):
        return Path(chosen)
    identity = java_identity()
    if identity is None:
        return None
    return cache_root() / "codegen" / hashlib.sha256(identity.encode()).hexdigest()[:16]


def jvm_options() -> str:
    """The driver option that loads the agent, or "" when it is off or not built. Trims the directory first."""
    jar = None if turned_off(ENV) else JAR.built()
    where = directory()
    if jar is None or where is None or any(c.isspace() for c in f"{jar}{where}"):  # Spark splits options on spaces
        return ""
    trim(where, MAX_BYTES)
    return f"-javaagent:{jar}={where}"


def trim(where: Path, max_bytes: int) -> None:
    """Remove the least recently used files (the agent marks a file used when it loads it) until the directory
    holds at most three quarters of `max_bytes`, once it holds more than `max_bytes`."""
    try:
        entries = [(st.st_mtime, st.st_size, e.path) for e in os.scandir(where) if e.is_file()
                   for st in [e.stat()]]
    except OSError:
        return
    total = sum(size for _, size, _ in entries)
    if total <= max_bytes:
        return
    for _, size, path in sorted(entries):
        if total <= max_bytes * 3 // 4:
            break
        try:
            os.remove(path)
        except OSError:
            continue
        total -= size


def build(say: bool = True) -> bool:
    """Compile the agent into its jar when it is missing; whether the jar is there afterwards."""
    return not turned_off(ENV) and JAR.build("the generated-code cache agent", say)


if __name__ == "__main__":
    build()  # a missing jar is a note, not a failure: setup goes on
