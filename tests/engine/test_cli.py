"""The `engine` command group through the real entry point."""

from __future__ import annotations

from pathlib import Path

import pytest

SIM_KEYS = {"transactions", "committed", "aborted", "timedOut", "records", "entries", "flushTriggers", "addLatencyMs"}


@pytest.fixture
def edir(tmp_path):
    return str(tmp_path / "engine")


def test_init_simulate_verify_dump_decode(cli, edir):
    r = cli(["engine", "init", "--coordinators", "2", "--cluster", "c1", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0, r.stderr
    assert r.json()["coordinators"] == 2
    r = cli(["engine", "simulate", "-n", "200", "--seed", "3", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0, r.stderr
    data = r.json()
    assert SIM_KEYS <= set(data)
    assert set(data["records"]) == {"tc", "pendingAck"} == set(data["entries"])
    assert set(data["flushTriggers"]) == {"maxRecords", "maxSize", "maxDelay", "largeData"}
    assert data["committed"] + data["aborted"] + data["timedOut"] == 200
    assert data["entries"]["tc"] == data["records"]["tc"]  # batching is off by default
    r = cli(["engine", "verify", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0 and r.json()["ok"], r.stdout
    r = cli(["engine", "dump", "--log", "tc", "--engine-dir", edir])
    assert r.exit_code == 0
    lines = r.jsonl()
    assert lines and all(l["managedLedger"].startswith("pulsar/system/persistent/__transaction_log_") for l in lines)
    decoded = cli(["decode", "-", "-o", "jsonl"], input=r.stdout)
    assert decoded.exit_code == 0, decoded.stderr
    assert len(decoded.jsonl()) == len(lines)


def test_same_seed_same_transactions_and_batching_cuts_entries(cli, tmp_path):
    results = {}
    for batch in ("false", "true"):
        edir = str(tmp_path / batch)
        cli(["engine", "init", "--engine-dir", edir])
        cli(["engine", "config", "set", "transactionLogBatchedWriteEnabled", batch, "--engine-dir", edir])
        cli(["engine", "reload", "--engine-dir", edir])
        r = cli(
            [
                "engine",
                "simulate",
                "-n",
                "400",
                "--concurrency",
                "200",
                "--seed",
                "9",
                "--engine-dir",
                edir,
                "-o",
                "json",
            ]
        )
        assert r.exit_code == 0, r.stderr
        results[batch] = r.json()
    off, on = results["false"], results["true"]
    assert (off["committed"], off["aborted"], off["records"]) == (on["committed"], on["aborted"], on["records"])
    assert on["entries"]["tc"] * 20 <= off["entries"]["tc"]
    assert on["flushTriggers"]["maxDelay"] > 0 and off["flushTriggers"]["maxDelay"] == 0


def test_auto_init_and_config_commands(cli, edir):
    # a named directory without an engine is an error (a typo), never a new engine
    r = cli(["engine", "config", "get", "transactionLogBatchedWriteEnabled", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 2 and f"no engine in {edir}" in r.stderr and not Path(edir).exists()
    # engine simulate makes one with a workload
    r = cli(["engine", "simulate", "-n", "2", "--engine-dir", edir])
    assert r.exit_code == 0 and "created a new engine" in r.stderr
    r = cli(["engine", "config", "get", "transactionLogBatchedWriteEnabled", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0 and r.json()["value"] == "false"
    r = cli(["engine", "config", "set", "transactionLogBatchedWriteMaxSize", "100", "--engine-dir", edir])
    assert (
        r.exit_code == 2
        and "'transactionLogBatchedWriteMaxSize' value must be greater than or equal to 131072" in r.stderr
    )
    r = cli(["engine", "config", "set", "transactionLogBatchedWriteEnabled", "true", "--engine-dir", edir])
    assert r.exit_code == 0  # the refused value was not stored
    r = cli(["engine", "config", "set", "nope", "1", "--engine-dir", edir])
    assert r.exit_code == 2 and "unknown broker configuration key 'nope'" in r.stderr
    r = cli(["engine", "config", "list", "--engine-dir", edir, "-o", "json"])
    rows = {row["key"]: row for row in r.json()}
    assert (
        rows["transactionLogBatchedWriteMaxSize"]["value"] == "4194304"
        and rows["transactionLogBatchedWriteEnabled"]["dynamic"]
    )


def test_metrics_are_cumulative_across_invocations(cli, edir):
    cli(["engine", "init", "--engine-dir", edir, "--cluster", "c9"])
    cli(["engine", "config", "set", "transactionLogBatchedWriteEnabled", "true", "--engine-dir", edir])
    cli(["engine", "reload", "--engine-dir", edir])
    counts = []
    for _ in range(2):
        cli(["engine", "simulate", "-n", "50", "--engine-dir", edir])
        r = cli(["engine", "metrics", "--engine-dir", edir, "-o", "json"])
        counts.append(r.json()["tc"]["batchRecords"]["sum"])
    assert 0 < counts[0] < counts[1]
    text = cli(["engine", "metrics", "--engine-dir", edir]).stdout
    assert 'pulsar_txn_tc_bufferedwriter_batch_records_sum{cluster="c9",broker="localhost"}' in text
    assert "# TYPE pulsar_txn_pending_ack_store_bufferedwriter_flush_trigger_max_delay counter" in text


def test_reload_options_and_errors(cli, edir):
    cli(["engine", "init", "--engine-dir", edir, "--coordinators", "2"])
    for flag in ("--coordinator", "--coordinator-id", "-c"):  # --coordinator-id as pulsar-admin spells it
        r = cli(["engine", "reload", flag, "1", "--engine-dir", edir, "-o", "json"])
        assert r.json() == {"reopened": ["pulsar/system/persistent/__transaction_log_1"]}, flag
    r = cli(["engine", "reload", "--coordinator", "5", "--engine-dir", edir])
    assert r.exit_code == 3 and "transaction coordinator 5 does not exist" in r.stderr
    r = cli(["engine", "dump", "-m", "nope", "--engine-dir", edir])
    assert r.exit_code == 2 and "no managed ledger named 'nope'" in r.stderr
    r = cli(["engine", "dump", "--log", "bad", "--engine-dir", edir])
    assert r.exit_code == 2 and "'bad' is not one of 'tc', 'pending-ack', 'all', 'any'" in r.stderr
    cli(["engine", "simulate", "-n", "20", "--engine-dir", edir])
    everything = {l["managedLedger"] for l in cli(["engine", "dump", "--log", "any", "--engine-dir", edir]).jsonl()}
    logs = {l["managedLedger"] for l in cli(["engine", "dump", "--engine-dir", edir]).jsonl()}
    assert logs < everything


def test_verify_and_reset_need_an_engine(cli, edir):
    r = cli(["engine", "verify", "--engine-dir", edir])
    assert r.exit_code == 2 and "engine init" in r.stderr
    cli(["engine", "init", "--engine-dir", edir])
    r = cli(["engine", "reset", "--engine-dir", edir])
    assert r.exit_code == 2 and "--yes" in r.stderr
    r = cli(["engine", "reset", "--yes", "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0 and r.json()["deleted"]
    r = cli(["engine", "init", "--engine-dir", edir])
    assert r.exit_code == 0


def test_engine_dir_from_the_environment(cli, tmp_path):
    edir = tmp_path / "from-env"
    r = cli(["engine", "init", "-o", "json"], env={"PULSAR_TXN_ENGINE_DIR": str(edir)})
    assert r.exit_code == 0 and r.json()["engineDir"] == str(edir)


def test_bad_simulate_options(cli, edir):
    r = cli(["engine", "simulate", "--abort-ratio", "1.5", "--engine-dir", edir])
    assert r.exit_code == 2 and "--abort-ratio must be between 0 and 1" in r.stderr


def test_a_file_as_engine_dir_is_one_clear_error(cli, tmp_path):
    path = tmp_path / "file"
    path.write_text("x")
    r = cli(["engine", "init", "--engine-dir", str(path)])
    assert r.exit_code == 2 and "is a file; give a directory" in r.stderr and "Traceback" not in r.stderr


def test_simulate_refuses_when_transactions_are_disabled(cli, edir):
    assert cli(["engine", "init", "--engine-dir", edir]).exit_code == 0
    cli(["engine", "config", "set", "transactionCoordinatorEnabled", "false", "--engine-dir", edir])
    r = cli(["engine", "simulate", "-n", "5", "--engine-dir", edir])
    assert r.exit_code == 3 and "transactionCoordinatorEnabled=false" in r.stderr
