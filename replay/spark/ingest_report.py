"""What an ingest tells its caller: its report, and the errors that mean nothing was written."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Any


class IngestError(RuntimeError):
    """The ingest could not run (nothing to read, a path that does not exist, ...). Nothing was written."""


class StrictIngestError(IngestError):
    """Strict mode found problems in the input; nothing was written. `problems` lists the first few."""

    def __init__(self, message: str, counts: dict[str, int], problems: list[str]) -> None:
        super().__init__(message)
        self.counts = counts
        self.problems = problems


@dataclass
class IngestReport:
    """What one ingest read and wrote. Counts are rows; `*_new` are the rows the tables did not hold before."""

    ingest_id: str
    cluster_id: str
    lake: str
    strict: bool
    files: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)
    bytes: int = 0
    held_files: int = 0  # files whose bytes the lake held already, whole or in part (`ingest_held`)
    held_bytes: int = 0  # ... and those bytes, which were not decoded again
    records: int = 0
    records_new: int = 0
    problems: int = 0
    problems_new: int = 0
    problems_by_kind: dict[str, int] = field(default_factory=dict)
    records_by_stream: dict[str, int] = field(default_factory=dict)
    log_offsets: tuple[int, int] | None = None
    snapshots: list[tuple[int, int]] = field(default_factory=list)
    versions: dict[str, int | None] = field(default_factory=dict)
    committed: dict[str, bool] = field(default_factory=dict)
    seconds: float = 0.0

    def lines(self) -> list[str]:
        span = f"log offsets {self.log_offsets[0]}..{self.log_offsets[1]}" if self.log_offsets else "no log records"
        out = [
            f"ingest {self.ingest_id} of cluster {self.cluster_id!r} into {self.lake}: {len(self.files)} file(s), "
            f"{self.bytes:,} bytes, {self.seconds:.1f} s",
            f"  records: {self.records:,} decoded, {self.records_new:,} new ({span}; "
            f"{len(self.snapshots)} snapshot(s))",
        ]
        if self.held_files:
            out.append(f"  held already: {self.held_bytes:,} bytes of {self.held_files} file(s), the same bytes as "
                       "an earlier ingest read, not decoded again")
        if self.problems:
            kinds = ", ".join(f"{k} {v}" for k, v in sorted(self.problems_by_kind.items()))
            out.append(f"  decoder problems: {self.problems:,} ({kinds}), {self.problems_new:,} new in quarantine")
        else:
            out.append("  decoder problems: none (what the replay finds follows it)")
        for table, version in self.versions.items():
            state = "committed" if self.committed.get(table) else "unchanged (nothing new)"
            out.append(f"  {table}: version {version}, {state}")
        if self.ignored:
            out.append(f"  ignored {len(self.ignored)} file(s) that are not metadata log files")
        return out

    def __str__(self) -> str:
        return "\n".join(self.lines())

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

