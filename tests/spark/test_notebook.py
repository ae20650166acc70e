"""Issue 6 item 1: the Databricks notebook runs end to end locally, and its answers are right.

The notebook runs through `replay.notebook.run_notebook` against a real sample dump from `data/` (the
`retention-gap` sample when present: it has a retention hole, so uncertain answers are exercised) at an audit
moment where the real Kafka broker's describeAcls answer is known (`checkpoints.jsonl`). The ACLs the notebook finds
there must equal Kafka's answer and the reference replayer's (`replay_paths`). Without sample dumps a synthetic dump
is generated instead, and only the reference replayer is compared.

The runner's parsing, SQL splitting, widgets and moment parsing are tested without Spark.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from replay import notebook as nb
from replay.demo import default_data_dir, featured_cluster, sample_dirs, synthetic_sample

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "kraft_acl_replay.py"


# ---- the runner without Spark ------------------------------------------------------------------------------------

def test_parse_notebook_cells_and_magics() -> None:
    text = "\n".join([
        "# Databricks notebook source",
        "# MAGIC %md",
        "# MAGIC # Title",
        "# MAGIC",
        "# MAGIC text",
        "",
        "# COMMAND ----------",
        "",
        "# DBTITLE 1,Setup",
        "x = 1",
        "",
        "# COMMAND ----------",
        "# MAGIC %sql SELECT 1;",
        "# MAGIC SELECT 'a;b' -- c;d",
        "# COMMAND ----------",
        "# MAGIC %pip install foo",
        "# COMMAND ----------",
        "# just a comment",
    ])
    cells = nb.parse_notebook(text)
    assert [c.kind for c in cells] == ["md", "python", "sql", "pip", "python"]
    assert cells[0].source == "# Title\n\ntext"
    assert cells[1].title == "Setup" and cells[1].source == "x = 1" and cells[1].line == 10
    assert nb.split_sql(cells[2].source) == ["SELECT 1", "SELECT 'a;b' -- c;d"]
    with pytest.raises(ValueError):
        nb.parse_notebook("print(1)\n")


def test_split_sql_quotes_and_comments() -> None:
    sql = "/* a; b */ SELECT ';' AS x; -- only a comment;\nSELECT `we;ird` FROM t;;"
    assert nb.split_sql(sql) == ["/* a; b */ SELECT ';' AS x", "-- only a comment;\nSELECT `we;ird` FROM t"]
    assert nb.split_sql("-- nothing\n") == []


def test_local_widgets_params_then_environment_then_default() -> None:
    env = {nb.env_name("dump"): "/from/env", nb.env_name("compare_to"): "123"}
    dbutils = nb.LocalDbutils(params={"lake": "/from/params"}, environ=env)
    assert nb.widget(dbutils, "dump", "/default") == "/from/env"
    assert nb.widget(dbutils, "lake", "./lakehouse") == "/from/params"
    assert nb.widget(dbutils, "cluster", " c1 ") == "c1"
    assert nb.widget(dbutils, "compare_to", "") == "123"
    assert dbutils.widgets.getArgument("nope", "fallback") == "fallback"
    with pytest.raises(nb.InputWidgetNotDefined):
        dbutils.widgets.get("nope")
    assert nb.env_name("compare_to") == "KRAFT_REPLAY_COMPARE_TO"


def test_parse_moment() -> None:
    assert nb.parse_moment("") is None
    assert nb.parse_moment("292") == ("offset", 292)
    assert nb.parse_moment("offset: 7") == ("offset", 7)
    assert nb.parse_moment("1795309597580") == ("time", 1795309597580)
    assert nb.parse_moment("2026-11-20T14:02:00Z") == ("time", 1795183320000)


def test_runner_executes_python_and_skips_pip(tmp_path: Path) -> None:
    path = tmp_path / "n.py"
    path.write_text("# Databricks notebook source\nx = 2\n# COMMAND ----------\n# MAGIC %pip install nothing\n"
                    "# COMMAND ----------\nprint(x * 21)\ndisplay('shown')\n# COMMAND ----------\n"
                    "dbutils.notebook.exit('bye')\n# COMMAND ----------\nraise SystemError('not reached')\n")
    run = nb.run_notebook(str(path), echo=False)
    assert [c.status for c in run.cells] == ["ok", "skipped", "ok", "exit"]
    assert run.cells[2].output.strip() == "42\nshown"
    assert run.exit_value == "bye" and run.namespace["x"] == 2
    bad = tmp_path / "bad.py"
    bad.write_text("# Databricks notebook source\n# MAGIC %sh ls\n")
    with pytest.raises(nb.NotebookCellError, match="%sh"):
        nb.run_notebook(str(bad), echo=False)


# ---- the notebook end to end ---------------------------------------------------------------------------------------

def _kafka_checkpoint(dump: Path) -> dict[str, Any] | None:
    """The last describeAcls answer of the sample that lies inside the dump's log (real Kafka's own answer)."""
    path = dump / "checkpoints.jsonl"
    if not path.is_file():
        return None
    checkpoints = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    usable = [c for c in checkpoints if c.get("matches_expected") and c.get("acls")]
    return usable[-2] if len(usable) > 1 else (usable[-1] if usable else None)


def _tuples(bindings: Any) -> Counter[tuple[str, ...]]:
    return Counter((b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                    b.permission_type) for b in bindings)


@pytest.mark.spark
@pytest.mark.slow
def test_notebook_runs_end_to_end(spark: Any, tmp_path: Path) -> None:
    from replay.kafka.dump import replay_paths

    data = default_data_dir()
    samples = sample_dirs(data) if data else []
    if samples:
        names = [p.name for p in samples]
        dump = samples[names.index(featured_cluster(names))]
    else:  # no real samples in this checkout: the notebook must still run (on a synthetic dump)
        dump = synthetic_sample(str(tmp_path))
    checkpoint = _kafka_checkpoint(dump)
    params = {"dump": str(dump), "lake": str(tmp_path / "lake"), "cluster": "nb-" + dump.name}
    if checkpoint is not None:
        params["moment"] = str(checkpoint["as_of_offset"])
    display_dir = tmp_path / "display"
    run = nb.run_notebook(str(NOTEBOOK), params, spark=spark, display_dir=str(display_dir), echo=False,
                         max_rows=10_000)

    kinds = Counter(c.cell.kind for c in run.cells)
    assert kinds["python"] >= 8 and kinds["sql"] >= 5 and kinds["md"] >= 5
    assert {c.status for c in run.cells} <= {"ok", "rendered"}, [(c.cell.index, c.status, c.error) for c in run.cells]
    assert len(run.cells) == len(nb.parse_notebook(NOTEBOOK.read_text()))

    ns = run.namespace
    assert ns["cluster"] == params["cluster"]
    offset = ns["moment_offset"]
    ref = replay_paths([str(dump)])
    want = ref.state_at(offset)
    state = ns["state"]
    assert state.certain == want.certain
    assert state.uncertain == want.uncertain
    assert (state.covered, state.complete) == (want.covered, want.complete)
    if checkpoint is not None:  # real Kafka's describeAcls answer at that offset
        assert offset == checkpoint["as_of_offset"]
        kafka = Counter((a["resource_type"], a["resource_name"], a["pattern_type"], a["principal"], a["host"],
                         a["operation"], a["permission_type"]) for a in checkpoint["acls"])
        assert _tuples(state.certain.values()) == kafka
        assert not state.uncertain

    output = run.output()
    assert f"offset {offset}" in output and "Current ACLs for resource" in output

    # The %sql cell with acl_state_at shows exactly the notebook's state (certain and uncertain rows).
    tables = [d for d in run.display.items if d.kind == "table"] if run.display else []
    sql_state = next(t for t in tables if "certainty" in t.columns and "valid_from_offset" in t.columns)
    assert len(sql_state.rows) == len(state.certain) + len(state.uncertain)
    assert _tuples(_Binding(r) for r in sql_state.rows if r["certainty"] == "certain") == _tuples(
        state.certain.values())
    # DESCRIBE HISTORY and VERSION AS OF ran on the lake table.
    assert any("operation" in t.columns and "userMetadata" in t.columns for t in tables)
    assert any(t.columns[:3] == ["version", "cluster_id", "lifetimes"] for t in tables)

    figures = [d.path for d in run.display.items if d.kind == "figure"] if run.display else []
    assert len(figures) == 4
    for path in figures:
        assert path and os.path.getsize(path) > 10_000


class _Binding:
    def __init__(self, row: dict[str, Any]) -> None:
        for k in ("resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                  "permission_type"):
            setattr(self, k, row[k])
