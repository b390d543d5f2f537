"""The downgrade oracle against hand-built engines: it reads the engine's storage, not the
verdict, and lets a copy of the engine live on with traffic and time but no operator."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.oracle import batched_ledgers, downgrade_oracle
from tests.conftest import isolate

SMALL = {
    "managedLedgerMaxEntriesPerLedger": "20",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "managedLedgerMaxLedgerRolloverTimeMinutes": "10",
    "transactionPendingAckLogIndexMinLag": "10",
}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _engine(tmp_path, batch_index: bool = False) -> Engine:
    engine = Engine.init(tmp_path / "engine", coordinators=1)
    for key, value in SMALL.items():
        engine.config.set(key, value)
    engine.config.set("acknowledgmentAtBatchIndexLevelEnabled", str(batch_index).lower())
    engine.config.set("transactionLogBatchedWriteEnabled", "true")
    engine.reload()
    return engine


def _open(engine, count: int, timeout_ms: int) -> list[int]:
    opened = []
    for _ in range(count):  # flushed together: one batched entry
        engine.tc(0).new_transaction(timeout_ms, opened.append)
    engine.checkpoint()
    return opened


def _disable(engine) -> None:
    engine.config.set("transactionLogBatchedWriteEnabled", "false")
    engine.reload()


def test_a_fresh_engine_has_nothing_batched(tmp_path):
    with Engine.init(tmp_path / "engine", coordinators=2) as engine:
        answer = downgrade_oracle(engine)
    assert answer["batchedReachable"] is False
    assert answer["progressWithoutOperator"] is True and answer["clearsWithoutOperator"] is True
    assert [log["batchedLedgerIds"] for log in answer["ledgers"]] == [[], []]


def test_batched_then_trimmed_is_not_reachable(tmp_path):
    with _engine(tmp_path) as engine:
        batched = _open(engine, 5, 1_000)
        first = batched_ledgers(engine)[0]
        assert first["batchedLedgerIds"] == [engine.tc(0).ml.current] and first["batchedEntries"] == 1
        for least in batched:
            engine.end_transaction(0, least, True, lambda pos: None)
        engine.checkpoint()
        _disable(engine)  # the batched ledger is closed, wholly consumed, and trimmed
        answer = downgrade_oracle(engine)
    assert answer["batchedReachable"] is False, answer["ledgers"]
    assert answer["ledgers"][0]["kind"] == "coordinator" and answer["ledgers"][0]["batchedLedgerIds"] == []


def test_pinned_by_an_open_transaction_is_reachable_until_it_times_out(tmp_path):
    with _engine(tmp_path, batch_index=True) as engine:
        _open(engine, 5, 600_000)
        _disable(engine)
        clock_before = engine.clock.now_ms
        answer = downgrade_oracle(engine)
        assert engine.clock.now_ms == clock_before  # the future ran on a copy
        assert batched_ledgers(engine)[0]["batchedEntries"] == 1
    assert answer["batchedReachable"] is True
    log = answer["ledgers"][0]
    assert log["reachable"] and log["toReplay"] == 1 and log["batchedLedgerIds"]
    assert answer["progressWithoutOperator"] is True and answer["clearsWithoutOperator"] is True
    assert answer["future"]["horizonMs"] > 600_000 and answer["future"]["transactions"] > 0


def test_the_batch_index_stall_is_reachable_with_no_progress(tmp_path):
    """TC batching disabled and reloaded while transactions were open, batch-index acknowledgements off:
    the records of those transactions cannot be deleted once they end, and nothing but an operator helps."""
    with _engine(tmp_path, batch_index=False) as engine:
        opened = _open(engine, 5, 3_600_000)
        _disable(engine)
        for least in opened:
            engine.end_transaction(0, least, True, lambda pos: None)
        engine.checkpoint()
        answer = downgrade_oracle(engine)
    assert answer["batchedReachable"] is True
    assert answer["progressWithoutOperator"] is False
    assert answer["clearsWithoutOperator"] is False
    assert answer["future"]["batchedLedgerIds"] == answer["ledgers"][0]["batchedLedgerIds"]


def test_batching_left_on_never_clears(tmp_path):
    with _engine(tmp_path, batch_index=True) as engine:
        _open(engine, 5, 1_000)
        answer = downgrade_oracle(engine)
    assert answer["batchedReachable"] is True and answer["clearsWithoutOperator"] is False
    assert answer["future"]["batchedLedgerIds"], "new traffic keeps writing batched entries"


def test_engine_verify_downgrade_oracle_json(cli, tmp_path):
    with _engine(tmp_path) as engine:
        opened = _open(engine, 5, 3_600_000)
        _disable(engine)
        for least in opened:
            engine.end_transaction(0, least, True, lambda pos: None)
    result = cli(["engine", "verify", "--downgrade-oracle", "--engine-dir", tmp_path / "engine", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    doc = result.json()
    assert doc["batchedReachable"] is True and doc["progressWithoutOperator"] is False
    assert {"managedLedger", "kind", "ledgerIds", "batchedLedgerIds", "reachable"} <= set(doc["ledgers"][0])
    table = cli(["engine", "verify", "--downgrade-oracle", "--engine-dir", tmp_path / "engine"])
    assert table.exit_code == 0 and "batched entries reachable: yes" in table.stdout
