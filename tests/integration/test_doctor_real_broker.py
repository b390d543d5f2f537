"""The transactions doctor on a real Pulsar broker (marker `doctor`): failures made for real.

- A client opens a transaction, produces, and is SIGKILLed (timeout 1 h): readers of the partitions it
  wrote to get nothing written after it; `doctor` names the transaction and the partitions (exit 6);
  `abort-hanging --older-than` aborts it; readers then get every committed message written after it,
  none lost, none twice, and nothing of the killed client.
- `find-hanging` on dozens of open transactions of different ages lists exactly those past the bound.
- Deleting a subscription whose name URL encoding changes (`audit:eu`) leaves its pending-ack log (4.0.7 and
  2.10.5): `doctor` names the leak and its printed fix deletes the log.
"""

from __future__ import annotations

import os
import shlex
import time
from collections import Counter

import pytest

import harness
from workload_records import base, open_partitions, produced, received
from tests.conftest import isolate

pytestmark = pytest.mark.doctor

PREFIX = "drkill"
AGES = "drages"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _seed_values(seed: int, total: int, ops: int) -> set[str]:
    """The plain messages TxnWorkload writes to every topic before its transactions."""
    return {f"seed-{seed}-{i}" for i in range(max(4, total * ops // 3 + 2))}


def _abort_when_done(request, broker, lines) -> None:
    """Abort the killed client's transaction after the test whatever its outcome: left open (1-hour
    timeout) it would hold its readers for the rest of the session, and after the session broker is
    restarted (conftest.py) it makes every slowTransactions call fail (docs/real-broker-findings.md)."""
    for r in lines:
        if r.get("event") == "txn":
            path = f"/admin/v3/transactions/abortTransaction/{r['most']}/{r['least']}"
            request.addfinalizer(lambda path=path: broker.rest("POST", path))


def test_sigkilled_client_found_aborted_and_readers_released(cli, pulsar_broker, request):
    broker = pulsar_broker
    url = ["--admin-url", broker.admin_url]
    # 1. a client opens a transaction, produces, and dies (SIGKILL) with a 1-hour timeout
    killed_seed, ops = 9101, 6
    run, lines = harness.hold_workload(
        broker, seed=killed_seed, txns=0, aborts=0, ops=ops, hold=1, prefix=PREFIX, txn_timeout_sec=3600
    )
    run.proc.kill()
    run.proc.wait(60)
    _abort_when_done(request, broker, lines)
    [killed] = [f"({r['most']},{r['least']})" for r in lines if r.get("event") == "txn"]
    held = open_partitions(lines)
    hung_values = {v for values in produced(lines, "open").values() for v in values}
    assert held and hung_values, "the killed client produced nothing; change its seed"
    # 2. committed transactions and plain messages written after it
    after_seed = 9102
    after = broker.run_workload(seed=after_seed, txns=4, aborts=0, ops=4, prefix=PREFIX)
    committed = produced(after, "committed")
    # 3. readers of the held partitions get nothing newer than the killed transaction's first message
    before = received(broker, "dr-before", prefix=PREFIX)
    for topic in {base(p) for p in held}:
        got = set(before.get(topic, []))
        assert not got & hung_values
        if topic in {p for p in held}:  # a non-partitioned topic: nothing written after it at all
            assert not got & (committed.get(topic, set()) | _seed_values(after_seed, 4, 4))
    # 4. doctor names the transaction and its partitions, exit 6
    time.sleep(6)
    result = cli(["doctor", *url, "--older-than", "5s", "-o", "json"])
    assert result.exit_code == 6, result.stderr
    report = result.json()
    hanging = [f for f in report["findings"] if f["check"] == "hanging-transaction" and killed in f["txnIds"]]
    assert hanging and hanging[0]["severity"] == "error", report["findings"]
    named = {f["subject"] for f in report["findings"] if f["check"] == "held-readers" and killed in f["txnIds"]}
    assert named == held, (named, held)
    found = cli(["find-hanging", *url, "--older-than", "5s", "-o", "json"]).json()["transactions"]
    [ours] = [t for t in found if t["txnId"] == killed]
    assert set(ours["producedPartitions"]) == held and ours["timeoutMs"] == 3_600_000
    assert {h["topic"] for h in ours["readersHeld"]} == held and ours["ownerBroker"].startswith("http://")
    # 5. abort-hanging: dry run names it, --execute aborts it, the audit keeps it
    dry = cli(["abort-hanging", *url, "--older-than", "5s", "-o", "json"])
    assert dry.exit_code == 0 and killed in [t["txnId"] for t in dry.json()["transactions"]]
    done = cli(["abort-hanging", *url, "--older-than", "5s", "--execute", "--yes", "--reason", "test", "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert {"txnId": killed, "aborted": True, "error": None} in done.json()["results"]
    # 6. readers now get every committed message written after it, none twice, nothing of the killed client
    deadline = time.monotonic() + 60
    while True:
        report = cli(["doctor", *url, "--older-than", "5s", "-o", "json"]).json()
        if not [f for f in report["findings"] if killed in f.get("txnIds", [])] or time.monotonic() > deadline:
            break
        time.sleep(1)
    got = received(broker, "dr-after", prefix=PREFIX)
    for topic in {base(p) for p in held}:
        values = got.get(topic, [])
        duplicated = [v for v, n in Counter(values).items() if n > 1]
        assert duplicated == [], duplicated
        assert not set(values) & hung_values
        expected = committed.get(topic, set()) | _seed_values(after_seed, 4, 4) | _seed_values(killed_seed, 1, ops)
        assert expected <= set(values), sorted(expected - set(values))


def test_find_hanging_lists_exactly_those_past_the_bound(cli, pulsar_broker):
    """Three batches of open transactions, a few seconds apart: the bound falls between two batches."""
    broker = pulsar_broker
    runs, batches, cutoffs = [], [], []
    try:
        for i in range(3):
            if cutoffs:
                time.sleep(max(0.0, cutoffs[-1] + 3 - time.time()))
            started = time.time()
            run, lines = harness.hold_workload(
                broker, seed=9200 + i, txns=0, aborts=0, ops=1, hold=10, prefix=f"{AGES}{i}", txn_timeout_sec=3600
            )
            runs.append(run)
            batches.append({f"({r['most']},{r['least']})" for r in lines if r.get("event") == "txn"})
            assert started < time.time()
            cutoffs.append(time.time() + 1.5)  # every transaction of this batch opened before it; the next after
        assert sum(len(b) for b in batches) == 30
        for older in (0, 1):
            bound_s = time.time() - cutoffs[older]
            result = cli(
                ["find-hanging", "--admin-url", broker.admin_url, "--older-than", f"{bound_s:.3f}s", "-o", "json"]
            )
            assert result.exit_code == 0, result.stderr
            listed = {t["txnId"] for t in result.json()["transactions"]}
            ours = set().union(*batches)
            expected = set().union(*batches[: older + 1])
            assert listed & ours == expected, (len(listed & ours), len(expected))
    finally:
        for run in runs:
            harness.finish_held(broker, run)


RESTART = "drrestart"


def test_after_a_broker_restart_the_hanging_transaction_is_named_then_found_and_aborted(cli, pulsar_broker, request):
    """A SIGKILLed client's transaction, then the broker restarts: nothing loads the client's topics again, so
    the broker cannot list the transaction (500 naming a topic it acknowledged on, or no answer for one it
    produced to; docs/real-broker-findings.md). find-hanging lists what it can and exits 4 naming the
    coordinator and why, never an empty all-clear; once readers load those topics it finds the transaction,
    and abort-hanging aborts it."""
    broker = pulsar_broker
    url = ["--admin-url", broker.admin_url]
    run, lines = harness.hold_workload(
        broker, seed=9111, txns=0, aborts=0, ops=6, hold=1, prefix=RESTART, txn_timeout_sec=3600
    )
    run.proc.kill()
    run.proc.wait(60)
    _abort_when_done(request, broker, lines)
    [killed] = [f"({r['most']},{r['least']})" for r in lines if r.get("event") == "txn"]
    broker.restart()
    broker.wait_coordinators_ready()
    started = time.monotonic()
    result = cli(["find-hanging", *url, "--older-than", "1s", "--request-timeout", "10", "-o", "json"])
    took = time.monotonic() - started
    assert result.exit_code == 4, result.stderr
    report = result.json()
    assert killed not in {t["txnId"] for t in report["transactions"]}
    unlisted = report["unlistedCoordinators"]
    assert int(killed.strip("()").split(",")[0]) in {u["coordinatorId"] for u in unlisted}, unlisted
    reasons = ("a topic it touched, is not loaded", "got no answer within 10s")
    assert all(any(r in u["error"] for r in reasons) for u in unlisted), unlisted
    assert "could not list their open transactions" in result.stderr and took < 40, (result.stderr, took)
    print(f"\nafter the restart, find-hanging exited 4 in {took:.1f} s: {[u['error'][:160] for u in unlisted]}")
    received(broker, "dr-restart", prefix=RESTART)  # readers load every topic the client wrote to
    found = cli(["find-hanging", *url, "--older-than", "1s", "-o", "json"])
    assert found.exit_code == 0, found.stderr
    assert killed in {t["txnId"] for t in found.json()["transactions"]}
    done = cli(["abort-hanging", *url, "--older-than", "1s", "--execute", "--yes", "--reason", "test", "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert {"txnId": killed, "aborted": True, "error": None} in done.json()["results"]


LEAK = "drleak"


def test_subscription_deleted_under_transactional_acks_takes_its_pending_ack_log_on_4_0_7(cli, pulsar_broker):
    """Committed transactions acknowledge on `subb` and `sub-a`; deleting a subscription (forced or not) or
    the whole topic deletes its pending-ack log too on 4.0.7, so the leak of apache/pulsar#11000 / #19719
    cannot be made here (docs/doctor.md; the finding is tested on the engine): `doctor` must then report no
    leaked log, and it lists the transactional subscriptions that remain."""
    broker = pulsar_broker
    url = ["--admin-url", broker.admin_url]
    broker.run_workload(seed=9301, txns=6, aborts=0, ops=6, prefix=LEAK)
    orders, plain = f"persistent://public/default/{LEAK}-orders", f"persistent://public/default/{LEAK}plain"
    listed = {e["pendingAckTopic"] for e in cli(["subscriptions", "-n", "public/default", *url, "-o", "json"]).json()}
    logs = {f"{orders}-subb__transaction_pending_ack", f"{orders}-sub-a__transaction_pending_ack"}
    assert logs <= listed and any(t.startswith(plain) for t in listed), listed

    def pending_ack_topics():
        status, topics = broker.rest("GET", "/admin/v2/namespaces/public/default/topics?includeSystemTopic=true")
        assert status == 200, topics
        return {t for t in topics if t.endswith("__transaction_pending_ack")}

    rest = f"/admin/v2/persistent/public/default/{LEAK}"
    assert broker.rest("DELETE", f"{rest}-orders/subscription/subb?force=true")[0] in (200, 204)
    assert broker.rest("DELETE", f"{rest}-orders/subscription/sub-a")[0] in (200, 204)
    assert broker.rest("DELETE", f"{rest}plain?force=true")[0] in (200, 204)
    left = pending_ack_topics()
    assert not left & logs and not [t for t in left if t.startswith(plain)], left
    result = cli(["doctor", "-n", "public/default", *url, "-o", "json"])
    assert result.exit_code in (0, 5, 6), result.stderr
    report = result.json()
    assert [c for c in report["checks"] if c["check"] == "leaked-pending-ack"] == [
        {"check": "leaked-pending-ack", "ran": True, "why": None}
    ]
    assert [f for f in report["findings"] if f["check"] == "leaked-pending-ack"] == []
    assert report["checked"]["subscriptions"] >= 1  # the other topics' transactional subscriptions remain


LEAKED = "drleaked"
# A subscription name that URL encoding changes (':' is %3A): unsubscribing encodes it once more than the
# pending-ack log's name was, so the broker deletes a log that does not exist and keeps the real one.
ENCODED_SUB = "audit:eu"


def _run_fix(cli, fix: str):
    """A printed fix, run as printed (shlex), through the CLI."""
    argv = shlex.split(fix)
    assert argv[0] == "pulsar-txn", fix
    return cli(argv[1:])


def test_subscription_whose_name_encoding_changes_leaks_its_pending_ack_log(cli, pulsar_broker):
    """Transactional acknowledgements on `audit:eu`, then the subscription is deleted (204): the broker names
    the log it deletes from the URL-encoded subscription name and encodes it again, so it misses the log
    (`...-audit:eu__transaction_pending_ack` stays; the broker wins: docs/real-broker-findings.md). `doctor`
    names that log (error, exit 6) with its ledgers and the missing subscription; its fix, `clean-pending-ack`,
    run as printed, deletes it and the finding goes."""
    _leaks_and_is_cleaned(cli, pulsar_broker)


@pytest.fixture
def broker_2_10_5():
    broker = harness.start_broker_or_fail({"managedLedgerMaxEntriesPerLedger": 50}, name="v2.10.5", version="2.10.5")
    yield broker
    harness.release_broker(broker)


def test_the_same_leak_on_2_10_5(cli, broker_2_10_5):
    """The oldest line here, before PIP-160, leaks the same way: its unsubscribe encodes the name too."""
    _leaks_and_is_cleaned(cli, broker_2_10_5)


def _leaks_and_is_cleaned(cli, broker) -> None:
    url = ["--admin-url", broker.admin_url]
    lines = broker.run_workload(seed=9311, txns=8, aborts=0, ops=6, prefix=LEAKED, subs=f"{ENCODED_SUB},subb")
    orders = f"persistent://public/default/{LEAKED}-orders"
    acked = {op["sub"] for r in lines if r.get("event") == "txn" for op in r["ops"] if op["op"] == "ack"}
    assert ENCODED_SUB in acked, acked
    log = f"{orders}-{ENCODED_SUB}__transaction_pending_ack"

    def pending_ack_topics():
        status, topics = broker.rest("GET", "/admin/v2/namespaces/public/default/topics?includeSystemTopic=true")
        assert status == 200, topics
        return {t for t in topics if t.endswith("__transaction_pending_ack") and LEAKED in t}

    assert log in pending_ack_topics()
    status, body = broker.rest("DELETE", f"/admin/v2/persistent/public/default/{LEAKED}-orders/subscription/audit%3Aeu")
    assert status in (200, 204), (status, body)
    status, subs = broker.rest("GET", f"/admin/v2/persistent/public/default/{LEAKED}-orders/subscriptions")
    assert status == 200 and ENCODED_SUB not in subs and "subb" in subs, subs
    assert log in pending_ack_topics()  # the leak: the subscription is gone, its log is not
    result = cli(["doctor", "-n", "public/default", *url, "-o", "json"])
    assert result.exit_code == 6, result.stderr
    [leak] = [f for f in result.json()["findings"] if f["check"] == "leaked-pending-ack" and LEAKED in f["subject"]]
    assert leak["subject"] == log and leak["severity"] == "error", leak
    stats, missing = leak["evidence"]
    assert missing["values"] == {"subscription": ENCODED_SUB, "exists": False}, missing
    encoded = f"/admin/v2/persistent/public/default/{LEAKED}-orders-audit%3Aeu__transaction_pending_ack"
    # The broker will not load the log for the admin API (4.0.7: 409; 2.10.5: 400); its managed ledger's metadata
    # names its ledgers.
    answered, internal = broker.rest("GET", f"{encoded}/internalStats")
    assert answered == (400 if broker.version == "2.10.5" else 409), (answered, internal)
    assert "Can not create transaction system topic" in internal["reason"], internal
    status, info = broker.rest("GET", f"{encoded}/internal-info")
    assert status == 200 and info["ledgers"], (status, info)
    ledgers = [ledger["ledgerId"] for ledger in info["ledgers"]]
    assert stats == {"endpoint": f"GET {encoded}/internal-info", "values": {"ledgers": ledgers}}, stats
    size = f"{len(ledgers)} ledger{'' if len(ledgers) == 1 else 's'}, and can block"
    assert leak["summary"].startswith(f"a pending-ack log whose subscription is gone: it keeps {size}"), leak
    [fix] = leak["fix"]
    argv = shlex.split(fix)
    assert argv[:4] == ["pulsar-txn", "clean-pending-ack", log, "--yes"] and broker.admin_url in argv, fix
    done = _run_fix(cli, fix)
    assert done.exit_code == 0, done.stderr
    assert log not in pending_ack_topics()
    after = cli(["doctor", "-n", "public/default", *url, "-o", "json"])
    assert after.exit_code in (0, 5, 6), after.stderr
    assert not [f for f in after.json()["findings"] if f["check"] == "leaked-pending-ack" and LEAKED in f["subject"]]
    assert f"{orders}-subb__transaction_pending_ack" in pending_ack_topics()  # the other log is untouched


# A transaction setting that changes nothing the other tests look at.
SETTING = "transactionBufferSnapshotMinTimeInMillis"


def test_cluster_brokers_that_disagree_and_the_doctor_measured(cli, pulsar_cluster, capsys):
    """Two brokers, broker-1 restarted with its own value of a transaction setting: `config` names each
    broker with its value. Prints the doctor's wall time and requests on the cluster (docs/figures.md)."""
    c = pulsar_cluster
    c.wait_coordinators_ready()
    url = ["--admin-url", c.admin_url]
    # something to read: topics, transactional subscriptions and 5 open transactions
    run, _ = harness.hold_workload(c, seed=9400, txns=4, aborts=1, ops=4, hold=5, prefix="drmeasure")
    try:
        started = time.monotonic()
        healthy = cli(["doctor", *url, "-o", "json"])
        wall = time.monotonic() - started
    finally:
        harness.finish_held(c, run)
    assert healthy.exit_code in (0, 5, 6), healthy.stderr
    report = healthy.json()
    assert report["checked"]["brokers"] == 2 and report["checked"]["coordinators"] >= 2
    assert report["checked"]["openTransactions"] >= 5 and report["checked"]["partitions"] >= 4
    assert not [f for f in report["findings"] if f["check"] == "config" and SETTING in f["summary"]]
    with capsys.disabled():
        print(
            f"\nmachine: load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}"
            f"\ndoctor on the 2-broker cluster: {wall:.2f} s wall, {report['requests']} requests, "
            f"{report['seconds']} s inside the run; checked {report['checked']}"
        )
    c.broker(1).extra_conf[SETTING] = "7000"
    try:
        c.restart_broker(1)
        c.wait_coordinators_ready()
        result = cli(["doctor", *url, "-o", "json"])
        assert result.exit_code in (5, 6), result.stderr
        [finding] = [f for f in result.json()["findings"] if f["check"] == "config" and SETTING in f["summary"]]
        assert finding["severity"] == "warning" and finding["subject"] == "brokers"
        values = finding["evidence"][0]["values"]["values"]
        assert sorted(values.values()) == ["5000", "7000"] and len(values) == 2, values
        assert c.broker(1).address in "".join(values) and c.broker(0).address in "".join(values)
    finally:
        c.broker(1).extra_conf.pop(SETTING, None)
        c.restart_broker(1)
        c.wait_coordinators_ready()
