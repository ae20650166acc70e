"""Realistic `__cluster_metadata` dumps for the pipeline benchmark, generated deterministically from a seed.

A controller's metadata log is mostly not ACLs. What this writes, as the active controller would:

* NoOp records (~70% of the records): one every 500 ms of append time (`metadata.max.idle.interval.ms`), each
  alone in a batch at the leader's epoch;
* cluster records (~20%): partition leader/ISR changes (several per batch after a broker restart), topic creates
  (TopicRecord, its PartitionRecords and ConfigRecords in one batch) and deletes, config changes, broker
  registrations, fences and unfences, producer id blocks; they come in bursts between quiet stretches;
* ACL creates and removes (~8%, `acl_share`): CreateAcls / DeleteAcls batches of 1-10 records, some of them inside
  metadata transactions spanning several batches (Begin ... End), the ACL set hovering around `live_acls`;
* leader failovers (a LEADER_CHANGE control batch at the next epoch), some interrupting a transaction, which the new
  leader then aborts (AbortTransaction) as Kafka's activation does;
* a snapshot `<end offset>-<epoch>.checkpoint` every `snapshot_every` records (a quarter of a smaller log), always at a NoOp (never inside a
  transaction), holding the state at its end: feature level, brokers, topics with their partitions, configs,
  producer ids and the ACLs;
* segments of at most 64 MiB (`segment.bytes` of the metadata log), rolled before the batch that would overflow
  them, named after their base offset. `codec="zstd"` compresses every data batch (control batches never are).

Everything goes through the project's writer (`replay.kafka.writer`): values by `encode_metadata_value`, batches by
`encode_batch`; the NoOp batch, the same every time but for its offset, epoch and time, has its records area built
once and gets a fresh header and CRC from `writer.assemble_batch`. That keeps 10M records to about a minute.

`generate(shape, directory)` writes the dump under `directory/__cluster_metadata-0` and returns a manifest (also
written as `manifest.json` next to it) with the counts, sizes, snapshot ends and, for the benchmark's questions,
the number of live ACLs after some NoOp offsets (state after every visible record <= N: committed transactions
only), so an answer can be checked without another tool. `cached(shape, root)` generates once per shape into
`root/<shape.name>` and reuses it afterwards.

    python -m bench.realistic_log --records 250k --codec zstd --out /tmp/logs     # generate one (and verify)
"""

from __future__ import annotations

import argparse
import base64
import json
import os
import random
import shutil
import sys
import time
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from replay.kafka import codecs, files, synth, writer
from replay.kafka.writer import RecordInput

GENERATOR_VERSION = 1  # bump when the output for a given shape changes: cached logs are named after it
START_TIME = 1_767_225_600_000  # 2026-01-01T00:00:00Z
NOOP_INTERVAL_MS = 500
METADATA_VERSION = 27  # 4.1-IV1, a level Kafka 4.3.1 knows
CONTROLLERS = (3000, 3001, 3002)
BROKERS = tuple(range(1, 7))
MAX_TOPICS = 400

# Record types by api key, for the manifest's counts.
TYPE_NAMES = {0: "RegisterBroker", 2: "Topic", 3: "Partition", 4: "Config", 5: "PartitionChange", 7: "FenceBroker",
              8: "UnfenceBroker", 9: "RemoveTopic", 12: "FeatureLevel", 15: "ProducerIds",
              17: "BrokerRegistrationChange", 18: "AccessControlEntry", 19: "RemoveAccessControlEntry", 20: "NoOp",
              23: "BeginTransaction", 24: "EndTransaction", 25: "AbortTransaction", 27: "RegisterController",
              -1: "LeaderChange (control)"}

# (event kind, weight) for the cluster records between NoOps.
_CLUSTER_EVENTS = (("partition_change", 45), ("topic_create", 4), ("topic_delete", 2), ("config", 12),
                   ("broker", 10), ("producer_ids", 8))


def parse_count(text: str) -> int:
    """`250k`, `1m`, `1M`, `2000000`."""
    t = text.strip().lower().replace("_", "")
    scale = {"k": 1_000, "m": 1_000_000}.get(t[-1:], 1)
    return int(float(t[:-1] if scale > 1 else t) * scale)


def count_label(n: int) -> str:
    """`250k`, `1M`, `2.5M`, `1234`: how sizes are named in files and tables."""
    if n >= 1_000_000 and n % 100_000 == 0:
        return f"{n / 1_000_000:g}M"
    if n >= 1_000 and n % 1_000 == 0:
        return f"{n // 1_000}k"
    return str(n)


@dataclass(frozen=True)
class LogShape:
    """What to generate. Everything but `records`, `seed` and `codec` has the realistic default."""

    records: int
    seed: int = 1
    codec: str = "none"  # "none" or any codec name the writer knows ("zstd")
    segment_bytes: int = 64 << 20
    snapshot_every: int = 100_000  # records between snapshots (about 7 MiB of log); a quarter of a small log
    noop_share: float = 0.70
    acl_share: float = 0.08
    live_acls: int = 5_000  # the ACL set grows to about this many, then creates and removes balance
    failover_every: int = 150_000  # mean records between leader failovers
    txn_share: float = 0.2  # of ACL events, the share written as a metadata transaction

    @property
    def snapshot_interval(self) -> int:
        return max(1, min(self.snapshot_every, self.records // 4))

    @property
    def name(self) -> str:
        return f"realistic-{count_label(self.records)}-{self.codec}-s{self.seed}-g{GENERATOR_VERSION}"

    def question_offsets(self) -> list[int]:
        """Where the benchmark asks for the ACL state: the first NoOp at or after these offsets."""
        return [int(self.records * f) for f in (0.9, 0.15, 0.3, 0.45, 0.6, 0.75, 0.97)]


@dataclass
class _Partition:
    replicas: list[int]
    directories: list[str]
    isr: list[int]
    leader: int
    leader_epoch: int = 0
    partition_epoch: int = 0


@dataclass
class _Topic:
    name: str
    topic_id: str
    partitions: list[_Partition]


@dataclass
class _Broker:
    epoch: int
    incarnation: str
    fenced: bool = False


class _AclSet:
    """The live ACLs as their encoded records (snapshots reuse them), with O(1) random picks and removals."""

    def __init__(self) -> None:
        self.ids: list[str] = []
        self.where: dict[str, int] = {}
        self.records: dict[str, RecordInput] = {}

    def __len__(self) -> int:
        return len(self.ids)

    def add(self, acl_id: str, record: RecordInput) -> None:
        self.where[acl_id] = len(self.ids)
        self.ids.append(acl_id)
        self.records[acl_id] = record

    def remove(self, acl_id: str) -> None:
        i = self.where.pop(acl_id)
        last = self.ids.pop()
        if last != acl_id:
            self.ids[i] = last
            self.where[last] = i
        del self.records[acl_id]


@dataclass
class _State:
    """The cluster as the records so far made it (committed only): what a snapshot holds."""

    topics: dict[str, _Topic] = field(default_factory=dict)
    brokers: dict[int, _Broker] = field(default_factory=dict)
    configs: dict[tuple[int, str, str], str] = field(default_factory=dict)
    acls: _AclSet = field(default_factory=lambda: _AclSet())
    next_producer_id: int = 0
    topic_serial: int = 0


def _uuid(rng: random.Random) -> str:
    """16 random bytes in Kafka's text form (base64url, no padding)."""
    return base64.urlsafe_b64encode(rng.getrandbits(128).to_bytes(16, "big")).decode()[:22]


class _Writer:
    """Segments (rolled at `segment_bytes`), snapshots and the counts for the manifest."""

    def __init__(self, part: Path, shape: LogShape) -> None:
        self.part = part
        self.shape = shape
        self.codec = codecs.codec_id(shape.codec)
        self.offset = 0
        self.epoch = 1
        self.time = START_TIME
        self.batches = 0
        self.by_type: dict[str, int] = {}
        self.segments: list[str] = []
        self.snapshots: list[dict[str, Any]] = []
        self.segment_bytes = 0
        self._out: Any = None
        self._size = 0
        noop = writer.encode_record(0, writer.noop().value)
        self._noop_area = codecs.compress(self.codec, noop)

    def _write(self, data: bytes) -> None:
        if self._out is None or self._size + len(data) > self.shape.segment_bytes:
            if self._out is not None:
                self._out.close()
            path = self.part / files.segment_name(self.offset)
            self.segments.append(path.name)
            self._out = open(path, "wb")  # noqa: SIM115 - closed when the segment rolls or at the end
            self._size = 0
        self._out.write(data)
        self._size += len(data)
        self.segment_bytes += len(data)
        self.batches += 1

    def _count(self, name: str, n: int = 1) -> None:
        self.by_type[name] = self.by_type.get(name, 0) + n

    def append(self, records: list[tuple[int, RecordInput]], at: int) -> int:
        """One data batch of (api key, record) at time `at`; returns its base offset."""
        base = self.offset
        self._write(writer.encode_batch(base, [r for _, r in records], self.epoch, at, self.codec))
        for key, _ in records:
            self._count(TYPE_NAMES[key])
        self.offset += len(records)
        self.time = max(self.time, at)
        return base

    def append_noop(self, at: int) -> int:
        base = self.offset
        self._write(writer.assemble_batch(base, self._noop_area, 1, 0, epoch=self.epoch, timestamp=at,
                                          attributes=self.codec))
        self._count("NoOp")
        self.offset += 1
        self.time = at
        return base

    def append_leader_change(self, leader: int, at: int) -> None:
        self._write(writer.encode_batch(self.offset, [writer.leader_change(leader, CONTROLLERS)], self.epoch, at,
                                        0, control=True))
        self._count(TYPE_NAMES[-1])
        self.offset += 1
        self.time = at

    def snapshot(self, records: list[tuple[int, RecordInput]]) -> None:
        path = writer.write_snapshot(str(self.part), self.offset, self.epoch, [r for _, r in records], self.time,
                                     codec=self.codec)
        self.snapshots.append({"file": os.path.basename(path), "end_offset": self.offset, "epoch": self.epoch,
                               "records": len(records), "acls": sum(1 for k, _ in records if k == 18),
                               "bytes": os.path.getsize(path)})

    def close(self) -> None:
        if self._out is not None:
            self._out.close()


class _Generator:
    """The controller's side: decides what happens next and turns it into records."""

    def __init__(self, shape: LogShape, out: _Writer) -> None:
        self.shape = shape
        self.rng = random.Random(shape.seed)
        self.out = out
        self.state = _State()
        self.noops = 0
        self.cluster_records = 0
        self.acl_records = 0
        self.burst = 0  # cluster/ACL records still to write before the next NoOp
        self.next_failover = self._failover_gap()
        self.next_snapshot = shape.snapshot_interval
        self.questions = sorted(shape.question_offsets())
        self.answers: dict[int, int] = {}
        self.transactions = {"committed": 0, "aborted": 0}
        self._changes: dict[tuple[str, int, tuple[int, ...], int | None], RecordInput] = {}

    # ---- the schedule ----------------------------------------------------------------------------------------
    def run(self) -> None:
        self._bootstrap()
        while self.out.offset < self.shape.records:
            if self.burst <= 0 and self.noops < self.shape.noop_share * self.out.offset:
                # quiet: the next NoOp; then maybe a burst of cluster/ACL activity (exponential sizes)
                self._noop()
                if self.noops >= self.shape.noop_share * self.out.offset:
                    self.burst = int(self.rng.expovariate(1 / 12)) + 1
            elif self.out.offset >= self.next_failover:
                self._failover()
            else:
                self.burst -= self._event()

    def _tick_time(self) -> int:
        """A time inside the current 500 ms tick, after everything so far."""
        return self.out.time + self.rng.randint(1, 40)

    def _noop(self) -> None:
        at = (self.out.time // NOOP_INTERVAL_MS + 1) * NOOP_INTERVAL_MS
        offset = self.out.append_noop(at)
        self.noops += 1
        while self.questions and offset >= self.questions[0]:
            self.questions.pop(0)
            self.answers[offset] = len(self.state.acls)
        if self.out.offset >= self.next_snapshot:
            self.out.snapshot(self._snapshot_records())
            self.next_snapshot = self.out.offset + self.shape.snapshot_interval

    def _failover_gap(self) -> int:
        return int(self.rng.expovariate(1 / self.shape.failover_every)) + 1000

    def _event(self) -> int:
        """One cluster or ACL event; returns the records written."""
        if self.acl_records < self.shape.acl_share * self.out.offset:
            return self._acl_event()
        kinds, weights = zip(*_CLUSTER_EVENTS, strict=True)
        kind = self.rng.choices(kinds, weights)[0]
        written: int = getattr(self, "_" + kind)()
        self.cluster_records += written
        return written

    def _batch(self, records: list[tuple[int, RecordInput]]) -> int:
        self.out.append(records, self._tick_time())
        return len(records)

    # ---- cluster records -------------------------------------------------------------------------------------
    def _bootstrap(self) -> None:
        """What a new cluster's log starts with: the first leader, the feature level, controllers and brokers."""
        self.out.append_leader_change(CONTROLLERS[0], self.out.time)
        self._batch([(12, writer.feature_level("metadata.version", METADATA_VERSION))])
        for c in CONTROLLERS:
            self._batch([(27, writer.metadata_record(27, 0, {
                "controllerId": c, "incarnationId": _uuid(self.rng), "zkMigrationReady": False,
                "endPoints": [{"name": "CONTROLLER", "host": f"controller-{c}", "port": 9093, "securityProtocol": 0}],
                "features": [{"name": "metadata.version", "minSupportedVersion": 7,
                              "maxSupportedVersion": METADATA_VERSION}]}))])
        for b in BROKERS:
            self._register_broker(b)
            self._batch([(8, self._unfence(b))])
        for _ in range(20):
            self._topic_create()

    def _broker_record(self, broker_id: int) -> RecordInput:
        b = self.state.brokers[broker_id]
        return writer.metadata_record(0, 3, {
            "brokerId": broker_id, "incarnationId": b.incarnation, "brokerEpoch": b.epoch,
            "endPoints": [{"name": "PLAINTEXT", "host": f"broker-{broker_id}", "port": 9092, "securityProtocol": 0}],
            "features": [{"name": "metadata.version", "minSupportedVersion": 7,
                          "maxSupportedVersion": METADATA_VERSION}],
            "rack": f"rack-{broker_id % 3}", "fenced": b.fenced, "inControlledShutdown": False,
            "logDirs": [b.incarnation]})

    def _register_broker(self, broker_id: int) -> int:
        self.state.brokers[broker_id] = _Broker(self.out.offset, _uuid(self.rng), fenced=True)
        return self._batch([(0, self._broker_record(broker_id))])

    def _unfence(self, broker_id: int) -> RecordInput:
        b = self.state.brokers[broker_id]
        b.fenced = False
        return writer.metadata_record(8, 0, {"id": broker_id, "epoch": b.epoch})

    def _broker(self) -> int:
        """One step of a broker's life: controlled shutdown, fence, re-registration or unfence."""
        broker_id = self.rng.choice(BROKERS)
        b = self.state.brokers[broker_id]
        roll = self.rng.random()
        if b.fenced:
            return self._batch([(8, self._unfence(broker_id))])
        if roll < 0.4:
            return self._batch([(17, writer.metadata_record(17, 1, {
                "brokerId": broker_id, "brokerEpoch": b.epoch, "inControlledShutdown": 1}))])
        if roll < 0.7:
            b.fenced = True
            return self._batch([(7, writer.metadata_record(7, 0, {"id": broker_id, "epoch": b.epoch}))])
        return self._register_broker(broker_id)

    def _topic_create(self) -> int:
        if len(self.state.topics) >= MAX_TOPICS:
            return self._topic_delete()
        st = self.state
        st.topic_serial += 1
        name = f"{self.rng.choice(['orders', 'payments', 'logs', 'events', 'audit', 'metrics'])}-{st.topic_serial}"
        topic = _Topic(name, _uuid(self.rng), [])
        records: list[tuple[int, RecordInput]] = [(2, writer.metadata_record(2, 0, {"name": name,
                                                                                  "topicId": topic.topic_id}))]
        for p in range(self.rng.choice((1, 3, 6, 12))):
            replicas = self.rng.sample(BROKERS, 3)
            part = _Partition(replicas, [_uuid(self.rng) for _ in replicas], list(replicas), replicas[0])
            topic.partitions.append(part)
            records.append((3, self._partition_record(topic, p, part)))
        for key, value in self.rng.sample([("retention.ms", "604800000"), ("cleanup.policy", "compact"),
                                           ("min.insync.replicas", "2"), ("segment.bytes", "536870912")],
                                          self.rng.randint(0, 2)):
            st.configs[(2, name, key)] = value
            records.append((4, self._config_record(2, name, key, value)))
        st.topics[topic.topic_id] = topic
        return self._batch(records)

    def _partition_record(self, topic: _Topic, index: int, part: _Partition) -> RecordInput:
        return writer.metadata_record(3, 1, {
            "partitionId": index, "topicId": topic.topic_id, "replicas": part.replicas, "isr": part.isr,
            "removingReplicas": [], "addingReplicas": [], "leader": part.leader, "leaderEpoch": part.leader_epoch,
            "partitionEpoch": part.partition_epoch, "directories": part.directories})

    @staticmethod
    def _config_record(rtype: int, name: str, key: str, value: str | None) -> RecordInput:
        return writer.metadata_record(4, 0, {"resourceType": rtype, "resourceName": name, "name": key,
                                             "value": value})

    def _topic_delete(self) -> int:
        if len(self.state.topics) <= 5:
            return self._topic_create()
        topic_id = self.rng.choice(list(self.state.topics))
        topic = self.state.topics.pop(topic_id)
        for key in [k for k in self.state.configs if k[1] == topic.name]:
            del self.state.configs[key]
        return self._batch([(9, writer.metadata_record(9, 0, {"topicId": topic_id}))])

    def _partition_change(self) -> int:
        """ISR shrinks and expands, leader elections: several partitions at once after a broker hiccup."""
        records: list[tuple[int, RecordInput]] = []
        topics = list(self.state.topics.values())
        for _ in range(self.rng.choice((1, 1, 1, 2, 3, 5, 8))):
            topic = self.rng.choice(topics)
            index = self.rng.randrange(len(topic.partitions))
            part = topic.partitions[index]
            if len(part.isr) == len(part.replicas) or self.rng.random() < 0.3:
                part.isr = [r for r in part.isr if r != self.rng.choice(part.replicas)] or [part.leader]
            else:
                part.isr = list(part.replicas)
            elected = part.leader not in part.isr
            if elected:
                part.leader = part.isr[0]
                part.leader_epoch += 1
            part.partition_epoch += 1
            records.append((5, self._partition_change_record(topic.topic_id, index, part.isr,
                                                             part.leader if elected else None)))
        return self._batch(records)

    def _partition_change_record(self, topic_id: str, index: int, isr: list[int], leader: int | None
                                 ) -> RecordInput:
        """The same change recurs (ISR toggling between a few sets): its encoded record is kept."""
        key = (topic_id, index, tuple(isr), leader)
        record = self._changes.get(key)
        if record is None:
            data: dict[str, Any] = {"partitionId": index, "topicId": topic_id, "isr": isr}
            if leader is not None:
                data["leader"] = leader
            record = self._changes[key] = writer.metadata_record(5, 0, data)
        return record

    def _config(self) -> int:
        st = self.state
        if self.rng.random() < 0.3:
            key = ("log.retention.ms", str(self.rng.choice((3_600_000, 86_400_000, 604_800_000))))
            rtype, name = 4, str(self.rng.choice(BROKERS))
        else:
            topic = self.rng.choice(list(st.topics.values()))
            key = ("retention.ms", str(self.rng.randint(1, 30) * 86_400_000))
            rtype, name = 2, topic.name
        st.configs[(rtype, name, key[0])] = key[1]
        return self._batch([(4, self._config_record(rtype, name, key[0], key[1]))])

    def _producer_ids(self) -> int:
        broker_id = self.rng.choice(BROKERS)
        self.state.next_producer_id += 1000
        return self._batch([(15, writer.metadata_record(15, 0, {
            "brokerId": broker_id, "brokerEpoch": self.state.brokers[broker_id].epoch,
            "nextProducerId": self.state.next_producer_id}))])

    # ---- ACLs ------------------------------------------------------------------------------------------------
    def _acl_changes(self, n: int, pending: dict[str, RecordInput | None]) -> list[tuple[int, RecordInput]]:
        """`n` creates or removes (the set drifting towards `live_acls`; removes of committed ACLs only), noted
        in `pending` (None: removed)."""
        live = self.state.acls
        create = len(live) < self.rng.uniform(0, 2 * self.shape.live_acls)
        records: list[tuple[int, RecordInput]] = []
        for _ in range(n):
            acl_id = live.ids[self.rng.randrange(len(live))] if len(live) else None
            if create or acl_id is None or acl_id in pending:
                acl_id = _uuid(self.rng)
                pending[acl_id] = writer.acl_record(acl_id, synth.random_binding(self.rng))
                records.append((18, pending[acl_id]))
            else:
                pending[acl_id] = None
                records.append((19, writer.remove_acl_record(acl_id)))
        return records

    def _commit(self, pending: dict[str, RecordInput | None]) -> None:
        for acl_id, record in pending.items():
            if record is None:
                self.state.acls.remove(acl_id)
            else:
                self.state.acls.add(acl_id, record)

    def _acl_event(self) -> int:
        """A CreateAcls/DeleteAcls batch, or a metadata transaction of several batches."""
        pending: dict[str, RecordInput | None] = {}
        if self.rng.random() >= self.shape.txn_share:
            records = self._acl_changes(self.rng.randint(1, 10), pending)
            self._commit(pending)
            self.acl_records += len(records)
            return self._batch(records)
        written = 0
        parts = self.rng.randint(2, 4)
        for i in range(parts):
            batch = self._acl_changes(self.rng.randint(5, 10), pending)
            self.acl_records += len(batch)
            if i == 0:
                batch.insert(0, (23, writer.begin_txn("CreateAcls")))
            if i == parts - 1:
                batch.append((24, writer.end_txn()))
            written += self._batch(batch)
        self._commit(pending)
        self.transactions["committed"] += 1
        return written

    def _failover(self) -> None:
        """A new leader at the next epoch; half the time the old one left a transaction open, which it aborts."""
        aborted = self.rng.random() < 0.5
        if aborted:
            batch = [(23, writer.begin_txn("CreateAcls")), *self._acl_changes(self.rng.randint(3, 8), {})]
            self.acl_records += len(batch) - 1
            self._batch(batch)
        self.out.epoch += 1
        self.out.append_leader_change(self.rng.choice(CONTROLLERS), self.out.time + self.rng.randint(2000, 9000))
        if aborted:
            self._batch([(25, writer.abort_txn("Controller failover"))])
            self.transactions["aborted"] += 1
        self.next_failover = self.out.offset + self._failover_gap()

    # ---- snapshots -------------------------------------------------------------------------------------------
    def _snapshot_records(self) -> list[tuple[int, RecordInput]]:
        """The state at this point, in the order Kafka's image writes it (features, cluster, topics, configs,
        producer ids, ACLs)."""
        st = self.state
        out: list[tuple[int, RecordInput]] = [(12, writer.feature_level("metadata.version", METADATA_VERSION))]
        out += [(0, self._broker_record(b)) for b in sorted(st.brokers)]
        for topic in st.topics.values():
            out.append((2, writer.metadata_record(2, 0, {"name": topic.name, "topicId": topic.topic_id})))
            out += [(3, self._partition_record(topic, i, p)) for i, p in enumerate(topic.partitions)]
        out += [(4, self._config_record(*k, v)) for k, v in st.configs.items()]
        out.append((15, writer.metadata_record(15, 0, {"brokerId": BROKERS[0], "brokerEpoch": -1,
                                                       "nextProducerId": st.next_producer_id})))
        out += [(18, r) for r in st.acls.records.values()]
        return out


def generate(shape: LogShape, directory: Path) -> dict[str, Any]:
    """Write the dump under `directory/__cluster_metadata-0`; return (and write as manifest.json) its facts."""
    began = time.monotonic()
    part = directory / files.METADATA_PARTITION_DIR
    part.mkdir(parents=True)
    out = _Writer(part, shape)
    gen = _Generator(shape, out)
    try:
        gen.run()
    finally:
        out.close()
    snapshot_bytes = sum(s["bytes"] for s in out.snapshots)
    manifest = {
        "shape": asdict(shape), "name": shape.name, "generator_version": GENERATOR_VERSION,
        "records": out.offset, "batches": out.batches, "last_offset": out.offset - 1,
        "segments": out.segments, "segment_bytes": out.segment_bytes,
        "snapshots": out.snapshots, "snapshot_bytes": snapshot_bytes,
        "input_bytes": out.segment_bytes + snapshot_bytes,
        "records_by_type": dict(sorted(out.by_type.items(), key=lambda kv: -kv[1])),
        "shares": {"noop": gen.noops / out.offset, "acl": gen.acl_records / out.offset,
                   "cluster": gen.cluster_records / out.offset},
        "transactions": gen.transactions, "final_epoch": out.epoch, "live_acls_at_end": len(gen.state.acls),
        "live_acls_after": {str(k): v for k, v in sorted(gen.answers.items())},
        "seconds": round(time.monotonic() - began, 2),
    }
    (directory / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    return manifest


def dump_files(directory: Path) -> list[Path]:
    """The dump's segments and snapshots, in offset order (what both tools are given)."""
    part = directory / files.METADATA_PARTITION_DIR
    return sorted(p for p in part.iterdir() if p.suffix in (".log", ".checkpoint"))


def cached(shape: LogShape, root: Path, verify: bool = True) -> tuple[Path, dict[str, Any]]:
    """The dump for `shape` under `root/<shape.name>`, generated (and verified) the first time; (dir, manifest)."""
    target = root / shape.name
    manifest_path = target / "manifest.json"
    if manifest_path.exists():
        return target, json.loads(manifest_path.read_text())
    root.mkdir(parents=True, exist_ok=True)
    tmp = root / f".{shape.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    manifest = generate(shape, tmp)
    if verify:
        manifest["verified"] = verify_dump(tmp, manifest)
        (tmp / "manifest.json").write_text(json.dumps(manifest, indent=1) + "\n")
    tmp.rename(target)
    return target, manifest


# ---- verification: both decoders read what was written ---------------------------------------------------------
def _sample_batches(path: Path, limit: int) -> Iterator[Any]:
    from replay.kafka.dump import discover, read_source

    sources, _ = discover([str(path)])
    for source in sources:
        for i, item in enumerate(read_source(source)):
            if i >= limit:
                return
            yield item


def verify_dump(directory: Path, manifest: dict[str, Any], sample: int = 20_000) -> dict[str, Any]:
    """Our decoder on the first `sample` batches of every file (CRCs, values, snapshot framing), and Kafka's
    DumpLogSegments on every file (streamed, counted): both must read every batch with no problem, and Kafka
    must print every record the manifest says was written."""
    from replay.kafka.model import Problem

    ours = {"batches": 0, "records": 0, "problems": 0}
    for path in dump_files(directory):
        for item in _sample_batches(path, sample):
            if isinstance(item, Problem):
                ours["problems"] += 1
                print(f"our decoder: {item}", file=sys.stderr)
            else:
                ours["batches"] += 1
                ours["records"] += len(item.records)
    kafka = kafka_counts(dump_files(directory))
    expected = manifest["records"] + sum(s["records"] + 2 for s in manifest["snapshots"])  # + header, footer
    problems = []
    if ours["problems"]:
        problems.append(f"our decoder found {ours['problems']} problem(s)")
    if kafka["invalid"] or kafka["exit"]:
        problems.append(f"Kafka's tool: {kafka['invalid']} invalid batch(es), exit {kafka['exit']}")
    if kafka["records"] != expected:
        problems.append(f"Kafka's tool printed {kafka['records']:,} records, {expected:,} were written")
    if problems:
        raise RuntimeError(f"{directory}: " + "; ".join(problems))
    return {"ours_sampled": ours, "kafka": kafka}


def kafka_counts(paths: list[Path]) -> dict[str, int]:
    """Kafka's DumpLogSegments over `paths`, its output counted as it streams: batches, records, invalid ones."""
    import subprocess

    from bench.bench_pipeline import dump_log_segments_command

    proc = subprocess.Popen(dump_log_segments_command(paths), stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    assert proc.stdout is not None and proc.stderr is not None
    counts = {"batches": 0, "records": 0, "invalid": 0}
    for line in proc.stdout:
        if line.startswith(b"baseOffset: "):
            counts["batches"] += 1
            counts["invalid"] += b"isValid: true" not in line and b"isvalid: true" not in line
        elif line.startswith(b"| offset: "):
            counts["records"] += 1
    err = proc.stderr.read()
    counts["exit"] = proc.wait()
    if counts["exit"]:
        print(err.decode(errors="replace")[-2000:], file=sys.stderr)
    return counts


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=parse_count, default=parse_count("250k"))
    ap.add_argument("--codec", default="none")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--out", type=Path, default=Path("bench/out/logs"))
    ap.add_argument("--no-verify", action="store_true")
    args = ap.parse_args(argv)
    shape = LogShape(args.records, args.seed, args.codec)
    directory, manifest = cached(shape, args.out, verify=not args.no_verify)
    print(f"{directory}: {manifest['records']:,} records in {manifest['batches']:,} batches, "
          f"{manifest['input_bytes'] / 2**20:,.1f} MiB, {len(manifest['segments'])} segment(s), "
          f"{len(manifest['snapshots'])} snapshot(s), generated in {manifest['seconds']} s")
    print(json.dumps({k: manifest[k] for k in ("shares", "records_by_type", "transactions", "verified")
                      if k in manifest}, indent=1))


if __name__ == "__main__":
    main()
