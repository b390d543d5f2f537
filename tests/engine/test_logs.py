"""Managed ledgers, coordinators and pending-ack stores on a real engine (MLTransactionLogImpl, MLPendingAckStore and
Pulsar's tests of them)."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.coordinator import STATUS
from pulsar_txn_cli.engine.ledger import BatchedPosition
from pulsar_txn_cli.engine.verify import verify

TOPIC = "persistent://public/default/orders"


def _run(engine):
    engine.checkpoint()


def _new(engine, tc_id=0, n=1, timeout=60_000):
    got = []
    for _ in range(n):
        engine.tc(tc_id).new_transaction(timeout, got.append)
    _run(engine)
    return got


def _snapshot(tc):
    return {
        least: (STATUS[m.status], list(m.partitions), list(m.subscriptions), [tuple(p) for p in m.positions])
        for least, m in tc.txns.items()
    }


def _set_batching(engine, tc_on: bool, pa_on: bool = False):
    engine.config.set("transactionLogBatchedWriteEnabled", str(tc_on).lower())
    engine.config.set("transactionPendingAckBatchedWriteEnabled", str(pa_on).lower())


@pytest.mark.parametrize("write_batch, read_batch", [(True, True), (False, False), (True, False), (False, True)])
def test_tc_log_main_process(engine_factory, write_batch, read_batch):
    """MLTransactionLogImplTest.testMainProcess: recover into a new store, in all four modes."""
    engine = engine_factory()
    _set_batching(engine, write_batch)
    engine.reload()
    tc = engine.tc(0)
    txns = _new(engine, n=50)
    for least in txns:
        tc.add_partitions(least, [f"{TOPIC}-partition-{least % 3}"], lambda p: None)
        tc.add_subscriptions(least, [(TOPIC, f"sub-{least % 2}")], lambda p: None)
    _run(engine)
    assert tc.writer.batch_enabled is write_batch
    before = _snapshot(tc)
    if write_batch:
        assert any(p.batch_size and p.batch_size > 1 for m in tc.txns.values() for p in m.positions)
    _set_batching(engine, read_batch)
    engine.reload(coordinator=0)
    tc = engine.tc(0)
    assert tc.writer.batch_enabled is read_batch
    assert _snapshot(tc) == before  # same txnId -> positions mapping after replay
    # Commit 20 (OPEN -> COMMITTING -> COMMITTED), then recover again.
    done = []
    for least in txns[:20]:
        engine.end_transaction(0, least, True, done.append)
    _run(engine)
    assert len(done) == 20 and all(least not in tc.txns for least in txns[:20])
    after = _snapshot(tc)
    engine.reload(coordinator=0)
    replayed = _snapshot(engine.tc(0))
    if write_batch and not read_batch:
        # The batch-index deletion stall (docs/real-broker-findings.md): without batch-index deletion the deletes inside the old batched entries were
        # ignored, so the committed transactions' NEW records replay: they come back OPEN.
        assert set(replayed) == set(txns) and all(replayed[t][0] == "OPEN" for t in txns[:20])
        assert engine.tc(0).cursor.ignored_deletes > 0
    else:
        assert replayed == after
    report = verify(engine)
    assert report["ok"], report["problems"]
    assert any("batch-index deletion stall" in w for w in report["warnings"]) is (write_batch and not read_batch)


def test_committed_records_are_deleted_per_batch_index(engine_factory):
    engine = engine_factory(transactionLogBatchedWriteEnabled="true")
    tc = engine.tc(0)
    a, b = _new(engine, n=2)  # one batch of two NEW records
    assert tuple(tc.txns[a].positions[0]) == tuple(tc.txns[b].positions[0])
    key = tuple(tc.txns[a].positions[0])
    engine.end_transaction(0, a, True, lambda p: None)
    _run(engine)
    cursor = tc.cursor
    assert cursor.batch_index_deletion
    bits = cursor.deleted_batch_bits(key)
    assert bits is not None and bits & 1 == 0 and bits & 2  # a's index deleted, b's kept
    engine.end_transaction(0, b, False, lambda p: None)
    _run(engine)
    assert cursor.deleted_batch_bits(key) is None and cursor.is_deleted(key)


def test_disabling_batching_makes_old_batch_index_deletes_no_ops(engine_factory):
    """The batch-index deletion stall: after a reload without batching, deletes inside old batched entries are ignored."""
    engine = engine_factory(transactionLogBatchedWriteEnabled="true")
    txns = _new(engine, n=3)
    batched_ledger = engine.tc(0).ml.current
    _set_batching(engine, False)
    engine.reload(coordinator=0)
    tc = engine.tc(0)
    assert not tc.cursor.batch_index_deletion
    for least in txns:
        engine.end_transaction(0, least, True, lambda p: None)
    _run(engine)
    assert tc.cursor.ignored_deletes > 0
    engine.reload(coordinator=0)  # roll again: the batched ledger stays, behind a stalled cursor
    assert batched_ledger in [l.ledger_id for l in engine.tc(0).ml.ledgers]
    # Their NEW records were never deleted: the committed transactions replay as open ones.
    assert sorted(engine.tc(0).txns) == txns
    report = verify(engine)
    assert report["ok"] and any("ignored" in w for w in report["warnings"])


def test_a_running_broker_forgets_ended_transactions_whose_records_stay(engine_factory):
    """The batch-index deletion stall between CLI invocations: attaching is not a restart, so transactions ended while their
    NEW records could not be deleted stay gone; only a reopen replays them as open again."""
    from pulsar_txn_cli.engine.broker import Engine

    engine = engine_factory(transactionLogBatchedWriteEnabled="true")
    txns = _new(engine, n=3)
    _set_batching(engine, False)
    engine.reload(coordinator=0)
    for least in txns:
        engine.end_transaction(0, least, True, lambda p: None)
    _run(engine)
    assert engine.tc(0).cursor.ignored_deletes > 0 and engine.tc(0).txns == {}
    directory = engine.store.directory
    engine.close()
    with Engine.open(directory) as attached:  # the next CLI invocation
        assert attached.tc(0).txns == {}
        attached.reload(coordinator=0)  # a broker restart or TC unload
        assert sorted(attached.tc(0).txns) == txns


def test_batch_index_level_acknowledgment_keeps_deletes_working(engine_factory):
    engine = engine_factory(transactionLogBatchedWriteEnabled="true", acknowledgmentAtBatchIndexLevelEnabled="true")
    txns = _new(engine, n=3)
    batched_ledger = engine.tc(0).ml.current
    _set_batching(engine, False)
    engine.reload(coordinator=0)
    assert engine.tc(0).cursor.batch_index_deletion
    for least in txns:
        engine.end_transaction(0, least, True, lambda p: None)
    _run(engine)
    engine.reload(coordinator=0)
    assert batched_ledger not in [l.ledger_id for l in engine.tc(0).ml.ledgers]  # trimmed


def test_timeouts_abort_through_aborting(engine_factory):
    engine = engine_factory()
    tc = engine.tc(0)
    (least,) = _new(engine, timeout=100)
    engine.clock.advance_ms(50)
    assert engine.expire_transactions() == 0
    engine.clock.advance_ms(60)
    assert engine.expire_transactions() == 1
    _run(engine)
    assert least not in tc.txns


def test_max_local_txn_id_survives_trimming(engine_factory):
    engine = engine_factory()
    txns = _new(engine, n=5)
    for least in txns:
        engine.end_transaction(0, least, True, lambda p: None)
    _run(engine)
    engine.reload()
    assert engine.tc(0).ml.properties["max_local_txn_id"] == str(txns[-1])
    assert _new(engine) == [txns[-1] + 1]


@pytest.mark.parametrize("write_batch, read_batch", [(True, True), (False, False), (True, False), (False, True)])
def test_pending_ack_main_process(engine_factory, write_batch, read_batch):
    """MLPendingAckStoreTest.testMainProcess: acks, commits and aborts, index and replay."""
    engine = engine_factory(transactionPendingAckLogIndexMinLag="10")
    _set_batching(engine, False, write_batch)
    engine.reload()
    store = engine.pending_ack(TOPIC, "sub")
    assert store.writer.batch_enabled is write_batch
    start_md = store.cursor.mark_delete
    txns = _new(engine, n=30)
    for least in txns:
        store.ack(0, least, store.take_messages(2), lambda p: None)
    _run(engine)
    assert len(store.acks) == 30
    if write_batch:
        # Only the last record of each batch is indexed.
        assert all(pos.batch_size is None or pos.batch_index == pos.batch_size - 1 for _, pos in store.index)
    assert store.index
    index_before = [(k, tuple(v)) for k, v in store.index]
    _set_batching(engine, False, read_batch)
    engine.reload(topic=TOPIC)
    store = engine.pending_ack(TOPIC, "sub")
    assert len(store.acks) == 30
    replayed = [(k, tuple(v)) for k, v in store.index]
    assert [k for k, _ in replayed] == [k for k, _ in index_before] or write_batch
    for i, least in enumerate(txns):
        store.end(0, least, commit=i % 3 != 0, callback=lambda p: None)
    _run(engine)
    assert store.acks == {}
    # The subscription consumed everything: the log is mark-deleted up to the last index point.
    assert store.cursor.mark_delete > start_md
    report = verify(engine)
    assert report["ok"], report["problems"]


def test_pending_ack_never_uses_batch_index_deletion(engine_factory):
    engine = engine_factory(transactionPendingAckBatchedWriteEnabled="true")
    store = engine.pending_ack(TOPIC, "sub")
    assert store.writer.batch_enabled and not store.cursor.batch_index_deletion


def test_rollover_and_trimming(engine_factory):
    engine = engine_factory(managedLedgerMaxEntriesPerLedger="5", managedLedgerMinLedgerRolloverTimeMinutes="0")
    tc = engine.tc(0)
    first = tc.ml.current
    txns = _new(engine, n=12)
    assert len(tc.ml.ledgers) >= 3 and tc.ml.current > first
    stats = tc.internal_stats()["transactionLogStats"]["managedLedgerInternalStats"]
    assert [l["entries"] for l in stats["ledgers"][:2]] == [5, 5]
    for least in txns:
        engine.end_transaction(0, least, False, lambda p: None)
    _run(engine)
    # Every ledger wholly behind the cursor is gone; only the current one is left.
    assert [l.ledger_id for l in tc.ml.ledgers] == [tc.ml.current]
    assert verify(engine)["ok"]


def test_rollover_by_age_waits_for_the_minimum(engine_factory):
    engine = engine_factory(managedLedgerMaxEntriesPerLedger="2")  # min rollover 10 minutes
    tc = engine.tc(0)
    first = tc.ml.current
    _new(engine, n=4)
    assert tc.ml.current == first  # full, but younger than 10 minutes
    engine.clock.advance_ms(11 * 60_000)
    _new(engine, n=1)
    assert tc.ml.current != first


def test_reopen_opens_a_new_ledger_and_drops_an_empty_one(engine_factory):
    engine = engine_factory()
    before = engine.tc(0).ml.current
    engine.reload(coordinator=0)
    tc = engine.tc(0)
    assert tc.ml.current > before and before not in [l.ledger_id for l in tc.ml.ledgers]
    _new(engine)
    with_entries = tc.ml.current
    engine.reload(coordinator=0)
    assert with_entries in [l.ledger_id for l in engine.tc(0).ml.ledgers]
    stats = engine.tc(0).internal_stats()["transactionLogStats"]["managedLedgerInternalStats"]
    assert stats["lastConfirmedEntry"] == f"{engine.tc(0).ml.current}:-1"


def test_cursor_individual_deletes_and_text(tmp_path):
    from tests.engine.helpers import Rig

    rig = Rig(tmp_path / "e")
    try:
        with rig.store.tx():
            rig.ml.add_entries([b"\x08\x00"] * 6)
        cursor = rig.ml.open_cursor("c", batch_index_deletion=False)
        lid = rig.ml.current
        cursor.delete([BatchedPosition(lid, 2), BatchedPosition(lid, 3), BatchedPosition(lid, 5)])
        assert cursor.mark_delete == (lid, -1)
        assert cursor.individually_deleted_text() == f"[({lid}:1..{lid}:3], ({lid}:4..{lid}:5]]"
        assert cursor.delete([BatchedPosition(lid, 0, 4, 1)]) == 1  # ignored: no batch-index deletion
        cursor.delete([BatchedPosition(lid, 0), BatchedPosition(lid, 1)])
        assert cursor.mark_delete == (lid, 3)
        cursor.delete([BatchedPosition(lid, 4)])
        assert cursor.mark_delete == (lid, 5) and cursor.deleted == set()
    finally:
        rig.close()


def test_entries_added_in_a_transaction_are_read_and_rolled_back_with_it(tmp_path):
    """Entries rows are inserted together at the commit; a read inside the transaction still sees them,
    and a rollback drops them with everything else."""
    from tests.engine.helpers import Rig

    rig = Rig(tmp_path / "e")
    try:
        with rig.store.tx():
            rig.ml.add_entries([b"a", b"b"])
            assert [bytes(d) for _, _, d in rig.ml.read_all()] == [b"a", b"b"]
            rig.ml.add_entries([b"c"])
        assert [bytes(d) for _, _, d in rig.ml.read_all()] == [b"a", b"b", b"c"]
        with pytest.raises(RuntimeError):
            with rig.store.tx():
                rig.ml.add_entries([b"lost"])
                raise RuntimeError("refused")
        with rig.store.tx():
            pass
        assert rig.store.db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] == 3
    finally:
        rig.close()


def test_internal_stats_shape(engine_factory):
    engine = engine_factory()
    stats = engine.tc(0).internal_stats(metadata=True)
    ml = stats["transactionLogStats"]
    assert ml["managedLedgerName"] == "pulsar/system/persistent/__transaction_log_0"
    inner = ml["managedLedgerInternalStats"]
    for key, kind in [
        ("entriesAddedCounter", int),
        ("numberOfEntries", int),
        ("totalSize", int),
        ("currentLedgerEntries", int),
        ("currentLedgerSize", int),
        ("lastLedgerCreatedTimestamp", str),
        ("waitingCursorsCount", int),
        ("pendingAddEntriesCount", int),
        ("lastConfirmedEntry", str),
        ("state", str),
        ("ledgers", list),
        ("cursors", dict),
    ]:
        assert isinstance(inner[key], kind), key
    ledger = inner["ledgers"][0]
    assert set(ledger) >= {"ledgerId", "entries", "size", "offloaded", "underReplicated", "metadata"}
    cursor = inner["cursors"]["transaction.subscription"]
    assert set(cursor) >= {
        "markDeletePosition",
        "readPosition",
        "individuallyDeletedMessages",
        "messagesConsumedCounter",
        "numberOfEntriesSinceFirstNotAckedMessage",
        "totalNonContiguousDeletedMessagesRange",
        "properties",
    }


def test_verify_finds_a_damaged_log(engine_factory):
    engine = engine_factory()
    txns = _new(engine, n=3)
    assert verify(engine)["ok"]
    tc = engine.tc(0)
    lid = tc.ml.current
    engine.store.db.execute("DELETE FROM entries WHERE ledger_id=? AND entry_id=1", (lid,))
    report = verify(engine)
    assert not report["ok"]
    assert any(f"ledger {lid} records" in p for p in report["problems"])
    assert txns


def test_verify_finds_a_missing_acknowledged_transaction(engine_factory, tmp_path):
    engine = engine_factory()
    (least,) = _new(engine)
    log = tmp_path / "acked.log"
    log.write_text(f"new 0 {least}\nnew 0 {least + 100}\nend 0 7\nnew 0 7\nnew 0\n")
    report = verify(engine, str(log))
    assert report["problems"] == [f"acknowledged transaction (0,{least + 100}) is missing from its coordinator log"]


def test_a_reload_aborts_at_once_what_its_replay_brings_back_past_its_timeout(engine_factory):
    """The stall's ghosts: committed transactions whose batched NEW records replay as OPEN. Within their timeout
    they stay open after a reload; past it, the reloaded coordinator's timeout tracker (started once the replay
    is done) aborts them at once, as the real broker does (test_harness_smoke.py)."""
    engine = engine_factory(transactionLogBatchedWriteEnabled="true")
    txns = _new(engine, n=3, timeout=30_000)
    _set_batching(engine, False)
    engine.reload(coordinator=0)
    for least in txns:
        engine.end_transaction(0, least, True, lambda p: None)
    _run(engine)
    engine.reload(coordinator=0)
    assert {least: STATUS[m.status] for least, m in engine.tc(0).txns.items()} == dict.fromkeys(txns, "OPEN")
    engine.clock.advance_ms(30_001)
    engine.reload(coordinator=0)
    assert engine.tc(0).txns == {}
