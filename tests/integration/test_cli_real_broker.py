"""The `pulsar-txn` CLI against a real Pulsar 4.0.7 broker (--admin-url of the session broker).

- the read commands' `-o json` output agrees with the broker's own REST answers (fetched directly);
- the batch-log switches with --reload turn batching on and off for real: readledger dumps of the
  coordinator and pending-ack ledgers, decoded by `pulsar-txn decode`, hold batched entries while
  it is on and unbatched ones after, with the transaction ids the Java workload produced; the
  get-*-batch-log-stat commands report configured and effective state before and after the reload;
- `metrics` reports non-zero buffered-writer figures while batching is on.
"""

from __future__ import annotations

import re
import urllib.parse

import pytest

import harness

from tool import Tool, after, dump_ledgers, position, txn_key

pytestmark = pytest.mark.integration

PREFIX = "cli-x"  # a '-' in the topic names; subscriptions are "sub-a" and "subb"
NS = "persistent://public/default"


@pytest.fixture(scope="module")
def tool(pulsar_broker, tmp_path_factory):
    return Tool(pulsar_broker.admin_url, tmp_path_factory.mktemp("pulsar-txn-state"))


@pytest.fixture(scope="module")
def held(pulsar_broker):
    """A finished workload plus one holding 2 transactions open (for metadata and slow-transactions)."""
    b = pulsar_broker
    done = b.run_workload(seed=41, txns=6, aborts=2, ops=3, parallel=2, prefix=PREFIX)
    run, lines = harness.hold_workload(b, seed=42, txns=4, aborts=1, ops=3, parallel=2, hold=2, prefix=PREFIX)
    yield done + lines
    harness.finish_held(b, run, "commit")


def rest(broker, path: str):
    status, body = broker.rest("GET", path)
    assert status == 200, (path, status, body)
    return body


def agrees(broker, cli_call, path: str, tries: int = 4):
    """The CLI's JSON equals the REST answer fetched right before and after it (when those two agree:
    internal stats move while the broker flushes cursors)."""
    last = None
    for _ in range(tries):
        before = rest(broker, path)
        ours = cli_call()
        again = rest(broker, path)
        if before == again:
            assert ours == before, f"{path}: the tool says\n{ours}\nthe broker says\n{before}"
            return ours
        last = (ours, again)
    pytest.fail(f"{path} never held still over {tries} tries; last: {last}")


# ----------------------------------------------------------------------------------- read commands


def test_coordinators_list(pulsar_broker, tool, held):
    ours = tool.json("coordinators-list")
    real = rest(pulsar_broker, "/admin/v3/transactions/coordinators")
    assert [{"id": c["id"], "brokerServiceUrl": c["brokerServiceUrl"]} for c in ours] == real
    assert {c["webServiceUrl"] for c in ours} == {pulsar_broker.admin_url}


def test_coordinator_stats_and_internal_stats(pulsar_broker, tool, held):
    b = pulsar_broker
    stats = agrees(b, lambda: tool.json("coordinator-stats"), "/admin/v3/transactions/coordinatorStats")
    assert stats["0"]["state"] == "Ready" and stats["0"]["ongoingTxnSize"] >= 2
    agrees(
        b, lambda: tool.json("coordinator-stats", "-c", 0), "/admin/v3/transactions/coordinatorStats?coordinatorId=0"
    )
    for flag, metadata in (((), "false"), (("-m",), "true")):
        internal = agrees(
            b,
            lambda flag=flag: tool.json("coordinator-internal-stats", "-c", 0, *flag),
            f"/admin/v3/transactions/coordinatorInternalStats/0?metadata={metadata}",
        )
        assert internal["transactionLogStats"]["managedLedgerName"] == "pulsar/system/persistent/__transaction_log_0"


def _pending_ack_topics(broker) -> set[str]:
    names = set()
    for tenant in rest(broker, "/admin/v2/tenants"):
        for ns in rest(broker, f"/admin/v2/namespaces/{tenant}"):
            names |= {
                t
                for t in rest(broker, f"/admin/v2/namespaces/{ns}/topics?includeSystemTopic=true")
                if t.endswith("__transaction_pending_ack")
            }
    return names


def test_subscriptions_finds_every_transactional_subscription(pulsar_broker, tool, held):
    b = pulsar_broker
    subs = tool.records("subscriptions")
    pairs = {(s["topic"], s["subscription"]) for s in subs}
    # exactly the broker's pending-ack topics, each resolved to a real topic and subscription
    assert {s["pendingAckTopic"] for s in subs} == _pending_ack_topics(b)
    for s in subs:
        assert s["status"] == "ok", s
        assert s["pendingAckTopic"] == f"{s['topic']}-{s['subscription']}__transaction_pending_ack"
        local = urllib.parse.quote(s["topic"].split("/")[-1], safe="")
        assert s["subscription"] in rest(b, f"/admin/v2/persistent/public/default/{local}/subscriptions")
    # every subscription the workload acknowledged on in a transaction, names with '-' included
    acked = {(op["topic"], op["sub"]) for r in held if r.get("event") == "txn" for op in r["ops"] if op["op"] == "ack"}
    assert acked and acked <= pairs, acked - pairs
    assert any("-" in sub for _, sub in acked) and any("-" in t.split("/")[-1] for t, _ in acked)


def test_pending_ack_stats_and_internal_stats(pulsar_broker, tool, held):
    b = pulsar_broker
    subs = tool.records("subscriptions")
    mine = [s for s in subs if f"/{PREFIX}" in s["topic"]]
    assert mine
    for s in mine:
        topic, sub = s["topic"], s["subscription"]
        rest_path = (
            f"public/default/{urllib.parse.quote(topic.split('/')[-1], safe='')}/{urllib.parse.quote(sub, safe='')}"
        )
        agrees(
            b,
            lambda topic=topic, sub=sub: tool.json("pending-ack-stats", "-t", topic, "-s", sub),
            f"/admin/v3/transactions/pendingAckStats/{rest_path}",
        )
        agrees(
            b,
            lambda topic=topic, sub=sub: tool.json("pending-ack-stats", "-t", topic, "-s", sub, "-l"),
            f"/admin/v3/transactions/pendingAckStats/{rest_path}?lowWaterMarks=true",
        )
    s = next(s for s in mine if s["subscription"] == "sub-a" and s["topic"].endswith("-orders"))
    for flag, metadata in (((), "false"), (("-m",), "true")):
        internal = agrees(
            b,
            lambda flag=flag: tool.json("pending-ack-internal-stats", "-t", s["topic"], "-s", "sub-a", *flag),
            f"/admin/v3/transactions/pendingAckInternalStats/public/default/{PREFIX}-orders/sub-a?metadata={metadata}",
        )
        assert internal["pendingAckLogStats"]["managedLedgerName"].endswith(
            f"{PREFIX}-orders-sub-a__transaction_pending_ack"
        )


def test_transaction_in_buffer_and_pending_ack_and_position_stats(pulsar_broker, tool, held):
    """pulsar-admin's transaction-in-buffer-stats, transaction-in-pending-ack-stats and
    position-stats-in-pending-ack, with its option names, answer what the broker answers."""
    b = pulsar_broker
    txns = [r for r in held if r.get("event") == "txn"]
    # the workload's seeds fix which transactions produce and ack; open ones first
    ordered = sorted(txns, key=lambda r: r["outcome"] != "open")
    producer = next(r for r in ordered if any(o["op"] == "produce" for o in r["ops"]))
    topic = next(o for o in producer["ops"] if o["op"] == "produce")["topic"]
    local = urllib.parse.quote(topic.split("/")[-1], safe="")
    most, least = producer["most"], producer["least"]
    in_buffer = agrees(
        b,
        lambda: tool.json("transaction-in-buffer-stats", "-t", topic, "-m", most, "-l", least),
        f"/admin/v3/transactions/transactionInBufferStats/public/default/{local}/{most}/{least}",
    )
    assert in_buffer["aborted"] is (producer["outcome"] == "aborted"), (producer["outcome"], in_buffer)
    acker = next(r for r in ordered if any(o["op"] == "ack" for o in r["ops"]))
    acked = next(o for o in acker["ops"] if o["op"] == "ack")
    a_topic, sub, most, least = acked["topic"], acked["sub"], acker["most"], acker["least"]
    a_path = f"public/default/{urllib.parse.quote(a_topic.split('/')[-1], safe='')}/{urllib.parse.quote(sub, safe='')}"
    agrees(
        b,
        lambda: tool.json("transaction-in-pending-ack-stats", "-t", a_topic, "-s", sub, "-m", most, "-l", least),
        f"/admin/v3/transactions/transactionInPendingAckStats/{a_path}/{most}/{least}",
    )
    ledger, entry = (int(x) for x in acked["msgId"].split(":")[:2])
    state = agrees(
        b,
        lambda: tool.json("position-stats-in-pending-ack", "-t", a_topic, "-s", sub, "-l", ledger, "-e", entry),
        f"/admin/v3/transactions/positionStatsInPendingAck/{a_path}/{ledger}/{entry}",
    )
    # acked in a transaction still open: PendingAck (the key is "state" on a real broker, not "State")
    assert state["state"] == ("PendingAck" if acker["outcome"] == "open" else state["state"]) and state["state"], state


def test_transaction_metadata_and_slow_transactions(pulsar_broker, tool, held):
    b = pulsar_broker
    open_txns = [(r["most"], r["least"]) for r in held if r.get("event") == "txn" and r["outcome"] == "open"]
    assert len(open_txns) == 2
    for most, least in open_txns:
        meta = agrees(
            b,
            lambda most=most, least=least: tool.json("transaction-metadata", txn_key(most, least)),
            f"/admin/v3/transactions/transactionMetadata/{most}/{least}",
        )
        assert meta["status"] == "OPEN"
        agrees(
            b,
            lambda most=most, least=least: tool.json("transaction-metadata", "-m", most, "-l", least),
            f"/admin/v3/transactions/transactionMetadata/{most}/{least}",
        )
    slow = agrees(b, lambda: tool.json("slow-transactions", "-t", "1s"), "/admin/v3/transactions/slowTransactions/1000")
    assert {txn_key(*t) for t in open_txns} <= set(slow)
    agrees(
        b,
        lambda: tool.json("slow-transactions", "-t", "1s", "-c", 0),
        "/admin/v3/transactions/slowTransactions/1000?coordinatorId=0",
    )
    # an unknown transaction: the broker's 404 becomes one sentence and exit 4
    result = tool.run("transaction-metadata", "(0,999999)", "-o", "json", expect=4)
    assert "999999" in result.stderr and "Traceback" not in result.stderr


def test_transaction_buffer_commands(pulsar_broker, tool, held):
    b = pulsar_broker
    topic = f"{NS}/{PREFIX}-orders"
    path = f"/admin/v3/transactions/transactionBufferStats/public/default/{PREFIX}-orders"
    agrees(b, lambda: tool.json("transaction-buffer-stats", "-t", topic), path)
    agrees(
        b,
        lambda: tool.json("transaction-buffer-stats", "-t", topic, "-l", "-s"),
        path + "?lowWaterMarks=true&segmentStats=true",
    )
    internal = f"/admin/v3/transactions/transactionBufferInternalStats/public/default/{PREFIX}-orders"
    agrees(b, lambda: tool.json("buffer-snapshot-internal-stats", "-t", topic), internal + "?metadata=false")
    agrees(b, lambda: tool.json("buffer-snapshot-internal-stats", "-t", topic, "-m"), internal + "?metadata=true")


# ----------------------------------------------------------------------------------- batch-log switches


def _tc_stat(tool) -> dict:
    stat = tool.json("get-txn-tc-batch-log-stat")
    (coordinator,) = stat["coordinators"]
    return {
        "flag": stat["txnTcBatchLogEnabled"],
        "array": stat["coodinatorArray"],
        "configured": coordinator["configured"],
        "effective": coordinator["effective"],
        "reason": coordinator["reason"],
    }


def _pa_stat(tool, topic: str, sub: str) -> dict:
    stat = tool.json("get-txn-pending-ack-batch-log-stat")
    rows = [s for s in stat["subscriptions"] if s["topic"] == topic and s["subscription"] == sub]
    assert rows, (topic, sub, [(s["topic"], s["subscription"]) for s in stat["subscriptions"]])
    return {
        "flag": stat["txnPendingAckBatchLogEnabled"],
        "configured": rows[0]["configured"],
        "effective": rows[0]["effective"],
        "reason": rows[0]["reason"],
        "state": rows[0].get("state"),
    }


def _tc_ml(broker) -> dict:
    return broker.tc_internal_stats(0)["transactionLogStats"]["managedLedgerInternalStats"]


def _pa_ml(broker, local: str, sub: str) -> dict:
    return broker.pending_ack_internal_stats(f"public/default/{local}", sub)["pendingAckLogStats"][
        "managedLedgerInternalStats"
    ]


def _phase(broker, tool, tmp_path, name: str, seed: int, tc_mark, pa_mark, pa_local: str, pa_sub: str):
    """A workload holding one transaction open (it pins the TC log's cursor, so no ledger of the phase is
    trimmed before it is dumped); returns (workload lines, TC entries, pending-ack entries) of the phase."""
    run = broker.start_workload(seed=seed, txns=14, aborts=3, ops=3, parallel=8, hold=1, prefix="bl-x")
    lines = run.wait_holding(timeout=300)
    try:
        tc_ml, pa_ml = _tc_ml(broker), _pa_ml(broker, pa_local, pa_sub)
        tc_dump = dump_ledgers(broker, [lg["ledgerId"] for lg in tc_ml["ledgers"]], tmp_path / f"tc-{name}.txt")
        pa_dump = dump_ledgers(broker, [lg["ledgerId"] for lg in pa_ml["ledgers"]], tmp_path / f"pa-{name}.txt")
        tc_entries = after(tool.decode(tc_dump, "tc"), tc_mark)
        pa_entries = after(tool.decode(pa_dump, "pending-ack"), pa_mark)
    finally:
        lines += run.finish("commit", timeout=300)
    return lines, Dumped(tc_entries, tc_ml["lastConfirmedEntry"]), Dumped(pa_entries, pa_ml["lastConfirmedEntry"])


class Dumped(list):
    """Decoded entries of a phase, and whether the dump reached the managed ledger's last entry:
    BookieShell reads up to the bookie's LAC, which lags the newest entry of an open ledger by one
    until the next write (docs/real-broker-findings.md)."""

    def __init__(self, entries: list[dict], last_confirmed: str):
        super().__init__(entries)
        self.complete = bool(entries) and (entries[-1]["ledgerId"], entries[-1]["entryId"]) >= position(last_confirmed)


def _ids(lines) -> set[str]:
    return {txn_key(r["most"], r["least"]) for r in lines if r.get("event") == "txn"}


def _record_ids(entries) -> set[str]:
    return {rec["txnId"] for e in entries for rec in e["records"]}


def _all_there(ids: set[str], entries: "Dumped") -> None:
    """Every transaction of the workload has records in the TC log (its NEW record at least), but a
    dump that missed the newest entry may lack the transactions that only it holds."""
    missing = ids - _record_ids(entries)
    assert not missing or (not entries.complete and len(missing) < len(ids)), (missing, len(ids))


def _metrics(tool) -> dict:
    return {row["log"]: row for row in tool.records("metrics")}


def _raw_count(broker, name: str) -> float:
    status, text = broker.rest("GET", "/metrics/", raw=True)
    m = re.search(rf"^{name}\{{[^}}]*\}} (\S+)$", text, re.M)
    assert m, name
    return float(m.group(1))


def test_batch_log_switches_turn_batching_on_and_off_for_real(pulsar_broker, tool, tmp_path):
    b = pulsar_broker
    local, sub = "bl-x-orders", "sub-a"
    topic = f"{NS}/{local}"
    # phase 0: batching off; the topics and their pending-ack stores exist and are open unbatched
    b.run_workload(seed=50, txns=4, aborts=1, ops=3, parallel=2, prefix="bl-x")
    before = _tc_stat(tool)
    assert (before["flag"], before["configured"], before["effective"]) == (False, False, False), before
    pa = _pa_stat(tool, topic, sub)
    assert (pa["configured"], pa["effective"]) == (False, False), pa

    # --- on, without --reload: configured, not effective yet
    tool.run("set-txn-tc-batch-log", "--enable", "--yes")
    tool.run("set-txn-pending-ack-batch-log", "--enable", "--yes")
    _wait_runtime(b, True)
    st = _tc_stat(tool)
    assert (st["flag"], st["configured"], st["effective"]) == (True, True, False), st
    assert "reload" in st["reason"]
    # the same broker through another spelling of its URL finds the same record
    assert _tc_stat(Tool(b.admin_url.replace("127.0.0.1", "localhost"), tool.state_dir)) == st
    pa = _pa_stat(tool, topic, sub)
    assert (pa["flag"], pa["configured"], pa["effective"]) == (True, True, False), pa

    # --- --reload: the stores reopen (the coordinator when a transactional client next connects)
    tc_mark = position(_tc_ml(b)["lastConfirmedEntry"])
    pa_mark = position(_pa_ml(b, local, sub)["lastConfirmedEntry"])
    tool.run("set-txn-tc-batch-log", "--enable", "--reload", "--yes")
    reloaded = tool.json("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes")
    assert f"{topic}" in {r["topic"] for r in reloaded["reload"]}, reloaded["reload"]
    b.wait_coordinators_ready()  # the workload's ping mode reconnects the coordinator
    st = _tc_stat(tool)
    assert (st["configured"], st["effective"]) == (True, True), st
    assert st["array"] == [{"0": True}]
    metrics_before = _metrics(tool)

    lines, tc_entries, pa_entries = _phase(b, tool, tmp_path, "on", 51, tc_mark, pa_mark, local, sub)
    pa = _pa_stat(tool, topic, sub)
    assert (pa["configured"], pa["effective"]) == (True, True), pa
    # batched entries only, with the workload's transactions in them
    assert tc_entries and all(e["batched"] and e["version"] == 1 for e in tc_entries), tc_entries[:3]
    assert max(len(e["records"]) for e in tc_entries) > 1, "no batch with more than one record"
    _all_there(_ids(lines), tc_entries)
    assert pa_entries and all(e["batched"] for e in pa_entries), pa_entries[:3]
    assert _record_ids(pa_entries) <= _ids(lines) and _record_ids(pa_entries)
    acked = {
        txn_key(r["most"], r["least"])
        for r in lines
        if r.get("event") == "txn"
        for op in r["ops"]
        if op["op"] == "ack" and op["topic"] == topic and op["sub"] == sub
    }
    missing = acked - _record_ids(pa_entries)
    # all acks are there, except those of the newest entry when the dump could not see it
    assert not missing or (not pa_entries.complete and len(missing) < len(acked)), (missing, acked)

    # metrics: the buffered writers report what they batched, the same figures as /metrics/
    metrics = _metrics(tool)
    for log, prefix in (("tc", "pulsar_txn_tc"), ("pending-ack", "pulsar_txn_pending_ack_store")):
        assert metrics[log]["batches"] > metrics_before[log]["batches"] > -1, metrics[log]
        assert metrics[log]["records"] >= metrics[log]["batches"] > 0 and metrics[log]["bytes"] > 0
        assert metrics[log]["avgRecordsPerBatch"] >= 1
        assert metrics[log]["batches"] == _raw_count(b, f"{prefix}_bufferedwriter_batch_records_count")
        assert metrics[log]["records"] == _raw_count(b, f"{prefix}_bufferedwriter_batch_records_sum")
    assert metrics["tc"]["records"] > metrics["tc"]["batches"]  # some batch held several records

    # --- off with --reload: unbatched entries from then on
    tc_mark = position(_tc_ml(b)["lastConfirmedEntry"])
    pa_mark = position(_pa_ml(b, local, sub)["lastConfirmedEntry"])
    # The module's `held` transactions are open and the session broker keeps batch-index acks off,
    # so the switch would be refused (test_switch_guard_real_broker.py): forced here, on purpose.
    tool.run("set-txn-tc-batch-log", "--disable", "--yes", "--force")
    tool.run("set-txn-pending-ack-batch-log", "--disable", "--yes", "--force")
    _wait_runtime(b, False)
    st = _tc_stat(tool)
    assert (st["flag"], st["configured"], st["effective"]) == (False, False, True), st
    tool.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--force")
    tool.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", "--force")
    b.wait_coordinators_ready()
    st = _tc_stat(tool)
    assert (st["configured"], st["effective"]) == (False, False), st
    lines, tc_entries, pa_entries = _phase(b, tool, tmp_path, "off", 52, tc_mark, pa_mark, local, sub)
    pa = _pa_stat(tool, topic, sub)
    assert (pa["configured"], pa["effective"]) == (False, False), pa
    assert tc_entries and not any(e["batched"] for e in tc_entries), [e for e in tc_entries if e["batched"]][:3]
    assert all(len(e["records"]) == 1 for e in tc_entries)
    _all_there(_ids(lines), tc_entries)
    assert pa_entries and not any(e["batched"] for e in pa_entries)
    assert _record_ids(pa_entries) <= _ids(lines) and _record_ids(pa_entries)


def _wait_runtime(broker, value: bool, timeout: float = 30) -> None:
    """The dynamic update reaches the broker through its metadata store; wait until it is applied."""
    import time

    deadline = time.monotonic() + timeout
    keys = ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled")
    while time.monotonic() < deadline:
        runtime = rest(broker, "/admin/v2/brokers/configuration/runtime")
        if all(runtime.get(k) == str(value).lower() for k in keys):
            return
        time.sleep(0.5)
    pytest.fail(f"runtime configuration never showed batching {value}")
