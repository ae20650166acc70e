"""`make test` runs the suite in two pytest-xdist workers with the Spark tests kept in one of them (tests/conftest.py).
If the grouping broke, the run would still pass but start a Spark JVM in each worker, and on two cores both would
crawl; these tests catch that."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

_GROUPED = '''
import os
import pytest

def _note():
    with open(os.path.join(os.environ["SPLIT_OUT"], os.environ["PYTEST_XDIST_WORKER"]), "a") as f:
        f.write("x\\n")

@pytest.mark.xdist_group("g")
def test_1(): _note()
@pytest.mark.xdist_group("g")
def test_2(): _note()
@pytest.mark.xdist_group("g")
def test_3(): _note()
@pytest.mark.xdist_group("g")
def test_4(): _note()
def test_free_1(): pass
def test_free_2(): pass
def test_free_3(): pass
'''


@pytest.mark.slow  # runs pytest under xdist in a subprocess: about 20 s
def test_one_group_runs_in_one_worker(tmp_path: Path) -> None:
    """The installed pytest and pytest-xdist honour `xdist_group` under `--dist loadgroup` (pytest 9.2 with
    xdist 3.8 does not: it ran a group in both workers)."""
    (tmp_path / "test_grouped.py").write_text(_GROUPED)
    out = tmp_path / "out"
    out.mkdir()
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, env={**os.environ, "SPLIT_OUT": str(out)}, timeout=300)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "7 passed" in done.stdout
    ran = {p.name: len(p.read_text().split()) for p in out.iterdir()}
    assert list(ran.values()) == [4], ran  # all four grouped tests, in one worker


_PINNED = '''
from tests.scheduling import PinnedGroupsFirst

def pytest_xdist_make_scheduler(config, log):
    return PinnedGroupsFirst(config, log, pinned=("a", "b"))
'''


def test_pinned_groups_start_in_different_workers(tmp_path: Path) -> None:
    """Groups `a` (5 tests) and `b` (3) are pinned; xdist alone queues them by size, `a`, `k` (4 slow tests), `b`,
    and the worker that finished `a` would take `b` too. Pinned, each starts a worker of its own."""
    tests = ["import os, time, pytest", "def _note(g):",
             "    time.sleep(1 if g == 'k' else 0)",
             "    with open(os.path.join(os.environ['SPLIT_OUT'], g), 'a') as f:",
             "        f.write(os.environ['PYTEST_XDIST_WORKER'] + '\\n')"]
    for group, n in (("a", 5), ("k", 4), ("b", 3)):
        tests += [f"@pytest.mark.xdist_group('{group}')\ndef test_{group}{i}(): _note('{group}')" for i in range(n)]
    (tmp_path / "test_pinned.py").write_text("\n".join(tests) + "\n")
    (tmp_path / "conftest.py").write_text(_PINNED)
    out = tmp_path / "out"
    out.mkdir()
    root = str(Path(__file__).resolve().parents[1])
    done = subprocess.run([sys.executable, "-m", "pytest", "-n", "2", "--dist", "loadgroup", "-q", "-p",
                           "no:cacheprovider", "-c", os.devnull, "--rootdir", str(tmp_path), str(tmp_path)],
                          capture_output=True, text=True, timeout=300,
                          env={**os.environ, "SPLIT_OUT": str(out), "PYTHONPATH": root})
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert "12 passed" in done.stdout
    workers = {g: set((out / g).read_text().split()) for g in "akb"}
    assert len(workers["a"]) == len(workers["b"]) == 1, workers  # each group in one worker
    assert workers["a"] != workers["b"], workers


def test_spark_and_broker_tests_are_grouped(request: pytest.FixtureRequest) -> None:
    """Every collected test that uses the Spark session (or the sample lake built on it) is in group `spark`, or
    in `spark-b` when marked so; every test of the broker run in group `kafka`; a pure test, and the
    standalone-cluster test (which starts its own JVMs), in none."""
    from tests.conftest import xdist_group_of

    for item in request.session.items:
        names = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("spark_b"):
            assert xdist_group_of(item) == "spark-b", item.nodeid
        elif names & {"spark", "sample_lake"}:
            assert xdist_group_of(item) == "spark", item.nodeid
        elif "kafka_run" in names:
            assert xdist_group_of(item) == "kafka", item.nodeid
        elif item.get_closest_marker("cluster"):  # its own JVMs, in subprocesses: free to run beside the session
            assert xdist_group_of(item) is None, item.nodeid
    assert xdist_group_of(request.node) is None


def test_test_modules_have_unique_names() -> None:
    """The test folders are not packages (no `__init__.py` in most), so pytest imports each test file by its bare
    name: two files of one name in different folders make the second fail to collect ("import file mismatch"), which
    a run of one folder does not show."""
    tests = Path(__file__).parent
    seen: dict[str, list[str]] = {}
    for path in tests.rglob("test_*.py"):
        if not (path.parent / "__init__.py").exists():
            seen.setdefault(path.name, []).append(str(path.relative_to(tests)))
    assert {name: paths for name, paths in seen.items() if len(paths) > 1} == {}
