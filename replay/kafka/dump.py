"""Whole dumps: find the files, decode each one, and feed a replay. The one place that routes a file by its kind."""

from __future__ import annotations

import itertools
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from . import batch as batch_reader
from . import dumplog, files
from .model import Batch, Problem, SourceFile, SourceKind
from .replayer import NEEDED_RECORDS, Replayer, ReplayResult

T = TypeVar("T")


EXAMPLES_PER_KIND = 3


def example_order(p: Problem) -> tuple[str, bool, int, str, int, str]:
    """Which problems of a kind a summary shows: the lowest offsets first (none last), then by file, byte, text;
    the same order `replay.spark.findings` reads the lake's in, so both show the same ones."""
    return (p.kind.value, p.offset is None, p.offset or 0, p.file or "", p.position or -1, p.message)


@dataclass(slots=True)
class ProblemSummary:
    """Counts of problems by kind, and the first few of each (`example_order`), for the summary at the end of a
    run."""

    counts: Counter[str] = field(default_factory=Counter)
    examples: list[Problem] = field(default_factory=list)
    scope: str = ""  # what was read, when not everything was (" in the 2 files read")

    def add(self, problem: Problem) -> None:
        self.counts[problem.kind.value] += 1
        mine = [p for p in self.examples if p.kind == problem.kind]  # in example order
        if len(mine) < EXAMPLES_PER_KIND or example_order(problem) < example_order(mine[-1]):
            if len(mine) == EXAMPLES_PER_KIND:
                self.examples.remove(mine[-1])
            self.examples.append(problem)
            self.examples.sort(key=example_order)

    @property
    def total(self) -> int:
        return sum(self.counts.values())

    def lines(self) -> list[str]:
        if not self.total:
            return [f"no problems found{self.scope}"]
        out = [f"{self.total} problem(s){self.scope}: " + ", ".join(f"{k} {v}" for k, v in sorted(self.counts.items()))]
        out += ["  " + p.describe() for p in self.examples]
        return out


_SNAPSHOT_KINDS = (SourceKind.SNAPSHOT, SourceKind.BOOTSTRAP)


def read_source(source: SourceFile, strict: bool = False,
                records_for: frozenset[int] | None = None, show_secrets: bool = False) -> Iterator[Batch | Problem]:
    """Decode one file of a dump, whatever its kind, as batches and problems in file order.

    Snapshots and `bootstrap.checkpoint` (and snapshot sections of dump-log text) also get their structure
    problems, `snapshot_no_header` and `snapshot_no_footer`, in their own stream. With `strict=True` the first
    problem raises `batch.DecodeError`. `records_for`: see `batch.decode_batch` (binary files only; dump-log text
    is always read whole). Secrets come redacted unless `show_secrets` (`secrets`).
    """
    if source.kind == SourceKind.DUMP_LOG_TEXT:
        for item in read_text_sections(source.path, show_secrets):
            if isinstance(item, Problem) and strict:
                raise batch_reader.DecodeError(item)
            if isinstance(item, Batch | Problem):
                yield item
        return
    yield from batch_reader.read_file(source.path, strict=strict, snapshot=source.kind in _SNAPSHOT_KINDS,
                                      records_for=records_for, show_secrets=show_secrets)


def read_text_sections(path: str, show_secrets: bool = False) -> Iterator[dumplog.Section | Batch | Problem]:
    """A kafka-dump-log text file: each `Section` (a dumped file) before the batches and problems that are its."""
    with open(path, encoding="utf-8", errors="replace") as text:
        yield from dumplog.parse_text_sections(text, path, show_secrets)


def discover(paths: Iterable[str]) -> tuple[list[SourceFile], list[str]]:
    return files.discover(list(paths))


def replay_sources(
    sources: Iterable[SourceFile],
    high_watermark: int | None = None,
    strict: bool = False,
    summary: ProblemSummary | None = None,
    needed_only: bool = False,
    start_positions: Mapping[str, int] | None = None,
) -> ReplayResult:
    """Decode every source and replay them together (DESIGN.md §3). Decoder problems go to `summary` too.

    One file at a time, one batch at a time: the replayer keeps the ACL and transaction records and a few numbers
    per megabyte of a segment, not the log (see `Replayer`). `needed_only`: log segments decode only the values the rules read (`NEEDED_RECORDS`):
    the answer is the same, and the problems are those of what is decoded (every framing and CRC problem, the
    values of ACL, transaction, control and unknown records, and whole snapshots, whose every problem decides
    whether they load), not those of other records' values. `start_positions`: segments (by path) to read from
    that byte on (`batch.batch_position`; with `needed_only`), for a question that needs only the rest.
    """
    replayer = Replayer(high_watermark=high_watermark)

    def counted(items: Iterable[T]) -> Iterator[T]:
        for item in items:
            if isinstance(item, Problem) and summary is not None:
                summary.add(item)
            yield item

    for source in sources:
        if source.kind == SourceKind.DUMP_LOG_TEXT:
            _replay_text(replayer, counted(read_text_sections(source.path)), source.path)
            continue
        segment = source.kind == SourceKind.SEGMENT
        if needed_only and segment:  # the batches that keep no record come in runs (`native.BatchRun`)
            start = (start_positions or {}).get(source.path, 0)
            replayer.add_log(counted(batch_reader.read_log_file_in_runs(source.path, strict, NEEDED_RECORDS, start)),
                             from_file=True, records_for=NEEDED_RECORDS)
            continue
        items = counted(read_source(source, strict=strict))
        if source.kind == SourceKind.SNAPSHOT:
            assert source.snapshot_end_offset is not None and source.snapshot_epoch is not None
            replayer.add_snapshot(source.snapshot_end_offset, source.snapshot_epoch, items, source.path)
        elif source.kind == SourceKind.BOOTSTRAP:
            for _ in items:  # bootstrap records reach the log through the controller; decode for problems only
                pass
        else:
            replayer.add_log(items, from_file=True)
    result = replayer.run()
    if summary is not None:
        decoder_problems = {id(p) for p in summary.examples}
        for anomaly in result.anomalies:
            if id(anomaly) not in decoder_problems and anomaly.kind.value not in _DECODER_KINDS:
                summary.add(anomaly)
    return result


_DECODER_KINDS = {
    "not_a_metadata_log", "unreadable_file", "truncated_tail", "bad_magic", "batch_too_short", "bad_crc",
    "unknown_codec", "decompression_failed", "decompression_limit", "record_overrun", "trailing_bytes",
    "record_count_mismatch",
    "bad_record", "unknown_api_key", "unknown_version", "unknown_control_type", "bad_text_line",
    "unknown_tagged_field", "snapshot_no_header", "snapshot_no_footer", "untyped_record",
}


def _replay_text(replayer: Replayer, items: Iterable[dumplog.Section | Batch | Problem], path: str) -> None:
    """A dump-log text may hold several files' sections; route each to the log or to a snapshot, streaming.

    A section's kind is known from its header line, which precedes its first batch: the items before its first
    batch (problems only) wait, the rest flow to the replayer one at a time."""
    sections = _TextSections(iter(items))
    while sections.next_section():
        section = sections.current
        head = list(_through_first_batch(sections))
        if head:
            _route_text_section(replayer, section, itertools.chain(head, sections), path)
        for _ in sections:  # what the route did not read (a bootstrap section's items)
            pass


class _TextSections:
    """The items of one section at a time: `next_section` moves to the next `Section` marker (`current`), then
    iterating yields that section's batches and problems and stops at the next marker."""

    def __init__(self, items: Iterator[dumplog.Section | Batch | Problem]) -> None:
        self._items = items
        self._pending: dumplog.Section | Batch | Problem | None = next(items, None)  # read, not yet handed out
        self.current: dumplog.Section | None = None
        self._open = False

    def next_section(self) -> bool:
        if self._pending is None:
            return False
        self.current = None  # items before any `Dumping` line form a section of their own
        if isinstance(self._pending, dumplog.Section):
            self.current, self._pending = self._pending, None
        self._open = True
        return True

    def __iter__(self) -> Iterator[Batch | Problem]:
        return self

    def __next__(self) -> Batch | Problem:
        if not self._open:
            raise StopIteration
        item, self._pending = (self._pending, None) if self._pending is not None else (next(self._items, None), None)
        if item is None or isinstance(item, dumplog.Section):
            self._pending, self._open = item, False
            raise StopIteration
        return item


def _through_first_batch(items: Iterator[Batch | Problem]) -> Iterator[Batch | Problem]:
    for item in items:
        yield item
        if isinstance(item, Batch):
            return


def _route_text_section(replayer: Replayer, section: dumplog.Section | None, items: Iterable[Batch | Problem],
                        path: str) -> None:
    facts = section.facts() if section is not None else None
    if facts is not None and facts.snapshot_end_offset is not None:
        replayer.add_snapshot(facts.snapshot_end_offset, facts.snapshot_epoch or 0, items, f"{path}:{facts.name}")
    elif facts is not None and facts.is_bootstrap:
        return
    else:
        replayer.add_log(items, text=True)


def replay_paths(
    paths: Iterable[str], high_watermark: int | None = None, strict: bool = False,
    summary: ProblemSummary | None = None, needed_only: bool = False,
) -> ReplayResult:
    sources, _ignored = discover(paths)
    return replay_sources(sources, high_watermark=high_watermark, strict=strict, summary=summary,
                          needed_only=needed_only)
