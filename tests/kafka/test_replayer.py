"""DESIGN.md §3, rule by rule, on in-memory batches."""

from __future__ import annotations

import itertools

from replay.kafka.acl import AclBinding
from replay.kafka.model import Batch, BatchHeader, ProblemKind, Record
from replay.kafka.replayer import Cause, CoverageKind, Replayer

_uid = itertools.count(1)


def acl_id(n: int) -> str:
    return f"ACL{n:019d}"[:22]


def binding(principal: str = "User:alice", name: str = "t", op: str = "READ") -> AclBinding:
    return AclBinding("TOPIC", name, "LITERAL", principal, "*", op, "ALLOW")


def add(n: int, principal: str = "User:alice", name: str = "t") -> tuple[int, dict]:
    return 18, binding(principal, name).to_record_data(acl_id(n))


def remove(n: int) -> tuple[int, dict]:
    return 19, {"id": acl_id(n)}


BEGIN = (23, {"name": "txn"})
END = (24, {})
ABORT = (25, {"reason": "Controller failover"})
NOOP = (20, {})


def batch(base: int, *records: tuple[int, dict], epoch: int = 1, time: int = 1000, source: str = "seg.log",
          crc_ok: bool = True) -> Batch:
    recs = [
        Record(offset=base + i, timestamp=time, key=None, value=repr((key, data, epoch)).encode(), api_key=key,
               version=0, type_name=str(key), data=dict(data))
        for i, (key, data) in enumerate(records)
    ]
    header = BatchHeader(position=base * 100, base_offset=base, batch_length=100, partition_leader_epoch=epoch,
                         magic=2, crc=0, attributes=0, last_offset_delta=len(records) - 1, base_timestamp=time,
                         max_timestamp=time, producer_id=-1, producer_epoch=-1, base_sequence=-1,
                         records_count=len(records), crc_ok=crc_ok)
    return Batch(header, recs, source)


def snapshot_batches(acls: dict[int, AclBinding], time: int = 5000, header: bool = True,
                     footer: bool = True) -> list[Batch]:
    out = []
    if header:
        out.append(_control(0, "SNAPSHOT_HEADER", {"version": 0, "lastContainedLogTimestamp": time}))
    data = [(18, b.to_record_data(acl_id(n))) for n, b in acls.items()] or [NOOP]
    out.append(batch(1, *data, source="snap.checkpoint"))
    if footer:
        out.append(_control(1 + len(data), "SNAPSHOT_FOOTER", {"version": 0}))
    return out


def _control(offset: int, name: str, data: dict) -> Batch:
    b = batch(offset, NOOP, source="snap.checkpoint")
    r = b.records[0]
    r.api_key, r.control_type, r.type_name, r.data = None, 3 if name == "SNAPSHOT_HEADER" else 4, name, data
    return b


def kinds(result) -> list[ProblemKind]:
    return [p.kind for p in result.anomalies]


def ids(state_part: dict) -> set[int]:
    return {int(k[3:]) for k in state_part}


def test_records_apply_one_at_a_time_in_offset_order():
    r = Replayer()
    r.add_log([batch(0, add(1), time=10), batch(1, add(2), time=10), batch(2, remove(1), time=10),
               batch(3, add(3), time=20)])
    res = r.run()
    assert ids(res.state_at(0).certain) == {1}
    assert ids(res.state_at(1).certain) == {1, 2}
    assert ids(res.state_at(2).certain) == {2}
    assert ids(res.state_at(3).certain) == {2, 3}
    assert res.anomalies == []
    life1 = next(x for x in res.lifetimes if x.acl_id == acl_id(1))
    assert (life1.valid_from_offset, life1.valid_to_offset, life1.ended_by) == (0, 2, Cause.RECORD)
    assert life1.from_exact and life1.to_exact


def test_a_batch_is_published_whole_at_its_last_offset():
    """Nodes apply a batch's records in order and publish the batch whole (a CreateAcls call is one atomic batch):
    an offset inside the batch answers with the state before it, its changes are visible at its last offset."""
    r = Replayer()
    r.add_log([batch(0, add(9)), batch(1, add(1), add(2), remove(1), remove(9), add(3), time=20),
               batch(6, BEGIN, add(4)), batch(8, add(5), END, NOOP), batch(11, NOOP)])
    res = r.run()
    for offset in range(0, 5):
        assert ids(res.state_at(offset).certain) == {9}, offset
    for offset in range(5, 10):  # the transaction's records become visible with the End's batch
        assert ids(res.state_at(offset).certain) == {2, 3}, offset
    assert ids(res.state_at(10).certain) == {2, 3, 4, 5}
    assert res.anomalies == []
    events = {(e.acl_id[-1], e.change.value): (e.offset, e.record_offset, e.cause.value) for e in res.events}
    assert events[("1", "CREATE")] == (5, 1, "RECORD") and events[("9", "REMOVE")] == (5, 4, "RECORD")
    assert events[("4", "CREATE")] == (10, 7, "TRANSACTION")
    one = next(x for x in res.lifetimes if x.acl_id == acl_id(1))  # created and removed inside one batch
    assert (one.valid_from_offset, one.valid_to_offset) == (5, 5)
    assert all(acl_id(1) not in res.state_at(o).certain for o in range(12))


def test_a_high_watermark_inside_a_batch_publishes_what_it_keeps():
    r = Replayer(high_watermark=2)  # offsets 0 and 1 are kept
    r.add_log([batch(0, add(1), add(2), add(3))])
    res = r.run()
    assert ids(res.state_at(0).certain) == set() and ids(res.state_at(1).certain) == {1, 2}


def test_batches_arriving_out_of_order_are_sorted_by_offset():
    r = Replayer()
    r.add_log([batch(2, remove(1)), batch(0, add(1), NOOP)])
    res = r.run()
    assert ids(res.state_at(1).certain) == {1} and res.state_at(2).certain == {}


def test_committed_transaction_becomes_visible_at_end_offset():
    r = Replayer()
    r.add_log([batch(0, add(1)), batch(1, BEGIN, add(2, "User:bob"), remove(1), END), batch(5, NOOP)])
    res = r.run()
    for off in (1, 2, 3):
        assert ids(res.state_at(off).certain) == {1}, off
    assert ids(res.state_at(4).certain) == {2}
    created = next(e for e in res.events if e.acl_id == acl_id(2))
    assert (created.offset, created.record_offset, created.cause) == (4, 2, Cause.TRANSACTION)


def test_aborted_transaction_then_more_records_in_the_same_batch():
    # Kafka's MetadataBatchLoader leaks "carol" when Abort and later records come in one delivery; we must not.
    r = Replayer()
    r.add_log([batch(0, BEGIN, add(1, "User:carol"), ABORT, add(2, "User:dave"), NOOP)])
    res = r.run()
    assert ids(res.live_at_end()) == {2}
    assert ids(res.state_at(3).certain) == set() and ids(res.state_at(4).certain) == {2}  # the batch ends at 4
    assert all(e.acl_id != acl_id(1) for e in res.events)


def test_transaction_still_open_at_end_is_pending_and_invisible():
    r = Replayer()
    r.add_log([batch(0, add(1), BEGIN, add(2), remove(1))])
    res = r.run()
    assert ids(res.live_at_end()) == {1}
    assert kinds(res) == [ProblemKind.PENDING_TRANSACTION]
    assert res.anomalies[0].offset == 1


def test_nested_begin_end_without_begin_abort_without_begin():
    r = Replayer()
    r.add_log([batch(0, END, ABORT, BEGIN, add(1), BEGIN, add(2), END)])
    res = r.run()
    assert kinds(res) == [ProblemKind.END_WITHOUT_BEGIN, ProblemKind.ABORT_WITHOUT_BEGIN, ProblemKind.NESTED_BEGIN]
    assert ids(res.live_at_end()) == {1, 2}
    assert {e.offset for e in res.events} == {6}


def test_duplicate_id_replaces_and_is_reported():
    r = Replayer()
    r.add_log([batch(0, add(1, "User:a"), add(1, "User:a"), add(1, "User:b"))])
    res = r.run()
    assert kinds(res) == [ProblemKind.DUPLICATE_ID, ProblemKind.DUPLICATE_ID]
    assert res.live_at_end()[acl_id(1)].principal == "User:b"
    lives = [x for x in res.lifetimes if x.acl_id == acl_id(1)]
    assert [(x.valid_from_offset, x.valid_to_offset, x.binding.principal) for x in lives] == [
        (2, 2, "User:a"), (2, None, "User:b")]  # one batch: visible at its end
    assert lives[0].ended_by == Cause.REPLACE


def test_remove_of_unknown_id_changes_nothing_and_is_reported():
    r = Replayer()
    r.add_log([batch(0, add(1), remove(9), remove(1), remove(1))])
    res = r.run()
    assert kinds(res) == [ProblemKind.UNKNOWN_REMOVE, ProblemKind.UNKNOWN_REMOVE]
    assert [p.offset for p in res.anomalies] == [1, 3]
    assert res.live_at_end() == {}


def test_snapshot_agreeing_with_log_changes_nothing():
    r = Replayer()
    r.add_log([batch(0, add(1), add(2), remove(2)), batch(3, add(3))])
    r.add_snapshot(3, 1, snapshot_batches({1: binding()}))  # state after offsets 0..2
    res = r.run()
    assert res.anomalies == []
    assert all(e.cause != Cause.SNAPSHOT_LOAD for e in res.events)
    assert ids(res.state_at(3).certain) == {1, 3}


def test_snapshot_that_disagrees_with_the_log_before_it_is_a_mismatch_and_loads_atomically():
    r = Replayer()
    r.add_log([batch(0, add(1)), batch(1, add(2)), batch(2, NOOP), batch(3, add(4))])
    r.add_snapshot(3, 1, snapshot_batches({1: binding(), 3: binding("User:x")}))
    res = r.run()
    assert kinds(res) == [ProblemKind.SNAPSHOT_MISMATCH]
    assert res.anomalies[0].offset == 2
    assert ids(res.state_at(1).certain) == {1, 2}
    assert ids(res.state_at(2).certain) == {1, 3}  # never half: the whole snapshot at offset 2
    assert ids(res.state_at(3).certain) == {1, 3, 4}
    loads = [e for e in res.events if e.cause == Cause.SNAPSHOT_LOAD]
    assert {(e.acl_id, e.change.value, e.offset, e.exact) for e in loads} == {
        (acl_id(2), "REMOVE", 2, True), (acl_id(3), "CREATE", 2, True)}


def test_gap_bridged_by_snapshot_has_uncertain_bounds():
    r = Replayer()
    r.add_log([batch(0, add(1), add(2)), batch(2, *[NOOP] * 8)])  # offsets 0..9
    r.add_snapshot(20, 1, snapshot_batches({1: binding(), 3: binding("User:c")}))  # state after 0..19
    r.add_log([batch(20, add(4))])
    res = r.run()
    assert ProblemKind.SNAPSHOT_MISMATCH not in kinds(res)
    assert [c.kind for c in res.coverage] == [CoverageKind.LOG, CoverageKind.MISSING, CoverageKind.SNAPSHOT,
                                             CoverageKind.LOG]
    lives = {x.acl_id: x for x in res.lifetimes}
    one, two, three = lives[acl_id(1)], lives[acl_id(2)], lives[acl_id(3)]
    assert one.valid_to_offset is None and one.to_exact  # live before, in the snapshot: live throughout
    assert (two.valid_to_min_offset, two.valid_to_offset, two.ended_by) == (10, 19, Cause.SNAPSHOT_LOAD)
    assert (three.valid_from_min_offset, three.valid_from_offset) == (10, 19)
    mid = res.state_at(15)
    assert ids(mid.certain) == {1} and ids(mid.uncertain) == {2, 3} and not mid.covered and not mid.exact
    assert res.state_at(19).exact and ids(res.state_at(19).certain) == {1, 3}
    assert ids(res.state_at(20).certain) == {1, 3, 4}


def test_unbridged_gap_marks_everything_after_it_uncertain_until_an_exact_remove():
    r = Replayer()
    r.add_log([batch(0, add(1), add(2)), batch(10, NOOP, remove(1))])
    res = r.run()
    assert ProblemKind.GAP in kinds(res)
    after = res.state_at(10)
    assert ids(after.uncertain) == {2} and not after.complete  # id 2 may have been removed in the hole
    # the exact remove at 11 proves id 1 was live until then (ids are never reused)
    one = next(x for x in res.lifetimes if x.acl_id == acl_id(1))
    assert (one.valid_to_min_offset, one.valid_to_offset) == (11, 11)
    assert ids(res.state_at(10).certain) == {1}
    assert ids(res.state_at(12).uncertain) == {2}


def test_history_that_starts_with_a_snapshot():
    r = Replayer()
    r.add_snapshot(50, 3, snapshot_batches({1: binding()}))
    r.add_log([batch(50, remove(1)), batch(51, add(2))])
    res = r.run()
    one = next(x for x in res.lifetimes if x.acl_id == acl_id(1))
    assert (one.valid_from_min_offset, one.valid_from_offset, one.valid_to_offset) == (0, 49, 50)
    assert not res.state_at(10).covered
    assert res.state_at(49).exact and ids(res.state_at(49).certain) == {1}
    assert ids(res.state_at(51).certain) == {2}


def test_overlapping_dumps_same_bytes_are_one_record():
    r = Replayer()
    r.add_log([batch(0, add(1), add(2), source="node1.log")])
    r.add_log([batch(1, add(2), remove(1), source="node2.log")])
    res = r.run()
    assert res.anomalies == []
    assert ids(res.live_at_end()) == {2}


def test_divergent_copies_higher_epoch_wins_and_truncated_suffix_is_dropped():
    r = Replayer()
    r.add_log([batch(0, add(1), epoch=1, source="a.log"),
               batch(1, add(2, "User:stale"), add(3, "User:stale"), add(4, "User:stale"), epoch=1, source="a.log")])
    r.add_log([batch(0, add(1), epoch=1, source="b.log"), batch(1, add(5, "User:new"), epoch=2, source="b.log")])
    res = r.run()
    assert ids(res.live_at_end()) == {1, 5}
    assert kinds(res).count(ProblemKind.DIVERGENCE) == 3  # offset 1 lost, offsets 2 and 3 are its suffix


def test_committed_cut_off():
    r = Replayer(high_watermark=2)
    r.add_log([batch(0, add(1), add(2), add(3))])
    assert ids(r.run().live_at_end()) == {1, 2}


def test_time_maps_to_last_offset_at_or_before_it():
    r = Replayer()
    r.add_log([batch(0, add(1), time=100), batch(1, add(2), NOOP, time=200), batch(3, remove(1), time=300)])
    res = r.run()
    assert res.offset_at_time(99) is None
    assert res.offset_at_time(100) == 0
    assert res.offset_at_time(250) == 2
    assert ids(res.state_at_time(299).certain) == {1, 2}  # type: ignore[union-attr]
    assert ids(res.state_at_time(300).certain) == {2}  # type: ignore[union-attr]
    two = next(x for x in res.lifetimes if x.acl_id == acl_id(2))
    assert two.valid_from_time == 200


def test_bad_crc_batch_is_not_applied_and_reported():
    r = Replayer()
    r.add_log([batch(0, add(1)), batch(1, add(2), crc_ok=False), batch(2, add(3))])
    res = r.run()
    assert ProblemKind.SKIPPED_BAD_BATCH in kinds(res)
    assert acl_id(2) not in res.live_at_end()


def test_snapshot_without_header_or_footer_is_reported_and_not_loaded():
    r = Replayer()
    r.add_log([batch(0, add(1), NOOP)])
    r.add_snapshot(2, 1, snapshot_batches({2: binding()}, footer=False))
    r.add_snapshot(2, 2, snapshot_batches({2: binding()}, header=False))
    res = r.run()
    assert set(kinds(res)) == {ProblemKind.SNAPSHOT_NO_FOOTER, ProblemKind.SNAPSHOT_NO_HEADER,
                               ProblemKind.SNAPSHOT_NOT_LOADED}
    assert kinds(res).count(ProblemKind.SNAPSHOT_NOT_LOADED) == 2
    assert ids(res.live_at_end()) == {1}


def test_snapshot_with_any_decoder_problem_inside_is_not_loaded():
    from replay.kafka.model import Problem

    r = Replayer()
    r.add_log([batch(0, add(1), NOOP)])
    items = snapshot_batches({2: binding()})
    bad = Problem(ProblemKind.UNKNOWN_CODEC, "codec 7", "snap.checkpoint", 120, 1)
    r.add_snapshot(2, 1, [items[0], bad, *items[1:]], "snap.checkpoint")
    res = r.run()
    assert ProblemKind.UNKNOWN_CODEC in kinds(res)
    not_loaded = [p for p in res.anomalies if p.kind == ProblemKind.SNAPSHOT_NOT_LOADED]
    assert len(not_loaded) == 1 and "unknown_codec" in not_loaded[0].message and not_loaded[0].offset == 1
    assert ids(res.live_at_end()) == {1}  # neither id 1 removed nor id 2 added by a half-read snapshot
    assert ProblemKind.SNAPSHOT_MISMATCH not in kinds(res)


def test_retention_hole_then_complete_log_then_snapshot():
    # offsets 0..1 known, 2..9 deleted by retention, 10..20 known, snapshot at 20 (end offset 21)
    r = Replayer()
    r.add_log([batch(0, add(1), add(2)), batch(10, NOOP, NOOP, add(3, "User:c")), batch(13, *[NOOP] * 8)])
    r.add_snapshot(21, 1, snapshot_batches({1: binding(), 3: binding("User:c"), 4: binding("User:d")}))
    res = r.run()
    assert ProblemKind.SNAPSHOT_MISMATCH not in kinds(res)
    lives = {x.acl_id: x for x in res.lifetimes}
    two, four = lives[acl_id(2)], lives[acl_id(4)]
    # id 4 is in no record from 10 to 20, so it was created in the hole: certainly live from its last offset, 9
    assert (four.valid_from_min_offset, four.valid_from_offset, four.began_by) == (2, 9, Cause.SNAPSHOT_LOAD)
    # id 2 is gone at the snapshot and no record from 10 on removes it: it went in the hole
    assert (two.valid_to_min_offset, two.valid_to_offset, two.ended_by) == (2, 9, Cause.SNAPSHOT_LOAD)
    at15 = res.state_at(15)
    assert ids(at15.certain) == {1, 3, 4} and at15.uncertain == {} and at15.exact
    at5 = res.state_at(5)
    assert ids(at5.certain) == {1} and ids(at5.uncertain) == {2, 4} and not at5.covered and not at5.complete
    # an ACL nobody recorded could have been created at 2 and removed by offset 9 at the latest
    assert res.incomplete == [(2, 8)]
    assert [p.offset for p in res.anomalies if p.kind == ProblemKind.GAP] == [2]
    assert "bridges it" in next(p.message for p in res.anomalies if p.kind == ProblemKind.GAP)
    four_created = next(e for e in res.events if e.acl_id == acl_id(4))
    assert (four_created.offset_min, four_created.offset, four_created.exact, four_created.time) == (2, 9, False, None)


def test_log_that_contradicts_a_snapshot_after_a_hole_is_still_a_mismatch():
    r = Replayer()
    r.add_log([batch(0, add(1)), batch(10, NOOP, add(2)), batch(12, *[NOOP] * 9)])  # hole 1..9; id 2 created at 11
    r.add_snapshot(21, 1, snapshot_batches({1: binding()}))  # says id 2 is not live at 20: the log says it is
    res = r.run()
    mismatch = [p for p in res.anomalies if p.kind == ProblemKind.SNAPSHOT_MISMATCH]
    assert len(mismatch) == 1 and acl_id(2) in mismatch[0].message and mismatch[0].offset == 20
    two = next(x for x in res.lifetimes if x.acl_id == acl_id(2))
    assert (two.valid_from_offset, two.valid_to_min_offset, two.valid_to_offset) == (11, 20, 20)
    assert ids(res.state_at(15).certain) == {1, 2}


def test_remove_of_an_id_created_in_a_hole_makes_the_history_incomplete_until_it():
    r = Replayer()
    r.add_log([batch(0, add(1)), batch(5, NOOP, NOOP, remove(7)), batch(8, *[NOOP] * 6)])  # hole 1..4, stray remove at 7
    r.add_snapshot(13, 1, snapshot_batches({1: binding()}))
    res = r.run()
    stray = next(p for p in res.anomalies if p.kind == ProblemKind.UNKNOWN_REMOVE)
    assert stray.offset == 7 and "created in an earlier hole" in stray.message
    assert res.incomplete == [(1, 6)]  # the unknown ACL 7 was live somewhere in 1..6
    assert not res.state_at(6).complete and res.state_at(7).complete and res.state_at(12).exact


def test_a_hole_after_the_last_snapshot_leaves_the_rest_incomplete_and_ends_uncertain():
    r = Replayer()
    r.add_log([batch(0, add(1), NOOP)])
    r.add_snapshot(2, 1, snapshot_batches({1: binding()}))
    r.add_log([batch(5, add(2), NOOP)])  # hole 2..4
    res = r.run()
    assert res.incomplete == [(2, 6)]
    one = next(x for x in res.lifetimes if x.acl_id == acl_id(1))
    assert (one.valid_to_min_offset, one.valid_to_offset) == (2, None)  # may have been removed in the hole
    assert ids(res.state_at(1).certain) == {1} and ids(res.state_at(6).uncertain) == {1}
    assert "no later snapshot bridges it" in next(p.message for p in res.anomalies if p.kind == ProblemKind.GAP)


def test_time_when_append_times_go_backwards():
    # a new leader with a slower clock: times by offset are 100, 50, 300, 200, 400
    r = Replayer()
    r.add_log([batch(0, add(1), time=100), batch(1, add(2), time=50), batch(2, add(3), time=300),
               batch(3, add(4), time=200), batch(4, add(5), time=400)])
    res = r.run()
    assert res.offset_at_time(49) is None
    assert res.offset_at_time(50) == 1
    assert res.offset_at_time(250) == 3  # the last offset whose time is <= 250
    assert res.offset_at_time(1000) == 4


def test_times_come_only_from_the_chosen_copy():
    r = Replayer()
    r.add_log([batch(0, add(1), epoch=2, time=5000, source="a.log")])
    r.add_log([batch(0, add(9, "User:stale"), epoch=1, time=9999, source="b.log")])
    res = r.run()
    assert res.times == [(0, 5000)]


def test_text_and_binary_copies_with_one_epoch_are_one_record():
    # dump-log text loses bytes (control records without a value, unknown tags): same offset and epoch is the
    # same record in Raft, so the binary copy is used and nothing diverges
    r = Replayer()
    r.add_log([batch(0, add(1), NOOP, source="seg.log")])
    text_copy = batch(0, add(1), NOOP, source="dump.txt")
    text_copy.records[1].value = None
    r.add_log([text_copy], text=True)
    res = r.run()
    assert ProblemKind.DIVERGENCE not in kinds(res)
    assert ids(res.live_at_end()) == {1}


def test_two_binary_copies_with_one_epoch_but_other_bytes_are_reported_as_damage():
    r = Replayer()
    r.add_log([batch(0, add(1), NOOP, source="a.log")])
    r.add_log([batch(0, add(1), add(2), source="b.log")])
    res = r.run()
    div = [p for p in res.anomalies if p.kind == ProblemKind.DIVERGENCE]
    assert len(div) == 1 and "damaged" in div[0].message and div[0].file == "b.log" and div[0].offset == 1
    assert ids(res.live_at_end()) == {1}  # a.log sorts first


def test_event_sequence_follows_application_order():
    r = Replayer()
    r.add_log([batch(0, add(1, "User:a")), batch(1, BEGIN, add(2), remove(2), add(1, "User:b"), END)])
    res = r.run()
    order = [(e.offset, e.acl_id[-1], e.change.value, e.cause.value) for e in sorted(res.events, key=lambda e: e.seq)]
    assert order == [(0, "1", "CREATE", "RECORD"), (5, "2", "CREATE", "TRANSACTION"),
                     (5, "2", "REMOVE", "TRANSACTION"), (5, "1", "REMOVE", "REPLACE"), (5, "1", "CREATE", "REPLACE")]
    assert [e.seq for e in sorted(res.events, key=lambda e: e.seq)] == [1, 2, 3, 4, 5]


def test_transaction_begun_in_a_hole_is_closed_by_the_end_after_it():
    # offsets 0..2 are gone: Begin at 0, ACLs 1 and 2 at 1..2; the dump keeps ACL 3 at 3 and the End at 4
    r = Replayer()
    r.add_log([batch(3, add(3, "User:c"), END)])
    r.add_snapshot(5, 1, snapshot_batches({1: binding(), 2: binding(), 3: binding("User:c")}))
    res = r.run()
    assert ProblemKind.END_WITHOUT_BEGIN not in kinds(res)  # its Begin is in the hole, not missing
    assert ProblemKind.SNAPSHOT_MISMATCH not in kinds(res)
    lives = {x.acl_id: x for x in res.lifetimes}
    assert (lives[acl_id(3)].valid_from_offset, lives[acl_id(3)].began_by) == (4, Cause.TRANSACTION)
    # ACLs 1 and 2 became visible in the hole or at the End that closed their transaction
    assert (lives[acl_id(1)].valid_from_min_offset, lives[acl_id(1)].valid_from_offset) == (0, 4)
    assert res.state_at(3).certain == {} and ids(res.state_at(3).uncertain) == {1, 2}
    assert ids(res.state_at(4).certain) == {1, 2, 3}


def test_transaction_begun_in_a_hole_and_aborted_after_it_drops_the_records_after_the_hole():
    r = Replayer()
    r.add_log([batch(3, add(3), ABORT, add(4))])
    res = r.run()
    assert ProblemKind.ABORT_WITHOUT_BEGIN not in kinds(res)
    assert ids(res.live_at_end()) == {4}


def test_a_begin_after_a_hole_means_no_transaction_was_open_before_it():
    r = Replayer()
    r.add_log([batch(5, add(5)), batch(6, BEGIN, add(6), END)])
    res = r.run()
    created = {e.acl_id: e.offset for e in res.events}
    assert created == {acl_id(5): 5, acl_id(6): 8}


def test_records_held_before_a_hole_have_an_unknown_fate():
    # Begin at 0 and ACL 1 at 1 are known; the transaction's End or Abort fell in the hole 2..4
    r = Replayer()
    r.add_log([batch(0, BEGIN, add(1)), batch(5, add(2), END)])
    res = r.run()
    assert acl_id(1) not in {e.acl_id for e in res.events}  # committed in the hole, or aborted: not known
    assert ids(res.live_at_end()) == {2}
    assert ProblemKind.PENDING_TRANSACTION not in kinds(res) and ProblemKind.NESTED_BEGIN not in kinds(res)
    assert not res.state_at(5).complete  # whatever it held is unknown there
