"""The SQL text of the lake's rules, each written once (issue 14 item 1): when an ACL lifetime is live at an offset,
how far the history covers an offset, where the known history ends, and which offset a time means and which time an
offset has (DESIGN.md §3 rule 8). The decision itself is `authorize_decide.decide_sql`.

Each function returns SQL text over relations and expressions its caller names, so the Python API, the session's
temporary SQL functions, the persistent ones `kraft-replay install-sql` creates, the views, the audits and batch
authorization all embed the same text: no rule can answer one way in Python and another in SQL. From Python the
text runs over the lake's DataFrames (`{name}` in the text, PySpark's formatter) with the question's values as
parameter markers (`:name`, `run_sql(spark, text, {"name": value}, name=frame)`), never pasted in as literals; SQL
functions put their own parameters where the markers go (DDL cannot hold markers).

Texts may pass through PySpark's formatter, so a literal brace in them is doubled (`sqlddl.plain` undoes that).
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from pyspark.sql import DataFrame, SparkSession

from replay.kafka.replayer import CoverageKind
from replay.spark.session import is_connect
from replay.spark.sqlddl import plain
from replay.spark.tables import sql_literal

# log_coverage kinds: the replayer's three, and the Spark replay's `incomplete` (ACLs no dump recorded may have been
# live there)
LOG, SNAPSHOT, MISSING = CoverageKind.LOG.value, CoverageKind.SNAPSHOT.value, CoverageKind.MISSING.value
INCOMPLETE = "incomplete"
# the one-word coverage of an offset that the audits and batch authorization report
COV_COMPLETE, COV_INCOMPLETE, COV_NOT_COVERED = "complete", "incomplete", "not_covered"


# ---- running the text from Python ----------------------------------------------------------------------------

# Since Spark 4.1 the parser binds parameter markers, and Delta's SQL parser, which a Delta session puts in front of
# Spark's, drops the values (delta-io/delta#7640: UNBOUND_SQL_PARAMETER for any `spark.sql(text, args)`). Spark's
# older binding, in the analyzer, still works under it; it binds markers where a constant may stand, which is the
# only place these texts put them.
BIND_IN_ANALYZER = "spark.sql.legacy.parameterSubstitution.constantsOnly"


@contextmanager
def _markers_bound(spark: SparkSession) -> Iterator[None]:
    """Within: parameter markers bind in this session even under Delta's parser (the setting is put back after)."""
    try:
        before = spark.conf.get(BIND_IN_ANALYZER, None)
        spark.conf.set(BIND_IN_ANALYZER, "true")
    except Exception:  # a platform that keeps the setting to itself binds markers its own way
        yield
        return
    try:
        yield
    finally:
        if before is None:
            spark.conf.unset(BIND_IN_ANALYZER)
        else:
            spark.conf.set(BIND_IN_ANALYZER, before)


def run_sql(spark: SparkSession, text: str, args: Mapping[str, Any] | None = None, **frames: DataFrame) -> DataFrame:
    """`spark.sql` over the DataFrames the text names as `{name}`, with its markers `:name` bound to `args`."""
    if not frames:
        text = plain(text)
    if not args:
        return spark.sql(text, None, **frames)
    if frames and is_connect(spark):  # Spark Connect drops the values of a query that also names DataFrames
        return spark.sql(_inlined(text, args), None, **frames)
    with _markers_bound(spark):
        return spark.sql(text, dict(args), **frames)


def _inlined(text: str, args: Mapping[str, Any]) -> str:
    """`text` with each marker `:name` replaced by its value as a literal (`sql_literal`)."""
    return re.sub(r"(?<![:\w]):([A-Za-z_]\w*)\b",
                  lambda m: _formatted(sql_literal(args[m.group(1)])) if m.group(1) in args else m.group(0),
                  text)


def _formatted(literal: str) -> str:
    """A literal in a text that PySpark's formatter reads (it names DataFrames as `{name}`): braces doubled."""
    return literal.replace("{", "{{").replace("}", "}}")


def markers(values: Mapping[str, Any]) -> dict[str, str]:
    """The marker text for each value of `values` (bound by `run_sql(..., args=values)`), typed as a literal would
    be: an integer as BIGINT (Python ints bind as INT), a list as ARRAY<STRING> (an empty one has no element type)."""
    def marker(name: str, value: Any) -> str:
        if isinstance(value, int) and not isinstance(value, bool):
            return f"CAST(:{name} AS BIGINT)"
        if isinstance(value, (list, tuple)):
            return f"CAST(:{name} AS ARRAY<STRING>)"
        return f":{name}"

    return {name: marker(name, value) for name, value in values.items()}


# ---- liveness ------------------------------------------------------------------------------------------------

def live_sql(at: str, h: str = "") -> tuple[str, str]:
    """(certainly live, certainly or possibly live) at the offset expression `at`, over acl_history's columns (with
    the table alias `h`): certainly on [valid_from_offset, valid_to_min_offset), possibly where `at` falls in the
    uncertain part of either bound (DESIGN.md §3 rule 5; an open end has no upper bound)."""
    p = f"{h}." if h else ""
    certain = (f"({p}valid_from_offset <= {at} AND ({p}valid_to_min_offset IS NULL "
               f"OR {at} < {p}valid_to_min_offset))")
    possible = (f"({p}valid_from_min_offset <= {at} AND ({p}valid_to_min_offset IS NULL OR {p}valid_to_offset IS NULL "
                f"OR {at} < {p}valid_to_offset))")
    return certain, f"({certain} OR {possible})"


# ---- what a node publishes at once (DESIGN.md §2) ----------------------------------------------------------------

def unpublished_sql(events: str, ats: str, cluster: str, after: str | None = None, also: str = "") -> str:
    """Per _at of the relation `ats` (columns cluster_id and _at, each moment once, all of the cluster `cluster`; a
    DISTINCT here cost a warm question a fifth of its time), at most one row: the ACL changes logged at or before the offset
    `_at` that become visible together after it (it lies inside their batch or open transaction), as visible_at,
    first_record, changes (all that become visible with them) and in_transaction; no row when every change logged by
    then was visible (`replay.kafka.as_of.unpublished_at`). `after`: an offset expression below every `_at` (the
    events visible at or before it are not read); `also`: more FROM items `after` needs (`, a`)."""
    # The changes visible at one offset form a unit (a batch, or a transaction with its End); `_at` lies inside the
    # unit when its first record is at or before `_at` and it becomes visible after. One scan of the events grouped
    # per unit, without the moment (Spark rejects an aggregate whose argument mixes a parameter with a column in SQL
    # functions), then each moment's first unit holding it.
    since = f" AND e.offset > {after}" if after is not None else ""
    return f"""SELECT _q.cluster_id, _q._at, _q.p.o AS visible_at, _q.p.r AS first_record, _q.p.n AS changes,
  _q.p.tx AS in_transaction
FROM (SELECT _m.cluster_id, _m._at, min_by(named_struct('o', _g.o, 'r', _g.r, 'n', _g.n, 'tx', _g.tx), _g.o) AS p
      FROM {ats} _m
      JOIN (SELECT e.cluster_id, e.offset AS o, min(e.record_offset) AS r, count(*) AS n,
                   max(e.cause = 'TRANSACTION') AS tx
            FROM {events} e{also} WHERE e.cluster_id = {cluster} AND e.record_offset IS NOT NULL{since}
            GROUP BY e.cluster_id, e.offset) _g
        ON _g.cluster_id = _m.cluster_id AND _g.r <= _m._at AND _m._at < _g.o
      GROUP BY _m.cluster_id, _m._at) _q"""


def unpublished_note_sql(at: str, p: str) -> str:
    """`Unpublished.sentence` over a row `p` of `unpublished_sql` (NULL when there is none)."""
    unit = f"CASE WHEN {p}.in_transaction THEN 'a metadata transaction' ELSE 'an atomic batch' END"
    return (f"CASE WHEN {p}.visible_at IS NOT NULL THEN concat('offset ', {at}, ' lies inside ', {unit}, ': its ', "
            f"{p}.changes, ' ACL change(s) logged from offset ', {p}.first_record, ' become visible together at ', "
            f"{p}.visible_at, '; the answer is the state a node published, as of ', {p}.first_record - 1) END")


# ---- coverage and exactness ------------------------------------------------------------------------------------

def coverage_at_sql(ats: str, coverage: str) -> str:
    """Per (cluster_id, _at) of the relation `ats`, over log_coverage: `covered` (a log or snapshot range holds the
    offset: the state there is known), `complete` (no incomplete range holds it: no ACL that nobody recorded can have
    been live) and `coverage`, the same in one word (complete, incomplete or not_covered). An answer at the offset
    is exact when it is covered, complete and no ACL is uncertain there (`exact_sql`)."""
    known = f"coalesce(max(c.kind IN ('{LOG}', '{SNAPSHOT}')), false)"
    unsure = f"coalesce(max(c.kind = '{INCOMPLETE}'), false)"
    return f"""SELECT /*+ BROADCAST(c) */ a.cluster_id, a._at, {known} AS covered, NOT {unsure} AS complete,
  CASE WHEN NOT {known} THEN '{COV_NOT_COVERED}' WHEN {unsure} THEN '{COV_INCOMPLETE}' ELSE '{COV_COMPLETE}' END
    AS coverage
FROM (SELECT DISTINCT cluster_id, _at FROM {ats}) a LEFT JOIN {coverage} c
  ON a.cluster_id = c.cluster_id AND c.start_offset <= a._at AND c.end_offset >= a._at
GROUP BY a.cluster_id, a._at"""


def exact_sql(covered: str, complete: str, uncertain_acls: str) -> str:
    """An as-of answer is exact when the offset is covered and complete and no ACL's liveness is uncertain there."""
    return f"({covered} AND {complete} AND {uncertain_acls} = 0)"


def known_end_sql(kind: str = "kind", end_offset: str = "end_offset") -> str:
    """The end of a cluster's known history, as an aggregate over its log_coverage rows: the last offset of a range
    that is not incomplete (NULL: none). What "now" means when a question names no moment."""
    return f"max(CASE WHEN {kind} != '{INCOMPLETE}' THEN {end_offset} END)"


# ---- time and offsets (DESIGN.md §3 rule 8) -------------------------------------------------------------------

def offset_at_time_sql(times: str, cluster: str, time_ms: str, name: str = "at") -> str:
    """One row, column `name`: the last offset whose time is at or before `time_ms` (epoch ms), over offset_times
    (NULL: the time is before the cluster's known history). `offsets_at_times_sql` is the same rule for many times."""
    return (f"SELECT max(t.offset) AS {name} FROM {times} t WHERE t.cluster_id = {cluster} "
            f"AND t.time <= {time_ms}")


def offsets_at_times_sql(probes: str, times: str, carry: tuple[str, ...] = ()) -> str:
    """`offset_at_time_sql` for every (cluster_id, _t) of the relation `probes` at once, as columns cluster_id, _t,
    _at: an as-of window over offset_times and the probes in time order (an index entry at the very time comes first,
    so it counts: at or before), not a range join, so a million requested times cost a sort, not a product.
    `carry`: more columns of `probes` to keep (given as `type name`, e.g. `BINARY event_key`)."""
    window = "PARTITION BY cluster_id ORDER BY _t, _tag ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW"
    names = [c.split()[-1] for c in carry]
    kept = "".join(f", {n}" for n in names)
    nulls = "".join(f", CAST(NULL AS {c.rsplit(' ', 1)[0]}) AS {n}" for c, n in zip(carry, names, strict=True))
    return f"""SELECT cluster_id, _t{kept}, _at FROM (
  SELECT cluster_id, _t{kept}, _tag, max(_o) OVER ({window}) AS _at FROM (
    SELECT cluster_id, `time` AS _t, `offset` AS _o, 0 AS _tag{nulls} FROM {times}
    UNION ALL SELECT cluster_id, _t, CAST(NULL AS BIGINT) AS _o, 1 AS _tag{kept} FROM {probes}))
WHERE _tag = 1"""


def time_of_offset_sql(times: str, ats: str, name: str = "t") -> str:
    """Per moment of the relation `ats` (cluster_id, _at) that has one, column `name` (then `_at`): the time of the
    state as of `_at`, the time of the last indexed offset at or before it (no row: none). A join, for a few moments;
    `times_of_offsets_sql` is the same rule for very many, as a window."""
    return (f"SELECT max_by(t.time, t.offset) AS {name}, m._at FROM {ats} m JOIN {times} t "
            f"ON t.cluster_id = m.cluster_id AND t.offset <= m._at GROUP BY m.cluster_id, m._at")


def times_of_offsets_sql(rel: str, offset_col: str, out_col: str, times: str, cluster: str) -> str:
    """`rel` plus `out_col`: `time_of_offset_sql` for the offset in `offset_col` of every row, as an as-of window
    (no range join)."""
    return f"""SELECT r.*, f._tt AS {out_col} FROM {rel} r LEFT JOIN (
  SELECT _o AS _k, _tt FROM (
    SELECT _o, _tag, last(_t, true) OVER (ORDER BY _o, _tag ROWS BETWEEN UNBOUNDED PRECEDING AND CURRENT ROW) AS _tt
    FROM (SELECT t.`offset` AS _o, t.`time` AS _t, 0 AS _tag FROM {times} t WHERE t.cluster_id = {cluster}
          UNION ALL SELECT DISTINCT {offset_col} AS _o, CAST(NULL AS BIGINT) AS _t, 1 AS _tag FROM {rel}
          WHERE {offset_col} IS NOT NULL)) WHERE _tag = 1) f
  ON r.{offset_col} <=> f._k"""
