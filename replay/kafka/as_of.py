"""What an as-of answer says about itself: how far it can be trusted, and whether its offset lies inside what a
node publishes at once (DESIGN.md §2: a record batch whole, a metadata transaction with its End).

Both engines place each ACL change at the offset where it becomes visible, the last offset of its batch (of its
End's batch in a transaction), so the state as of an offset inside a batch or an open transaction is the one a
node exposed before it. `Unpublished` says so in an answer: which changes were logged by then but not yet visible.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from .times import format_time

TRANSACTION = "TRANSACTION"  # the cause of an event an EndTransaction made visible (`replayer.Cause`)


@dataclass(frozen=True, slots=True)
class Unpublished:
    """ACL changes logged at or before `offset` that become visible together at `visible_at`, after it."""

    offset: int  # the offset asked about
    first_record: int  # the first of their records
    visible_at: int
    changes: int  # every change that becomes visible with them (records after `offset` too)
    transaction: bool  # held by a metadata transaction (else: the rest of their batch is after `offset`)

    @property
    def state_offset(self) -> int:
        """The offset whose state the answer is: nothing became visible between it and `offset`."""
        return self.first_record - 1

    def sentence(self) -> str:
        unit = "a metadata transaction" if self.transaction else "an atomic batch"
        return (f"offset {self.offset} lies inside {unit}: its {self.changes} ACL change(s) logged from offset "
                f"{self.first_record} become visible together at {self.visible_at}; the answer is the state a node "
                f"published, as of {self.state_offset}")

    def meta(self) -> dict[str, Any]:
        return {"offset": self.offset, "firstRecordOffset": self.first_record, "visibleAtOffset": self.visible_at,
                "changes": self.changes, "transaction": self.transaction, "stateAsOfOffset": self.state_offset}


def unpublished_at(offset: int, changes: Iterable[tuple[int, int | None, str]]) -> Unpublished | None:
    """The changes (visible offset, record offset, cause) logged at or before `offset` and visible only after it,
    with those that become visible together with them; None when every change logged by then was visible."""
    listed = [(visible, record, cause) for visible, record, cause in changes if record is not None]
    pending = [visible for visible, record, _ in listed if record <= offset < visible]
    if not pending:
        return None
    at = min(pending)
    unit = [(record, cause) for visible, record, cause in listed if visible == at]
    first = min(record for record, _ in unit if record <= offset)
    return Unpublished(offset, first, at, len(unit), any(cause == TRANSACTION for _, cause in unit))


def state_meta(offset: int | None, time: int | None, covered: bool, complete: bool, uncertain: int,
               unpublished: Unpublished | None) -> dict[str, Any]:
    """The facts of an as-of answer, as `acls --output json` and the notebook show them."""
    meta: dict[str, Any] = {"asOfOffset": offset, "asOfTime": format_time(time), "covered": covered,
                            "complete": complete, "exact": covered and complete and not uncertain}
    if unpublished is not None:
        meta["insideAtomicUnit"] = unpublished.meta()
    return meta


def state_notes(offset: int, covered: bool, complete: bool, uncertain: int, unpublished: Unpublished | None
                ) -> list[str]:
    """What a person should know about an as-of answer, one sentence each (none: it is exact, at a boundary)."""
    notes = [] if unpublished is None else [unpublished.sentence()]
    why = []
    if not covered:
        why.append(f"offset {offset} is in no dump (a hole in history)")
    if not complete:
        why.append("it lies near a hole in history, where ACLs that no dump recorded may have been live")
    if uncertain:
        why.append(f"{uncertain} ACL(s) may or may not have been live")
    if why:
        notes.append("this answer is not certain: " + "; ".join(why))
    return notes


def unpublished_row(offset: int, row: Any) -> Unpublished | None:
    """`Unpublished` from a row of `replay.spark.rules.unpublished_sql` (columns visible_at, first_record, changes,
    in_transaction; visible_at NULL: none)."""
    if row is None or row["visible_at"] is None:
        return None
    return Unpublished(offset, int(row["first_record"]), int(row["visible_at"]), int(row["changes"]),
                       bool(row["in_transaction"]))
