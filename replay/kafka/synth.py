"""Synthetic metadata logs of any size and shape, for tests and benchmarks.

`generate` makes a random ACL history as a list of batches (creates, deletes, duplicate ids, unknown removes,
committed, aborted and open transactions, no-ops, leader changes with rising epochs). `write_dump` lays it out as
a real `__cluster_metadata-0` directory with our writer: segments split where asked, snapshots taken from the
reference replay of the log (optionally tampered with, to test mismatch detection), segments dropped to make
holes, and a divergent copy for overlap tests.
"""

from __future__ import annotations

import base64
import itertools
import os
import random
from collections.abc import Iterator
from dataclasses import dataclass, field

from .acl import AclBinding, AclOperation, PatternType, ResourceType
from .model import Batch, Problem

_OPS_BY_TYPE = {
    "TOPIC": ["READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "ALL"],
    "GROUP": ["READ", "DESCRIBE", "DELETE", "ALL"],
    "CLUSTER": ["CREATE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE", "ALTER",
                "DESCRIBE", "ALL"],
    "TRANSACTIONAL_ID": ["DESCRIBE", "WRITE", "ALL"],
    "DELEGATION_TOKEN": ["DESCRIBE", "ALL"],
    "USER": ["CREATE_TOKENS", "DESCRIBE_TOKENS", "ALL"],
}
_PRINCIPALS = ["User:alice", "User:bob", "User:carol", "User:dave", "User:*", "User:svc-payments", "Group:eng"]
_HOSTS = ["*", "*", "*", "10.0.0.1", "192.168.1.7", "0:0:0:0:0:0:0:1"]
_NAMES = ["payments", "pay", "orders", "orders-eu", "*", "logs", "app-", "t1"]


def new_acl_id(rng: random.Random) -> str:
    """A random 16-byte UUID in Kafka's text form (base64url, no padding)."""
    raw = bytes(rng.getrandbits(8) for _ in range(16))
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def random_binding(rng: random.Random) -> AclBinding:
    rtype = rng.choice(list(_OPS_BY_TYPE))
    name = "kafka-cluster" if rtype == "CLUSTER" else rng.choice(_NAMES)
    pattern = "LITERAL" if name == "*" or rtype == "CLUSTER" else rng.choice(["LITERAL", "PREFIXED"])
    return AclBinding(rtype, name, pattern, rng.choice(_PRINCIPALS), rng.choice(_HOSTS),
                      rng.choice(_OPS_BY_TYPE[rtype]), rng.choice(["ALLOW", "ALLOW", "DENY"]))


LEADER_CHANGE_KEY = -2  # SynthRecord.api_key of a LEADER_CHANGE control record


@dataclass(slots=True)
class SynthRecord:
    api_key: int  # metadata record type, or LEADER_CHANGE_KEY
    data: dict[str, object]


@dataclass(slots=True)
class SynthBatch:
    base_offset: int
    records: list[SynthRecord]
    epoch: int
    time: int
    control: bool = False


@dataclass(slots=True)
class SynthLog:
    batches: list[SynthBatch] = field(default_factory=list)

    @property
    def end_offset(self) -> int:
        if not self.batches:
            return 0
        last = self.batches[-1]
        return last.base_offset + len(last.records)

    def append(self, records: list[SynthRecord], epoch: int, time: int, control: bool = False) -> SynthBatch:
        b = SynthBatch(self.end_offset, records, epoch, time, control)
        self.batches.append(b)
        return b


def _acl(acl_id: str, b: AclBinding) -> SynthRecord:
    return SynthRecord(18, b.to_record_data(acl_id))


def generate(seed: int, n_batches: int = 60, max_batch: int = 6, start_time: int = 1_700_000_000_000,
             anomalies: bool = True, transactions: bool = True) -> SynthLog:
    """A random history. With `anomalies`, duplicate ids and unknown removes appear now and then."""
    rng = random.Random(seed)
    log = SynthLog()
    epoch, time = 1, start_time
    live: list[str] = []
    gone: list[str] = []
    bindings: dict[str, AclBinding] = {}
    log.append([SynthRecord(LEADER_CHANGE_KEY, {"leaderId": 1, "voters": [{"voterId": 1}], "grantingVoters": [{"voterId": 1}]})],
               epoch, time, control=True)
    log.append([SynthRecord(12, {"name": "metadata.version", "featureLevel": 28})], epoch, time)
    open_txn = False
    for _ in range(n_batches):
        time += rng.randint(1, 90_000)
        if rng.random() < 0.05:
            epoch += 1
            log.append([SynthRecord(LEADER_CHANGE_KEY, {"leaderId": 1, "voters": [{"voterId": 1}],
                                         "grantingVoters": [{"voterId": 1}]})], epoch, time, control=True)
            continue
        records: list[SynthRecord] = []
        for _ in range(rng.randint(1, max_batch)):
            roll = rng.random()
            if transactions and roll < 0.06 and not open_txn:
                records.append(SynthRecord(23, {"name": rng.choice([None, "txn"])}))
                open_txn = True
            elif transactions and roll < 0.12 and open_txn:
                if rng.random() < 0.6:
                    records.append(SynthRecord(24, {}))
                else:
                    records.append(SynthRecord(25, {"reason": rng.choice([None, "Controller failover"])}))
                open_txn = False
            elif roll < 0.55 or not live:
                acl_id = new_acl_id(rng)
                bindings[acl_id] = random_binding(rng)
                records.append(_acl(acl_id, bindings[acl_id]))
                live.append(acl_id)
            elif roll < 0.85:
                acl_id = live.pop(rng.randrange(len(live)))
                gone.append(acl_id)
                records.append(SynthRecord(19, {"id": acl_id}))
            elif anomalies and roll < 0.9:
                acl_id = rng.choice(live)  # duplicate id: same or other content
                if rng.random() < 0.5:
                    bindings[acl_id] = random_binding(rng)
                records.append(_acl(acl_id, bindings[acl_id]))
            elif anomalies and roll < 0.94:
                records.append(SynthRecord(19, {"id": rng.choice(gone) if gone else new_acl_id(rng)}))
            else:
                records.append(SynthRecord(20, {}))
        log.append(records, epoch, time)
    return log


def log_from_steps(steps: list[tuple[object, ...]], seed: int = 0, valid: bool = False) -> SynthLog:
    """A log from a list of steps (what property tests draw), in the vocabulary of `generate`.

    Steps: `("create", n)` (binding from seed n), `("delete", k)` (the k-th live id, modulo), `("dup", k, other)`
    (re-create the k-th live id, with other content if `other`), `("stray_remove", reuse)` (remove a removed id, or
    an id never seen), `("begin",)`, `("end",)`, `("abort",)`, `("noop",)`, `("new_batch",)`, `("new_leader",)`.
    `valid`: only what Kafka's controller writes (no duplicate ids, no removes of unknown ids, transactions opened
    and closed in turn); other steps are skipped.
    """
    rng = random.Random(seed)
    log = SynthLog()
    epoch, time = 1, 1_700_000_000_000
    live: list[str] = []
    gone: list[str] = []
    content: dict[str, AclBinding] = {}
    batch: list[SynthRecord] = []
    open_txn = False

    def flush() -> None:
        nonlocal batch, time
        if batch:
            time += 1000
            log.append(batch, epoch, time)
            batch = []

    for step in steps:
        kind = step[0]
        if kind == "create":
            acl_id = new_acl_id(rng)
            content[acl_id] = random_binding(random.Random(int(step[1])))  # type: ignore[call-overload]
            live.append(acl_id)
            batch.append(_acl(acl_id, content[acl_id]))
        elif kind == "delete" and live:
            acl_id = live.pop(int(step[1]) % len(live))  # type: ignore[call-overload]
            gone.append(acl_id)
            batch.append(SynthRecord(19, {"id": acl_id}))
        elif kind in ("dup", "stray_remove") and valid:
            continue
        elif kind == "dup" and live:
            acl_id = live[int(step[1]) % len(live)]  # type: ignore[call-overload]
            if step[2]:
                content[acl_id] = random_binding(rng)
            batch.append(_acl(acl_id, content[acl_id]))
        elif kind == "stray_remove":
            batch.append(SynthRecord(19, {"id": gone[0] if step[1] and gone else new_acl_id(rng)}))
        elif kind in ("begin", "end", "abort"):
            if valid and open_txn == (kind == "begin"):
                continue
            open_txn = kind == "begin"
            batch.append(SynthRecord({"begin": 23, "end": 24, "abort": 25}[str(kind)], {}))
        elif kind == "noop":
            batch.append(SynthRecord(20, {}))
        elif kind == "new_batch":
            flush()
        elif kind == "new_leader":
            flush()
            epoch += 1
            time += 1000
            log.append([SynthRecord(LEADER_CHANGE_KEY, {"leaderId": 1, "voters": [{"voterId": 1}],
                                                        "grantingVoters": [{"voterId": 1}]})], epoch, time,
                       control=True)
    flush()
    return log


def quiet_snapshot_ends(log: SynthLog, wanted: list[int]) -> tuple[int, ...]:
    """Snapshot end offsets at or below `wanted` at a batch boundary where no transaction is open, as Kafka takes
    them (from a published image: after whole batches, never in the middle of a transaction)."""
    in_txn: list[bool] = []  # after each offset
    open_txn = False
    for b in log.batches:
        for i, r in enumerate(b.records):
            if r.api_key == 23:
                open_txn = True
            elif r.api_key in (24, 25):
                open_txn = False
            in_txn.append(open_txn or i < len(b.records) - 1)  # inside a batch counts as open: no image there
    ends = set()
    for end in wanted:
        end = min(end, len(in_txn))
        while end > 0 and in_txn[end - 1]:
            end -= 1
        if end > 0:
            ends.add(end)
    return tuple(sorted(ends))


def apply_retention(directory: str, log_start: int) -> list[str]:
    """Kafka's retention: delete the segments that lie wholly below `log_start` (a snapshot's end offset); the
    segment holding `log_start - 1` stays, as the active one always does. Returns the deleted paths."""
    from . import files

    part = os.path.join(directory, files.METADATA_PARTITION_DIR)
    segments = sorted((int(n.split(".")[0]), os.path.join(part, n)) for n in os.listdir(part) if n.endswith(".log"))
    deleted = []
    for (_, path), (next_base, _) in itertools.pairwise(segments):
        if next_base <= log_start:
            os.remove(path)
            deleted.append(path)
    return deleted


def generate_large(seed: int, n_acls: int, churn: float = 0.3, batch_size: int = 100,
                   start_time: int = 1_700_000_000_000) -> Iterator[SynthBatch]:
    """Stream a big history (n_acls creates, `churn` of them removed later) without keeping it in memory."""
    rng = random.Random(seed)
    offset, time = 0, start_time
    live: list[str] = []
    made = 0
    while made < n_acls:
        records = []
        for _ in range(batch_size):
            if live and rng.random() < churn / (1 + churn):
                records.append(SynthRecord(19, {"id": live.pop(rng.randrange(len(live)))}))
            else:
                acl_id = new_acl_id(rng)
                live.append(acl_id)
                records.append(_acl(acl_id, random_binding(rng)))
                made += 1
        time += rng.randint(1, 5_000)
        yield SynthBatch(offset, records, 1, time)
        offset += len(records)


def divergent_copy(log: SynthLog, at_batch: int, seed: int) -> tuple[SynthLog, SynthLog]:
    """Two nodes' views: (the committed log, a node that kept an uncommitted suffix from `at_batch` on).

    In the committed log a new leader (epoch + 1) rewrote everything from `at_batch`; the other copy holds other
    records at the same offsets with the old epoch, as a follower that was cut off would.
    """
    rng = random.Random(seed)
    committed = SynthLog([SynthBatch(b.base_offset, b.records, b.epoch + (1 if i >= at_batch else 0), b.time,
                                     b.control) for i, b in enumerate(log.batches)])
    stale = SynthLog(list(log.batches[:at_batch]))
    time = log.batches[at_batch - 1].time if at_batch else 0
    epoch = log.batches[at_batch - 1].epoch if at_batch else 1
    for _ in range(rng.randint(1, 4)):
        time += 1
        records = [_acl(new_acl_id(rng), random_binding(rng)) for _ in range(rng.randint(1, 3))]
        stale.append(records, epoch, time)
    return committed, stale


@dataclass(frozen=True, slots=True)
class Layout:
    """How a log becomes files: where segments start, which snapshots exist, what is missing or divergent."""

    segment_every: int = 25  # offsets per segment (approximate: segments break at batch boundaries)
    snapshot_at: tuple[int, ...] = ()  # end offsets (exclusive) of snapshots to write
    tamper_snapshot: int | None = None  # end offset of a snapshot whose ACL set is altered
    drop_segments: tuple[int, ...] = ()  # indexes of segments to delete (retention holes)
    codec: int = 0
    max_offset: int | None = None  # cut the log here (a node that saw less)


def record_input(r: SynthRecord) -> object:
    from . import writer

    if r.api_key == LEADER_CHANGE_KEY:
        return writer.control_record(writer.LEADER_CHANGE, {"version": 0, **r.data})
    return writer.metadata_record(r.api_key, 0, dict(r.data))


def encode(b: SynthBatch, codec: int = 0) -> bytes:
    """One batch's bytes, as a Raft leader would append it."""
    from . import writer

    return writer.encode_batch(b.base_offset, [record_input(r) for r in b.records], b.epoch, b.time,  # type: ignore[misc]
                               0 if b.control else codec, b.control)


def model_batches(log: SynthLog, end_offset: int | None = None, source: str = "synth.log") -> list[Batch | Problem]:
    """The log decoded back into model batches (what the decoder would give for its segments)."""
    from .batch import read_bytes

    data = b"".join(encode(b) for b in log.batches if end_offset is None or b.base_offset < end_offset)
    return read_bytes(data, source)


def snapshot_acls(log: SynthLog, end_offset: int) -> dict[str, AclBinding]:
    """The committed ACL state after every record < end_offset, by the reference replayer."""
    from .replayer import Replayer

    if end_offset <= 0:
        return {}
    r = Replayer(high_watermark=end_offset)
    r.add_log(model_batches(log, end_offset))
    return r.run().state_at(end_offset - 1).certain


def write_dump(log: SynthLog, directory: str, layout: Layout = Layout()) -> list[str]:
    """Write the log as segments and snapshots under `directory/__cluster_metadata-0`; return the file paths."""
    from . import files, writer

    part = os.path.join(directory, "__cluster_metadata-0")
    os.makedirs(part, exist_ok=True)
    paths: list[str] = []
    segments: list[list[SynthBatch]] = []
    for b in log.batches:
        if layout.max_offset is not None and b.base_offset >= layout.max_offset:
            break
        if not segments or b.base_offset - segments[-1][0].base_offset >= layout.segment_every:
            segments.append([])
        segments[-1].append(b)
    for i, seg in enumerate(segments):
        if i in layout.drop_segments:
            continue
        path = os.path.join(part, files.segment_name(seg[0].base_offset))
        with open(path, "wb") as f:
            for b in seg:
                f.write(encode(b, layout.codec))
        paths.append(path)
    for end in layout.snapshot_at:
        acls = snapshot_acls(log, end)
        if layout.tamper_snapshot == end and acls:
            acls.pop(sorted(acls)[0])
        last_time = max((b.time for b in log.batches if b.base_offset < end), default=0)
        epoch = max((b.epoch for b in log.batches if b.base_offset < end), default=1)
        records = [writer.acl_record(i, acls[i]) for i in sorted(acls)] or [writer.noop()]
        paths.append(writer.write_snapshot(part, end, epoch, records, last_time, codec=layout.codec))
    return paths


__all__ = [
    "AclOperation",
    "Layout",
    "PatternType",
    "ResourceType",
    "SynthBatch",
    "SynthLog",
    "SynthRecord",
    "apply_retention",
    "divergent_copy",
    "generate",
    "generate_large",
    "log_from_steps",
    "new_acl_id",
    "quiet_snapshot_ends",
    "random_binding",
    "snapshot_acls",
    "write_dump",
]
