"""The sample dumps the demo and the notebook start from, and the broker settings that came with them.

A sample is a directory holding one cluster's `__cluster_metadata` files (see `data/README.md`); its
`server.properties`, when present, tells how that broker authorized. Without real samples (an installed wheel
ships none) `locate_samples` writes a synthetic dump with `replay.kafka.synth` and says so.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from replay.kafka import synth

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
