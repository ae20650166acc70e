"""The lake as objects, in the style of `DeltaTable.forPath` (issue 13 item 2):

    lake = Lake.at_path(spark, "./lakehouse")          # or Lake.in_catalog(spark, "main.kafka_acls")
    prod = lake.cluster("prod-eu")
    prod.state_at(offset=1200).certain
    prod.who_can("READ", "TOPIC", "payments", time="2026-11-20T14:02:00Z").show()

Each method is a thin call of the function that owns the rule (`queries`, `audits`, `authorize`, `replay`,
`ingest`); those functions stay the API for code that prefers them. This `Lake` is `tables.Lake` with the questions
added: it lives here, above every module it calls, so the lake's core stays free of upward imports.

`state_at` and `states_at` of a lake directory are answered from its files with delta-rs and the Python engine
(`lake_without_spark.LakeFiles`, which keeps a cluster's history between questions while the tables do not change):
a warm question takes milliseconds instead of a Spark query's second. `lake.engine = "spark"` sends them to Spark.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, TypeVar

from pyspark.sql import DataFrame

from replay.kafka import apis
from replay.kafka.times import parse_time
from replay.spark import audits, authorize, authorize_api, queries, tables
from replay.spark.ingest import IngestReport, ingest
from replay.spark.lake_without_spark import LakeFiles, Unreadable
from replay.spark.replay import TableCounts, replay_lake

Moment = int | str | None  # epoch milliseconds, or an ISO-8601 time ("2026-11-20T14:02:00Z"; no zone means UTC)
Users = str | Sequence[str] | None

log = logging.getLogger("replay.spark")
_T = TypeVar("_T")


def _ms(time: Moment) -> int | None:
    return parse_time(time) if isinstance(time, str) else time


class Lake(tables.Lake):
    """`tables.Lake` with its clusters as objects."""

    # "auto": the state questions of a lake directory are read from its files with delta-rs; "spark": by Spark
    engine: Literal["auto", "spark"] = "auto"
    _files: LakeFiles | None = None

    def files(self) -> LakeFiles | None:
        """The lake's files read with delta-rs, or None when Spark answers (`engine`, a catalog, a URI, a lake
        delta-rs cannot read yet: asked again next time, as the tables may appear)."""
        if self.engine == "spark" or self.is_catalog:
            return None
        if self._files is None:
            try:
                self._files = LakeFiles.open(self.location, keep=True)
            except Unreadable as e:
                log.info("asking Spark: %s", e)
        return self._files

    def cluster(self, name: str) -> Cluster:
        """One cluster's questions (nothing is read until one is asked)."""
        return Cluster(self, name)

    def clusters(self) -> list[str]:
        """The clusters whose replayed history the lake holds."""
        return queries.known_clusters(self)

    def replay(self, clusters: Sequence[str] | None = None, full: bool = False,
               high_watermark: int | None = None, progress: bool = False) -> TableCounts:
        """Bring the replay tables of `clusters` (default: every cluster the lake holds rows of) up to date."""
        names = list(clusters) if clusters is not None else self._ingested_clusters()
        return replay_lake(self, names, high_watermark=high_watermark, full=full, progress=progress)

    def _ingested_clusters(self) -> list[str]:
        if not self.exists("metadata_records"):
            return []
        return sorted(r[0] for r in self.read("metadata_records").select("cluster_id").distinct().collect())


@dataclass(frozen=True)
class Cluster:
    """The questions about one cluster of a lake. Times are epoch milliseconds or ISO-8601 text; without an offset
    or a time a question is asked as of the end of the cluster's known history."""

    lake: Lake
    name: str

    # ---- state and history -----------------------------------------------------------------------------------
    def state_at(self, offset: int | None = None, time: Moment = None) -> queries.LakeState:
        answer = self._from_files(lambda files: files.state_at(self.name, offset=offset, time=_ms(time)))
        return answer if answer is not None else queries.state_at(self.lake, self.name, offset=offset, time=_ms(time))

    def states_at(self, offsets: Iterable[int]) -> dict[int, queries.LakeState]:
        """The state at each offset, in one query (e.g. each day's end of an audit period)."""
        wanted = sorted(set(offsets))
        answer = self._from_files(lambda files: files.states_at(self.name, wanted))
        return answer if answer is not None else queries.states_at(self.lake, self.name, wanted)

    def _from_files(self, ask: Callable[[LakeFiles], _T]) -> _T | None:
        """`ask` of the lake's files, or None when Spark answers (`Lake.files`, or replays kept switching while the
        files were read: Spark's snapshot isolation answers then)."""
        files = self.lake.files()
        if files is None:
            return None
        try:
            return ask(files)
        except Unreadable as e:
            log.info("asking Spark: %s", e)
            return None

    def changes(self, start: int | None = None, end: int | None = None, start_time: Moment = None,
                end_time: Moment = None) -> DataFrame:
        """Visible ACL changes with start < offset <= end."""
        return queries.changes_between(self.lake, self.name, start, end, _ms(start_time), _ms(end_time))

    def history(self) -> DataFrame:
        """Every ACL lifetime."""
        return queries.history(self.lake, self.name)

    # ---- authorization ---------------------------------------------------------------------------------------
    def authorize(self, principal: str, host: str, operation: str, resource_type: str, resource_name: str | None,
                  offset: int | None = None, time: Moment = None, super_users: str = "",
                  allow_everyone: bool = False) -> dict[str, Any]:
        """Was it allowed then, and through which ACLs (`resource_name=None`: authorizeByResourceType)."""
        return authorize.authorize_one(self.lake.spark, self.lake, self.name, principal, host, operation,
                                       resource_type, resource_name, offset, _ms(time), super_users, allow_everyone)

    def could_call(self, principal: str, host: str, api: str, offset: int | None = None, time: Moment = None,
                   kafka_version: str = apis.LATEST_KAFKA, super_users: str = "", allow_everyone: bool = False,
                   **resources: Any) -> dict[str, Any]:
        """Could `principal` call the Kafka API `api` then: every check it makes at `kafka_version` on the
        `resources` (`topics=[...]`, `group=[...]`, `transactional_id=`, `token_id=`, `owner=`, `conditions=[...]`,
        `api_version=`), each check's decision and deciding ACLs, and the call's outcome."""
        return authorize_api.authorize_api(self.lake.spark, self.lake, self.name, principal, host, api,
                                           kafka_version=kafka_version, offset=offset, time=_ms(time),
                                           super_users=super_users, allow_everyone=allow_everyone, **resources)

    def which_apis(self, principal: str, host: str, offset: int | None = None, time: Moment = None,
                   kafka_version: str = apis.LATEST_KAFKA, super_users: str = "", allow_everyone: bool = False,
                   **resources: Any) -> dict[str, Any]:
        """Every API that checks ACLs, asked on the `resources` (as `could_call` takes them) at one moment."""
        return authorize_api.which_apis(self.lake.spark, self.lake, self.name, principal, host,
                                        kafka_version=kafka_version, offset=offset, time=_ms(time),
                                        super_users=super_users, allow_everyone=allow_everyone, **resources)

    # ---- audits ----------------------------------------------------------------------------------------------
    def who_can(self, operation: str, resource_type: str, resource_name: str, offset: int | None = None,
                time: Moment = None, super_users: Users = "", allow_everyone: bool = False) -> DataFrame:
        return audits.who_can(self.lake.spark, self.lake, self.name, operation, resource_type, resource_name,
                              offset, _ms(time), super_users, allow_everyone)

    def what_can(self, principal: str, offset: int | None = None, time: Moment = None, super_users: Users = "",
                 allow_everyone: bool = False) -> DataFrame:
        return audits.what_can(self.lake.spark, self.lake, self.name, principal, offset, _ms(time), super_users,
                               allow_everyone)

    def acl_changes(self, start: int | None, end: int | None) -> DataFrame:
        return audits.acl_changes(self.lake.spark, self.lake, self.name, start, end)

    def access_changes(self, start: int | None, end: int | None, super_users: Users = "",
                       allow_everyone: bool = False) -> DataFrame:
        return audits.access_changes(self.lake.spark, self.lake, self.name, start, end, super_users, allow_everyone)

    def timeline(self, principal: str | None = None, resource_type: str | None = None,
                 resource_name: str | None = None, operation: str | None = None, super_users: Users = "",
                 allow_everyone: bool = False) -> DataFrame:
        return audits.timeline(self.lake.spark, self.lake, self.name, principal, resource_type, resource_name,
                               operation, super_users, allow_everyone)

    def risky_grants(self, offset: int | None = None, time: Moment = None, over_time: bool = True,
                     allow_everyone: bool | None = None) -> DataFrame:
        return audits.risky_grants(self.lake.spark, self.lake, self.name, offset, _ms(time), over_time,
                                   allow_everyone=allow_everyone)

    # ---- loading ---------------------------------------------------------------------------------------------
    def ingest(self, paths: str | Sequence[str], strict: bool = False, show_secrets: bool = False,
               progress: bool = False, decode_all: bool = False) -> IngestReport:
        """Decode dumps of this cluster into the lake's bronze tables; `replay()` then brings its history up to
        date (the CLI's `ingest` does both). Bytes an earlier ingest read are not decoded again unless
        `decode_all`."""
        return ingest(self.lake.spark, paths, self.name, self.lake, strict=strict, progress=progress,
                      show_secrets=show_secrets, decode_all=decode_all)

    def replay(self, full: bool = False, high_watermark: int | None = None, progress: bool = False) -> TableCounts:
        return replay_lake(self.lake, [self.name], high_watermark=high_watermark, full=full, progress=progress)
