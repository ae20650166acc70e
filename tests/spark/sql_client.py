"""A Spark process that knows nothing of this project: plain PySpark with Delta's jars and a Hive metastore (Derby)
under a directory, as a SQL user's session would be. It runs the queries of a JSON spec against functions some
other process installed there, and prints their rows as JSON (a failing query: its error message), after a
transcript of the session as a person reads it (each query, then its rows as a table, long ones cut short).

Usage: python sql_client.py SPEC.json  (spec: jars, metastore, warehouse, queries; a query is its text, or
{"sql": text, "limit": rows shown, "width": characters per cell} for the transcript)."""

import json
import sys

from pyspark.sql import SparkSession


def table(rows: list[dict], limit: int = 12, width: int = 60) -> list[str]:
    """Rows as a text table: at most `limit` rows, cells cut at `width` characters."""
    if not rows:
        return ["(no rows)"]
    cols = list(rows[0])

    def cell(v: object) -> str:
        text = "NULL" if v is None else str(v)
        return text if len(text) <= width else text[: width - 3] + "..."

    cells = [[cell(r[c]) for c in cols] for r in rows[:limit]]
    widths = [max(len(c), *(len(line[i]) for line in cells)) for i, c in enumerate(cols)]
    rule = "+" + "+".join("-" * (w + 2) for w in widths) + "+"
    out = [rule, "| " + " | ".join(c.ljust(w) for c, w in zip(cols, widths, strict=True)) + " |", rule]
    out += ["| " + " | ".join(v.ljust(w) for v, w in zip(line, widths, strict=True)) + " |" for line in cells]
    out.append(rule)
    more = f", {limit} shown" if len(rows) > limit else ""
    return [*out, f"({len(rows)} row{'s' if len(rows) != 1 else ''}{more})"]


def error_line(text: str) -> str:
    """The line of an error that says what went wrong: the one naming Spark's error class (an error raised while
    the query runs arrives wrapped in Py4J's), else the first."""
    lines = text.splitlines() or [""]
    named = next((line for line in lines if "[USER_RAISED_EXCEPTION]" in line), lines[0])
    return named[named.index("[USER_RAISED_EXCEPTION]"):] if "[USER_RAISED_EXCEPTION]" in named else named


def main(path: str) -> None:
    with open(path) as f:
        spec = json.load(f)
    spark = (SparkSession.builder.master("local[2]").appName("sql-client")
             .config("spark.jars", spec["jars"])
             .config("spark.sql.extensions", "io.delta.sql.DeltaSparkSessionExtension")
             .config("spark.sql.catalog.spark_catalog", "org.apache.spark.sql.delta.catalog.DeltaCatalog")
             .config("spark.sql.warehouse.dir", spec["warehouse"])
             .config("spark.hadoop.javax.jdo.option.ConnectionURL",
                     f"jdbc:derby:;databaseName={spec['metastore']};create=true")
             .config("spark.sql.session.timeZone", "UTC").config("spark.ui.enabled", "false")
             # a small lake on 2 cores: 2 tasks per shuffle and per Delta log replay, not Spark's 200 and 50 (as
             # kraft-replay's own local sessions set them); and, as in the other Spark tests, no code generation and
             # no job per shuffle (AQE): on a handful of rows they cost more than running the plan
             .config("spark.sql.shuffle.partitions", "2").config("spark.databricks.delta.snapshotPartitions", "2")
             .config("spark.sql.codegen.wholeStage", "false")
             .config("spark.sql.adaptive.enabled", "false").config("spark.sql.codegen.factoryMode", "NO_CODEGEN")
             .config("spark.driver.extraJavaOptions", spec.get("jvm_options", ""))
             .enableHiveSupport().getOrCreate())
    out = []
    for item in spec["queries"]:
        shown = item if isinstance(item, dict) else {"sql": item}
        query = shown.pop("sql")
        print(f"\nspark-sql> {query};")
        try:
            rows = [r.asDict(recursive=True) for r in spark.sql(query).collect()]
            out.append({"query": query, "rows": rows})
            print("\n".join(table(rows, **shown)))
        except Exception as e:  # the error a SQL user sees
            out.append({"query": query, "error": error_line(str(e))})
            print(f"Error: {out[-1]['error']}")
        sys.stdout.flush()
    out.append({"replay_imported": any(m == "replay" or m.startswith("replay.") for m in sys.modules)})
    print("RESULT " + json.dumps(out, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
