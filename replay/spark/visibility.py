"""Which replay's rows readers see, per cluster: a chain of replays, each over a range of offsets.

Every replay tags the rows it writes with its id. A full replay's rows are all a cluster's history. A replay that
resumes from the snapshot at offset `q` (`replay.spark.resume`) writes only what lies after `q` and leaves the rows
the earlier replays wrote up to `q` where they are: rewriting them made every resumed replay's writes grow with the
whole history. So readers see, per cluster, a *chain*
`((replay_id, after, upto), ...)`: a row of a replay in the chain is seen when its *key* lies in `(after, upto]`
(None: unbounded). The key of a row is the offset that puts it on one side of a resume point (`ROW_KEYS`); a row
without one lies after every offset, so only the newest replay's are seen (its range is open above).

`replay_state` keeps each cluster's chain (`visible_ranges`) beside the newest replay (`visible_replay_id`); a
state row from before chains had only the latter, which is the chain of one replay over everything (`chain_of`).
Each engine applies the chain once: `tables.Lake` in SQL, `lake_without_spark` in pyarrow.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# The offset that tells on which side of a resume point a row lies: an event's, an anomaly's and a time-index
# entry's offset; a lifetime's end (one still open at the resume point is written again by the replay resuming
# there, with its start kept). Coverage has none: each replay writes the cluster's whole coverage again (a handful
# of rows), so only the newest replay's is seen.
ROW_KEYS: dict[str, str | None] = {
    "acl_events": "offset",
    "anomalies": "offset",
    "offset_times": "offset",
    "acl_history": "valid_to_offset",
    "log_coverage": None,
}

# A resumed replay adds a replay to its cluster's chain; past this many, the next replay is a full one, which
# writes the history in one replay's files again (readers of a long chain read many small files).
MAX_CHAIN = 16

Range = tuple[str, int | None, int | None]  # (replay_id, after, upto): keys in (after, upto] are seen
Chain = tuple[Range, ...]


def chain_of(state: Mapping[str, Any] | None) -> Chain:
    """A `replay_state` row's chain: its `visible_ranges` when they end with the replay it names visible; else that
    replay over everything (a row written before chains, or by a writer that knew only `visible_replay_id`); empty
    when it names none (a first replay still running, or rows written before replays were tagged: the untagged rows
    are seen)."""
    shown = None if state is None else state.get("visible_replay_id")
    if shown is None:
        return ()
    ranges = state.get("visible_ranges") if state is not None else None
    if ranges and ranges[-1]["replay_id"] == shown:
        return tuple((str(r["replay_id"]), r["after_offset"], r["upto_offset"]) for r in ranges)
    return ((str(shown), None, None),)


def newest(chain: Chain) -> str | None:
    """The replay whose range is open above: the one that wrote the cluster's latest rows and its coverage."""
    return chain[-1][0] if chain else None


def resumed_chain(chain: Chain, replay_id: str, resume_offset: int) -> Chain:
    """The chain after `replay_id` resumed at `resume_offset`: every earlier replay's range cut off there (a range
    left empty drops out), then the new replay over everything after it."""
    kept: list[Range] = []
    for rid, after, upto in chain:
        upto = resume_offset if upto is None else min(upto, resume_offset)
        if after is None or after < upto:
            kept.append((rid, after, upto))
    return (*kept, (replay_id, resume_offset, None))


def full_chain(replay_id: str) -> Chain:
    """The chain of a full replay: its own rows, all of them."""
    return ((replay_id, None, None),)


def cut_back(before: Chain, after: Chain) -> list[tuple[str, int]]:
    """Replays that stay in the chain with a range ending earlier than before: (replay id, new end). Their rows
    past the new end are no longer seen and can be removed."""
    ends = {rid: upto for rid, _, upto in after}
    cut = []
    for rid, _, upto in before:
        end = ends.get(rid)  # None: gone from the chain (all its rows go), or still the newest
        if end is not None and (upto is None or end < upto):
            cut.append((rid, end))
    return cut


def ids(chain: Chain) -> list[str]:
    """The replays of a chain, oldest first."""
    return [rid for rid, _, _ in chain]


def as_rows(chain: Sequence[Range]) -> list[dict[str, Any]]:
    """A chain as `replay_state.visible_ranges` stores it."""
    return [{"replay_id": rid, "after_offset": after, "upto_offset": upto} for rid, after, upto in chain]
