# Databricks notebook source
# MAGIC %md
# MAGIC # Kafka ACL history: replay a KRaft metadata log and audit it
# MAGIC
# MAGIC This notebook reads dumps of a Kafka cluster's metadata log (`__cluster_metadata-0`: `*.log` segments,
# MAGIC `*.checkpoint` snapshots, or `kafka-dump-log` text) into Delta tables of ACL history, then answers
# MAGIC *as-of* questions: which ACLs existed at a moment, who could access a resource then, what changed between
# MAGIC two moments. Answers follow Kafka's StandardAuthorizer; where history has holes (retention deleted old
# MAGIC segments) they say what is *uncertain* instead of guessing.
# MAGIC
# MAGIC **On Databricks.** Put the dump files in a Volume (e.g. `/Volumes/main/kafka_audit/dumps/cluster-a/`,
# MAGIC copied from a broker's `metadata.log.dir`), make the `replay` package available (clone the repository as a
# MAGIC Git folder and open this notebook there, or install the `kraft-acl-replay` wheel on the cluster without
# MAGIC extras: the runtime brings Spark and Delta), fill in the widgets at the top and *Run all*.
# MAGIC
# MAGIC **Locally.** The same file runs with Spark in local mode: `python -m replay.notebook notebooks/kraft_acl_replay.py`
# MAGIC (widgets take their values from `-p name=value`, then from `KRAFT_REPLAY_<NAME>` environment variables,
# MAGIC then from the defaults: the sample dumps in `data/` and a lake in `./lakehouse`).
# MAGIC
# MAGIC | widget | meaning |
# MAGIC |---|---|
# MAGIC | `dump` | directory (or file) holding the dump of one cluster |
# MAGIC | `cluster` | the cluster's name in the lake (default: the dump directory's name) |
# MAGIC | `lake` | `catalog.schema` (Unity Catalog) or a directory for path-based Delta tables |
# MAGIC | `moment` | the audit moment: ISO-8601 time (`2026-11-20T14:02:00Z`), or a log offset (a plain number); empty: 60% into the history |
# MAGIC | `compare_to` | the second moment for "what changed"; empty: the end of known history |
# MAGIC | `resource` | `TYPE:name` for "who could access", e.g. `TOPIC:payments`; empty: the topic with most ACLs then |
# MAGIC | `principal` | whose access timeline to plot, e.g. `User:alice`; empty: the principal named by most ACLs |
# MAGIC | `wheel` | a `kraft_acl_replay` wheel (or a directory holding one) to `%pip install` first: serverless compute, or the bundle's job (`databricks.yml`) |

# COMMAND ----------

# DBTITLE 1,Make the replay package importable
# Installed as a wheel (cluster library or %pip) it simply imports. On serverless compute the `wheel` widget (a
# wheel file, or the directory holding it: the bundle's job passes its dist/) is installed with %pip, which also
# makes it importable on the executors. From a checkout of the repository (a Databricks Git folder, or locally) the
# repository root is the parent of this notebook's directory.
import glob
import os
import sys


def _wheel_to_install() -> str:
    """The `wheel` widget (on Databricks) or KRAFT_REPLAY_WHEEL: a wheel file, or the newest in a directory."""
    handle = globals().get("dbutils")
    if handle is not None:
        handle.widgets.text("wheel", "", "Wheel to %pip install (file or directory)")
        wanted = handle.widgets.get("wheel").strip()
    else:
        wanted = os.environ.get("KRAFT_REPLAY_WHEEL", "").strip()
    if wanted and not os.path.exists(wanted) and os.path.exists("/Workspace" + wanted):
        wanted = "/Workspace" + wanted  # a workspace path as the bundle names it
    if wanted and os.path.isdir(wanted):
        found = sorted(glob.glob(os.path.join(wanted, "kraft_acl_replay-*.whl")), key=os.path.getmtime)
        if not found:
            raise FileNotFoundError(f"no kraft_acl_replay-*.whl in {wanted}: build one with "
                                    "`pip wheel --no-deps -w dist .` (the bundle's deploy does)")
        wanted = found[-1]
    return wanted


_wheel = _wheel_to_install()
if _wheel:
    if "get_ipython" in globals():
        get_ipython().run_line_magic("pip", f"install --quiet {_wheel}")  # noqa: F821 - %pip, with a variable
    else:
        import subprocess

        subprocess.check_call([sys.executable, "-m", "pip", "install", "--quiet", _wheel])

try:
    import replay  # noqa: F401
    _replay_from_path = None
except ImportError:
    _here = os.path.dirname(os.path.abspath(globals().get("__file__") or os.path.join(os.getcwd(), "notebook")))
    _replay_from_path = next(
        (root for root in (os.environ.get("KRAFT_REPLAY_HOME", ""), os.path.dirname(_here), _here, os.getcwd(),
                           os.path.dirname(os.getcwd()))
         if root and os.path.isfile(os.path.join(root, "replay", "__init__.py"))), None)
    if _replay_from_path is None:
        raise ImportError("cannot import the `replay` package: install the kraft-acl-replay wheel on this cluster, "
                          "or open this notebook from a checkout (Git folder) of the repository") from None
    sys.path.insert(0, _replay_from_path)
    import replay  # noqa: F401

print(f"replay package: {os.path.dirname(replay.__file__)}")

# COMMAND ----------

# DBTITLE 1,Session, display, widgets
from replay import notebook as nb

spark = nb.spark_session(globals())
display = nb.display_function(globals())
dbutils = nb.dbutils_handle(globals(), spark)

if nb.on_databricks() and _replay_from_path is not None:
    # The executors decode the files, so they need the package too: ship the checkout as a zip (classic clusters).
    try:
        from replay.spark.session import ship_package

        ship_package(spark)
    except Exception as err:  # serverless and shared clusters have no SparkContext: install the wheel instead
        print(f"could not ship the replay package to the executors ({err}); install the wheel on the cluster")

if nb.on_databricks():
    default_dump, default_lake = "/Volumes/main/kafka_audit/dumps/cluster-a", "main.kafka_audit"
else:
    from replay.kafka.samples import default_data_dir, featured_cluster, sample_dirs

    _data = default_data_dir()
    _samples = sample_dirs(_data) if _data else []
    _names = [p.name for p in _samples]
    default_dump = str(_samples[_names.index(featured_cluster(_names))]) if _samples else ""
    default_lake = "./lakehouse"

dump = nb.widget(dbutils, "dump", default_dump, "Dump location")
lake_location = nb.widget(dbutils, "lake", default_lake, "Lake (catalog.schema or directory)")
cluster = nb.widget(dbutils, "cluster", "", "Cluster name") or os.path.basename(dump.rstrip("/")) or "cluster-a"
moment_text = nb.widget(dbutils, "moment", "", "Audit moment (ISO time or offset)")
compare_text = nb.widget(dbutils, "compare_to", "", "Compare with (ISO time or offset)")
resource_text = nb.widget(dbutils, "resource", "", "Resource TYPE:name")
principal = nb.widget(dbutils, "principal", "", "Principal for the timeline")
if not dump:
    raise ValueError("set the `dump` widget to the directory holding the metadata log dump")
print(f"Spark {spark.version}; dump {dump}; cluster {cluster!r}; lake {lake_location}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 1. Ingest
# MAGIC
# MAGIC The files are decoded on the executors into `metadata_records` (every record, typed) and `quarantine`
# MAGIC (whatever could not be read, with why and where). Ingest is idempotent: records the lake already holds are
# MAGIC not written again, so dumps from several nodes and days can be added in any order. The replay then
# MAGIC brings the cluster's `acl_events`, `acl_history`, `log_coverage`, `anomalies` and `offset_times` up to
# MAGIC date: from the last settled snapshot when everything new lies after it, else from the start
# MAGIC (`replay_state` says which it did and why).

# COMMAND ----------

from replay.spark.ingest import ingest
from replay.spark.replay import replay_lake
from replay.spark.tables import Lake

lake = Lake(spark, lake_location)
report = ingest(spark, [dump], cluster=cluster, lake=lake, progress=False)
print("\n".join(report.lines()))
history_version_before = lake.version("acl_history")  # for time travel in section 4 (None: no table yet)
replayed = replay_lake(lake, [cluster])
print("replayed: " + ", ".join(f"{name} {rows}" for name, rows in replayed.items()))
print("\n".join(replayed.findings().lines()))  # what the replay found, decoder problems included, as the CLI says it
replay_state = lake.read("replay_state")
print("how: {mode}, {reason}".format(**replay_state.where(replay_state["cluster_id"] == cluster).first().asDict()))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Coverage and anomalies
# MAGIC
# MAGIC `log_coverage` says which offsets are known record by record (`log`), only through a snapshot
# MAGIC (`snapshot`), or not at all (`missing`: offsets no dump holds, e.g. segments retention deleted). A range of
# MAGIC kind `incomplete` overlaps the others: there, ACLs that no dump recorded may have been live (created and
# MAGIC removed again inside a hole, or removed by a record for an id never seen), so an answer there can miss some
# MAGIC ACLs. An ACL a snapshot shows appearing or disappearing changed somewhere in the offsets no dump holds, so
# MAGIC its uncertain bound lies inside the hole and answers where the log resumes are exact. `anomalies` lists what the replay found odd: gaps, snapshot
# MAGIC mismatches, duplicate or unknown ids, divergent copies, open transactions.

# COMMAND ----------

from pyspark.sql import functions as F

coverage = lake.read("log_coverage").where(F.col("cluster_id") == cluster)
display(coverage.select("start_offset", "end_offset", "kind", "source").orderBy("start_offset", "kind"))
anomalies = lake.read("anomalies").where(F.col("cluster_id") == cluster)
display(anomalies.groupBy("kind").agg(F.count(F.lit(1)).alias("findings"), F.min("offset").alias("first_offset"),
                                      F.first("message").alias("example")).orderBy("kind"))
quarantined = lake.read("quarantine").where(F.col("cluster_id") == cluster).count()
print(f"{quarantined} undecodable piece(s) in quarantine for {cluster}")

# COMMAND ----------

# MAGIC %md
# MAGIC ## 3. The ACLs as of the audit moment
# MAGIC
# MAGIC "As of time T" is as of the last offset whose batch was appended at or before T. The listing is what
# MAGIC `kafka-acls --list` would have printed then; ACLs that may or may not have been live (their creation or
# MAGIC removal lies inside a hole) are listed apart.

# COMMAND ----------

from replay.kafka.listing import render_acls
from replay.kafka.times import format_time
from replay.spark.queries import last_offset, offset_at_time, state_at, time_of_offset
from replay.spark.tour import pick_moment

moment = nb.parse_moment(moment_text)
if moment is None:
    picked = pick_moment(lake, cluster)
    moment_offset, moment_time = picked.offset, picked.time
elif moment[0] == "offset":
    moment_offset, moment_time = moment[1], time_of_offset(lake, cluster, moment[1])
else:
    moment_offset, moment_time = offset_at_time(lake, cluster, moment[1]), moment[1]
    if moment_offset is None:
        raise ValueError(f"{moment_text!r} is before anything the lake knows about cluster {cluster}")
end_offset = last_offset(lake, cluster)
state = state_at(lake, cluster, offset=moment_offset)
print(f"Audit moment: offset {moment_offset} ({format_time(moment_time)}); history known up to offset {end_offset}")
print(f"{len(state.certain)} ACL(s) certainly live, {len(state.uncertain)} uncertain; "
      f"covered={state.covered} complete={state.complete} exact={state.exact}\n")
print("\n".join(render_acls(state.certain, "kafka-acls", state.uncertain, state.meta())))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 4. Time-travel SQL
# MAGIC
# MAGIC The next cell names the lake's tables as temporary views (`acl_history`, `acl_events`, `log_coverage`,
# MAGIC `anomalies`, `offset_times`, `metadata_records`, `quarantine`) and registers these SQL table functions
# MAGIC (offsets are log offsets; `super_users` is the broker's `super.users` text, `'User:admin;User:ops'`):
# MAGIC
# MAGIC | function | answers |
# MAGIC |---|---|
# MAGIC | `acl_state_at(cluster, offset)`, `acl_state_at_time(cluster, ts)` | the ACLs then, each `certain` or `uncertain` |
# MAGIC | `acl_coverage_at(cluster, offset)`, `acl_coverage_at_time(cluster, ts)` | how far that answer can be trusted: one row with `covered` (a dump holds the offset), `complete` (no ACL that no dump recorded may have been live), `exact` (both, and no ACL of uncertain liveness), `certain_acls`, `uncertain_acls` |
# MAGIC | `acl_changes_between(cluster, from_offset, to_offset)` | the visible changes with from < offset <= to |
# MAGIC | `acl_who_can(cluster, operation, resource_type, resource_name, at_offset, super_users, allow_everyone)` | who could do it then, per host, through which ACLs |
# MAGIC | `acl_what_can(cluster, principal, at_offset, super_users, allow_everyone)` | what a principal could do then |
# MAGIC | `acl_diff(cluster, from_offset, to_offset)` | the ACLs added and removed (`maybe_*` where history is uncertain) |
# MAGIC | `acl_access_changes(cluster, from_offset, to_offset, super_users, allow_everyone)` | the access gained and lost |
# MAGIC | `acl_timeline(cluster, principal, resource_type, resource_name, operation, super_users, allow_everyone)` | decision intervals of a principal (resource NULL) or of a resource (principal NULL) |
# MAGIC | `acl_risky_grants(cluster, at_offset, allow_everyone)` | risky ACLs (over all history when `at_offset` is NULL) |
# MAGIC | `acl_could_call(cluster, principal, host, api, at_offset, topics => ..., groups => ..., kafka_version => ...)`, `acl_could_call_at_time(..., ts, ...)` | could the principal call the Kafka API (`OffsetFetch`, `InitProducerId`, ...) then: every check that Kafka version makes, its decision, and the call's outcome |
# MAGIC
# MAGIC It also puts the widget values and the broker settings into SQL session variables (`kr_cluster`, `kr_offset`,
# MAGIC `kr_time`, `kr_to_offset`, `kr_super_users`, `kr_allow_everyone`, `kr_history_table`, `kr_history_version`),
# MAGIC and the two statements that need the table name or version as literals into `kr_describe_history_sql` and
# MAGIC `kr_time_travel_sql` (`EXECUTE IMMEDIATE` takes a string literal or a variable), so the `%sql` cells below run
# MAGIC as they are.

# COMMAND ----------

from pathlib import Path

from replay.kafka.samples import broker_settings
from replay.spark.audits import register_audit_functions
from replay.spark.authorize_api_sql import register_api_functions
from replay.spark.queries import register_sql_functions

lake.name_tables()  # SELECT * FROM anomalies, acl_history, ... name the lake's tables
print("SQL functions:", ", ".join(register_sql_functions(lake) + register_audit_functions(spark, lake)
                                  + register_api_functions(spark, lake)))

# The broker's super.users and allow.everyone.if.no.acl.found change answers: read them from the dump's
# server.properties when it is there (set them here otherwise).
super_users, allow_everyone = broker_settings(Path(dump) if os.path.isdir(dump) else None)

compare = nb.parse_moment(compare_text)
if compare is None:
    to_offset = end_offset
elif compare[0] == "offset":
    to_offset = compare[1]
else:
    to_offset = offset_at_time(lake, cluster, compare[1])
    to_offset = -1 if to_offset is None else to_offset

# Time travel shows acl_history at a version that holds rows: the version before this run's replay when an earlier
# replay wrote rows there (the lake as it was before this ingest: other clusters, this cluster's older history);
# otherwise (a fresh lake, where that version is the empty table Delta created) the current version, this replay's.
history_table = lake.table_ref("acl_history")
history_version = lake.version("acl_history") or 0
if (history_version_before is not None and history_version_before < history_version
        and lake.read("acl_history", version=history_version_before).limit(1).count()):
    time_travel_version, time_travel_why = history_version_before, "the version before this run's replay"
else:
    time_travel_version, time_travel_why = history_version, "the current version: no earlier version holds rows"
session_variables = {  # name: (SQL type, SQL expression)
    "kr_cluster": ("STRING", nb.sql_literal(cluster)),
    "kr_offset": ("BIGINT", nb.sql_literal(moment_offset)),
    "kr_time": ("TIMESTAMP", f"timestamp_millis({nb.sql_literal(moment_time)})"),
    "kr_to_offset": ("BIGINT", nb.sql_literal(to_offset)),
    "kr_super_users": ("STRING", nb.sql_literal(super_users)),
    "kr_allow_everyone": ("BOOLEAN", nb.sql_literal(allow_everyone)),
    "kr_history_table": ("STRING", nb.sql_literal(history_table)),
    "kr_history_version": ("BIGINT", nb.sql_literal(time_travel_version)),
    "kr_describe_history_sql": ("STRING", nb.sql_literal(f"DESCRIBE HISTORY {history_table}")),
    "kr_time_travel_sql": ("STRING", nb.sql_literal(
        f"SELECT {time_travel_version} AS version, cluster_id, count(*) AS lifetimes, "
        f"count_if(valid_to_offset IS NULL) AS live_at_end FROM {history_table} VERSION AS OF {time_travel_version} "
        "GROUP BY cluster_id ORDER BY cluster_id")),
}
display(nb.declare_sql_variables(spark, session_variables))
print(f"time travel reads acl_history version {time_travel_version}: {time_travel_why}")

# COMMAND ----------

# MAGIC %sql
# MAGIC -- How far the answers can be trusted, at the audit moment, at the compared moment and at offset 0 (the start of
# MAGIC -- the log, which retention usually deleted). covered: a dump holds the offset; complete: no ACL that no dump
# MAGIC -- recorded may have been live there; exact: both, and no ACL of uncertain liveness (uncertain_acls = 0)
# MAGIC SELECT 'audit moment' AS moment, * FROM acl_coverage_at(kr_cluster, kr_offset)
# MAGIC UNION ALL SELECT 'compared moment', * FROM acl_coverage_at(kr_cluster, kr_to_offset)
# MAGIC UNION ALL SELECT 'start of the log', * FROM acl_coverage_at(kr_cluster, 0)

# COMMAND ----------

# MAGIC %sql
# MAGIC -- The ACLs as of the audit offset, from the SQL table function (certainty: certain | uncertain)
# MAGIC SELECT resource_type, resource_name, pattern_type, principal, host, operation, permission_type, certainty,
# MAGIC        valid_from_offset, valid_to_offset
# MAGIC FROM acl_state_at(kr_cluster, kr_offset)
# MAGIC ORDER BY resource_type, resource_name, pattern_type, principal, operation, permission_type

# COMMAND ----------

# MAGIC %sql
# MAGIC -- The same moment by time: how many ACLs, by permission and certainty
# MAGIC SELECT permission_type, certainty, count(*) AS acls
# MAGIC FROM acl_state_at_time(kr_cluster, kr_time)
# MAGIC GROUP BY permission_type, certainty
# MAGIC ORDER BY permission_type, certainty

# COMMAND ----------

# MAGIC %sql
# MAGIC -- Every change after the audit moment, up to the compared moment (an inexact change happened somewhere in
# MAGIC -- [offset_min, offset], inside a hole)
# MAGIC SELECT offset, offset_min, exact, timestamp_millis(time) AS time, change, cause, principal, operation,
# MAGIC        permission_type, resource_type, resource_name, pattern_type, host, acl_id
# MAGIC FROM acl_changes_between(kr_cluster, kr_offset, kr_to_offset)
# MAGIC ORDER BY offset

# COMMAND ----------

# MAGIC %sql
# MAGIC -- Plain SQL over the lifetimes: the longest-lived DENY ACLs and how their lifetimes began and ended
# MAGIC SELECT principal, operation, resource_type, resource_name, pattern_type, host,
# MAGIC        valid_from_offset, valid_from_exact, began_by, valid_to_offset, valid_to_exact, ended_by,
# MAGIC        coalesce(valid_to_offset, (SELECT max(end_offset) + 1 FROM log_coverage WHERE cluster_id = kr_cluster))
# MAGIC          - valid_from_offset AS offsets_live
# MAGIC FROM acl_history
# MAGIC WHERE cluster_id = kr_cluster AND permission_type = 'DENY'
# MAGIC ORDER BY offsets_live DESC, principal
# MAGIC LIMIT 20

# COMMAND ----------

# MAGIC %sql
# MAGIC -- Delta's own history of the lake table: one commit per ingest or replay, with what it covered in userMetadata
# MAGIC EXECUTE IMMEDIATE kr_describe_history_sql

# COMMAND ----------

# MAGIC %sql
# MAGIC -- Delta time travel: the lifetimes per cluster as acl_history held them at version kr_history_version, which is
# MAGIC -- the version before this run's replay when an earlier replay wrote rows (what the lake knew before this
# MAGIC -- ingest), else the current one (on a fresh lake the earlier version is the empty table Delta created).
# MAGIC -- VERSION AS OF needs a literal, so the setup cell of this section builds the statement.
# MAGIC EXECUTE IMMEDIATE kr_time_travel_sql

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. Who could access the resource then?
# MAGIC
# MAGIC `replay.spark.audits.who_can`: every principal (and *everyone*) that could perform the operation on the
# MAGIC resource at the audit moment, per host, decided with Kafka's rules and the broker's `super.users` and
# MAGIC `allow.everyone.if.no.acl.found`, with the ACLs that decided it. The `%sql` cell after it asks the same from
# MAGIC SQL with `acl_who_can`.

# COMMAND ----------

from replay.spark.tour import busiest_resource, who_could_access

if resource_text:
    _rtype, _, _rname = resource_text.partition(":")
    resource = (_rtype.strip().upper(), _rname.strip())
else:  # the busiest literal topic then; with none, what holds for every topic (the LITERAL `*` pattern)
    resource = busiest_resource(lake, cluster, moment_offset) or ("TOPIC", "*")
who = who_could_access(spark, lake, cluster, moment_offset, resource, super_users, allow_everyone)
print("\n".join(who.lines()))
nb.declare_sql_variables(spark, {"kr_operation": ("STRING", nb.sql_literal(who.operation)),
                                 "kr_resource_type": ("STRING", nb.sql_literal(who.resource_type)),
                                 "kr_resource_name": ("STRING", nb.sql_literal(who.resource_name))})
# The same as a DataFrame (and the temporary view `who_can` for SQL): replay.spark.audits.who_can(...)

# COMMAND ----------

# MAGIC %sql
# MAGIC -- The same decision audit from SQL: who could do kr_operation on kr_resource_type kr_resource_name as of
# MAGIC -- kr_offset, with the broker's super.users (kr_super_users) and allow.everyone.if.no.acl.found (kr_allow_everyone)
# MAGIC SELECT who, from_host, decision, certain, reason, deciding_acl_ids, via
# MAGIC FROM acl_who_can(kr_cluster, kr_operation, kr_resource_type, kr_resource_name, kr_offset, kr_super_users,
# MAGIC                  kr_allow_everyone)

# COMMAND ----------

# MAGIC %md
# MAGIC **Which Kafka APIs could a principal call on it then?** An API call makes several checks, and which depends on
# MAGIC the Kafka version (OffsetFetch needs the group's DESCRIBE since 1.0, READ before; an idempotent producer's
# MAGIC InitProducerId accepts WRITE on any topic since 2.8). `replay.spark.authorize_api.which_apis` asks every API on
# MAGIC the resource at the audit moment, for the `principal` widget (empty: the principal named by most ACLs) calling
# MAGIC from 10.0.0.1; `authorize_api(..., "OffsetFetch", group=[...], topics=[...], kafka_version="0.11")` asks one
# MAGIC and shows every check with its deciding ACLs (the CLI: `kraft-replay authorize --api NAME` / `--which-apis`).

# COMMAND ----------

from replay.spark import plots
from replay.spark.authorize_api import which_apis
from replay.spark.authorize_render import render_which_apis

api_principal = principal or plots.busiest_principal(lake, cluster) or "User:*"
api_resources = {"TOPIC": {"topics": [resource[1]]}, "GROUP": {"group": [resource[1]]},
                 "TRANSACTIONAL_ID": {"transactional_id": resource[1]}}.get(resource[0], {})
apis_then = which_apis(spark, lake, cluster, api_principal, "10.0.0.1", offset=moment_offset,
                       super_users=super_users, allow_everyone=allow_everyone, **api_resources)
print("\n".join(render_which_apis(apis_then)))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 6. What changed between the two moments?
# MAGIC
# MAGIC `replay.spark.audits`: the ACLs added and removed (`acl_changes`, also the temporary view `acl_diff`) and
# MAGIC the access gained and lost (`access_changes`, view `access_diff`). From SQL: `acl_diff(cluster, from, to)` and
# MAGIC `acl_access_changes(cluster, from, to, super_users, allow_everyone)`.

# COMMAND ----------

from replay.spark.audits import access_changes, acl_changes

print(f"Changes after offset {moment_offset} ({format_time(moment_time)}) up to offset {to_offset} "
      f"({format_time(time_of_offset(lake, cluster, to_offset))}):")
acl_diff = acl_changes(spark, lake, cluster, moment_offset, to_offset, view="acl_diff")
display(acl_diff.select("change", "certain", "acl_id", "resource_type", "pattern_type", "resource_name", "principal",
                        "host", "operation", "permission_type"))
access_diff = access_changes(spark, lake, cluster, moment_offset, to_offset, super_users, allow_everyone,
                             view="access_diff")
display(access_diff.select("change", "certain", "who", "principal", "host", "operation", "resource_type",
                           "resource_name", "before_decision", "after_decision"))

# COMMAND ----------

# MAGIC %sql
# MAGIC -- The ACL changes counted, from the SQL function acl_diff (maybe_added / maybe_removed where history is uncertain)
# MAGIC SELECT change, certain, count(*) AS acls
# MAGIC FROM acl_diff(kr_cluster, kr_offset, kr_to_offset)
# MAGIC GROUP BY change, certain
# MAGIC ORDER BY change, certain

# COMMAND ----------

# MAGIC %md
# MAGIC ## 7. Plots
# MAGIC
# MAGIC Computed from small aggregates in Spark (offsets and times bucketed before anything is collected), so they
# MAGIC stay cheap on long logs: the ACL count over offsets and over time, the ACL changes per day, and one principal's
# MAGIC access timeline. The changes are counted per day when they span at least two days; over a shorter span per
# MAGIC the shortest period that fits (seconds to hours), and the plot's title says which period and why. The dashed
# MAGIC line is the audit moment; orange bands are ACLs that may or may not have been live (their creation or removal
# MAGIC lies inside a hole); grey spans are offsets no dump holds; hatched spans are where the history is incomplete
# MAGIC (ACLs that no dump recorded may have been live there).

# COMMAND ----------

from replay.spark import plots

principal = principal or plots.busiest_principal(lake, cluster) or "User:*"
figures = {
    "acl_count_by_offset": plots.acl_count_figure(lake, cluster, "offset", mark=moment_offset),
    "acl_count_by_time": plots.acl_count_figure(lake, cluster, "time", mark=moment_time),
    "changes_per_day": plots.changes_per_day_figure(lake, cluster, mark=moment_time),
    "principal_timeline": plots.principal_timeline_figure(lake, cluster, principal, mark=moment_time),
}
for name, fig in figures.items():
    display(fig)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 8. Did the brokers decide as the ACLs said? (authorizer logs)
# MAGIC
# MAGIC A broker's authorizer log (`kafka.authorizer.logger`; at DEBUG it logs allowed requests too) checked against
# MAGIC the replayed history of the same cluster: the logs are ingested into the lake's `access_events` table on the
# MAGIC executors (`ingest_access_logs`, idempotent like the dump ingest), and each logged decision is verified in
# MAGIC Spark (`verdicts_of`, the same query as the SQL function `acl_verify_access`): `consistent`, `inconsistent`
# MAGIC (with why: another decision, another rule or ACL, a super user nobody named) or `unknown` (a hole, a time
# MAGIC before the history). Then the ACLs that decided no logged request, unused first, and per principal what
# MAGIC its ALLOWs grant against what it used (least privilege, `unused_access`), as a table and a plot. The
# MAGIC widgets `authorizer_log` (log files or directories, comma-separated) and `authorizer_dumps` (that cluster's
# MAGIC dumps, ingested as `authorizer_cluster`) default to the sample `data/authorizer-log/`, a real broker's dump
# MAGIC and log from one run; `super_users` and `log_time_zone` are the broker's.

# COMMAND ----------

from replay.spark.access_ingest import ingest_access_logs
from replay.spark.unused_access import unused_access
from replay.spark.access_sql import register_access_functions
from replay.spark.verify_access import verdicts_of

_log_sample = os.path.join(_data, "authorizer-log") if not nb.on_databricks() and _data else ""
_log_sample = _log_sample if _log_sample and os.path.isdir(_log_sample) else ""
authorizer_log = nb.widget(dbutils, "authorizer_log", os.path.join(_log_sample, "broker-logs", "kafka-authorizer.log")
                           if _log_sample else "", "Authorizer log files (comma-separated)")
authorizer_dumps = nb.widget(dbutils, "authorizer_dumps", os.path.join(_log_sample, "dump") if _log_sample else "",
                             "Dumps of the logging cluster")
authorizer_cluster = nb.widget(dbutils, "authorizer_cluster", "authorizer-sample", "Its cluster name in the lake")
super_users = nb.widget(dbutils, "super_users", "User:ANONYMOUS;User:admin" if _log_sample else "", "super.users")
log_time_zone = nb.widget(dbutils, "log_time_zone", "Europe/Berlin" if _log_sample else "UTC",
                          "Zone of the log's dates")
if authorizer_log and authorizer_dumps:
    logs = [p.strip() for p in authorizer_log.split(",") if p.strip()]
    ingest(spark, [authorizer_dumps], cluster=authorizer_cluster, lake=lake, progress=False)
    replay_lake(lake, [authorizer_cluster], progress=False)
    print(ingest_access_logs(spark, logs, authorizer_cluster, lake, zone=log_time_zone, progress=False))
    verdicts = verdicts_of(lake, authorizer_cluster, super_users=super_users).orderBy("time", "line")
    display(verdicts.groupBy("verdict").count())
    display(verdicts.select("verdict", "time", "principal", "operation", "resource_type", "resource_name",
                            "decision", "rule_kind", "why"))
    register_access_functions(spark, lake)
    display(spark.sql(f"SELECT verdict, count(*) AS decisions FROM acl_verify_access('{authorizer_cluster}', "
                      f"super_users => '{super_users}') GROUP BY verdict"))
    found = unused_access(lake, authorizer_cluster, super_users=super_users)
    print(found.counts)
    display(found.acls)
    principals = found.principals.collect()  # one row per principal, shown as a table and a plot: computed once
    display(spark.createDataFrame(principals, found.principals.schema))
    display(plots.granted_used_figure([r.asDict() for r in principals], authorizer_cluster))
else:
    print("no authorizer log given: set the `authorizer_log` and `authorizer_dumps` widgets")

# COMMAND ----------

# MAGIC %md
# MAGIC ## Next
# MAGIC
# MAGIC * Change the widgets (another moment, resource or principal) and run the cells from section 3 on; ingest
# MAGIC   more dumps of the same cluster (other nodes, later days) by pointing `dump` at them: the lake keeps one
# MAGIC   history per cluster and the replay recomputes it.
# MAGIC * Batch questions (millions of access tuples against their as-of state) are a join:
# MAGIC   `replay.spark.authorize.authorize(requests_df, lake)`.
# MAGIC * The same tables answer from a shell: `kraft-replay acls --lake ... --lake-cluster ... --as-of-time ...`,
# MAGIC   `kraft-replay changes`, `kraft-replay sql "SELECT * FROM acl_state_at('cluster-a', 1234)"`.
