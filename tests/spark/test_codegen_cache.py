"""The generated-code cache (`replay.spark.codegen_cache`): a new driver loads the classes an earlier one compiled
instead of compiling them, answers as a driver without the cache does, and a damaged file costs a compile, not an
answer."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from replay.spark import codegen_cache
from replay.spark.session import local_conf

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# A new driver with the package's own settings (the agent among them), one query with generated code (whole-stage
# code generation on, which the shared test session turns off), the cache's counters from the driver's JVM.
_DRIVER = textwrap.dedent("""
    import json, sys
    from replay.spark.session import get_spark
    spark = get_spark(master="local[1]", app_name="codegen-cache-test",
                      conf={"spark.sql.codegen.wholeStage": "true", "spark.sql.codegen.factoryMode": "CODEGEN_ONLY",
                            "spark.sql.adaptive.enabled": "false", "spark.ui.enabled": "false"})
    rows = spark.sql(
        "SELECT id % 7 AS k, sum(id * 3) AS s, max(concat('x', cast(id AS string))) AS m "
        "FROM range(0, 20000, 1, 2) WHERE id % 5 <> 1 GROUP BY id % 7 ORDER BY k").collect()
    cache = spark.sparkContext._jvm.kraftreplay.codegen.CodegenCache
    print(json.dumps({"rows": [list(r) for r in rows], "enabled": cache.enabled(), "hits": cache.hits(),
                      "misses": cache.misses(), "stored": cache.stored(), "failures": cache.failures(),
                      "directory": cache.directory()}))
    sys.stdout.flush()
""")


def _expected() -> list[list[Any]]:
    sums: dict[int, int] = {}
    tops: dict[int, str] = {}
    for i in range(20000):
        if i % 5 == 1:
            continue
        sums[i % 7] = sums.get(i % 7, 0) + 3 * i
        tops[i % 7] = max(tops.get(i % 7, ""), f"x{i}")
    return [[k, sums[k], tops[k]] for k in sorted(sums)]


def _run_driver(tmp_path: Path, cache: Path) -> dict[str, Any]:
    script = tmp_path / "driver.py"
    script.write_text(_DRIVER)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([REPO, os.environ.get("PYTHONPATH", "")]),
               KRAFT_REPLAY_CODEGEN_CACHE=str(cache))
    env.pop("PYSPARK_SUBMIT_ARGS", None)
    done = subprocess.run([sys.executable, str(script)], cwd=str(tmp_path), env=env, capture_output=True, text=True,
                          timeout=300, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    return dict(json.loads(done.stdout.strip().splitlines()[-1]))


@pytest.mark.spark
@pytest.mark.second_jvm
def test_a_new_driver_loads_what_an_earlier_one_compiled(tmp_path: Path) -> None:
    assert codegen_cache.JAR.built() is not None, "the agent is built by `make setup` (python -m replay.spark.codegen_cache)"
    cache = tmp_path / "codegen"
    expected = _expected()

    first = _run_driver(tmp_path, cache)
    assert first["enabled"] and first["directory"] == str(cache)
    assert first["rows"] == expected
    # Spark compiles a few sources twice in one driver (its own cache is keyed by class loader too): the second time
    # is a hit on what the first stored
    assert first["misses"] > 0 and first["stored"] == first["misses"] and first["failures"] == 0
    files = sorted(p.name for p in cache.iterdir())
    assert len(files) == first["stored"] and all(f.endswith(".classes") for f in files)

    second = _run_driver(tmp_path, cache)  # every class the first compiled, loaded: nothing compiled again
    assert second["rows"] == expected
    assert second["misses"] == 0 and second["hits"] == first["hits"] + first["misses"] and second["failures"] == 0

    for f in cache.iterdir():  # damaged files: each one read, found wanting, removed, and its source compiled
        f.write_bytes(f.read_bytes()[: len(f.read_bytes()) // 2])
    third = _run_driver(tmp_path, cache)
    assert third["rows"] == expected
    assert third["failures"] == len(files) and third["misses"] == len(files) and third["hits"] == first["hits"]
    assert sorted(p.name for p in cache.iterdir()) == files  # compiled and stored again, whole


def test_the_option_names_the_jar_and_the_directory(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    jar = codegen_cache.JAR.built()
    monkeypatch.setenv(codegen_cache.ENV, str(tmp_path / "here"))
    assert codegen_cache.directory() == tmp_path / "here"
    assert codegen_cache.jvm_options() == ("" if jar is None else f"-javaagent:{jar}={tmp_path / 'here'}")
    if jar is not None:  # a driver this package starts loads the agent, long-lived or quick
        for quick in (False, True):
            options = local_conf("local[2]", "app", "1g", quick=quick)["spark.driver.extraJavaOptions"].split()
            assert options[-1] == codegen_cache.jvm_options()
    monkeypatch.setenv(codegen_cache.ENV, "off")
    assert codegen_cache.jvm_options() == ""
    monkeypatch.setenv(codegen_cache.ENV, "on")
    default = codegen_cache.directory()
    assert default is not None and default.parent.name == "codegen"


def test_trim_removes_the_least_recently_used_files(tmp_path: Path) -> None:
    now = time.time()
    for i in range(10):  # file i was last used i hours ago
        f = tmp_path / f"{i}.classes"
        f.write_bytes(b"x" * 100)
        os.utime(f, (now - 3600 * i, now - 3600 * i))
    codegen_cache.trim(tmp_path, 1000)  # at the limit: nothing goes
    assert len(list(tmp_path.iterdir())) == 10
    codegen_cache.trim(tmp_path, 900)  # over it: down to three quarters, the oldest first
    assert sorted(int(p.stem) for p in tmp_path.iterdir()) == list(range(6))
