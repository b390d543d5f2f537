"""The buffer on the engine's real managed ledgers and SQLite store: writes, restarts, trimming."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.names import Position, TxnID
from pulsar_txn_cli.engine.buffer.snapshots import SystemTopicStore
from pulsar_txn_cli.engine.ledger import AddFailed

from tests.engine.buffer.engine_helpers import TOPIC, EngineParts

T1, T2, T3 = TxnID(0, 1), TxnID(0, 2), TxnID(1, 3)
SEGMENT_OF_2 = len(TOPIC) + 8 + 6


@pytest.fixture
def parts(tmp_path):
    parts = EngineParts(tmp_path / "engine")
    yield parts
    parts.close()


def _state(buffer):
    return (
        buffer.max_read_position,
        {t: o.first_position for t, o in buffer.ongoing.items()},
        [e.payload for _, e in buffer.dispatch()],
    )


def test_messages_and_markers_land_in_the_topic_managed_ledger(parts):
    svc = parts.service
    first = svc.publish(TOPIC, b"t1", T1)
    svc.publish(TOPIC, b"plain")
    svc.end(TOPIC, T1, committed=True)
    ml = svc.log("public/default/persistent/orders").ml
    assert ml.exists and ml.entries_added == 3
    buffer = svc.buffer(TOPIC)
    assert buffer.max_read_position == Position(*ml.last_confirmed())
    assert [e.payload for _, e in buffer.dispatch()] == [b"t1", b"plain"]
    assert first.entry == 0


@pytest.mark.parametrize("segmented", [False, True])
def test_restart_recovers_from_the_snapshot_topics(tmp_path, segmented):
    parts = EngineParts(
        tmp_path / "e",
        transactionBufferSegmentedSnapshotEnabled=segmented,
        transactionBufferSnapshotSegmentSize=SEGMENT_OF_2,
        transactionBufferSnapshotMaxTransactionCount=3,
    )
    svc = parts.service
    for n in range(1, 9):
        txn = TxnID(0, n)
        svc.publish(TOPIC, b"m%d" % n, txn)
        svc.end(TOPIC, txn, committed=n % 2 == 0)
    svc.publish(TOPIC, b"open", T3)
    svc.publish(TOPIC, b"later")
    before = _state(svc.buffer(TOPIC))
    parts.restart()
    recovered = parts.service.buffer(TOPIC)
    assert _state(recovered) == before
    assert recovered.max_read_position < Position(
        *parts.service.log("public/default/persistent/orders").ml.last_confirmed()
    )
    name = "public/default/persistent/" + (
        "__transaction_buffer_snapshot_indexes" if segmented else "__transaction_buffer_snapshot"
    )
    assert parts.service.log(name).ml.exists
    parts.close()


def test_interrupted_segmented_write_on_real_ledgers(tmp_path):
    parts = EngineParts(
        tmp_path / "e",
        transactionBufferSegmentedSnapshotEnabled=True,
        transactionBufferSnapshotSegmentSize=SEGMENT_OF_2,
    )
    svc = parts.service
    for n in (1, 2, 3, 4):
        svc.publish(TOPIC, b"m", TxnID(0, n))
        if n < 4:
            svc.end(TOPIC, TxnID(0, n), committed=False)
    svc.buffer(TOPIC).take_snapshot()
    indexes = svc.log("public/default/persistent/__transaction_buffer_snapshot_indexes").ml
    indexes.fail_adds = lambda data: True  # the broker dies after the segment, before the index
    with pytest.raises(AddFailed):
        svc.end(TOPIC, TxnID(0, 4), committed=False)  # seals the second segment
    segments = SystemTopicStore(svc.log("public/default/persistent/__transaction_buffer_snapshot_segments"))
    assert len(list(segments.entries())) == 2  # the second segment was stored
    parts.restart()
    recovered = parts.service.buffer(TOPIC)
    assert all(recovered.is_aborted(TxnID(0, n)) for n in (1, 2, 3, 4))
    assert list(recovered.dispatch()) == []
    assert not recovered.ongoing
    parts.close()


def test_pruning_after_the_topic_ledgers_are_trimmed(parts):
    svc = parts.service
    for n in range(1, 5):
        svc.publish(TOPIC, b"m", TxnID(0, n))
        svc.end(TOPIC, TxnID(0, n), committed=False)
    last = svc.publish(TOPIC, b"tail")
    ml = svc.log("public/default/persistent/orders").ml
    assert len(ml.ledgers) > 1
    cursor = ml.open_cursor("sub", batch_index_deletion=False)
    with parts.store.tx():
        cursor.mark_delete_to(tuple(last))  # the subscription consumed everything: old ledgers go
    assert not any(l.ledger_id == 0 for l in ml.ledgers)
    removed = svc.trim(TOPIC)
    assert removed >= 2
    buffer = svc.buffer(TOPIC)
    assert not buffer.is_aborted(TxnID(0, 1))
    parts.restart()
    assert not parts.service.buffer(TOPIC).is_aborted(TxnID(0, 1))


def test_timed_snapshot_runs_on_the_engine_clock(parts):
    """Every transactionBufferSnapshotMinTimeInMillis after the load, a snapshot if anything changed."""
    svc = parts.service
    txn = TxnID(0, 1)
    svc.publish(TOPIC, b"t", txn)  # the first transactional write takes the first snapshot
    buffer = svc.buffer(TOPIC)
    loaded = buffer.recover_end_time
    assert buffer.state == "Ready" and buffer.last_snapshot_timestamp == loaded
    svc.end(TOPIC, txn, committed=True)
    assert buffer.changes
    with parts.store.tx():
        parts.clock.advance_ms(4999)
    assert svc.tick_all() == 0
    with parts.store.tx():
        parts.clock.advance_ms(1)
    assert svc.tick_all() == 1
    assert buffer.changes == 0 and buffer.last_snapshot_timestamp == loaded + 5000
    with parts.store.tx():
        parts.clock.advance_ms(5000)
    assert svc.tick_all() == 0  # nothing changed since


def test_the_service_ends_a_transaction_on_every_partition(parts):
    svc = parts.service
    partitions = [f"{TOPIC}-partition-{i}" for i in range(2)]
    for topic in partitions:
        svc.publish(topic, b"x", "(0,1)")
    assert svc.in_buffer_stats(partitions[0], (0, 1)) == {
        "startPosition": str(svc.buffer(partitions[0]).ongoing[T1].first_position),
        "aborted": False,
    }
    markers = svc.end_transaction((0, 1), partitions, committed=False, low_water_mark=1)
    assert set(markers) == set(partitions)
    assert svc.in_buffer_stats(partitions[1], "(0,1)") == {"aborted": True}


def test_a_topic_without_transactions_has_no_snapshot(parts):
    """As on a broker: NoSnapshot until the first transactional write, which takes the first one."""
    svc = parts.service
    position = svc.publish(TOPIC, b"plain")
    buffer = svc.buffer(TOPIC)
    assert buffer.state == "NoSnapshot" and buffer.max_read_position == position
    snapshots = svc.log("public/default/persistent/__transaction_buffer_snapshot").ml
    assert not snapshots.exists
    parts.restart()
    buffer = parts.service.buffer(TOPIC)
    assert buffer.state == "NoSnapshot" and buffer.last_snapshot_timestamp == 0
    parts.service.publish(TOPIC, b"t", TxnID(0, 1))
    assert buffer.state == "Ready" and buffer.last_snapshot_timestamp == parts.clock.now_ms
    parts.restart()
    buffer = parts.service.buffer(TOPIC)
    assert buffer.state == "Ready" and buffer.last_snapshot_timestamp == 0  # none taken by this load yet
