"""Request files in (CSV with a header row, JSON lines, Parquet, Avro, Delta) and decision tables out (Delta,
Parquet, CSV, JSON lines).

Avro: Spark's own Avro source needs the external spark-avro jar, which this project does not ship. `read_requests`
reads `.avro` files with the `binaryFile` source and decodes each file with fastavro inside `mapInArrow` on the
executors: it scales with the number of files (one task per file, the whole file in memory, at most 2 GiB per file:
Spark's binaryFile limit).
"""

from __future__ import annotations

import io
import os
from collections.abc import Iterator
from typing import Any

import fastavro
import pyarrow as pa
from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql import types as T

from replay.spark.authorize_requests import REQUEST_SCHEMA, time_ms

_IN_FORMATS = ("csv", "json", "parquet", "avro", "delta")
OUT_FORMATS = ("delta", "parquet", "csv", "json")


def _guess_format(path: str) -> str:
    p = path.rstrip("/").lower()
    if os.path.isdir(path):
        if os.path.isdir(os.path.join(path, "_delta_log")):
            return "delta"
        names = [n.lower() for n in os.listdir(path) if not n.startswith((".", "_"))]
        for fmt, ends in (("parquet", (".parquet",)), ("avro", (".avro",)), ("csv", (".csv",)),
                          ("json", (".json", ".jsonl", ".ndjson"))):
            if any(n.endswith(ends) for n in names):
                return fmt
        raise ValueError(f"cannot tell the format of directory {path}; pass the format")
    for fmt, ends in (("parquet", (".parquet",)), ("avro", (".avro",)), ("csv", (".csv",)),
                      ("json", (".json", ".jsonl", ".ndjson"))):
        if p.endswith(ends):
            return fmt
    raise ValueError(f"cannot tell the format of {path} from its name; pass the format ({', '.join(_IN_FORMATS)})")


def _avro_decoder(schema: T.StructType) -> Any:
    names = schema.fieldNames()
    arrow = pa.schema([pa.field(f.name, pa.int64() if isinstance(f.dataType, T.LongType) else pa.string())
                       for f in schema.fields])

    def decode(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            for content in batch.column("content").to_pylist():
                rows: list[dict[str, Any]] = []
                for rec in fastavro.reader(io.BytesIO(content)):
                    assert isinstance(rec, dict)
                    rows.append({n: _coerce(rec.get(n), arrow.field(n).type) for n in names})
                    if len(rows) >= 10_000:
                        yield pa.RecordBatch.from_pylist(rows, schema=arrow)
                        rows = []
                if rows:
                    yield pa.RecordBatch.from_pylist(rows, schema=arrow)

    return decode


def _coerce(value: Any, typ: pa.DataType) -> Any:
    if value is None:
        return None
    if pa.types.is_integer(typ):
        if hasattr(value, "timestamp"):
            return int(value.timestamp() * 1000)
        return int(value)
    return str(value)


def read_avro(spark: SparkSession, path: str, schema: T.StructType | None = None) -> DataFrame:
    """Avro files (a file or a directory of `*.avro`) decoded with fastavro on the executors, one task per file."""
    schema = schema or REQUEST_SCHEMA
    files = spark.read.format("binaryFile")
    if os.path.isdir(path):
        files = files.option("pathGlobFilter", "*.avro").option("recursiveFileLookup", "true")
    loaded = files.load(path)
    # one task per file (the source packs small files into one partition); the file list, not `.rdd`, which
    # Spark Connect and serverless compute do not have
    raw = loaded.select("content").repartition(max(1, len(loaded.inputFiles())))
    return raw.mapInArrow(_avro_decoder(schema), schema)


def read_requests(spark: SparkSession, path: str, fmt: str | None = None, cluster: str | None = None) -> DataFrame:
    """Access tuples (and API calls: rows with an `api` value, `replay.spark.authorize_batch`) from CSV (header row),
    JSON lines, Parquet, Avro (access tuples only) or Delta. A missing `cluster_id` column (or null values) is
    filled with `cluster`."""
    fmt = fmt or _guess_format(path)
    if fmt == "csv":
        df = spark.read.option("header", "true").csv(path)
    elif fmt == "json":
        df = spark.read.json(path)
    elif fmt == "parquet":
        df = spark.read.parquet(path)
    elif fmt == "delta":
        df = spark.read.format("delta").load(path)
    elif fmt == "avro":
        df = read_avro(spark, path)
    else:
        raise ValueError(f"unknown request format {fmt!r}; choose one of {', '.join(_IN_FORMATS)}")
    if "cluster_id" not in df.columns:
        if cluster is None:
            raise ValueError("the requests have no cluster_id column; pass the cluster")
        df = df.withColumn("cluster_id", F.lit(cluster))
    elif cluster is not None:
        df = df.withColumn("cluster_id", F.coalesce(F.col("cluster_id"), F.lit(cluster)))
    for c in ("principal", "host", "operation", "resource_type", "resource_name"):
        if c not in df.columns:
            if c == "resource_name" or (c != "principal" and c != "host" and "api" in df.columns):  # API calls
                df = df.withColumn(c, F.lit(None).cast("string"))
            else:
                raise ValueError(f"the requests have no {c} column")
    if "offset" in df.columns:
        df = df.withColumn("offset", F.col("offset").cast("long"))
    if "time" in df.columns and isinstance(df.schema["time"].dataType, T.StringType):
        df = df.withColumn("time", time_ms(F.col("time"), T.StringType()))
    # CSV has no null: an empty resource name means "by resource type", an empty api an access tuple
    for c in ("resource_name", "api"):
        if c in df.columns:
            df = df.withColumn(c, F.when(F.col(c) == "", None).otherwise(F.col(c)))
    return df


def write_table(df: DataFrame, out_path: str, fmt: str, mode: str = "overwrite") -> None:
    """Delta, Parquet, CSV (header; lists of names joined with `;`, other nested values as JSON) or JSON lines."""
    if fmt == "delta":
        df.write.format("delta").mode(mode).save(out_path)
    elif fmt == "parquet":
        df.write.mode(mode).parquet(out_path)
    elif fmt == "json":
        df.write.mode(mode).json(out_path)
    elif fmt == "csv":
        def flat_column(f: T.StructField) -> Any:
            if isinstance(f.dataType, T.ArrayType) and isinstance(f.dataType.elementType, T.StringType):
                return F.array_join(F.col(f.name), ";").alias(f.name)
            if isinstance(f.dataType, (T.ArrayType, T.StructType, T.MapType)):
                return F.to_json(F.col(f.name)).alias(f.name)
            return F.col(f.name)

        flat = df.select(*[flat_column(f) for f in df.schema.fields])
        flat.write.mode(mode).option("header", "true").csv(out_path)
    else:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(OUT_FORMATS)}")

