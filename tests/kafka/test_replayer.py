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


def test_records_apply_one_at_a_time_in_offset_order_also_inside_a_batch():
    r = Replayer()
    r.add_log([batch(0, add(1), add(2), remove(1), time=10), batch(3, add(3), time=20)])
    res = r.run()
    assert ids(res.state_at(0).certain) == {1}
    assert ids(res.state_at(1).certain) == {1, 2}
    assert ids(res.state_at(2).certain) == {2}
    assert ids(res.state_at(3).certain) == {2, 3}
    assert res.anomalies == []
    life1 = next(x for x in res.lifetimes if x.acl_id == acl_id(1))
    assert (life1.valid_from_offset, life1.valid_to_offset, life1.ended_by) == (0, 2, Cause.RECORD)
    assert life1.from_exact and life1.to_exact


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
    assert ids(res.state_at(3).certain) == {2}
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
        (0, 2, "User:a"), (2, None, "User:b")]
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
    r.add_log([batch(0, add(1), add(2), NOOP), batch(3, add(4))])
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
    r.add_log([batch(50, remove(1), add(2))])
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
    assert set(kinds(res)) == {ProblemKind.SNAPSHOT_NO_FOOTER, ProblemKind.SNAPSHOT_NO_HEADER}
    assert ids(res.live_at_end()) == {1}
