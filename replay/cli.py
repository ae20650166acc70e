"""`kraft-replay`: inspect dumps, answer as-of questions from files or from a lake, ingest, authorize, audit."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Sequence
from datetime import datetime, timezone
from typing import TextIO

EXIT_OK = 0
EXIT_PROBLEMS = 3  # --strict and something was wrong with the input
EXIT_USAGE = 2


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (`2026-11-20T14:02:00Z`; no zone means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise argparse.ArgumentTypeError(
            f"cannot read time {text!r}: give epoch milliseconds or ISO-8601 like 2026-11-20T14:02:00Z") from err
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def format_time(ms: int | None) -> str:
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _print_lines(lines: Iterable[str], out: TextIO) -> None:
    for line in lines:
        out.write(line + "\n")


# ---- inspect -------------------------------------------------------------------------------------------------
def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    from replay.kafka import dumplog
    from replay.kafka.dump import ProblemSummary, discover, read_source
    from replay.kafka.model import Batch, Problem, SourceKind

    sources, ignored = discover(args.paths)
    summary = ProblemSummary()
    if not sources:
        print(f"kraft-replay inspect: no metadata log files under {' '.join(args.paths)} "
              "(expected *.log segments, *.checkpoint snapshots or kafka-dump-log text)", file=sys.stderr)
        return EXIT_USAGE
    for source in sources:
        if args.format == "dump-log":
            if source.kind == SourceKind.DUMP_LOG_TEXT:
                print(f"skipping {source.path}: it is already dump-log text", file=sys.stderr)
                continue
            for line in dumplog.render_file(source.path, variant=args.variant,
                                            skip_record_metadata=args.skip_record_metadata, problems=summary.add):
                out.write(line + "\n")
            continue
        batches = records = 0
        types: dict[str, int] = {}
        first = last = None
        for item in read_source(source):
            if isinstance(item, Problem):
                summary.add(item)
                if args.format == "json":
                    out.write(json.dumps({"problem": item.kind.value, "file": item.file, "position": item.position,
                                          "offset": item.offset, "message": item.message}) + "\n")
                continue
            assert isinstance(item, Batch)
            batches += 1
            first = item.base_offset if first is None else first
            last = item.header.last_offset
            for record in item.records:
                records += 1
                name = record.type_name or "UNDECODED"
                types[name] = types.get(name, 0) + 1
                if args.format == "json":
                    out.write(json.dumps(dumplog.record_json(item, record)) + "\n")
        if args.format == "summary":
            kind = source.kind.value
            extra = ""
            if source.kind == SourceKind.SNAPSHOT:
                extra = f" end offset {source.snapshot_end_offset} epoch {source.snapshot_epoch}"
            out.write(f"{source.path}: {kind}{extra}, {batches} batches, {records} records, "
                      f"offsets {first}..{last}\n")
            for name, n in sorted(types.items()):
                out.write(f"  {name}: {n}\n")
    if ignored and args.format == "summary":
        out.write(f"ignored {len(ignored)} file(s) that are not metadata logs: {', '.join(ignored[:5])}\n")
    for line in summary.lines():
        print(line, file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and summary.total else EXIT_OK


# ---- acls ----------------------------------------------------------------------------------------------------
def cmd_acls(args: argparse.Namespace, out: TextIO) -> int:
    from replay.kafka.listing import render_acls

    if args.lake is not None or args.catalog is not None:
        from replay.spark import queries, session

        spark = session.get_spark(master=args.master)
        lake = queries.open_lake(spark, args.lake, args.catalog)
        state = queries.state_at(spark, lake, args.cluster, offset=args.as_of_offset, time=args.as_of_time)
        _print_lines(render_acls(state.certain, args.format, state.uncertain, state.meta()), out)
        return EXIT_OK
    if not args.paths:
        print("kraft-replay acls: give dump PATHs, or --lake/--catalog with --cluster", file=sys.stderr)
        return EXIT_USAGE
    from replay.kafka.dump import ProblemSummary, replay_paths

    summary = ProblemSummary()
    result = replay_paths(args.paths, high_watermark=args.high_watermark, summary=summary)
    if args.as_of_time is not None:
        offset = result.offset_at_time(args.as_of_time)
        if offset is None:
            print(f"no record at or before {format_time(args.as_of_time)}", file=sys.stderr)
            return EXIT_USAGE
    else:
        offset = args.as_of_offset if args.as_of_offset is not None else result.last_offset
        if offset is None:
            print("the dump holds no records", file=sys.stderr)
            return EXIT_USAGE
    state = result.state_at(offset)
    time = next((t for o, t in reversed(result.times) if o <= offset), None)
    meta = {"asOfOffset": offset, "asOfTime": format_time(time), "covered": state.covered,
            "complete": state.complete, "exact": state.exact}
    _print_lines(render_acls(state.certain, args.format, state.uncertain, meta), out)
    if not state.exact:
        why = []
        if not state.covered:
            why.append(f"offset {offset} is in no dump (a hole in history)")
        if not state.complete:
            why.append("a gap before it is not bridged by a snapshot, so ACLs created there are unknown")
        if state.uncertain:
            why.append(f"{len(state.uncertain)} ACL(s) may or may not have been live")
        print("note: this answer is not certain: " + "; ".join(why), file=sys.stderr)
    for line in summary.lines():
        print(line, file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and summary.total else EXIT_OK


# ---- parser --------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    from replay.kafka.listing import FORMATS

    parser = argparse.ArgumentParser(prog="kraft-replay", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", help="print what is in segments, snapshots or dump-log text")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=["summary", "dump-log", "json"], default="summary",
                   help="summary (default); dump-log: exactly kafka-dump-log --cluster-metadata-decoder; "
                        "json: one object per record")
    p.add_argument("--variant", choices=["4.0", "4.1", "4.3"], default="4.3",
                   help="which kafka-dump-log to imitate (4.0: Scala <=4.0, 4.1: Scala 4.1-4.2, 4.3: Java 4.3+)")
    p.add_argument("--skip-record-metadata", action="store_true", help="as kafka-dump-log --skip-record-metadata")
    p.add_argument("--strict", action="store_true", help="exit non-zero if any input problem is found")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("acls", help="the ACLs as of an offset or a time, from files or from a lake")
    p.add_argument("paths", nargs="*", metavar="PATH")
    when = p.add_mutually_exclusive_group()
    when.add_argument("--as-of-offset", type=int, metavar="N", help="state after every visible record <= N")
    when.add_argument("--as-of-time", type=parse_time, metavar="T", help="epoch ms or ISO-8601; last offset <= T")
    p.add_argument("--format", choices=FORMATS, default="kafka-acls")
    p.add_argument("--high-watermark", type=int, metavar="HW",
                   help="committed point if known: records at offsets >= HW are treated as uncommitted")
    p.add_argument("--lake", help="lake directory (with --cluster); answers from Delta instead of files")
    p.add_argument("--catalog", help="catalog.schema holding the lake tables (Databricks / Unity Catalog)")
    p.add_argument("--cluster", help="cluster name in the lake")
    p.add_argument("--master", help="Spark master URL (default: local[*], or the Databricks session)")
    p.add_argument("--strict", action="store_true", help="exit non-zero if any input problem is found")
    p.set_defaults(func=cmd_acls)

    for register in _EXTRA_COMMANDS:
        register(sub)
    return parser


_EXTRA_COMMANDS: list = []  # Spark-backed commands register here (see replay/spark/commands.py)


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    try:
        from replay.spark import commands  # noqa: F401  (registers ingest, authorize, audit, demo)
    except ImportError:
        pass
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return int(args.func(args, out or sys.stdout))
    except BrokenPipeError:
        return EXIT_OK
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
