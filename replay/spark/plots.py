"""Pictures of a cluster's ACL history: matplotlib figures drawn from small aggregates computed in Spark.

Nothing that grows with the log reaches the driver. Every figure is computed in two steps:

1. a Spark query reduces the lake tables to at most a few hundred rows (offsets or times bucketed into `points`
   buckets, changes counted per period, one principal's lifetimes capped at `limit`), and collects them;
2. matplotlib draws those rows on a plain `Figure` rendered by the Agg canvas (no pyplot, so no GUI backend and no
   global state; a notebook can `display(fig)` it, a script can save it).

The figures:

* `acl_count_figure(lake, cluster, by="offset" | "time")`: how many ACLs were live, as a step line over offsets or
  over time. Where history has holes (DESIGN.md §3.5) a band shows how many *may* have been live on top of the
  ones that certainly were, grey spans mark the offsets no dump holds, and hatched spans where the history is
  incomplete (ACLs that no dump recorded may have been live there).
* `changes_figure(lake, cluster, period="day" | "auto" | DAY_IF_LONG | ...)`: ACL creates (up) and removes (down)
  per period; changes whose exact offset is unknown (they happened somewhere inside a hole) are hatched.
  `changes_per_day_figure` counts per day when the history spans at least two days, else per the `auto` period,
  and says which in its title.
* `principal_timeline_figure(lake, cluster, principal)`: one horizontal bar per ACL lifetime that names the
  principal (and `User:*`), solid where it was certainly live and hatched where a bound is uncertain.

* `granted_used_figure(rows, cluster)`: per principal, the operation types its ALLOWs grant, those its logged
  requests used, and its ALLOWs that decided nothing (least privilege; rows from `unused_access`).

Each takes `path=` to save a PNG as well, and `mark=` to draw the audit moment as a dashed line. The `*_data`
functions return the collected aggregates (plain dataclasses), for tests and for other renderers.
"""

from __future__ import annotations

import math
import os
from dataclasses import dataclass, field
from datetime import datetime, timezone
from typing import Any

from matplotlib import dates as mdates
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Patch
from matplotlib.ticker import MaxNLocator
from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from replay.spark.tables import Lake

DEFAULT_POINTS = 300
DEFAULT_MAX_BARS = 60
DEFAULT_TIMELINE_LIMIT = 40

_CERTAIN = "#1f77b4"
_POSSIBLE = "#ff7f0e"
_GAP = "#9e9e9e"
_INCOMPLETE = "#e57373"
_ALLOW = "#2e7d32"
_DENY = "#c62828"

DAY_MS = 86_400_000
# `changes_data` period: per day when the cluster's history spans at least DAILY_MIN_SPAN_MS, else `auto`.
DAY_IF_LONG = "day_if_long"
DAILY_MIN_SPAN_MS = 2 * DAY_MS
# Periods `changes_data(period="auto")` chooses from, smallest first: (name, milliseconds).
PERIODS: list[tuple[str, int]] = [
    ("second", 1_000), ("10 seconds", 10_000), ("minute", 60_000), ("10 minutes", 600_000), ("hour", 3_600_000),
    ("6 hours", 21_600_000), ("day", 86_400_000), ("week", 604_800_000), ("30 days", 2_592_000_000),
]


# ---- helpers -----------------------------------------------------------------------------------------------------

def new_figure(width: float = 10.0, height: float = 4.8) -> Figure:
    """A matplotlib Figure on the Agg canvas (no pyplot, no GUI)."""
    fig = Figure(figsize=(width, height), layout="constrained")
    FigureCanvasAgg(fig)
    return fig


def save(fig: Figure, path: str, dpi: int = 110) -> str:
    """Write the figure as PNG (directories are created); return the path."""
    parent = os.path.dirname(os.path.abspath(path))
    os.makedirs(parent, exist_ok=True)
    fig.savefig(path, dpi=dpi, format="png")
    return path


def _utc(ms: float) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).replace(tzinfo=None)


def _cluster_rows(lake: Lake, table: str, cluster: str) -> DataFrame:
    return lake.read(table).where(F.col("cluster_id") == cluster)


def _with_time(points: DataFrame, times: DataFrame, offset_col: str, time_col: str, *, after: bool,
               cluster: str) -> DataFrame:
    """Attach to each row of `points` the time of the nearest `offset_times` entry: the first at or after its offset
    (`after=True`: when a change there became visible as of time) or the last strictly before it.

    One union and one window over the cluster's rows (an as-of join without a range join).
    """
    pts = (points.withColumn("_o", F.col(offset_col)).withColumn("_k", F.lit(0))
           .withColumn("_t", F.lit(None).cast("long")).withColumn("_c", F.lit(cluster)))
    ts = times.select(F.col("offset").alias("_o"), F.lit(1).alias("_k"), F.col("time").alias("_t"),
                      F.lit(cluster).alias("_c"))
    both = pts.unionByName(ts, allowMissingColumns=True)
    # the time before: the last one so far in offset order; the time after: the same in descending order (a frame
    # reaching unboundedFollowing would be recomputed for every row: quadratic in Spark)
    order = [F.col("_o").desc(), F.col("_k").desc()] if after else [F.col("_o"), F.col("_k")]
    w = Window.partitionBy("_c").orderBy(*order).rowsBetween(Window.unboundedPreceding, Window.currentRow)
    t = F.last("_t", ignorenulls=True).over(w)
    return both.withColumn(time_col, t).where(F.col("_k") == 0).drop("_o", "_k", "_t", "_c")


def _mark_line(ax: Any, mark: float | datetime | None, label: str) -> None:
    if mark is not None:
        ax.axvline(mark, color="black", linestyle="--", linewidth=1.2, label=label)


# ---- ACL count over offsets or time ------------------------------------------------------------------------------

@dataclass
class CountSeries:
    """Live-ACL counts per bucket. `x` is each bucket's start (offset, or epoch ms for `by="time"`)."""

    cluster: str
    by: str
    width: float
    x: list[float] = field(default_factory=list)
    certain: list[int] = field(default_factory=list)  # certainly live at the end of the bucket
    certain_min: list[int] = field(default_factory=list)  # lowest certain count inside the bucket
    certain_max: list[int] = field(default_factory=list)
    possible: list[int] = field(default_factory=list)  # certainly or possibly live at the end of the bucket
    uncertain_max: list[int] = field(default_factory=list)  # most ACLs of uncertain liveness at once in the bucket
    possible_max: list[int] = field(default_factory=list)  # highest certain-or-possible count in the bucket
    gaps: list[tuple[float, float, str]] = field(default_factory=list)  # (start, end, missing | incomplete)
    end: float = 0.0  # the end of the x range (last offset, or last time)

    @property
    def uncertain(self) -> bool:
        return any(u > 0 for u in self.uncertain_max)


def _step_points(lake: Lake, cluster: str) -> DataFrame:
    """The live counts right after each offset where one changes: (offset, certain, possible)."""
    h = _cluster_rows(lake, "acl_history", cluster)
    one, zero, minus = F.lit(1), F.lit(0), F.lit(-1)
    deltas = (
        h.select("cluster_id", F.col("valid_from_offset").alias("offset"), one.alias("dc"), zero.alias("dp"))
        .unionByName(h.where(F.col("valid_to_min_offset").isNotNull())
                     .select("cluster_id", F.col("valid_to_min_offset").alias("offset"), minus.alias("dc"),
                             zero.alias("dp")))
        .unionByName(h.select("cluster_id", F.col("valid_from_min_offset").alias("offset"), zero.alias("dc"),
                              one.alias("dp")))
        .unionByName(h.where(F.col("valid_to_min_offset").isNotNull() & F.col("valid_to_offset").isNotNull())
                     .select("cluster_id", F.col("valid_to_offset").alias("offset"), zero.alias("dc"),
                             minus.alias("dp")))
    )
    w = Window.partitionBy("cluster_id").orderBy("offset").rowsBetween(Window.unboundedPreceding, Window.currentRow)
    return (deltas.groupBy("cluster_id", "offset").agg(F.sum("dc").alias("dc"), F.sum("dp").alias("dp"))
            .select("offset", F.sum("dc").over(w).alias("certain"), F.sum("dp").over(w).alias("possible")))


def acl_count_data(lake: Lake, cluster: str, by: str = "offset", points: int = DEFAULT_POINTS) -> CountSeries:
    """Bucket the live-ACL step function into at most `points` buckets (in Spark) and collect them."""
    if by not in ("offset", "time"):
        raise ValueError(f"by must be 'offset' or 'time', not {by!r}")
    points = max(2, int(points))
    cov = _cluster_rows(lake, "log_coverage", cluster)
    times = _cluster_rows(lake, "offset_times", cluster).select("offset", "time")
    steps = _step_points(lake, cluster)
    if by == "offset":
        r = cov.agg(F.min("start_offset").alias("lo"), F.max("end_offset").alias("hi")).first()
        lo_s = steps.agg(F.min("offset")).first()
        if r is None or r["hi"] is None:
            return CountSeries(cluster, by, 1.0)
        lo = min(int(r["lo"]), int(lo_s[0]) if lo_s and lo_s[0] is not None else int(r["lo"]))
        hi = int(r["hi"])
        keyed = steps.withColumn("_x", F.col("offset"))
    else:
        r = times.agg(F.min("time").alias("lo"), F.max("time").alias("hi")).first()
        if r is None or r["hi"] is None:
            return CountSeries(cluster, by, 1.0)
        lo, hi = int(r["lo"]), int(r["hi"])
        keyed = _with_time(steps, times, "offset", "_x", after=True, cluster=cluster).withColumn(
            "_x", F.coalesce(F.col("_x"), F.lit(hi)))
    width = max(1, math.ceil((hi - lo + 1) / points))
    order = F.struct(F.col("_x"), F.col("offset"))
    n = (hi - lo) // width + 1
    bucket = F.floor((F.greatest(F.col("_x"), F.lit(lo)) - lo) / width).cast("long")
    rows = (keyed.withColumn("_b", F.least(bucket, F.lit(n - 1)))
            .groupBy("_b")
            .agg(F.max_by("certain", order).alias("c_end"), F.min("certain").alias("c_min"),
                 F.max("certain").alias("c_max"), F.max_by("possible", order).alias("p_end"),
                 F.max(F.col("possible") - F.col("certain")).alias("u_max"), F.max("possible").alias("p_max"))
            .orderBy("_b").collect())
    series = CountSeries(cluster, by, float(width), end=float(hi))
    by_bucket = {int(row["_b"]): row for row in rows}
    c = p = 0
    for b in range(n):
        row = by_bucket.get(b)
        if row is None:
            cmin = cmax = c
            umax, pmax = p - c, p
        else:
            cmin, cmax = min(c, int(row["c_min"])), max(c, int(row["c_max"]))
            umax = max(p - c, int(row["u_max"]))
            pmax = max(p, int(row["p_max"]))
            c, p = int(row["c_end"]), int(row["p_end"])
        series.x.append(float(lo + b * width))
        series.certain.append(c)
        series.certain_min.append(cmin)
        series.certain_max.append(cmax)
        series.possible.append(max(p, c))
        series.uncertain_max.append(max(umax, 0))
        series.possible_max.append(max(pmax, c) if umax > 0 else c)
    series.gaps = _gap_spans(cov, times, by, cluster)
    return series


def _gap_spans(cov: DataFrame, times: DataFrame, by: str, cluster: str, limit: int = 500
               ) -> list[tuple[float, float, str]]:
    """The missing and incomplete offset ranges (at most `limit`), in offsets or as times."""
    gaps = cov.where(F.col("kind").isin("missing", "incomplete")).select("start_offset", "end_offset", "kind")
    if by == "offset":
        rows = gaps.orderBy("start_offset").limit(limit).collect()
        return [(float(r["start_offset"]), float(r["end_offset"]) + 1.0, str(r["kind"])) for r in rows]
    g = _with_time(gaps, times, "start_offset", "t0", after=False, cluster=cluster)
    g = _with_time(g, times, "end_offset", "t1", after=True, cluster=cluster)
    rows = g.orderBy("start_offset").limit(limit).collect()
    first = times.agg(F.min("time")).first()
    t_first = first[0] if first is not None else None
    out = []
    for r in rows:
        if r["t0"] is None and r["t1"] is None:
            continue
        t0 = r["t0"] if r["t0"] is not None else (t_first if t_first is not None else r["t1"])
        t1 = r["t1"] if r["t1"] is not None else r["t0"]
        out.append((float(t0), float(t1), str(r["kind"])))
    return out


def draw_acl_count(series: CountSeries, mark: float | None = None, title: str | None = None) -> Figure:
    """Draw a `CountSeries` (see `acl_count_figure`)."""
    fig = new_figure()
    ax = fig.add_subplot()
    is_time = series.by == "time"
    conv: Any = _utc if is_time else float
    xs: list[Any] = [conv(x) for x in series.x]
    if series.x:
        xs.append(conv(max(series.end, series.x[-1] + series.width)))

    def stepped(vals: list[int]) -> list[int]:
        return vals + (vals[-1:] if vals else [])

    for start, end, kind in series.gaps:
        if kind == "missing":
            ax.axvspan(conv(start), conv(end), color=_GAP, alpha=0.3, linewidth=0)
        else:
            ax.axvspan(conv(start), conv(end), facecolor="none", edgecolor=_INCOMPLETE, hatch="..", linewidth=0)
    if series.uncertain:
        ax.fill_between(xs, stepped(series.certain), stepped(series.possible_max), step="post", color=_POSSIBLE,
                        alpha=0.3, linewidth=0, label="may or may not have been live (history has a gap)")
    if series.width > 1 and any(a != b for a, b in zip(series.certain_min, series.certain_max, strict=True)):
        ax.fill_between(xs, stepped(series.certain_min), stepped(series.certain_max), step="post", color=_CERTAIN,
                        alpha=0.18, linewidth=0, label="lowest to highest count inside a bucket")
    if series.certain:
        ax.step(xs, stepped(series.certain), where="post", color=_CERTAIN, linewidth=1.8, label="certainly live")
    if mark is not None:
        _mark_line(ax, conv(mark), "audit moment")
    handles, _labels = ax.get_legend_handles_labels()
    kinds = {k for _, _, k in series.gaps}
    if "missing" in kinds:
        handles.append(Patch(color=_GAP, alpha=0.3, label="offsets in no dump (retention hole)"))
    if "incomplete" in kinds:
        handles.append(Patch(facecolor="none", edgecolor=_INCOMPLETE, hatch="..",
                             label="incomplete: ACLs that no dump recorded may have been live"))
    fig.legend(handles=handles, loc="outside lower center", ncol=2, fontsize="small")
    unit = "time (UTC)" if is_time else "metadata log offset"
    bucket = ""
    if series.width > 1:
        bucket = f"; buckets of {_duration(series.width)}" if is_time else f"; buckets of {int(series.width)} offsets"
    ax.set_title(title or f"ACLs live on cluster {series.cluster} over {'time' if is_time else 'offsets'}{bucket}")
    ax.set_xlabel(unit)
    ax.set_ylabel("number of ACLs")
    ax.set_ylim(bottom=0)
    ax.grid(True, alpha=0.3)
    if is_time:
        fig.autofmt_xdate()
    return fig


def acl_count_figure(lake: Lake, cluster: str, by: str = "offset", points: int = DEFAULT_POINTS,
                     mark: float | None = None, path: str | None = None) -> Figure:
    """ACL count over offsets (`by="offset"`) or over time (`by="time"`; `mark` in epoch ms then)."""
    fig = draw_acl_count(acl_count_data(lake, cluster, by, points), mark=mark)
    if path:
        save(fig, path)
    return fig


# ---- changes per period ------------------------------------------------------------------------------------------

@dataclass
class ChangeCounts:
    """ACL changes per period bucket (`start` in epoch ms)."""

    cluster: str
    period: str
    period_ms: int
    start: list[int] = field(default_factory=list)
    creates: list[int] = field(default_factory=list)  # exact offset known
    removes: list[int] = field(default_factory=list)
    creates_inexact: list[int] = field(default_factory=list)  # happened somewhere inside a hole
    removes_inexact: list[int] = field(default_factory=list)
    why: str = ""  # why this period, for DAY_IF_LONG (shown in the title)

    @property
    def total(self) -> int:
        return sum(self.creates) + sum(self.removes) + sum(self.creates_inexact) + sum(self.removes_inexact)


def choose_period(span_ms: int, max_bars: int = DEFAULT_MAX_BARS) -> tuple[str, int]:
    """The smallest period of `PERIODS` that puts `span_ms` into at most `max_bars` bars."""
    for name, ms in PERIODS:
        if span_ms // ms + 1 <= max_bars:
            return name, ms
    return PERIODS[-1]


def _time_span(df: DataFrame) -> int:
    r = df.agg(F.min("time").alias("lo"), F.max("time").alias("hi")).first()
    return 0 if r is None or r["lo"] is None else int(r["hi"]) - int(r["lo"])


def changes_data(lake: Lake, cluster: str, period: str = "auto", max_bars: int = DEFAULT_MAX_BARS) -> ChangeCounts:
    """Creates and removes per period, counted in Spark. `period`: a name in `PERIODS` (e.g. `day`), `auto` (the
    smallest giving at most `max_bars` bars over the changes' span), or `DAY_IF_LONG` (`day` when the history in
    `offset_times` spans at least two days, else `auto`)."""
    ev = _cluster_rows(lake, "acl_events", cluster).where(F.col("time").isNotNull())
    why = ""
    if period == DAY_IF_LONG:
        history = _time_span(_cluster_rows(lake, "offset_times", cluster))
        if history >= DAILY_MIN_SPAN_MS:
            name, ms = "day", DAY_MS
            why = f"per day: the history spans {_duration(history)}"
        else:
            name, ms = choose_period(_time_span(ev), max_bars)
            why = f"not per day: the history spans {_duration(history)}, under {_duration(DAILY_MIN_SPAN_MS)}"
    elif period == "auto":
        name, ms = choose_period(_time_span(ev), max_bars)
    else:
        known = dict(PERIODS)
        if period not in known:
            raise ValueError(f"unknown period {period!r}; choose auto, {DAY_IF_LONG} or one of {', '.join(known)}")
        name, ms = period, known[period]
    b = (F.floor(F.col("time") / ms) * ms).cast("long")

    def count(change: str, exact: bool) -> Column:
        return F.sum(F.when((F.col("change") == change) & (F.col("exact") == F.lit(exact)), 1).otherwise(0))

    rows = (ev.groupBy(b.alias("start"))
            .agg(count("CREATE", True).alias("c"), count("REMOVE", True).alias("r"),
                 count("CREATE", False).alias("ci"), count("REMOVE", False).alias("ri"))
            .orderBy("start").limit(5000).collect())
    out = ChangeCounts(cluster, name, ms, why=why)
    if not rows:
        return out
    by_start = {int(r["start"]): r for r in rows}
    first, last = int(rows[0]["start"]), int(rows[-1]["start"])
    fill = (last - first) // ms + 1 <= 5000
    starts = range(first, last + ms, ms) if fill else sorted(by_start)
    for s in starts:
        r = by_start.get(s)
        out.start.append(s)
        out.creates.append(int(r["c"]) if r else 0)
        out.removes.append(int(r["r"]) if r else 0)
        out.creates_inexact.append(int(r["ci"]) if r else 0)
        out.removes_inexact.append(int(r["ri"]) if r else 0)
    return out


def _duration(ms: float) -> str:
    for unit, size in (("day", 86_400_000), ("hour", 3_600_000), ("minute", 60_000), ("second", 1_000)):
        if ms >= size:
            n = ms / size
            text = f"{n:.0f}" if abs(n - round(n)) < 0.05 else f"{n:.1f}"
            return f"{text} {unit}{'' if text == '1' else 's'}"
    return f"{ms:.0f} ms"


def draw_changes(counts: ChangeCounts, mark: float | None = None, title: str | None = None) -> Figure:
    fig = new_figure()
    ax = fig.add_subplot()
    xs: list[Any] = [_utc(s + counts.period_ms / 2) for s in counts.start]
    width = counts.period_ms / 86_400_000 * 0.8  # matplotlib date units are days
    ax.bar(xs, counts.creates, width=width, color=_ALLOW, label="created")
    ax.bar(xs, counts.creates_inexact, width=width, bottom=counts.creates, color=_ALLOW, alpha=0.35, hatch="//",
           edgecolor=_ALLOW, label="created at an unknown offset inside a hole")
    ax.bar(xs, [-v for v in counts.removes], width=width, color=_DENY, label="removed")
    ax.bar(xs, [-v for v in counts.removes_inexact], width=width, bottom=[-v for v in counts.removes], color=_DENY,
           alpha=0.35, hatch="\\\\", edgecolor=_DENY, label="removed at an unknown offset inside a hole")
    ax.axhline(0, color="black", linewidth=0.8)
    if mark is not None:
        _mark_line(ax, _utc(mark), "audit moment")
    handles, labels = ax.get_legend_handles_labels()
    keep = [(h, lab) for h, lab in zip(handles, labels, strict=True)
            if not ("unknown offset" in lab and not (sum(counts.creates_inexact) + sum(counts.removes_inexact)))]
    fig.legend([h for h, _ in keep], [lab for _, lab in keep], loc="outside lower center", ncol=2,
               fontsize="small")
    why = f"\n({counts.why})" if counts.why else ""
    ax.set_title(title or f"ACL changes per {counts.period} on cluster {counts.cluster} "
                          f"({counts.total} in all; creates up, removes down){why}")
    ax.set_xlabel("time (UTC)")
    ax.set_ylabel(f"changes per {counts.period}")
    ax.grid(True, axis="y", alpha=0.3)
    top = max([a + b for a, b in zip(counts.creates, counts.creates_inexact, strict=True)] or [1])
    bottom = max([a + b for a, b in zip(counts.removes, counts.removes_inexact, strict=True)] or [1])
    ax.set_ylim(-max(bottom, 1) * 1.15, max(top, 1) * 1.35)
    ax.yaxis.set_major_formatter(lambda v, _pos: f"{abs(v):.0f}")
    fig.autofmt_xdate()
    return fig


def changes_figure(lake: Lake, cluster: str, period: str = "day", max_bars: int = DEFAULT_MAX_BARS,
                   mark: float | None = None, path: str | None = None) -> Figure:
    """Creates vs removes per `period` (see `changes_data`; `day` by default)."""
    fig = draw_changes(changes_data(lake, cluster, period, max_bars), mark=mark)
    if path:
        save(fig, path)
    return fig


def changes_per_day_figure(lake: Lake, cluster: str, mark: float | None = None, path: str | None = None) -> Figure:
    """Changes per day when the history spans at least two days, else per the `auto` period (the title says which)."""
    return changes_figure(lake, cluster, DAY_IF_LONG, mark=mark, path=path)


# ---- one principal's access timeline -----------------------------------------------------------------------------

@dataclass
class Lifetime:
    acl_id: str
    label: str
    principal: str
    permission: str
    start_min: float  # may have been live from here
    start: float  # certainly live from here
    end_min: float | None  # may be gone from here (None: live at the end of history)
    end: float | None  # certainly gone from here


@dataclass
class Timeline:
    cluster: str
    principal: str
    x: str  # offset | time
    total: int  # lifetimes that match, of which `bars` shows at most `limit`
    end: float
    bars: list[Lifetime] = field(default_factory=list)


def timeline_data(lake: Lake, cluster: str, principal: str, include_wildcard: bool = True,
                  limit: int = DEFAULT_TIMELINE_LIMIT, x: str = "time") -> Timeline:
    """The principal's ACL lifetimes (at most `limit`, sorted by resource), with bounds in offsets or times."""
    if x not in ("offset", "time"):
        raise ValueError(f"x must be 'offset' or 'time', not {x!r}")
    who = [principal]
    if include_wildcard and principal.startswith("User:") and principal != "User:*":
        who.append("User:*")
    h = _cluster_rows(lake, "acl_history", cluster).where(F.col("principal").isin(who))
    total = h.count()
    rows = (h.orderBy("resource_type", "resource_name", "pattern_type", "operation", "permission_type",
                      "valid_from_offset", "acl_id").limit(limit).collect())
    times = _cluster_rows(lake, "offset_times", cluster).select("offset", "time")
    if x == "offset":
        r = _cluster_rows(lake, "log_coverage", cluster).agg(F.max("end_offset")).first()
        end = float(r[0] + 1) if r and r[0] is not None else 0.0
    else:
        r = times.agg(F.max("time")).first()
        end = float(r[0]) if r and r[0] is not None else 0.0
    tl = Timeline(cluster, principal, x, total, end)
    if not rows:
        return tl
    lookup: dict[int, float] = {}
    if x == "time":
        wanted = {int(v) for row in rows for v in (row["valid_from_min_offset"], row["valid_from_offset"],
                                                   row["valid_to_min_offset"], row["valid_to_offset"])
                  if v is not None}
        spark = lake.spark
        pts = spark.createDataFrame([(o,) for o in sorted(wanted)], "offset long")
        for t in _with_time(pts, times, "offset", "time", after=True, cluster=cluster).collect():
            lookup[int(t["offset"])] = float(t["time"]) if t["time"] is not None else end

    def conv(v: Any) -> float | None:
        if v is None:
            return None
        return float(v) if x == "offset" else lookup.get(int(v), end)

    for row in rows:
        pattern = "" if row["pattern_type"] == "LITERAL" else f" ({row['pattern_type'].lower()})"
        host = "" if row["host"] == "*" else f" from {row['host']}"
        who_txt = f"[{row['principal']}] " if row["principal"] != principal else ""
        label = (f"{who_txt}{row['permission_type']} {row['operation']} on {row['resource_type']} "
                 f"{row['resource_name']}{pattern}{host}")
        start_min, start = conv(row["valid_from_min_offset"]), conv(row["valid_from_offset"])
        assert start_min is not None and start is not None
        tl.bars.append(Lifetime(row["acl_id"], label, row["principal"], row["permission_type"], start_min, start,
                                conv(row["valid_to_min_offset"]), conv(row["valid_to_offset"])))
    return tl


def draw_timeline(tl: Timeline, mark: float | None = None, title: str | None = None) -> Figure:
    n = max(1, len(tl.bars))
    fig = new_figure(11.0, min(2.2 + 0.32 * n, 16.0))
    ax = fig.add_subplot()
    is_time = tl.x == "time"
    conv: Any = _utc if is_time else float

    def span(a: float, b: float) -> tuple[float, float]:
        if is_time:
            return float(mdates.date2num(_utc(a))), (b - a) / 86_400_000  # type: ignore[no-untyped-call]
        return a, b - a

    labels: list[str] = []
    uncertain_seen = False
    for i, bar in enumerate(tl.bars):
        colour = _ALLOW if bar.permission == "ALLOW" else _DENY
        certain_end = bar.end_min if bar.end_min is not None else tl.end
        ax.broken_barh([span(bar.start, max(certain_end, bar.start))], (i - 0.35, 0.7), facecolors=colour)
        pieces = []
        if bar.start_min < bar.start:
            pieces.append(span(bar.start_min, bar.start))
        if bar.end_min is not None and (bar.end is None or bar.end > bar.end_min):
            pieces.append(span(bar.end_min, bar.end if bar.end is not None else tl.end))
        if pieces:
            uncertain_seen = True
            ax.broken_barh(pieces, (i - 0.35, 0.7), facecolors="white", edgecolors=colour, hatch="///")
        labels.append(bar.label)
    if is_time:
        ax.xaxis_date()
    ax.set_yticks(range(len(labels)), labels=labels, fontsize="small")
    ax.set_ylim(len(labels) - 0.5 if labels else 0.5, -0.5)
    if mark is not None:
        _mark_line(ax, conv(mark), "audit moment")
    handles = [Patch(color=_ALLOW, label="ALLOW, certainly live"), Patch(color=_DENY, label="DENY, certainly live")]
    if uncertain_seen:
        handles.append(Patch(facecolor="white", edgecolor="black", hatch="///",
                             label="uncertain bound (inside a history gap)"))
    extra, _ = ax.get_legend_handles_labels()
    fig.legend(handles=handles + extra, loc="outside lower center", ncol=len(handles + extra), fontsize="small")
    shown = f" (first {len(tl.bars)} of {tl.total})" if tl.total > len(tl.bars) else ""
    wild = " and User:*" if any(b.principal != tl.principal for b in tl.bars) else ""
    ax.set_title(title or f"ACLs of {tl.principal}{wild}{shown}\non cluster {tl.cluster}, over "
                          f"{'time' if is_time else 'offsets'}; one bar per ACL lifetime")
    ax.set_xlabel("time (UTC)" if is_time else "metadata log offset")
    ax.grid(True, axis="x", alpha=0.3)
    if not tl.bars:
        ax.text(0.5, 0.5, f"no ACL ever named {tl.principal}", transform=ax.transAxes, ha="center")
    if is_time:
        fig.autofmt_xdate()
    return fig


def principal_timeline_figure(lake: Lake, cluster: str, principal: str, include_wildcard: bool = True,
                              limit: int = DEFAULT_TIMELINE_LIMIT, x: str = "time", mark: float | None = None,
                              path: str | None = None) -> Figure:
    """One principal's access timeline: a bar per ACL lifetime (`mark` in the units of `x`)."""
    fig = draw_timeline(timeline_data(lake, cluster, principal, include_wildcard, limit, x), mark=mark)
    if path:
        save(fig, path)
    return fig


def busiest_principal(lake: Lake, cluster: str) -> str | None:
    """The principal named by the most ACL lifetimes (not `User:*`): a reasonable default for the timeline."""
    row = (_cluster_rows(lake, "acl_history", cluster).where(F.col("principal") != "User:*")
           .groupBy("principal").count().orderBy(F.desc("count"), "principal").first())
    return None if row is None else str(row["principal"])


# ---- granted against used (least privilege, from the brokers' logs) ------------------------------------------------

def draw_granted_used(rows: list[dict[str, Any]], title: str | None = None) -> Figure:
    """Per principal (`unused_access` principal rows): the operation types its ALLOWs grant, those its logged and
    verified requests used, and its ALLOW ACLs that decided nothing (candidates to remove)."""
    fig = new_figure(max(6.0, 1.1 * len(rows) + 3), 4.8)
    ax = fig.add_subplot()
    names = [str(r["principal"]) for r in rows]
    series = [("granted operation types", [len(r["granted"]) for r in rows], _CERTAIN),
              ("used operation types", [len(r["used"]) for r in rows], _ALLOW),
              ("ALLOW ACLs that decided nothing", [len(r["granted_not_used"]) for r in rows], _DENY)]
    width = 0.27
    for i, (label, heights, color) in enumerate(series):
        ax.bar([x + (i - 1) * width for x in range(len(rows))], heights, width, label=label, color=color)
    ax.set_xticks(range(len(rows)), names, rotation=30 if len(rows) > 4 else 0, ha="right" if len(rows) > 4 else "center")
    ax.set_ylabel("count")
    ax.yaxis.set_major_locator(MaxNLocator(integer=True))
    ax.legend(loc="upper right", fontsize="small")
    ax.set_title(title or "Granted against used, per principal")
    if not rows:
        ax.text(0.5, 0.5, "no principal holds an ALLOW or made an allowed request in the window",
                transform=ax.transAxes, ha="center")
    return fig


def granted_used_figure(rows: list[dict[str, Any]], cluster: str, path: str | None = None) -> Figure:
    """`draw_granted_used` of the principal rows of `replay.spark.unused_access.unused_access` (or of the reference's
    `principal_rows`), titled with the cluster."""
    fig = draw_granted_used(rows, f"{cluster}: granted against used, per principal (from the brokers' logs)")
    if path:
        save(fig, path)
    return fig
