"""stuck-readers on the embedded engine, through the admin layer's in-process transport."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.broker import Engine

TOPIC = "persistent://public/default/orders"


def _open_txn(engine, tc_id: int, partitions) -> int:
    tc = engine.tc(tc_id)
    got = []
    tc.new_transaction(60_000, got.append)
    engine.checkpoint()
    tc.add_partitions(got[0], list(partitions), lambda pos: None)
    engine.checkpoint()
    return got[0]


@pytest.fixture
def held(tmp_path):
    """Partition 0 of `orders` held by (1,L1) then (0,L0); partition 1 free."""
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=2)
    engine.register_topic(TOPIC, 2)
    p0, p1 = f"{TOPIC}-partition-0", f"{TOPIC}-partition-1"
    engine.buffers.publish(p0, b"before")
    first = _open_txn(engine, 1, [p0])
    engine.buffers.produce(p0, (1, first))
    second = _open_txn(engine, 0, [p0, p1])
    engine.buffers.produce(p0, (0, second), count=2)
    engine.buffers.produce(p1, (0, second))
    engine.buffers.end_transaction((0, second), [p1], committed=True)  # p1 sees its end early
    engine.buffers.publish(p0, b"after")
    with engine.store.tx():
        engine.clock.advance_ms(90_000)  # the engine's virtual time: held for 90 s
    engine.close()
    return directory, (1, first), (0, second)


def test_engine_topic_held_by_open_transactions(cli, held):
    directory, head, other = held
    result = cli(["stuck-readers", "-t", "orders", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    report = result.json()
    assert (report["checked"], report["held"]) == (2, 1)
    [partition] = report["partitions"]
    assert partition["topic"] == f"{TOPIC}-partition-0"
    assert partition["entriesBehind"] == 4  # two transactions' three messages and one plain message
    holders = partition["holders"]
    assert holders[0]["txnId"] == "({},{})".format(*head) and holders[0]["head"]
    assert "({},{})".format(*other) in [h["txnId"] for h in holders]
    assert holders[0]["metadata"]["status"] == "OPEN"
    assert holders[0]["ageMs"] == 90_000 and partition["heldSince"] == holders[0]["openTimestamp"]
    assert f"pulsar-txn abort-transaction -m {head[0]} -l {head[1]} --engine-dir {directory}" in holders[0]["fix"]


def test_engine_namespace_and_table(cli, held):
    directory, head, _ = held
    result = cli(["stuck-readers", "-n", "public/default", "--engine-dir", directory])
    assert result.exit_code == 0, result.stderr
    assert "orders-partition-0" in result.stdout and "orders-partition-1" not in result.stdout
    assert "1 of 2 partitions held back" in result.stdout
    assert "(1m30s ago)" in result.stdout
    assert "transaction_buffer_snapshot" not in result.stdout


def test_ending_the_holders_releases_the_readers(cli, held):
    directory, head, other = held
    engine = Engine.open(directory)
    engine.buffers.end_transaction(head, [f"{TOPIC}-partition-0"], committed=False)
    engine.buffers.end_transaction(other, [f"{TOPIC}-partition-0"], committed=True)
    engine.close()
    result = cli(["stuck-readers", "-t", "orders", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json()["held"] == 0
    stats = cli(["transaction-buffer-stats", "-t", f"{TOPIC}-partition-0", "--engine-dir", directory, "-o", "json"])
    assert stats.exit_code == 0, stats.stderr
    assert stats.json()["ongoingTxnSize"] == 0 and stats.json()["state"] == "Ready"
