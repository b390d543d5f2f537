"""The engine's transaction buffers (engine.buffers), on a real Engine (coordinators, store, clock, config)."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.broker import Engine

TOPIC = "persistent://public/default/orders"


def _open_txn(engine, tc_id=0, partitions=(TOPIC,)) -> int:
    tc = engine.tc(tc_id)
    got = []
    tc.new_transaction(60_000, got.append)
    engine.checkpoint()
    least = got[0]
    tc.add_partitions(least, list(partitions), lambda pos: None)
    engine.checkpoint()
    return least


@pytest.fixture
def engine(tmp_path):
    engine = Engine.init(tmp_path / "engine", coordinators=2)
    yield engine
    engine.close()


def test_a_transaction_through_coordinator_and_buffer(engine):
    least = _open_txn(engine)
    engine.buffers.produce(TOPIC, (0, least), count=2)
    engine.buffers.publish(TOPIC, b"plain")
    svc = engine.buffers
    buffer = svc.buffer(TOPIC)
    assert len(buffer.ongoing) == 1 and list(buffer.dispatch()) == []
    start = engine.buffers.in_buffer_stats(TOPIC, (0, least))["startPosition"]
    assert start == str(buffer.ongoing[(0, least)].first_position)
    engine.buffers.end_transaction((0, least), [TOPIC], committed=True, low_water_mark=engine.tc(0).low_water_mark())
    assert [e.payload for _, e in buffer.dispatch()] == [b"simulated", b"simulated", b"plain"]
    assert engine.buffers.in_buffer_stats("persistent://public/default/never", (0, least)) == {"aborted": False}


def test_buffer_state_survives_reopening_the_engine(tmp_path):
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=1)
    least = _open_txn(engine)
    engine.buffers.produce(TOPIC, (0, least))
    engine.buffers.publish(TOPIC, b"after")
    held = engine.buffers.buffer(TOPIC).max_read_position
    engine.close()
    engine = Engine.open(directory)
    try:
        buffer = engine.buffers.buffer(TOPIC)
        assert buffer.max_read_position == held and (0, least) in buffer.ongoing
        engine.buffers.end_transaction(f"(0,{least})", [TOPIC], committed=False)
        assert [e.payload for _, e in buffer.dispatch()] == [b"after"]
    finally:
        engine.close()


def test_config_keys_fit_the_engine_config_table():
    from pulsar_txn_cli.engine import broker_config
    from pulsar_txn_cli.engine.buffer.settings import DEFAULTS

    assert len(DEFAULTS) == 4
    for name in DEFAULTS:
        key = broker_config.KEYS[name]
        assert (
            key.default
            == {
                "transactionBufferSegmentedSnapshotEnabled": False,
                "transactionBufferSnapshotSegmentSize": 262144,
                "transactionBufferSnapshotMaxTransactionCount": 1000,
                "transactionBufferSnapshotMinTimeInMillis": 5000,
            }[name]
        )
        assert not key.dynamic


def test_snapshot_form_changes_only_at_a_broker_restart(tmp_path):
    """Not dynamic: a topic keeps the form it was loaded with until `engine reload`."""
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=1)
    engine.buffers.publish(TOPIC, b"a")
    engine.config.set("transactionBufferSegmentedSnapshotEnabled", "true")
    engine.close()
    engine = Engine.open(directory)
    assert engine.buffers.buffer(TOPIC).aborts.kind == "Single"
    engine.reload()
    engine.close()
    engine = Engine.open(directory)
    try:
        assert engine.buffers.buffer(TOPIC).aborts.kind == "Segment"
    finally:
        engine.close()


def test_a_topic_ledger_created_by_the_engine_after_a_lookup_is_used(engine):
    """in_buffer_stats looks first; the engine then creates the topic's ledger (a subscription)."""
    assert engine.buffers.in_buffer_stats(TOPIC, (0, 1)) == {"aborted": False}
    ledger = engine.topic_ledger(TOPIC)
    position = engine.buffers.publish(TOPIC, b"x")
    assert position.ledger == ledger
    assert [l.ledger_id for l in engine.buffers.log("public/default/persistent/orders").ml.ledgers] == [ledger]
