"""Java helpers: the Kafka classpath, the `java`/`javac` binaries, and compiling our own Java sources.

Our Java sources live in `tests/harness/java/` (`HARNESS_SOURCES`; AuthorizerOracle.java there belongs to
`tests.harness.oracle`, which builds it separately). They are compiled against `kafka_jars()` into
`<cache>/harness-classes/<hash>/`, where the hash covers what the classes depend on: the sources (names and
bytes), the names of the jars they are compiled against (Maven file names carry the versions, so another Kafka
release recompiles) and the javac options. Anything else reuses the classes, also across processes (the output
directory is created atomically).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

from replay.maven import cache_root, kafka_jars, logging_jars

JAVA_SOURCES = Path(__file__).parent / "java"
LOG4J_TOOLS = Path(__file__).parent / "log4j2-tools.xml"
# Java 17 prints with the platform charset unless told otherwise; resource names and principals may be non-ASCII.
UTF8_FLAGS = ("-Dfile.encoding=UTF-8", "-Dsun.stdout.encoding=UTF-8", "-Dsun.stderr.encoding=UTF-8")
HARNESS_SOURCES = ("AclHistoryDriver.java", "AccessDriver.java")


class JavaError(RuntimeError):
    pass


def tool(name: str) -> str:
    """`java` or `javac` from $JAVA_HOME, else from PATH."""
    return _tool(name)


def _tool(name: str) -> str:
    home = os.environ.get("JAVA_HOME")
    if home and Path(home, "bin", name).exists():
        return str(Path(home, "bin", name))
    found = shutil.which(name)
    if found is None:
        raise JavaError(f"`{name}` is not on PATH (Java 17+ is needed to run Kafka)")
    return found


def java() -> str:
    return _tool("java")


def kafka_classpath() -> str:
    """The Kafka 4.3.1 broker + tools runtime closure, as one `-cp` string."""
    return os.pathsep.join(str(j) for j in kafka_jars())


def broker_classpath() -> str:
    """`kafka_classpath()` plus the logging binding: what `kafka-server-start.sh` would put on the classpath."""
    return os.pathsep.join([kafka_classpath(), *map(str, logging_jars())])


def tool_command(main_class: str, *args: str, heap: str = "256m") -> list[str]:
    """`java ... <main_class> args` with the Kafka classpath and quiet tool logging (warnings to stderr)."""
    return [java(), f"-Xmx{heap}", "-XX:+UseSerialGC", "-XX:TieredStopAtLevel=1", *UTF8_FLAGS,
            f"-Dlog4j2.configurationFile={LOG4J_TOOLS}", "-cp", kafka_classpath(), main_class, *args]


def compiled_classes() -> Path:
    """Compile `HARNESS_SOURCES` once per source change; return the class directory."""
    return compile_java([JAVA_SOURCES / name for name in HARNESS_SOURCES], kafka_jars(), "harness-classes")


def compile_java(sources: list[Path], classpath: list[Path], cache_name: str) -> Path:
    """Compile `sources` against `classpath` into `<cache>/<cache_name>/<hash>`, once per change of the sources,
    the options or the jars' names; return that class directory. Concurrent builds are safe: the first rename wins
    and the others' output is identical."""
    missing = [s for s in sources if not s.exists()]
    if missing:
        raise JavaError(f"missing Java sources: {missing}")
    options = ["-nowarn", "--release", "17", "-encoding", "UTF-8"]
    h = hashlib.sha256()
    for src in sources:
        h.update(src.name.encode() + b"\0" + src.read_bytes() + b"\0")
    h.update("\0".join([*options, *(j.name for j in classpath)]).encode())
    out = cache_root() / cache_name / h.hexdigest()[:16]
    if (out / ".ok").exists():
        return out
    out.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix="build-", dir=out.parent))
    try:
        cmd = [_tool("javac"), *options, "-cp", os.pathsep.join(map(str, classpath)), "-d", str(tmp),
               *map(str, sources)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise JavaError(f"javac failed:\n{proc.stdout}{proc.stderr}")
        (tmp / ".ok").write_text("ok\n")
        try:
            tmp.rename(out)
        except OSError:  # another process won the race; theirs is identical
            if not (out / ".ok").exists():
                raise
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    return out
