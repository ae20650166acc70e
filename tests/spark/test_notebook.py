"""Issue 6 item 1: the Databricks notebook runs end to end locally, and its answers are right.

The notebook runs through `replay.notebook.run_notebook` twice into one lake: on `data/small-snapshots` with the
audit moment given as an offset (a fresh lake), then on `data/retention-gap` (a retention hole: offsets 0..162 are
in no dump) with the moment given as an ISO time. Both moments are ones where the real Kafka broker's describeAcls
answer is known (`checkpoints.jsonl`). Every key answer is checked against an independent reference: the ACLs, the
SQL functions' rows and the changes against the reference replayer (`replay_paths`), who could access and the access
changes against the reference `StandardAuthorizer` configured from the sample's `server.properties`, coverage and
anomalies against the replayer's, and Delta time travel against what the lake held before each run's replay.

The runner's parsing, SQL splitting, widgets and moment parsing are tested without Spark.
"""

from __future__ import annotations

import json
import os
from collections import Counter
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from spark_conf import aqe_off

from replay import notebook as nb
from replay.kafka.acl import AclBinding
from replay.kafka.apis import could_call
from replay.kafka.authorizer import StandardAuthorizer, presentable_host
from replay.kafka.times import format_time

ROOT = Path(__file__).resolve().parents[2]
NOTEBOOK = ROOT / "notebooks" / "kraft_acl_replay.py"
DATA = ROOT / "data"
FIELDS = ["resource_type", "resource_name", "pattern_type", "principal", "host", "operation", "permission_type"]


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


# ---- reference answers, without Spark ----------------------------------------------------------------------------

NOBODY = "User:kraft-replay-test-nobody"  # a principal no ACL names: what `everyone` (User:*) stands for
UNNAMED_HOST = "192.0.2.77"  # a client address no ACL names (TEST-NET-1): what host `*` stands for
REASONS = {"super user": "super_user", "matching DENY ACL": "matching_deny", "matching ALLOW ACL": "matching_allow",
           "allow everyone": "allow_everyone", "no matching ACL": "no_matching_acl"}
Who = tuple[str, str, str, str, tuple[str, ...]]  # principal, host, decision, reason, deciding ACL ids


def broker_config(dump: Path) -> dict[str, str]:
    """The sample broker's `server.properties` (what `StandardAuthorizer.from_config` reads)."""
    config = {}
    for line in (dump / "server.properties").read_text().splitlines():
        key, sep, value = line.partition("=")
        if sep and not key.lstrip().startswith(("#", "!")):
            config[key.strip()] = value.strip()
    return config


def authorizer(acls: Mapping[str, AclBinding], config: Mapping[str, str]) -> Any:
    from replay.kafka.authorizer import StandardAuthorizer

    a = StandardAuthorizer.from_config(config)
    assert NOBODY not in a.super_users
    a.load_snapshot(acls)
    a.complete_initial_load()
    return a


def _covers(b: AclBinding, name: str) -> bool:
    return b.resource_name in (name, "*") if b.pattern_type == "LITERAL" else name.startswith(b.resource_name)


def _decides(b: AclBinding, op: str) -> bool:
    implied = ((op == "DESCRIBE" and b.operation in ("READ", "WRITE", "DELETE", "ALTER"))
               or (op == "DESCRIBE_CONFIGS" and b.operation == "ALTER_CONFIGS"))
    return b.operation in ("ALL", op) or (b.permission_type == "ALLOW" and implied)


def decide(a: Any, principal: str, host: str, op: str, rtype: str, name: str) -> tuple[str, str, tuple[str, ...]]:
    """The reference decision, with `User:*` as a principal no ACL names and host `*` as an address no ACL names."""
    exp = a.explain(NOBODY if principal == "User:*" else principal, UNNAMED_HOST if host == "*" else host, op,
                    rtype, name)
    return exp.result, REASONS[exp.reason], tuple(exp.acl_ids)


def reference_who_can(acls: Mapping[str, AclBinding], config: Mapping[str, str], op: str, rtype: str,
                      name: str) -> set[Who]:
    """The rows `audit_who_can` must give, from the reference authorizer: every principal of an ACL covering the
    resource, the super users and everyone, from each host those ACLs name and from any other host (`*`); a host row
    only where it differs from the any-host row; denials only by a DENY ACL; ACLs for the operation whose host no
    client can present as NEVER_MATCHES."""
    assert all(b.host != UNNAMED_HOST and b.principal != NOBODY for b in acls.values())
    a = authorizer(acls, config)
    cands = {i: b for i, b in acls.items() if b.resource_type == rtype and _covers(b, name)}
    principals = {b.principal for b in cands.values()} | set(a.super_users) | {"User:*"}
    hosts = {b.host for b in cands.values() if presentable_host(b.host)} | {"*"}
    answers = {(p, h): decide(a, p, h, op, rtype, name) for p in principals for h in hosts}
    rows = {(p, h, *ans) for (p, h), ans in answers.items()
            if (h == "*" or ans[:2] != answers[(p, "*")][:2]) and (ans[0] != "DENIED" or ans[1] == "matching_deny")}
    return rows | {(b.principal, b.host, "NEVER_MATCHES", "acl_host_never_matches", (i,)) for i, b in cands.items()
                   if not presentable_host(b.host) and _decides(b, op)}


def who_rows(rows: list[dict[str, Any]]) -> set[Who]:
    return {(r["principal"], r["host"], r["decision"], r["reason"], tuple(sorted(r["deciding_acl_ids"])))
            for r in rows}


def reference_access_changes(before: Mapping[str, AclBinding], after: Mapping[str, AclBinding],
                             config: Mapping[str, str]) -> set[tuple[str, ...]]:
    """(principal, host, operation, resource type, name, decision before, after) whose reference decision differs,
    for each changed ACL's principal and everyone, its host and any host, the operations it decides, on its pattern."""
    from replay.spark.audits import SUPPORTED_OPERATIONS

    a0, a1 = authorizer(before, config), authorizer(after, config)
    changed = {b for _i, b in set(before.items()) ^ set(after.items())}  # lifetimes that began or ended
    out: set[tuple[str, ...]] = set()
    for b in changed:
        ops = (SUPPORTED_OPERATIONS[b.resource_type] if b.operation == "ALL" else
               [b.operation, *{"READ": ["DESCRIBE"], "WRITE": ["DESCRIBE"], "DELETE": ["DESCRIBE"], "ALTER": [
                   "DESCRIBE"], "ALTER_CONFIGS": ["DESCRIBE_CONFIGS"]}.get(b.operation, [])])
        for p in {b.principal, "User:*"}:
            for h in {b.host, "*"} if presentable_host(b.host) else {"*"}:
                for op in ops:
                    d0 = decide(a0, p, h, op, b.resource_type, b.resource_name)[0]
                    d1 = decide(a1, p, h, op, b.resource_type, b.resource_name)[0]
                    if d0 != d1:
                        out.add((p, h, op, b.resource_type, b.resource_name, d0, d1))
    return out


def _kafka_checkpoint(dump: Path, index: int = -2) -> dict[str, Any]:
    """A describeAcls answer of the real broker that lies inside the dump's log (`checkpoints.jsonl`)."""
    checkpoints = [json.loads(line) for line in (dump / "checkpoints.jsonl").read_text().splitlines() if line.strip()]
    usable = [c for c in checkpoints if c.get("matches_expected") and c.get("acls")]
    return usable[index]


def _batch_time(ref: Any, offset: int) -> int:
    """The append time of the batch ending at `offset` (a checkpoint's offset is a log end offset - 1). The
    checkpoint's own `time_ms` is the harness's clock after describeAcls answered: later batches may precede it."""
    return int(dict(ref.times)[offset])


def _tuples(bindings: Any) -> Counter[tuple[str, ...]]:
    return Counter((b.resource_type, b.resource_name, b.pattern_type, b.principal, b.host, b.operation,
                    b.permission_type) for b in bindings)


# ---- the notebook end to end: two runs into one lake ---------------------------------------------------------

RUNS = {  # sample: how the audit moment is given
    "small-snapshots": "offset",  # first, into a fresh lake
    "retention-gap": "time",  # second, into the same lake; offsets 0..162 are in no dump
}


@pytest.fixture(scope="module")
def runs(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> dict[str, nb.NotebookRun]:
    base = tmp_path_factory.mktemp("notebook")
    out = {}
    for sample, given in RUNS.items():
        dump = DATA / sample
        checkpoint = _kafka_checkpoint(dump)
        moment = (str(checkpoint["as_of_offset"]) if given == "offset"
                  else format_time(_batch_time(_reference(sample), checkpoint["as_of_offset"])))
        params = {"dump": str(dump), "lake": str(base / "lake"), "cluster": "nb-" + sample, "moment": moment}
        if sample != LAST_RUN:  # section 8 (the authorizer sample, into the same lake) once, in the last run: the
            params["authorizer_log"] = ""  # versions the first run's time travel sees are the first run's alone
        with aqe_off(spark):  # mostly questions: deep plans over a handful of rows (spark_conf.aqe_off)
            out[sample] = nb.run_notebook(str(NOTEBOOK), params, spark=spark, display_dir=str(base / sample),
                                          echo=False, max_rows=10_000)
    return out


LAST_RUN = list(RUNS)[-1]


def _table(run: nb.NotebookRun, *columns: str) -> Any:
    """The one table the run displayed whose columns begin with `columns`, with every row shown."""
    assert run.display is not None
    found = [d for d in run.display.items if d.kind == "table" and d.columns[:len(columns)] == list(columns)]
    assert len(found) == 1, (columns, [d.columns for d in run.display.items if d.kind == "table"])
    assert found[0].total_rows is not None  # not cut at max_rows
    return found[0]


def _reference(sample: str) -> Any:
    from replay.kafka.dump import replay_paths

    return replay_paths([str(DATA / sample)])


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("sample", list(RUNS))
def test_notebook_cells_and_state(runs: dict[str, nb.NotebookRun], sample: str) -> None:
    """Every cell ran; the ACLs at the audit moment equal the real broker's answer and the reference replayer's,
    whether the moment was given as an offset or as an ISO time."""
    run = runs[sample]
    assert len(run.cells) == len(nb.parse_notebook(NOTEBOOK.read_text()))
    assert {c.status for c in run.cells} <= {"ok", "rendered"}, [(c.cell.index, c.status, c.error) for c in run.cells]
    kinds = Counter(c.cell.kind for c in run.cells)
    assert kinds["python"] >= 8 and kinds["sql"] >= 9 and kinds["md"] >= 8

    ns, ref, checkpoint = run.namespace, _reference(sample), _kafka_checkpoint(DATA / sample)
    offset = ns["moment_offset"]
    assert offset == checkpoint["as_of_offset"]
    if RUNS[sample] == "time":
        assert ns["moment_time"] == _batch_time(ref, offset) and ref.offset_at_time(ns["moment_time"]) == offset
    want, state = ref.state_at(offset), ns["state"]
    assert (state.certain, state.uncertain, state.covered, state.complete) == (
        want.certain, want.uncertain, want.covered, want.complete)
    assert state.exact and _tuples(state.certain.values()) == _tuples(AclBinding(*(a[f] for f in FIELDS))
                                                                         for a in checkpoint["acls"])
    assert f"offset {offset}" in run.output() and "Current ACLs for resource" in run.output()
    # the %sql cell with acl_state_at lists exactly that state
    rows = _table(run, "resource_type", "resource_name", "pattern_type", "principal").rows
    assert all(r["certainty"] == "certain" for r in rows)
    assert _tuples(AclBinding(*(r[f] for f in FIELDS)) for r in rows) == _tuples(want.certain.values())
    # which APIs the principal could call on the resource then: the reference's state decides each the same way
    found = ns["apis_then"]
    assert f"APIs {ns['api_principal']} from 10.0.0.1 could call on " in run.output() and len(found["apis"]) > 20
    authorizer = StandardAuthorizer(super_users=ns["super_users"] or None,
                                    allow_everyone_if_no_acl_found=ns["allow_everyone"])
    for acl_id, binding in want.certain.items():
        authorizer.add_acl(acl_id, binding)
    authorizer.complete_initial_load()
    for a in found["apis"]:
        d = could_call(authorizer, a["api"], ns["api_principal"], "10.0.0.1", **ns["api_resources"])
        assert (a["outcome"], a["error"]) == (d.outcome, d.error), a


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("sample", list(RUNS))
def test_notebook_sql_by_time_changes_and_coverage(spark: Any, runs: dict[str, nb.NotebookRun], sample: str) -> None:
    """acl_state_at_time gives the state by offset; acl_changes_between the reference's events in range;
    acl_coverage_at the reference's covered / complete / exact; coverage and anomalies the reference's."""
    run, ref = runs[sample], _reference(sample)
    ns = run.namespace
    cluster, offset, to_offset = ns["cluster"], ns["moment_offset"], ns["to_offset"]
    assert to_offset == ref.last_offset  # compare_to empty: the end of known history
    # by time: the offset the time maps to, and there the same ACLs as by offset
    by_time = ref.state_at(ref.offset_at_time(ns["moment_time"]))
    counts = {(r["permission_type"], r["certainty"]): r["acls"]
              for r in _table(run, "permission_type", "certainty", "acls").rows}
    assert counts == dict(Counter((b.permission_type, "certain") for b in by_time.certain.values()))
    if RUNS[sample] == "time":  # the moment was a time: acl_state_at_time is the state by offset, ACL for ACL
        got = spark.sql(f"SELECT acl_id, certainty FROM acl_state_at_time({nb.sql_literal(cluster)}, "
                        f"timestamp_millis({ns['moment_time']}))").collect()
        assert {r.acl_id: r.certainty for r in got} == {i: "certain" for i in ns["state"].certain}
    # acl_changes_between: the reference's visible changes with offset <= to, after the moment
    changes = _table(run, "offset", "offset_min", "exact", "time", "change").rows
    assert Counter((r["offset"], r["offset_min"], r["exact"], r["acl_id"], r["change"], r["cause"]) for r in changes) \
        == Counter((e.offset, e.offset_min, e.exact, e.acl_id, e.change.value, e.cause.value) for e in ref.events
                   if offset < e.offset <= to_offset)
    assert changes
    # acl_coverage_at at the audit moment, the compared moment and offset 0
    coverage_at = {r["moment"]: r for r in _table(run, "moment", "as_of_offset", "covered").rows}
    for moment, at in (("audit moment", offset), ("compared moment", to_offset), ("start of the log", 0)):
        want = ref.state_at(at)
        r = coverage_at[moment]
        assert (r["as_of_offset"], r["covered"], r["complete"], r["exact"], r["certain_acls"], r["uncertain_acls"]) == (
            at, want.covered, want.complete, want.exact, len(want.certain), len(want.uncertain)), moment
    # log_coverage and anomalies, as the notebook shows them
    cov = _table(run, "start_offset", "end_offset", "kind", "source").rows
    assert sorted((r["start_offset"], r["end_offset"], r["kind"]) for r in cov if r["kind"] != "incomplete") == sorted(
        (c.start_offset, c.end_offset, c.kind.value) for c in ref.coverage)
    assert sorted((r["start_offset"], r["end_offset"]) for r in cov if r["kind"] == "incomplete") == sorted(
        ref.incomplete)
    anomalies = {r["kind"]: r for r in _table(run, "kind", "findings", "first_offset", "example").rows}
    assert {k: r["findings"] for k, r in anomalies.items()} == dict(Counter(a.kind.value for a in ref.anomalies))
    if sample == "retention-gap":  # retention deleted offsets 0..162: a hole from offset 0, reported as a gap
        assert (0, 162, "missing") in {(r["start_offset"], r["end_offset"], r["kind"]) for r in cov}
        assert anomalies["gap"]["first_offset"] == 0
        assert (coverage_at["start of the log"]["covered"], coverage_at["start of the log"]["exact"]) == (False, False)
        assert coverage_at["start of the log"]["uncertain_acls"] > 0
    else:
        assert not anomalies and all(r["exact"] for r in coverage_at.values())


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("sample", list(RUNS))
def test_notebook_who_could_access(runs: dict[str, nb.NotebookRun], sample: str) -> None:
    """Section 5, from Python and from SQL (acl_who_can), equals the reference StandardAuthorizer's answers with the
    sample broker's super.users and allow.everyone.if.no.acl.found."""
    run, ref = runs[sample], _reference(sample)
    ns = run.namespace
    who = ns["who"]
    config = broker_config(DATA / sample)
    assert (who.super_users, who.allow_everyone) == (config["super.users"],
                                                     config["allow.everyone.if.no.acl.found"] == "true")
    state = ref.state_at(ns["moment_offset"])
    assert not state.uncertain
    want = reference_who_can(state.certain, config, who.operation, who.resource_type, who.resource_name)
    assert who_rows(who.rows) == want
    assert any(r[2] == "ALLOWED" and r[3] == "matching_allow" for r in want)  # an answer with teeth
    assert all(r["certain"] for r in who.rows)
    # the %sql cell asks acl_who_can with the session variables: the same rows
    sql = _table(run, "who", "from_host", "decision", "certain", "reason", "deciding_acl_ids").rows
    as_shown = {(r["who"], r["from_host"], r["decision"], r["reason"], tuple(sorted(r["deciding_acl_ids"])))
                for r in who.rows}
    assert {(r["who"], r["from_host"], r["decision"], r["reason"], tuple(sorted(r["deciding_acl_ids"]))) for r in sql} \
        == as_shown
    assert "\n".join(who.lines()) in run.output()


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
@pytest.mark.parametrize("sample", list(RUNS))
def test_notebook_what_changed(runs: dict[str, nb.NotebookRun], sample: str) -> None:
    """Section 6: acl_diff and access_diff equal the reference's states and authorizer decisions at both moments."""
    run, ref = runs[sample], _reference(sample)
    ns = run.namespace
    before, after = ref.state_at(ns["moment_offset"]), ref.state_at(ns["to_offset"])
    assert not before.uncertain and not after.uncertain
    diff = _table(run, "change", "certain", "acl_id").rows
    was, now = set(before.certain.items()), set(after.certain.items())
    assert Counter((r["acl_id"], AclBinding(*(r[f] for f in FIELDS)), r["change"], r["certain"]) for r in diff) \
        == Counter([(i, b, "added", True) for i, b in now - was] + [(i, b, "removed", True) for i, b in was - now])
    assert diff
    counted = {(r["change"], r["certain"]): r["acls"] for r in _table(run, "change", "certain", "acls").rows}
    assert counted == dict(Counter((r["change"], r["certain"]) for r in diff))
    access = _table(run, "change", "certain", "who", "principal").rows
    got = {(r["principal"], r["host"], r["operation"], r["resource_type"], r["resource_name"], r["before_decision"],
            r["after_decision"]) for r in access}
    assert got == reference_access_changes(before.certain, after.certain, broker_config(DATA / sample))
    assert all(r["change"] == ("gained" if r["after_decision"] == "ALLOWED" else "lost") for r in access)


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
def test_notebook_time_travel_and_plots(runs: dict[str, nb.NotebookRun]) -> None:
    """DESCRIBE HISTORY and VERSION AS OF run through EXECUTE IMMEDIATE of session variables and show rows: on the
    fresh lake the current version (the only one with rows), then the version before the second run's replay (what
    the lake held before: the first cluster only). The plots are real pictures; the changes plot says its period."""
    first, second = runs["small-snapshots"], runs["retention-gap"]
    for run in (first, second):
        history = _table(run, "version", "timestamp")  # DESCRIBE HISTORY's columns
        assert "userMetadata" in history.columns and history.rows
        variables = _table(run, "kr_cluster", "kr_offset").rows[0]
        assert variables["kr_describe_history_sql"] == f"DESCRIBE HISTORY {run.namespace['history_table']}"
        assert f"VERSION AS OF {variables['kr_history_version']} " in variables["kr_time_travel_sql"]
    ns1, ns2 = first.namespace, second.namespace
    assert ns1["time_travel_version"] == ns1["history_version"]  # the fresh lake: the current version
    assert ns2["time_travel_version"] == ns2["history_version_before"] < ns2["history_version"]
    assert ns2["history_version_before"] == ns1["history_version"]
    small = _reference("small-snapshots")
    for run in (first, second):
        rows = _table(run, "version", "cluster_id", "lifetimes", "live_at_end").rows
        assert [(r["version"], r["cluster_id"], r["lifetimes"], r["live_at_end"]) for r in rows] == [
            (run.namespace["time_travel_version"], "nb-small-snapshots", len(small.lifetimes),
             len(small.live_at_end()))]

    for run in (first, second):
        assert run.display is not None
        figures = [d.path for d in run.display.items if d.kind == "figure"]
        assert len(figures) == (5 if run is second else 4)  # section 8's granted-against-used plot in the last run
        assert all(p and os.path.getsize(p) > 10_000 for p in figures)
        title = run.namespace["figures"]["changes_per_day"].axes[0].get_title()
        # the samples span minutes: not per day, and the title says why
        assert "ACL changes per " in title and "not per day: the history spans" in title and "under 2 days" in title


@pytest.mark.spark
@pytest.mark.spark_b  # the notebook runs in the other Spark worker (tests/conftest.py)
@pytest.mark.slow
def test_notebook_verifies_the_brokers_log_in_the_lake(runs: dict[str, nb.NotebookRun]) -> None:
    """Section 8 on the sample `data/authorizer-log`: its log ingested into access_events and verified in Spark,
    every decision consistent, by the Python API and by the SQL function; carol's group grant the one unused ACL;
    the granted-against-used plot drawn. The first run, told no log, says so."""
    run = runs[LAST_RUN]
    counts = {r["verdict"]: r["count"] for r in _table(run, "verdict", "count").rows}
    assert counts == {"consistent": 68}
    assert {r["verdict"]: r["decisions"] for r in _table(run, "verdict", "decisions").rows} == counts
    assert len(_table(run, "verdict", "time").rows) == 68
    unused = [(r["principal"], r["resource_name"]) for r in _table(run, "used", "decisions").rows if not r["used"]]
    assert unused == [("User:carol", "reports")]
    assert {r["principal"] for r in _table(run, "principal", "granted").rows} >= {"User:alice", "User:bob",
                                                                                  "User:carol"}
    assert run.display is not None
    assert any(d.kind == "figure" for d in run.display.items[-3:])  # after the tables of section 8
    assert "no authorizer log given" in runs[next(iter(RUNS))].output()
