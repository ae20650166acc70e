"""The session: Delta works in it, the branches of get_spark, and the settings it would start a session with."""

from __future__ import annotations

import glob
import os
from typing import Any

import pytest

from replay.spark import class_archive, codegen_cache
from replay.spark import session as S


def test_default_driver_memory() -> None:
    gib = 1024**3
    assert S.default_driver_memory(24 * gib) == "6g"
    assert S.default_driver_memory(64 * gib) == "8g"
    assert S.default_driver_memory(2 * gib) == "1g"


def test_driver_memory_env_overrides(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(S.MEMORY_ENV, "3g")
    assert S.driver_memory() == "3g"
    assert S.driver_memory("5g") == "5g"


def test_local_conf_has_delta_and_explicit_jars() -> None:
    conf = S.local_conf("local[*]", "app", None)
    jars = conf["spark.jars"].split(",")
    assert any("delta-spark_4.2_2.13-4.4.0.jar" in j for j in jars)
    assert all("*" not in j and j.endswith(".jar") for j in jars)
    assert conf["spark.sql.extensions"] == S.DELTA_EXTENSION
    assert conf["spark.sql.catalog.spark_catalog"] == S.DELTA_CATALOG
    assert conf["spark.databricks.delta.properties.defaults.enableInCommitTimestamps"] == "true"
    assert conf["spark.driver.host"] == "127.0.0.1"
    assert "spark.driver.host" not in S.local_conf("spark://10.1.2.3:7077", "app", "1g")
    assert S.local_conf("spark://127.0.0.1:7077", "app", "1g")["spark.driver.host"] == "127.0.0.1"


def test_a_driver_gets_the_quick_or_the_long_work_jvm_options_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(S.QUICK_JVM_ENV, raising=False)
    monkeypatch.delenv(S.WORK_JVM_ENV, raising=False)
    monkeypatch.setenv(class_archive.ENV, "off")  # the class archive's options apart (the test below)
    monkeypatch.setenv(codegen_cache.ENV, "off")  # and the generated-code cache's (tests/spark/test_codegen_cache.py)
    monkeypatch.setenv(S.LOG4J_ENV, "spark")  # and the log configuration's (the test below)
    assert S.local_conf("local[2]", "app", "1g")["spark.driver.extraJavaOptions"] == S.WORK_DRIVER_OPTIONS
    assert "-XX:MaxInlineLevel=3" in S.WORK_JVM_OPTIONS and "TieredStopAtLevel" not in S.WORK_JVM_OPTIONS
    assert S.WORK_DRIVER_OPTIONS.split() == [*S.WORK_JVM_OPTIONS.split(), "-XX:+UseParallelGC"]
    assert S.local_conf("local[2]", "app", "1g", quick=True)["spark.driver.extraJavaOptions"] == S.QUICK_JVM_OPTIONS
    assert "-XX:TieredStopAtLevel=1" in S.QUICK_JVM_OPTIONS
    monkeypatch.setenv(S.QUICK_JVM_ENV, "-Xss4m")
    assert S.local_conf("local[2]", "app", "1g", quick=True)["spark.driver.extraJavaOptions"] == "-Xss4m"
    monkeypatch.setenv(S.QUICK_JVM_ENV, "")  # empty: the JVM's defaults
    assert "spark.driver.extraJavaOptions" not in S.local_conf("local[2]", "app", "1g", quick=True)
    assert S.local_conf("local[2]", "app", "1g")["spark.driver.extraJavaOptions"] == S.WORK_DRIVER_OPTIONS  # its own
    monkeypatch.setenv(S.WORK_JVM_ENV, "-Xss8m")
    assert S.local_conf("local[2]", "app", "1g")["spark.driver.extraJavaOptions"] == "-Xss8m"
    monkeypatch.setenv(S.WORK_JVM_ENV, "")
    assert "spark.driver.extraJavaOptions" not in S.local_conf("local[2]", "app", "1g")


def test_a_driver_logs_with_the_tools_configuration_unless_told_otherwise(monkeypatch: pytest.MonkeyPatch,
                                                                          tmp_path: Any) -> None:
    """A driver this package starts logs by `log4j2-driver.xml` (shipped in the package); `KRAFT_REPLAY_LOG4J` names
    another file, or `spark` for Spark's default profile; an option of the user's own in `PYSPARK_SUBMIT_ARGS` wins."""
    from pathlib import Path

    monkeypatch.delenv(S.LOG4J_ENV, raising=False)
    monkeypatch.delenv("PYSPARK_SUBMIT_ARGS", raising=False)
    shipped = Path(S.__file__).with_name("log4j2-driver.xml")
    assert shipped.is_file()

    def options(quick: bool = False) -> list[str]:
        return S.local_conf("local[2]", "app", "1g", quick=quick).get("spark.driver.extraJavaOptions", "").split()

    for quick in (False, True):
        assert f"-Dlog4j2.configurationFile={shipped.resolve().as_uri()}" in options(quick)
    mine = tmp_path / "my log4j2.xml"
    mine.write_text("<Configuration/>")
    monkeypatch.setenv(S.LOG4J_ENV, str(mine))
    assert f"-Dlog4j2.configurationFile={mine.resolve().as_uri()}" in options()
    monkeypatch.setenv(S.LOG4J_ENV, "spark")
    assert not any("log4j2" in o for o in options())
    monkeypatch.delenv(S.LOG4J_ENV)
    monkeypatch.setenv("PYSPARK_SUBMIT_ARGS", "--driver-java-options -Dlog4j2.configurationFile=x.xml pyspark-shell")
    assert not any("log4j2" in o for o in options())


@pytest.mark.spark
def test_the_drivers_log_configuration_is_one_log4j_reads(spark: Any) -> None:
    """Log4j itself reads the shipped file (in a logger context of its own, not the test JVM's): warnings and errors
    to stderr, three notes left out at error level and the scheduler's note on big task plans filtered, everything
    else as Spark's default has it."""
    from pathlib import Path

    jvm = spark.sparkContext._jvm
    core = jvm.org.apache.logging.log4j.core
    path = str(Path(S.__file__).with_name("log4j2-driver.xml"))
    source = core.config.ConfigurationSource(jvm.java.io.FileInputStream(path), jvm.java.io.File(path))
    context = core.LoggerContext("kraft-replay-log-test")
    config = core.config.xml.XmlConfiguration(context, source)
    config.initialize()
    assert config.getRootLogger().getLevel().toString() == "WARN"
    levels = {name: config.getLoggers().get(name).getLevel().toString() for name in config.getLoggers().keySet()
              if name}
    assert levels == {"org.apache.hadoop.util.NativeCodeLoader": "ERROR", "org.apache.spark.util.SparkStringUtils": "ERROR",
                      "org.apache.parquet.CorruptStatistics": "ERROR",
                      "org.sparkproject.jetty.util.component.AbstractLifeCycle": "ERROR",
                      "org.apache.spark.scheduler.DAGScheduler": "WARN"}
    # the scheduler's other warnings stay; its note on a task's plan of a megabyte or more goes
    scheduler = config.getLoggers().get("org.apache.spark.scheduler.DAGScheduler")
    level = jvm.org.apache.logging.log4j.Level
    assert scheduler.isFiltered(core.impl.Log4jLogEvent.newBuilder().setLevel(level.WARN)
                                .setMessage(jvm.org.apache.logging.log4j.message.SimpleMessage(
                                    "Broadcasting large task binary with size 1005.8 KiB")).build())
    assert not scheduler.isFiltered(core.impl.Log4jLogEvent.newBuilder().setLevel(level.WARN)
                                    .setMessage(jvm.org.apache.logging.log4j.message.SimpleMessage(
                                        "Job 3 failed")).build())
    [console] = list(config.getAppenders().values())
    assert console.getTarget().toString() == "SYSTEM_ERR"


@pytest.mark.spark
def test_session_writes_and_reads_delta(spark: Any, tmp_path: Any) -> None:
    path = str(tmp_path / "t")
    spark.range(5).selectExpr("id", "cast(id * 2 as string) AS v").write.format("delta").save(path)
    spark.sql(f"INSERT INTO delta.`{path}` VALUES (5, 'ten')")
    assert sorted(r.id for r in spark.read.format("delta").load(path).collect()) == [0, 1, 2, 3, 4, 5]
    assert spark.read.format("delta").option("versionAsOf", 0).load(path).count() == 5
    props = {r.key: r.value for r in spark.sql(f"SHOW TBLPROPERTIES delta.`{path}`").collect()}
    assert props.get("delta.enableInCommitTimestamps") == "true"  # the session default for new tables
    assert spark.conf.get("spark.sql.extensions") == S.DELTA_EXTENSION


@pytest.mark.spark
def test_the_session_keeps_little_of_finished_work(spark: Any) -> None:
    """The status store's limits reach the driver (Spark prunes to them): a long session does not hold a thousand
    jobs' plans and tasks, keeps the code it compiled for a replay's plans (`CODEGEN_CACHE`), and its broadcast
    joins' hash tables take small memory pages (`MEMORY_PAGES`)."""
    settings = {**S.STATUS_RETENTION, **S.CODEGEN_CACHE, **S.MEMORY_PAGES}
    assert S.local_conf("local[2]", "app", "1g").items() >= settings.items()
    conf = spark.sparkContext.getConf()
    for key, value in settings.items():
        assert conf.get(key) == value, key
    assert spark.sparkContext._jvm.org.apache.spark.SparkEnv.get().memoryManager().pageSizeBytes() == 2 * 1024**2


@pytest.mark.spark
def test_columns_of_nearly_unique_values_are_written_without_a_dictionary(spark: Any, tmp_path: Any) -> None:
    """`NO_DICTIONARY`: in a session `get_spark` starts, and in the ingest's own session on any session, Parquet
    writes those columns without trying a dictionary (here it would keep one: ten values over 3,000 rows) and
    still tries one for the others."""
    from pyarrow import parquet as pq

    from replay.spark.ingest_write import own_session

    assert own_session(spark).conf.get("parquet.enable.dictionary#offset") == "false"
    assert S.local_conf("local[2]", "app", "1g")["spark.hadoop.parquet.enable.dictionary#content_hash"] == "false"
    path = str(tmp_path / "t")
    (spark.range(3000).selectExpr("id % 10 AS offset", "unhex(hex(id % 10)) AS content_hash",
                                  "cast(id % 10 AS string) AS stream")
     .coalesce(1).write.format("delta").save(path))
    [file] = glob.glob(os.path.join(path, "*.parquet"))
    group = pq.ParquetFile(file).metadata.row_group(0)
    kept = {group.column(i).path_in_schema: bool({"PLAIN_DICTIONARY", "RLE_DICTIONARY"} & set(group.column(i).encodings))
            for i in range(group.num_columns)}
    assert kept == {"offset": False, "content_hash": False, "stream": True}


@pytest.mark.spark
def test_get_spark_reuses_the_active_session(spark: Any, capsys: pytest.CaptureFixture[str]) -> None:
    assert S.get_spark() is spark
    assert "Spark: reusing the active session (local[2]" in capsys.readouterr().err


@pytest.mark.spark
def test_get_spark_on_databricks_uses_the_runtime_session(
    spark: Any, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("DATABRICKS_RUNTIME_VERSION", "18.0")
    assert S.on_databricks()
    assert S.get_spark(master="spark://ignored:7077") is spark
    assert "Spark: Databricks session (runtime 18.0" in capsys.readouterr().err


def test_a_driver_maps_the_class_archive_when_there_is_one(monkeypatch: pytest.MonkeyPatch, tmp_path: Any) -> None:
    """The archive is named after the Java, PySpark and Delta it was made with; a driver maps it when it exists,
    besides the quick options; `KRAFT_REPLAY_CLASS_ARCHIVE=off` leaves it out, a path there names another file."""
    monkeypatch.delenv(class_archive.ENV, raising=False)
    monkeypatch.setenv(S.WORK_JVM_ENV, "")  # the long-work driver's own options apart (the test above)
    monkeypatch.setenv(S.LOG4J_ENV, "spark")
    monkeypatch.setenv("KRAFT_REPLAY_CACHE", str(tmp_path / "cache"))
    path = class_archive.archive_path()
    assert path is not None and path.parent == tmp_path / "cache" / "class-archive" and path.suffix == ".jsa"
    assert class_archive.jvm_options() == ""  # none built in this cache
    assert "spark.driver.extraJavaOptions" not in S.local_conf("local[2]", "app", "1g")
    path.parent.mkdir(parents=True)
    path.write_bytes(b"an archive")
    assert class_archive.jvm_options().startswith(f"-XX:SharedArchiveFile={path} -Xshare:auto")
    assert S.local_conf("local[2]", "app", "1g")["spark.driver.extraJavaOptions"] == class_archive.jvm_options()
    quick = S.local_conf("local[2]", "app", "1g", quick=True)["spark.driver.extraJavaOptions"]
    assert quick == f"{S.QUICK_JVM_OPTIONS} {class_archive.jvm_options()}"
    monkeypatch.setenv(class_archive.ENV, "off")
    assert class_archive.archive_path() is None and class_archive.jvm_options() == ""
    other = tmp_path / "other.jsa"
    monkeypatch.setenv(class_archive.ENV, str(other))
    assert class_archive.jvm_options() == ""
    other.write_bytes(b"x")
    assert str(other) in class_archive.jvm_options()


@pytest.mark.spark
def test_a_spark_driver_starts_with_the_class_archive() -> None:
    """The archive `make setup` built (built here if it is missing) is one a Spark driver maps: with `-Xshare:on`
    Java refuses to start rather than run without it, so the driver's job running says the archive is used."""
    import subprocess
    import sys

    from replay.spark.build_class_archive import build

    path = class_archive.archive_path()
    assert path is not None, "no java found, or KRAFT_REPLAY_CLASS_ARCHIVE=off"
    if not path.is_file():
        assert build(path, say=False)
    assert not list(path.parent.glob("*.tmp"))  # written whole
    script = ("import sys; from replay.spark.session import get_spark; "
              "s = get_spark(master='local[1]', conf={'spark.driver.extraJavaOptions': sys.argv[1], "
              "'spark.ui.enabled': 'false'}); print('rows', s.range(5).count())")
    out = subprocess.run([sys.executable, "-c", script, f"-XX:SharedArchiveFile={path} -Xshare:on"],
                         capture_output=True, text=True, check=False, timeout=300)
    assert out.returncode == 0 and "rows 5" in out.stdout, out.stderr[-2000:]
    # a JVM of another class path (a Connect server, an executor) given the same options runs, silently without it
    other = subprocess.run(["java", *class_archive.jvm_options().split(), "-cp", str(path.parent), "-version"],
                           capture_output=True, text=True, check=False, timeout=60)
    assert other.returncode == 0 and "cds" not in other.stdout + other.stderr.replace("sharing", ""), other.stderr
