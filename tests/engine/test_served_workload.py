"""Rehearsing over HTTP: a served engine takes a workload, and a command
that finds the engine locked says so while it waits, then fails with its own exit code (7)."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests import sigint
from tests.conftest import isolate

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.simulate import SimOptions, simulate
from tests.admin.scripted import ScriptedServer

BIN = Path(sys.executable).parent
WORKLOAD = ["-n", "40", "--concurrency", "5", "--topics", "2", "--subscriptions", "3", "--seed", "5"]


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def test_a_served_engine_runs_the_same_workload_as_in_process(cli, tmp_path):
    from pulsar_txn_cli.engine import server

    local = tmp_path / "local"
    with Engine.init(local, coordinators=2) as engine:
        expected = simulate(engine, SimOptions(transactions=40, concurrency=5, topics=2, subscriptions=3, seed=5))
    Engine.init(tmp_path / "served", coordinators=2).close()
    with server.start(str(tmp_path / "served")) as served:
        result = cli(["engine", "simulate", "--admin-url", served.url, *WORKLOAD, "-o", "json"])
        assert result.exit_code == 0, result.stderr
        assert result.json() == expected
        stats = cli(["coordinator-stats", "--admin-url", served.url, "-o", "json"]).json()
    assert (
        sum(s["leastSigBits"] for s in stats.values()) > 0
    )  # the transactions reached the served engine's coordinators


def test_a_broker_takes_no_simulated_workload(cli):
    def jersey_404(request):
        return (
            404,
            {},
            {"servlet": "org.glassfish.jersey.servlet.ServletContainer", "message": "Not Found", "status": "404"},
        )

    with ScriptedServer(jersey_404) as broker:
        result = cli(["engine", "simulate", "--admin-url", broker.url, "-n", "3"])
    assert result.exit_code == 2
    assert "is not an engine served by `pulsar-txn engine serve`" in result.stderr
    assert [r.path for r in broker.requests] == ["/pulsar-txn/v1/engine/simulate"]


def test_the_ack_log_needs_the_engine_directory(cli):
    result = cli(["engine", "simulate", "--admin-url", "http://127.0.0.1:9", "--ack-log", "acks.txt"])
    assert result.exit_code == 2 and "--ack-log writes a file where the engine runs" in result.stderr


def test_while_served_a_command_says_it_waits_then_points_to_the_server(cli, tmp_path):
    directory = tmp_path / "engine"
    Engine.init(directory, coordinators=1).close()
    if not (BIN / "pulsar-txn").exists():
        pytest.fail("the pulsar-txn console script is not installed next to this Python: ./dev setup installs it")
    serving = sigint.popen(
        [str(BIN / "pulsar-txn"), "engine", "serve", "--port", "0", "--engine-dir", str(directory)],
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONUNBUFFERED": "1"},
    )
    try:
        url = None
        for line in serving.stderr:
            found = re.search(r"on (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
            if found:
                url = found.group(1)
                break
        assert url, "engine serve did not say where it listens"
        waited = cli(
            ["engine", "config", "list", "--engine-dir", directory], env={"PULSAR_TXN_ENGINE_LOCK_TIMEOUT": "0.5"}
        )
        assert waited.exit_code == 7, waited.stderr  # not 3: nothing is wrong with the data
        # The holder's command line is cut at 80 characters (the temporary directory is long).
        assert re.search(
            rf"waiting for the engine lock on {re.escape(str(directory))}, held by pid {serving.pid}, "
            rf"`pulsar-txn engine serve --port 0 --engine-dir [^`]*`, serving {re.escape(url)}; "
            r"giving up after 0\.5 s \(PULSAR_TXN_ENGINE_LOCK_TIMEOUT\)",
            waited.stderr,
        ), waited.stderr
        assert "gave up waiting for its lock after 0.5 s" in waited.stderr
        assert f"hint: the engine is served at {url}: give --admin-url {url} instead of --engine-dir" in waited.stderr
        added = cli(["engine", "simulate", "--admin-url", url, "-n", "5", "-o", "json"])
        assert added.exit_code == 0, added.stderr
        assert added.json()["committed"] + added.json()["aborted"] == 5
    finally:
        serving.send_signal(signal.SIGINT)
        serving.wait(timeout=30)
    with Engine.open(directory) as engine:  # the server stopped cleanly and kept the workload
        assert engine.tc(0).sequence == 4  # five transactions: local ids 0 to 4
