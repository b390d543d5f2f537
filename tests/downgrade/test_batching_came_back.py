"""Batching back on for a while during a downgrade, then off: never SAFE while a batched entry is stored.

The operator's trial, command by command, on an engine: a downgrade started (the checkpoint recorded the
last batched ledgers), then batching went on and off again between two checks, through the tool's
switches or behind its back. The configuration then looks as it did; every consumer of the verdict
(`downgrade check`, `doctor`, the exporter) must still see the batched ledgers."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.oracle import batched_ledgers
from tests.conftest import isolate

KEYS = ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled")


def switch_with_the_tool(cli, target, on):
    for log in ("tc", "pending-ack"):
        flag = "--enable" if on else "--disable"
        result = cli([f"set-txn-{log}-batch-log", flag, "--reload", "--yes", "--force", *target])
        assert result.exit_code == 0, result.stderr


def switch_behind_its_back(cli, target, on):
    """`pulsar-admin brokers update-dynamic-config` and an unload, as another operator or automation would."""
    for key in KEYS:
        assert cli(["engine", "config", "set", key, str(on).lower(), *target]).exit_code == 0
    assert cli(["engine", "reload", *target]).exit_code == 0


@pytest.mark.timeout(120)
@pytest.mark.parametrize("switch", [switch_with_the_tool, switch_behind_its_back])
def test_batching_back_on_between_two_checks_is_never_safe(cli, monkeypatch, tmp_path, switch):
    isolate(monkeypatch, tmp_path)
    directory = tmp_path / "engine"
    target = ["--engine-dir", directory]
    assert cli(["engine", "init", *target]).exit_code == 0
    switch_with_the_tool(cli, target, True)
    assert cli(["engine", "simulate", "-n", "400", *target]).exit_code == 0
    switch_with_the_tool(cli, target, False)
    first = cli(["downgrade", "check", *target, "-o", "json"])
    assert first.json()["verdict"] == "WAIT", first.stdout  # the downgrade starts: last batched ledgers recorded
    assert cli(["engine", "simulate", "-n", "600", "--seed", "2", *target]).exit_code == 0
    switch(cli, target, True)  # someone turns it back on
    assert cli(["engine", "simulate", "-n", "200", "--seed", "3", *target]).exit_code == 0
    switch(cli, target, False)
    assert cli(["engine", "simulate", "-n", "100", "--seed", "11", *target]).exit_code == 0
    with Engine.open(directory, auto_init=False) as engine:
        stored = [log["managedLedger"] for log in batched_ledgers(engine) if log["reachable"]]
    assert stored, "the scenario must leave batched entries stored, or it tests nothing"

    check = cli(["downgrade", "check", *target, "-o", "json"])
    doc = check.json()
    assert (check.exit_code, doc["verdict"]) == (5, "WAIT"), doc["problems"]
    assert any("batching may have run since the last check" in p for p in doc["problems"]), doc["problems"]
    held = {i["topic"] for i in doc["subscriptions"] if not i["clear"]} | {
        f"coordinator {i['coordinatorId']}" for i in doc["coordinators"] if not i["clear"]
    }
    assert held, doc

    doctor = cli(["doctor", *target, "-o", "json"])
    assert doctor.exit_code in (5, 6), doctor.stdout
    assert any(f["check"] == "downgrade" for f in doctor.json()["findings"]), doctor.stdout
