"""The object API (`replay.spark.api`, issue 13 item 2) asks the same questions as the functions it wraps: a
`Lake.at_path(...).cluster(name)` answers each of them with the rows the module function gives."""

from __future__ import annotations

from typing import Any

import pytest

from replay.kafka.times import format_time
from replay.spark import audits, authorize, queries
from replay.spark.api import Cluster, Lake

pytestmark = [pytest.mark.spark, pytest.mark.usefixtures("without_aqe")]

CLUSTER = "small-snapshots"


def _rows(df: Any) -> list[tuple[Any, ...]]:
    return sorted((tuple(r) for r in df.collect()), key=repr)


@pytest.mark.slow
@pytest.mark.extended  # minutes of questions asked twice: `make test-all` (`make test` has the replay below)
def test_a_cluster_of_the_lake_answers_like_the_functions(spark: Any, sample_lake: Any) -> None:
    lake = Lake.at_path(spark, sample_lake.location)
    assert isinstance(lake, Lake) and lake.location == sample_lake.location
    assert CLUSTER in lake.clusters() and lake.clusters() == queries.known_clusters(sample_lake)
    c = lake.cluster(CLUSTER)
    assert isinstance(c, Cluster) and c.name == CLUSTER

    at = 150
    state = c.state_at(offset=at)
    assert state == queries.state_at(sample_lake, CLUSTER, offset=at) and state.certain
    assert state.time is not None
    by_text = c.state_at(time=format_time(state.time))  # a time as text is parsed as the CLI parses it
    assert by_text.offset == queries.offset_at_time(sample_lake, CLUSTER, state.time)
    assert c.state_at(time=state.time) == by_text

    assert _rows(c.history()) == _rows(queries.history(sample_lake, CLUSTER))
    assert _rows(c.changes(50, 120)) == _rows(queries.changes_between(sample_lake, CLUSTER, 50, 120))
    assert _rows(c.who_can("READ", "TOPIC", "payments", offset=at)) == _rows(
        audits.who_can(spark, sample_lake, CLUSTER, "READ", "TOPIC", "payments", at))
    principal = sorted(b.principal for b in state.certain.values() if not b.principal.endswith(":*"))[0]
    assert _rows(c.what_can(principal, offset=at, allow_everyone=True)) == _rows(
        audits.what_can(spark, sample_lake, CLUSTER, principal, at, allow_everyone=True))
    assert _rows(c.acl_changes(50, at)) == _rows(audits.acl_changes(spark, sample_lake, CLUSTER, 50, at))
    assert _rows(c.risky_grants(offset=at)) == _rows(audits.risky_grants(spark, sample_lake, CLUSTER, at))

    decision = c.authorize(principal, "10.0.0.2", "DESCRIBE", "TOPIC", "payments", offset=at)
    assert decision == authorize.authorize_one(spark, sample_lake, CLUSTER, principal, "10.0.0.2", "DESCRIBE",
                                               "TOPIC", "payments", at)


def test_a_replay_with_nothing_new_changes_no_table(spark: Any, sample_lake: Any) -> None:
    lake = Lake.at_path(spark, sample_lake.location)
    versions = {t: lake.version(t) for t in ("acl_history", "acl_events", "replay_state")}
    lake.cluster(CLUSTER).replay()
    assert {t: lake.version(t) for t in versions} == versions
