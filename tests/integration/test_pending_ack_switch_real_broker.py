"""Does turning pending-ack batching off with transactions open pin a pending-ack log? On a real Pulsar 4.0.7
broker with acknowledgmentAtBatchIndexLevelEnabled=false (the session broker's default).

The TC log's stall (docs/real-broker-findings.md) comes from deletes of records inside batched entries. A
pending-ack log is trimmed differently: its store marks its cursor deleted up to a position of its sparse
index, whole entries. This test builds the case that would pin it if it stalled like the TC log: pending-ack
batching on (TC batching off, so only the pending-ack logs batch), transactions holding acknowledgements open
across the switch, the stores reopened unbatched, the transactions committed, then ordinary transactional
traffic. Every pending-ack log that held batched entries must then be trimmed past them, and the switch
itself (the README recipe's second line) must go through on this busy cluster without --force.
"""

from __future__ import annotations

import time

import pytest

import harness
from test_harness_smoke import _wait_pending_ack_effective, downgrade_check, verdict_summary
from tool import Tool

pytestmark = pytest.mark.integration

PREFIX = "pa"  # the workloads' topics are these
TOPICS = {f"{PREFIX}-orders", f"{PREFIX}plain", f"{PREFIX}-part"}


def _ongoing(b) -> int:
    status, stats = b.rest("GET", "/admin/v3/transactions/coordinatorStats")
    assert status == 200, stats
    return sum(s["ongoingTxnSize"] for s in stats.values())


def ours(item: dict) -> bool:
    """A subscription on this test's topics: the session broker also keeps those of earlier tests, idle
    ones included, whose pending-ack logs wait on acknowledgements this test does not make."""
    return item["topic"].rsplit("/", 1)[-1].split("-partition-")[0] in TOPICS


def _subscriptions_clear(b, tool: Tool, checkpoint, rounds: int) -> list[dict]:
    """`downgrade check` until every pending-ack log it holds is clear, doing between checks what its
    causes ask: a topic unload for a ledger not rolled over, and consumers that ack their backlog in
    transactions (the store trims when it appends, once the subscription's mark-delete passed its index)."""
    history = []
    for n in range(rounds):
        code, verdict = downgrade_check(tool, checkpoint)
        held = [i for i in verdict["subscriptions"] if not i["clear"] and ours(i)]
        history.append(verdict_summary(code, verdict))
        if not held:
            break
        for topic in sorted({i["topic"] for i in held if i["cause"] == "ledger-not-rolled"}):
            b.unload_topic(topic.removeprefix("persistent://"))
        b.run_workload(seed=90 + n, txns=0, aborts=0, drain=2, prefix=PREFIX)
        time.sleep(1)
    return history


@pytest.mark.timeout(900)
def test_pending_ack_logs_trim_after_a_switch_with_transactions_open(pulsar_broker, tmp_path):
    b = pulsar_broker
    tool = Tool(b.admin_url, tmp_path / "state")
    checkpoint = tmp_path / "checkpoint.json"
    tool.run("abort-hanging", "--older-than", "1s", "--execute", "--yes", "--reason", "a clean slate", expect=None)
    tool.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--force")
    tool.run("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes", "--force")
    b.wait_coordinators_ready()
    b.run_workload(seed=81, txns=12, aborts=2, ops=3, parallel=4, prefix=PREFIX)
    _wait_pending_ack_effective(tool, True)
    run = b.start_workload(seed=82, txns=4, aborts=0, ops=3, parallel=2, hold=3, prefix=PREFIX)
    finished = False
    try:
        held = [r for r in run.wait_holding(timeout=300) if r.get("outcome") == "open"]
        acked = {(op["topic"], op["sub"]) for r in held for op in r["ops"] if op["op"] == "ack"}
        assert len(held) == 3 and acked, held
        deadline = time.monotonic() + 120
        while _ongoing(b) > len(held):
            assert time.monotonic() < deadline, "the committed transactions never left the coordinators"
            time.sleep(1)
        # The README recipe's second line, on a cluster with transactions open: it goes through.
        switched = tool.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", expect=None)
        assert switched.exit_code == 0 and "would pin" not in switched.stderr, switched.stderr
        _wait_pending_ack_effective(tool, False)
        code, first = downgrade_check(tool, checkpoint)
        assert first["subscriptions"], first
        harness.finish_held(b, run, "commit")
        finished = True
        b.run_workload(seed=83, txns=20, aborts=2, ops=2, parallel=2, prefix=PREFIX)
        history = _subscriptions_clear(b, tool, checkpoint, rounds=8)
        last = history[-1]
        pinned = [h for h in last["held"] if h.get("topic") and ours(h)]
        # Every pending-ack log is trimmed past its last batched ledger, those of the subscriptions the
        # held transactions acknowledged on among them: nothing pins a pending-ack log.
        assert not pinned, history
    finally:
        if not finished:
            harness.finish_held(b, run, "commit")
        tool.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", "--force", expect=None)
        b.wait_coordinators_ready()
