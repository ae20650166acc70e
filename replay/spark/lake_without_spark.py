"""`kraft-replay acls --lake` (and `changes`, `history`) answered from a directory lake's Delta tables without
starting Spark.

A Spark session takes 15-35 s to start for one question, while the rows the question needs are a cluster's ACL
lifetimes, its coverage and its time index. delta-rs (the `deltalake` package) reads them from the same Delta tables
in well under a second, and the Python engine's rules answer (`replay.kafka.replayer.ReplayResult.state_at`, what
`acls PATH` answers with; `queries.moment` picks the offset for both engines). Readers see what Spark's readers see:
per cluster the rows its chain of visible replays shows (`replay.spark.visibility`), read again if a replay switched
while the tables were being read. Catalog lakes, and tables delta-rs cannot read, are asked through Spark.

A `LakeFiles` opened with `keep=True` (the Python API's, `replay.spark.api`) keeps each cluster's whole visible
history once read, as Arrow tables, and answers later questions from it while no table has a new commit: a warm
question filters those tables to the rows that can matter at its moment and hands them to the Python engine (tens of
milliseconds at 10M records, where a Spark query takes most of a second).
"""

from __future__ import annotations

import os
from array import array
from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from replay.kafka.acl import AclBinding
from replay.kafka.model import QuestionError, check_offset
from replay.kafka.replayer import (
    AclEvent,
    AclLifetime,
    Cause,
    Change,
    CoverageKind,
    CoverageRange,
    OffsetTimes,
    ReplayResult,
)
from replay.spark.queries import LakeState, before_history_error, moment, unknown_cluster_error
from replay.spark.rules import INCOMPLETE
from replay.spark.tables import (
    ACL_FIELDS,
    REPLAY_ID,
    REPLAY_STATE,
    VISIBLE_SCHEMAS,
    has_commit,
    is_uri,
    newest_commit,
)
from replay.spark.visibility import ROW_KEYS, Chain, chain_of, newest

Visible = dict[str, Chain] | None  # each cluster's chain; None: a lake written before replays were tagged
_TABLES = ("acl_history", "acl_events", "log_coverage", "offset_times")
_ATTEMPTS = 5  # reads of a cluster's rows while replays keep switching it, before asking Spark instead


_T = TypeVar("_T")


def _shown_by(name: str, chain: Chain) -> Any:
    """The pyarrow filter of the rows of table `name` that a cluster's chain shows (`replay.spark.visibility`): a
    replay's rows whose key lies in its range (no key: after every offset); an empty chain: the untagged rows."""
    import pyarrow.compute as pc

    if not chain:
        return pc.field(REPLAY_ID).is_null()
    key = ROW_KEYS[name]
    shown = None
    for rid, after, upto in chain:
        one = pc.field(REPLAY_ID) == rid
        if upto is not None:
            if key is None:
                continue  # rows without a key lie past every end: only the newest replay's are seen
            one = one & (pc.field(key) <= upto)
        if key is not None and after is not None:
            one = one & (pc.field(key).is_null() | (pc.field(key) > after))
        shown = one if shown is None else shown | one
    return shown if shown is not None else pc.scalar(False)


def _columns(table: str) -> list[str]:
    """A replay table's columns as readers see them (`Lake.source`: without the replay tag)."""
    return VISIBLE_SCHEMAS[table].fieldNames()


class Unreadable(Exception):
    """delta-rs cannot answer for this lake (the message says why): the question goes to Spark."""


@dataclass(frozen=True)
class _Cluster:
    """What the moment of a question needs of one cluster's visible rows."""

    coverage: list[dict[str, Any]]
    times: OffsetTimes
    first_time: tuple[int, int] | None  # (time, offset) of the earliest index entry


@dataclass(frozen=True)
class _Held:
    """A cluster's visible history as read at `commits` (`LakeFiles._commits`), kept as Arrow tables: each question
    makes Python objects of the rows that can matter at its moment only (`_near`, `_holding_back`). Objects of every
    row of the benchmark's 10M-record history held 1.6 GiB and a question took 350-370 ms, going through them all;
    kept as Arrow, 0.7 GiB and 50-80 ms (2026-12-04)."""

    commits: tuple[str | None, ...]
    visible: Visible
    rows: _Cluster
    lifetimes: Any  # pyarrow.Table of `_LIFETIME_COLUMNS`
    events: Any  # pyarrow.Table of `_EVENT_COLUMNS`, of logged records (`_later(None)`)

    def result_at(self, at: int) -> ReplayResult:
        return _replay_result(self.rows, _lifetimes_of(self.lifetimes.filter(_near(at))),
                              _events_of(_holding_back(self.events, at)))


class LakeFiles:
    """A directory lake read with delta-rs, for the questions asked of one cluster (`acls`, `changes`, `history`);
    with `keep`, each cluster's history is kept between questions while the tables have no new commit."""

    def __init__(self, location: str, keep: bool = False) -> None:
        self.location = location
        self.keep = keep
        self._held: dict[str, _Held] = {}

    @classmethod
    def open(cls, location: str, keep: bool = False) -> LakeFiles:
        """The lake at a local directory; `Unreadable` when delta-rs is not installed, the location is not a local
        directory, or it holds no replayed tables (an old lake, a catalog)."""
        if location.startswith("file:"):
            location = location[len("file:"):]
            location = "/" + location.lstrip("/") if location.startswith("//") else location
        elif is_uri(location):
            raise Unreadable(f"{location} is not a local directory")
        try:
            import deltalake  # noqa: F401  (an optional dependency of the spark extra)
        except ImportError:
            raise Unreadable("the deltalake package is not installed (pip install 'kraft-acl-replay[spark]')") from None
        lake = cls(os.path.abspath(os.path.expanduser(location)), keep)
        missing = [t for t in (*_TABLES, REPLAY_STATE) if not has_commit(os.path.join(lake.location, t, "_delta_log"))]
        if missing:
            raise Unreadable(f"the lake at {lake.location} has no table {', '.join(missing)} yet")
        return lake

    # ---- the questions --------------------------------------------------------------------------------------
    def state_at(self, cluster: str, offset: int | None = None, time: int | None = None) -> LakeState:
        """`replay.spark.queries.state_at`, answered from the files (the same errors for the same questions)."""
        return self._consistent(cluster, lambda: self._answer(cluster, offset, time))

    def states_at(self, cluster: str, offsets: list[int]) -> dict[int, LakeState]:
        """`state_at` at each of `offsets`, the cluster's rows read once (`queries.states_at`)."""
        for at in offsets:
            check_offset(at)

        def ask() -> dict[int, LakeState]:
            held = self._whole(cluster)
            return {at: self._state(cluster, held.visible, held.rows, held.result_at(at), at) for at in offsets}

        return self._consistent(cluster, ask)

    def history(self, cluster: str, principal: str | None = None, resource: str | None = None) -> list[dict[str, Any]]:
        """The cluster's ACL lifetimes (`queries.history`), of one principal or resource name when given, as
        `acl_history`'s rows in the order `kraft-replay history` lists them (by valid_from_offset, then id)."""
        import pyarrow.compute as pc

        where = None
        for column, value in (("principal", principal), ("resource_name", resource)):
            if value is not None:
                match = pc.field(column) == value
                where = match if where is None else where & match

        def ask() -> list[dict[str, Any]]:
            rows = self._read("acl_history", cluster, _columns("acl_history"), self._visible_replays(), where)
            return list(rows.sort_by([("valid_from_offset", "ascending"), ("acl_id", "ascending")]).to_pylist())

        return self._consistent(cluster, ask)

    def changes_between(self, cluster: str, start: int | None = None, end: int | None = None,
                        start_time: int | None = None, end_time: int | None = None) -> list[dict[str, Any]]:
        """The visible changes with start < offset <= end, by offset or by time (`queries.changes_between`), as
        `acl_events`' rows in the order they apply."""
        import pyarrow.compute as pc

        def ask() -> list[dict[str, Any]]:
            visible = self._visible_replays()
            lower, upper = start, end
            if start_time is not None or end_time is not None:
                times = self._cluster(cluster, visible).times
                if start_time is not None:
                    found = times.offset_at_time(start_time)
                    lower = -1 if found is None else found
                if end_time is not None:
                    found = times.offset_at_time(end_time)
                    upper = -1 if found is None else found
            where = None
            if lower is not None:
                where = pc.field("offset") > lower
            if upper is not None:
                below = pc.field("offset") <= upper
                where = below if where is None else where & below
            rows = self._read("acl_events", cluster, _columns("acl_events"), visible, where)
            return list(rows.sort_by([("offset", "ascending"), ("seq", "ascending")]).to_pylist())

        return self._consistent(cluster, ask)

    def _consistent(self, cluster: str, ask: Callable[[], _T]) -> _T:
        """`ask()` again until no replay switched while it read (`replay_state` kept its newest commit throughout)."""
        state_log = os.path.join(self.location, REPLAY_STATE, "_delta_log")
        for _ in range(_ATTEMPTS):
            before = newest_commit(state_log)
            answer = ask()
            if newest_commit(state_log) == before:
                return answer
        raise Unreadable(f"replays of {cluster!r} kept switching while its rows were read")

    def _commits(self) -> tuple[str | None, ...]:
        """The newest commit of every table a question reads: while none changes, neither do its answers."""
        return tuple(newest_commit(os.path.join(self.location, t, "_delta_log")) for t in (REPLAY_STATE, *_TABLES))

    def _whole(self, cluster: str) -> _Held:
        """The cluster's whole visible history: kept from an earlier question (`keep`) while no table changed."""
        commits = self._commits()
        held = self._held.get(cluster)
        if held is None or held.commits != commits:
            visible = self._visible_replays()
            held = _Held(commits, visible, self._cluster(cluster, visible),
                         self._read("acl_history", cluster, _LIFETIME_COLUMNS, visible),
                         self._read("acl_events", cluster, _EVENT_COLUMNS, visible, _later(None)))
            if self.keep:
                self._held[cluster] = held
        return held

    def _answer(self, cluster: str, offset: int | None, time: int | None) -> LakeState:
        held: _Held | None = None
        if self.keep:
            held = self._whole(cluster)
            visible, rows = held.visible, held.rows
        else:
            visible = self._visible_replays()
            rows = self._cluster(cluster, visible)

        def before_history(time_ms: int) -> QuestionError:
            if rows.first_time is None:
                return self._unknown(cluster, visible)
            return before_history_error(cluster, time_ms, *rows.first_time)

        ends = [r["end_offset"] for r in rows.coverage if r["kind"] != INCOMPLETE]  # `rules.known_end_sql`
        at = moment(offset, time, rows.times.offset_at_time, lambda: max(ends, default=None), before_history,
                    lambda: self._unknown(cluster, visible))
        if held is not None:
            result = held.result_at(at)
        else:  # one question: only what can matter at `at` is read
            result = _replay_result(rows, self._lifetimes(cluster, visible, at), self._events(cluster, visible, at))
        state = self._state(cluster, visible, rows, result, at)
        return state if time is None else replace(state, time=time)

    def _state(self, cluster: str, visible: Visible, rows: _Cluster, result: ReplayResult,
               at: int) -> LakeState:
        state = result.state_at(at)
        if not state.certain and not state.uncertain and not state.covered and not rows.coverage:
            raise self._unknown(cluster, visible)  # as `queries.states_at`: nothing at all, and no such cluster
        return LakeState(cluster, at, result.time_of(at), state.certain, state.uncertain, state.covered,
                         state.complete, state.unpublished)

    def _unknown(self, cluster: str, visible: Visible) -> QuestionError:
        """`queries.unknown_cluster`: the error naming the clusters whose visible rows `log_coverage` holds."""
        dataset = self._dataset("log_coverage")
        tagged = visible is not None and REPLAY_ID in dataset.schema.names
        table = dataset.to_table(columns=["cluster_id", REPLAY_ID] if tagged else ["cluster_id"])
        names = table.column("cluster_id").to_pylist()
        tags = table.column(REPLAY_ID).to_pylist() if tagged else [None] * len(names)
        shown = {c: newest(chain) for c, chain in (visible or {}).items()}  # coverage: the newest replay's
        clusters = sorted({c for c, r in zip(names, tags, strict=True) if not tagged or r == shown.get(c)})
        return unknown_cluster_error(self.location, cluster, clusters)

    # ---- the rows --------------------------------------------------------------------------------------------
    def _cluster(self, cluster: str, visible: Visible) -> _Cluster:
        coverage = self._read("log_coverage", cluster, ["start_offset", "end_offset", "kind", "source"],
                              visible).to_pylist()
        times = self._read("offset_times", cluster, ["offset", "time"], visible).sort_by("offset")
        offsets = array("q", times.column("offset").to_numpy().tobytes())
        stamps = array("q", times.column("time").to_numpy().tobytes())
        first = None
        if len(stamps):
            earliest = min(stamps)
            first = (earliest, offsets[stamps.index(earliest)])
        return _Cluster(coverage, OffsetTimes.of_columns(offsets, stamps), first)

    def _lifetimes(self, cluster: str, visible: Visible, at: int) -> list[AclLifetime]:
        """The cluster's lifetimes that can be live at `at` (`_near`)."""
        return _lifetimes_of(self._read("acl_history", cluster, _LIFETIME_COLUMNS, visible, _near(at)))

    def _events(self, cluster: str, visible: Visible, at: int) -> list[AclEvent]:
        """The events that hold the moment `at` back (`_holding_back`)."""
        return _events_of(_holding_back(self._read("acl_events", cluster, _EVENT_COLUMNS, visible, _later(at)), at))

    def _visible_replays(self) -> Visible:
        """Per cluster, the chain of replays whose rows readers see; None for a lake written before replays were
        tagged."""
        table = self._dataset(REPLAY_STATE)
        if "visible_replay_id" not in table.schema.names:
            return None
        wanted = [c for c in ("cluster_id", "visible_replay_id", "visible_ranges") if c in table.schema.names]
        return {r["cluster_id"]: chain_of(r) for r in table.to_table(columns=wanted).to_pylist()}

    def _read(self, name: str, cluster: str, columns: list[str], visible: Visible,
              where: Any = None) -> Any:
        """A replay table's rows of `cluster` that its chain of visible replays shows, as `Lake.source` gives them
        (a cluster without one: untagged rows only; an untagged lake: all)."""
        import pyarrow.compute as pc

        dataset = self._dataset(name)
        mine = pc.field("cluster_id") == cluster
        if visible is not None and REPLAY_ID in dataset.schema.names:
            mine = mine & _shown_by(name, visible.get(cluster, ()))
        return dataset.to_table(columns=columns, filter=mine if where is None else where & mine)

    def _dataset(self, name: str) -> Any:
        from deltalake import DeltaTable
        from deltalake.exceptions import DeltaError

        try:
            return DeltaTable(os.path.join(self.location, name)).to_pyarrow_dataset()
        except DeltaError as e:
            raise Unreadable(f"delta-rs cannot read {os.path.join(self.location, name)}: {e}") from e


# ---- rows to the Python engine's objects -----------------------------------------------------------------------
_LIFETIME_COLUMNS = ["acl_id", *ACL_FIELDS, "valid_from_offset", "valid_from_min_offset", "valid_from_time",
                     "began_by", "valid_to_offset", "valid_to_min_offset", "valid_to_time", "ended_by"]
_EVENT_COLUMNS = ["offset", "time", "acl_id", "change", "cause", *ACL_FIELDS, "record_offset", "offset_min", "exact",
                  "seq"]


def _near(at: int) -> Any:
    """The lifetimes that can be live at `at` (a superset the rules then decide: begun by then, not certainly gone
    by then)."""
    import pyarrow.compute as pc

    return (pc.field("valid_from_min_offset") <= at) & (
        pc.field("valid_to_offset").is_null() | (pc.field("valid_to_offset") > at))


def _later(at: int | None) -> Any:
    """The events that can hold the moment `at` back (`as_of.unpublished_at`): of logged records, visible only after
    it (with None: of logged records)."""
    import pyarrow.compute as pc

    logged = pc.field("record_offset").is_valid()
    return logged if at is None else logged & (pc.field("offset") > at)


def _holding_back(events: Any, at: int) -> Any:
    """Of `events` (of logged records), those `as_of.unpublished_at` answers from at `at`: the unit published first
    after `at` that has a record at or before it, whole; none when every change logged by `at` was visible."""
    import pyarrow.compute as pc

    pending = events.filter((pc.field("record_offset") <= at) & (pc.field("offset") > at))
    if pending.num_rows == 0:
        return pending
    return events.filter(pc.field("offset") == pc.min(pending.column("offset")))


def _lifetimes_of(table: Any) -> list[AclLifetime]:
    return [AclLifetime(r["acl_id"], AclBinding(*(r[c] for c in ACL_FIELDS)), r["valid_from_offset"],
                        r["valid_from_min_offset"], r["valid_from_time"], Cause(r["began_by"]), r["valid_to_offset"],
                        r["valid_to_min_offset"], r["valid_to_time"],
                        Cause(r["ended_by"]) if r["ended_by"] is not None else None)
            for r in table.to_pylist()]


def _events_of(table: Any) -> list[AclEvent]:
    return [AclEvent(r["offset"], r["time"], r["acl_id"], Change(r["change"]), Cause(r["cause"]),
                     AclBinding(*(r[c] for c in ACL_FIELDS)), r["record_offset"], r["offset_min"], r["exact"], r["seq"])
            for r in table.to_pylist()]


def _replay_result(rows: _Cluster, lifetimes: list[AclLifetime], events: list[AclEvent]) -> ReplayResult:
    """The cluster's rows as the Python engine holds a replay."""
    coverage = [CoverageRange(r["start_offset"], r["end_offset"], CoverageKind(r["kind"]), r["source"] or "")
                for r in rows.coverage if r["kind"] != INCOMPLETE]
    incomplete = [(r["start_offset"], r["end_offset"]) for r in rows.coverage if r["kind"] == INCOMPLETE]
    return ReplayResult(lifetimes, events, coverage, [], rows.times, incomplete=incomplete)
