"""The chain of replays readers see per cluster (`replay.spark.visibility`), without Spark: how a resumed replay
cuts the earlier ranges back, what is left to delete, and what a `replay_state` row of each age says. The readers
that apply it are held to each other over real resumed replays in `test_incremental_replay.py`."""

from __future__ import annotations

from replay.spark.resume import others_predicate, unseen_predicate
from replay.spark.visibility import chain_of, cut_back, full_chain, newest, resumed_chain


def test_a_resumed_replay_cuts_the_earlier_ranges_at_its_resume_point() -> None:
    chain = full_chain("r0")
    chain = resumed_chain(chain, "r1", 10)
    assert chain == (("r0", None, 10), ("r1", 10, None))
    chain = resumed_chain(chain, "r2", 25)
    assert chain == (("r0", None, 10), ("r1", 10, 25), ("r2", 25, None))
    assert newest(chain) == "r2"
    # resumed at the same snapshot again: the previous replay's range is empty and it leaves the chain
    again = resumed_chain(chain, "r3", 25)
    assert again == (("r0", None, 10), ("r1", 10, 25), ("r3", 25, None))
    assert cut_back(chain, again) == []  # r2 left whole: its rows go by partition
    assert cut_back(full_chain("r0"), resumed_chain(full_chain("r0"), "r1", 10)) == [("r0", 10)]
    assert cut_back(chain, full_chain("r9")) == []


def test_state_rows_of_every_age_give_their_chain() -> None:
    assert chain_of(None) == ()
    assert chain_of({"visible_replay_id": None}) == ()  # rows written before replays were tagged
    assert chain_of({"visible_replay_id": "r0"}) == (("r0", None, None),)  # written before chains
    assert chain_of({"visible_replay_id": "r0", "visible_ranges": None}) == (("r0", None, None),)
    ranges = [{"replay_id": "r0", "after_offset": None, "upto_offset": 4},
              {"replay_id": "r1", "after_offset": 4, "upto_offset": None}]
    assert chain_of({"visible_replay_id": "r1", "visible_ranges": ranges}) == (("r0", None, 4), ("r1", 4, None))
    # ranges that do not end with the replay named visible (a writer that set only visible_replay_id): that one
    assert chain_of({"visible_replay_id": "r2", "visible_ranges": ranges}) == (("r2", None, None),)
    # a first replay still running names none: nothing tagged is seen, whatever the row's other columns say
    assert chain_of({"visible_replay_id": None, "visible_ranges": ranges}) == ()


def test_what_readers_no_longer_see_is_deleted_in_one_statement_by_partition_where_it_can_be() -> None:
    before = {"c1": (("r0", None, 10), ("r1", 10, None))}
    after = {"c1": resumed_chain(before["c1"], "r2", 30)}
    others = "(cluster_id = 'c1' AND (replay_id IS NULL OR replay_id NOT IN ('r0', 'r1', 'r2')))"
    assert unseen_predicate("acl_events", before, after) == (
        f"{others} OR (cluster_id = 'c1' AND replay_id = 'r1' AND (offset IS NULL OR offset > 30))")
    assert unseen_predicate("acl_history", before, after).endswith(
        "AND (valid_to_offset IS NULL OR valid_to_offset > 30))")
    # coverage rows have no key: the cut-back replay's go whole
    assert unseen_predicate("log_coverage", before, after) == f"{others} OR (cluster_id = 'c1' AND replay_id = 'r1')"
    # a full replay: every other replay's rows, by partition only
    assert unseen_predicate("acl_events", before, {"c1": full_chain("r2")}) == (
        "(cluster_id = 'c1' AND (replay_id IS NULL OR replay_id NOT IN ('r2')))")
    assert others_predicate({"c2": ()}) == "(cluster_id = 'c2' AND (replay_id IS NOT NULL))"


def test_a_replay_leaves_the_rows_of_a_replay_that_started_after_it() -> None:
    """Two replays of a cluster at once: the one that switched first must not remove what the later one writes
    (replay ids begin with their start time); ids without a time (older versions) are judged by the chain alone."""
    own, later = "20261207t090000_0123456789abcdef0123", "20261207t090105_00aa"
    assert others_predicate({"c1": full_chain(own)}) == (
        f"(cluster_id = 'c1' AND (replay_id IS NULL OR (replay_id NOT IN ('{own}') AND NOT (replay_id > '{own}' "
        "AND replay_id RLIKE '^([0-9]{8}t[0-9]{6})_[0-9a-f]+$'))))")
    assert later > own
    assert others_predicate({"c1": full_chain("r2")}) == (
        "(cluster_id = 'c1' AND (replay_id IS NULL OR replay_id NOT IN ('r2')))")
