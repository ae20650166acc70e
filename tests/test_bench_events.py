"""The benchmark's reading of Spark's event log (`bench.bench_pipeline.spark_event_counts`): per phase of a run
(the part of a step's name before its colon) the wall time from its first job's start to its last job's end, so
that jobs running at once count once, beside the per-step sums of job times."""

from __future__ import annotations

import json
from pathlib import Path

from bench.bench_pipeline import spark_event_counts


def _line(event: dict[str, object]) -> str:
    return json.dumps(event, separators=(",", ":")) + "\n"  # as Spark writes it: no spaces


def test_a_phase_is_the_span_of_its_jobs_and_overlapping_jobs_count_once(tmp_path: Path) -> None:
    jobs = [(0, "ingest: decode", 1_000, 3_000), (1, "ingest: write metadata_records", 2_000, 5_000),
            (2, None, 5_500, 5_600), (3, "replay: plan", 6_000, 6_500)]
    events = tmp_path / "events"
    events.mkdir()
    with open(events / "app-1", "w", encoding="utf-8") as f:
        for job, step, start, end in jobs:
            properties = {"kraft.replay.step": step} if step else {}
            f.write(_line({"Event": "SparkListenerJobStart", "Job ID": job, "Submission Time": start,
                           "Stage IDs": [], "Properties": properties}))
            f.write(_line({"Event": "SparkListenerJobEnd", "Job ID": job, "Completion Time": end}))
    counts = spark_event_counts(events)
    assert counts["jobs"] == 4
    assert counts["phases"] == {"ingest": 4.0, "replay": 0.5}
    assert counts["steps"]["ingest: decode"] == {"jobs": 1, "seconds": 2.0}
    assert counts["steps"]["(no step)"] == {"jobs": 1, "seconds": 0.1}
