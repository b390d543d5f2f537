"""The engine's calls into the buffer: end of transaction, simulate, metadata, config, routes.

Each test exercises the call through the engine's behaviour; none decides from the source whether
to run (a missing call is a failure).
"""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine import coordinator, simulate as simulate_module
from pulsar_txn_cli.engine.broker import Engine

TOPIC = "persistent://public/default/orders"


def _open_txn(engine, partitions) -> int:
    tc = engine.tc(0)
    got = []
    tc.new_transaction(60_000, got.append)
    engine.checkpoint()
    tc.add_partitions(got[0], list(partitions), lambda pos: None)
    engine.checkpoint()
    return got[0]


def test_abort_transaction_through_the_admin_layer_releases_readers(cli, tmp_path):
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=1)
    least = _open_txn(engine, [TOPIC])
    engine.buffers.produce(TOPIC, (0, least))
    engine.buffers.publish(TOPIC, b"plain")
    engine.close()
    assert cli(["stuck-readers", "-t", TOPIC, "--engine-dir", directory, "-o", "json"]).json()["held"] == 1
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags

    admin = connect(TargetFlags(engine_dir=str(directory)))
    try:
        admin.abort_transaction(0, least)
    finally:
        admin.close()
    after = cli(["stuck-readers", "-t", TOPIC, "--engine-dir", directory, "-o", "json"])
    assert after.exit_code == 0, after.stderr
    assert after.json()["held"] == 0


def test_simulate_drives_the_buffers(tmp_path):
    engine = Engine.init(tmp_path / "engine", coordinators=2)
    try:
        summary = simulate_module.simulate(
            engine,
            simulate_module.SimOptions(
                transactions=40, concurrency=5, topics=2, abort_ratio=0.3, timeout_ratio=0.2, seed=7
            ),
        )
        svc = engine.buffers
        assert svc.buffers, "simulate wrote no transactional message"
        for buffer in svc.buffers.values():
            assert not buffer.ongoing  # every transaction ended: committed, aborted or timed out
        assert sum(len(b.aborts) for b in svc.buffers.values()) > 0
        assert summary["aborted"] + summary["timedOut"] > 0
    finally:
        engine.close()


def test_transaction_metadata_shows_the_start_position(tmp_path):
    engine = Engine.init(tmp_path / "engine", coordinators=1)
    try:
        least = _open_txn(engine, [TOPIC])
        [position] = engine.buffers.produce(TOPIC, (0, least))
        meta = coordinator.transaction_metadata(engine, engine.tc(0).txns[least])
        assert meta["producedPartitions"][TOPIC] == {"startPosition": position, "aborted": False}
    finally:
        engine.close()


def test_engine_config_selects_segmented_snapshots(tmp_path):
    engine = Engine.init(tmp_path / "engine", coordinators=1)
    try:
        engine.config.set("transactionBufferSegmentedSnapshotEnabled", "true")
        assert engine.buffers.config.segmented
        with pytest.raises(Exception, match="non-dynamic"):
            engine.config.set("transactionBufferSnapshotSegmentSize", "1024", dynamic=True)
    finally:
        engine.close()
