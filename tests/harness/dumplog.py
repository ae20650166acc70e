"""Kafka's own `kafka-dump-log` on metadata log files: the oracle for `kraft-replay inspect --format dump-log`.

Runs `org.apache.kafka.tools.DumpLogSegments --cluster-metadata-decoder --files F` (the Java tool of Kafka 4.x;
`bin/kafka-dump-log.sh` runs the same class) with `kafka_jars()` on the classpath and returns its stdout.
`skip_record_metadata=True` adds `--skip-record-metadata` (only the decoded payloads, no per-record header lines).

The first line Kafka prints names the file (`Dumping <path>`), so the output depends on the path it was given;
`dump_log(..., relative_to=...)` is not offered on purpose: compare after the first line, or pass the same path.

Command line: `python -m tests.harness.dumplog [--skip-record-metadata] FILE...` prints the dump of each file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from replay.kafka.acl import AclBinding
from tests.harness.jvm import tool_command

DUMP_LOG_MAIN = "org.apache.kafka.tools.DumpLogSegments"


class DumpLogError(RuntimeError):
    pass


def dump_log(files: Path | str | Iterable[Path | str], skip_record_metadata: bool = False,
             extra_args: Iterable[str] = (), timeout: float = 600.0) -> str:
    """stdout of `kafka-dump-log --cluster-metadata-decoder --files <files>` (comma-joined, as Kafka expects)."""
    paths = [Path(files)] if isinstance(files, (str, Path)) else [Path(f) for f in files]
    if not paths:
        raise ValueError("no files")
    args = ["--cluster-metadata-decoder", "--files", ",".join(str(p) for p in paths)]
    if skip_record_metadata:
        args.append("--skip-record-metadata")
    args += list(extra_args)
    proc = subprocess.run(tool_command(DUMP_LOG_MAIN, *args), capture_output=True, text=True,
                          encoding="utf-8", errors="surrogateescape", timeout=timeout)
    if proc.returncode != 0:
        raise DumpLogError(f"DumpLogSegments failed ({proc.returncode}) on {paths}:\n{proc.stderr[-4000:]}")
    return proc.stdout


def dump_each(files: Iterable[Path | str], skip_record_metadata: bool = False) -> dict[Path, str]:
    """One JVM for many files: Kafka's output split at its `Dumping <path>` lines, keyed by absolute path."""
    paths = [Path(f).resolve() for f in files]
    text = dump_log(paths, skip_record_metadata)
    out: dict[Path, list[str]] = {}
    current: list[str] | None = None
    wanted = {str(p): p for p in paths}
    for line in text.splitlines(keepends=True):
        if line.startswith("Dumping ") and line[len("Dumping "):].rstrip("\n") in wanted:
            current = out.setdefault(wanted[line[len("Dumping "):].rstrip("\n")], [])
        if current is None:
            raise DumpLogError(f"output before the first `Dumping` line: {line!r}")
        current.append(line)
    missing = [p for p in paths if p not in out]
    if missing:
        raise DumpLogError(f"DumpLogSegments printed nothing for {missing}")
    return {p: "".join(lines) for p, lines in out.items()}


@dataclass(frozen=True)
class DumpedRecord:
    """A data record as Kafka's DumpLogSegments printed it: offset (local inside a snapshot) and decoded payload."""

    offset: int | None  # None with --skip-record-metadata
    payload: dict[str, Any]

    @property
    def type(self) -> str:
        return str(self.payload["type"])

    @property
    def data(self) -> dict[str, Any]:
        data: dict[str, Any] = self.payload["data"]
        return data


def payload_records(text: str) -> list[DumpedRecord]:
    """The `payload: {...}` records of a dump (control records, which print no `payload:`, are left out)."""
    out = []
    for line in text.splitlines():
        if not line.startswith("| ") or "payload: " not in line:
            continue
        head, _, body = line.partition("payload: ")
        offset = int(head.split()[2]) if head.startswith("| offset: ") else None
        out.append(DumpedRecord(offset, json.loads(body)))
    return out


def acl_state(records: Iterable[DumpedRecord], upto: int | None = None,
              start: dict[str, AclBinding] | None = None) -> dict[str, AclBinding]:
    """ACL id -> binding after applying log records with offset <= `upto` in order, from `start`.

    Metadata transactions as the controller sees them (records between Begin and End apply at End, dropped at
    Abort, still held at the end = invisible). An oracle built only on Kafka's own decoding, for tests."""
    state = dict(start or {})
    held: list[DumpedRecord] | None = None

    def apply(r: DumpedRecord) -> None:
        if r.type == "ACCESS_CONTROL_ENTRY_RECORD":
            state[r.data["id"]] = AclBinding.from_record_data(r.data)
        elif r.type == "REMOVE_ACCESS_CONTROL_ENTRY_RECORD":
            state.pop(r.data["id"], None)

    for r in sorted(records, key=lambda r: -1 if r.offset is None else r.offset):
        if upto is not None and r.offset is not None and r.offset > upto:
            break
        if r.type == "BEGIN_TRANSACTION_RECORD":
            held = []
        elif r.type == "END_TRANSACTION_RECORD":
            for h in held or []:
                apply(h)
            held = None
        elif r.type == "ABORT_TRANSACTION_RECORD":
            held = None
        elif held is not None:
            held.append(r)
        else:
            apply(r)
    return state


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tests.harness.dumplog")
    parser.add_argument("--skip-record-metadata", action="store_true")
    parser.add_argument("files", nargs="+", type=Path)
    args = parser.parse_args(argv)
    sys.stdout.write(dump_log(args.files, args.skip_record_metadata))
    return 0


if __name__ == "__main__":
    sys.exit(main())
