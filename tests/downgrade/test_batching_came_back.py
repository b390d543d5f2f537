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
    assert cli(["engine", "init", "--engine-dir", directory]).exit_code == 0
    walk(cli, ["--engine-dir", directory], directory, switch)


@pytest.mark.timeout(120)
def test_the_same_walk_against_a_served_engine_by_url(cli, monkeypatch, tmp_path):
    """Every step through `--admin-url`, as against a cluster: the switches reload through unloads, the traffic
    through the served engine's workload endpoint, the checks keep their checkpoint by the target's identity."""
    from pulsar_txn_cli.engine import server

    isolate(monkeypatch, tmp_path)
    directory = tmp_path / "engine"
    Engine.init(directory).close()
    with server.start(str(directory)) as served:
        walk(cli, ["--admin-url", served.url], None, switch_with_the_tool)
    with Engine.open(directory, auto_init=False) as engine:  # as the checks found it: nothing ran since
        assert any(log["reachable"] for log in batched_ledgers(engine)), "the walk tests nothing"


def walk(cli, target, directory, switch):
    """The trial: a downgrade started, batching back on for a while and off again, then every consumer of the verdict."""
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
    if directory is not None:
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
    exported = cli(["exporter", "--once", *target]).stdout
    assert 'pulsar_txn_downgrade_verdict{verdict="WAIT"} 1.0' in exported, exported[:2000]
    assert 'pulsar_txn_downgrade_verdict{verdict="SAFE"} 0.0' in exported
