"""What a lake's replay found, said the way every other path says it: the `ProblemSummary` that `acls PATH` and
`inspect` print (counts by kind, the first three of each with file, byte and offset), read from `anomalies`, which
holds the replay's findings and the decoder's problems (`quarantine`) alike. The CLI's ingest and replay, the
demo, the notebook and `TableCounts.findings` all show it, so one input reads the same everywhere."""

from __future__ import annotations

import re

from pyspark.sql import Window
from pyspark.sql import functions as F

from replay.kafka.dump import EXAMPLES_PER_KIND, ProblemSummary
from replay.kafka.model import Problem, ProblemKind
from replay.spark.tables import ANOMALIES, Lake


def summary(lake: Lake, clusters: list[str]) -> ProblemSummary:
    """The findings of `clusters` (one query; at most `EXAMPLES_PER_KIND` rows per kind reach the driver)."""
    out = ProblemSummary()
    if not lake.exists(ANOMALIES):
        return out
    first = Window.partitionBy("kind").orderBy(F.col("offset").asc_nulls_last(), "source_file", "file_position",
                                               "message")
    rows = (lake.read(ANOMALIES).where(F.col("cluster_id").isin(clusters))
            .select("kind", "offset", "source_file", "file_position", "message",
                    F.count(F.lit(1)).over(Window.partitionBy("kind")).alias("_n"),
                    F.row_number().over(first).alias("_k"))
            .where(F.col("_k") <= EXAMPLES_PER_KIND).orderBy("kind", "_k").collect())
    for r in rows:
        out.counts[r["kind"]] = r["_n"]
        out.examples.append(Problem(ProblemKind(r["kind"]), local_paths(r["message"]) or "",
                                    local_paths(r["source_file"]), r["file_position"], r["offset"]))
    return out


_FILE_URI = re.compile(r"\bfile:/+")


def local_paths(text: str | None) -> str | None:
    """Local files named as paths (`/dumps/x.log`), as the user gave them, also inside a message: the lake names
    files by the URI Spark read them from (`file:/dumps/x.log`)."""
    return None if text is None else _FILE_URI.sub("/", text)
