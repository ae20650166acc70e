"""A Spark process that knows nothing of this project: plain PySpark with Delta's jars and a Hive metastore (Derby)
under a directory, as a SQL user's session would be. It runs the queries of a JSON spec against functions some
other process installed there, and prints their rows as JSON (a failing query: its error message).

Usage: python sql_client.py SPEC.json  (spec: jars, metastore, warehouse, queries)."""

import json
import sys

from pyspark.sql import SparkSession


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
             .enableHiveSupport().getOrCreate())
    out = []
    for query in spec["queries"]:
        try:
            rows = [r.asDict(recursive=True) for r in spark.sql(query).collect()]
            out.append({"query": query, "rows": rows})
        except Exception as e:  # the error a SQL user sees
            out.append({"query": query, "error": str(e).splitlines()[0]})
    out.append({"replay_imported": any(m == "replay" or m.startswith("replay.") for m in sys.modules)})
    print("RESULT " + json.dumps(out, default=str))
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
