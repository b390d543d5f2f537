"""`engine advance`: time passes on the engine with the broker's background work and no
client traffic: timeouts abort open transactions, aged ledgers roll over and consumed ones are trimmed."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.broker import Engine
from tests.conftest import isolate


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _open_txn(directory, timeout_ms: int) -> int:
    got = []
    with Engine.open(directory) as engine:
        engine.tc(0).new_transaction(timeout_ms, got.append)
        engine.checkpoint()
    return got[0]


def test_an_open_transaction_times_out_only_once_its_timeout_passed(cli, tmp_path):
    directory = tmp_path / "engine"
    Engine.init(directory, coordinators=1).close()
    _open_txn(directory, 10_000)
    early = cli(["engine", "advance", "9s", "--engine-dir", directory, "-o", "json"])
    assert early.exit_code == 0, early.stderr
    assert early.json()["transactionsTimedOut"] == 0 and early.json()["advancedMs"] == 9_000
    late = cli(["engine", "advance", "2s", "--engine-dir", directory, "-o", "json"]).json()
    assert late["transactionsTimedOut"] == 1
    assert late["toMs"] - late["fromMs"] == 2_000
    stats = cli(["coordinator-stats", "--engine-dir", directory, "-o", "json"]).json()
    assert stats["0"]["ongoingTxnSize"] == 0


def test_ledgers_roll_at_the_max_rollover_time_and_the_consumed_ones_are_trimmed(tmp_path):
    from pulsar_txn_cli.engine.advance import advance

    directory = tmp_path / "engine"
    with Engine.init(directory, coordinators=1) as engine:
        engine.config.set("managedLedgerMaxLedgerRolloverTimeMinutes", "60")
        engine.reload()
        got = []
        engine.tc(0).new_transaction(1_000, got.append)
        engine.checkpoint()
        first = engine.tc(0).ml.current
        short = advance(engine, 30 * 60_000)  # the transaction times out, nothing rolls yet
        assert short["transactionsTimedOut"] == 1 and short["ledgersRolled"] == 0
        assert engine.tc(0).ml.current == first
        long = advance(engine, 40 * 60_000)
        assert long["ledgersRolled"] == 1
        assert long["trimmed"] == [{"managedLedger": engine.tc(0).name, "ledgerIds": [first]}]
        assert [l.ledger_id for l in engine.tc(0).ml.ledgers] == [engine.tc(0).ml.current] != [first]


@pytest.mark.parametrize("max_minutes, min_minutes", [(60, 10), (5, 10), (60, 0)])
def test_the_next_rollover_is_the_first_instant_the_ledger_counts_as_full(tmp_path, max_minutes, min_minutes):
    """One rule: when engine advance expects a rollover is when the ledger's own check first rolls it
    (the max age, never before the min)."""
    directory = tmp_path / "engine"
    with Engine.init(directory, coordinators=1) as engine:
        engine.config.set("managedLedgerMaxLedgerRolloverTimeMinutes", str(max_minutes))
        engine.config.set("managedLedgerMinLedgerRolloverTimeMinutes", str(min_minutes))
        engine.reload()
        ml = engine.tc(0).ml
        assert ml.rollover_due_ms() is None  # an empty ledger never rolls
        engine.tc(0).new_transaction(3_600_000, lambda _: None)
        engine.checkpoint()
        due = ml.rollover_due_ms()
        expected = max(max_minutes * 60_000, min_minutes * 60_000 + 1) if min_minutes else max_minutes * 60_000
        assert due == ml._current().created_ms + expected
        engine.clock.advance_ms(due - 1 - engine.clock.now_ms)
        first = ml.current
        assert ml.roll_if_aged() is False and ml.current == first
        engine.clock.advance_ms(1)
        assert ml.roll_if_aged() is True and ml.current != first


def test_a_served_engine_advances_over_http(cli, tmp_path):
    from pulsar_txn_cli.engine import server

    directory = tmp_path / "served"
    Engine.init(directory, coordinators=1).close()
    _open_txn(directory, 5_000)
    with server.start(str(directory)) as served:
        result = cli(["engine", "advance", "1m", "--admin-url", served.url, "-o", "json"])
        assert result.exit_code == 0, result.stderr
        assert result.json()["transactionsTimedOut"] == 1 and result.json()["advancedMs"] == 60_000
        bad = cli(["engine", "advance", "400d", "--admin-url", served.url])
    assert bad.exit_code != 0 and "at most 366 days" in bad.stderr, bad.stderr


def test_a_wrong_duration_is_a_usage_error(cli, tmp_path):
    result = cli(["engine", "advance", "soon", "--engine-dir", tmp_path / "e"])
    assert result.exit_code == 2
    assert "DURATION 'soon' is not a duration" in result.stderr


def test_no_engine_is_not_created_to_let_time_pass_on(cli, tmp_path):
    result = cli(["engine", "advance", "1h", "--engine-dir", tmp_path / "typo"])
    assert result.exit_code == 2 and "no engine in" in result.stderr
    assert not (tmp_path / "typo").exists()
