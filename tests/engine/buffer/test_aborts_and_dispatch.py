"""Abort filtering of dispatch, pruning after trimming, and the coordinator's low-water mark."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.errors import EngineError

from tests.engine.buffer.helpers import World, state, txn, visible


def test_dispatch_skips_aborted_messages_and_markers():
    buffer = World().buffer()
    buffer.publish(b"keep-1", txn(1))
    buffer.publish(b"drop-1", txn(2))
    buffer.publish(b"plain")
    buffer.publish(b"drop-2", txn(2))
    buffer.abort(txn(2))
    buffer.publish(b"keep-2", txn(1))
    buffer.commit(txn(1))
    assert visible(buffer) == [b"keep-1", b"plain", b"keep-2"]
    assert buffer.is_aborted(txn(2)) and not buffer.is_aborted(txn(1))
    assert buffer.in_buffer_stats(txn(2)) == {"aborted": True}  # a null startPosition is left out


def test_dispatch_after_a_cursor_position():
    buffer = World().buffer()
    first = buffer.publish(b"a")
    buffer.publish(b"b")
    assert [e.payload for _, e in buffer.dispatch(after=first)] == [b"b"]


@pytest.mark.parametrize("segmented", [False, True])
def test_aborted_ids_are_pruned_when_their_marker_ledger_is_trimmed(segmented):
    world = World(segmented=segmented, segment_size=len("persistent://public/default/orders") + 8 + 6, ledger_size=3)
    buffer = world.buffer()
    for least in range(1, 7):  # each abort: one message and one marker
        buffer.publish(b"x", txn(least))
        buffer.abort(txn(least))
    buffer.publish(b"after")
    assert all(buffer.is_aborted(txn(n)) for n in range(1, 7))
    cut = buffer.log.last_confirmed().ledger
    trimmed = world.log.trim_before(cut)
    assert trimmed
    removed = buffer.trim_aborts()
    assert removed > 0
    for least in range(1, 7):
        # an id is only forgotten once nothing of it can be read any more
        if buffer.is_aborted(txn(least)):
            continue
        assert all(not (e.txn == txn(least)) for _, e in buffer.dispatch())
    assert not any(buffer.is_aborted(txn(n)) for n in range(1, 4))  # their markers were in trimmed ledgers
    # the pruned map survives a restart
    assert state(world.buffer())["aborted"] == state(buffer)["aborted"]


def test_low_water_mark_aborts_transactions_the_buffer_believes_open():
    buffer = World().buffer()
    buffer.publish(b"lost", txn(1))  # its end never reached this partition
    buffer.publish(b"other-tc", txn(1, most=1))
    buffer.publish(b"t3", txn(3))
    buffer.commit(txn(2), low_water_mark=2)  # TC 0 says everything up to 2 has ended
    assert txn(1) not in buffer.ongoing and buffer.is_aborted(txn(1))
    assert txn(1, most=1) in buffer.ongoing and txn(3) in buffer.ongoing
    assert buffer.low_water_marks == {0: 2}
    with pytest.raises(EngineError, match=r"\(0,1\) has already ended"):
        buffer.publish(b"late", txn(1))
    assert b"lost" not in visible(buffer)


def test_publishing_before_recovery_is_refused():
    from pulsar_txn_cli.engine.buffer.buffer import TransactionBuffer

    world = World()
    buffer = TransactionBuffer("t", world.log, world.topics, world.config, world.clock)
    with pytest.raises(EngineError, match="still Initializing"):
        buffer.publish(b"x")


def test_low_water_mark_of_minus_one_aborts_nothing():
    """A coordinator whose transaction 0 is still open reports -1."""
    buffer = World().buffer()
    buffer.publish(b"t0", txn(0))
    buffer.publish(b"t1", txn(1))
    buffer.commit(txn(1), low_water_mark=-1)
    assert txn(0) in buffer.ongoing and buffer.low_water_marks == {}
