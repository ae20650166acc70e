"""Moments in time as the tool reads and writes them (DESIGN.md §3 rule 8: a record's time is its batch's append
time, epoch milliseconds; "as of time T" means as of the last offset whose time is <= T).

Every layer shares these two functions, so a time printed by one command reads back unchanged in another.
"""

from __future__ import annotations

from datetime import datetime, timezone


class TimeError(ValueError):
    """A text that is neither epoch milliseconds nor an ISO-8601 time."""


def parse_time(text: str) -> int:
    """Epoch milliseconds, or an ISO-8601 time (`2026-11-20T14:02:00Z`; no zone means UTC)."""
    text = text.strip()
    if text.lstrip("-").isdigit():
        return int(text)
    try:
        dt = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError as err:
        raise TimeError(
            f"cannot read time {text!r}: give epoch milliseconds or ISO-8601 like 2026-11-20T14:02:00Z") from err
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=timezone.utc)
    return int(dt.timestamp() * 1000)


def format_time(ms: int | None) -> str:
    """Epoch milliseconds as ISO-8601 UTC with milliseconds (`2026-11-20T14:02:00.000Z`); `-` for no time."""
    if ms is None:
        return "-"
    return datetime.fromtimestamp(ms / 1000, tz=timezone.utc).isoformat(timespec="milliseconds").replace("+00:00", "Z")
