"""The running-broker rule, reload, two processes, an unclean stop."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.errors import EngineBusy


def test_a_new_invocation_does_not_reopen_stores(tmp_path):
    directory = tmp_path / "e"
    engine = Engine.init(directory, coordinators=2)
    ledgers = [engine.tc(i).ml.current for i in range(2)]
    times = [engine.tc(i).stats()["recoverStartTime"] for i in range(2)]
    engine.close()
    engine = Engine.open(directory)
    try:
        assert [engine.tc(i).ml.current for i in range(2)] == ledgers
        assert [engine.tc(i).stats()["recoverStartTime"] for i in range(2)] == times
    finally:
        engine.close()


def test_a_dynamic_change_reaches_a_store_only_at_reload(tmp_path):
    directory = tmp_path / "e"
    engine = Engine.init(directory, coordinators=2)
    engine.config.set("transactionLogBatchedWriteEnabled", "true")
    engine.close()
    engine = Engine.open(directory)
    try:
        assert not engine.tc(0).writer.batch_enabled  # still as it was opened
        before = engine.tc(0).ml.current
        engine.reload(coordinator=0)
        assert engine.tc(0).writer.batch_enabled and engine.tc(0).ml.current > before
        assert not engine.tc(1).writer.batch_enabled  # not reloaded
    finally:
        engine.close()
    engine = Engine.open(directory)
    try:
        assert engine.tc(0).writer.batch_enabled and not engine.tc(1).writer.batch_enabled
    finally:
        engine.close()


def test_reload_of_a_topic_reopens_its_pending_ack_stores_only(tmp_path):
    engine = Engine.init(tmp_path / "e", coordinators=1)
    try:
        a = engine.pending_ack("persistent://public/default/a", "s")
        b = engine.pending_ack("persistent://public/default/b", "s")
        la, lb = a.ml.current, b.ml.current
        engine.config.set("transactionPendingAckBatchedWriteEnabled", "true")
        reopened = engine.reload(topic="persistent://public/default/a")
        assert reopened == [a.name]
        assert engine.pending_ack("persistent://public/default/a", "s").writer.batch_enabled
        assert engine.pending_ack("persistent://public/default/a", "s").ml.current > la
        assert engine.pending_ack("persistent://public/default/b", "s").ml.current == lb
    finally:
        engine.close()


def test_config_validation_and_layers(tmp_path):
    from pulsar_txn_cli.errors import UsageError

    engine = Engine.init(tmp_path / "e")
    try:
        # checked when set, whatever the switch says, naming the key at fault
        with pytest.raises(
            UsageError, match="'transactionLogBatchedWriteMaxRecords' value must be greater than or equal to 10, not 5"
        ):
            engine.config.set("transactionLogBatchedWriteMaxRecords", "5")
        assert engine.config.get("transactionLogBatchedWriteMaxRecords") == 512
        engine.config.set("transactionLogBatchedWriteMaxRecords", "10")
        assert engine.config.set("transactionLogBatchedWriteEnabled", "true") == "dynamic"
        assert engine.config.overrides() == {"transactionLogBatchedWriteEnabled": "true"}
        assert engine.config.runtime()["transactionLogBatchedWriteMaxRecords"] == "10"
        with pytest.raises(UsageError, match="unknown"):
            engine.config.set("noSuchKey", "1")
        with pytest.raises(UsageError, match="true or false"):
            engine.config.set("transactionPendingAckBatchedWriteEnabled", "yes")
    finally:
        engine.close()


def test_a_second_process_waits_then_fails_clearly(tmp_path, monkeypatch):
    directory = tmp_path / "e"
    Engine.init(directory).close()
    script = textwrap.dedent(f"""
        import sys, time
        from pulsar_txn_cli.engine.broker import Engine
        e = Engine.open({str(directory)!r})
        print("locked", flush=True)
        sys.stdin.readline()
        e.close()
    """)
    holder = subprocess.Popen([sys.executable, "-c", script], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "locked"
        monkeypatch.setenv("PULSAR_TXN_ENGINE_LOCK_TIMEOUT", "0.2")
        with pytest.raises(EngineBusy, match=f"in use by another process \\(pid {holder.pid}\\b"):
            Engine.open(directory)
    finally:
        holder.stdin.write("\n")
        holder.stdin.flush()
        holder.wait(timeout=30)
    Engine.open(directory).close()  # free again


def test_an_unclean_stop_is_a_broker_restart(tmp_path):
    directory = tmp_path / "e"
    Engine.init(directory, coordinators=1).close()
    script = textwrap.dedent(f"""
        import os
        from pulsar_txn_cli.engine.broker import Engine
        e = Engine.open({str(directory)!r})
        got = []
        e.tc(0).new_transaction(60000, got.append)
        e.checkpoint()
        print(e.tc(0).ml.current, got[0], flush=True)
        os._exit(9)  # dies without closing
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    ledger, least = map(int, out.stdout.split())
    engine = Engine.open(directory)
    try:
        assert engine.unclean
        tc = engine.tc(0)
        assert tc.ml.current > ledger and least in tc.txns  # reopened, and the txn survived
    finally:
        engine.close()
    engine = Engine.open(directory)
    try:
        assert not engine.unclean
    finally:
        engine.close()


def test_reload_of_a_partitioned_topic_reopens_every_partition(tmp_path):
    engine = Engine.init(tmp_path / "e", coordinators=1)
    try:
        engine.register_topic("persistent://public/default/p", 2)
        stores = [engine.pending_ack(f"persistent://public/default/p-partition-{i}", "s") for i in range(2)]
        reopened = engine.reload(topic="persistent://public/default/p")
        assert sorted(reopened) == sorted(s.name for s in stores)
    finally:
        engine.close()


def test_an_interrupted_command_is_a_crash_not_a_clean_stop(tmp_path):
    directory = tmp_path / "e"
    engine = Engine.init(directory)
    engine.config.set("transactionLogBatchedWriteEnabled", "true")
    engine.reload()
    engine.close()
    with pytest.raises(KeyboardInterrupt):
        with Engine.open(directory) as engine:
            engine.tc(0).new_transaction(1000, lambda least: None)
            raise KeyboardInterrupt
    engine = Engine.open(directory)
    try:
        assert engine.unclean and engine.tc(0).txns == {}  # the buffered NEW was never acknowledged
    finally:
        engine.close()


def test_a_bad_stored_batch_setting_names_itself_and_blocks_only_the_enable(tmp_path):
    """A value stored before validation existed (or through another door) blocks enabling its
    group with the key at fault named, and never an unrelated `config set`."""
    from pulsar_txn_cli.errors import UsageError

    engine = Engine.init(tmp_path / "e")
    try:
        with engine.store.tx():
            engine.store.db.execute(
                "INSERT INTO config(key, value) VALUES('transactionPendingAckBatchedWriteMaxSize', '100')"
            )
        assert engine.config.set("transactionLogBatchedWriteMaxDelayInMillis", "5") == "static"
        assert engine.config.set("transactionLogBatchedWriteEnabled", "true") == "dynamic"  # the other group
        with pytest.raises(
            UsageError,
            match="transactionPendingAckBatchedWriteEnabled: Configuration field "
            "'transactionPendingAckBatchedWriteMaxSize' value must be greater than or equal to 131072, not 100",
        ):
            engine.config.set("transactionPendingAckBatchedWriteEnabled", "true")
        with pytest.raises(UsageError, match="must not be negative"):
            engine.config.set("transactionLogBatchedWriteMaxDelayInMillis", "-1")
    finally:
        engine.close()


def test_an_engine_made_with_the_earlier_entries_table_runs_as_before(cli, tmp_path):
    """Engines made before 2026-11-26 hold `entries` WITHOUT ROWID; the schema's IF NOT EXISTS keeps that
    table, and every read, write and delete is the same SQL on either kind."""
    import sqlite3

    edir = tmp_path / "e"
    assert cli(["engine", "init", "--engine-dir", edir]).exit_code == 0
    db = sqlite3.connect(edir / "engine.db")
    db.executescript(
        """
        CREATE TABLE old_entries (ledger_id INTEGER NOT NULL, entry_id INTEGER NOT NULL, data BLOB NOT NULL,
          PRIMARY KEY (ledger_id, entry_id)) WITHOUT ROWID;
        INSERT INTO old_entries SELECT ledger_id, entry_id, data FROM entries;
        DROP TABLE entries;
        ALTER TABLE old_entries RENAME TO entries;
        """
    )
    db.close()
    for step in (
        ["set-txn-tc-batch-log", "--enable", "--reload", "--yes"],
        ["engine", "simulate", "-n", "300"],
        ["engine", "advance", "5h"],  # ledgers roll over, and those behind every cursor are trimmed
        ["engine", "simulate", "-n", "300"],
        ["engine", "advance", "5h"],
        ["engine", "verify"],
    ):
        result = cli([*step, "--engine-dir", edir, "-o", "json"])
        assert result.exit_code == 0, (step, result.stderr)
        if step[1] == "advance":
            assert result.json()["ledgersTrimmed"] > 0  # entries deleted from the old table too
    db = sqlite3.connect(edir / "engine.db")
    try:
        (sql,) = db.execute("SELECT sql FROM sqlite_master WHERE name = 'entries'").fetchone()
        assert "WITHOUT ROWID" in sql  # kept, not rebuilt
        assert db.execute("SELECT COUNT(*) FROM entries").fetchone()[0] > 0
    finally:
        db.close()
