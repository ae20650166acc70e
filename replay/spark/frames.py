"""DataFrame helpers shared by the Spark modules."""

from __future__ import annotations

import string
from collections.abc import Sequence
from typing import Any

from pyspark.sql import Column, DataFrame, Observation
from pyspark.sql import functions as F


def join_null_safe(left: DataFrame, right: DataFrame, key: Sequence[str], how: str, prefix: str = "_r_") -> DataFrame:
    """`left` joined with `right` where the `key` columns are equal or both null; `right`'s columns come out named
    `prefix + name`. Renaming first matters: both sides often descend from the same rows, and a condition that
    compares a column with itself is one Spark warns about ("trivially true") and must then guess apart."""
    renamed = right.select(*[F.col(c).alias(prefix + c) for c in right.columns])
    return left.join(renamed, [left[c].eqNullSafe(renamed[prefix + c]) for c in key], how)


def filled(template: str, **fields: Column | str) -> Column:
    """A `replay.kafka.anomaly_text` template filled from columns, row by row: the text `template.format(...)` gives
    the reference replayer for the same values (numbers and strings print alike in both; a NULL prints as `null`)."""
    parts, args = [], []
    for literal, name, spec, conversion in string.Formatter().parse(template):
        parts.append(literal.replace("%", "%%"))
        if name is None:
            continue
        if spec or conversion:
            raise ValueError(f"template field {name!r} has a format spec or conversion, which SQL cannot mirror")
        value = fields[name]
        args.append(F.col(value) if isinstance(value, str) else value)
        parts.append("%s")
    if not args:
        return F.lit("".join(parts))
    return F.format_string("".join(parts), *args)


def observed(observation: Observation, metric: str = "rows") -> Any:
    """An observed metric of an action that has run, or None when Spark has not reported it: never waits (the
    classic `Observation.get` waits forever for an action that did not carry it)."""
    try:
        pending = getattr(observation, "_jo", None)
        if pending is not None and not pending.future().isCompleted():
            return None
        return observation.get.get(metric)
    except Exception:  # e.g. Spark Connect without the metrics: the caller counts instead
        return None
