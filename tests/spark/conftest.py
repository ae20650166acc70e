"""One SparkSession with Delta for every Spark test (JVM start-up dominates; never start a second one).

local[2], two shuffle partitions, no UI, no code generation, 2g driver. `spark` is session-scoped and stopped at the end of the run.
Tests keep their own data small and write lakes under `tmp_path`.

`sample_lake` holds the real sample dumps of `data/`, ingested and replayed once per run (each sample is its own
cluster, named after its directory) for the tests that only read them; a test that writes makes its own lake.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from spark_conf import SPARK_TEST_CONF
from spark_dumps import SAMPLES


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    pytest.importorskip("pyspark")
    pytest.importorskip("delta")
    from replay.spark.session import get_spark

    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)
    conf = dict(SPARK_TEST_CONF)
    conf["spark.sql.warehouse.dir"] = str(tmp_path_factory.mktemp("spark-warehouse"))
    session = get_spark(master="local[2]", app_name="kraft-acl-replay-tests", memory="2g", conf=conf)
    yield session
    session.stop()


@pytest.fixture
def without_aqe(spark: Any) -> Iterator[None]:
    """Adaptive execution off for one test. The audit and authorize queries are deep plans over a handful of rows:
    AQE runs each of their shuffles as a job of its own (a warm who_can: 38 jobs and 7 s with it, 8 jobs and 4 s
    without). The answers are the same either way. The replay tests keep it on, as it is by default, except one
    incremental replay that runs with it off: there Spark 4.2 failed inside a union until the replay guarded it
    (`replay.spark.session.safe_unions`)."""
    key = "spark.sql.adaptive.enabled"
    before = spark.conf.get(key)
    spark.conf.set(key, "false")
    yield
    spark.conf.set(key, before)


@pytest.fixture(scope="session")
def sample_lake(spark: Any, tmp_path_factory: pytest.TempPathFactory) -> Any:
    """Every sample in `data/` ingested into one lake (cluster = the sample's directory name) and replayed: read
    only, shared by every test that asks about the samples, so each is ingested once per run."""
    from replay.spark.ingest import ingest
    from replay.spark.replay import replay_lake
    from replay.spark.tables import Lake

    lake = Lake(spark, str(tmp_path_factory.mktemp("samples") / "lake"))
    for sample in SAMPLES:
        ingest(spark, [str(sample)], cluster=sample.name, lake=lake, progress=False)
    replay_lake(lake, [s.name for s in SAMPLES])
    return lake
