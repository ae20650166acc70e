"""Audit and decision rows written the ways other tools read them: JSON lines, CSV, and Avro against the published
schema `audit.avsc` (record `io.github.kraftaclreplay.AclAuditRecord`), so results can go to a SIEM or a Kafka
topic. Pure Python (no Spark): rows are mappings, e.g. `Row.asDict()` of collected audit rows.

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

AUDIT_SCHEMA_PATH = os.path.join(os.path.dirname(__file__), "audit.avsc")
FORMATS = ("jsonl", "json", "csv", "avro", "table")
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
    if isinstance(value, (list, tuple, set, frozenset)):
        return ";".join(_cell(v) for v in value)
    if isinstance(value, (Mapping, datetime, date)) or hasattr(value, "asDict"):
        plain = _plain(value)
        return plain if isinstance(plain, str) else json.dumps(plain, sort_keys=True)
    return str(value)


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
    """Dispatch on `fmt`: `jsonl`/`json` (JSON lines), `csv`, `avro`, `table` (fixed-width text for people)."""
    if fmt in ("jsonl", "json"):
        return write_jsonl(rows, target)
    if fmt == "csv":
        return write_csv(rows, target, columns)
    if fmt == "avro":
        return write_avro(rows, target, audit)
    if fmt == "table":
        from .listing import table_lines

        rows = [{k: _cell(v) for k, v in r.items()} for r in rows]
        f, close = _open_text(target)
        try:
            for line in table_lines(rows, list(columns) if columns else None):
                f.write(line + "\n")
        finally:
            if close:
                f.close()
        return len(rows)
    raise ValueError(f"unknown output format {fmt!r}; choose one of {', '.join(FORMATS)}")
