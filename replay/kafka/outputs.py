"""Answers written the ways people and other tools read them: `Renderer`, the one output path of every
`kraft-replay` command (`--output table|json|jsonl|csv`), and Avro against the published schema `audit.avsc`
(record `io.github.kraftaclreplay.AclAuditRecord`), so results can go to a SIEM or a Kafka topic. Pure Python (no
Spark): rows are mappings, e.g. `Row.asDict()` of collected rows.

ACL listings people know (`kafka-acls --list`, `StandardAcl(...)` lines) are in `listing.py`.

Avro mapping: columns whose names are fields of the schema go there (`deciding_acl_ids` goes to `acl_ids`, times
given as datetimes become epoch ms); every other column lands in `attributes` as JSON text, so nothing is lost and
the schema stays fixed.
"""

from __future__ import annotations

import csv
import io
import json
import os
from collections.abc import Iterable, Iterator, Mapping, Sequence
from datetime import date, datetime, timezone
from functools import lru_cache
from typing import IO, Any

from .listing import table_lines

AUDIT_SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "audit.avsc")
FORMATS = ("jsonl", "json", "csv", "avro", "table")
OUTPUTS = ("table", "json", "jsonl", "csv")  # what `--output` offers: text on stdout (Avro is a file: `--avro PATH`)
_RENAMED = {"deciding_acl_ids": "acl_ids", "acl_id": "acl_ids"}


@lru_cache(maxsize=1)
def audit_schema() -> dict[str, Any]:
    """The published Avro schema (a dict as in the .avsc file)."""
    with open(AUDIT_SCHEMA_PATH, encoding="utf-8") as f:
        doc: dict[str, Any] = json.load(f)
    return doc


@lru_cache(maxsize=1)
def _parsed_schema() -> Any:
    import fastavro

    return fastavro.parse_schema(audit_schema())


def _plain(value: Any) -> Any:
    """JSON-friendly: datetimes as ISO-8601 UTC, tuples as lists, Spark Rows as dicts."""
    if isinstance(value, datetime):
        v = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return v.astimezone(timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    if isinstance(value, date):
        return value.isoformat()
    if hasattr(value, "asDict"):
        return {k: _plain(v) for k, v in value.asDict(recursive=True).items()}
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, (list, tuple, set, frozenset)):
        return [_plain(v) for v in value]
    return value


def _epoch_ms(value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, datetime):
        v = value if value.tzinfo else value.replace(tzinfo=timezone.utc)
        return int(v.timestamp() * 1000)
    return int(value)


def audit_record(row: Mapping[str, Any], audit: str) -> dict[str, Any]:
    """One row as an `AclAuditRecord` dict (see the module docstring for the mapping)."""
    fields = {f["name"]: f for f in audit_schema()["fields"]}
    out: dict[str, Any] = {"audit": str(row.get("audit") or audit), "acl_ids": [], "uncertain_acl_ids": [],
                           "attributes": {}}
    for key, value in row.items():
        name = _RENAMED.get(key, key)
        if key == "audit":
            continue
        if name not in fields or (name == "acl_ids" and out["acl_ids"]):
            out["attributes"][key] = json.dumps(_plain(value), sort_keys=True)
            continue
        ftype = fields[name]["type"]
        if isinstance(ftype, dict) and ftype.get("type") == "array":
            if value is None:
                value = []
            elif isinstance(value, str):
                value = [value]
            out[name] = [str(v) for v in value]
        elif name.endswith("_time") or name.endswith("_offset"):
            out[name] = _epoch_ms(value)
        elif name == "certain":
            out[name] = None if value is None else bool(value)
        else:
            out[name] = None if value is None else str(value)
    for name, f in fields.items():
        out.setdefault(name, f.get("default"))
    return out


def _open_text(target: str | IO[str]) -> tuple[IO[str], bool]:
    if isinstance(target, str):
        return open(target, "w", encoding="utf-8", newline=""), True
    return target, False


def write_jsonl(rows: Iterable[Mapping[str, Any]], target: str | IO[str]) -> int:
    """One JSON object per line (columns as they are; datetimes ISO-8601). Returns the number of rows."""
    f, close = _open_text(target)
    n = 0
    try:
        for row in rows:
            f.write(json.dumps(_plain(row), sort_keys=False, ensure_ascii=False) + "\n")
            n += 1
    finally:
        if close:
            f.close()
    return n


def _cell(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (list, tuple, set, frozenset)) and not any(_nested(v) for v in value):
        return ";".join(_cell(v) for v in value)  # ids, hosts: `a1;a2` reads better than JSON
    if _nested(value) or isinstance(value, (datetime, date)):
        plain = _plain(value)
        return plain if isinstance(plain, str) else json.dumps(plain, sort_keys=True)
    return str(value)


def _nested(value: Any) -> bool:
    return isinstance(value, (Mapping, list, tuple, set, frozenset)) or hasattr(value, "asDict")


def write_csv(rows: Iterable[Mapping[str, Any]], target: str | IO[str], columns: Sequence[str] | None = None) -> int:
    """CSV with a header row; lists joined with `;`, nulls empty, booleans `true`/`false`."""
    it: Iterator[Mapping[str, Any]] = iter(rows)
    first = next(it, None)
    f, close = _open_text(target)
    n = 0
    try:
        cols = list(columns) if columns is not None else (list(first) if first is not None else [])
        w = csv.writer(f, lineterminator="\n")
        w.writerow(cols)
        if first is not None:
            for row in (first, *it):
                w.writerow([_cell(row.get(c)) for c in cols])
                n += 1
    finally:
        if close:
            f.close()
    return n


def write_avro(rows: Iterable[Mapping[str, Any]], target: str | IO[bytes], audit: str,
               codec: str = "deflate") -> int:
    """An Avro container file of `AclAuditRecord`s (the schema is embedded, as Avro requires)."""
    import fastavro

    records = [audit_record(r, audit) for r in rows]
    if isinstance(target, str):
        with open(target, "wb") as f:
            fastavro.writer(f, _parsed_schema(), records, codec=codec)
    else:
        fastavro.writer(target, _parsed_schema(), records, codec=codec)
    return len(records)


def avro_bytes(row: Mapping[str, Any], audit: str) -> bytes:
    """One record in Avro binary without a container (the value of a Kafka message; pair it with a schema
    registry or the .avsc file)."""
    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, _parsed_schema(), audit_record(row, audit))
    return buf.getvalue()


def read_avro(source: str | IO[bytes]) -> list[dict[str, Any]]:
    """Read a container file written by `write_avro` (or any Avro file) back as dicts."""
    import fastavro

    if isinstance(source, str):
        with open(source, "rb") as f:
            return [dict(r) for r in fastavro.reader(f)]  # type: ignore[arg-type]
    return [dict(r) for r in fastavro.reader(source)]  # type: ignore[arg-type]


def write_rows(rows: Iterable[Mapping[str, Any]], target: str | IO[Any], fmt: str, audit: str = "audit",
               columns: Sequence[str] | None = None) -> int:
    """`Renderer.rows` to a path or a stream for the text outputs (`table`, `json`, `jsonl`, `csv`), or an Avro
    container file of `audit` records (`avro`)."""
    if fmt == "avro":
        return write_avro(rows, target, audit)
    if fmt not in OUTPUTS:
        raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
    f, close = _open_text(target)
    try:
        return Renderer(fmt, f).rows(rows, columns)
    finally:
        if close:
            f.close()


class JsonText(str):
    """A JSON object already written as text: Kafka's own JSON (`1.0E7`, not `10000000.0`) is copied as printed."""


class Renderer:
    """How a command prints its answer, chosen once by `--output`, so every command speaks the same four formats:
    `table` (for people), `json` (one document: an array of rows or an object), `jsonl` (one object per line) and
    `csv` (a header, then one line per row). Rows stream (a big `inspect` is never held whole) except in `table`,
    whose widths need them all."""

    def __init__(self, fmt: str, out: IO[str]) -> None:
        if fmt not in OUTPUTS:
            raise ValueError(f"unknown output {fmt!r}; choose one of {', '.join(OUTPUTS)}")
        self.fmt = fmt
        self.out = out

    def rows(self, rows: Iterable[Mapping[str, Any] | JsonText], columns: Sequence[str] | None = None,
             people: Sequence[str] | None = None) -> int:
        """Rows of one kind; returns how many. `columns`: the CSV header and the table's columns, in order (default:
        the first row's keys); `people`: the table's narrower choice. `json` and `jsonl` write every key."""
        if self.fmt == "table":
            cells = [{k: _cell(v) for k, v in _mapping(r).items()} for r in rows]
            cols = people or columns
            for line in table_lines(cells, list(cols) if cols else None):
                self.out.write(line + "\n")
            return len(cells)
        if self.fmt == "csv":
            return write_csv((_mapping(r) for r in rows), self.out, columns)
        n = 0
        if self.fmt == "json":
            self.out.write("[")
        for row in rows:
            text = row if isinstance(row, JsonText) else _json(row)
            self.out.write(("," if n else "") + "\n" + text if self.fmt == "json" else text + "\n")
            n += 1
        if self.fmt == "json":
            self.out.write("\n]\n" if n else "]\n")
        return n

    def document(self, doc: Mapping[str, Any], people: Iterable[str]) -> None:
        """One answer that is not a list of rows (a decision, a report): `people` are its lines for the table
        output; `json` indents it, `jsonl` is one line, `csv` one row (lists and objects as JSON in their cell)."""
        if self.fmt == "table":
            for line in people:
                self.out.write(line + "\n")
        elif self.fmt == "json":
            self.out.write(_json(doc, indent=1) + "\n")
        elif self.fmt == "jsonl":
            self.out.write(_json(doc) + "\n")
        else:
            write_csv([doc], self.out)

    def sets(self, sets: Mapping[str, Sequence[Mapping[str, Any]]],
             people: Mapping[str, Sequence[str]] | None = None) -> None:
        """Several named sets of rows (an audit's answers). One set prints as `rows` does (a titled table for
        people); with more, `json` is an object of arrays, and `jsonl` and `csv` lead each row with its set's name
        in `audit`, so one stream still parses."""
        people = people or {}
        if self.fmt == "table":
            for name, rows in sets.items():
                self.out.write(f"== {name.replace('_', ' ')}: {len(rows)} row(s)\n")
                self.rows(rows, people=people.get(name))
        elif len(sets) == 1:
            self.rows(next(iter(sets.values())))
        elif self.fmt == "json":
            self.out.write(_json({k: list(v) for k, v in sets.items()}, indent=1) + "\n")
        else:
            tagged = [{"audit": name, **r} for name, rows in sets.items() for r in rows]
            columns = list(dict.fromkeys(c for r in tagged for c in r)) or ["audit"]
            self.rows(tagged, columns)


def _mapping(row: Mapping[str, Any] | JsonText) -> Mapping[str, Any]:
    if isinstance(row, JsonText):
        parsed: dict[str, Any] = json.loads(row)
        return parsed
    return row


def _json(value: Any, indent: int | None = None) -> str:
    """JSON text of plain values; what JSON has no type for (a SQL decimal, a byte string) as its text."""
    return json.dumps(_plain(value), indent=indent, ensure_ascii=False, default=str)
