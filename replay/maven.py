"""Fetch jars from Maven Central with the machine's `mvn` into a cache, and hand back explicit paths.

Spark's own Ivy resolution ignores Maven's settings (mirrors, proxies), so we never rely on it: `mvn` resolves the
runtime closure of a few coordinates once, copies the jars into `<cache>/<name>/`, and writes a stamp listing them.
A second call with the same coordinates reads the stamp and touches no network.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

KAFKA_VERSION = "4.3.1"  # newest release whose broker *and* tools jars Maven Central serves here (4.4.0 lacks tools)
DELTA_JVM_VERSION = "4.4.0"  # delta-spark_4.2_2.13; 4.4.1's jar is not on Central here, the Python wrapper is 4.4.1
DELTA_ARTIFACT = f"io.delta:delta-spark_4.2_2.13:{DELTA_JVM_VERSION}"
# What pyspark already ships; leaving them out avoids a second, older copy on the classpath.
SPARK_PROVIDED_GROUPS = (
    "org.apache.hadoop,org.apache.parquet,com.fasterxml.jackson.core,org.slf4j,org.apache.logging.log4j,"
    "org.roaringbitmap,com.google.code.findbugs"
)


class MavenError(RuntimeError):
    pass


def cache_root() -> Path:
    """`$KRAFT_REPLAY_CACHE`, else `~/.cache/kraft-acl-replay`."""
    env = os.environ.get("KRAFT_REPLAY_CACHE")
    return Path(env) if env else Path.home() / ".cache" / "kraft-acl-replay"


def _pom(coordinates: list[str]) -> str:
    deps = []
    for coord in coordinates:
        group, artifact, version = coord.split(":")
        deps.append(
            f"<dependency><groupId>{group}</groupId><artifactId>{artifact}</artifactId>"
            f"<version>{version}</version></dependency>"
        )
    return (
        '<project xmlns="http://maven.apache.org/POM/4.0.0"><modelVersion>4.0.0</modelVersion>'
        "<groupId>kraft-acl-replay.cache</groupId><artifactId>jars</artifactId><version>0</version>"
        f"<packaging>pom</packaging><dependencies>{''.join(deps)}</dependencies></project>"
    )


def fetch(name: str, coordinates: list[str], exclude_groups: str = "", quiet: bool = True) -> list[Path]:
    """Resolve `coordinates` and their runtime dependencies into `<cache>/<name>/`; return the jar paths."""
    target = cache_root() / name
    key = hashlib.sha256(json.dumps([coordinates, exclude_groups]).encode()).hexdigest()[:16]
    stamp = target / "jars.json"
    if stamp.exists():
        recorded = json.loads(stamp.read_text())
        jars = [target / j for j in recorded.get("jars", [])]
        if recorded.get("key") == key and jars and all(j.exists() for j in jars):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise MavenError("`mvn` is not on PATH: install Maven (apt-get install maven) to fetch " + ", ".join(coordinates))
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="kraft-replay-mvn-") as tmp:
        Path(tmp, "pom.xml").write_text(_pom(coordinates))
        out = Path(tmp, "jars")
        cmd = [mvn, "-B", "dependency:copy-dependencies", "-DincludeScope=runtime", f"-DoutputDirectory={out}"]
        if quiet:
            cmd.insert(1, "-q")
        if exclude_groups:
            cmd.append(f"-DexcludeGroupIds={exclude_groups}")
        proc = subprocess.run(cmd, cwd=tmp, capture_output=True, text=True)
        if proc.returncode != 0:
            tail = "\n".join((proc.stdout + proc.stderr).strip().splitlines()[-15:])
            raise MavenError(f"mvn could not resolve {', '.join(coordinates)}:\n{tail}")
        for old in target.glob("*.jar"):
            old.unlink()
        names = sorted(p.name for p in out.glob("*.jar"))
        for jar in names:
            shutil.copy2(out / jar, target / jar)
    stamp.write_text(json.dumps({"key": key, "coordinates": coordinates, "jars": names}, indent=1))
    return [target / n for n in names]


def kafka_jars() -> list[Path]:
    """Kafka broker, tools (DumpLogSegments, AclCommand) and their runtime closure."""
    return fetch(
        f"kafka-{KAFKA_VERSION}",
        [f"org.apache.kafka:kafka_2.13:{KAFKA_VERSION}", f"org.apache.kafka:kafka-tools:{KAFKA_VERSION}"],
    )


LOG4J_VERSION = "2.25.4"  # the log4j-core that kafka_jars() resolves


def logging_jars() -> list[Path]:
    """The SLF4J 1.x -> Log4j 2 binding. Kafka's release tarball ships it in libs/; the Maven runtime closure of
    kafka_2.13 does not, and without it the broker logs nothing (SLF4J falls back to its no-op logger)."""
    jars = fetch(f"kafka-logging-{LOG4J_VERSION}", [f"org.apache.logging.log4j:log4j-slf4j-impl:{LOG4J_VERSION}"])
    return [j for j in jars if j.name.startswith("log4j-slf4j-impl")]


def delta_jars() -> list[Path]:
    """Delta Lake for Spark 4.2 and its runtime closure, minus what pyspark ships."""
    return fetch(f"delta-{DELTA_JVM_VERSION}", [DELTA_ARTIFACT], exclude_groups=SPARK_PROVIDED_GROUPS)


def main() -> None:
    """`python -m replay.maven`: warm the cache (used by .ci/run and `make setup`), so that no later step (a broker
    start, a Spark session) downloads: the Kafka broker and tools, the broker's logging binding, Delta Lake."""
    for jar_set in (kafka_jars, logging_jars, delta_jars):
        jars = jar_set()
        print(f"{jar_set.__name__}: {len(jars)} jars in {jars[0].parent}")


if __name__ == "__main__":
    main()
