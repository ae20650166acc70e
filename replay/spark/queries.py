"""As-of questions over the lake, from Python and as SQL table functions.

State as of offset N is a range predicate on `acl_history` (DESIGN.md §4): an ACL is certainly live at N when
`valid_from_offset <= N < valid_to_min_offset` (open end: no upper bound), and possibly live when N falls in the
uncertain part of either bound. Time maps to the last offset whose time is <= T through `offset_times`. Each of
those rules is one SQL text in `replay.spark.rules`: the Python functions here run it with parameter markers, the SQL
functions embed it.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, replace
from typing import Any

from pyspark.sql import Column, DataFrame, Row
from pyspark.sql import functions as F

from replay.kafka.acl import AclBinding
from replay.kafka.as_of import Unpublished, state_meta, unpublished_row
from replay.kafka.model import QuestionError, UnknownClusterError, check_offset
from replay.kafka.times import format_time
from replay.spark.rules import (
    coverage_at_sql,
    exact_sql,
    known_end_sql,
    live_sql,
    offset_at_time_sql,
    run_sql,
    time_of_offset_sql,
    unpublished_note_sql,
    unpublished_sql,
)
from replay.spark.sqlddl import SqlFunction, create_temporary
from replay.spark.tables import ACL_FIELDS, Lake, covered_clusters_sql


def certainly_live(at: str | int) -> Column:
    """`live_sql`'s first form as a Column; `at` an offset or a column name."""
    return F.expr(live_sql(str(at))[0])


def live_or_maybe(at: str | int) -> Column:
    """`live_sql`'s second form (certainly or possibly live) as a Column; `at` an offset or a column name."""
    return F.expr(live_sql(str(at))[1])


@dataclass(frozen=True)
class LakeState:
    cluster: str
    offset: int | None
    time: int | None
    certain: dict[str, AclBinding]
    uncertain: dict[str, AclBinding]
    covered: bool
    complete: bool
    unpublished: Unpublished | None = None  # the offset lies inside a batch or transaction: what it holds back

    @property
    def exact(self) -> bool:
        return self.covered and self.complete and not self.uncertain

    def meta(self) -> dict[str, Any]:
        return {"cluster": self.cluster, **state_meta(self.offset, self.time, self.covered, self.complete,
                                                       len(self.uncertain), self.unpublished)}


def _one_value(lake: Lake, table: str, text: str, **values: Any) -> int | None:
    """The single value of a rule's one-row query over one of the lake's tables (`{rel}` in `text`), the question's
    values bound to its markers."""
    frame = lake.read(table)
    row = run_sql(frame.sparkSession, text, values, rel=frame).first()
    return None if row is None or row[0] is None else int(row[0])


def offset_at_time(lake: Lake, cluster: str, time_ms: int) -> int | None:
    """DESIGN.md §3.8: the last offset whose time is <= time_ms (`rules.offset_at_time_sql`)."""
    return _one_value(lake, "offset_times", offset_at_time_sql("{rel}", ":cluster", "CAST(:time AS BIGINT)"),
                      cluster=cluster, time=time_ms)


def unpublished(lake: Lake, cluster: str, offset: int) -> Unpublished | None:
    """The ACL changes logged at or before `offset` that no node had published there: it lies inside their batch
    or open transaction (`rules.unpublished_sql`); None at a boundary."""
    at = "CAST(:at AS BIGINT)"
    row = run_sql(lake.spark, unpublished_sql("{events}", f"(SELECT :cluster AS cluster_id, {at} AS _at)", ":cluster", at),
                  {"cluster": cluster, "at": offset}, events=lake.read("acl_events")).first()
    return unpublished_row(offset, row)


def time_of_offset(lake: Lake, cluster: str, offset: int) -> int | None:
    """The time of the state as of `offset` (`rules.time_of_offset_sql`)."""
    return _one_value(lake, "offset_times", time_of_offset_sql(
        "{rel}", "(SELECT :cluster AS cluster_id, CAST(:offset AS BIGINT) AS _at)"),
                      cluster=cluster, offset=offset)


def last_offset(lake: Lake, cluster: str) -> int | None:
    """The end of the cluster's known history (`rules.known_end_sql`); None for a cluster the lake does not hold."""
    return _one_value(lake, "log_coverage", f"SELECT {known_end_sql()} FROM {{rel}} WHERE cluster_id = :cluster",
                      cluster=cluster)


def known_clusters(lake: Lake) -> list[str]:
    """The clusters whose replayed history the lake holds (what `--lake-cluster` can name): those with a visible
    replay, or in a lake written before replay tags those its `log_coverage` holds."""
    replayed = lake.replayed_clusters()
    if replayed is not None:
        return replayed
    if not lake.exists("log_coverage"):
        return []
    return sorted(r[0] for r in lake.read("log_coverage").select("cluster_id").distinct().collect())


def unknown_cluster(lake: Lake, cluster: str) -> UnknownClusterError:
    """The error for a cluster the lake holds no replayed history of, naming those it does hold."""
    return unknown_cluster_error(lake.location, cluster, known_clusters(lake))


def named_clusters(clusters: list[str]) -> str:
    """The clusters an error names, quoted: the first 20 and how many more (a fleet's lake holds dozens)."""
    return ", ".join(repr(c) for c in clusters[:20]) + (f" and {len(clusters) - 20} more" if len(clusters) > 20 else "")


def unknown_cluster_error(location: str, cluster: str, clusters: list[str]) -> UnknownClusterError:
    """`unknown_cluster`'s error, given the clusters the lake at `location` holds."""
    holds = f"it holds {named_clusters(clusters)}" if clusters else "it holds no replayed cluster yet"
    return UnknownClusterError(f"cluster {cluster!r} has no replayed history in the lake {location} ({holds}); "
                               "ingest its dumps first: kraft-replay ingest DUMP --lake ... --lake-cluster NAME")


def require_cluster(lake: Lake, cluster: str) -> None:
    """Raise `unknown_cluster` unless the lake holds replayed history of `cluster`: a question about a cluster it
    has never seen (a typo, a cluster not ingested yet) would otherwise be answered with nothing. Asks
    `known_clusters`' sources: mostly no Spark job (an audit asked `log_coverage` each time, one or two jobs)."""
    replayed = lake.replayed_clusters()
    known = cluster in replayed if replayed is not None else lake.exists("log_coverage") and bool(
        lake.read("log_coverage").where(F.col("cluster_id") == cluster).limit(1).collect())
    if not known:
        raise unknown_cluster(lake, cluster)


def before_history(lake: Lake, cluster: str, time_ms: int) -> QuestionError:
    """The error for a time before the first record the lake knows of the cluster (or for an unknown cluster)."""
    row = (lake.read("offset_times").where(F.col("cluster_id") == cluster)
           .agg(F.min("time").alias("t"), F.min_by("offset", "time").alias("o")).first())
    if row is None or row["t"] is None:
        return unknown_cluster(lake, cluster)
    return before_history_error(cluster, time_ms, row["t"], row["o"])


def before_history_error(cluster: str, time_ms: int, first_time: int, first_offset: int) -> QuestionError:
    """`before_history`'s error, given the time and offset where the cluster's known history starts."""
    return QuestionError(f"no record of cluster {cluster!r} is at or before {format_time(time_ms)}: its known history "
                         f"starts at {format_time(first_time)} (offset {first_offset}); what was live before is unknown")


def history(lake: Lake, cluster: str) -> DataFrame:
    """Every ACL lifetime of a cluster (one row per lifetime)."""
    return lake.read("acl_history").where(F.col("cluster_id") == cluster)


def state_frame(lake: Lake, cluster: str, offset: int) -> DataFrame:
    """ACLs certainly or possibly live as of `offset`, with a `certainty` column."""
    h = lake.read("acl_history").where(F.col("cluster_id") == cluster)
    return (h.where(live_or_maybe(offset))
            .withColumn("certainty", F.when(certainly_live(offset), "certain").otherwise("uncertain")))


def state_at(lake: Lake, cluster: str, offset: int | None = None, time: int | None = None) -> LakeState:
    """The ACLs as of an offset or a time (default: the end of known history).

    Raises `QuestionError` for a negative offset or a time before the cluster's known history, and
    `UnknownClusterError` for a cluster the lake has not replayed: an empty answer would read as "no ACLs". An offset
    after the known history is answered, marked not covered (what happened after the last dump is unknown)."""
    at = moment(offset, time, lambda t: offset_at_time(lake, cluster, t), lambda: last_offset(lake, cluster),
                lambda t: before_history(lake, cluster, t), lambda: unknown_cluster(lake, cluster))
    state = states_at(lake, cluster, [at])[at]
    return state if time is None else replace(state, time=time)


def moment(offset: int | None, time: int | None, offset_at_time: Callable[[int], int | None],
           last_offset: Callable[[], int | None], before_history: Callable[[int], QuestionError],
           unknown_cluster: Callable[[], QuestionError]) -> int:
    """The offset a question asks about: the one given, the last one at or before its time, or the end of the known
    history; raises for a negative offset, a time before the history and a cluster without one. Every engine that
    answers lake questions (Spark here, `replay.spark.lake_without_spark`) resolves it here."""
    check_offset(offset)
    if time is not None:
        found = offset_at_time(time)
        if found is None:
            raise before_history(time)
        return found
    if offset is None:
        offset = last_offset()
        if offset is None:
            raise unknown_cluster()
    return offset


def states_at(lake: Lake, cluster: str, offsets: Iterable[int]) -> dict[int, LakeState]:
    """`state_at` at each of `offsets`, in one query (an audit of many moments, or a check of many offsets, pays
    one round trip and one Delta snapshot check, not one per offset), by offset. Raises as `state_at` does."""
    wanted = sorted(set(offsets))
    for offset in wanted:
        check_offset(offset)
    if not wanted:
        return {}
    rows: dict[int, list[Row]] = {}
    for row in _state_rows(lake, cluster, wanted):
        rows.setdefault(row["_at"], []).append(row)
    states = {at: _lake_state(cluster, at, rows[at]) for at in wanted}
    if any(not s.certain and not s.uncertain and not s.covered for s in states.values()):
        require_cluster(lake, cluster)  # nothing at all somewhere: is the cluster known?
    return states


def _lake_state(cluster: str, offset: int, rows: list[Row]) -> LakeState:
    """The state at `offset` from its rows of `_state_rows`."""
    acls = [r for r in rows if r["acl_id"] is not None]
    certain = {r["acl_id"]: AclBinding(*(r[c] for c in ACL_FIELDS)) for r in acls if r["certainty"] == "certain"}
    uncertain = {r["acl_id"]: AclBinding(*(r[c] for c in ACL_FIELDS)) for r in acls if r["certainty"] != "certain"}
    first = rows[0]
    return LakeState(cluster, offset, first["_time"], certain, uncertain, first["covered"], first["complete"],
                     unpublished_row(offset, first))


def _state_rows(lake: Lake, cluster: str, offsets: list[int]) -> list[Row]:
    """Per offset, the ACLs live or maybe live there, each with the offset's coverage, time and the changes it holds
    back (`rules.unpublished_sql`), in one query (each query is a round trip and a Delta snapshot check: three of them
    made a warm question three times slower). An offset without ACLs: one row whose `acl_id` is NULL."""
    certain, maybe = live_sql("m._at", "h")
    fields = ", ".join(f"h.{c}" for c in ACL_FIELDS)
    moments = ", ".join(f"{int(o)}L" for o in offsets)  # integers (checked), so literals: one query for any number
    text = f"""WITH m AS (SELECT :cluster AS cluster_id, _at FROM (SELECT explode(array({moments})) AS _at))
SELECT k._at, k.covered, k.complete, t._time, u.visible_at, u.first_record, u.changes, u.in_transaction, a.* FROM
  ({coverage_at_sql("m", "{cov}")}) k
  LEFT JOIN ({time_of_offset_sql("{times}", "m", "_time")}) t ON t._at = k._at
  LEFT JOIN ({unpublished_sql("{events}", "m", ":cluster", f"{int(offsets[0])}L")}) u ON u._at = k._at
  LEFT JOIN (SELECT m._at AS _for, h.acl_id, {fields}, CASE WHEN {certain} THEN 'certain' ELSE 'uncertain' END
               AS certainty
             FROM {{hist}} h JOIN m ON h.cluster_id = m.cluster_id AND {maybe}) a ON a._for = k._at"""
    return run_sql(lake.spark, text, {"cluster": cluster}, cov=lake.read("log_coverage"),
                   times=lake.read("offset_times"), hist=lake.read("acl_history"),
                   events=lake.read("acl_events")).collect()


def changes_between(lake: Lake, cluster: str, start: int | None = None, end: int | None = None,
                    start_time: int | None = None, end_time: int | None = None) -> DataFrame:
    """Visible changes with start < offset <= end (by offset, or by time through offset_times)."""
    if start_time is not None:
        start = offset_at_time(lake, cluster, start_time)
        start = -1 if start is None else start
    if end_time is not None:
        end = offset_at_time(lake, cluster, end_time)
        end = -1 if end is None else end
    ev = lake.read("acl_events").where(F.col("cluster_id") == cluster)
    if start is not None:
        ev = ev.where(F.col("offset") > start)
    if end is not None:
        ev = ev.where(F.col("offset") <= end)
    return ev.orderBy("offset", "seq")


def _returns_nulls(returns: str) -> str:
    """A select list of typed NULLs for a `name TYPE, ...` list (the guard's row shape)."""
    cols = [c.strip().split(" ", 1) for c in returns.split(",")]
    return ", ".join(f"CAST(NULL AS {t}) AS {n}" for n, t in cols)


_UNKNOWN_NAMES = ("CASE WHEN size(k._names) = 0 THEN 'it holds no replayed cluster yet' ELSE concat('it holds ', "
                  "array_join(transform(slice(array_sort(k._names), 1, 20), x -> concat('\\'', x, '\\'')), ', ')) END")
UNKNOWN_CLUSTER_CHECK = ("NOT array_contains(k._names, cluster)", "concat('cluster \\'', cluster, '\\' has no replayed history in the lake (', "
                         f"{_UNKNOWN_NAMES}, '); ingest its dumps first: kraft-replay ingest DUMP --lake ... --lake-cluster NAME')")


def guarded_sql(body: str, returns: str, names: str, checks: list[tuple[str, str]], also: str = "") -> str:
    """`body` plus a branch with no rows that raises the first failed check (condition, message) as an error: a
    wrong question must not read as "no ACLs". The branch is its own side of a UNION ALL, so it runs whatever the
    body's tables hold; a final ORDER BY of `body` orders the union. Checks see `k._names` (`names`: the SQL array
    of the clusters with a replayed history, `Lake.replayed_clusters_sql`), the function's parameters and `also`'s
    columns."""
    query, order = _final_order(body)
    cases = " ".join(f"WHEN {cond} THEN raise_error({msg})" for cond, msg in checks)
    guard = (f"SELECT {_returns_nulls(returns)} FROM (SELECT {names} AS _names) k"
             f"{also} WHERE CASE {cases} ELSE false END")
    return f"SELECT * FROM ({query}) UNION ALL {guard}{order}"


def _final_order(body: str) -> tuple[str, str]:
    """(`body` without its final top-level ORDER BY, that clause with a leading newline, or '')."""
    i = body.rfind("ORDER BY")
    head = body[:i]
    if i < 0 or head.count("(") != head.count(")"):
        return body, ""
    return head.rstrip(), "\n" + body[i:]


def negative_offset_check(at: str) -> tuple[str, str]:
    return (f"{at} < 0", f"concat('offset ', {at}, ' is negative: offsets of __cluster_metadata start at 0')")


def before_history_check(at: str, ts: str) -> tuple[str, str]:
    return (f"{at} IS NULL", f"concat('no record of cluster \\'', cluster, '\\' is at or before ', "
            f"CAST(CAST({ts} AS TIMESTAMP) AS STRING), ': what was live before its known history is unknown')")


def state_functions(table_ref: Callable[[str], str], names: str | None = None) -> list[SqlFunction]:
    """The as-of functions as SQL definitions over the tables `table_ref` names (see `register_sql_functions`).

    Each raises an error instead of answering with no rows when the question is wrong: a negative offset, a time
    before the cluster's known history, a cluster the lake has not replayed (not among `names`,
    `Lake.replayed_clusters_sql`; by default the clusters `log_coverage` holds)."""
    hist, times, events, cov = (table_ref(n) for n in ("acl_history", "offset_times", "acl_events", "log_coverage"))
    names = names or covered_clusters_sql(cov)
    cols = ", ".join(f"{c} STRING" for c in ACL_FIELDS)
    sel = ", ".join(f"h.{c}" for c in ACL_FIELDS)
    live, maybe = live_sql("{at}", "h")
    body = (f"SELECT h.acl_id, {sel}, CASE WHEN {live} THEN 'certain' ELSE 'uncertain' END AS certainty, "
            f"h.valid_from_offset, h.valid_to_offset FROM {hist} h WHERE h.cluster_id = cluster AND "
            f"{maybe}")
    returns = f"acl_id STRING, {cols}, certainty STRING, valid_from_offset BIGINT, valid_to_offset BIGINT"
    # the offset for a time comes from a CTE: Spark 4.2 cannot resolve function parameters in a scalar subquery
    ts_ms = "CAST(unix_millis(CAST(ts AS TIMESTAMP)) AS BIGINT)"
    at_time = f"WITH a AS ({offset_at_time_sql(times, 'cluster', ts_ms, 'at')}) "
    at_time_body = at_time + body.format(at="a.at").replace(f"FROM {hist} h WHERE", f"FROM {hist} h, a WHERE")
    events_returns = (f"offset BIGINT, offset_min BIGINT, exact BOOLEAN, time BIGINT, acl_id STRING, change STRING, "
                      f"cause STRING, {cols}")
    ev_cols = ", ".join(f"e.{c}" for c in ACL_FIELDS)
    events_body = (f"SELECT e.offset, e.offset_min, e.exact, e.time, e.acl_id, e.change, e.cause, {ev_cols} "
                   f"FROM {events} e WHERE e.cluster_id = cluster AND e.offset > from_offset AND e.offset <= to_offset")
    coverage_body = (
        "WITH v AS ({coverage}), "
        # counts filter in WHERE: Spark rejects aggregates whose argument mixes parameters and columns
        "s AS (SELECT count(*) AS certain FROM {hist} h{also} WHERE h.cluster_id = cluster AND {live}), "
        "u AS (SELECT count(*) AS uncertain FROM {hist} h{also} WHERE h.cluster_id = cluster "
        "AND ({maybe}) AND NOT ({live})), "
        "p AS ({unpublished}) "
        "SELECT {at} AS as_of_offset, v.covered, v.complete, {exact} AS exact, "
        "s.certain AS certain_acls, u.uncertain AS uncertain_acls, "
        "coalesce(p.first_record - 1, {at}) AS state_as_of_offset, {note} AS note "
        "FROM v, s, u{also} LEFT JOIN p ON true"
    )
    coverage_returns = ("as_of_offset BIGINT, covered BOOLEAN, complete BOOLEAN, exact BOOLEAN, certain_acls BIGINT, "
                        "uncertain_acls BIGINT, state_as_of_offset BIGINT, note STRING")

    def coverage_sql(at: str, also: str = "") -> str:
        """acl_coverage_at's body at the offset expression `at` (`also`: `, a` when `at` comes from the CTE `a`)."""
        ats = f"(SELECT cluster AS cluster_id, {at} AS _at{' FROM a' if also else ''})"
        return coverage_body.format(coverage=coverage_at_sql(ats, cov), hist=hist, at=at, also=also,
                                    live=live.format(at=at), maybe=maybe.format(at=at),
                                    exact=exact_sql("v.covered", "v.complete", "u.uncertain"),
                                    unpublished=unpublished_sql(events, ats, "cluster", at, also),
                                    note=unpublished_note_sql(at, "p"))

    # a time before the cluster's known history has no offset
    time_offset = f", ({offset_at_time_sql(times, 'cluster', ts_ms, '_at')}) ta"
    time_checks = [UNKNOWN_CLUSTER_CHECK, before_history_check("ta._at", "ts")]
    cov_at_time = at_time.rstrip() + ", " + coverage_sql("a.at", ", a").replace("WITH v AS", "v AS", 1)
    return [
        SqlFunction("acl_state_at", "cluster STRING, at_offset BIGINT", returns,
                    "The ACLs live in a cluster as of a log offset of __cluster_metadata: certainty is certain, or "
                    "uncertain where a hole in the dumps hides when an ACL began or ended.",
                    guarded_sql(body.format(at="at_offset"), returns, names, [negative_offset_check("at_offset"), UNKNOWN_CLUSTER_CHECK])),
        SqlFunction("acl_state_at_time", "cluster STRING, ts TIMESTAMP", returns,
                    "The ACLs live in a cluster as of a time: the last offset whose append time is at or before it.",
                    guarded_sql(at_time_body, returns, names, time_checks, time_offset)),
        SqlFunction("acl_changes_between", "cluster STRING, from_offset BIGINT, to_offset BIGINT", events_returns,
                    "The visible ACL changes of a cluster at offsets from_offset < offset <= to_offset, in order.",
                    guarded_sql(events_body, events_returns, names, [UNKNOWN_CLUSTER_CHECK])),
        SqlFunction("acl_coverage_at", "cluster STRING, at_offset BIGINT", coverage_returns,
                    "How far acl_state_at can be trusted at an offset: covered by a dump or snapshot, complete (no ACL "
                    "nobody recorded could be live), exact, and the numbers of certain and uncertain ACLs.",
                    guarded_sql(coverage_sql("at_offset"), coverage_returns, names, [negative_offset_check("at_offset"), UNKNOWN_CLUSTER_CHECK])),
        SqlFunction("acl_coverage_at_time", "cluster STRING, ts TIMESTAMP", coverage_returns,
                    "acl_coverage_at for the offset of a time (the last offset whose append time is at or before it).",
                    guarded_sql(cov_at_time, coverage_returns, names, time_checks, time_offset)),
    ]


def register_sql_functions(lake: Lake, only: Collection[str] | None = None) -> list[str]:
    """`acl_state_at(cluster, offset)`, `acl_state_at_time(cluster, ts)`, `acl_changes_between(cluster, from, to)`,
    and `acl_coverage_at(cluster, offset)` / `acl_coverage_at_time(cluster, ts)`, which say how far the answer at
    that moment can be trusted (one row: covered, complete, exact, and the numbers of certain and uncertain ACLs;
    an empty `acl_state_at` inside a hole is "unknown", not "no ACLs").

    Temporary SQL table functions over this lake's tables, for `spark.sql` and notebooks in this session;
    `kraft-replay install-sql` installs the same definitions (`state_functions`) as persistent ones. With `only`,
    just the functions it names.
    """
    return create_temporary(lake.spark, state_functions(lake.source, lake.replayed_clusters_sql()), only)
