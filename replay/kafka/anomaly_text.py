"""The text of each anomaly the replay reports, written once for both engines.

The reference replayer fills a template with `str.format`; the Spark replay turns the same template into a
`format_string` over columns (`replay.spark.texts.filled`), so a message cannot read one way in the lake and another
in `kraft-replay acls PATH`. Fields are named; a list field renders as Python prints a list of strings.
"""

from __future__ import annotations

BAD_CRC_BATCH = "batch with a bad CRC is not applied (Kafka's recovery truncates the log there)"

# copies of one offset (DIVERGENCE)
TWO_RECORDS = "two different records at offset {offset}: {why}"
OLDER_EPOCH_LOSES = ("epoch {winner_epoch} from {winner_source} wins over epoch {epoch} from {source} "
                     "(a truncated uncommitted suffix)")
DAMAGED_COPY = ("two copies with epoch {epoch} differ ({winner_source} is used, {source} is not): the same epoch "
                "means the same record, so one copy is damaged")
EPOCH_BELOW_EARLIER = ("record at offset {offset} has epoch {epoch} below epoch {max_epoch} of an earlier record: "
                       "part of a truncated uncommitted suffix, not applied")

# snapshots
SNAPSHOT_NO_HEADER = "snapshot does not start with a SnapshotHeader; not loaded"
SNAPSHOT_NO_FOOTER = "snapshot has no SnapshotFooter (incomplete); not loaded"
SNAPSHOT_NOT_LOADED = ("snapshot {end_offset}-{epoch} is not loaded: problem(s) inside it ({kinds}), so its ACL set "
                       "is not known")
SNAPSHOTS_DIFFER = "two snapshots end at {end_offset} with different ACLs; epoch {winner_epoch} from {winner_source} wins"
SNAPSHOT_MISMATCH = ("snapshot {end_offset}-{epoch} disagrees with the log before it: {n_only_snap} ACL(s) only in "
                     "the snapshot {only_snap}, {n_only_log} only in the log {only_log}, {n_changed} with other "
                     "content {changed}; the snapshot is loaded")
MISMATCH_LISTED = 5  # ids listed per category of a snapshot mismatch (the counts say how many there are)

# holes
GAP = "offsets {start}..{end} are in no dump; {tail}"
GAP_BRIDGED = ("the snapshot at offset {bridge} bridges it: ACLs live there are known, changes inside the hole have "
               "uncertain offsets")
GAP_NOT_BRIDGED = "no later snapshot bridges it: ACLs created there are unknown from then on"

# transactions
NESTED_BEGIN = ("BeginTransaction inside the transaction begun at offset {opener}; ignored, the open transaction "
                "continues")
WITHOUT_BEGIN = "{marker} without Begin; ignored"
PENDING_TRANSACTION = ("transaction begun at offset {opener} is still open at the end of the input; its {held} held "
                       "record(s) are invisible")

# ACL ids
DUPLICATE_ID = "ACL id {acl_id} created again while live ({content} content); the new record replaces it"
UNKNOWN_REMOVE = "RemoveAccessControlEntry for unknown ACL id {acl_id}; ignored{hint}"
UNKNOWN_REMOVE_FROM_HOLE = " (it was created in an earlier hole, so the history before it is incomplete)"


def mismatch_message(end_offset: int, epoch: int, only_snap: list[str], only_log: list[str],
                     changed: list[str]) -> str:
    """The text of a `snapshot_mismatch`: counts, and the first ids of each kind in sorted order."""
    return SNAPSHOT_MISMATCH.format(
        end_offset=end_offset, epoch=epoch, n_only_snap=len(only_snap), only_snap=sorted(only_snap)[:MISMATCH_LISTED],
        n_only_log=len(only_log), only_log=sorted(only_log)[:MISMATCH_LISTED], n_changed=len(changed),
        changed=sorted(changed)[:MISMATCH_LISTED])
