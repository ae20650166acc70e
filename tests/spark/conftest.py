"""One SparkSession with Delta for every Spark test (JVM start-up dominates; never start a second one).

local[2], two shuffle partitions, no UI, no code generation, a 3g driver (`SESSION_MEMORY`). `spark` is session-scoped and stopped at the end of the run.
Tests keep their own data small and write lakes under `tmp_path`.

`sample_lake` holds the real sample dumps of `data/`, ingested and replayed once per run (each sample is its own
cluster, named after its directory) for the tests that only read them; a test that writes makes its own lake.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from typing import Any

import pytest
from spark_conf import SESSION_MEMORY, SPARK_TEST_CONF, aqe_off
from spark_dumps import SAMPLES


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    pytest.importorskip("pyspark")
    pytest.importorskip("delta")
    from replay.spark.session import get_spark

    warnings.filterwarnings("ignore", message=".*pandas >= 3.0.0.*", category=FutureWarning)
    conf = dict(SPARK_TEST_CONF)
    conf["spark.sql.warehouse.dir"] = str(tmp_path_factory.mktemp("spark-warehouse"))
    session = get_spark(master="local[2]", app_name="kraft-acl-replay-tests", memory=SESSION_MEMORY, conf=conf)
    yield session
    session.stop()


@pytest.fixture
def without_aqe(spark: Any) -> Iterator[None]:
    """Adaptive execution off for one test (`spark_conf.aqe_off`)."""
    with aqe_off(spark):
        yield


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
