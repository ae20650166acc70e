"""Small jars of our own Java classes for the local Spark drivers, compiled on this machine by `make setup`.

Each jar is built from the sources under one directory of this package, against jars PySpark ships, into the
user's cache. Its name carries a digest of the sources and of the names of the jars they compile against, so a new
source or another Spark finds no jar and builds its own. A machine without `javac` goes on without it: these jars
only make local sessions faster.
"""

from __future__ import annotations

import dataclasses
import hashlib
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

import pyspark

from replay.maven import DELTA_JVM_VERSION, cache_root

_OFF = ("0", "off", "no", "false")


def turned_off(env: str) -> bool:
    """Whether the environment variable `env` says off (0, off, no, false)."""
    return os.environ.get(env, "").strip().lower() in _OFF


def java_binary() -> Path | None:
    """The java binary PySpark will start: `$JAVA_HOME/bin/java`, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    found = str(Path(home) / "bin" / "java") if home else shutil.which("java")
    return Path(found).resolve() if found and Path(found).exists() else None


def java_identity() -> str | None:
    """What names this Java and Spark in the name of a file only they may use (the class archive, compiled code):
    the java binary's path, size and time, PySpark's and Delta's versions; None without a java to run."""
    java = java_binary()
    if java is None:
        return None
    st = java.stat()
    return f"{java}|{st.st_size}|{st.st_mtime_ns}|{pyspark.__version__}|{DELTA_JVM_VERSION}"


def spark_jars(pattern: str) -> list[Path]:
    """PySpark's jars matching `pattern` (a glob), newest name last."""
    return sorted((Path(pyspark.__file__).parent / "jars").glob(pattern))


@dataclasses.dataclass(frozen=True)
class JavaJar:
    """The jar of the sources under `sources`, compiled against PySpark's jars matching `compile_against` (one
    each); `manifest`: lines for its manifest (an agent's `Premain-Class`, say)."""

    name: str
    sources: Path
    compile_against: tuple[str, ...]
    manifest: tuple[str, ...] = ()

    def class_path(self) -> list[Path] | None:
        found = [spark_jars(pattern) for pattern in self.compile_against]
        return None if not all(found) else [jars[-1] for jars in found]

    def _sources(self) -> list[Path]:
        return sorted(self.sources.rglob("*.java"))

    def path(self) -> Path | None:
        """Where the jar of these sources and these Spark jars is (or would be); None when it cannot be built."""
        class_path, sources = self.class_path(), self._sources()
        if class_path is None or not sources:
            return None
        digest = hashlib.sha256("|".join([p.name for p in class_path] + list(self.manifest)).encode())
        for source in sources:
            digest.update(source.read_bytes())
        return cache_root() / self.name / f"{self.name}-{digest.hexdigest()[:16]}.jar"

    def built(self) -> Path | None:
        """The jar, when it has been built."""
        path = self.path()
        return path if path is not None and path.is_file() else None

    def build(self, what: str, say: bool = True) -> bool:
        """Compile the classes into the jar when it is missing; whether the jar is there afterwards. `what` names
        the jar in the notes a machine without javac (or a failed compile) gets."""
        path, class_path = self.path(), self.class_path()
        if path is None or class_path is None:
            return False
        if path.is_file():
            return True
        javac = shutil.which("javac")
        if javac is None:
            print(f"note: no javac: {what} is not built (local Spark sessions are a little slower)", file=sys.stderr)
            return False
        path.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix=f"kraft-replay-{self.name}-") as work:
            done = subprocess.run([javac, "--release", "17", "-nowarn", "-cp", os.pathsep.join(map(str, class_path)),
                                   "-d", work, *map(str, self._sources())], capture_output=True, text=True,
                                  check=False)
            if done.returncode != 0:
                print(f"note: {what} did not compile (local sessions go on without it):\n"
                      f"{done.stderr.strip()[-2000:]}", file=sys.stderr)
                return False
            partial = Path(work) / f"{self.name}.jar"
            with zipfile.ZipFile(partial, "w", zipfile.ZIP_DEFLATED) as jar:
                if self.manifest:
                    jar.writestr("META-INF/MANIFEST.MF", "Manifest-Version: 1.0\n" + "".join(
                        f"{line}\n" for line in self.manifest) + "\n")
                for compiled in sorted(Path(work).rglob("*.class")):
                    jar.write(compiled, compiled.relative_to(work).as_posix())
            os.replace(shutil.copy(partial, path.with_suffix(".tmp")), path)  # whole or not at all
        if say:
            print(f"{what}: {path}")
        return True
