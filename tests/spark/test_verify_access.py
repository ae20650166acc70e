"""Issue 17 in the lake: brokers' authorizer logs ingested into `access_events` on the executors, and verified
against the replayed tables (`replay.spark.verify_access`) with the reference's verdicts and sentences
(`replay.kafka.verify_log`), from Python and from the SQL function.

The real sample `data/authorizer-log` (a broker's dump and its authorizer log from one run) is the main case, with a
tampered copy; lines written for the requests the sample dumps' ACLs decide, at their moments and near their holes,
cover the states a broker's log cannot (uncertain ACLs, holes, incomplete stretches)."""

from __future__ import annotations

import gzip
import io
import json
import random
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from replay.kafka.authorizer import java_host_address
from replay.kafka.authorizer_log import parse_zone, read_log
from replay.kafka.dump import replay_paths
from replay.kafka.replayer import ReplayResult
from replay.kafka.verify_log import Verifier, decision_at
from tests.kafka.test_verify_log import acl_text, kafka_line

pytestmark = pytest.mark.spark

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "data" / "authorizer-log"
SETTINGS = json.loads((SAMPLE / "broker.json").read_text())
ZONE = SETTINGS["log_time_zone"]
SUPER_USERS = SETTINGS["super_users"]
CLUSTER = "authorizer-sample"


@pytest.fixture(scope="module")
def access_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """The sample's dump ingested and replayed, and its authorizer log ingested into access_events."""
    from replay.spark.access_ingest import ingest_access_logs
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, str(tmp_path_factory.mktemp("access") / "lake"))
    ingest(spark, [str(SAMPLE / "dump")], cluster=CLUSTER, lake=lake, progress=False)
    replay_lake(lake, [CLUSTER], progress=False)
    report = ingest_access_logs(spark, [str(SAMPLE / "broker-logs")], CLUSTER, lake, zone=ZONE, progress=False)
    assert report.decisions == report.decisions_new > 0 and report.problems == 0, report
    return lake


BROKER = "broker-logs"  # the sample log's directory: its broker (another test ingests a broken copy as broker-9)


def sample_events(lake: Any) -> Any:
    """The sample log's decisions in access_events."""
    from pyspark.sql import functions as F

    return lake.read("access_events").where((F.col("cluster_id") == CLUSTER) & (F.col("broker") == BROKER))


def reference_rows(history: ReplayResult, path: Path, super_users: str = SUPER_USERS, allow_everyone: bool = False,
                   skew_ms: int = 2000, zone: str = ZONE) -> dict[int, tuple[Any, ...]]:
    """Per line number: (verdict, why, offsets, acl_ids) as the reference gives them."""
    verifier = Verifier(history, super_users, allow_everyone, skew_ms)
    out = {}
    for number, item in read_log(str(path), parse_zone(zone)):
        v = verifier.verify(item)  # type: ignore[arg-type]
        out[number] = (v.verdict, v.why, list(v.offsets) if v.offsets is not None else None, sorted(v.acl_ids))
    return out


def lake_rows(df: Any) -> dict[int, tuple[Any, ...]]:
    return {r["line"]: (r["verdict"], r["why"], r["offsets"], sorted(r["acl_ids"])) for r in df.collect()}


def logged_rows(spark: Any, lake: Any, path: Path, **settings: Any) -> dict[int, tuple[Any, ...]]:
    """The lake's verdicts on a log file read on the executors (not stored)."""
    from replay.spark.access_ingest import access_rows, plan_logs, read_logs
    from replay.spark.verify_access import verify_access

    rows = access_rows(read_logs(spark, plan_logs(spark, [str(path)]), "broker-1", ZONE), CLUSTER)
    return lake_rows(verify_access(lake, rows, **settings))


@pytest.mark.slow  # the authorizer log's lake: 2-3 minutes of Spark to build
@pytest.mark.spark_b  # the sample's own lake: beside the other Spark worker's tests
def test_the_log_is_ingested_once_with_its_lines_and_problems(spark: Any, access_lake: Any, tmp_path: Path) -> None:
    """access_events holds exactly the decisions the reference reader finds, with file, line and byte position; the
    same log again, renamed and gzip-compressed, adds nothing; a line that looks like a decision and does not read
    goes to quarantine with its line and position, and the replay does not take it for a problem of the dumps."""
    from pyspark.sql import functions as F

    from replay.spark.access_ingest import ingest_access_logs
    from replay.spark.replay import replay_lake

    log = SAMPLE / "broker-logs" / "kafka-authorizer.log"
    want = {n: d for n, d in read_log(str(log), parse_zone(ZONE))}
    rows = {r["line"]: r for r in access_lake.read("access_events").where(F.col("cluster_id") == CLUSTER).collect()}
    assert sorted(rows) == sorted(want) and len(rows) >= 60
    raw = log.read_bytes()
    for n, d in want.items():
        r = rows[n]
        assert (r["time"], r["principal"], r["host"], r["operation"], r["resource_type"], r["pattern_type"],
                r["resource_name"], r["api"], r["decision"], r["rule"], r["rule_kind"]) == (
            d.time, d.principal, d.host, d.operation, d.resource_type, d.pattern_type, d.resource_name,  # type: ignore[union-attr]
            d.api, d.decision, d.rule, d.rule_kind)  # type: ignore[union-attr]
        named = d.acl  # type: ignore[union-attr]
        assert (r["acl_principal"], r["acl_operation"]) == ((named.principal, named.operation) if named else (None, None))
        assert r["broker"] == "broker-logs" and r["source_file"].endswith("kafka-authorizer.log")
        assert raw[r["file_position"]:].split(b"\n", 1)[0].decode() == raw.split(b"\n")[n - 1].decode()

    version = access_lake.version("access_events")
    again = tmp_path / "broker-logs"  # the same broker's log, rotated and compressed
    again.mkdir()
    with open(log, "rb") as src, gzip.open(again / "kafka-authorizer.log.2026-11-27-10.gz", "wb") as dst:
        shutil.copyfileobj(src, dst)
    report = ingest_access_logs(spark, [str(again)], CLUSTER, access_lake, zone=ZONE, progress=False)
    assert (report.decisions, report.decisions_new) == (len(want), 0)
    assert access_lake.version("access_events") == version

    broken = tmp_path / "broker-9" / "kafka-authorizer.log"
    broken.parent.mkdir()
    lines = raw.decode().splitlines()
    lines[2] = lines[2].replace("operation = ", "operation = Jump", 1)
    broken.write_text("\n".join(lines) + "\n")
    report = ingest_access_logs(spark, [str(broken)], CLUSTER, access_lake, zone=ZONE, progress=False)
    assert (report.problems, report.problems_new, report.decisions_new) == (1, 1, len(want) - 1)
    q = access_lake.read("quarantine").where((F.col("cluster_id") == CLUSTER) & (F.col("kind") == "unreadable_log_line"))
    (row,) = q.collect()
    assert (row["line"], row["file_position"], row["source_kind"]) == (3, len(lines[0]) + len(lines[1]) + 2,
                                                                       "authorizer_log")
    assert "Jump" in row["message"] and row["raw"].decode() == lines[2]
    replay_lake(access_lake, [CLUSTER], progress=False)  # nothing new in the dumps: nothing to replay
    assert access_lake.read("anomalies").where(F.col("message").contains("Jump")).count() == 0


@pytest.mark.slow  # the authorizer log's lake: 2-3 minutes of Spark to build
@pytest.mark.spark_b  # the sample's own lake: beside the other Spark worker's tests
def test_the_lake_gives_the_reference_verdicts_on_the_real_log(spark: Any, access_lake: Any) -> None:
    """Every line of the real broker's log: the same verdict, sentence, compared offsets and deciding ACLs as the
    reference, from access_events and from the SQL function; all consistent with the broker's settings, and the
    super users' lines inconsistent when the super users are not given."""
    from replay.spark.access_sql import register_access_functions
    from replay.spark.verify_access import verify_access

    history = replay_paths([str(SAMPLE / "dump")])
    log = SAMPLE / "broker-logs" / "kafka-authorizer.log"
    want = reference_rows(history, log)
    got = lake_rows(verify_access(access_lake, sample_events(access_lake), super_users=SUPER_USERS))
    assert got == want
    assert {v[0] for v in got.values()} == {"consistent"}
    assert any(v[3] for v in got.values())  # the ACLs that decided are named

    register_access_functions(spark, access_lake)
    sql = spark.sql(f"SELECT * FROM acl_verify_access('{CLUSTER}', super_users => '{SUPER_USERS}')")
    assert lake_rows(sql.where(f"broker = '{BROKER}'")) == want

    strangers = reference_rows(history, log, super_users="User:admin", skew_ms=0)
    assert lake_rows(verify_access(access_lake, sample_events(access_lake), super_users="User:admin",
                                   skew_ms=0)) == strangers
    assert any("super user nobody knew" in v[1] for v in strangers.values())


@pytest.mark.slow  # the authorizer log's lake: 2-3 minutes of Spark to build
@pytest.mark.spark_b  # the sample's own lake: beside the other Spark worker's tests
def test_a_tampered_copy_gives_the_reference_verdicts(spark: Any, access_lake: Any, tmp_path: Path) -> None:
    """Decisions flipped, principals swapped and the named ACL changed on some lines: the lake says what the
    reference says, line by line (inconsistent exactly there)."""
    history = replay_paths([str(SAMPLE / "dump")])
    log = SAMPLE / "broker-logs" / "kafka-authorizer.log"
    text = log.read_text().splitlines()
    numbers = sorted(n for n, _ in read_log(str(log), parse_zone(ZONE)))
    for n in numbers[::4]:
        text[n - 1] = re.sub(r" is (Allowed|Denied) ", lambda m: " is Denied " if m[1] == "Allowed" else " is Allowed ",
                             text[n - 1], count=1)
    for n in numbers[1::5]:
        text[n - 1] = re.sub(r"Principal = User:\w+ ", "Principal = User:dave ", text[n - 1], count=1)
    for n in numbers[2::6]:
        text[n - 1] = text[n - 1].replace("operation=READ", "operation=WRITE", 1)
    copy = tmp_path / "kafka-authorizer.log"
    copy.write_text("\n".join(text) + "\n")
    want = reference_rows(history, copy)
    assert {"consistent", "inconsistent"} <= {v[0] for v in want.values()}
    assert logged_rows(spark, access_lake, copy, super_users=SUPER_USERS) == want


@pytest.mark.slow
@pytest.mark.extended  # `make test-all`: `make test` holds `unused_access` on the lake to the reference in
@pytest.mark.spark_b  # test_drawn_lines_over_histories_with_holes_give_the_reference_verdicts
def test_unused_in_the_lake_is_the_references(spark: Any, access_lake: Any, capsys: pytest.CaptureFixture[str],
                                              tmp_path: Path) -> None:
    """Least privilege from access_events: the same ACL rows (used or not, decisions, hosts) and principal rows as
    the reference, drawn as granted against used; carol's READ on group `reports` was granted and never used. And
    the commands on the lake."""
    from replay import cli
    from replay.kafka.authorizer_log import LoggedDecision
    from replay.kafka.unused_acls import acl_rows, principal_rows, usage
    from replay.spark.access_sql import register_access_functions
    from replay.spark.plots import granted_used_figure
    from replay.spark.unused_access import unused_access

    history = replay_paths([str(SAMPLE / "dump")])
    log = SAMPLE / "broker-logs" / "kafka-authorizer.log"
    decided = [x for _, x in read_log(str(log), parse_zone(ZONE)) if isinstance(x, LoggedDecision)]
    used = usage(decided, Verifier(history, SUPER_USERS), None, None)
    got = unused_access(access_lake, CLUSTER, super_users=SUPER_USERS, events=sample_events(access_lake))
    assert [r.asDict() for r in got.acls.collect()] == acl_rows(history, used, None, None)
    assert [r.asDict() for r in got.principals.collect()] == principal_rows(history, used, None, None)
    assert got.counts == {"lines": used.lines, "allowed": used.allowed, "not_consistent": used.not_consistent}
    # the SQL functions over every decision of the cluster (another test may have added a copy of the sample log as
    # broker-9: the same sets, each decision counted twice)
    register_access_functions(spark, access_lake)
    settings = f"super_users => '{SUPER_USERS}'"
    for function, frame in (("acl_unused_acls", got.acls), ("acl_granted_used", got.principals)):
        sql = spark.sql(f"SELECT * FROM {function}('{CLUSTER}', {settings})").collect()
        assert [{**r.asDict(), "decisions": None} for r in sql] == [{**r.asDict(), "decisions": None}
                                                                     for r in frame.collect()], function
    rows = [r.asDict() for r in got.principals.collect()]
    fig = granted_used_figure(rows, CLUSTER, path=str(tmp_path / "granted-used.png"))
    bars = [[round(b.get_height()) for b in c] for c in fig.axes[0].containers]
    assert bars == [[len(r[k]) for r in rows] for k in ("granted", "used", "granted_not_used")]
    assert (tmp_path / "granted-used.png").stat().st_size > 10_000
    idle = [r for r in got.acls.collect() if not r["used"]]
    assert [(r["principal"], r["operation"], r["resource_type"], r["resource_name"]) for r in idle] == [
        ("User:carol", "READ", "GROUP", "reports")]

    lake = ["--lake", access_lake.location, "--lake-cluster", CLUSTER, "--super-users", SUPER_USERS,
            "--log-time-zone", ZONE]
    out = io.StringIO()
    assert cli.main(["audit", "verify-log", str(log), *lake, "--broker", "b1", "--output", "json", "--strict"],
                    out) == 0
    rows = json.loads(out.getvalue())
    assert len(rows) == len(decided) and {r["verdict"] for r in rows} == {"consistent"}
    assert f"{len(decided)} logged decision(s): {len(decided)} consistent" in capsys.readouterr().err
    out = io.StringIO()
    assert cli.main(["audit", "unused", *lake, "--only-unused", "--output", "json"], out) == 0
    assert [r["resource_name"] for r in json.loads(out.getvalue())["acls"]] == ["reports"]


def drawn_log(history: ReplayResult, path: Path, rng: random.Random, n: int = 160) -> None:
    """Lines for requests the history's ACLs (certain or not) apply to, at drawn moments (some between changes,
    some off by a few seconds, some before the history), logged as the state there decides them or flipped."""
    lives = list(history.lifetimes)
    offsets = [o for o, _ in history.times]
    out = []
    for _ in range(n):
        b = rng.choice(lives).binding
        at = rng.choice(offsets)
        time = history.time_of(at)
        assert time is not None
        time += rng.choice([0, 0, 0, 700, -700, 2500, -2500])
        principal = b.principal if b.principal != "User:*" and rng.random() < 0.9 else "User:someone"
        host = java_host_address(b.host) if b.host != "*" and rng.random() < 0.7 else rng.choice(
            ["10.9.8.7", "10.0.0.1"])  # a named-host ACL's request from another host: its other_hosts
        operation = b.operation if b.operation != "ALL" else rng.choice(["READ", "DESCRIBE", "ALTER"])
        name = b.resource_name if b.pattern_type != "PREFIXED" else b.resource_name + "-x"
        if name == "*":
            name = "anything"
        from replay.kafka.authorizer_log import LoggedDecision

        probe = LoggedDecision(time, "", None, principal, host, operation, b.resource_type, "LITERAL", name, "Metadata",
                               1, "", None, None, None)
        exp, acls = decision_at(history.state_at(at), probe, "User:root", False)
        allowed = exp.allowed if rng.random() < 0.85 else not exp.allowed
        rule = {"super user": "SuperUser", "allow everyone": "DefaultAllow"}.get(exp.reason, "DefaultDeny")
        if exp.acl_ids:
            rule = acl_text(acls[rng.choice(exp.acl_ids)])
        out.append(kafka_line(time, principal, "Allowed" if allowed else "Denied", operation, host, b.resource_type,
                              name, rule))
    out.append(kafka_line(1000, "User:root", "Allowed", "ALTER", "10.0.0.1", "CLUSTER", "kafka-cluster", "SuperUser"))
    path.write_text("\n".join(out) + "\n")


@pytest.mark.parametrize("sample", ["small-snapshots", "retention-gap"])
def test_drawn_lines_over_histories_with_holes_give_the_reference_verdicts(spark: Any, sample_lake: Any,
                                                                         tmp_path: Path, sample: str) -> None:
    """Lines over the sample dumps (one with a retention gap: holes, incomplete stretches, ACLs of uncertain
    lifetime), with and without allow.everyone.if.no.acl.found: the lake's verdicts are the reference's; and so
    are its ACL rows of least privilege (decisions, hosts, and the other hosts of ACLs naming one)."""
    from replay.kafka.authorizer_log import LoggedDecision
    from replay.kafka.unused_acls import acl_rows, named_wrong_host, usage
    from replay.spark.access_ingest import access_rows, plan_logs, read_logs
    from replay.spark.unused_access import unused_access
    from replay.spark.verify_access import verify_access

    history = replay_paths([str(ROOT / "data" / sample)])
    log = tmp_path / "kafka-authorizer.log"
    drawn_log(history, log, random.Random(sample))
    rows = access_rows(read_logs(spark, plan_logs(spark, [str(log)]), "broker-1", "UTC"), sample)
    seen = set()
    for allow_everyone in (False, True):
        want = reference_rows(history, log, "User:root", allow_everyone, zone="UTC")
        got = lake_rows(verify_access(sample_lake, rows, "User:root", allow_everyone))
        assert got == want, {n: (got.get(n), want[n]) for n in want if got.get(n) != want[n]}
        seen |= {v[0] for v in want.values()}
    assert seen == {"consistent", "inconsistent", "unknown"}
    decided = [x for _, x in read_log(str(log), parse_zone("UTC")) if isinstance(x, LoggedDecision)]
    want_acls = acl_rows(history, usage(decided, Verifier(history, "User:root")), None, None)
    got_acls = [r.asDict() for r in unused_access(sample_lake, sample, super_users="User:root", events=rows).acls.collect()]
    assert got_acls == want_acls
    assert any(named_wrong_host(r) for r in want_acls) and any(r["used"] for r in want_acls)
