"""The hooks the engine calls, on a real Engine (coordinators, store, clock, config)."""
from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.buffer import hooks
from pulsar_txn_cli.engine.engine import Engine

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
    hooks.produce(engine, TOPIC, (0, least), count=2)
    hooks.publish(engine, TOPIC, b"plain")
    svc = hooks.service(engine)
    buffer = svc.buffer(TOPIC)
    assert len(buffer.ongoing) == 1 and list(buffer.dispatch()) == []
    start = hooks.in_buffer_stats(engine, TOPIC, (0, least))["startPosition"]
    assert start == str(buffer.ongoing[(0, least)].first_position)
    hooks.on_transaction_end(engine, (0, least), [TOPIC], committed=True, low_water_mark=engine.tc(0).low_water_mark())
    assert [e.payload for _, e in buffer.dispatch()] == [b"simulated", b"simulated", b"plain"]
    assert hooks.in_buffer_stats(engine, "persistent://public/default/never", (0, least)) == {"aborted": False}


def test_buffer_state_survives_reopening_the_engine(tmp_path):
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=1)
    least = _open_txn(engine)
    hooks.produce(engine, TOPIC, (0, least))
    hooks.publish(engine, TOPIC, b"after")
    held = hooks.service(engine).buffer(TOPIC).max_read_position
    engine.close()
    engine = Engine.open(directory)
    try:
        buffer = hooks.service(engine).buffer(TOPIC)
        assert buffer.max_read_position == held and (0, least) in buffer.ongoing
        hooks.on_transaction_end(engine, f"(0,{least})", [TOPIC], committed=False)
        assert [e.payload for _, e in buffer.dispatch()] == [b"after"]
    finally:
        engine.close()


def test_config_keys_fit_the_engine_config_table():
    from pulsar_txn_cli.engine import config

    for name, type_, default, dynamic, doc in hooks.config_keys():
        key = config.Key(name, type_, default, dynamic, doc)
        assert key.default == {"transactionBufferSegmentedSnapshotEnabled": False, "transactionBufferSnapshotSegmentSize": 262144,
                               "transactionBufferSnapshotMaxTransactionCount": 1000,
                               "transactionBufferSnapshotMinTimeInMillis": 5000}[name]
        assert not key.dynamic


def test_snapshot_form_changes_only_at_a_broker_restart(tmp_path):
    """Not dynamic: a topic keeps the form it was loaded with until `engine reload`."""
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=1)
    hooks.publish(engine, TOPIC, b"a")
    engine.config.set("transactionBufferSegmentedSnapshotEnabled", "true")
    engine.close()
    engine = Engine.open(directory)
    assert hooks.service(engine).buffer(TOPIC).aborts.kind == "Single"
    engine.reload()
    engine.close()
    engine = Engine.open(directory)
    try:
        assert hooks.service(engine).buffer(TOPIC).aborts.kind == "Segment"
    finally:
        engine.close()


def test_a_topic_ledger_created_by_the_engine_after_a_lookup_is_used(engine):
    """in_buffer_stats looks first; the engine then creates the topic's ledger (a subscription)."""
    assert hooks.in_buffer_stats(engine, TOPIC, (0, 1)) == {"aborted": False}
    ledger = engine.topic_ledger(TOPIC)
    position = hooks.publish(engine, TOPIC, b"x")
    assert position.ledger == ledger
    assert [l.ledger_id for l in hooks.service(engine).log("public/default/persistent/orders").ml.ledgers] == [ledger]
