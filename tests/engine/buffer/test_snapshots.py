"""Snapshots in both forms, and recovery from them: always the same state as a full replay."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pulsar_txn_cli.engine.buffer.log import MemoryLog
from pulsar_txn_cli.names import Position
from pulsar_txn_cli.engine.buffer.snapshots import SystemTopicStore, segment_key
from pulsar_txn_cli.errors import EngineError

from tests.engine.buffer.helpers import TOPIC, World, state, txn, visible

SEGMENT_OF_2 = len(TOPIC) + 8 + 6  # room for two aborted ids per segment (Pulsar's formula)


def _values(log):
    return [value for _, _, value, _ in SystemTopicStore(log).entries()]


def test_snapshot_after_max_transaction_count_changes():
    world = World(max_count=3, min_time=10**9)
    buffer = world.buffer()
    assert buffer.state == "NoSnapshot" and _values(world.topics.single) == []
    buffer.publish(b"plain")  # no transaction yet: nothing is counted
    buffer.publish(b"t", txn(1))  # the first transactional write takes the first snapshot
    assert buffer.state == "Ready" and len(_values(world.topics.single)) == 1
    buffer.commit(txn(1))  # moves maxReadPosition: 1
    buffer.publish(b"a")  # 2
    assert len(_values(world.topics.single)) == 1
    buffer.publish(b"b")  # 3: the count is reached
    snapshots = _values(world.topics.single)
    assert len(snapshots) == 2
    last = snapshots[-1]
    assert (last.topicName, Position(last.maxReadPositionLedgerId, last.maxReadPositionEntryId)) == (
        TOPIC,
        buffer.max_read_position,
    )


def test_snapshot_after_min_time_when_something_changed():
    """The timer fires every min_time after the load; it snapshots only when something changed."""
    world = World(max_count=1000, min_time=5000)
    buffer = world.buffer()
    buffer.publish(b"t", txn(1))
    count = len(_values(world.topics.single))
    world.clock.now += 5000
    assert not buffer.tick()  # nothing changed since the first snapshot
    buffer.commit(txn(1))
    world.clock.now += 4999
    assert not buffer.tick()  # the next period ends at 10000
    world.clock.now += 1
    assert buffer.tick()
    assert len(_values(world.topics.single)) == count + 1
    assert buffer.last_snapshot_timestamp == world.clock.now


def test_single_snapshot_holds_aborts_with_marker_positions():
    world = World(max_count=1)
    buffer = world.buffer()
    buffer.publish(b"x", txn(5))
    marker = buffer.abort(txn(5))
    last = _values(world.topics.single)[-1]
    assert [(a.txnIdMostBits, a.txnIdLeastBits, a.ledgerId, a.entryId) for a in last.aborts] == [(0, 5, *marker)]


@pytest.mark.parametrize("segmented", [False, True])
def test_recovery_from_snapshot_plus_replay_matches_full_replay(segmented):
    world = World(segmented=segmented, segment_size=SEGMENT_OF_2, max_count=4, ledger_size=4)
    buffer = world.buffer()
    for n in range(1, 12):
        buffer.publish(b"m", txn(n))
        if n % 3:
            buffer.abort(txn(n))
        else:
            buffer.commit(txn(n))
    buffer.publish(b"open", txn(50))
    buffer.publish(b"after-open")
    recovered = world.buffer()
    assert state(recovered) == state(buffer) == state(world.replayed())
    assert visible(recovered) == visible(buffer)


def test_segments_are_sealed_at_capacity_and_listed_in_the_index():
    world = World(segmented=True, segment_size=SEGMENT_OF_2, max_count=1000)
    buffer = world.buffer()
    markers = []
    for n in range(1, 6):
        buffer.publish(b"m", txn(n))
        markers.append(buffer.abort(txn(n)))
    segments = _values(world.topics.segments)
    assert [[(a.mostSigBits, a.leastSigBits) for a in s.aborts] for s in segments] == [
        [(0, 1), (0, 2)],
        [(0, 3), (0, 4)],
    ]
    assert [Position(s.persistentPositionLedgerId, s.persistentPositionEntryId) for s in segments] == [
        markers[1],
        markers[3],
    ]
    index = SystemTopicStore(world.topics.indexes).latest(TOPIC)
    assert [(i.sequenceID, Position(i.abortedMarkLedgerID, i.abortedMarkEntryID)) for i in index.indexList] == [
        (0, markers[1]),
        (1, markers[3]),
    ]
    buffer.take_snapshot()
    index = SystemTopicStore(world.topics.indexes).latest(TOPIC)
    assert [str(a) for a in index.snapshot.aborts] == ["(0,5)"]  # the unsealed id
    assert (
        Position(index.snapshot.maxReadPositionLedgerId, index.snapshot.maxReadPositionEntryId)
        == buffer.max_read_position
    )
    assert buffer.aborts.snapshot_stats(segment_stats=True) == {
        "segmentsSize": 2,
        "currentSegmentCapacity": 2,
        "unsealedAbortTxnIDSize": 1,
        "lastTookSnapshotSegmentTimestamp": world.clock.now,
        "segmentStats": [
            {"lastTxnID": "(0,2)", "persistentPosition": str(markers[1])},
            {"lastTxnID": "(0,4)", "persistentPosition": str(markers[3])},
        ],
    }


class Crash(Exception):
    """The broker dies: the write never happens."""


class DyingLog(MemoryLog):
    """A system topic whose next append fails, as if the broker died just before it."""

    def __init__(self, inner: MemoryLog):
        self.__dict__.update(inner.__dict__)
        self.dead = False

    def append(self, data):
        if self.dead:
            raise Crash()
        return super().append(data)


def test_interrupted_segmented_write_segment_written_index_not():
    """PIP-178 "write incompletely": the broker dies between a segment and its index."""
    world = World(segmented=True, segment_size=SEGMENT_OF_2, max_count=1000)
    buffer = world.buffer()
    for n in (1, 2):  # one sealed segment, indexed
        buffer.publish(b"m", txn(n))
        buffer.abort(txn(n))
    buffer.take_snapshot()
    buffer.publish(b"m", txn(3))
    buffer.abort(txn(3))
    buffer.publish(b"m", txn(4))
    world.topics.indexes = DyingLog(world.topics.indexes)
    buffer.aborts.indexes_store.log = world.topics.indexes
    world.topics.indexes.dead = True
    with pytest.raises(Crash):
        buffer.abort(txn(4))  # seals segment 1: the segment is written, the index is not
    assert len(_values(world.topics.segments)) == 2
    world.topics.indexes.dead = False

    recovered = world.buffer()
    assert state(recovered) == state(world.replayed())
    assert all(recovered.is_aborted(txn(n)) for n in (1, 2, 3, 4))
    # the orphan's key is reused: compaction would keep the newest segment of that key
    assert recovered.aborts.next_sequence >= 1
    keys = [key for _, key, _, _ in SystemTopicStore(world.topics.segments).entries()]
    assert keys[:2] == [segment_key(TOPIC, 0), segment_key(TOPIC, 1)]


def test_interrupted_write_before_any_segment_of_a_batch():
    """The broker dies before the segment: the index and replay still tell the whole story."""
    world = World(segmented=True, segment_size=SEGMENT_OF_2, max_count=1000)
    buffer = world.buffer()
    buffer.publish(b"m", txn(1))
    buffer.abort(txn(1))
    buffer.take_snapshot()
    buffer.publish(b"m", txn(2))
    world.topics.segments = DyingLog(world.topics.segments)
    buffer.aborts.segments.log = world.topics.segments
    world.topics.segments.dead = True
    with pytest.raises(Crash):
        buffer.abort(txn(2))
    world.topics.segments.dead = False
    recovered = world.buffer()
    assert recovered.is_aborted(txn(1)) and recovered.is_aborted(txn(2))
    assert state(recovered) == state(world.replayed())


def test_index_pointing_at_a_missing_segment_fails_recovery_like_the_broker():
    """A segment lost while its abort markers can still be read: Pulsar fails the topic load."""
    world = World(segmented=True, segment_size=SEGMENT_OF_2, max_count=1000)
    buffer = world.buffer()
    for n in range(1, 5):
        buffer.publish(b"m", txn(n))
        buffer.abort(txn(n))
    buffer.take_snapshot()
    first_segment = next(SystemTopicStore(world.topics.segments).entries())[0]
    world.topics.segments.drop(first_segment)
    with pytest.raises(
        EngineError, match=rf"snapshot segment {first_segment} \(sequence 0\) listed in the index is missing"
    ):
        world.buffer()


def test_switching_to_segments_recovers_from_the_single_snapshot():
    world = World(max_count=1)
    buffer = world.buffer()
    buffer.publish(b"m", txn(1))
    buffer.abort(txn(1))
    buffer.publish(b"open", txn(2))
    world.config = type(world.config)(True, SEGMENT_OF_2, 1, 5000)
    recovered = world.buffer()
    assert recovered.recovery_note == "recovered from a single (v1) snapshot"
    assert recovered.is_aborted(txn(1)) and txn(2) in recovered.ongoing
    assert state(recovered) == state(world.replayed())


def test_index_pointing_at_a_segment_of_trimmed_ledgers_is_simply_dropped():
    world = World(segmented=True, segment_size=SEGMENT_OF_2, max_count=1000, ledger_size=2)
    buffer = world.buffer()
    for n in range(1, 5):
        buffer.publish(b"m", txn(n))
        buffer.abort(txn(n))
    buffer.publish(b"tail")
    buffer.take_snapshot()
    first_segment = next(SystemTopicStore(world.topics.segments).entries())[0]
    world.topics.segments.drop(first_segment)
    index = SystemTopicStore(world.topics.indexes).latest(TOPIC).indexList[0]
    world.log.trim_before(index.abortedMarkLedgerID + 1)  # the segment's markers are gone too
    recovered = world.buffer()
    assert recovered.recovery_note == "dropped index entries of pruned segments"
    assert not recovered.is_aborted(txn(1)) and recovered.is_aborted(txn(3))
    assert [i.sequenceID for i in SystemTopicStore(world.topics.indexes).latest(TOPIC).indexList] == [1]


OPS = st.lists(
    st.tuples(st.sampled_from(["pub", "txn", "commit", "abort", "snap", "trim"]), st.integers(1, 5)), max_size=40
)


@settings(max_examples=60, deadline=None)
@given(ops=OPS, segmented=st.booleans())
def test_any_history_recovers_to_the_full_replay_state(ops, segmented):
    world = World(segmented=segmented, segment_size=SEGMENT_OF_2, max_count=3, ledger_size=3)
    buffer = world.buffer()
    ended = set()
    for op, n in ops:
        t = txn(n + 10 * len(ended))
        if op == "pub":
            buffer.publish(b"p")
        elif op == "txn" and t not in ended:
            buffer.publish(b"t", t)
        elif op in ("commit", "abort") and t in buffer.ongoing:
            getattr(buffer, op)(t)
            ended.add(t)
        elif op == "snap":
            buffer.take_snapshot()
        elif op == "trim":
            world.log.trim_before(world.log.current)
            buffer.trim_aborts()
        # the rule itself, at every step
        if buffer.ongoing:
            first = min(o.first_position for o in buffer.ongoing.values())
            # just before it: nothing stored in between (trimming may have removed the entry itself)
            assert buffer.max_read_position < first
            assert not [p for p, _ in world.log.read_after(buffer.max_read_position) if p < first]
        else:
            assert buffer.max_read_position == world.log.last_confirmed()
        for _, entry in buffer.dispatch():
            assert entry.txn not in buffer.ongoing and not buffer.is_aborted(entry.txn) if entry.txn else True
    recovered = world.buffer()
    truth = world.replayed()
    assert recovered.max_read_position == truth.max_read_position
    assert state(recovered)["ongoing"] == state(truth)["ongoing"]
    assert visible(recovered) == visible(truth)
