"""One input reads the same everywhere (issue 16): two nodes' dumps, one with an uncommitted divergent suffix, give
`acls PATH` on the files and `ingest` into a lake the same findings, counted by kind and with the same examples;
the Python API (`TableCounts.findings`) and the JSON output say it too."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Any

import pytest

from replay import cli
from replay.kafka import synth

pytestmark = pytest.mark.spark


def _summary(err: str) -> list[str]:
    lines = err.splitlines()
    at = next(i for i, line in enumerate(lines) if re.fullmatch(r"\d+ problem\(s\): .*|no problems found", line))
    return lines[at:]


@pytest.mark.slow  # minutes of Spark: CI runs it, `make test-fast` does not
def test_files_and_lake_report_the_same_findings(spark: Any, tmp_path: Path,
                                                 capsys: pytest.CaptureFixture[str]) -> None:
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    log = synth.generate(5, n_batches=40)
    committed, stale = synth.divergent_copy(log, 20, 3)
    nodes = [str(tmp_path / "node1"), str(tmp_path / "node2")]
    synth.write_dump(committed, nodes[0], synth.Layout(segment_every=10))
    synth.write_dump(stale, nodes[1], synth.Layout(segment_every=10))

    capsys.readouterr()
    assert cli.main(["acls", *nodes, "--as-of-offset", "0"], io.StringIO()) == 0
    from_files = _summary(capsys.readouterr().err)
    assert from_files[0].startswith(tuple(f"{n} problem(s): divergence" for n in range(1, 99))), from_files

    lake_dir = str(tmp_path / "lake")
    out = io.StringIO()
    assert cli.main(["ingest", *nodes, "--lake", lake_dir, "--lake-cluster", "c", "--no-progress"], out) == 0
    err = capsys.readouterr().err
    assert _summary(err) == from_files, (err, from_files)
    assert "decoder problems: none" in out.getvalue()

    counts = replay_lake(Lake(spark, lake_dir), ["c"], progress=False)  # nothing new: the same findings
    assert counts.findings().lines()[0] == from_files[0]

    out = io.StringIO()
    assert cli.main(["replay", "--lake", lake_dir, "--lake-cluster", "c", "--full", "--output", "json"], out) == 0
    doc = json.loads(out.getvalue())
    total = int(from_files[0].split(" ", 1)[0])
    assert doc["findings"] == total and doc["findings_by_kind"] == from_files[0].split(": ", 1)[1]
    assert _summary(capsys.readouterr().err)[0] == from_files[0]


def test_a_full_replay_that_wrote_no_finding_says_so_without_reading_them(spark: Any, tmp_path: Path,
                                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """`TableCounts.findings` of a replay that wrote no `anomalies` row and replayed every cluster in full is empty
    without a read of the table; a replay that left a cluster as it was reads what that cluster shows (here the
    findings of a log with some), and both agree with the table."""
    from replay.kafka.dump import replay_paths
    from replay.spark import findings
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, str(tmp_path / "lake"))
    for cluster, seed in (("clean", 1), ("found", 2)):
        node = str(tmp_path / cluster)
        synth.write_dump(synth.generate(seed, n_batches=12), node, synth.Layout(segment_every=1000))
        expected = len(replay_paths([node]).anomalies)
        assert (cluster, expected > 0) in (("clean", False), ("found", True))  # what each log is chosen for
        ingest(spark, [node], cluster=cluster, lake=lake, progress=False)
    read = findings.summary
    clean = replay_lake(lake, ["clean"], progress=False)
    found = replay_lake(lake, ["found"], progress=False)
    again = replay_lake(lake, ["found", "clean"], progress=False)  # nothing new: both left as they were

    def no_read(*_: Any) -> Any:
        raise AssertionError("anomalies read")

    monkeypatch.setattr(findings, "summary", no_read)
    assert clean.findings().total == 0
    monkeypatch.setattr(findings, "summary", read)
    assert read(lake, ["clean"]).total == 0
    assert found.findings().lines() == again.findings().lines() == read(lake, ["found", "clean"]).lines()
    assert found.findings().total > 0
