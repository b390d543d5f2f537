"""Prevention at the switch on a real Pulsar 4.0.7 broker.

The session broker runs with acknowledgmentAtBatchIndexLevelEnabled at its default (false). With
batching on and a Java client holding transactions open, `set-txn-tc-batch-log --disable --yes`
must refuse (exit 6) before changing anything, print the commands that avoid the stall (the
held transactions' ids among them), and let the switch through once the transactions have ended.
The pending-ack switch goes through at once: a pending-ack log is not pinned by it
(test_pending_ack_switch_real_broker.py)."""

from __future__ import annotations

import shlex
import time

import pytest

import harness

from tests.conftest import run_cli
from tool import Tool

pytestmark = pytest.mark.integration


def _dynamic(b, key: str):
    status, values = b.rest("GET", "/admin/v2/brokers/configuration/values")
    assert status == 200, values
    return (values or {}).get(key)


def _ongoing(b) -> dict[str, int]:
    """Open transactions per coordinator. Every coordinator counts: the session broker has two once
    test_harness_smoke's scale test has run, and a client spreads its transactions over both."""
    status, stats = b.rest("GET", "/admin/v3/transactions/coordinatorStats")
    assert status == 200, stats
    return {tc: s["ongoingTxnSize"] for tc, s in stats.items()}


def _wait_ongoing(b, expected: int, timeout: float = 120) -> None:
    deadline = time.monotonic() + timeout
    while sum((seen := _ongoing(b)).values()) != expected:
        assert time.monotonic() < deadline, f"the coordinators never had exactly {expected} open transaction(s): {seen}"
        time.sleep(1)


def test_disabling_with_open_transactions_is_refused_then_allowed(pulsar_broker, tmp_path):
    b = pulsar_broker
    tool = Tool(b.admin_url, tmp_path / "state")
    # Transactions that earlier tests of the session left open (a killed client's, say) would count with
    # this test's own: the session broker starts this test with none.
    tool.run("abort-hanging", "--older-than", "1s", "--execute", "--yes", "--reason", "a clean slate for the guard")
    _wait_ongoing(b, 0)
    tool.run("set-txn-tc-batch-log", "--enable", "--reload", "--yes")
    tool.run("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes")
    b.wait_coordinators_ready()
    run = b.start_workload(seed=71, txns=2, aborts=0, ops=2, parallel=2, hold=2, prefix="guard-x")
    finished = False
    try:
        held = sorted((r["most"], r["least"]) for r in run.wait_holding(timeout=300) if r.get("outcome") == "open")
        assert len(held) == 2, held
        _wait_ongoing(b, len(held))  # the committed ones have left the coordinator

        refused = tool.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", expect=6)
        assert "2 transactions are open and acknowledgmentAtBatchIndexLevelEnabled is false" in refused.stderr
        assert "nothing was changed" in refused.stderr and refused.stdout == ""
        assert str(_dynamic(b, "transactionLogBatchedWriteEnabled")).lower() == "true"  # not switched
        # Without --reload the stores keep running batched: the pending-ack switch is no risk either way.
        passed = tool.run("set-txn-pending-ack-batch-log", "--disable", "--yes")
        assert "would pin" not in passed.stderr, passed.stderr
        assert str(_dynamic(b, "transactionPendingAckBatchedWriteEnabled")).lower() == "false"

        printed = [shlex.split(x.strip()) for x in refused.stderr.splitlines() if x.strip().startswith("pulsar-txn ")]
        aborts = {
            (int(a[a.index("-m") + 1]), int(a[a.index("-l") + 1])) for a in printed if a[1] == "abort-transaction"
        }
        assert aborts == set(held), (aborts, held)
        assert all(a[a.index("--admin-url") + 1] == b.admin_url for a in printed), printed
        listing = next(a for a in printed if a[1] == "slow-transactions")
        listed = run_cli([*listing[1:], "-o", "json"], env={"XDG_STATE_HOME": str(tmp_path / "state")})
        assert listed.exit_code == 0, listed.stderr
        assert {f"({m},{l})" for m, l in held} <= set(listed.json()), listed.stdout
        assert "pulsar-admin" not in refused.stderr and "broker.conf" in refused.stderr

        harness.finish_held(b, run, "commit")
        finished = True
        _wait_ongoing(b, 0)
        for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
            done = tool.run(command, "--disable", "--reload", "--yes")
            assert "would pin" not in done.stderr, done.stderr
        b.wait_coordinators_ready()
    finally:
        if not finished:
            harness.finish_held(b, run, "commit")
        # batching off again for the rest of the session's tests, whatever happened above
        for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
            tool.run(command, "--disable", "--reload", "--yes", "--force", expect=None)
        b.wait_coordinators_ready()
