"""DataFrame helpers shared by the Spark modules."""

from __future__ import annotations

from collections.abc import Sequence

from pyspark.sql import DataFrame
from pyspark.sql import functions as F


def join_null_safe(left: DataFrame, right: DataFrame, key: Sequence[str], how: str, prefix: str = "_r_") -> DataFrame:
    """`left` joined with `right` where the `key` columns are equal or both null; `right`'s columns come out named
    `prefix + name`. Renaming first matters: both sides often descend from the same rows, and a condition that
    compares a column with itself is one Spark warns about ("trivially true") and must then guess apart."""
    renamed = right.select(*[F.col(c).alias(prefix + c) for c in right.columns])
    return left.join(renamed, [left[c].eqNullSafe(renamed[prefix + c]) for c in key], how)
