"""An engine mid-downgrade with a held partition: the exporter's tests look at this one state.

Batching was on while a workload ran and is now off, so every log still holds batched
ledgers (WAIT); partition 0 of `orders` is held by an open transaction for 90 s of engine time.
"""

from __future__ import annotations

from pathlib import Path

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.simulate import SimOptions, simulate
from tests.conftest import isolate  # noqa: F401  (the exporter tests call scenario.isolate)

TOPIC = "persistent://public/default/orders"
HELD = f"{TOPIC}-partition-0"


def downgrade_in_progress(cli, directory: Path) -> Path:
    engine = Engine.init(directory, coordinators=2)
    engine.config.set("managedLedgerMaxEntriesPerLedger", "20")
    # A downgrade that finishes by itself: with batch-index deletion off, the transaction held open
    # across the switch would make it BLOCKED (the batch-index deletion stall).
    engine.config.set("acknowledgmentAtBatchIndexLevelEnabled", "true")
    engine.close()
    target = ["--engine-dir", str(directory)]
    for switch in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert cli([switch, "--enable", "--reload", "--yes", *target]).exit_code == 0
    engine = Engine.open(directory)
    simulate(engine, SimOptions(transactions=80, subscriptions=3, topics=2, seed=5))
    _hold_a_partition(engine)
    engine.close()
    for switch in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        # --force: the held partition's transaction is open across the switch on purpose
        assert cli([switch, "--disable", "--reload", "--yes", "--force", *target]).exit_code == 0
    return directory


def _hold_a_partition(engine) -> None:
    engine.register_topic(TOPIC, 2)
    tc = engine.tc(0)
    opened = []
    tc.new_transaction(3_600_000, opened.append)
    engine.checkpoint()
    tc.add_partitions(opened[0], [HELD], lambda position: None)
    engine.checkpoint()
    engine.buffers.produce(HELD, (0, opened[0]), count=2)
    engine.buffers.publish(HELD, b"after")
    with engine.store.tx():
        engine.clock.advance_ms(90_000)
