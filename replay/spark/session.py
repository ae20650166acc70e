"""One way to get a SparkSession with Delta Lake, wherever this runs.

`get_spark()` decides, in this order:

1. **Databricks** (`DATABRICKS_RUNTIME_VERSION` in the environment, or the file `/databricks/DBR_VERSION`): use the
   session the runtime already has. Delta is built in; no jar, extension, catalog or memory setting is touched
   (the runtime ignores or rejects them).
2. **A session is already running in this process** (a notebook, a test fixture, an application that made its own):
   reuse it as it is. Static settings such as jars and memory can no longer change; a warning says so when Delta's
   extension is missing from it.
3. **Spark Connect** (`SPARK_REMOTE` set, e.g. databricks-connect): the builder's remote session, untouched.
4. **Otherwise start one**: `local[*]` (or the `spark://` master given) with Delta's SQL extension and catalog, the
   Delta jars from `replay.maven.delta_jars()` as explicit comma-joined paths in `spark.jars` (no Ivy), driver
   memory sized to the machine (`min(25% of RAM, 8g)`, at least 1g; `KRAFT_REPLAY_DRIVER_MEMORY` or `memory=`
   overrides), shuffle and Delta log-replay partitions sized to the cores in local mode, the driver bound to
   127.0.0.1 for local and loopback masters, in-commit timestamps on for every new Delta table, Arrow on, and the
   session time zone UTC.

Exactly one line says which branch was taken (printed to stderr and logged), e.g.
`Spark: local[*] with Delta 4.4.0 jars from ~/.cache/kraft-acl-replay/delta-4.4.0`.
"""

from __future__ import annotations

import contextlib
import functools
import logging
import os
import signal
import sys
import tempfile
import zipfile
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any, Concatenate, ParamSpec, TypeVar

from pyspark import SparkContext
from pyspark.sql import SparkSession

from replay.maven import DELTA_JVM_VERSION, delta_jars
from replay.spark import class_archive, codegen_cache, local_fs
from replay.spark.tables import PARQUET_CODEC

log = logging.getLogger("replay.spark")
P = ParamSpec("P")
R = TypeVar("R")

APP_NAME = "kraft-acl-replay"
DELTA_EXTENSION = "io.delta.sql.DeltaSparkSessionExtension"
DELTA_CATALOG = "org.apache.spark.sql.delta.catalog.DeltaCatalog"
MEMORY_ENV = "KRAFT_REPLAY_DRIVER_MEMORY"
QUICK_JVM_ENV = "KRAFT_REPLAY_QUICK_JVM_OPTIONS"
# A driver that answers one question and exits: C1 only (C2 compiles Spark's planner for longer than such a JVM
# lives; a cold `acls --lake` on a sample's lake used 39-46 s of CPU against 65-82 s with both compilers, wall 29-35 s
# against 36-44 s), with room for all its code (C1 alone filled the default code cache and stopped compiling).
QUICK_JVM_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:ReservedCodeCacheSize=256m"
WORK_JVM_ENV = "KRAFT_REPLAY_JVM_OPTIONS"
# A driver that does long work (an ingest, a replay, a watch, a notebook's session): both compilers, but the
# optimizing one (C2) inlines less deeply than JDK 17's defaults (15 levels, callees of up to 325 bytes of bytecode or
# 2,500 bytes of compiled code). Most of a replay's driver time is Spark's planner, whose calls go through many
# layers of small virtual methods: C2 kept compiling them into ever larger methods, and deep inlining made each
# compilation dearer without making the planner faster. A cold and a warm full replay of a sample, twice each way
# (2026-12-05, local[*] on 2 cores): the cold one 35.1-35.3 s and 61-63 s of JVM CPU against 36.3-38.5 s and 68-72 s,
# the warm one 14.2-16.8 s and 24-28 s against 16.6-17.8 s and 31-33 s (the C2 thread 3.1-3.3 s against 9.1-10.1 s);
# the benchmark's 2M log, ingest + replay: 114-131 s and 191-219 s of CPU against 136-137 s and 243-244 s
# (`bench/README.md`). Spark's generated code, where the rows are worked on, lost nothing measurable.
WORK_JVM_OPTIONS = "-XX:MaxInlineLevel=3 -XX:InlineSmallCode=500 -XX:FreqInlineSize=50"
# And the parallel collector rather than G1: on two cores G1's concurrent threads compete with the work for the
# cores, and its heap grew further. Full replays of the benchmark's 10M lake, one after the other (2026-12-06, load
# 3.2-3.4): 119 s, 214 s of CPU and a 3.6 GiB driver against 140 s, 255 s and 4.4 GiB; at 1M, twice each way:
# 52.9-53.1 s against 54.8-57.9 s (the serial collector 57.6-58.9 s). Kept apart from `WORK_JVM_OPTIONS` so that
# a JVM given a collector of its own (the test suite's) can still take the inlining limits.
WORK_GC_OPTIONS = "-XX:+UseParallelGC"
WORK_DRIVER_OPTIONS = f"{WORK_JVM_OPTIONS} {WORK_GC_OPTIONS}"
# What the driver keeps of finished work for the Spark UI (kept whether the UI runs or not): by default 1,000 jobs,
# 1,000 stages, 100,000 tasks and 1,000 SQL executions with their plans and metrics, and the graph of every job. A
# replay runs about 150 jobs, so a long session (a notebook, `watch`, the test suite) fills all of it and then prunes
# it after every job. With these limits, four warm replays of a sample in one session left 6 MiB of live int arrays
# instead of 142 MiB, and replays 4 to 7 of a session used 40 s of JVM CPU each against 45 s (2026-12-02). The UI
# still shows the last hundred jobs.
STATUS_RETENTION = {
    "spark.ui.retainedJobs": "100",
    "spark.ui.retainedStages": "100",
    "spark.ui.retainedTasks": "10000",
    "spark.sql.ui.retainedExecutions": "50",
    "spark.ui.dagGraph.retainedRootRDDs": "100",
}
# Spark keeps the classes it compiled for a plan's generated code in a cache of 100 by default, and one replay
# compiles about 700 different ones: every replay of a session then compiled them all again (825-844 compiles per
# warm replay of a sample; with room for 2,000, 16-36), and the JIT compiled the new classes again. Warm replays of a
# sample in one local[2] session: 20-23 s of wall and 28-35 s of CPU against 22-27 s and 34-38 s (2026-12-04).
CODEGEN_CACHE = {"spark.sql.codegen.cache.maxEntries": "2000"}
# Spark sizes its memory pages from the heap: 64 MiB for a driver of a few GiB. The hash table of every broadcast
# join takes a whole page however few rows it holds, zeroed when allocated and kept while its broadcast lives, and a
# replay broadcasts about a hundred small tables. A local[2] session (the suite's settings) after two warm replays of
# a sample held 472 MiB of such pages after a full collection, against 18 MiB with 1 MiB pages; four replays of the
# sample in one session took 100-109 s and 143-156 s of JVM CPU against 123-124 s and 165-166 s (2026-12-04). The
# benchmark's cold 1M replay (G1, a fresh driver) was the same either way. Larger rows still get pages of their size.
MEMORY_PAGES = {"spark.buffer.pageSize": "2m"}
# A write into a partitioned table sorts each task's rows by the partition columns first, unless Spark may keep a
# file open per partition value. Our writes each hold one cluster (and one replay), so that sort only held a task's
# whole input in memory: the 10M-record ingest's driver heap grew to its 5 GiB (4.3 GiB peak of the process tree),
# against 2.9 GiB with up to 4 files open per task; beyond 4 values a task falls back to the sort.
CONCURRENT_WRITERS = {"spark.sql.maxConcurrentOutputFileWriters": "4"}
# Parquet's writer tries a dictionary for every column of a row group and drops it once the dictionary stops paying
# (a megabyte of distinct values, or no saving on the first page): for columns whose values are nearly all different
# the trial only hashes and then re-encodes the first page of every file. These are such columns wherever they
# occur (offsets, positions, times, digests, raw values and rendered payloads). The realistic 1M log's ingest, fresh
# lake, three runs each way: the write job 9.5-10.1 s against 9.9-10.7 s, the lake the same 45 MiB (2026-12-06).
# As session settings (the bare keys) they reach every Parquet write's Hadoop configuration, Delta's included.
UNIQUE_VALUED_COLUMNS = ("offset", "batch_base_offset", "batch_last_offset", "file_position", "append_time",
                         "append_ts", "record_timestamp", "content_hash", "raw_value", "payload_json")
NO_DICTIONARY = {f"parquet.enable.dictionary#{column}": "false" for column in UNIQUE_VALUED_COLUMNS}
_DBR_FILE = "/databricks/DBR_VERSION"
_GIB = 1024**3


def on_databricks() -> bool:
    """True inside a Databricks runtime (cluster, job or notebook)."""
    return "DATABRICKS_RUNTIME_VERSION" in os.environ or os.path.exists(_DBR_FILE)


def _databricks_version() -> str:
    version = os.environ.get("DATABRICKS_RUNTIME_VERSION")
    if version:
        return version
    try:
        return Path(_DBR_FILE).read_text().strip()
    except OSError:
        return "unknown"


def total_memory_bytes() -> int | None:
    """Physical memory of this machine, or None when the platform does not say."""
    try:
        pages = os.sysconf("SC_PHYS_PAGES")
        size = os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None
    if pages <= 0 or size <= 0:
        return None
    return int(pages) * int(size)


def default_driver_memory(total_bytes: int | None = None) -> str:
    """`min(25% of RAM, 8g)`, at least 1g, in whole gibibytes (Spark's `Ng` form)."""
    total = total_memory_bytes() if total_bytes is None else total_bytes
    if not total:
        return "2g"
    gib = max(1, min(8, (total // 4) // _GIB))
    return f"{gib}g"


def driver_memory(memory: str | None = None) -> str:
    """The driver memory to ask for: the argument, else `$KRAFT_REPLAY_DRIVER_MEMORY`, else the machine default."""
    return memory or os.environ.get(MEMORY_ENV) or default_driver_memory()


def _active_session() -> SparkSession | None:
    """The running session of this process, if any (also when it was made on another thread)."""
    active = SparkSession.getActiveSession()
    if active is not None:
        return active
    if SparkContext._active_spark_context is not None:  # a context exists: the builder hands back its session
        return SparkSession.builder.getOrCreate()
    return None


def has_session_here() -> bool:
    """Whether `get_spark` would hand back a session that exists already (Databricks', or this process's)."""
    return on_databricks() or _active_session() is not None


def _say(line: str) -> None:
    log.info(line)
    print(line, file=sys.stderr, flush=True)


def _package_root() -> Path:
    """The directory that holds the `replay` package (a source checkout or site-packages)."""
    return Path(__file__).resolve().parents[2]


def _export_package_path() -> None:
    """Let local Python workers import `replay` even when it runs from a source checkout that is not installed.

    Local-mode Python workers inherit this process's environment; PYTHONPATH is how they find the package.
    """
    root = str(_package_root())
    parts = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if root not in parts:
        os.environ["PYTHONPATH"] = os.pathsep.join([root, *parts])


SHIP_ENV = "KRAFT_REPLAY_SHIP_PACKAGE"


def ship_package(spark: SparkSession) -> None:
    """Zip the `replay` package and add it to the Python path of the session's executors: on a cluster
    (`addPyFile`; a notebook run from a checkout on Databricks calls it too: the executors decode the files), and on
    Spark Connect when asked (`SHIP_ENV`: `addArtifacts(pyfile=True)`, for a server whose Python lacks the wheel).
    The compiled decoder does not travel in a zip: executors without the wheel decode in pure Python."""
    root = _package_root()
    target = Path(tempfile.mkdtemp(prefix="kraft-replay-py-")) / "kraft_acl_replay.zip"
    with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as zf:
        for path in sorted((root / "replay").rglob("*")):
            if path.is_file() and "__pycache__" not in path.parts:
                zf.write(path, path.relative_to(root).as_posix())
    if is_connect(spark):
        spark.addArtifacts(str(target), pyfile=True)
    else:
        spark.sparkContext.addPyFile(str(target))


def is_connect(spark: SparkSession) -> bool:
    """Whether `spark` is a Spark Connect session (no SparkContext, no JVM in this process)."""
    return type(spark).__module__.startswith("pyspark.sql.connect")


def keeps_active_session(fn: Callable[Concatenate[SparkSession, P], R]) -> Callable[Concatenate[SparkSession, P], R]:
    """`fn(spark, ...)` leaves `spark` the thread's active session. PySpark makes a session active whenever it
    creates a DataFrame from local data, so work done in a session of its own (the ingest's, `newSession()`) would
    otherwise leave that session to the caller's next `get_spark()` or `SparkSession.getActiveSession()`."""
    @functools.wraps(fn)
    def run(spark: SparkSession, /, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return fn(spark, *args, **kwargs)
        finally:
            if not is_connect(spark):  # Spark Connect: no session of its own, nothing changed
                with suppress(Exception):  # private, as PySpark itself sets them: best effort
                    SparkSession._activeSession = spark
                    spark._jvm.SparkSession.setActiveSession(spark._jsparkSession)  # type: ignore[union-attr]

    return run


def missing_package_hint(err: BaseException) -> str | None:
    """What to do when the executors' Python could not import this package (their error names the module), or None
    for any other error."""
    if "No module named 'replay'" not in str(err):
        return None
    return ("the Spark executors' Python cannot import the replay package: install the kraft-acl-replay wheel where "
            "they run (a Databricks job's environment, or %pip install in the notebook), or set "
            f"{SHIP_ENV}=1 to send the package with the session (spark.addArtifacts on Spark Connect)")


def _is_loopback_master(master: str) -> bool:
    if master.startswith("local"):
        return True
    host = master.split("://", 1)[-1].split(":", 1)[0].split(",", 1)[0]
    return host in ("127.0.0.1", "localhost", "::1")


def driver_jvm_options(quick: bool = False) -> str:
    """The driver JVM's options: for a short-lived session (`quick`) `$KRAFT_REPLAY_QUICK_JVM_OPTIONS` when set, else
    `QUICK_JVM_OPTIONS`; for one doing long work `$KRAFT_REPLAY_JVM_OPTIONS` when set, else `WORK_DRIVER_OPTIONS`.
    An empty variable: the JVM's defaults."""
    env, default = (QUICK_JVM_ENV, QUICK_JVM_OPTIONS) if quick else (WORK_JVM_ENV, WORK_DRIVER_OPTIONS)
    return os.environ.get(env, default).strip()


# The driver's log (`log4j2-driver.xml`): warnings and errors, without notes that tell this tool's user nothing.
# `$LOG4J_ENV` names another file (Log4j 2's own format), or `spark` for Spark's default profile.
LOG4J_ENV = "KRAFT_REPLAY_LOG4J"


def _log_config_option() -> str:
    """The driver JVM's option naming its log configuration; none where the user asks for Spark's default, or gives
    one in `spark.driver.extraJavaOptions` of their own (`PYSPARK_SUBMIT_ARGS`: theirs wins)."""
    chosen = os.environ.get(LOG4J_ENV, "").strip()
    if chosen == "spark" or "log4j2.configurationFile" in os.environ.get("PYSPARK_SUBMIT_ARGS", ""):
        return ""
    path = Path(chosen) if chosen else Path(__file__).with_name("log4j2-driver.xml")
    return f"-Dlog4j2.configurationFile={path.resolve().as_uri()}" if path.is_file() else ""


def local_conf(master: str, app_name: str, memory: str | None, quick: bool = False) -> dict[str, str]:
    """The settings `get_spark` gives a session it starts itself (public for tests and for spark-submit users).
    `quick`: the driver lives for one question (`driver_jvm_options`). The driver maps the class archive when there
    is one (`replay.spark.class_archive`), loads the classes Spark compiled before (`replay.spark.codegen_cache`),
    and a local one uses Hadoop's local file system without child processes when its classes are built
    (`replay.spark.local_fs`); it logs by `log4j2-driver.xml` (`LOG4J_ENV`). Settings given to `get_spark` or in
    `PYSPARK_SUBMIT_ARGS` still win."""
    jars = delta_jars()
    conf = {
        "spark.app.name": app_name,
        "spark.master": master,
        "spark.jars": ",".join(str(j) for j in jars),
        "spark.sql.extensions": DELTA_EXTENSION,
        "spark.sql.catalog.spark_catalog": DELTA_CATALOG,
        "spark.driver.memory": driver_memory(memory),
        "spark.databricks.delta.properties.defaults.enableInCommitTimestamps": "true",
        "spark.sql.execution.arrow.pyspark.enabled": "true",
        "spark.sql.session.timeZone": "UTC",
        "spark.ui.showConsoleProgress": "false",
        # PySpark otherwise walks the Python stack (and tries to import IPython) on every DataFrame call to name the
        # caller in error messages, and tells the JVM each time: a warm replay of a sample made 30,651 JVM calls and
        # took 43.4 s with it, 11,122 calls and 37.2 s without (cProfile, 2026-11-26)
        "spark.python.sql.dataFrameDebugging.enabled": "false",
        # the lake's codec (`tables.PARQUET_CODEC`) for the writes that take no writer option (MERGE, DELETE), and
        # timestamps as 64-bit micros rather than INT96: a third of the bytes under zstd on the benchmark log
        "spark.sql.parquet.compression.codec": PARQUET_CODEC,
        "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
        **STATUS_RETENTION,
        **CODEGEN_CACHE,
        **MEMORY_PAGES,
        **CONCURRENT_WRITERS,
        **{f"spark.hadoop.{key}": value for key, value in NO_DICTIONARY.items()},
    }
    if master.startswith("local"):
        # Spark's defaults (200 shuffle partitions, 50 for Delta's log replay) are made for big clusters: on a few
        # cores each replay step would spend most of its time scheduling empty tasks. AQE still splits skew.
        cores = os.cpu_count() or 2
        conf["spark.sql.shuffle.partitions"] = str(max(4, 2 * cores))
        conf["spark.databricks.delta.snapshotPartitions"] = str(max(2, cores))
    conf.update(local_fs.spark_conf(master))
    options = " ".join(o for o in (driver_jvm_options(quick), _log_config_option(), class_archive.jvm_options(),
                                   codegen_cache.jvm_options()) if o)
    if options:
        conf["spark.driver.extraJavaOptions"] = options
    if _is_loopback_master(master):
        conf["spark.driver.host"] = "127.0.0.1"
        conf["spark.driver.bindAddress"] = "127.0.0.1"
    return conf


def get_spark(
    master: str | None = None,
    app_name: str = APP_NAME,
    memory: str | None = None,
    conf: Mapping[str, Any] | None = None,
    quick: bool = False,
) -> SparkSession:
    """Return a SparkSession that can read and write Delta tables (see the module docstring for the rules).

    `master`: `local[N]`, `local[*]` (the default) or `spark://host:port`; ignored on Databricks and when a session
    is already running. `memory`: driver memory such as `"6g"`. `conf`: extra settings for a session started here
    (tests use it for small shuffle partitions and no UI); also ignored when a session already exists. `quick`: the
    session answers a question or two and ends (the CLI's lake questions), so its driver JVM compiles less.
    """
    if on_databricks():
        spark = SparkSession.getActiveSession() or SparkSession.builder.getOrCreate()
        _say(f"Spark: Databricks session (runtime {_databricks_version()}, Spark {spark.version})")
        return spark

    active = _active_session()
    if active is not None:
        master_now = active.conf.get("spark.master", "?")
        extensions = active.conf.get("spark.sql.extensions", "") or ""
        _say(f"Spark: reusing the active session ({master_now}, Spark {active.version})")
        if DELTA_EXTENSION not in extensions:
            log.warning("the active Spark session has no Delta extension (%s); Delta SQL may fail", DELTA_EXTENSION)
        return active

    if os.environ.get("SPARK_REMOTE"):  # Spark Connect (databricks-connect, a remote Connect server): theirs to set up
        spark = SparkSession.builder.getOrCreate()
        _say(f"Spark: Spark Connect session ({os.environ['SPARK_REMOTE'].split(';', 1)[0]}, Spark {spark.version})")
        if os.environ.get(SHIP_ENV, "").strip().lower() in ("1", "true", "yes"):
            ship_package(spark)
            _say(f"Spark: sent the replay package to the server's executors ({SHIP_ENV})")
        return spark

    master = master or os.environ.get("KRAFT_REPLAY_SPARK_MASTER") or "local[*]"
    if _is_loopback_master(master):  # workers on this machine run this interpreter and see this checkout
        os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")  # the driver binds there (`local_conf`): no warning
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)
        _export_package_path()
    settings = local_conf(master, app_name, memory, quick)
    settings.update({k: str(v) for k, v in (conf or {}).items()})
    local_fs.keep_consistent(settings, local_fs.spark_conf(master))
    builder = SparkSession.builder
    for key, value in settings.items():
        builder = builder.config(key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    jar_dir = Path(settings["spark.jars"].split(",")[0]).parent
    shown = str(jar_dir).replace(str(Path.home()), "~", 1)
    if master.startswith("local"):
        _say(f"Spark: {master} with Delta {DELTA_JVM_VERSION} jars from {shown} "
             f"(driver memory {settings['spark.driver.memory']})")
    else:
        ship_package(spark)
        _say(f"Spark: cluster {master} with Delta {DELTA_JVM_VERSION} jars from {shown}")
    return spark


def catalog_is_in_memory(spark: SparkSession) -> bool:
    """Whether the session's catalog forgets its tables when the process ends (a local session without Hive)."""
    if on_databricks():
        return False
    try:
        return str(spark.conf.get("spark.sql.catalogImplementation", "in-memory")) == "in-memory"
    except Exception:  # a session that does not say (Connect to a remote server): its catalog is the server's
        return False


UNION_PARTITIONING = "spark.sql.unionOutputPartitioning"


@contextmanager
def safe_unions(spark: SparkSession) -> Iterator[None]:
    """With adaptive execution off, Spark 4.1+ lets a union report its children's common hash partitioning while
    the partitions it produces can be its children's one after another (SPARK-59141): a join above it then fails
    ("Can't zip RDDs with unequal numbers of partitions", seen in an incremental replay). Inside the block such
    unions report no partitioning (the pre-4.1 behaviour; one more shuffle at worst). With AQE on, or where the
    setting cannot be changed (some serverless sessions), nothing changes."""
    changed, before = False, None
    with suppress(Exception):
        if (spark.conf.get("spark.sql.adaptive.enabled", "true") or "true").lower() != "true":
            before = spark.conf.get(UNION_PARTITIONING, None)
            if before != "false":
                spark.conf.set(UNION_PARTITIONING, "false")
                changed = True
    try:
        yield
    finally:
        if changed:
            with suppress(Exception):
                if before is None:
                    spark.conf.unset(UNION_PARTITIONING)
                else:
                    spark.conf.set(UNION_PARTITIONING, before)


STEP_PROPERTY = "kraft.replay.step"
# Crash-safety tests: the process kills itself (SIGKILL, nothing flushed or cleaned up) right after the step of this
# name ends, or after its N-th run when written `name#N`. Never set outside tests.
CRASH_AFTER_ENV = "KRAFT_REPLAY_CRASH_AFTER"
_steps_run: dict[str, int] = {}


def _crash_after(name: str) -> None:
    target = os.environ.get(CRASH_AFTER_ENV)
    if not target:
        return
    n = _steps_run[name] = _steps_run.get(name, 0) + 1
    if target in (name, f"{name}#{n}"):
        os.kill(os.getpid(), signal.SIGKILL)


@contextmanager
def step(spark: SparkSession, name: str) -> Iterator[None]:
    """Spark jobs started inside the block belong to step `name` of an ingest or replay: it is their description in
    the Spark UI (Delta replaces it on its own jobs) and the job property `kraft.replay.step` in the event log, which
    the benchmark sums per step. Nothing where there is no SparkContext (Spark Connect, serverless). The crash-safety
    test kills the process right after a step of its choice (`CRASH_AFTER_ENV`)."""
    try:
        sc = spark.sparkContext
        before = (sc.getLocalProperty(STEP_PROPERTY), sc.getLocalProperty("spark.job.description"))
        sc.setLocalProperty(STEP_PROPERTY, name)
        sc.setJobDescription(name)
    except Exception:
        yield
        _crash_after(name)
        return
    try:
        yield
    finally:
        sc.setLocalProperty(STEP_PROPERTY, before[0])  # type: ignore[arg-type]  # None removes the property
        sc.setJobDescription(before[1])  # type: ignore[arg-type]
    _crash_after(name)


# The loggers that print a failed task's stack trace (the executor, the scheduler) and a failed MERGE's (Delta).
TASK_FAILURE_LOGGERS = ("org.apache.spark.executor.Executor", "org.apache.spark.scheduler.TaskSetManager",
                        "org.apache.spark.sql.delta.commands.MergeIntoCommand")


@contextmanager
def expected_task_failures(spark: SparkSession) -> Iterator[None]:
    """A block whose Spark job may fail on purpose (`raise_error` in a statement that must fail whole): the error
    reaches the caller, which says what it means, without some 80 lines of Java stack traces on stderr before it.
    The driver's loggers are the JVM's, so keep the block to that statement. Nothing without a JVM gateway (Spark
    Connect: the server logs)."""
    try:
        jvm: Any = spark.sparkContext._jvm
        configurator, level = jvm.org.apache.logging.log4j.core.config.Configurator, jvm.org.apache.logging.log4j.Level
        manager = jvm.org.apache.logging.log4j.LogManager
        before = {name: manager.getLogger(name).getLevel() for name in TASK_FAILURE_LOGGERS}
        for name in TASK_FAILURE_LOGGERS:
            configurator.setLevel(name, level.OFF)
    except Exception:
        yield
        return
    try:
        yield
    finally:
        for name, was in before.items():
            with contextlib.suppress(Exception):
                configurator.setLevel(name, was)
