"""Issue 6 item 3: `kraft-replay demo` ingests the sample dumps, tells the tour and writes readable plots.

The demo runs into temporary lake and output directories on the shared Spark session, twice: the second run must
find nothing new to ingest (idempotent) and give the same answers. Its answers are checked against the reference
replayer and the reference StandardAuthorizer (the helpers of test_notebook.py); its fallback to a synthetic dump
and the changes plot's choice of period are tested on their own.
"""

from __future__ import annotations

import argparse
import io
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from test_notebook import DATA, broker_config, reference_who_can  # type: ignore[import-not-found]

from replay import demo
from replay.kafka import samples as sample_finding


def _run(tmp_path: Path, data: str | None) -> tuple[int, str]:
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    argv = ["--lake", str(tmp_path / "lake"), "--out", str(tmp_path / "out")]
    if data:
        argv += ["--data", data]
    out = io.StringIO()
    return demo.run(parser.parse_args(argv), out), out.getvalue()


def _section(text: str, number: int) -> str:
    return text.split(f"== {number}.", 1)[1].split(f"== {number + 1}.", 1)[0]


def _who_can_table(section: str) -> tuple[re.Match[str], Counter[tuple[str, ...]]]:
    """The question of tour section 3 and its rows as (who, from_host, decision, certain, reason)."""
    head = re.search(r"^Who could (\S+) (\S+) '(.*)' as of offset (\d+) \(super\.users=(.*), "
                     r"allow\.everyone\.if\.no\.acl\.found=(true|false)\):$", section, re.M)
    assert head, section
    lines = [line.strip() for line in section[head.end():].splitlines() if line.startswith("  ")]
    assert lines[0].split()[:5] == ["who", "from_host", "decision", "certain", "reason"] and set(lines[1]) <= {"-", " "}
    return head, Counter(tuple(re.split(r"\s{2,}", line)[:5]) for line in lines[2:])


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
    data = sample_finding.default_data_dir()
    samples = sample_finding.sample_dirs(data) if data else []
    code, text = _run(tmp_path, data)
    assert code == 0, text

    # 1. what was ingested
    names = [p.name for p in samples] or ["synthetic"]
    for name in names:
        assert re.search(rf"^{re.escape(name)}: \d+ file\(s\), [\d,]+ bytes; [\d,]+ records", text, re.M), name
        assert f"{name}: coverage" in text
    assert "replayed: acl_events" in text and "findings: " in text
    if "retention-gap" in names:
        assert "in no dump (hole)" in text  # the retention hole is reported
        assert "findings: 1 problem(s): gap 1" in text  # as `acls PATH` says it for the files
        assert "  gap: offset 0: offsets 0..162 are in no dump;" in text
    # 2. the state at a past moment, in kafka-acls format
    assert "Current ACLs for resource `ResourcePattern(resourceType=" in text
    assert re.search(r"== 2\. The ACLs of cluster \S+ as of \d{4}-\d\d-\d\dT", text)
    listing = list((tmp_path / "out").glob("acls-*-at-offset-*.txt"))
    assert len(listing) == 1 and "Current ACLs" in listing[0].read_text()
    # 2.-4. the answers are right: the reference replayer's state and the reference authorizer's decisions
    from replay.kafka.dump import replay_paths

    head2 = re.search(r"== 2\. The ACLs of cluster (\S+) as of \S+ \(offset (\d+)\)", text)
    assert head2 and (DATA / head2[1]).is_dir(), "the tour features a real sample"
    sample, offset = DATA / head2[1], int(head2[2])
    ref = replay_paths([str(sample)])
    state = ref.state_at(offset)
    assert state.exact
    assert f"{len(state.certain)} ACL(s) certainly live at offset {offset} (exact)." in _section(text, 2)
    head, rows = _who_can_table(_section(text, 3))
    op, rtype, name, at = head[1], head[2], head[3], int(head[4])
    config = broker_config(sample)
    assert at == offset and (head[5], head[6]) == (config["super.users"], config["allow.everyone.if.no.acl.found"])
    want = reference_who_can(state.certain, config, op, rtype, name)
    assert rows == Counter(("everyone" if p == "User:*" else p, "any host" if h == "*" else h, d, "true", r)
                           for p, h, d, r, _ids in want)
    assert any(r[2] == "ALLOWED" and r[4] == "matching_allow" for r in rows)
    head4 = re.search(r"== 4\. What changed between offset (\d+) and offset (\d+)", text)
    assert head4 and int(head4[1]) == offset and int(head4[2]) == ref.last_offset
    after = ref.state_at(ref.last_offset)
    was, now = set(state.certain.items()), set(after.certain.items())
    acls = ", ".join(f"{n} {change}" for change, n in (("added", len(now - was)), ("removed", len(was - now))) if n)
    assert f"ACLs: {acls or 'no change'}\n" in _section(text, 4) and "Access: " in _section(text, 4)
    # 5. the plots, each a real picture
    pngs = sorted(p.name for p in (tmp_path / "out").glob("*.png"))
    assert pngs == ["acl-count-by-offset.png", "acl-count-by-time.png", "changes-per-period.png",
                    "principal-timeline.png"]
    for name in pngs:
        data_bytes = (tmp_path / "out" / name).read_bytes()
        assert data_bytes[:8] == b"\x89PNG\r\n\x1a\n" and len(data_bytes) > 20_000, name
        assert f"wrote {tmp_path / 'out' / name}" in text
    assert "(the changes plot: ACL changes per " in text and "not per day: the history spans" in text
    # 6. the sample broker's authorizer log, verified; 7. where things are
    assert "68 logged decision(s) of kafka-authorizer.log: 68 consistent, 0 inconsistent, 0 unknown" in _section(text, 6)
    assert "ACLs that decided no logged request: 1\n  User:carol ALLOW READ on GROUP LITERAL:reports" in text
    assert str(tmp_path / "lake") in text and "kraft-replay acls" in text

    # A second run ingests nothing new and answers the same.
    code2, text2 = _run(tmp_path, data)
    assert code2 == 0
    for name in names:
        assert re.search(rf"^{re.escape(name)}: .*\(0 new\)", text2, re.M), text2
    assert _answers(text2) == _answers(text)


def test_demo_data_discovery(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert sample_finding.sample_dirs(tmp_path / "missing") == []
    (tmp_path / "a" / "__cluster_metadata-0").mkdir(parents=True)
    (tmp_path / "b").mkdir()
    (tmp_path / "b" / "00000000000000000000.log").write_bytes(b"")
    (tmp_path / "c").mkdir()
    (tmp_path / "c" / "README.md").write_text("not a dump")
    assert [p.name for p in sample_finding.sample_dirs(tmp_path)] == ["a", "b"]
    assert sample_finding.featured_cluster(["x", "small-snapshots", "retention-gap"]) == "retention-gap"
    assert sample_finding.featured_cluster(["x", "y"]) == "x"
    monkeypatch.setenv(sample_finding.DATA_ENV, str(tmp_path))
    assert sample_finding.data_dir_candidates()[0] == tmp_path
    assert sample_finding.default_data_dir() == str(tmp_path)
    located = sample_finding.locate_samples(None, str(tmp_path / "out"))
    assert ([p.name for p in located.dirs], located.synthetic) == (["a", "b"], False)
    assert located.note.startswith(f"Sample dumps in {tmp_path}: a, b")


def test_demo_without_samples_falls_back_to_a_synthetic_dump(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An installed wheel has no samples: the demo says so and writes a synthetic dump; `--data` without dumps fails."""
    empty = tmp_path / "empty"
    empty.mkdir()
    monkeypatch.setattr(sample_finding, "data_dir_candidates", lambda: [empty])
    assert sample_finding.default_data_dir() is None
    located = sample_finding.locate_samples(None, str(tmp_path / "out"))
    assert located.synthetic and [p.name for p in located.dirs] == ["synthetic"]
    assert sample_finding.sample_dirs(located.dirs[0]) == located.dirs  # a real dump directory: segments and snapshots
    assert len(list(located.dirs[0].rglob("*.checkpoint"))) >= 2 and list(located.dirs[0].rglob("*.log"))
    assert f"looked in {empty}" in located.note and "SYNTHETIC" in located.note
    assert "not a real Kafka log" in located.note and f"--data DIR or set ${sample_finding.DATA_ENV}" in located.note
    with pytest.raises(FileNotFoundError, match="no sample dumps under"):
        sample_finding.locate_samples(str(empty), str(tmp_path / "out"))
    parser = argparse.ArgumentParser()
    demo.add_arguments(parser)
    err = io.StringIO()
    monkeypatch.setattr("sys.stderr", err)
    assert demo.run(parser.parse_args(["--data", str(empty), "--out", str(tmp_path / "out")]), io.StringIO()) == 2
    assert "no sample dumps under" in err.getvalue()


class _Tables:
    """Just enough of a Lake for the plots: `read(name)`."""

    def __init__(self, frames: dict[str, Any]) -> None:
        self.frames = frames

    def read(self, name: str) -> Any:
        return self.frames[name]


@pytest.mark.spark
def test_changes_plot_is_per_day_when_the_history_spans_two_days(spark: Any) -> None:
    """The notebook's and the demo's changes plot: per day over at least two days of history, else the auto period,
    and the title says which."""
    from replay.spark import plots

    day, t0 = 86_400_000, 1_795_000_000_000
    events = spark.createDataFrame(
        [("c", t0, "CREATE", True), ("c", t0 + 3_600_000, "CREATE", True), ("c", t0 + day + 5, "REMOVE", True)],
        "cluster_id string, time long, change string, exact boolean")

    def counts(history_ms: int) -> Any:
        times = spark.createDataFrame([("c", t0), ("c", t0 + history_ms)], "cluster_id string, time long")
        return plots.changes_data(_Tables({"acl_events": events, "offset_times": times}), "c", plots.DAY_IF_LONG)

    daily = counts(2 * day + 10)
    assert (daily.period, daily.creates, daily.removes) == ("day", [2, 0], [0, 1])
    assert daily.why == "per day: the history spans 2 days"
    short = counts(day + day // 2)  # 36 hours: the auto period over the changes' 24 hours
    assert (short.period, short.total, len(short.start)) == ("hour", 3, 25)
    assert short.why == "not per day: the history spans 1.5 days, under 2 days"
    title = plots.draw_changes(short).axes[0].get_title()
    assert title.startswith(f"ACL changes per {short.period} on cluster c (3 in all") and short.why in title
