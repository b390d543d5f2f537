"""maxReadPosition: just before the oldest open transaction's first message, else the last position."""

from __future__ import annotations

from pulsar_txn_cli.names import Position

from tests.engine.buffer.helpers import World, txn, visible


def test_no_transactions_follows_last_position():
    buffer = World().buffer()
    last = buffer.publish(b"a")
    assert buffer.max_read_position == last
    last = buffer.publish(b"b")
    assert buffer.max_read_position == last


def test_interleaved_transactions_hold_back_readers_until_the_oldest_ends():
    buffer = World().buffer()
    before = buffer.publish(b"plain-1")
    t1_first = buffer.publish(b"t1-a", txn(1))
    buffer.publish(b"plain-2")
    t2_first = buffer.publish(b"t2-a", txn(2))
    buffer.publish(b"t1-b", txn(1))
    assert buffer.max_read_position == before  # t1's first message minus one
    assert visible(buffer) == [b"plain-1"]

    buffer.commit(txn(2))  # ending a younger transaction moves nothing
    assert buffer.max_read_position == before

    buffer.commit(txn(1))
    assert buffer.max_read_position == buffer.log.last_confirmed()  # none ongoing: the commit marker
    assert visible(buffer) == [b"plain-1", b"t1-a", b"plain-2", b"t2-a", b"t1-b"]
    assert t1_first < t2_first


def test_oldest_ongoing_decides_after_it_ends_first():
    buffer = World().buffer()
    t1_first = buffer.publish(b"t1", txn(1))
    t2_first = buffer.publish(b"t2", txn(2))
    buffer.publish(b"t3", txn(3))
    assert buffer.max_read_position == Position(t1_first.ledger, t1_first.entry - 1)
    buffer.abort(txn(1))
    assert buffer.max_read_position == Position(t2_first.ledger, t2_first.entry - 1)
    buffer.commit(txn(2))
    assert buffer.max_read_position == Position(t2_first.ledger, t2_first.entry)  # t3 starts just after t2
    assert visible(buffer) == [b"t2"]


def test_previous_position_crosses_a_ledger_boundary():
    world = World(ledger_size=2)
    buffer = world.buffer()
    first = buffer.publish(b"a")
    second = buffer.publish(b"b")
    opened = buffer.publish(b"t", txn(7))  # first entry of a new ledger
    assert opened.ledger != first.ledger and opened.entry == 0
    assert buffer.max_read_position == second


def test_transaction_opened_on_an_empty_topic_gives_minus_one():
    buffer = World().buffer()
    first = buffer.publish(b"t", txn(1))
    assert buffer.max_read_position == Position(first.ledger, -1)
    assert visible(buffer) == []
