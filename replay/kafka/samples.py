"""The sample dumps the demo and the notebook start from, and the broker settings that came with them.

A sample is a directory holding one cluster's `__cluster_metadata` files (see `data/README.md`); its
`server.properties`, when present, tells how that broker authorized. Without real samples (an installed wheel
ships none) `locate_samples` writes a synthetic dump with `replay.kafka.synth` and says so.
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replay.kafka import synth
from replay.kafka.authorizer_log import LineProblem, LoggedDecision, parse_zone, read_log
from replay.kafka.dump import replay_paths
from replay.kafka.unused_acls import acl_rows, usage
from replay.kafka.verify_log import CONSISTENT, INCONSISTENT, UNKNOWN, Verifier, verdict_rows

DATA_ENV = "KRAFT_REPLAY_DATA"
FEATURED = ("retention-gap", "small-snapshots")  # the cluster a tour looks at, in order of preference


def _has_metadata_files(directory: Path) -> bool:
    if (directory / "__cluster_metadata-0").is_dir():
        return True
    return any(p.suffix in (".log", ".checkpoint") for p in directory.iterdir() if p.is_file()
               and p.name != "bootstrap.checkpoint")


def data_dir_candidates() -> list[Path]:
    """Where the sample dumps may be: `$KRAFT_REPLAY_DATA`, `data/` next to the package (the repository root in a
    source checkout), `replay/data/` (packaged samples: none exist today, so a wheel finds nothing there), `./data`."""
    package = Path(__file__).resolve().parents[1]
    out = []
    if os.environ.get(DATA_ENV):
        out.append(Path(os.environ[DATA_ENV]))
    out += [package.parent / "data", package / "data", Path.cwd() / "data"]
    return out


def sample_dirs(data: str | os.PathLike[str]) -> list[Path]:
    """The sample dumps under `data`: subdirectories holding metadata log files (or `data` itself if it is one)."""
    root = Path(data)
    if not root.is_dir():
        return []
    subs = sorted(p for p in root.iterdir() if p.is_dir() and not p.name.startswith((".", "_")))
    found = [p for p in subs if _has_metadata_files(p)]
    if not found and _has_metadata_files(root):
        return [root]
    return found


def default_data_dir() -> str | None:
    """The first candidate directory that holds sample dumps, or None."""
    for candidate in data_dir_candidates():
        if sample_dirs(candidate):
            return str(candidate)
    return None


def synthetic_sample(directory: str, seed: int = 7) -> Path:
    """A synthetic dump (segments, two snapshots, a retention hole) for when no real samples are around."""
    target = Path(directory) / "synthetic"
    if not (target.is_dir() and _has_metadata_files(target)):
        log = synth.generate(seed, n_batches=80)
        end = log.end_offset
        synth.write_dump(log, str(target), synth.Layout(segment_every=40, snapshot_at=(end // 3, 2 * end // 3),
                                                        drop_segments=(0,)))
    return target


@dataclass
class Samples:
    """The dumps to ingest, where they came from, and what a tour says about them."""

    dirs: list[Path]
    synthetic: bool
    note: str


def locate_samples(data: str | None, out_dir: str) -> Samples:
    """The sample dumps under `data` (default: `default_data_dir()`); without any, a synthetic dump in `out_dir`.
    An explicit `data` without dumps raises FileNotFoundError."""
    found = data or default_data_dir()
    dirs = sample_dirs(found) if found else []
    if data and not dirs:
        raise FileNotFoundError(f"no sample dumps under {data} (expected subdirectories holding "
                                "__cluster_metadata-0/ or *.log / *.checkpoint files)")
    if dirs:
        return Samples(dirs, False, f"Sample dumps in {found}: {', '.join(p.name for p in dirs)} (real Kafka "
                                    "metadata logs; see data/README.md).")
    synthetic = synthetic_sample(out_dir)
    looked = ", ".join(str(p) for p in data_dir_candidates())
    return Samples([synthetic], True,
                   f"No sample dumps found (looked in {looked}).\nFalling back to a SYNTHETIC dump written to "
                   f"{synthetic}: made-up ACLs from replay.kafka.synth, not a real Kafka log. For real dumps give "
                   f"--data DIR or set ${DATA_ENV} (the repository's data/ holds three).")


def featured_cluster(clusters: Sequence[str]) -> str:
    """The cluster a tour looks at: the first of `FEATURED` present, else the first one."""
    for name in FEATURED:
        if name in clusters:
            return name
    return clusters[0]


def broker_settings(sample: Path | None) -> tuple[str, bool]:
    """`super.users` and `allow.everyone.if.no.acl.found` from the sample's `server.properties`, when it has one."""
    supers, everyone = "", False
    props = sample / "server.properties" if sample else None
    if props is not None and props.is_file():
        for line in props.read_text(encoding="utf-8", errors="replace").splitlines():
            key, sep, value = line.partition("=")
            if sep and key.strip() == "super.users":
                supers = value.strip()
            elif sep and key.strip() == "allow.everyone.if.no.acl.found":
                everyone = value.strip().lower() == "true"
    return supers, everyone


def authorizer_sample_lines(directory: str) -> list[str]:
    """A verification of a sample laid out as `data/authorizer-log/` (`dump/`, `broker-logs/`, `broker.json` with
    the broker's settings), in a few lines for the demo: the verdicts, and the ACLs that decided nothing."""
    with open(os.path.join(directory, "broker.json")) as f:
        broker = json.load(f)
    verifier = Verifier(replay_paths([os.path.join(directory, "dump")]), broker["super_users"],
                        broker["allow_everyone_if_no_acl_found"])
    zone = parse_zone(broker["log_time_zone"])
    logs = sorted(os.path.join(directory, "broker-logs", n) for n in os.listdir(os.path.join(directory, "broker-logs")))
    problems: list[LineProblem] = []
    rows = list(verdict_rows(logs, verifier, zone, problems.append))
    counts = {v: sum(r["verdict"] == v for r in rows) for v in (CONSISTENT, INCONSISTENT, UNKNOWN)}
    out = [f"{len(rows)} logged decision(s) of {', '.join(os.path.basename(p) for p in logs)}: "
           + ", ".join(f"{n} {v}" for v, n in counts.items()) + f"; {len(problems)} unreadable"]
    out += [f"  {r['verdict']}: {r['principal']} {r['operation']} {r['resource_type']}:{r['resource_name']} "
            f"{r['decision']} at {r['time']}: {r['why']}" for r in rows if r["verdict"] != CONSISTENT][:10]
    decided = [r for _, r in ((n, x) for p in logs for n, x in read_log(p, zone)) if isinstance(r, LoggedDecision)]
    idle = [r for r in acl_rows(verifier.result, usage(decided, verifier), None, None) if not r["used"]]
    out.append(f"ACLs that decided no logged request: {len(idle)}")
    out += [f"  {r['principal']} {r['permission_type']} {r['operation']} on {r['resource_type']} "
            f"{r['pattern_type']}:{r['resource_name']} from {r['host']}" for r in idle[:10]]
    return out
