"""Smoke tests proving the real-broker harness works, plus the batch-index deletion stall
experiment (docs/real-broker-findings.md).

Entries are checked with plain Python byte checks here (the project's decoder is not used). The
experiment switches batching with `pulsar-txn set-txn-*-batch-log` and walks `pulsar-txn downgrade
check` from WAIT to SAFE (or to the batch-index deletion stall) on its own brokers.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

import harness
from harness import start_broker_or_fail
from tool import Tool

pytestmark = pytest.mark.integration

MAGIC = b"\x0e\x01\x00\x01"  # PIP-160 batched entry prefix: magic 0x0E01 + version 1
TC_LOG = "pulsar/system/persistent/__transaction_log_0"


# ----------------------------------------------------------------------------- helpers


def ml_stats(stats: dict) -> dict:
    inner = stats.get("transactionLogStats") or stats.get("pendingAckLogStats")
    return inner["managedLedgerInternalStats"]


def ledger_ids(stats: dict) -> list[int]:
    return [lg["ledgerId"] for lg in ml_stats(stats)["ledgers"]]


def pos(s: str) -> tuple[int, int]:
    a, b = s.split(":")
    return int(a), int(b)


def read_entries(broker: harness.PulsarBroker, ledgers, after: tuple[int, int] | None = None):
    out = []
    # Ledger ids grow: a ledger older than AFTER's holds nothing after it (each read starts a JVM, and the
    # session broker's TC log holds every earlier test's ledgers).
    for lid in [lid for lid in ledgers if after is None or lid >= after[0]]:
        for l_id, e_id, payload in harness.parse_readledger(broker.readledger(lid)):
            if after is None or (l_id, e_id) > after:
                out.append((l_id, e_id, payload))
    return out


def set_batching(broker: harness.PulsarBroker, enabled: bool) -> None:
    broker.set_dynamic_config("transactionLogBatchedWriteEnabled", enabled)
    broker.set_dynamic_config("transactionPendingAckBatchedWriteEnabled", enabled)


def unload_workload_topics(broker: harness.PulsarBroker, prefix: str) -> None:
    """Unload the workload's topics so their pending-ack stores reopen with the current config."""
    for t in (f"{prefix}-orders", f"{prefix}plain", f"{prefix}-part"):
        broker.unload_topic(f"public/default/{t}")


# ----------------------------------------------------------------------------- basic


def test_broker_starts_with_transactions(pulsar_broker):
    st, runtime = pulsar_broker.rest("GET", "/admin/v2/brokers/configuration/runtime")
    assert st == 200
    assert runtime["transactionCoordinatorEnabled"] == "true"
    assert runtime["systemTopicEnabled"] == "true"
    # The session broker is shared: an earlier test may have unloaded a coordinator, and a real broker loads
    # one again only when a transactional client connects (docs/real-broker-findings.md), which this does.
    pulsar_broker.wait_coordinators_ready()
    st, stats = pulsar_broker.rest("GET", "/admin/v3/transactions/coordinatorStats")
    assert st == 200 and stats and all(v["state"] == "Ready" for v in stats.values())
    st, coords = pulsar_broker.rest("GET", "/admin/v3/transactions/coordinators")
    assert st == 200 and [c["id"] for c in coords] == sorted(int(k) for k in stats)
    assert pulsar_broker.start_seconds is not None
    print(f"broker start: {pulsar_broker.start_seconds:.1f}s")


def test_workload_commits_and_aborts(pulsar_broker):
    lines = pulsar_broker.run_workload(seed=7, txns=8, aborts=3, ops=3, parallel=2, prefix="smoke")
    done = lines[-1]
    assert done["event"] == "done" and done["committed"] == 5 and done["aborted"] == 3
    txns = [r for r in lines if r.get("event") == "txn"]
    assert len({(r["most"], r["least"]) for r in txns}) == 8
    ops = {op["op"] for r in txns for op in r["ops"]}
    assert ops == {"produce", "ack"}
    topics = {op["topic"] for r in txns for op in r["ops"]}
    assert any("-partition-" in t for t in topics)
    # finished transactions are gone from the coordinator
    most, least = txns[0]["most"], txns[0]["least"]
    st, _ = pulsar_broker.rest("GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    assert st == 404
    st, stats = pulsar_broker.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")
    assert st == 200 and stats["state"] == "Ready" and stats["ongoingTxnSize"] == 0


def test_batched_prefix_present_then_absent_after_disable_and_reload(pulsar_broker):
    b = pulsar_broker
    prefix = "magic"
    # --- batching on: reload the coordinator (unload of its TC-assign partition) and the topics
    set_batching(b, True)
    b.reload_coordinators()
    unload_workload_topics(b, prefix)
    tc_before = ml_stats(b.tc_internal_stats(0))["lastConfirmedEntry"]
    b.run_workload(seed=21, txns=16, aborts=4, ops=4, parallel=8, prefix=prefix)
    tc_stats = b.tc_internal_stats(0)
    batched_phase = [e for e in read_entries(b, ledger_ids(tc_stats), after=pos(tc_before))]
    assert batched_phase, "no TC log entries written"
    assert all(p.startswith(MAGIC) for _, _, p in batched_phase), "TC log not batched after reload"
    assert max(harness.batch_size(p) for _, _, p in batched_phase) > 1, "no batch with more than one record"

    pa = b.pending_ack_internal_stats(f"public/default/{prefix}-orders", "sub-a")
    pa_entries = read_entries(b, ledger_ids(pa))
    # Pending-ack store name carries the subscription name with its '-'
    assert ml_stats(pa) and pa["pendingAckLogStats"]["managedLedgerName"].endswith(
        f"{prefix}-orders-sub-a__transaction_pending_ack"
    )
    assert any(p.startswith(MAGIC) for _, _, p in pa_entries), "pending-ack log not batched"

    # --- batching off: reload again; new entries carry no prefix
    # (marks taken before the unload: an unloaded topic answers 404 "Topic not found" to
    # pendingAckInternalStats until a client loads it again)
    tc_mark = ml_stats(b.tc_internal_stats(0))["lastConfirmedEntry"]
    pa_mark = ml_stats(b.pending_ack_internal_stats(f"public/default/{prefix}-orders", "sub-a"))["lastConfirmedEntry"]
    set_batching(b, False)
    b.reload_coordinators()
    unload_workload_topics(b, prefix)
    b.run_workload(seed=22, txns=10, aborts=2, ops=4, parallel=8, prefix=prefix)
    after = read_entries(b, ledger_ids(b.tc_internal_stats(0)), after=pos(tc_mark))
    assert after and not any(p.startswith(MAGIC[:2]) for _, _, p in after)
    assert all(p[0] == 0x08 for _, _, p in after)  # protobuf field 1 varint
    pa2 = b.pending_ack_internal_stats(f"public/default/{prefix}-orders", "sub-a")
    pa_after = read_entries(b, ledger_ids(pa2), after=pos(pa_mark))
    assert not any(p.startswith(MAGIC[:2]) for _, _, p in pa_after)


def test_error_answers(pulsar_broker):
    b = pulsar_broker
    b.run_workload(seed=3, txns=1, aborts=0, ops=2, prefix="err")
    st, body = b.rest("GET", "/admin/v3/transactions/pendingAckInternalStats/public/default/err-orders/nosuchsub")
    assert st == 404, body
    st, body = b.rest("POST", "/admin/v2/brokers/configuration/transactionLogBatchedWriteMaxRecords/20")
    assert st == 412 and "non-dynamic" in body["reason"]


def test_restart_keeps_coordinator(pulsar_broker):
    if os.environ.get("PULSAR_TXN_IT_SKIP_RESTART") == "1":
        pytest.skip("restart test disabled by PULSAR_TXN_IT_SKIP_RESTART")
    b = pulsar_broker
    before = b.tc_internal_stats(0)["transactionLogStats"]["managedLedgerName"]
    b.restart()
    assert b.tc_internal_stats(0)["transactionLogStats"]["managedLedgerName"] == before
    lines = b.run_workload(seed=5, txns=2, aborts=1, ops=2, prefix="restart")
    assert lines[-1]["committed"] == 1


def test_scale_to_two_coordinators(pulsar_broker):
    """Standalone starts with one coordinator; the scale endpoint adds more (runs last on the session broker)."""
    b = pulsar_broker
    st, body = b.rest("POST", "/admin/v3/transactions/transactionCoordinator/replicas", body=2)
    assert st == 204, (st, body)
    st, meta = b.rest("GET", "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions")
    assert meta["partitions"] == 2
    stats = b.wait_coordinators_ready()
    assert sorted(stats) == ["0", "1"]
    st, coords = b.rest("GET", "/admin/v3/transactions/coordinators")
    assert sorted(c["id"] for c in coords) == [0, 1]
    lines = b.run_workload(seed=9, txns=6, aborts=2, ops=2, parallel=2, prefix="scale")
    assert {r["most"] for r in lines if r.get("event") == "txn"} == {0, 1}
    st, body = b.rest("POST", "/admin/v3/transactions/transactionCoordinator/replicas", body=1)
    assert st == 406, (st, body)  # scale-down refused


# ----------------------------------------------------------------------------- the batch-index deletion stall


EXPERIMENT_CONF = {
    "managedLedgerMaxEntriesPerLedger": 10,
    "defaultRetentionTimeInMinutes": 0,
    "defaultRetentionSizeInMB": 0,
}


def switch_batching(b: harness.PulsarBroker, tool: Tool, enabled: bool, force: bool = False) -> None:
    """Through pulsar-txn (so it records the moment of the change and can judge where it is effective),
    then reopen the coordinators the way the harness does (unload + a transactional client's ping)."""
    word = "--enable" if enabled else "--disable"
    extra = ["--force"] if force else []
    tool.run("set-txn-tc-batch-log", word, "--yes", *extra)
    tool.run("set-txn-pending-ack-batch-log", word, "--yes", *extra)
    _wait_runtime(b, enabled)
    b.reload_coordinators()


def _wait_runtime(b: harness.PulsarBroker, enabled: bool, timeout: float = 30) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        runtime = b.rest("GET", "/admin/v2/brokers/configuration/runtime")[1]
        if all(
            runtime.get(k) == str(enabled).lower()
            for k in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled")
        ):
            return
        time.sleep(0.5)
    raise AssertionError(f"the runtime configuration never showed batching {enabled}")


def _wait_pending_ack_effective(tool: Tool, enabled: bool, timeout: float = 90) -> dict:
    """Until every transactional subscription's store reopened with the setting (clients reconnect)."""
    deadline = time.monotonic() + timeout
    stat = {}
    while time.monotonic() < deadline:
        stat = tool.json("get-txn-pending-ack-batch-log-stat")
        if stat["subscriptions"] and all(s["effective"] is enabled for s in stat["subscriptions"]):
            return stat
        time.sleep(2)
    raise AssertionError(f"pending-ack batching never effectively {enabled}: {json.dumps(stat)[:3000]}")


def downgrade_check(tool: Tool, checkpoint: Path) -> tuple[int, dict]:
    result = tool.run("downgrade", "check", "--checkpoint", checkpoint, "-o", "json", expect=(0, 5, 6))
    return result.exit_code, result.json()


def verdict_summary(code: int, verdict: dict) -> dict:
    items = verdict["coordinators"] + verdict["subscriptions"]
    return {
        "exit": code,
        "verdict": verdict["verdict"],
        "problems": verdict["problems"][:5],
        "held": [
            {
                k: i.get(k)
                for k in (
                    "coordinatorId",
                    "topic",
                    "subscription",
                    "oldestLedgerId",
                    "lastBatchedLedgerId",
                    "cause",
                    "markDeletePosition",
                )
            }
            for i in items
            if not i["clear"]
        ],
    }


def walk_to_safe(b: harness.PulsarBroker, tool: Tool, checkpoint: Path, rounds: int = 6) -> list[dict]:
    """`downgrade check` until SAFE, doing what its causes ask between checks: a reload of a store whose
    last batched ledger has not rolled over yet (the tool's own advice), and consumers that ack their
    backlog in transactions (a pending-ack log is trimmed only once its subscription's mark-delete
    passes it, and only when the store appends: the workload's --drain mode)."""
    history = []
    for n in range(rounds):
        code, verdict = downgrade_check(tool, checkpoint)
        history.append(verdict_summary(code, verdict))
        if verdict["verdict"] != "WAIT":
            break
        held = [i for i in verdict["coordinators"] + verdict["subscriptions"] if not i["clear"]]
        if any(i.get("coordinatorId") is not None and i["cause"] == "ledger-not-rolled" for i in held):
            b.reload_coordinators()
        for topic in sorted({i["topic"] for i in held if i.get("topic") and i["cause"] == "ledger-not-rolled"}):
            b.unload_topic(topic.removeprefix("persistent://"))
        b.run_workload(seed=60 + n, txns=0, aborts=0, drain=2, prefix="dg")
        time.sleep(1)
    return history


def downgrade_experiment(b: harness.PulsarBroker, tool: Tool, checkpoint: Path) -> dict:
    """Batching on -> batches>1 incl. txns held open -> batching off + TC reload -> finish held txns
    -> more workload across several rollovers -> are the batched TC-log ledgers trimmed?

    Folded in: the downgrade walk of `pulsar-txn downgrade check` on the same broker (right after the
    switch WAIT, or BLOCKED when batch-index acknowledgements are off and transactions are open across
    it; then SAFE, or BLOCKED on the batch-index deletion stall of docs/real-broker-findings.md until
    the remedy, then SAFE)."""
    obs: dict = {"ackAtBatchIndexLevel": b.broker_conf().get("acknowledgmentAtBatchIndexLevelEnabled", False)}
    switch_batching(b, tool, True)
    run = b.start_workload(seed=33, txns=12, aborts=3, ops=3, parallel=8, hold=4, prefix="dg")
    held_lines = run.wait_holding(timeout=300)
    s = ml_stats(b.tc_internal_stats(0))
    batched_ledgers = [lg["ledgerId"] for lg in s["ledgers"]]
    obs["phase1_ledgers"] = batched_ledgers
    obs["phase1_markDelete"] = s["cursors"]["transaction.subscription"]["markDeletePosition"]
    entries = read_entries(b, batched_ledgers)
    obs["phase1_batch_sizes"] = {f"{l}:{e}": harness.batch_size(p) for l, e, p in entries}
    obs["held_txns"] = [[r["most"], r["least"]] for r in held_lines if r.get("outcome") == "open"]

    # The client's commit returns once COMMITTING is logged; the coordinator writes COMMITTED after
    # the topics have applied it. The switch (and its reload) comes once the committed transactions
    # have left the coordinator, so that only the held ones are open across it.
    deadline = time.monotonic() + 120
    while b.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")[1]["ongoingTxnSize"] > len(
        obs["held_txns"]
    ):
        assert time.monotonic() < deadline, "committed transactions never left the coordinator"
        time.sleep(1)
    # The experiment builds the stall on purpose: without batch-index acks the tool refuses the
    # switch while transactions are open (exit 6, test_switch_guard_real_broker.py); forced here.
    refused = tool.run("set-txn-tc-batch-log", "--disable", "--yes", expect=(0, 6))
    obs["switch_refused"] = refused.exit_code == 6
    switch_batching(b, tool, False, force=True)
    s = ml_stats(b.tc_internal_stats(0))
    obs["after_reload_markDelete"] = s["cursors"]["transaction.subscription"]["markDeletePosition"]
    obs["after_reload_ongoing"] = b.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")[1][
        "ongoingTxnSize"
    ]
    # Seen on 4.0.7 with either acknowledgement setting: the reload replays a transaction that had
    # committed before the switch as OPEN (docs/real-broker-findings.md); it stays open until aborted.
    obs["resurrected_at_switch"] = sorted(set(open_txns(b)) - set(held_ids(obs)))
    # the pending-ack stores reopen too (unload of the topics; the held clients reconnect)
    tool.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", "--force")
    _wait_pending_ack_effective(tool, False)
    code, verdict = downgrade_check(tool, checkpoint)
    obs["check_after_switch"] = verdict_summary(code, verdict)
    obs["check_after_switch_tc"] = verdict["coordinators"]
    final = run.finish("commit", timeout=300)
    obs["held_finished"] = [
        r["outcome"]
        for r in final
        if r.get("event") == "txn" and [r["most"], r["least"]] in obs["held_txns"] and r["outcome"] != "open"
    ]
    b.run_workload(seed=34, txns=20, aborts=4, ops=2, parallel=1, prefix="dg")
    time.sleep(3)
    b.run_workload(seed=35, txns=3, aborts=0, ops=1, parallel=1, prefix="dg")  # nudge trim after rollover
    obs["final_ongoing"] = settled_ongoing(b, len(obs["resurrected_at_switch"]))
    s = ml_stats(b.tc_internal_stats(0))
    cur = s["cursors"]["transaction.subscription"]
    obs["final_ledgers"] = [lg["ledgerId"] for lg in s["ledgers"]]
    obs["final_markDelete"] = cur["markDeletePosition"]
    obs["final_individuallyDeleted"] = cur["individuallyDeletedMessages"]
    obs["final_lastConfirmed"] = s["lastConfirmedEntry"]
    obs["batched_ledgers_still_present"] = sorted(set(batched_ledgers) & set(obs["final_ledgers"]))
    obs["stalled"] = bool(obs["batched_ledgers_still_present"])
    t0 = time.monotonic()
    obs["walk"] = walk_to_safe(b, tool, checkpoint, rounds=6 if not obs["stalled"] else 2)
    obs["walk_seconds"] = round(time.monotonic() - t0, 1)
    code, verdict = downgrade_check(tool, checkpoint)
    obs["final_check"] = verdict_summary(code, verdict)
    obs["final_check_tc"] = verdict["coordinators"]
    batch_index_acks = str(obs["ackAtBatchIndexLevel"]).lower() == "true"
    if obs["stalled"] and batch_index_acks:
        resurrect_walk(b, tool, checkpoint, obs)
    elif obs["stalled"]:
        # What a coordinator reload replays from a pinned log: the cursor skips the individually
        # deleted (unbatched) end records but not the batched NEW records of the held transactions.
        b.reload_coordinators()
        st = b.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")[1]
        obs["after_final_reload_ongoing"] = st["ongoingTxnSize"]
        obs["after_final_reload_slow"] = open_txns(b)
        code, verdict = downgrade_check(tool, checkpoint)
        obs["after_final_reload_check"] = verdict_summary(code, verdict)
        obs["after_final_reload_check_tc"] = verdict["coordinators"]
        release_stall(b, tool, checkpoint, obs)
    return obs


def held_ids(obs: dict) -> list[str]:
    return sorted(f"({m},{l})" for m, l in obs["held_txns"])


def open_txns(b: harness.PulsarBroker) -> list[str]:
    """The coordinator's open transactions, as `(most,least)` ids."""
    return sorted(b.rest("GET", "/admin/v3/transactions/slowTransactions/1")[1] or {})


def settled_ongoing(b: harness.PulsarBroker, expected: int, timeout: float = 60) -> int:
    """The coordinator's open-transaction count once it reaches `expected`, or after `timeout`: a
    client's commit returns once COMMITTING is logged, and COMMITTED follows when the topics have
    applied it, later on a loaded machine."""
    deadline = time.monotonic() + timeout
    while True:
        ongoing = b.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")[1]["ongoingTxnSize"]
        if ongoing <= expected or time.monotonic() > deadline:
            return ongoing
        time.sleep(1)


def resurrect_walk(b: harness.PulsarBroker, tool: Tool, checkpoint: Path, obs: dict) -> None:
    """Seen on 4.0.7 in some runs even with batch-index acknowledgements: the switch's coordinator
    reload replays a transaction that had committed before it as OPEN (its records shared a batched
    entry with a held transaction's), and it pins the log. The tool says WAIT, cause open-transaction;
    its advice is to list the slow transactions and abort them, which then leads to SAFE."""
    slow = tool.json("slow-transactions", "-t", "1s")
    obs["resurrected"] = sorted(slow)
    obs["resurrected_aborts"] = [
        tool.run("abort-transaction", txn_id, "--yes", expect=None).exit_code for txn_id in sorted(slow)
    ]
    b.run_workload(seed=36, txns=3, aborts=0, ops=1, parallel=1, prefix="dg")  # the cursor moves on an append
    obs["after_resurrected_walk"] = walk_to_safe(b, tool, checkpoint, rounds=6)


# The tool's remedy for the batch-index deletion stall: batch-index acknowledgements on.
REMEDY_CONF = {"acknowledgmentAtBatchIndexLevelEnabled": "true"}


def release_stall(b: harness.PulsarBroker, tool: Tool, checkpoint: Path, obs: dict) -> None:
    """The tool's advice for the stall: restart with acknowledgmentAtBatchIndexLevelEnabled=true; the
    resurrected transactions are open again then, and the tool's advice for them is to abort them."""
    b.restart(REMEDY_CONF)
    s = ml_stats(b.tc_internal_stats(0))
    obs["after_restart_markDelete"] = s["cursors"]["transaction.subscription"]["markDeletePosition"]
    obs["after_restart_ongoing"] = b.rest("GET", "/admin/v3/transactions/coordinatorStats?coordinatorId=0")[1][
        "ongoingTxnSize"
    ]
    # the advice for open transactions: abort each that the listing before the restart showed (the
    # held ones, and any the switch resurrected); listing again right after a restart can wait
    # out the tool's timeout while the coordinator recovers
    obs["aborts"] = [abort_held(b, tool, txn_id, obs) for txn_id in obs["after_final_reload_slow"]]
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        s = ml_stats(b.tc_internal_stats(0))
        ledgers = [lg["ledgerId"] for lg in s["ledgers"]]
        if not set(obs["phase1_ledgers"]) & set(ledgers):
            break
        time.sleep(2)
    obs["after_aborts_markDelete"] = s["cursors"]["transaction.subscription"]["markDeletePosition"]
    obs["after_aborts_ledgers"] = ledgers
    code, verdict = downgrade_check(tool, checkpoint)
    obs["after_aborts_check"] = verdict_summary(code, verdict)
    obs["after_aborts_check_tc"] = verdict["coordinators"]
    # The rest of the downgrade as the tool's causes ask (the pending-ack logs drain with their
    # subscriptions' consumers): SAFE.
    obs["after_remedy_walk"] = walk_to_safe(b, tool, checkpoint, rounds=6)


def abort_held(b: harness.PulsarBroker, tool: Tool, txn_id: str, obs: dict) -> int:
    """`abort-transaction` for one resurrected transaction; its exit code. Seen once on this VM: after
    the restart, a topic's transaction buffer never finished recovering, the abort waited on it and
    the tool gave up after 30 s (exit 4) with the broker's log silent. Then, as an operator would, it
    restarts the broker once and asks again, unless the abort went through before the restart."""
    first = tool.run("abort-transaction", txn_id, "--yes", expect=(0, 4))
    if first.exit_code == 0:
        return 0
    obs.setdefault("abort_retries", []).append(f"{txn_id}: {first.stderr.strip()[-200:]}")
    b.restart(REMEDY_CONF)
    most, least = txn_id.strip("()").split(",")
    status, meta = b.rest("GET", f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    if status == 404 or (status == 200 and meta.get("status") in ("ABORTING", "ABORTED")):
        return 0  # the first request's abort had reached the coordinator's log
    return tool.run("abort-transaction", txn_id, "--yes", "--request-timeout", "120", expect=None).exit_code


def _record(name: str, obs: dict) -> None:
    out = Path(os.environ.get("PULSAR_TXN_IT_RESULTS", "/tmp/pulsar-txn-it-results"))
    out.mkdir(parents=True, exist_ok=True)
    (out / f"{name}.json").write_text(json.dumps(obs, indent=1))
    print(json.dumps(obs, indent=1))


def _experiment_on_its_own_broker(conf: dict, name: str, tmp_path: Path) -> tuple[harness.PulsarBroker, dict]:
    """(broker, observations) of downgrade_experiment on a broker of its own. Run once more on a fresh broker
    when the first one stopped answering writes (BookKeeper's "Bookie operation timeout" in its log: seen in a
    cold CI run, the held workload's acks and commits then time out; a Java-level deadlock of the broker's own,
    harness.java_deadlock, is one cause), or closed a topic whose transaction buffer could not recover
    (harness.BUFFER_RECOVERY_FAILED: its commits then fail): not what the test checks, and it does not end by
    itself. The retry is reported with its cause (harness.note_retry)."""
    for attempt in (1, 2):
        b = start_broker_or_fail(conf, name=name)
        try:
            tool = Tool(b.admin_url, tmp_path / f"state-{attempt}")
            return b, downgrade_experiment(b, tool, tmp_path / f"downgrade-checkpoint-{attempt}.json")
        except Exception:
            stalled = b.deadlock() or b.bookie_stalled() or b.logged(harness.BUFFER_RECOVERY_FAILED)
            harness.release_broker(b)
            if attempt == 2 or stalled is None:
                raise
            harness.note_retry(f"the downgrade experiment run once more on a fresh broker {name}", stalled)
    raise AssertionError("unreachable")


@pytest.mark.timeout(1500)  # room for the experiment's one retry on a fresh broker (about 5 minutes a run)
@pytest.mark.parametrize("ack_at_batch_index", [False, True], ids=["ackBatchIndex=false", "ackBatchIndex=true"])
def test_downgrade_trimming_of_batched_tc_log(ack_at_batch_index, tmp_path):
    conf = dict(EXPERIMENT_CONF, acknowledgmentAtBatchIndexLevelEnabled=str(ack_at_batch_index).lower())
    b, obs = _experiment_on_its_own_broker(conf, f"downgrade-{ack_at_batch_index}", tmp_path)
    try:
        _record(f"downgrade-ackBatchIndex-{ack_at_batch_index}", obs)
        assert max(obs["phase1_batch_sizes"].values()) > 1, "experiment needs batches with >1 record"
        assert obs["held_txns"] and all(o == "committed" for o in obs["held_finished"])
        resurrected = obs.get("resurrected") is not None  # see resurrect_walk
        assert obs["final_ongoing"] == len(obs["resurrected_at_switch"]), obs
        # Observed on 4.0.7 (docs/real-broker-findings.md): with batch-index-level deletion off the
        # cursor's mark-delete stays at the first batched entry holding a record of a transaction
        # that was open across the switch, so no TC-log ledger from there on is ever trimmed;
        # with it on, everything is trimmed.
        assert obs["stalled"] is (not ack_at_batch_index or resurrected), obs
        # The tool saw the stall coming: it refused the switch without --force exactly when acks were off.
        assert obs["switch_refused"] is (not ack_at_batch_index), obs

        # The downgrade walk through `pulsar-txn downgrade check`: right after the switch (batching
        # effectively off everywhere, transactions still open, batched ledgers present): WAIT, exit 5,
        # when they only need to end; BLOCKED, exit 6, when batch-index acknowledgements are off, since
        # their ends will pin the TC log for good.
        first = obs["check_after_switch"]
        (tc_item,) = obs["check_after_switch_tc"]
        assert not tc_item["clear"] and tc_item["lastBatchedLedgerId"] >= max(obs["phase1_ledgers"]), tc_item
        if ack_at_batch_index:
            assert (first["verdict"], first["exit"]) == ("WAIT", 5), first
            assert tc_item["cause"] in ("open-transaction", "ledger-not-rolled"), tc_item
        else:
            assert (first["verdict"], first["exit"]) == ("BLOCKED", 6), first
            assert tc_item["cause"] == "open-across-switch", tc_item
        final = obs["final_check"]
        (tc_item,) = obs["final_check_tc"]
        if ack_at_batch_index and obs.get("resurrected") is not None:
            # a committed transaction replayed as OPEN pinned the log: never SAFE while it is open;
            # the tool's cause and advice, followed, lead to SAFE (docs/real-broker-findings.md)
            assert (final["verdict"], final["exit"]) == ("WAIT", 5) and tc_item["cause"] == "open-transaction", final
            assert "abort-transaction" in tc_item["advice"], tc_item
            assert obs["resurrected"] and obs["resurrected_aborts"] == [0] * len(obs["resurrected"]), obs
            assert obs["after_resurrected_walk"][-1]["verdict"] == "SAFE", obs["after_resurrected_walk"]
        elif ack_at_batch_index:
            # the old ledgers are trimmed: SAFE, exit 0
            assert (final["verdict"], final["exit"]) == ("SAFE", 0), obs["walk"]
            assert tc_item["clear"] and tc_item["oldestLedgerId"] > tc_item["lastBatchedLedgerId"], tc_item
        else:
            # The batch-index deletion stall (docs/real-broker-findings.md): never trimmed; the tool says
            # BLOCKED, exit 6, and names the cause (while a transaction the switch resurrected is open,
            # that transaction open across the switch, with the same remedy)
            assert (final["verdict"], final["exit"]) == ("BLOCKED", 6), final
            cause = "open-across-switch" if obs["resurrected_at_switch"] else "batch-index-deletion"
            assert not tc_item["clear"] and tc_item["cause"] == cause, tc_item
            assert "acknowledgmentAtBatchIndexLevelEnabled=true" in tc_item["advice"], tc_item
            assert tc_item["markDeletePosition"] == obs["final_markDelete"]
            # A coordinator reload replays the pinned log: the cursor skips the individually deleted
            # (unbatched) end records but not the batched NEW records, so the held transactions,
            # committed long before, are OPEN again (the engine does the same: tests/engine/test_logs.py).
            # (plus any transaction the switch's reload resurrected, open since)
            held = sorted(held_ids(obs) + obs["resurrected_at_switch"])
            assert obs["after_final_reload_ongoing"] == len(held), obs
            assert obs["after_final_reload_slow"] == held, obs
            (tc_item,) = obs["after_final_reload_check_tc"]
            assert obs["after_final_reload_check"]["verdict"] == "BLOCKED" and tc_item["cause"] == "open-across-switch"
            assert "acknowledgmentAtBatchIndexLevelEnabled=true" in tc_item["advice"], tc_item
            # Following the advice releases the pinned log: after a restart with batch-index
            # acknowledgements the held transactions are still OPEN (replayed); once they are
            # aborted, the cursor moves and every batched ledger is trimmed.
            assert obs["after_restart_markDelete"] == obs["final_markDelete"] and obs["after_restart_ongoing"] == len(
                held
            )
            assert obs["aborts"] == [0] * len(held)
            assert not set(obs["phase1_ledgers"]) & set(obs["after_aborts_ledgers"]), obs["after_aborts_ledgers"]
            (tc_item,) = obs["after_aborts_check_tc"]
            assert tc_item["clear"], tc_item
            # BLOCKED before the remedy, never again after it, and SAFE once the pending-ack logs drained
            assert obs["after_aborts_check"]["verdict"] in ("WAIT", "SAFE"), obs["after_aborts_check"]
            last = obs["after_remedy_walk"][-1]
            assert (last["verdict"], last["exit"]) == ("SAFE", 0), obs["after_remedy_walk"]
    finally:
        harness.release_broker(b)


def timed_out(b: harness.PulsarBroker, coordinator: int = 0) -> int:
    """pulsar_txn_timeout_total of one coordinator: the transactions its timeout tracker aborted since it loaded
    (the counter is the coordinator's store's, and each reload makes a new store)."""
    status, text = b.rest("GET", "/metrics/", raw=True)
    assert status == 200, status
    label = f'coordinator_id="{coordinator}"'
    values = [
        line.rsplit(" ", 1)[1]
        for line in text.splitlines()
        if line.startswith("pulsar_txn_timeout_total{") and label in line
    ]
    return int(float(values[0])) if values else 0


@pytest.mark.timeout(900)
def test_a_reloaded_coordinator_aborts_at_once_what_its_replay_brings_back_past_its_timeout(tmp_path):
    """The batch-index deletion stall's ghosts, on the broker: with batch-index acks off, transactions whose NEW
    records are batched and whose ends were deleted one by one come back OPEN at every coordinator reload,
    long past their timeout. The reloaded coordinator's timeout tracker aborts them at once (the engine models
    this: a check after a reload sees no overdue transaction, and waiting, not an abort, clears them)."""
    b = start_broker_or_fail(dict(EXPERIMENT_CONF, acknowledgmentAtBatchIndexLevelEnabled="false"), name="ghosts")
    try:
        tool = Tool(b.admin_url, tmp_path / "state")
        switch_batching(b, tool, True)
        run = b.start_workload(seed=41, txns=4, aborts=0, ops=1, parallel=4, hold=2, txn_timeout_sec=40, prefix="gh")
        held = sorted(
            f"({r['most']},{r['least']})" for r in run.wait_holding(timeout=300) if r.get("outcome") == "open"
        )
        assert len(held) == 2 and settled_ongoing(b, 2) == 2, held
        switch_batching(b, tool, False, force=True)  # their NEW records stay in batched entries
        # Their own timeout ends them while the client holds them: ABORTING and ABORTED are written unbatched.
        assert settled_ongoing(b, 0, timeout=120) == 0 and timed_out(b) == len(held)
        run.proc.kill()
        b.reload_coordinators()  # a new store, whose counters start at 0
        started, seen = time.monotonic(), []
        while time.monotonic() - started < 30:
            seen.append((round(time.monotonic() - started, 1), open_txns(b), timed_out(b)))
            if not seen[-1][1] and seen[-1][2]:
                break
            time.sleep(1)
        print(json.dumps({"held": held, "seen": seen}))
        # What the replay brought back as OPEN (the new tracker counted them), the tracker ended: none is left
        # open. How many come back is the broker's batching: only a record that shares its entry stays undeleted
        # (an entry of one record is deleted without an ack set); in full runs both came back, one, and none.
        assert not seen[-1][1] and seen[-1][2] <= len(held), (held, seen)
    finally:
        harness.release_broker(b)
