"""Two runs sharing one state directory: each one's batch-log change record survives the other's save."""

from __future__ import annotations

import json
import subprocess
import sys

from pulsar_txn_cli.target import remembered
from tests.conftest import isolate

IDENTITY = "cluster c (http://127.0.0.1:8080)"


def test_a_save_from_a_stale_load_keeps_the_other_runs_record(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    first, second = remembered.load_changes(IDENTITY), remembered.load_changes(IDENTITY)
    first["changes"]["transactionLogBatchedWriteEnabled"] = {"value": False, "at": 1}
    second["changes"]["transactionPendingAckBatchedWriteEnabled"] = {"value": False, "at": 2}
    remembered.save_changes(IDENTITY, first, seen_as="http://127.0.0.1:8080")
    remembered.save_changes(IDENTITY, second, seen_as="http://localhost:8080")
    doc = remembered.load_changes(IDENTITY)
    assert set(doc["changes"]) == {"transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"}
    assert doc["seenAs"] == ["http://127.0.0.1:8080", "http://localhost:8080"]


WRITER = """
import sys
from pulsar_txn_cli.target import remembered
for n in range(60):
    doc = remembered.load_changes(sys.argv[1])
    doc["changes"][f"{sys.argv[2]}-{n}"] = {"value": True, "at": n}
    remembered.save_changes(sys.argv[1], doc)
"""


def test_two_processes_saving_at_once_lose_nothing_and_never_tear_the_file(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    import os

    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state")}
    procs = [
        subprocess.Popen([sys.executable, "-c", WRITER, IDENTITY, name], env=env, stderr=subprocess.PIPE, text=True)
        for name in ("a", "b")
    ]
    for proc in procs:
        assert proc.wait(120) == 0, proc.stderr.read()
    doc = json.loads(remembered.changes_path(IDENTITY).read_text())
    assert set(doc["changes"]) == {f"{w}-{n}" for w in "ab" for n in range(60)}
    assert not list(remembered.changes_path(IDENTITY).parent.glob("*.tmp"))
