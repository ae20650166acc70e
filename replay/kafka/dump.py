"""Whole dumps: find the files, decode each one, and feed a replay. The one place that routes a file by its kind."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from . import batch as batch_reader
from . import files
from .model import Batch, Problem, SourceFile, SourceKind
from .replayer import Replayer, ReplayResult


@dataclass(slots=True)
class ProblemSummary:
    """Counts of problems by kind, and the first few of each, for the summary at the end of a run."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[Problem] = field(default_factory=list)

    def add(self, problem: Problem) -> None:
        self.counts[problem.kind.value] += 1
        if self.counts[problem.kind.value] <= 3:
            self.examples.append(problem)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        if not self.total:
            return ["no problems found"]
        out = [f"{self.total} problem(s): " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))]
        out += ["  " + p.describe() for p in self.examples]
        return out


def read_source(source: SourceFile, strict: bool = False) -> Iterator[Batch | Problem]:
    """Decode one file of a dump, whatever its kind, as batches and problems in file order."""
    if source.kind == SourceKind.DUMP_LOG_TEXT:
        from . import dumplog

        with open(source.path, encoding="utf-8", errors="replace") as text:
            yield from dumplog.parse_text(text, source.path)
        return
    yield from batch_reader.read_file(source.path, strict=strict)


def discover(paths: Iterable[str]) -> tuple[list[SourceFile], list[str]]:
    return files.discover(list(paths))


def replay_sources(
    sources: Iterable[SourceFile],
    high_watermark: int | None = None,
    strict: bool = False,
    summary: ProblemSummary | None = None,
) -> ReplayResult:
    """Decode every source and replay them together (DESIGN.md §3). Decoder problems go to `summary` too."""
    replayer = Replayer(high_watermark=high_watermark)

    def counted(items: Iterable[Batch | Problem]) -> Iterator[Batch | Problem]:
        for item in items:
            if isinstance(item, Problem) and summary is not None:
                summary.add(item)
            yield item

    for source in sources:
        items = counted(read_source(source, strict=strict))
        if source.kind == SourceKind.SNAPSHOT:
            assert source.snapshot_end_offset is not None and source.snapshot_epoch is not None
            replayer.add_snapshot(source.snapshot_end_offset, source.snapshot_epoch, items, source.path)
        elif source.kind == SourceKind.BOOTSTRAP:
            for _ in items:  # bootstrap records reach the log through the controller; decode for problems only
                pass
        elif source.kind == SourceKind.DUMP_LOG_TEXT:
            _replay_text(replayer, items, source.path)
        else:
            replayer.add_log(items)
    result = replayer.run()
    if summary is not None:
        decoder_problems = {id(p) for p in summary.examples}
        for anomaly in result.anomalies:
            if id(anomaly) not in decoder_problems and anomaly.kind.value not in _DECODER_KINDS:
                summary.add(anomaly)
    return result


_DECODER_KINDS = {
    "not_a_metadata_log", "unreadable_file", "truncated_tail", "bad_magic", "batch_too_short", "bad_crc",
    "unknown_codec", "decompression_failed", "record_overrun", "trailing_bytes", "record_count_mismatch",
    "bad_record", "unknown_api_key", "unknown_version", "unknown_control_type", "bad_text_line",
}


def _replay_text(replayer: Replayer, items: Iterable[Batch | Problem], path: str) -> None:
    """A dump-log text may hold several files' sections; route each to the log or to a snapshot."""
    from . import dumplog

    section: list[Batch | Problem] = []
    current: dumplog.Section | None = None
    for item in dumplog.with_sections(items):
        if isinstance(item, dumplog.Section):
            _flush_text_section(replayer, current, section, path)
            current, section = item, []
        else:
            section.append(item)
    _flush_text_section(replayer, current, section, path)


def _flush_text_section(replayer: Replayer, section: object, items: list[Batch | Problem], path: str) -> None:
    from . import dumplog

    if not items:
        return
    if isinstance(section, dumplog.Section) and section.snapshot_end_offset is not None:
        replayer.add_snapshot(section.snapshot_end_offset, section.snapshot_epoch or 0, items,
                              f"{path}:{section.name}")
    elif isinstance(section, dumplog.Section) and section.is_bootstrap:
        return
    else:
        replayer.add_log(items)


def replay_paths(
    paths: Iterable[str], high_watermark: int | None = None, strict: bool = False,
    summary: ProblemSummary | None = None,
) -> ReplayResult:
    sources, _ignored = discover(paths)
    return replay_sources(sources, high_watermark=high_watermark, strict=strict, summary=summary)
