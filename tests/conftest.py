"""Hypothesis profiles and how `make test` splits the suite over three processes.

`make test` runs `HYPOTHESIS_PROFILE=ci` (set in the Makefile): the same examples every run, so a landing never
depends on the seed; a developer's run explores new random examples each time (the default).

Under pytest-xdist (`-n 3 --dist loadgroup`, as the Makefile runs it) every test that needs the Spark session runs
in one worker and every test of the Kafka broker run in one worker (each is a session fixture that costs minutes to
build); the rest is spread over the others. The Spark tests alone took 37-40 of CI's minutes, so the heaviest
(mark `spark_b`) run in a second worker with a Spark session of their own, started there as soon as the run begins
(`tests/scheduling.py`); on two cores the Spark tests leave a fifth to a third of the CPU idle (planning runs on one
thread, the driver waits on small jobs, subprocesses start JVMs), which the third worker fills with the rest.
"""

from __future__ import annotations

import os

import pytest
from hypothesis import settings

from tests.cpu_time import calibration_ms, machine_cpu_seconds, tree_cpu_seconds
from tests.summary import SUMMARY

settings.register_profile("ci", derandomize=True, database=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "default"))

# A `kraft-replay server` the developer runs is never the tests' Spark (tests/spark/test_server.py starts its own)
os.environ["KRAFT_REPLAY_SERVER"] = "off"

# a test with one of these marks, or using one of these session fixtures, runs in the worker of that group (the
# first group that matches)
_GROUPS: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("spark-b", ("spark_b",), ()),
    ("spark", ("spark", "second_jvm"), ("spark", "sample_lake")),
    ("kafka", (), ("kafka_run",)),
)
# the groups that each start a worker of their own, in this order
PINNED = ("spark", "spark-b")


def xdist_group_of(item: pytest.Item) -> str | None:
    """The worker group a test belongs to, or None when it can run in any worker."""
    fixtures = set(getattr(item, "fixturenames", ()))
    marks = {m.name for m in item.iter_markers()}
    for group, group_marks, group_fixtures in _GROUPS:
        if marks.intersection(group_marks) or fixtures.intersection(group_fixtures):
            return group
    return None


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: object) -> object | None:
    if config.getoption("dist", None) != "loadgroup":
        return None
    from tests.scheduling import PinnedGroupsFirst

    return PinnedGroupsFirst(config, log, pinned=PINNED)


def pytest_itemcollected(item: pytest.Item) -> None:
    # marked as each test is collected: xdist's loadgroup reads the marks in its own collection_modifyitems, which
    # runs before a conftest's in a worker
    group = xdist_group_of(item)
    if group is not None:
        item.add_marker(pytest.mark.xdist_group(group))
    if "sample_lake" in getattr(item, "fixturenames", ()):
        item.add_marker(pytest.mark.samples)  # the shared lake of every sample: minutes to build (make test-fast)


# ---- lines for the terminal summary, from whichever process ran the test (`tests.summary`) -------------------------


def pytest_sessionfinish(session: pytest.Session) -> None:
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:
        worker_output["summary_lines"] = session.config.stash.get(SUMMARY, [])


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: object, error: object) -> None:
    lines = getattr(node, "workeroutput", {}).get("summary_lines", [])
    config = getattr(node, "config", None)
    if config is not None:
        config.stash.setdefault(SUMMARY, []).extend(lines)


_WORKER_SECONDS: dict[str, list[float]] = {}  # xdist worker -> [seconds, tests], on the controller
_TEST_CPU: dict[str, float] = {}  # test id -> CPU seconds from its setup to its teardown, on the controller
_MACHINE_AT_START = machine_cpu_seconds()
# how fast the host is as the run starts (in the controller, before it starts the workers; they need not repeat it)
_CALIBRATION_AT_START = None if os.environ.get("PYTEST_XDIST_WORKER") else calibration_ms()
_CPU_AT_SETUP = pytest.StashKey[float]()


def pytest_runtest_setup(item: pytest.Item) -> None:
    item.stash[_CPU_AT_SETUP] = tree_cpu_seconds()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]) -> object:
    outcome = yield
    if call.when == "teardown" and _CPU_AT_SETUP in item.stash:
        outcome.get_result().user_properties.append(("cpu_seconds", tree_cpu_seconds() - item.stash[_CPU_AT_SETUP]))


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Seconds per xdist worker (setup, call and teardown), for the summary: which worker bounds the run's time."""
    node = getattr(report, "node", None)  # set on the controller's copy of a worker's report
    if node is None:
        return
    cpu = dict(report.user_properties).get("cpu_seconds")
    if isinstance(cpu, float):
        _TEST_CPU[report.nodeid] = cpu
    times = _WORKER_SECONDS.setdefault(getattr(getattr(node, "gateway", None), "id", "?"), [0.0, 0.0])
    times[0] += report.duration
    if report.when == "call":
        times[1] += 1


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    workers = _WORKER_SECONDS
    if workers:
        terminalreporter.write_sep("-", "time per worker")
        for worker, (seconds, tests) in sorted(workers.items()):
            terminalreporter.write_line(f"{worker}: {int(tests)} tests, {seconds:,.0f} s")
        busy, idle = (now - then for now, then in zip(machine_cpu_seconds(), _MACHINE_AT_START, strict=True))
        if busy + idle > 0:
            terminalreporter.write_line(f"machine: {busy:,.0f} s of CPU busy, {idle:,.0f} s idle "
                                        f"({100 * busy / (busy + idle):.0f}% busy over {os.cpu_count()} cores)")
        if _CALIBRATION_AT_START is not None:
            terminalreporter.write_line(
                f"host speed: a fixed single-core workload took {_CALIBRATION_AT_START:,.0f} ms of CPU as the run "
                f"started and {calibration_ms():,.0f} ms as it ended (tests/cpu_time.calibration_ms: compare runs by it)")
    if _TEST_CPU:
        terminalreporter.write_sep("-", "most CPU: the test's process and all it started, setup to teardown")
        for nodeid, seconds in sorted(_TEST_CPU.items(), key=lambda kv: -kv[1])[:25]:
            terminalreporter.write_line(f"{seconds:8.1f} s  {nodeid}")
        terminalreporter.write_line(f"{sum(_TEST_CPU.values()):8.1f} s  in all {len(_TEST_CPU)} tests")
    sections: dict[str, list[str]] = {}
    for section, line in terminalreporter.config.stash.get(SUMMARY, []):
        sections.setdefault(section, []).append(line)
    for section, lines in sections.items():
        terminalreporter.write_sep("-", section)
        for line in lines:
            terminalreporter.write_line(line)
