"""`kraft-replay`: inspect dumps, answer as-of questions from files or from a lake, ingest, authorize, audit.

Every answer is printed by one `outputs.Renderer`, chosen by the global `--output table|json|jsonl|csv`, given
before or after the command; `--format` only names Kafka's own texts. The old spellings work for one release and
say on stderr what to write instead (`_DEPRECATED`)."""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TextIO, TypeVar, cast

from replay import demo
from replay.kafka import dumplog, outputs
from replay.kafka.apis import CONDITIONS, LATEST_KAFKA
from replay.kafka.as_of import state_meta, state_notes
from replay.kafka.authorizer import InvalidArgumentError, java_host_address
from replay.kafka.dump import ProblemSummary, discover, read_source, replay_sources
from replay.kafka.listing import ACL_COLUMNS, KAFKA_FORMATS, acl_rows, acls_document, render_acls
from replay.kafka.model import Batch, Problem, QuestionError, SourceFile, SourceKind, check_offset
from replay.kafka.needed_files import replay_for_moment
from replay.kafka.outputs import OUTPUTS, JsonText, Renderer
from replay.kafka.times import format_time, parse_time

if TYPE_CHECKING:  # Spark is imported when a lake command runs, so `inspect` and `acls` on files start quickly
    from replay.spark.tables import Lake

EXIT_OK = 0
EXIT_FAILED = 1  # the command could not do its work (e.g. an ingest with nothing to read)
EXIT_PROBLEMS = 3  # --strict and something was wrong with the input
EXIT_USAGE = 2
_T = TypeVar("_T")
# what the [spark] extra installs that the Spark commands import
SPARK_MODULES = {"pyspark", "delta", "pyarrow", "pandas", "py4j"}


def time_argument(text: str) -> int:
    """`parse_time` for argparse: an unreadable time is a usage error that says what to give."""
    try:
        return parse_time(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from err


def _print_lines(lines: Iterable[str], out: TextIO) -> None:
    for line in lines:
        out.write(line + "\n")


def _renderer(args: argparse.Namespace, out: TextIO) -> Renderer:
    return Renderer(args.output or "table", out)


# The old `--format VALUE` of each command that `--output` replaces, and what to give instead (issue 13 item 4);
# `inspect` and `acls` keep `--format` for Kafka's own texts.
_DEPRECATED: dict[str, dict[str, str]] = {
    "inspect": {"json": "jsonl"},
    "acls": {"json": "json", "table": "table"},
    "changes": {"table": "table", "json": "jsonl"},
    "history": {"table": "table", "json": "jsonl"},
    "sql": {"table": "table", "json": "jsonl"},
    "authorize": {"text": "table", "table": "table", "json": "json"},
    "audit": {"table": "table", "jsonl": "jsonl", "csv": "csv"},
}


def _settle(parser: argparse.ArgumentParser, args: argparse.Namespace) -> None:
    """Turn the old spellings into the new, with a note on stderr each, and refuse what cannot go together."""
    moved = _DEPRECATED.get(args.command, {})
    if getattr(args, "format", None) in moved:
        new = moved[args.format]
        print(f"kraft-replay: warning: --format {args.format} is deprecated and goes in the next release; "
              f"use --output {new}", file=sys.stderr)
        if args.output not in (None, new):
            parser.error(f"--format {args.format} and --output {args.output} disagree: give --output only")
        args.output, args.format = new, None
    if getattr(args, "old_cluster", None) is not None:
        print(f"kraft-replay: warning: --cluster {args.old_cluster} is deprecated and goes in the next release; use "
              f"--lake-cluster {args.old_cluster} (kafka-acls' --cluster names the CLUSTER resource)", file=sys.stderr)
        args.lake_cluster = args.old_cluster
    if args.output is None:
        return
    if args.command == "inspect" and args.format == "dump-log":
        parser.error("--format dump-log prints kafka-dump-log's own text: leave out --output (or drop --format to "
                     f"get every record as --output {args.output})")
    if args.command == "acls" and args.format is not None:
        parser.error(f"--format {args.format} prints Kafka's own text and --output {args.output} renders rows: "
                     "give one of them")
    if args.command == "install-sql" and args.print:
        parser.error("--print writes SQL DDL: leave out --output")
    if args.command == "demo":
        parser.error("the demo is a tour for people: leave out --output (it is for the other commands)")


# ---- inspect -------------------------------------------------------------------------------------------------
def _print_summary(summary: Any) -> None:
    for line in summary.lines():
        print(line, file=sys.stderr)


def _warn_secrets(args: argparse.Namespace, where: str) -> None:
    if args.show_secrets:
        print(f"warning: --show-secrets: SCRAM salts and keys and password configs are {where} as the log holds "
              "them; keep the output as safe as the dumps", file=sys.stderr)


_RECORD_COLUMNS = ["source", "position", "base_offset", "last_offset", "epoch", "append_time", "codec", "crc_ok",
                   "is_control", "offset", "timestamp", "control_type", "type", "version", "data",
                   "unknownTaggedFields", "error", "problem", "file", "line", "message"]
_FILE_COLUMNS = ["path", "kind", "snapshot_end_offset", "snapshot_epoch", "batches", "records", "first_offset",
                 "last_offset", "types"]


def cmd_inspect(args: argparse.Namespace, out: TextIO) -> int:
    """For people a summary per file; for machines (`--output json|jsonl|csv`) every record, as Kafka prints it,
    and every problem, or with `--format summary` the summary's rows; `--format dump-log` is Kafka's tool."""
    summary = ProblemSummary()
    _warn_secrets(args, "printed")
    if args.format == "dump-log":
        return _inspect_dump_log(args, out, summary)
    sources, ignored = discover(args.paths)
    if not sources:
        print(f"kraft-replay inspect: no metadata log files under {' '.join(args.paths)} "
              "(expected *.log segments, *.checkpoint snapshots or kafka-dump-log text)", file=sys.stderr)
        return EXIT_USAGE
    render = _renderer(args, out)
    if render.fmt == "table":
        for row in _file_summaries(sources, args.show_secrets, summary):
            extra = f" end offset {row['snapshot_end_offset']} epoch {row['snapshot_epoch']}" \
                if row["kind"] == SourceKind.SNAPSHOT.value else ""
            out.write(f"{row['path']}: {row['kind']}{extra}, {row['batches']} batches, {row['records']} records, "
                      f"offsets {row['first_offset']}..{row['last_offset']}\n")
            for name, n in sorted(row["types"].items()):
                out.write(f"  {name}: {n}\n")
        if ignored:
            out.write(f"ignored {len(ignored)} file(s) that are not metadata logs: {', '.join(ignored[:5])}\n")
    else:
        if args.format == "summary":
            render.rows(_file_summaries(sources, args.show_secrets, summary), _FILE_COLUMNS)
        else:
            render.rows(_record_rows(sources, args.show_secrets, summary), _RECORD_COLUMNS)
        if ignored:  # stdout stays parseable
            print(f"ignored {len(ignored)} file(s) that are not metadata logs: {', '.join(ignored[:5])}",
                  file=sys.stderr)
    _print_summary(summary)
    return EXIT_PROBLEMS if args.strict and summary.total else EXIT_OK


def _file_summaries(sources: list[SourceFile], show_secrets: bool, summary: ProblemSummary) -> Iterator[dict[str, Any]]:
    """Per file: its kind, batches, records, offsets and record types, one file at a time."""
    for source in sources:
        batches = records = 0
        types: dict[str, int] = {}
        first = last = None
        for item in read_source(source, show_secrets=show_secrets):
            if isinstance(item, Problem):
                summary.add(item)
                continue
            batches += 1
            first = item.base_offset if first is None else first
            last = item.header.last_offset
            for record in item.records:
                records += 1
                name = record.type_name or "UNDECODED"
                types[name] = types.get(name, 0) + 1
        snapshot = source.kind == SourceKind.SNAPSHOT
        yield {"path": source.path, "kind": source.kind.value,
               "snapshot_end_offset": source.snapshot_end_offset if snapshot else None,
               "snapshot_epoch": source.snapshot_epoch if snapshot else None, "batches": batches,
               "records": records, "first_offset": first, "last_offset": last, "types": types}


def _record_rows(sources: list[SourceFile], show_secrets: bool,
                 summary: ProblemSummary) -> Iterator[Mapping[str, Any] | JsonText]:
    """Every record as a JSON object whose `data` is Kafka's own JSON text, and every problem, in file order."""
    for source in sources:
        for item in read_source(source, show_secrets=show_secrets):
            if isinstance(item, Problem):
                summary.add(item)
                yield dumplog.problem_json(item, include_raw=False)
                continue
            assert isinstance(item, Batch)
            for record in item.records:
                yield JsonText(dumplog.record_json_text(item, record))


_OTHER_DUMPERS = (".index", ".timeindex", ".snapshot", ".txnindex")


def _dump_log_paths(paths: list[str]) -> list[str]:
    """The files to dump, in the order given (as `kafka-dump-log --files a,b` takes them). A directory, which the
    tool does not take, stands for its metadata files in replay order (dump-log text files left out)."""
    out: list[str] = []
    for path in paths:
        if os.path.isdir(path):
            sources, _ = discover([path])
            out += [s.path for s in sources if s.kind != SourceKind.DUMP_LOG_TEXT]
        else:
            out.append(path)
    return out


def _inspect_dump_log(args: argparse.Namespace, out: TextIO, summary: Any) -> int:
    """One kafka-dump-log run over all the files: stdout as the tool prints it; on stderr what the tool prints
    there (unknown files, the non-consecutive offsets report, the exception it would die with), then our summary."""
    paths = _dump_log_paths(args.paths)
    if not paths:
        print(f"kraft-replay inspect: no metadata log files under {' '.join(args.paths)}", file=sys.stderr)
        return EXIT_USAGE
    other = [p for p in paths if p.endswith(_OTHER_DUMPERS)]
    if other:
        print(f"kraft-replay inspect: {other[0]}: kafka-dump-log dumps index and producer-state files with other "
              "code; --format dump-log renders .log and .checkpoint files", file=sys.stderr)
        return EXIT_USAGE
    chosen = dumplog.choose_variant(paths) if args.variant == "auto" else None
    renderer = dumplog.DumpLogRenderer(variant=chosen.variant if chosen else args.variant,
                                       skip_record_metadata=args.skip_record_metadata,
                                       on_problem=summary.add, show_secrets=args.show_secrets, text_chunks=True)
    told = 0
    for line in renderer.render_files(paths):
        out.write(line + "\n")
        if len(renderer.stderr) > told:  # keep the tool's stderr lines where it prints them
            out.flush()
            told = _print_stderr(renderer.stderr, told)
    out.flush()
    _print_stderr(renderer.stderr, told)
    if chosen:  # after the tool's own stderr lines, with our summary
        print(f"kraft-replay inspect: {chosen.reason}", file=sys.stderr)
    _print_summary(summary)
    return EXIT_PROBLEMS if args.strict and summary.total else EXIT_OK


def _from_files(args: argparse.Namespace, ask: Callable[[Any], _T]) -> _T | None:
    """`ask(lake)` of the lake read with delta-rs, without starting Spark (`replay.spark.lake_without_spark`), or
    None when Spark answers: `--engine spark`, a catalog, a URI, `--master`, or a lake delta-rs cannot read (said)."""
    forced = args.engine == "delta-rs"
    if forced and (args.catalog or args.master):
        raise QuestionError("--engine delta-rs reads a lake directory (--lake DIR) without Spark: leave out "
                            f"{'--catalog' if args.catalog else '--master'}, or use --engine spark")
    if args.engine == "spark" or args.catalog or args.master:
        return None
    location, local = _lake_location(args)
    if not local and not forced:
        return None
    from replay.spark.lake_without_spark import LakeFiles, Unreadable

    try:
        return ask(LakeFiles.open(location))
    except Unreadable as e:
        if forced:
            raise QuestionError(f"--engine delta-rs: {e}") from e
        print(f"note: {e}: asking Spark instead", file=sys.stderr)
        return None


def _print_stderr(lines: list[str], start: int) -> int:
    for line in lines[start:]:
        print(line, file=sys.stderr)
    return len(lines)


# ---- acls ----------------------------------------------------------------------------------------------------
def cmd_acls(args: argparse.Namespace, out: TextIO) -> int:
    if args.lake is not None or args.catalog is not None:
        from replay.spark import queries

        if not args.lake_cluster:
            print("kraft-replay acls: --lake-cluster NAME is required with --lake/--catalog", file=sys.stderr)
            return EXIT_USAGE
        lake_state = _from_files(args, lambda files: files.state_at(
            args.lake_cluster, offset=args.as_of_offset, time=args.as_of_time))
        if lake_state is None:
            lake_state = queries.state_at(_lake(args), args.lake_cluster, offset=args.as_of_offset,
                                          time=args.as_of_time)
        _print_acls(args, out, lake_state.certain, lake_state.uncertain, lake_state.meta())
        for note in state_notes(lake_state.offset or 0, lake_state.covered, lake_state.complete,
                                len(lake_state.uncertain), lake_state.unpublished):
            print(f"note: {note}", file=sys.stderr)
        return EXIT_OK
    if not args.paths:
        print("kraft-replay acls: give dump PATHs, or --lake/--catalog with --lake-cluster NAME", file=sys.stderr)
        return EXIT_USAGE
    summary = ProblemSummary()
    try:
        return _acls_from_files(args, out, summary)
    finally:  # whatever the answer, the input's problems are told
        _print_summary(summary)


def _acls_from_files(args: argparse.Namespace, out: TextIO, summary: Any) -> int:
    check_offset(args.as_of_offset)
    sources, _ignored = discover(args.paths)
    if not sources:
        print(f"kraft-replay acls: no metadata log files under {' '.join(args.paths)}", file=sys.stderr)
        return EXIT_USAGE
    moment = None if args.strict or args.read_all else replay_for_moment(
        sources, args.as_of_offset, args.as_of_time, args.high_watermark)
    if moment is not None:  # the last snapshot before the moment and the log after it were enough
        result, offset = moment.result, moment.offset
        summary.scope = f" in the {len(moment.read)} files read"
        print(f"note: {moment.note()}", file=sys.stderr)
    else:
        result = replay_sources(sources, high_watermark=args.high_watermark, summary=summary, needed_only=True)
        if args.as_of_time is not None:
            found = result.offset_at_time(args.as_of_time)
            if found is None:
                print(f"no record at or before {format_time(args.as_of_time)}", file=sys.stderr)
                return EXIT_USAGE
            offset = found
        else:
            end = args.as_of_offset if args.as_of_offset is not None else result.last_offset
            if end is None:
                print("the dump holds no records", file=sys.stderr)
                return EXIT_USAGE
            offset = end
    state = result.state_at(offset)
    facts = (state.covered, state.complete, len(state.uncertain), state.unpublished)
    _print_acls(args, out, state.certain, state.uncertain, state_meta(offset, result.time_of(offset), *facts))
    for note in state_notes(offset, *facts):
        print(f"note: {note}", file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and summary.total else EXIT_OK


def _print_acls(args: argparse.Namespace, out: TextIO, certain: Mapping[str, Any], uncertain: Mapping[str, Any],
                meta: Mapping[str, Any]) -> None:
    """Kafka's text (`--format`, kafka-acls by default), or with `--output` rows (`json`: one document with the
    as-of facts)."""
    if args.output is None:
        _print_lines(render_acls(certain, args.format or "kafka-acls", uncertain, meta), out)
        return
    render = _renderer(args, out)
    if render.fmt == "json":
        render.document(acls_document(certain, uncertain, meta), [])
    else:
        render.rows(acl_rows(certain, uncertain), ACL_COLUMNS)


# ---- lake commands (Spark) ----------------------------------------------------------------------------------
def _lake(args: argparse.Namespace, create: bool = False) -> Lake:
    """The lake the command names; unless the command `create`s it, a local directory that does not exist is a
    mistake (a typo, the wrong working directory), said before Spark starts."""
    from replay.spark import session
    from replay.spark.tables import Lake, is_catalog_location, is_schema_name, quote_ident

    location, _local = _lake_location(args, create)
    if args.catalog and not (is_catalog_location(args.catalog) or is_schema_name(args.catalog)):
        raise QuestionError(f"--catalog takes CATALOG.SCHEMA or SCHEMA (SQL identifiers, backquoted where needed), "
                            f"not {args.catalog!r}; for a lake in a directory give --lake DIR")

    if args.master is None and args.command != "watch":  # a stream stays in its own session
        from replay.spark import server

        if server.attach() is not None:
            _absolute_paths(args)
    spark = session.get_spark(master=args.master, quick=_short_lived(args))
    if args.catalog and not is_catalog_location(args.catalog):
        location = f"{quote_ident(spark.catalog.currentCatalog())}.{args.catalog}"  # the session's current catalog
    if args.catalog and session.catalog_is_in_memory(spark):
        print(f"{os.path.basename(sys.argv[0] or 'kraft-replay')}: note: this local Spark session keeps its catalog "
              f"in memory: the tables of {location} are forgotten when the command ends (their files stay in "
              "spark-warehouse/); give --lake DIR for a lake that lasts, or run with a Hive metastore "
              "(spark.sql.catalogImplementation=hive)", file=sys.stderr)
    return Lake(spark, location, catalog=True if args.catalog else None)


_PATH_ARGS = ("paths", "logs", "requests", "out", "avro")  # the local files a lake command hands to Spark


def _absolute_paths(args: argparse.Namespace) -> None:
    """The command's local paths made absolute, for a Spark driver that runs elsewhere (`kraft-replay server`): it
    would read a relative one from its own directory."""
    from replay.spark.tables import is_uri

    def absolute(p: str) -> str:
        return p if is_uri(p) else os.path.abspath(os.path.expanduser(p))

    for name in _PATH_ARGS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            setattr(args, name, absolute(value))
        elif isinstance(value, list):
            setattr(args, name, [absolute(v) for v in value])


def _lake_location(args: argparse.Namespace, create: bool = False) -> tuple[str, bool]:
    """The lake's location as given, and whether it is a local directory; unless the command `create`s the lake, a
    local directory that does not exist is a mistake (a typo, the wrong working directory), said at once."""
    from replay.spark.tables import is_catalog_location, is_uri

    location = args.catalog or args.lake or "lakehouse"
    local = not args.catalog and not is_catalog_location(location) and not is_uri(location)
    if not create and local and not os.path.isdir(location):
        raise QuestionError(f"no lake at {os.path.abspath(location)}: give --lake DIR of a lake that "
                            "`kraft-replay ingest` wrote (or --catalog CATALOG.SCHEMA)")
    return location, local


# the lake commands whose JVM does bulk work (decoding dumps or logs, a replay, a requests file): the others answer
# a question and end, and start Spark with `session.QUICK_JVM_OPTIONS`
_BULK_COMMANDS = {"ingest", "ingest-log", "watch", "replay"}
_BULK_AUDITS = {"verify-log", "unused"}


# An ingest or replay of less than this (the dumps' bytes and the lake's bronze rows, all local) ends soon too: C1
# alone compiles enough for it. The small sample's ingest and replay in its own process took 32.5-33.7 s this way
# against 33.2-36.2 s (2026-12-07, alternating); at 250k records (19 MiB of dumps) and 1M the two tied, at 2M C1
# alone lost up to 18 s (stop 67, bench/README.md).
SMALL_WORK_BYTES = 16 << 20


def _short_lived(args: argparse.Namespace) -> bool:
    """Whether the command's Spark session answers a question and ends (see `_BULK_COMMANDS`), or is an ingest or
    replay of little (`SMALL_WORK_BYTES`)."""
    if args.command in ("ingest", "replay") and _small_work(args):
        return True
    return not (args.command in _BULK_COMMANDS or getattr(args, "requests", None)
                or (args.command == "audit" and getattr(args, "audit", None) in _BULK_AUDITS))


def _small_work(args: argparse.Namespace) -> bool:
    """Whether the command's dumps (an ingest's) and its lake's bronze rows are local, there (but for a new lake's)
    and together fewer bytes than `SMALL_WORK_BYTES`."""
    from replay.spark.tables import METADATA_RECORDS, is_uri

    location, local = _lake_location(args, create=True)
    bronze = os.path.join(location, METADATA_RECORDS)
    paths = [bronze] if args.command == "replay" or os.path.isdir(bronze) else []
    paths += getattr(args, "paths", None) or []
    if not local or any(is_uri(p) or not os.path.exists(p) for p in paths):
        return False  # what is not here to count is not known to be small
    total = 0
    for path in paths:
        total += os.path.getsize(path) if os.path.isfile(path) else 0
        for root, _dirs, files in os.walk(path):
            for name in files:
                with contextlib.suppress(OSError):  # a file removed meanwhile
                    total += os.path.getsize(os.path.join(root, name))
            if total >= SMALL_WORK_BYTES:
                return False
    return total < SMALL_WORK_BYTES


def cmd_ingest(args: argparse.Namespace, out: TextIO) -> int:
    from replay.spark.ingest import IngestError, StrictIngestError, ingest

    _warn_secrets(args, "stored in the lake")
    lake = _lake(args, create=True)
    try:
        report = ingest(lake.spark, args.paths, cluster=args.lake_cluster, lake=lake, strict=args.strict,
                        progress=not args.no_progress, show_secrets=args.show_secrets, decode_all=args.decode_all)
    except StrictIngestError as err:
        print(f"kraft-replay ingest: {err}", file=sys.stderr)
        print("nothing was written; the lake is as it was before this ingest", file=sys.stderr)
        return EXIT_PROBLEMS
    except IngestError as err:
        print(f"kraft-replay ingest: {err}", file=sys.stderr)
        print("nothing was written; the lake is as it was before this ingest", file=sys.stderr)
        return EXIT_FAILED
    render = _renderer(args, out)
    replayed: dict[str, Any] | None = None
    if render.fmt == "table":
        _print_lines(report.lines(), out)
    if not args.no_replay:
        counts, found = _replay(lake, args.lake_cluster, args.high_watermark, progress=not args.no_progress)
        replayed = {**counts, **_findings_doc(found)}
        if render.fmt == "table":
            _print_lines(_replayed_lines(counts), out)
        _print_summary(found)  # as `acls PATH` ends: what the replay found, decoder problems included
    else:
        print(f"not replayed; when ready: kraft-replay replay {_lake_flag(args)} --lake-cluster {args.lake_cluster}",
              file=sys.stderr)
    if render.fmt != "table":
        render.document({**report.to_dict(), "replayed": replayed}, [])
    return EXIT_OK


def cmd_ingest_log(args: argparse.Namespace, out: TextIO) -> int:
    """Brokers' authorizer logs into the lake's access_events (and their unreadable decision lines into quarantine)."""
    from replay.spark.access_ingest import ingest_access_logs
    from replay.spark.ingest import IngestError, StrictIngestError

    _check_zone(args.log_time_zone)
    lake = _lake(args, create=True)
    try:
        report = ingest_access_logs(lake.spark, args.logs, args.lake_cluster, lake, broker=args.broker,
                                    zone=args.log_time_zone, strict=args.strict, progress=not args.no_progress)
    except StrictIngestError as err:
        print(f"kraft-replay ingest-log: {err}", file=sys.stderr)
        return EXIT_PROBLEMS
    except IngestError as err:
        print(f"kraft-replay ingest-log: {err}", file=sys.stderr)
        print("nothing was written; the lake is as it was before this ingest", file=sys.stderr)
        return EXIT_FAILED
    if report.problems:
        print(f"kraft-replay ingest-log: {report.problems} line(s) look like decisions and do not read: see "
              f"quarantine (kind unreadable_log_line) for file, line and byte position", file=sys.stderr)
    _renderer(args, out).document(report.to_dict(), report.lines())
    return EXIT_OK


def _check_zone(zone: str) -> Any:
    from replay.kafka.authorizer_log import parse_zone

    try:
        return parse_zone(zone)
    except ValueError as err:
        raise QuestionError(str(err)) from err


def cmd_watch(args: argparse.Namespace, out: TextIO) -> int:
    """Ingest dumps as they arrive in a directory (a Structured Streaming query), replaying what they touch."""
    from replay.spark.watch import WatchedBatch, WatchError, stopped_because, watch

    _warn_secrets(args, "stored in the lake")
    if (args.lake_cluster is None) == (not args.cluster_from_path):
        raise QuestionError("name the cluster (--lake-cluster NAME) or take it from the path (--cluster-from-path: "
                            "ROOT/<cluster>/...), one of the two")
    lake = _lake(args, create=True)
    batches: list[WatchedBatch] = []
    try:
        query = watch(lake, args.root, cluster=args.lake_cluster, cluster_from_path=args.cluster_from_path,
                      checkpoint=args.checkpoint, trigger=args.trigger, replay=not args.no_replay,
                      show_secrets=args.show_secrets, high_watermark=args.high_watermark,
                      progress=not args.no_progress, on_batch=batches.append)
    except WatchError as err:
        print(f"kraft-replay watch: {err}", file=sys.stderr)
        return EXIT_USAGE
    try:
        query.awaitTermination()
    except KeyboardInterrupt:
        query.stop()
    error = query.exception()
    if error is not None:
        print(f"kraft-replay watch: the stream stopped: {stopped_because(str(error) or type(error).__name__)}",
              file=sys.stderr)
        print("what was ingested stays; run the same command again to go on from its checkpoint", file=sys.stderr)
        return EXIT_FAILED
    rows = [{"batch": b.batch_id, "files": b.files, "clusters": ", ".join(sorted(b.ingested)),
             "new_records": sum(b.ingested.values()), "ignored": b.ignored, "unplaced": len(b.unplaced),
             "replayed": ", ".join(b.replayed)} for b in batches]
    render = _renderer(args, out)
    if render.fmt == "table" and not rows:
        print("watch: no new files", file=out)
    else:
        render.rows(rows, ["batch", "files", "clusters", "new_records", "ignored", "unplaced", "replayed"])
    return EXIT_OK


def cmd_replay(args: argparse.Namespace, out: TextIO) -> int:
    """Bring a cluster's replay tables up to date with what the lake holds (after `ingest --no-replay`)."""
    counts, found = _replay(_lake(args), args.lake_cluster, args.high_watermark, full=args.full)
    _renderer(args, out).document({**counts, **_findings_doc(found)}, _replayed_lines(counts))
    _print_summary(found)
    return EXIT_OK


def _replay(lake: Lake, cluster: str, high_watermark: int | None, full: bool = False,
            progress: bool = True) -> tuple[dict[str, int], ProblemSummary]:
    from replay.spark.replay import replay_lake
    from replay.spark.resume import ReplayOvertakenError

    try:
        counts = replay_lake(lake, [cluster], high_watermark=high_watermark, full=full, progress=progress)
    except ReplayOvertakenError as err:  # another replay of the cluster ran at once and is the one shown
        print(f"kraft-replay: {err}", file=sys.stderr)
        raise SystemExit(EXIT_FAILED) from None
    return dict(counts), counts.findings()


def _findings_doc(found: ProblemSummary) -> dict[str, Any]:
    """Flat, so that csv holds it as well as json: the total and `kind n, ...` (the examples go to stderr)."""
    return {"findings": found.total, "findings_by_kind": ", ".join(f"{k} {v}" for k, v in sorted(found.counts.items()))}


def _replayed_lines(counts: Mapping[str, int]) -> list[str]:
    return ["replayed: " + ", ".join(f"{k} {v}" for k, v in counts.items())]


def cmd_server(args: argparse.Namespace, out: TextIO) -> int:
    """`server start|stop|status`: the warm Spark Connect server the lake commands use (`replay.spark.server`)."""
    from replay.spark import server

    if args.action == "start":
        print("starting a Spark Connect server (the first start of a machine takes up to a minute)", file=sys.stderr)
        try:
            state, started = server.start(args.master, args.memory)
            warmed = None
            if args.warm_up:
                print("warming it up: a small ingest and replay through it (about a minute)", file=sys.stderr)
                warmed = round(server.warm_up(), 1)
        except server.ServerError as err:
            print(f"kraft-replay server: {err}", file=sys.stderr)
            return EXIT_FAILED
        doc = {"running": True, "started_now": started, **state.public(), "warm_up_seconds": warmed}
        warm = "" if warmed is None else f", warmed up in {warmed} s"
        line = (f"server {'started' if started else 'already running'}{warm}: {state.url} (pid {state.pid}, "
                f"master {state.master}, driver memory {state.memory}); the lake commands now run their Spark work "
                f"there (KRAFT_REPLAY_SERVER=off: not); its log: {state.log}; kraft-replay server stop ends it")
    elif args.action == "stop":
        stopped = server.stop()
        doc = {"running": False, "stopped": stopped is not None, **(stopped.public() if stopped else {})}
        line = f"server stopped (pid {stopped.pid})" if stopped else "no server was running"
    else:
        now = server.running()
        doc = {"running": now is not None, **(now.public() if now else {})}
        line = (f"server running: {now.url} (pid {now.pid}, since {now.started}, master {now.master}, driver memory "
                f"{now.memory}); its log: {now.log}" if now else "no server running")
    _renderer(args, out).document(doc, [line])
    return EXIT_OK


def _lake_flag(args: argparse.Namespace) -> str:
    return f"--catalog {args.catalog}" if args.catalog else f"--lake {args.lake or 'lakehouse'}"


_CHANGE_COLUMNS = ["offset", "exact", "time", "change", "cause", "acl_id", "resource_type", "resource_name",
                   "pattern_type", "principal", "host", "operation", "permission_type"]
_HISTORY_COLUMNS = ["acl_id", "resource_type", "resource_name", "pattern_type", "principal", "host", "operation",
                    "permission_type", "valid_from_offset", "valid_from_exact", "valid_to_offset", "valid_to_exact",
                    "ended_by"]


def cmd_changes(args: argparse.Namespace, out: TextIO) -> int:
    span = {"start": args.from_offset, "end": args.to_offset, "start_time": args.from_time, "end_time": args.to_time}
    rows = _from_files(args, lambda files: files.changes_between(args.lake_cluster, **span))
    if rows is None:
        from replay.spark.queries import changes_between

        rows = [r.asDict() for r in changes_between(_lake(args), args.lake_cluster, **span).collect()]
    render = _renderer(args, out)
    if render.fmt == "table":  # people read times; machines get epoch ms, as the lake holds them
        for r in rows:
            r["time"] = format_time(r["time"])
    render.rows(rows, _CHANGE_COLUMNS)
    return EXIT_OK


def cmd_history(args: argparse.Namespace, out: TextIO) -> int:
    rows = _from_files(args, lambda files: files.history(args.lake_cluster, args.principal or None,
                                                         args.resource or None))
    if rows is None:
        from pyspark.sql import functions as F

        from replay.spark.queries import history

        df = history(_lake(args), args.lake_cluster)
        if args.principal:
            df = df.where(F.col("principal") == args.principal)
        if args.resource:
            df = df.where(F.col("resource_name") == args.resource)
        rows = [r.asDict() for r in df.orderBy("valid_from_offset", "acl_id").collect()]
    _renderer(args, out).rows(rows, _HISTORY_COLUMNS)
    return EXIT_OK


def cmd_sql(args: argparse.Namespace, out: TextIO) -> int:
    from pyspark.errors import PySparkException

    from replay.spark.access_sql import register_access_functions
    from replay.spark.audits import register_audit_functions
    from replay.spark.authorize_api_sql import register_api_functions
    from replay.spark.queries import register_sql_functions
    from replay.spark.sqlddl import words

    lake = _lake(args)
    named = words(args.query)  # only what the query can name: each function and view costs Spark an analysis
    lake.name_tables(named)
    register_sql_functions(lake, named)
    register_audit_functions(lake.spark, lake, named)
    register_api_functions(lake.spark, lake, named)
    register_access_functions(lake.spark, lake, named)
    try:
        df = lake.spark.sql(args.query)
        rows = [r.asDict(recursive=True) for r in df.collect()]
    except PySparkException as err:  # the query's own mistake (or a function's raised error): what Spark said
        raise QuestionError(f"the query failed: {str(err).split(chr(10) + 'JVM stacktrace:')[0].strip()}") from err
    _renderer(args, out).rows(rows, getattr(df, "columns", None))
    return EXIT_OK


def cmd_install_sql(args: argparse.Namespace, out: TextIO) -> int:
    from pyspark.sql import SparkSession

    from replay.spark.install import install, install_statements
    from replay.spark.tables import Lake

    location = args.catalog or args.lake or "lakehouse"
    if not args.catalog and not args.schema:
        raise QuestionError("a directory lake's functions need a schema to live in: give --schema NAME (or "
                            "--catalog CATALOG.SCHEMA for a catalog lake)")
    if args.print:  # names only: no Spark session is needed to write the DDL
        names = Lake(cast(SparkSession, None), location, catalog=bool(args.catalog))
        for statement in install_statements(names, args.schema):
            out.write(statement + ";\n")
        return EXIT_OK
    lake = _lake(args)  # a directory that does not exist is said before Spark starts
    done = install(lake.spark, lake, args.schema)
    counts = {"functions": sum(s.startswith("CREATE OR REPLACE FUNCTION") for s in done),
              "views": sum(s.startswith("CREATE OR REPLACE VIEW") for s in done),
              "comments": sum(s.startswith("ALTER TABLE") for s in done),
              "schema": args.schema or lake.schema_ref, "lake": lake.location}
    _renderer(args, out).document(counts, [
        f"installed {counts['functions']} functions and {counts['views']} views in {counts['schema']} over "
        f"{counts['lake']}; {counts['comments']} table and column comments added"])
    return EXIT_OK


_RESOURCE_FLAGS = {"topic": "TOPIC", "group": "GROUP", "cluster_resource": "CLUSTER", "transactional_id": "TRANSACTIONAL_ID",
                   "delegation_token": "DELEGATION_TOKEN", "user": "USER"}


def _resource(args: argparse.Namespace) -> tuple[str | None, str | None]:
    for flag, rtype in _RESOURCE_FLAGS.items():
        value = getattr(args, flag, None)
        if value is not None:
            return rtype, ("kafka-cluster" if rtype == "CLUSTER" else value)
    return getattr(args, "resource_type", None), None


def _host_problem(host: str | None) -> str | None:
    """Why `--host` cannot be asked about (None when it can): Kafka matches ACL hosts against the client's address."""
    if host is None:
        return ("give --host, the client's IP address as Kafka saw it (e.g. 10.0.0.1 or ::1): ACLs name hosts, so "
                "the answer depends on it")
    try:
        java_host_address(host)
    except InvalidArgumentError as err:
        return f"--host {err}; give the client's IP address as Kafka saw it (e.g. 10.0.0.1 or ::1)"
    return None


def _host_is_usable(host: str | None) -> bool:
    """Whether `--host` can be asked about; if not, says why on stderr."""
    why = _host_problem(host)
    if why is not None:
        print(f"kraft-replay authorize: {why}", file=sys.stderr)
    return why is None


def cmd_authorize(args: argparse.Namespace, out: TextIO) -> int:
    if args.api or args.which_apis:
        return _authorize_api(args, out)
    if args.topic is not None and len(args.topic) > 1:
        print("kraft-replay authorize: one --topic per question (several are for an API call: --api NAME)",
              file=sys.stderr)
        return EXIT_USAGE
    args.topic = args.topic[0] if args.topic else None
    given = [flag for flag in _RESOURCE_FLAGS if getattr(args, flag, None) is not None]
    if len(given) > 1:
        print(f"kraft-replay authorize: one resource per question, not {' and '.join('--' + g.replace('_', '-') for g in given)}"
              " (an API call names several: --api NAME)", file=sys.stderr)
        return EXIT_USAGE
    if args.requests:
        if not args.out:
            print("kraft-replay authorize: --requests needs --out (where to write the decisions)", file=sys.stderr)
            return EXIT_USAGE
        from replay.spark import authorize_batch

        lake = _lake(args)
        counts = authorize_batch.authorize_file(lake.spark, lake, args.lake_cluster, args.requests, args.out,
                                          args.out_format, super_users=args.super_users,
                                          allow_everyone=args.allow_everyone_if_no_acl_found)
        _renderer(args, out).document(counts, [f"decisions written to {args.out}: "
                                               + ", ".join(f"{k} {v}" for k, v in counts.items())])
        return EXIT_OK
    rtype, name = _resource(args)
    if not (args.principal and args.operation and rtype):
        print("kraft-replay authorize: give --principal, --operation and a resource (--topic NAME, --group NAME, "
              "--cluster-resource, ... or --resource-type TYPE for authorizeByResourceType), or --requests FILE",
              file=sys.stderr)
        return EXIT_USAGE
    if not _host_is_usable(args.host):
        return EXIT_USAGE
    from replay.spark import authorize

    lake = _lake(args)
    result = authorize.authorize_one(lake.spark, lake, args.lake_cluster, args.principal, args.host,
                                     args.operation, rtype, name, offset=args.as_of_offset, time=args.as_of_time,
                                     super_users=args.super_users,
                                     allow_everyone=args.allow_everyone_if_no_acl_found)
    _renderer(args, out).document(result, authorize.render_decision(result, "text"))
    _say_if_inside(lake, args.lake_cluster, args.as_of_offset)
    return EXIT_OK


def _say_if_inside(lake: Lake, cluster: str, *offsets: int | None) -> None:
    """A note on stderr for each asked offset that lies inside a batch or open transaction: the answer is the state a
    node published before it (times map to batch ends: nothing to say)."""
    from replay.spark import queries

    for offset in offsets:
        held = None if offset is None else queries.unpublished(lake, cluster, offset)
        if held is not None:
            print(f"note: {held.sentence()}", file=sys.stderr)


def _authorize_api(args: argparse.Namespace, out: TextIO) -> int:
    """`authorize --api NAME`: every check the call makes, and its outcome; `--which-apis`: every API at once."""
    if not args.principal:
        print("kraft-replay authorize: give --principal (and --host) for an API question", file=sys.stderr)
        return EXIT_USAGE
    if not _host_is_usable(args.host):
        return EXIT_USAGE
    from replay.spark import authorize_api
    from replay.spark.authorize_render import render_api_decision, render_which_apis

    lake = _lake(args)
    common: dict[str, Any] = {
        "topics": args.topic, "group": [args.group] if args.group is not None else None,
        "transactional_id": args.transactional_id, "token_id": args.delegation_token, "owner": args.user,
        "conditions": args.condition or [], "kafka_version": args.kafka_version, "offset": args.as_of_offset,
        "time": args.as_of_time, "super_users": args.super_users,
        "allow_everyone": args.allow_everyone_if_no_acl_found}
    if args.which_apis:
        found = authorize_api.which_apis(lake.spark, lake, args.lake_cluster, args.principal, args.host, **common)
        _renderer(args, out).document(found, render_which_apis(found, "text"))
        _say_if_inside(lake, args.lake_cluster, args.as_of_offset)
        return EXIT_OK
    result = authorize_api.authorize_api(lake.spark, lake, args.lake_cluster, args.principal, args.host, args.api,
                                         api_version=args.api_version, **common)
    _renderer(args, out).document(result, render_api_decision(result, "text"))
    _say_if_inside(lake, args.lake_cluster, args.as_of_offset)
    return EXIT_OK


def cmd_audit(args: argparse.Namespace, out: TextIO) -> int:
    """One audit (`args.audit`, a subcommand with its own flags), printed by the renderer or written as Avro."""
    from replay.spark import audits

    lake = _lake(args)
    spark, cluster = lake.spark, args.lake_cluster
    results: dict[str, list[dict[str, Any]]]
    if args.audit == "risky":
        # with the setting on, resources no ACL covers are exposed to everyone; unset, list what it would expose
        results = {"risky_grants": audits.audit_risky_grants(spark, lake, cluster, offset=args.as_of_offset,
                                                             time=args.as_of_time,
                                                             allow_everyone=args.allow_everyone_if_no_acl_found
                                                             or None)}
    else:
        common = {"super_users": args.super_users, "allow_everyone": args.allow_everyone_if_no_acl_found}
        if args.audit == "who-can":
            rtype, name = _resource(args)
            assert rtype is not None and name is not None  # the subcommand requires a resource
            results = {"who_can": audits.audit_who_can(spark, lake, cluster, args.operation, rtype, name,
                                                        offset=args.as_of_offset, time=args.as_of_time,
                                                        **common)}
        elif args.audit == "what-can":
            results = {"what_can": audits.audit_what_can(spark, lake, cluster, args.principal,
                                                          offset=args.as_of_offset, time=args.as_of_time,
                                                          **common)}
        elif args.audit == "changes":
            both = audits.audit_changes(spark, lake, cluster, args.from_offset, args.to_offset, args.from_time,
                                        args.to_time, **common)
            results = {"acl_changes": both["acls"], "access_changes": both["access"]}
        else:
            rtype, name = _resource(args)
            results = {"timeline": audits.audit_timeline(spark, lake, cluster, args.principal, rtype, name,
                                                         args.operation, **common)}
    _say_if_inside(lake, cluster, *(getattr(args, name, None) for name in ("as_of_offset", "from_offset", "to_offset")))
    if args.avro:
        for audit, rows in results.items():
            n = outputs.write_avro(rows, f"{args.avro}.{audit}.avro" if len(results) > 1 else args.avro, audit)
            print(f"wrote {n} {audit} row(s) as Avro", file=sys.stderr)
        return EXIT_OK
    _renderer(args, out).sets(results, audits.SUMMARY_COLUMNS)
    return EXIT_OK


def _log_verifier(args: argparse.Namespace) -> tuple[Any, Any]:
    """The history of `--dumps` (its problems told on stderr) as a `Verifier` with the broker's settings, and the
    zone of the logs' dates: what `audit verify-log` and `audit unused` start from."""
    from replay.kafka.verify_log import Verifier

    zone = _check_zone(args.log_time_zone)
    if not args.dumps:
        raise QuestionError("give the cluster's dumps (--dumps PATH), or verify against a lake: --lake DIR "
                            "--lake-cluster NAME (audit verify-log)")
    if not args.logs:
        raise QuestionError("give the authorizer log files to read (LOG...)")
    sources, _ignored = discover(args.dumps)
    if not sources:
        raise QuestionError(f"no metadata log files under {' '.join(args.dumps)}: give --dumps DIR of the "
                            "cluster's __cluster_metadata dumps")
    args.dump_problems = ProblemSummary()
    try:
        result = replay_sources(sources, high_watermark=args.high_watermark, summary=args.dump_problems,
                                needed_only=True)
    finally:
        _print_summary(args.dump_problems)
    return Verifier(result, args.super_users, args.allow_everyone_if_no_acl_found, args.skew_ms), zone


def _told(problem: Any) -> None:
    """A log line that looks like a decision and does not read: on stderr, with its place."""
    print(f"{problem.path}:{problem.line}: {problem.message}", file=sys.stderr)


def cmd_verify_log(args: argparse.Namespace, out: TextIO) -> int:
    """`audit verify-log`: each logged decision of the broker logs against the history the dumps hold (the reference
    engine, no Spark), then a summary on stderr."""
    from collections import Counter

    from replay.kafka.verify_log import verdict_rows

    if not args.dumps:
        return _verify_in_lake(args, out)
    verifier, zone = _log_verifier(args)
    unreadable: list[Any] = []
    counts: Counter[str] = Counter()

    def told(problem: Any) -> None:
        unreadable.append(problem)
        _told(problem)

    def counted() -> Iterator[dict[str, Any]]:
        for row in verdict_rows(args.logs, verifier, zone, told, args.from_time, args.to_time):
            counts[row["verdict"]] += 1
            yield row

    _renderer(args, out).rows(counted(), people=_VERDICT_PEOPLE)
    told_counts = ", ".join(f"{counts[v]} {v}" for v in ("consistent", "inconsistent", "unknown"))
    print(f"verify-log: {sum(counts.values())} logged decision(s): {told_counts}; {len(unreadable)} line(s) that "
          "look like decisions could not be read", file=sys.stderr)
    bad = counts["inconsistent"] or unreadable or args.dump_problems.total
    return EXIT_PROBLEMS if args.strict and bad else EXIT_OK


_VERDICT_PEOPLE = ["verdict", "time", "principal", "host", "operation", "resource_type", "resource_name", "decision",
                   "why"]


def _lake_events(args: argparse.Namespace, lake: Lake) -> tuple[Any, int]:
    """The decisions of the LOG arguments read on the executors as access_events rows (None without LOG), and how
    many lines looked like decisions and did not read (each told on stderr)."""
    from pyspark.sql import functions as F

    from replay.spark.access_ingest import access_rows, plan_logs, read_logs

    if not args.logs:
        return None, 0
    read = read_logs(lake.spark, plan_logs(lake.spark, args.logs), args.broker, args.log_time_zone)
    unreadable = 0
    for r in read.where(F.col("problem").isNotNull()).select("source_file", "line", "problem").toLocalIterator():
        unreadable += 1
        print(f"{r['source_file']}:{r['line']}: {r['problem']}", file=sys.stderr)
    return access_rows(read, args.lake_cluster), unreadable


def _lake_for_logs(args: argparse.Namespace) -> Lake:
    _check_zone(args.log_time_zone)
    if not args.lake_cluster:
        raise QuestionError("name the cluster in the lake: --lake-cluster NAME (or give --dumps PATH for files)")
    return _lake(args)


def _unused_in_lake(args: argparse.Namespace, out: TextIO) -> int:
    """`audit unused --lake`: least privilege from the decisions access_events holds (or the LOGs given), verified
    against the lake's replayed tables."""
    from replay.spark.unused_access import unused_access

    lake = _lake_for_logs(args)
    events, unreadable = _lake_events(args, lake)
    found = unused_access(lake, args.lake_cluster, args.from_time, args.to_time, args.super_users,
                          args.allow_everyone_if_no_acl_found, args.skew_ms, events)
    acls = found.acls.where("NOT used") if args.only_unused else found.acls
    if args.only_other_hosts:
        acls = acls.where("NOT used AND size(other_hosts) > 0")  # unused_acls.named_wrong_host
    _renderer(args, out).sets({"acls": [r.asDict() for r in acls.toLocalIterator()],
                               "principals": [r.asDict() for r in found.principals.toLocalIterator()]})
    n = found.counts
    print(f"unused: {n.get('lines', 0)} logged decision(s) in the window, {n.get('allowed', 0)} allowed; "
          f"{n.get('not_consistent', 0)} not consistent with the ACLs, so credited to none (see audit verify-log); "
          f"{unreadable} unreadable", file=sys.stderr)
    if n.get("lines") and not n.get("allowed"):
        print("warning: the logs hold no allowed decision: kafka.authorizer.logger was at INFO (denials only), so "
              "every ALLOW looks unused; set it to DEBUG on the brokers to see what is used", file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and (n.get("not_consistent") or unreadable) else EXIT_OK


def _verify_in_lake(args: argparse.Namespace, out: TextIO) -> int:
    """`audit verify-log --lake`: the logs given (read on the executors, not stored), or without any the decisions
    access_events holds for the cluster, verified against the lake's replayed tables."""
    from collections import Counter

    from pyspark.sql import functions as F

    from replay.spark.verify_access import verdicts_of, verify_access

    lake = _lake_for_logs(args)
    settings = {"super_users": args.super_users, "allow_everyone": args.allow_everyone_if_no_acl_found,
                "skew_ms": args.skew_ms}
    events, unreadable = _lake_events(args, lake)
    if events is not None:
        if args.from_time is not None:
            events = events.where(F.col("time") >= args.from_time)
        if args.to_time is not None:
            events = events.where(F.col("time") <= args.to_time)
        verdicts = verify_access(lake, events, **settings)
    else:
        verdicts = verdicts_of(lake, args.lake_cluster, args.from_time, args.to_time, **settings)
    counts: Counter[str] = Counter()

    def rows() -> Iterator[dict[str, Any]]:  # streamed from the executors, a partition at a time
        ordered = verdicts.orderBy("time", "source_file", "line")
        for r in ordered.toLocalIterator():
            counts[r["verdict"]] += 1
            yield {"verdict": r["verdict"], "why": r["why"], "time": format_time(r["time"]) if r["time"] is not None
                   else None, "principal": r["principal"], "host": r["host"], "operation": r["operation"],
                   "resource_type": r["resource_type"], "pattern_type": r["pattern_type"],
                   "resource_name": r["resource_name"], "api": r["api"], "decision": r["decision"], "rule": r["rule"],
                   "offsets": r["offsets"], "acl_ids": r["acl_ids"], "broker": r["broker"], "file": r["source_file"],
                   "line": r["line"]}

    _renderer(args, out).rows(rows(), people=_VERDICT_PEOPLE)
    told_counts = ", ".join(f"{counts[v]} {v}" for v in ("consistent", "inconsistent", "unknown"))
    print(f"verify-log: {sum(counts.values())} logged decision(s): {told_counts}; {unreadable} line(s) that look like "
          "decisions could not be read", file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and (counts["inconsistent"] or unreadable) else EXIT_OK


def cmd_unused(args: argparse.Namespace, out: TextIO) -> int:
    """`audit unused`: the ACLs no logged decision of the window used, and per principal granted against used."""
    from replay.kafka.authorizer_log import LoggedDecision, read_log
    from replay.kafka.unused_acls import acl_rows, named_wrong_host, principal_rows, usage

    if not args.dumps:
        return _unused_in_lake(args, out)
    verifier, zone = _log_verifier(args)
    unreadable: list[Any] = []

    def lines() -> Iterator[LoggedDecision]:
        for path in args.logs:
            for _, item in read_log(path, zone):
                if isinstance(item, LoggedDecision):
                    yield item
                else:
                    unreadable.append(item)
                    _told(item)

    used = usage(lines(), verifier, args.from_time, args.to_time)
    acls = acl_rows(verifier.result, used, args.from_time, args.to_time)
    if args.only_unused:
        acls = [r for r in acls if not r["used"]]
    if args.only_other_hosts:
        acls = [r for r in acls if named_wrong_host(r)]
    _renderer(args, out).sets({"acls": acls, "principals": principal_rows(verifier.result, used, args.from_time,
                                                                          args.to_time)})
    print(f"unused: {used.lines} logged decision(s) in the window, {used.allowed} allowed; {used.not_consistent} not "
          f"consistent with the ACLs, so credited to none (see audit verify-log); {len(unreadable)} unreadable",
          file=sys.stderr)
    if used.lines and not used.allowed:
        print("warning: the logs hold no allowed decision: kafka.authorizer.logger was at INFO (denials only), so "
              "every ALLOW looks unused; set it to DEBUG on the brokers to see what is used", file=sys.stderr)
    return EXIT_PROBLEMS if args.strict and (used.not_consistent or unreadable) else EXIT_OK


def _lake_options(p: argparse.ArgumentParser, cluster_required: bool = True) -> None:
    where = p.add_mutually_exclusive_group()
    where.add_argument("--lake", help="lake directory (default ./lakehouse)")
    where.add_argument("--catalog", help="catalog.schema holding the lake tables (Databricks / Unity Catalog)")
    name = p.add_mutually_exclusive_group(required=cluster_required)
    name.add_argument("--lake-cluster", metavar="NAME",
                      help="the cluster's name in the lake, as its ingest named it")
    name.add_argument("--cluster", dest="old_cluster", help=argparse.SUPPRESS)  # deprecated: see _settle
    p.add_argument("--master", help="Spark master URL, e.g. spark://host:7077 (default local[*] or Databricks)")


def _engine_option(p: argparse.ArgumentParser) -> None:
    p.add_argument("--engine", choices=["auto", "spark", "delta-rs"], default="auto",
                   help="how the lake is read: auto (the default) reads a lake directory with delta-rs, without "
                        "starting Spark, and asks Spark for a catalog, a URI or with --master; spark or delta-rs "
                        "choose")


def _old_format(p: argparse.ArgumentParser, command: str) -> None:
    """The `--format` this command had before `--output`: still read, not shown (see `_settle`)."""
    p.add_argument("--format", choices=sorted(_DEPRECATED[command]), help=argparse.SUPPRESS)


def _resource_flags(p: argparse.ArgumentParser, required: bool = False, api: bool = False) -> None:
    """A resource as kafka-acls names one (`--cluster-resource` for its `--cluster`). `api`: several may be given
    (an API call names a group and topics; `--topic` repeats), and the command checks a plain question's."""
    group: Any = p.add_argument_group("resource") if api else p.add_mutually_exclusive_group(required=required)
    if api:
        group.add_argument("--topic", action="append", help="a topic (repeat it for an API call on several)")
    else:
        group.add_argument("--topic")
    group.add_argument("--group")
    group.add_argument("--transactional-id", dest="transactional_id")
    group.add_argument("--delegation-token", dest="delegation_token")
    group.add_argument("--user", help="a USER resource (delegation tokens), e.g. User:owner")
    group.add_argument("--cluster-resource", dest="cluster_resource", action="store_const", const="kafka-cluster",
                       help="the CLUSTER resource (kafka-cluster)")


def _when_options(p: argparse.ArgumentParser) -> None:
    when = p.add_mutually_exclusive_group()
    when.add_argument("--as-of-offset", type=int, metavar="N", help="state after every visible record <= N")
    when.add_argument("--as-of-time", type=time_argument, metavar="T", help="epoch ms or ISO-8601; last offset <= T")


def _broker_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--super-users", default="", help="the broker's super.users, e.g. 'User:admin;User:ops'")
    p.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                   help="the broker ran with allow.everyone.if.no.acl.found=true")


def _log_options(p: argparse.ArgumentParser, strict: str, lake: bool = False) -> None:
    """What the audits of broker logs read: the logs, the dumps (or, with `lake`, a lake instead), the broker's
    settings and clock."""
    p.add_argument("logs", nargs="*" if lake else "+", metavar="LOG",
                   help="authorizer log files (kafka-authorizer.log*, plain or gzip)"
                        + ("; with --lake and none: the cluster's access_events (see ingest-log)" if lake else ""))
    p.add_argument("--dumps", action="append", required=not lake, metavar="PATH",
                   help="the cluster's __cluster_metadata dumps (files or directories; repeat for several)"
                        + ("; without it, the replayed tables of the lake named by --lake or --catalog" if lake
                           else ""))
    if lake:
        _lake_options(p, cluster_required=False)
        p.add_argument("--broker", help="with --lake and LOG: the broker the logs belong to (default: the name of "
                                        "each file's directory)")
        p.add_argument("--from", dest="from_time", type=time_argument, metavar="T1",
                       help="only decisions logged at or after T1 (default: all)")
        p.add_argument("--to", dest="to_time", type=time_argument, metavar="T2",
                       help="only decisions logged at or before T2 (default: all)")
    p.add_argument("--skew-ms", type=int, default=2000,
                   help="how far the broker's log clock and apply lag may put a line from the metadata log's "
                        "append times (default 2000)")
    p.add_argument("--log-time-zone", default="UTC",
                   help="the zone of log dates that carry none (log4j's default %%d): UTC, +01:00, Europe/Berlin")
    p.add_argument("--high-watermark", type=int, metavar="HW", help="committed point, if known (see README)")
    p.add_argument("--strict", action="store_true", help=strict)
    _broker_options(p)


def _span_options(p: argparse.ArgumentParser) -> None:
    p.add_argument("--from-offset", type=int, help="exclusive")
    p.add_argument("--to-offset", type=int, help="inclusive")
    p.add_argument("--from-time", type=time_argument)
    p.add_argument("--to-time", type=time_argument)


_OUTPUT_HELP = ("how to print the answer: table (for people, the default), json (one document), jsonl (one object "
                "a line) or csv (with a header); a global option, before or after the command")


# ---- parser --------------------------------------------------------------------------------------------------
def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="kraft-replay", description=(__doc__ or "").split("\n\n")[0],
        epilog="--output table|json|jsonl|csv goes before or after the command and works for every one; --format "
               "names Kafka's own texts (inspect --format dump-log, acls --format kafka-acls|standard-acl). A lake's "
               "cluster is --lake-cluster NAME. The spellings of 0.1.0 (--cluster NAME, --format json|table|text|"
               "jsonl|csv) work for one release and say on stderr what to write instead.")
    parser.add_argument("--output", choices=OUTPUTS, help=_OUTPUT_HELP)
    # after the command too: SUPPRESS keeps a subcommand from resetting what was given before it
    output = argparse.ArgumentParser(add_help=False)
    output.add_argument("--output", choices=OUTPUTS, default=argparse.SUPPRESS, help=_OUTPUT_HELP)
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("inspect", parents=[output], help="print what is in segments, snapshots or dump-log text")
    p.add_argument("paths", nargs="+", metavar="PATH")
    p.add_argument("--format", choices=["summary", "dump-log", "json"],
                   help="summary (the default for people): per file; dump-log: exactly kafka-dump-log "
                        "--cluster-metadata-decoder. Without it, --output json|jsonl|csv prints every record "
                        "(`json` here is deprecated: use --output jsonl)")
    p.add_argument("--variant", choices=["auto", *dumplog.VARIANTS], default="auto",
                   help="which kafka-dump-log to imitate with --format dump-log (4.0: Scala <=4.0, 4.1: Scala "
                        "4.1-4.2, 4.3: Java 4.3+); auto (the default): the one of the release that wrote the files, "
                        "from their metadata.version, said on stderr")
    p.add_argument("--skip-record-metadata", action="store_true", help="as kafka-dump-log --skip-record-metadata")
    p.add_argument("--strict", action="store_true", help="exit non-zero if any input problem is found")
    p.add_argument("--show-secrets", action="store_true",
                   help="print SCRAM credentials and password configs as the log holds them (redacted by default)")
    p.set_defaults(func=cmd_inspect)

    p = sub.add_parser("acls", parents=[output], help="the ACLs as of an offset or a time, from files or a lake")
    p.add_argument("paths", nargs="*", metavar="PATH")
    _when_options(p)
    p.add_argument("--format", choices=[*KAFKA_FORMATS, "json", "table"],
                   help="Kafka's text: kafka-acls (the default, as `kafka-acls --list`) or standard-acl (as "
                        "kafka-metadata-shell); json and table here are deprecated: use --output")
    p.add_argument("--high-watermark", type=int, metavar="HW",
                   help="committed point if known: records at offsets >= HW are treated as uncommitted")
    _lake_options(p, cluster_required=False)
    p.add_argument("--strict", action="store_true",
                   help="exit non-zero if any input problem is found (reads every file, as --read-all)")
    p.add_argument("--read-all", action="store_true",
                   help="replay every file; by default a dump of one node is answered from the last snapshot at or "
                        "before the moment asked and the log after it, when that gives the same answer")
    _engine_option(p)
    p.set_defaults(func=cmd_acls)

    p = sub.add_parser("ingest", parents=[output],
                       help="decode dumps with Spark into the lake's Delta tables, then replay")
    p.add_argument("paths", nargs="+", metavar="PATH", help="dump directories or files; any URI Spark reads")
    _lake_options(p)
    p.add_argument("--strict", action="store_true", help="fail, writing nothing, if any input problem is found")
    p.add_argument("--high-watermark", type=int, metavar="HW", help="committed point, if known (see README)")
    p.add_argument("--no-replay", action="store_true", help="only ingest; replay later with `kraft-replay replay`")
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument("--show-secrets", action="store_true",
                   help="store SCRAM credentials and password configs in the lake as the log holds them (by default "
                        "`payload_json` and `raw_value` hold a redaction marker in their place)")
    p.add_argument("--decode-all", action="store_true",
                   help="decode every byte, also of files whose bytes an earlier ingest read (by default those are "
                        "found by name and sha256 in `ingested_files` and not decoded again)")
    p.set_defaults(func=cmd_ingest)

    p = sub.add_parser("ingest-log", parents=[output],
                       help="brokers' authorizer logs into the lake's access_events table (what really happened), "
                            "for audit verify-log --lake and the acl_verify_access SQL function")
    p.add_argument("logs", nargs="+", metavar="LOG", help="authorizer log files or directories (plain or gzip; "
                   "Kafka's kafka.authorizer.logger lines or Confluent's audit-log events); any URI Spark reads")
    _lake_options(p)
    p.add_argument("--broker", help="the broker the logs belong to (default: the name of each file's directory)")
    p.add_argument("--log-time-zone", default="UTC",
                   help="the zone of log dates that carry none (log4j's default %%d): UTC, +01:00, Europe/Berlin")
    p.add_argument("--strict", action="store_true", help="fail, writing nothing, if a decision line does not read")
    p.add_argument("--no-progress", action="store_true", help="no status lines")
    p.set_defaults(func=cmd_ingest_log)

    p = sub.add_parser("watch", parents=[output],
                       help="ingest dumps as they arrive in a directory (Structured Streaming), replaying what they "
                            "touch; --trigger available-now for a scheduled job")
    p.add_argument("root", metavar="DIR", help="the directory dumps arrive in; any URI Spark reads")
    _lake_options(p, cluster_required=False)
    p.add_argument("--cluster-from-path", action="store_true",
                   help="the first directory below DIR names the cluster (DIR/<cluster>/...) instead of --lake-cluster")
    p.add_argument("--checkpoint", metavar="LOC",
                   help="where the stream keeps what it has seen (default: beside a directory lake's tables; "
                        "required with --catalog, e.g. a Volume path)")
    p.add_argument("--trigger", default="available-now",
                   help="available-now (everything new, then stop: for a scheduled job; the default) or an interval "
                        "such as 30s or 5m (keep watching until interrupted)")
    p.add_argument("--high-watermark", type=int, metavar="HW", help="committed point, if known (see README)")
    p.add_argument("--no-replay", action="store_true", help="only ingest; replay later with `kraft-replay replay`")
    p.add_argument("--no-progress", action="store_true", help="no status lines")
    p.add_argument("--show-secrets", action="store_true",
                   help="store SCRAM credentials and password configs as the log holds them (see ingest)")
    p.set_defaults(func=cmd_watch)

    p = sub.add_parser("replay", parents=[output],
                       help="bring a cluster's replay tables up to date with the lake (after ingest --no-replay); "
                            "resumes from the last settled snapshot when it can")
    _lake_options(p)
    p.add_argument("--high-watermark", type=int, metavar="HW", help="committed point, if known (see README)")
    p.add_argument("--full", action="store_true", help="replay from the start even where it could resume")
    p.set_defaults(func=cmd_replay)

    p = sub.add_parser("changes", parents=[output], help="ACL changes between two offsets or times, from the lake")
    _lake_options(p)
    _span_options(p)
    _engine_option(p)
    _old_format(p, "changes")
    p.set_defaults(func=cmd_changes)

    p = sub.add_parser("history", parents=[output], help="ACL lifetimes (one row each), from the lake")
    _lake_options(p)
    p.add_argument("--principal", help="only this principal's ACLs, e.g. User:alice")
    p.add_argument("--resource", help="only ACLs on this resource name")
    _engine_option(p)
    _old_format(p, "history")
    p.set_defaults(func=cmd_history)

    p = sub.add_parser("sql", parents=[output], help="run SQL against the lake with acl_state_at & co. registered")
    p.add_argument("query", help="e.g. \"SELECT * FROM acl_state_at('c1', 1234)\"")
    _lake_options(p, cluster_required=False)
    _old_format(p, "sql")
    p.set_defaults(func=cmd_sql)

    p = sub.add_parser("install-sql", parents=[output],
                       help="create the SQL functions and views as persistent ones in a schema (for a SQL warehouse "
                            "or any Spark session)")
    _lake_options(p, cluster_required=False)
    p.add_argument("--schema", help="the schema (or catalog.schema) the functions go to; a directory lake's read "
                   "its tables by path (default for --catalog: the lake's own schema)")
    p.add_argument("--print", action="store_true", help="write the DDL to stdout instead of running it (without "
                   "the comments an older lake's tables lack: those need the lake)")
    p.set_defaults(func=cmd_install_sql)

    p = sub.add_parser("authorize", parents=[output],
                       help="was it allowed then, and through which ACL? (one question or a file)")
    _lake_options(p, cluster_required=False)
    _broker_options(p)
    _when_options(p)
    p.add_argument("--principal", help="e.g. User:alice")
    p.add_argument("--host", help="the client's IP address as Kafka saw it, e.g. 10.0.0.1 or ::1 (required for one "
                                  "question; with --requests each row has its host)")
    p.add_argument("--operation", help="READ, WRITE, DESCRIBE, ...")
    _resource_flags(p, api=True)
    p.add_argument("--resource-type", help="with no resource name: authorizeByResourceType (KIP-679)")
    api = p.add_argument_group("API calls (instead of --operation)")
    api.add_argument("--api", metavar="NAME", help="a Kafka API (OffsetFetch, OFFSET_FETCH or its key 9): every "
                     "ACL check the call makes on the resources given, and whether the call passes")
    api.add_argument("--which-apis", action="store_true", help="every API that checks ACLs, on the resources given")
    api.add_argument("--kafka-version", default=LATEST_KAFKA, metavar="V",
                     help=f"the brokers' Kafka version: which checks an API makes (default {LATEST_KAFKA})")
    api.add_argument("--api-version", type=int, metavar="N", help="the request's version (default: what a current "
                     "client sends)")
    api.add_argument("--condition", action="append", choices=sorted(CONDITIONS), help="a case the request is in "
                     "(repeatable), e.g. transactional, follower, auto_create")
    p.add_argument("--requests", metavar="FILE", help="access tuples: CSV, JSON lines, Parquet or Avro")
    p.add_argument("--out", help="with --requests: where to write the decisions")
    p.add_argument("--out-format", default="delta", choices=["delta", "parquet", "csv", "json"],
                   help="with --requests: the decisions file's format")
    _old_format(p, "authorize")
    p.set_defaults(func=cmd_authorize)

    _audit_parsers(sub, output)

    p = sub.add_parser("server", parents=[output], help="start, stop or show a local Spark server that stays warm "
                                                         "between the lake commands")
    p.add_argument("action", choices=["start", "stop", "status"])
    p.add_argument("--master", default="local[*]", help="the server's Spark master (default local[*])")
    p.add_argument("--memory", help="the server's driver memory, e.g. 8g (default: as a local session gets)")
    p.add_argument("--warm-up", action="store_true",
                   help="with start: run a small ingest and replay through the server, so that the first real "
                        "command finds its driver warm")
    p.set_defaults(func=cmd_server)

    p = sub.add_parser("demo", help="the main job on embedded defaults: ingest data/ samples, tour, plots")
    demo.add_arguments(p)
    p.set_defaults(func=demo.run)

    return parser


def _audit_parsers(sub: Any, output: argparse.ArgumentParser) -> None:
    """`audit who-can|what-can|changes|timeline|risky|verify-log|unused`: one subcommand each, with only the flags
    it reads."""
    p = sub.add_parser("audit", parents=[output], help="point-in-time audits: who-can, what-can, changes, "
                                                       "timeline, risky; of broker logs: verify-log, unused")
    audits = p.add_subparsers(dest="audit", required=True, metavar="AUDIT")

    def audit(name: str, help_text: str) -> argparse.ArgumentParser:
        a: argparse.ArgumentParser = audits.add_parser(name, parents=[output], help=help_text, description=help_text)
        _lake_options(a)
        a.add_argument("--avro", metavar="PATH", help="write Avro (schema replay/kafka/audit.avsc) instead")
        _old_format(a, "audit")
        a.set_defaults(func=cmd_audit)
        return a

    a = audit("who-can", "who could perform an operation on a resource then, and through which ACL")
    a.add_argument("--operation", required=True, help="READ, WRITE, DESCRIBE, ...")
    _resource_flags(a, required=True)
    _when_options(a)
    _broker_options(a)

    a = audit("what-can", "what a principal could do then, on which resources")
    a.add_argument("--principal", required=True, help="e.g. User:alice")
    _when_options(a)
    _broker_options(a)

    a = audit("changes", "ACLs added and removed, and access gained and lost, between two offsets or times")
    _span_options(a)
    _broker_options(a)

    a = audit("timeline", "the intervals over which a decision stayed the same, over all of history, for a "
                          "principal (--principal) or a resource (--topic NAME, ...)")
    a.add_argument("--principal", help="only this principal, e.g. User:alice")
    a.add_argument("--operation", help="only this operation")
    _resource_flags(a)
    _broker_options(a)

    v = audits.add_parser("verify-log", parents=[output], help=(
        "was each decision a broker's authorizer log records the one the ACLs of that moment give? (from dump "
        "files, or a lake)"),
        description="Reads Kafka's authorizer log (kafka.authorizer.logger: StandardAuthorizer or the older "
                    "AclAuthorizer, plain or gzip; Confluent's audit-log events) and gives each logged decision a "
                    "verdict against the history the dumps (--dumps) or the lake (--lake/--catalog with "
                    "--lake-cluster) hold: consistent, inconsistent (with why) or unknown (a hole, or a time before "
                    "the history). With a lake and no LOG: the decisions ingested into access_events (ingest-log).")
    _log_options(v, "exit 3 when a decision is inconsistent, a line cannot be read, or the dumps have problems",
                 lake=True)
    v.set_defaults(func=cmd_verify_log)

    u = audits.add_parser("unused", parents=[output], help=(
        "least privilege: ACLs that decided no logged request in a window, and per principal granted against used "
        "(from dump files and authorizer logs at DEBUG)"),
        description="Credits each logged decision that verify-log finds consistent to the ACL that decided it, and "
                    "lists the ACLs live in the window with the decisions they made, the hosts those came "
                    "from and, for an ACL naming a host, the other hosts its principal asked for what it covers "
                    "from (other_hosts; unused first), and per principal the operations granted, used, and its ALLOWs that "
                    "decided nothing. Needs the authorizer logger at DEBUG: at INFO only denials are logged.")
    u.add_argument("--only-unused", action="store_true", help="list only the ACLs that decided nothing")
    u.add_argument("--only-other-hosts", action="store_true",
                   help="list only the grants used only from hosts other than the one they name: ACLs naming a host "
                        "that decided nothing while their principal made the requests they cover from other hosts")
    _log_options(u, "exit 3 when a line is not consistent with the ACLs or cannot be read", lake=True)
    u.set_defaults(func=cmd_unused)

    a = audit("risky", "risky grants: ALLOWs for User:*, of ALL, on the resource * or on every prefix; topics no ACL "
                       "covers when everyone is allowed; over all of history, or as of a moment")
    _when_options(a)
    a.add_argument("--allow-everyone-if-no-acl-found", action="store_true",
                   help="the broker ran with allow.everyone.if.no.acl.found=true (unset: what it would expose)")


def main(argv: Sequence[str] | None = None, out: TextIO | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _settle(parser, args)
    try:
        return int(args.func(args, out or sys.stdout))
    except QuestionError as err:  # a question that cannot be answered as asked: one line, not a traceback
        print(f"{parser.prog}: {err}", file=sys.stderr)
        return EXIT_USAGE
    except ModuleNotFoundError as err:
        if (err.name or "").split(".")[0] not in SPARK_MODULES:
            raise
        print(f"{parser.prog} {args.command}: this command runs on Spark, and {err.name} is not installed: "
              "pip install 'kraft-acl-replay[spark]' (or run it where Spark is, e.g. on Databricks)", file=sys.stderr)
        return EXIT_FAILED
    except BrokenPipeError:
        return EXIT_OK
    except Exception as err:  # the executors' Python lacks this package: say how to give it to them
        from replay.spark.session import missing_package_hint

        hint = missing_package_hint(err) if "pyspark" in sys.modules else None
        if hint is None:
            raise
        print(f"{parser.prog} {args.command}: {hint}", file=sys.stderr)
        return EXIT_FAILED
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    finally:
        if "replay.spark.server" in sys.modules:  # a lake command that ran on the server: end its session there
            sys.modules["replay.spark.server"].detach()


if __name__ == "__main__":
    sys.exit(main())
