"""The fast suite's cluster for `collect`: the embedded engine served over real HTTP
(engine/server.py) after a batched workload, and a STAND-IN BookKeeper shell
(standin_bookkeeper.py: real bookies cannot run in the fast suite) that answers from its dump."""

from __future__ import annotations

import stat
import sys

import pytest

from tests.collect.fleet import STANDIN
from tests.conftest import run_cli, simulate_into


@pytest.fixture
def fleet(tmp_path, monkeypatch):
    """A served engine after a batched workload, its JSONL dump for the stand-in, and the stand-in script."""
    from pulsar_txn_cli.engine import server
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine import dump

    simulate_into(
        tmp_path / "engine", coordinators=2, transactions=60, concurrency=8, topics=2, subscriptions=2, seed=5
    )
    where = ["--engine-dir", str(tmp_path / "engine")]
    for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
        assert run_cli(["engine", "config", "set", key, "true", *where]).exit_code == 0
    assert run_cli(["engine", "reload", *where]).exit_code == 0
    assert run_cli(["engine", "simulate", "-n", "200", "--concurrency", "20", "--seed", "6", *where]).exit_code == 0
    engine = Engine.open(tmp_path / "engine")
    dump_path = tmp_path / "engine.jsonl"
    dump_path.write_text("".join(line + "\n" for line in dump.lines(engine, dump.select(engine, None, "all"))))
    script = tmp_path / "bookkeeper"
    script.write_text(f'#!/bin/sh\nexec {sys.executable} {STANDIN} "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("STANDIN_DUMP", str(dump_path))
    monkeypatch.setenv("STANDIN_CALLS", str(tmp_path / "calls.txt"))
    srv = server.start(engine=engine)
    yield {"url": srv.url, "shell": str(script), "dump": dump_path, "calls": tmp_path / "calls.txt", "tmp": tmp_path}
    srv.close()
    engine.close()
