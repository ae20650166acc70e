"""Regenerate the sample dumps in `data/`: `python -m tests.harness.make_samples [--out data] [NAME ...]`.

Each sample is one real Kafka 4.3.1 broker (see `tests.harness.broker`) playing one generated ACL history
(`tests.harness.histories`) through the Admin API (`java/AclHistoryDriver.java`), then stopped cleanly. Copied
into `data/<name>/` (the layout of the broker's `metadata.log.dir`):

* `meta.properties`, `bootstrap.checkpoint`;
* `__cluster_metadata-0/*.log` and `__cluster_metadata-0/*.checkpoint` (no indexes, producer snapshots, `.part`
  or `.deleted` files, quorum-state or leader-epoch-checkpoint);
* `history.jsonl` (the driver's input), `ops.jsonl` (what Kafka answered to each call, with the log end offset
  and high watermark after it), `checkpoints.jsonl` (describeAcls(ANY) and offsets at each checkpoint);
* `server.properties` as the broker ran it, `run.json` (cluster id, start times, the driver's summaries) and
  `README.md` with the facts (counted with Kafka's own DumpLogSegments).

Every sample turns both snapshot limits down: `metadata.log.max.record.bytes.between.snapshots` (per sample) and
`metadata.log.max.snapshot.interval.ms` (`SHORT_SNAPSHOT_INTERVAL_MS`), so snapshots land inside the history. The
samples committed in `data/` were made before the interval was set and before `run.json` was written by the run;
`data/README.md` says what that changes.

A rerun gives a different dump (ACL ids are random, times and NoOpRecords depend on the clock), with the same
history. The history itself depends only on (profile, seed).
"""

from __future__ import annotations

import argparse
import json
import re
import shutil
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from replay.maven import KAFKA_VERSION
from tests.harness.broker import SHORT_SNAPSHOT_INTERVAL_MS, BrokerConfig, KafkaBroker, random_cluster_id
from tests.harness.driver import run_history
from tests.harness.dumplog import dump_log
from tests.harness.histories import generate, summarize, write_ops

SNAPSHOT_NAME = re.compile(r"^(\d{20})-(\d{10})\.checkpoint$")
SEGMENT_NAME = re.compile(r"^(\d{20})\.log$")
PAYLOAD_TYPE = re.compile(r'payload: \{"type":"([A-Z_]+)"')


@dataclass
class Sample:
    name: str
    summary: str
    profile: str
    seed: int
    config: BrokerConfig
    split_after: int | None = None  # after this many operations: restart the broker, or hold it (idle) a while
    hold_seconds: float = 0.0  # 0: restart at the split; else stay up this long (Kafka's log cleaner runs every 60 s)
    notes: list[str] = field(default_factory=list)


SAMPLES: dict[str, Sample] = {
    s.name: s
    for s in (
        Sample(
            "small-snapshots",
            "a small history over several 4 KiB segments with snapshots in the middle of the log",
            "small", 1,
            BrokerConfig(snapshot_bytes=4096, snapshot_interval_ms=SHORT_SNAPSHOT_INTERVAL_MS, segment_bytes=4096),
        ),
        Sample(
            "retention-gap",
            "old segments and snapshots deleted by retention: the log starts above 0 and a snapshot bridges the hole",
            "small", 2,
            BrokerConfig(snapshot_bytes=4096, snapshot_interval_ms=SHORT_SNAPSHOT_INTERVAL_MS, segment_bytes=4096,
                         retention_bytes=12288, extra={"internal.metadata.delete.delay.millis": "0"}),
            split_after=40, hold_seconds=65.0,
            notes=["`metadata.max.retention.bytes=12288` makes Kafka delete the oldest segments and snapshots once a "
                   "newer snapshot exists, so offsets below the first segment are known only through a snapshot. "
                   "Kafka's Raft client runs that cleaner every 60 s, so the driver paused 65 s after operation 40 "
                   "(NoOpRecords kept coming, one every 500 ms) and then played the rest of the history. Early "
                   "checkpoints lie before anything left in the dump."],
        ),
        Sample(
            "static-quorum-restart",
            "a static-quorum (controller.quorum.voters) broker restarted in the middle of the history: two leader epochs",
            "tiny", 3,
            BrokerConfig(snapshot_bytes=2048, snapshot_interval_ms=SHORT_SNAPSHOT_INTERVAL_MS, segment_bytes=4096,
                         quorum="static"),
            split_after=6,
            notes=["Formatted without `--standalone` (static quorum), so there is no "
                   "`00000000000000000000-0000000000.checkpoint`; the restart starts leader epoch 2."],
        ),
    )
}


def copy_dump(meta_log_dir: Path, dest: Path) -> None:
    """Copy what a user would hand over: meta.properties, bootstrap.checkpoint, segments and snapshots."""
    dest.mkdir(parents=True, exist_ok=True)
    for name in ("meta.properties", "bootstrap.checkpoint"):
        if (meta_log_dir / name).exists():
            shutil.copyfile(meta_log_dir / name, dest / name)
    part = meta_log_dir / "__cluster_metadata-0"
    (dest / part.name).mkdir(exist_ok=True)
    for f in sorted(part.iterdir()):
        if SEGMENT_NAME.match(f.name) or SNAPSHOT_NAME.match(f.name):
            shutil.copyfile(f, dest / part.name / f.name)


def _merge_outputs(parts: list[tuple[Path, Path]], out_cp: Path, out_ops: Path) -> None:
    done = 0
    with open(out_cp, "w", encoding="utf-8") as cp_f, open(out_ops, "w", encoding="utf-8") as op_f:
        for i, (cp, ops) in enumerate(parts):
            last = 0
            for line in ops.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                rec["index"] += done
                rec["part"] = i + 1
                last = rec["index"] + 1
                op_f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            for line in cp.read_text(encoding="utf-8").splitlines():
                rec = json.loads(line)
                rec["ops_done"] += done
                rec["part"] = i + 1
                cp_f.write(json.dumps(rec, ensure_ascii=False, separators=(",", ":")) + "\n")
            done = max(done, last)


def play(sample: Sample, work: Path, out: Path) -> dict[str, Any]:
    """Run the sample's history on a fresh broker in `work`; leave history/ops/checkpoints in `out`."""
    ops = generate(sample.profile, sample.seed)
    if sample.split_after is None:
        chunks = [ops]
    else:
        n, cut = 0, len(ops)
        for i, op in enumerate(ops):
            n += op["op"] != "checkpoint"
            if n == sample.split_after:
                cut = i + 1
                while cut < len(ops) and ops[cut]["op"] == "checkpoint":
                    cut += 1
                break
        chunks = [ops[:cut], ops[cut:]]
    out.mkdir(parents=True, exist_ok=True)
    write_ops(ops, out / "history.jsonl")
    broker = KafkaBroker(work, sample.config, cluster_id=random_cluster_id(seed=sample.seed))
    parts: list[tuple[Path, Path]] = []
    starts: list[float] = []
    summaries = []
    restart = not sample.hold_seconds
    try:
        for i, chunk in enumerate(chunks):
            part_ops = write_ops(chunk, work / f"history-{i + 1}.jsonl")
            cp, oplog = work / f"checkpoints-{i + 1}.jsonl", work / f"ops-{i + 1}.jsonl"
            if broker.proc is None:
                broker.start()
                assert broker.start_seconds is not None
                starts.append(broker.start_seconds)
            summaries.append(run_history(broker.bootstrap, part_ops, cp, oplog))
            parts.append((cp, oplog))
            if i < len(chunks) - 1:
                if restart:
                    broker.stop()
                else:
                    time.sleep(sample.hold_seconds)
    finally:
        broker.stop()  # also when a chunk failed: never leave a broker running (stop is idempotent)
    _merge_outputs(parts, out / "checkpoints.jsonl", out / "ops.jsonl")
    shutil.copyfile(broker.config_path, out / "server.properties")
    return {"cluster_id": broker.cluster_id, "start_seconds": starts, "driver": summaries,
            "meta_log_dir": broker.metadata_log_dir}


def describe_dump(dump: Path) -> dict[str, Any]:
    """Facts about a copied dump, read with Kafka's own DumpLogSegments."""
    part = dump / "__cluster_metadata-0"
    segments = sorted(f for f in part.iterdir() if SEGMENT_NAME.match(f.name))
    snapshots = sorted(f for f in part.iterdir() if SNAPSHOT_NAME.match(f.name))
    log_types: Counter[str] = Counter()
    offsets: list[int] = []
    epochs: set[int] = set()
    for seg in segments:
        for line in dump_log(seg).splitlines():
            m = PAYLOAD_TYPE.search(line)
            if m:
                log_types[m.group(1)] += 1
            if line.startswith("| offset: "):
                offsets.append(int(line.split()[2]))
            elif line.startswith("baseOffset: "):
                epochs.add(int(line.split("partitionLeaderEpoch: ")[1].split()[0]))
    snaps = []
    for snap in snapshots:
        m = SNAPSHOT_NAME.match(snap.name)
        assert m is not None
        text = dump_log(snap)
        snaps.append({
            "file": snap.name, "end_offset": int(m.group(1)), "epoch": int(m.group(2)),
            "acls": text.count('"type":"ACCESS_CONTROL_ENTRY_RECORD"'), "bytes": snap.stat().st_size,
        })
    return {
        "segments": [{"file": s.name, "base_offset": int(SEGMENT_NAME.match(s.name).group(1)),  # type: ignore[union-attr]
                      "bytes": s.stat().st_size} for s in segments],
        "first_offset": min(offsets, default=None),
        "last_offset": max(offsets, default=None),
        "leader_epochs": sorted(epochs),
        "record_types": dict(sorted(log_types.items())),
        "snapshots": snaps,
        "total_bytes": sum(f.stat().st_size for f in dump.rglob("*") if f.is_file()),
    }


def _readme(sample: Sample, run: dict[str, Any], facts: dict[str, Any], hist: dict[str, Any],
            checkpoints: list[dict[str, Any]]) -> str:
    props = (run["out"] / "server.properties").read_text().strip()
    cp_lines = "\n".join(
        f"| {c['label']} | {c['ops_done']} | {c['as_of_offset']} | {c['high_watermark_after']} | {c['acl_count']} |"
        f" {c['matches_expected']} |" for c in checkpoints
    )
    seg_lines = ", ".join(f"`{s['file']}` ({s['bytes']} B)" for s in facts["segments"])
    snap_lines = "\n".join(
        f"| `{s['file']}` | {s['end_offset']} | {s['epoch']} | {s['acls']} |" for s in facts["snapshots"]
    )
    rt = facts["record_types"]
    answers = [json.loads(line) for line in (run["out"] / "ops.jsonl").read_text(encoding="utf-8").splitlines()]
    created = sum(len(a.get("created", [])) for a in answers)
    deleted = sum(len(a.get("deleted", [])) for a in answers)
    errors = sum(len(a.get("errors", [])) for a in answers)
    restart = (f"The broker was stopped (SIGTERM) after operation {sample.split_after} and started again on the same "
               "storage and ports; the second part's checkpoints and ops have `part: 2`.\n\n"
               if sample.split_after and not sample.hold_seconds else "")
    notes = "".join(f"- {n}\n" for n in sample.notes)
    return f"""# Sample `{sample.name}`: {sample.summary}

A real dump: Apache Kafka {KAFKA_VERSION} (Maven Central jars `org.apache.kafka:kafka_2.13` and `kafka-tools`), one
node in KRaft combined mode (`process.roles=broker,controller`) on 127.0.0.1, with the StandardAuthorizer. Made by
`python -m tests.harness.make_samples {sample.name}` (module `tests/harness/make_samples.py`).

## How it was made

1. `kafka.tools.StorageTool format --cluster-id {run['cluster_id']} --config server.properties{' --standalone' if sample.config.quorum == 'dynamic' else ''}`
   (cluster id derived from seed {sample.seed}).
2. `java -Xmx{sample.config.heap} -cp <kafka jars> kafka.Kafka server.properties`; ready in
   {', '.join(f'{s:.1f}' for s in run['start_seconds'])} s.
3. The history `tests.harness.histories.generate("{sample.profile}", seed={sample.seed})` (`history.jsonl`),
   played by `AclHistoryDriver` (`tests/harness/java/`) through the Admin API: one CreateAcls call per `create`
   line, one DeleteAcls call per `delete` line, describeAcls(ANY) and describeMetadataQuorum at each checkpoint.
4. SIGTERM, clean shutdown; then the files below were copied.
{restart}{notes}
The broker configuration (`server.properties`, ports were free ports of that run):

```properties
{props}
```

## What it contains

- History: {hist['create_calls']} CreateAcls calls asking for {hist['bindings_in_create_calls']} bindings,
  {hist['delete_calls']} DeleteAcls calls with {hist['filters_in_delete_calls']} filters, {hist['checkpoints']} checkpoints.
- Kafka's answers (`ops.jsonl`): {created} bindings created (one that already exists is reported created but
  writes no record), {deleted} deleted, {errors} errors.
- Principals: {', '.join(f'`{p}`' for p in hist['principals'])}.
- Hosts: {', '.join(f'`{h}`' for h in hist['hosts'])}.
- Resource types: {', '.join(hist['resource_types'])}; pattern types {', '.join(hist['pattern_types'])};
  {hist['wildcard_resources']} wildcard (`*`) resource bindings and {hist['deny']} DENY bindings asked for.
- Log: offsets {facts['first_offset']}..{facts['last_offset']} in {len(facts['segments'])} segments ({seg_lines}),
  leader epochs {facts['leader_epochs']}.
- Records in the segments (Kafka's DumpLogSegments): {rt.get('ACCESS_CONTROL_ENTRY_RECORD', 0)}
  AccessControlEntryRecord, {rt.get('REMOVE_ACCESS_CONTROL_ENTRY_RECORD', 0)} RemoveAccessControlEntryRecord,
  {rt.get('BEGIN_TRANSACTION_RECORD', 0)} BeginTransaction / {rt.get('END_TRANSACTION_RECORD', 0)} EndTransaction,
  {rt.get('NO_OP_RECORD', 0)} NoOpRecord; all types: `{json.dumps(rt)}`.

Snapshots (the end offset is exclusive; `acls` counts AccessControlEntryRecords in the file):

| file | end offset | epoch | acls |
|---|---|---|---|
{snap_lines}

Checkpoints (`checkpoints.jsonl`): the ACLs listed there are the state as of every offset from `as_of_offset` to
`high_watermark_after - 1`:

| label | ops done | as_of_offset | high_watermark_after | ACLs | matches expected |
|---|---|---|---|---|---|
{cp_lines}

Total size of the copied files: {facts['total_bytes']} bytes.
"""


def make(sample: Sample, out_root: Path) -> dict[str, Any]:
    dest = out_root / sample.name
    with tempfile.TemporaryDirectory(prefix=f"kraft-sample-{sample.name}-") as tmp:
        work = Path(tmp) / "broker"
        staging = Path(tmp) / "out"
        run = play(sample, work, staging)
        copy_dump(run["meta_log_dir"], staging)
        (staging / "run.json").write_text(json.dumps(
            {"cluster_id": run["cluster_id"], "start_seconds": run["start_seconds"], "driver": run["driver"]},
            indent=1) + "\n")
        facts = write_readme(sample, staging)
        if dest.exists():
            shutil.rmtree(dest)
        shutil.copytree(staging, dest)
    return facts


def write_readme(sample: Sample, dest: Path) -> dict[str, Any]:
    """(Re)write `dest/README.md` from the files of a made sample (`run.json` holds what only the run knew)."""
    run = json.loads((dest / "run.json").read_text())
    run["out"] = dest
    facts = describe_dump(dest)
    hist = summarize(generate(sample.profile, sample.seed))
    checkpoints = [json.loads(line) for line in (dest / "checkpoints.jsonl").read_text().splitlines()]
    (dest / "README.md").write_text(_readme(sample, run, facts, hist, checkpoints), encoding="utf-8")
    return facts


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.make_samples")
    parser.add_argument("--out", type=Path, default=Path("data"))
    parser.add_argument("--readme-only", action="store_true", help="rewrite the READMEs of existing samples")
    parser.add_argument("names", nargs="*", help=f"which samples (default all): {', '.join(SAMPLES)}")
    args = parser.parse_args(argv)
    for name in args.names or list(SAMPLES):
        if args.readme_only:
            facts = write_readme(SAMPLES[name], args.out / name)
        else:
            facts = make(SAMPLES[name], args.out)
        print(f"{name}: {len(facts['segments'])} segments, {len(facts['snapshots'])} snapshots, "
              f"offsets {facts['first_offset']}..{facts['last_offset']}, {facts['total_bytes']} bytes")
    return 0


if __name__ == "__main__":
    sys.exit(main())
