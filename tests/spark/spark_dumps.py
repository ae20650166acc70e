"""Small metadata-log dumps for the Spark tests, written with `replay.kafka.writer` (no Spark here), and where the
real sample dumps are."""

from __future__ import annotations

import base64
import os
from collections.abc import Sequence
from pathlib import Path

from replay.kafka import writer
from replay.kafka.acl import AclBinding
from replay.kafka.files import segment_name

T0 = 1_700_000_000_000
DATA = Path(__file__).resolve().parents[2] / "data"
SAMPLES = sorted(p for p in DATA.iterdir() if (p / "__cluster_metadata-0").is_dir())  # the real dumps a broker wrote
ALICE_READ = AclBinding.of("TOPIC", "payments", "LITERAL", "User:alice", "*", "READ", "ALLOW")
BOB_WRITE = AclBinding.of("TOPIC", "orders", "PREFIXED", "User:bob", "10.0.0.1", "WRITE", "DENY")


def acl_id(n: int) -> str:
    """A valid ACL id (Kafka's base64url UUID text) numbered n."""
    return base64.urlsafe_b64encode(n.to_bytes(16, "big")).decode().rstrip("=")


def write_segment(directory: str, base_offset: int = 0, epoch: int = 1) -> str:
    """Offsets base..base+5: leader change, create A, a transaction creating B, remove A."""
    with writer.SegmentWriter(directory, base_offset, epoch=epoch, timestamp=T0 + base_offset * 1000,
                              time_step=1000) as w:
        w.append_leader_change(1, [1], epoch=epoch)
        w.append([writer.acl_record(acl_id(1), ALICE_READ)])
        w.append([writer.begin_txn("t"), writer.acl_record(acl_id(2), BOB_WRITE), writer.end_txn()])
        w.append([writer.remove_acl_record(acl_id(1))])
        return w.path


def write_dump(root: str, with_snapshot: bool = True, with_bootstrap: bool = True) -> str:
    """A broker log dir: `root/__cluster_metadata-0/` with one segment (and a snapshot at 3), bootstrap next to it.

    Records: 6 log records (offsets 0..5), snapshot 3-1 with 3 records, bootstrap with 2 (header + footer + one
    no-op = 3). Also an index file and meta.properties, which are ignored.
    """
    part = os.path.join(root, "__cluster_metadata-0")
    write_segment(part)
    with open(os.path.join(part, "00000000000000000000.index"), "wb") as f:
        f.write(b"\0" * 16)
    if with_snapshot:
        writer.write_snapshot(part, 3, 1, [writer.acl_record(acl_id(1), ALICE_READ)], T0 + 1000)
    if with_bootstrap:
        writer.write_bootstrap(root, [writer.noop()])
    with open(os.path.join(root, "meta.properties"), "w") as f:
        f.write("version=1\ncluster.id=abc\nnode.id=1\n")
    return root


def write_bad_segment(directory: str) -> tuple[str, dict[str, int]]:
    """A segment: good batch @0, bad-CRC batch @1, good batch @2, then a truncated tail. Returns path and positions."""
    os.makedirs(directory, exist_ok=True)
    good0 = writer.encode_batch(0, [writer.acl_record(acl_id(1), ALICE_READ)], 1, T0)
    bad1 = writer.corrupt_crc(writer.encode_batch(1, [writer.acl_record(acl_id(2), BOB_WRITE)], 1, T0 + 1))
    good2 = writer.encode_batch(2, [writer.remove_acl_record(acl_id(1))], 1, T0 + 2)
    tail = writer.encode_batch(3, [writer.noop()], 1, T0 + 3)[:30]
    path = os.path.join(directory, segment_name(0))
    with open(path, "wb") as f:
        f.write(good0 + bad1 + good2 + tail)
    positions = {"bad_crc": len(good0), "good2": len(good0) + len(bad1), "tail": len(good0) + len(bad1) + len(good2)}
    return path, positions


def write_batches(directory: str, batches: Sequence[bytes], base_offset: int = 0) -> str:
    os.makedirs(directory, exist_ok=True)
    path = os.path.join(directory, segment_name(base_offset))
    with open(path, "wb") as f:
        for b in batches:
            f.write(b)
    return path


def write_large_segment(directory: str, records: int, per_batch: int = 500) -> str:
    """A segment with `records` ACL create records (for the atomicity test)."""
    os.makedirs(directory, exist_ok=True)
    binding = ALICE_READ
    with writer.SegmentWriter(directory, 0, epoch=1, timestamp=T0, time_step=10) as w:
        n = 0
        while n < records:
            k = min(per_batch, records - n)
            w.append([writer.acl_record(acl_id(n + i + 1), binding) for i in range(k)])
            n += k
        return w.path
