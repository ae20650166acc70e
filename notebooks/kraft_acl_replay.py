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

# COMMAND ----------

# DBTITLE 1,Make the replay package importable
# Installed as a wheel (cluster library or %pip) it simply imports. From a checkout of the repository (a Databricks
# Git folder, or locally) the repository root is the parent of this notebook's directory.
import os
import sys

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
        from replay.spark.session import _ship_package

        _ship_package(spark)
    except Exception as err:  # serverless and shared clusters have no SparkContext: install the wheel instead
        print(f"could not ship the replay package to the executors ({err}); install the wheel on the cluster")

if nb.on_databricks():
    default_dump, default_lake = "/Volumes/main/kafka_audit/dumps/cluster-a", "main.kafka_audit"
else:
    from replay.demo import default_data_dir, featured_cluster, sample_dirs

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
# MAGIC recomputes the cluster's `acl_events`, `acl_history`, `log_coverage`, `anomalies` and `offset_times`.

# COMMAND ----------

from replay.spark.ingest import ingest
from replay.spark.replay import replay_lake
from replay.spark.tables import Lake

lake = Lake(spark, lake_location)
report = ingest(spark, [dump], cluster=cluster, lake=lake, progress=False)
print("\n".join(report.lines()))
replayed = replay_lake(lake, [cluster])
print("replayed: " + ", ".join(f"{name} {rows}" for name, rows in replayed.items()))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 2. Coverage and anomalies
# MAGIC
# MAGIC `log_coverage` says which offsets are known record by record (`log`), only through a snapshot
# MAGIC (`snapshot`), not at all (`missing`), or lie after a hole no snapshot bridges (`incomplete`: ACLs created in
# MAGIC the hole would be unknown). `anomalies` lists what the replay found odd: snapshot mismatches, duplicate or
# MAGIC unknown ids, divergent copies, open transactions.

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

from replay.cli import format_time
from replay.demo import pick_moment
from replay.kafka.listing import render_acls
from replay.spark.queries import last_offset, offset_at_time, state_at, time_of_offset

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
# MAGIC `anomalies`, `offset_times`, `metadata_records`, `quarantine`), registers the SQL table functions
# MAGIC `acl_state_at(cluster, offset)`, `acl_state_at_time(cluster, ts)` and
# MAGIC `acl_changes_between(cluster, from_offset, to_offset)`, and puts the widget values into SQL session variables
# MAGIC (`kr_cluster`, `kr_offset`, `kr_time`, `kr_to_offset`, `kr_history_table`, `kr_history_version`), so the
# MAGIC `%sql` cells below run as they are.

# COMMAND ----------

from replay.spark.queries import register_sql_functions

for table in ("acl_history", "acl_events", "log_coverage", "anomalies", "offset_times", "metadata_records",
              "quarantine"):
    lake.read(table).createOrReplaceTempView(table)
print("SQL functions:", ", ".join(register_sql_functions(lake)))

compare = nb.parse_moment(compare_text)
if compare is None:
    to_offset = end_offset
elif compare[0] == "offset":
    to_offset = compare[1]
else:
    to_offset = offset_at_time(lake, cluster, compare[1])
    to_offset = -1 if to_offset is None else to_offset
history_version = lake.version("acl_history") or 0
session_variables = {  # name: (SQL type, SQL expression)
    "kr_cluster": ("STRING", nb.sql_literal(cluster)),
    "kr_offset": ("BIGINT", nb.sql_literal(moment_offset)),
    "kr_time": ("TIMESTAMP", f"timestamp_millis({nb.sql_literal(moment_time)})"),
    "kr_to_offset": ("BIGINT", nb.sql_literal(to_offset)),
    "kr_history_table": ("STRING", nb.sql_literal(lake.table_ref("acl_history"))),
    "kr_history_version": ("BIGINT", nb.sql_literal(max(history_version - 1, 0))),  # the version before this replay
}
for name, (sql_type, expression) in session_variables.items():
    spark.sql(f"DECLARE OR REPLACE VARIABLE {name} {sql_type} DEFAULT {expression}")
display(spark.sql("SELECT " + ", ".join(session_variables)))

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
# MAGIC        permission_type, resource_type, resource_name, pattern_type, host
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
# MAGIC EXECUTE IMMEDIATE 'DESCRIBE HISTORY ' || kr_history_table

# COMMAND ----------

# MAGIC %sql
# MAGIC -- Delta time travel: the lifetimes per cluster as the lake held them one version before this run's replay
# MAGIC -- (VERSION AS OF needs a literal, hence EXECUTE IMMEDIATE)
# MAGIC EXECUTE IMMEDIATE
# MAGIC   'SELECT ' || kr_history_version || ' AS version, cluster_id, count(*) AS lifetimes, '
# MAGIC   || 'count_if(valid_to_offset IS NULL) AS live_at_end FROM ' || kr_history_table
# MAGIC   || ' VERSION AS OF ' || kr_history_version || ' GROUP BY cluster_id ORDER BY cluster_id'

# COMMAND ----------

# MAGIC %md
# MAGIC ## 5. Who could access the resource then?
# MAGIC
# MAGIC `replay.spark.audits.who_can`: every principal (and *everyone*) that could perform the operation on the
# MAGIC resource at the audit moment, per host, decided with Kafka's rules, with the ACLs that decided it.

# COMMAND ----------

from pathlib import Path

from replay.demo import broker_settings, busiest_resource, who_could_access_lines

if resource_text:
    _rtype, _, _rname = resource_text.partition(":")
    resource = (_rtype.strip().upper(), _rname.strip())
else:
    resource = busiest_resource(lake, cluster, moment_offset)
# The broker's super.users and allow.everyone.if.no.acl.found change answers: read them from the dump's
# server.properties when it is there (set them here otherwise).
super_users, allow_everyone = broker_settings(Path(dump) if os.path.isdir(dump) else None)
print("\n".join(who_could_access_lines(spark, lake, cluster, moment_offset, resource, super_users, allow_everyone)))
# The same as a DataFrame (and the temporary view `who_can` for SQL): replay.spark.audits.who_can(...)

# COMMAND ----------

# MAGIC %md
# MAGIC ## 6. What changed between the two moments?
# MAGIC
# MAGIC `replay.spark.audits`: the ACLs added and removed (`acl_changes`, also the temporary view `acl_diff`) and
# MAGIC the access gained and lost (`access_changes`, view `access_diff`).

# COMMAND ----------

from replay.spark.audits import access_changes, acl_changes

print(f"Changes after offset {moment_offset} ({format_time(moment_time)}) up to offset {to_offset} "
      f"({format_time(time_of_offset(lake, cluster, to_offset))}):")
acl_diff = acl_changes(spark, lake, cluster, moment_offset, to_offset, view="acl_diff")
display(acl_diff.select("change", "certain", "resource_type", "pattern_type", "resource_name", "principal", "host",
                        "operation", "permission_type"))
access_diff = access_changes(spark, lake, cluster, moment_offset, to_offset, super_users, allow_everyone,
                             view="access_diff")
display(access_diff.select("change", "certain", "who", "host", "operation", "resource_type", "resource_name",
                           "before_decision", "after_decision"))

# COMMAND ----------

# MAGIC %md
# MAGIC ## 7. Plots
# MAGIC
# MAGIC Computed from small aggregates in Spark (offsets and times bucketed before anything is collected), so they
# MAGIC stay cheap on long logs. The dashed line is the audit moment; orange bands are ACLs that may or may not
# MAGIC have been live (history has a gap there); grey spans are offsets no dump holds.

# COMMAND ----------

from replay.spark import plots

principal = principal or plots.busiest_principal(lake, cluster) or "User:*"
figures = {
    "acl_count_by_offset": plots.acl_count_figure(lake, cluster, "offset", mark=moment_offset),
    "acl_count_by_time": plots.acl_count_figure(lake, cluster, "time", mark=moment_time),
    "changes_per_period": plots.changes_figure(lake, cluster, "auto", mark=moment_time),
    "principal_timeline": plots.principal_timeline_figure(lake, cluster, principal, mark=moment_time),
}
for name, fig in figures.items():
    display(fig)

# COMMAND ----------

# MAGIC %md
# MAGIC ## Next
# MAGIC
# MAGIC * Change the widgets (another moment, resource or principal) and run the cells from section 3 on; ingest
# MAGIC   more dumps of the same cluster (other nodes, later days) by pointing `dump` at them: the lake keeps one
# MAGIC   history per cluster and the replay recomputes it.
# MAGIC * Batch questions (millions of access tuples against their as-of state) are a join:
# MAGIC   `replay.spark.authorize.authorize(requests_df, lake)`.
# MAGIC * The same tables answer from a shell: `kraft-replay acls --lake ... --cluster ... --as-of-time ...`,
# MAGIC   `kraft-replay changes`, `kraft-replay sql "SELECT * FROM acl_state_at('cluster-a', 1234)"`.
