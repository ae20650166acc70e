"""Issue 6 item 3: `kraft-replay demo` ingests the sample dumps, tells the tour and writes readable plots.

The demo runs into temporary lake and output directories on the shared Spark session, twice: the second run must
find nothing new to ingest (idempotent) and give the same answers.
"""

from __future__ import annotations

import argparse
import io
import os
import re
from pathlib import Path
from typing import Any

import pytest

from replay import demo


def _run(tmp_path: Path, data: str | None) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    argv = ["--lake", str(tmp_path / "lake"), "--out", str(tmp_path / "out")]
    if data:
        argv += ["--data", data]
    out = io.StringIO()
    return demo.run(parser.parse_args(argv), out), out.getvalue()


def _answers(text: str) -> list[str]:
    """The lines of the tour that must not change between runs (no timings, no 'new' counts)."""
    keep = []
    for line in text.splitlines():
        if line.startswith("done in") or "new)" in line:
            continue
        keep.append(line)
    return keep


@pytest.mark.spark
@pytest.mark.slow
def test_demo_tour_and_plots(spark: Any, tmp_path: Path) -> None:
    data = demo.default_data_dir()
    samples = demo.sample_dirs(data) if data else []
    code, text = _run(tmp_path, data)
    assert code == 0, text

    # 1. what was ingested
    names = [p.name for p in samples] or ["synthetic"]
    for name in names:
        assert re.search(rf"^{re.escape(name)}: \d+ file\(s\), [\d,]+ bytes; [\d,]+ records", text, re.M), name
        assert f"{name}: coverage" in text
    assert "replayed: acl_events" in text and "anomalies:" in text
    if "retention-gap" in names:
        assert "in no dump (hole)" in text  # the retention hole is reported
    # 2. the state at a past moment, in kafka-acls format
    assert "Current ACLs for resource `ResourcePattern(resourceType=" in text
    assert re.search(r"== 2\. The ACLs of cluster \S+ as of \d{4}-\d\d-\d\dT", text)
    listing = list((tmp_path / "out").glob("acls-*-at-offset-*.txt"))
    assert len(listing) == 1 and "Current ACLs" in listing[0].read_text()
    # 3. and 4. the two questions with their answers
    assert "== 3. Who could access" in text and "Who could " in text.split("== 3.", 1)[1]
    assert "== 4. What changed between offset" in text
    section4 = text.split("== 4.", 1)[1].split("== 5.", 1)[0]
    assert "ACLs: " in section4 and "Access: " in section4
    # 5. the plots, each a real picture
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["acl-count-by-offset.png", "acl-count-by-time.png", "changes-per-period.png",
                    "principal-timeline.png"]
    for name in pngs:
        data_bytes = (tmp_path / "out" / name).read_bytes()
        assert data_bytes[:8] == b"\x89PNG\r\n\x1a\n" and len(data_bytes) > 20_000, name
        assert f"wrote {tmp_path / 'out' / name}" in text
    # 6. where things are
    assert str(tmp_path / "lake") in text and "kraft-replay acls" in text

    # A second run ingests nothing new and answers the same.
    code2, text2 = _run(tmp_path, data)
    assert code2 == 0
    for name in names:
        assert re.search(rf"^{re.escape(name)}: .*\(0 new\)", text2, re.M), text2
    assert _answers(text2) == _answers(text)


def test_demo_data_discovery(tmp_path: Path) -> None:
    assert demo.sample_dirs(tmp_path / "missing") == []
    (tmp_path / "a" / "__cluster_metadata-0").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "README.md").write_text("not a dump")
    assert [p.name for p in demo.sample_dirs(tmp_path)] == ["a", "b"]
    assert demo.featured_cluster(["x", "small-snapshots", "retention-gap"]) == "retention-gap"
    assert demo.featured_cluster(["x", "y"]) == "x"
    os.environ[demo.DATA_ENV] = str(tmp_path)
    try:
        assert demo.default_data_dir() == str(tmp_path)
    finally:
        del os.environ[demo.DATA_ENV]
