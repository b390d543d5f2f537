"""The doctor's store checks on a real broker whose bookie answers slowly (marker `doctor`).

A one-broker 4.0.7 cluster (cluster.py) reaches its bookie only through a Toxiproxy proxy (toxiproxy.py), as the
`faults` set's does. A topic with open transactions and transactional subscriptions is unloaded, the proxy then
holds every answer of the bookie back (a `latency` toxic of 20 s, below BookKeeper's 30 s request timeout), and a
read loads the topic again. Loading it needs no bookie read (its ledgers and cursors were closed cleanly), but
the transaction buffer's and the pending-ack stores' recoveries read their logs: they stay `Initializing`, a
recovery under way, for as long as the bookie is slow. `doctor` names them (`buffer-not-ready`,
`pending-ack-not-ready`: warnings while under 60 s) with the broker's own numbers; once the bookie answers
again, the printed fix (the topic's unload), run as printed, leaves nothing to find.
"""

from __future__ import annotations

import shlex
import time

import pytest

import cluster as cluster_module
import harness
from tests.conftest import isolate
from toxiproxy import Toxiproxy

pytestmark = pytest.mark.doctor

TXN = "/admin/v3/transactions"
# Below BookKeeper's request timeout (bookkeeperClientTimeoutInSeconds, 30 s): reads are late, never failed.
LATENCY_MS = 20_000


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


class SlowBookie:
    def __init__(self, cluster, proxy):
        self.cluster, self.proxy = cluster, proxy


@pytest.fixture(scope="module")
def slow(tmp_path_factory):
    base = tmp_path_factory.mktemp("drstores")
    toxi = Toxiproxy(base / "toxiproxy.log")
    # Logs that keep what they replay: no pending-ack index trims them, no buffer snapshot moves past them.
    c = cluster_module.PulsarCluster(
        name="drstores",
        brokers=1,
        extra_conf={
            "transactionPendingAckLogIndexMinLag": 100_000,
            "transactionBufferSnapshotMaxTransactionCount": 100_000,
            "transactionBufferSnapshotMinTimeInMillis": 3_600_000,
        },
    )
    proxy = toxi.proxy("bookie", c.bookie_port)
    c.broker_bookie_port = proxy.port
    try:
        try:
            c.start()
        except Exception as exc:  # noqa: BLE001 - the set needs this cluster
            pytest.fail(f"could not start the one-broker cluster behind a bookie proxy:\n{exc}", pytrace=False)
        yield SlowBookie(c, proxy)
    finally:
        c.cleanup()
        toxi.stop()


def _rest(c, topic: str) -> str:
    return f"public/default/{topic}"


def _held_in_recovery(c, path: str, timeout: float = 15) -> dict:
    """The stats at `path` once they show a recovery under way (Initializing, recoverStartTime set)."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        status, last = c.rest("GET", path)
        if status == 200 and last.get("state") == "Initializing" and last.get("recoverStartTime"):
            return last
        time.sleep(0.2)
    raise AssertionError(f"{path} never showed a recovery under way: {last}")


def _slow_reload(slow, topic: str) -> None:
    """Unload the topic, make the bookie slow, and load the topic again with a read."""
    c = slow.cluster
    status, body = c.rest("PUT", f"/admin/v2/persistent/{_rest(c, topic)}/unload")
    assert status in (200, 204), (status, body)
    slow.proxy.toxic("latency", latency=LATENCY_MS)
    started = time.monotonic()
    status, body = c.rest("GET", f"/admin/v2/persistent/{_rest(c, topic)}/stats", timeout=60)
    assert status == 200, (status, body)
    assert time.monotonic() - started < 10, "loading the topic itself waited for the bookie"


def _doctor(cli, c, topic: str) -> tuple[int, list[dict]]:
    result = cli(["doctor", "--admin-url", c.admin_url, "-t", f"persistent://public/default/{topic}", "-o", "json"])
    assert result.exit_code in (0, 5, 6), result.stderr
    return result.exit_code, result.json()["findings"]


def _run_fix(cli, fix: str):
    argv = shlex.split(fix)
    assert argv[0] == "pulsar-txn", fix
    return cli(argv[1:])


def _cleared(cli, c, topic: str, check: str, timeout: float = 90) -> list[dict]:
    """The findings of `check` left after the fix, once none is left or `timeout` passed."""
    deadline = time.monotonic() + timeout
    while True:
        _, findings = _doctor(cli, c, topic)
        left = [f for f in findings if f["check"] == check]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(2)


def _fix_after_the_bookie_recovers(slow, cli, topic: str, finding: dict, check: str) -> None:
    c = slow.cluster
    [fix] = finding["fix"]
    argv = shlex.split(fix)
    assert argv[:4] == ["pulsar-txn", "unload", "-t", f"persistent://public/default/{topic}"], fix
    assert "--yes" in argv and c.admin_url in argv, fix
    slow.proxy.clear()
    done = _run_fix(cli, fix)
    assert done.exit_code == 0, done.stderr
    assert _cleared(cli, c, topic, check) == []


def test_pending_ack_store_held_in_recovery_by_a_slow_bookie(cli, slow):
    c = slow.cluster
    topic = "drslowpa-orders"
    run, lines = harness.hold_workload(c, seed=9501, txns=6, aborts=0, ops=6, hold=2, prefix="drslowpa")
    try:
        ops = [op for r in lines if r.get("event") == "txn" for op in r["ops"]]
        subs = sorted({op["sub"] for op in ops if op["op"] == "ack" and op["topic"].endswith(f"/{topic}")})
        assert subs, "no transactional acknowledgement on the topic; change the seed"
        _slow_reload(slow, topic)
        held = {s: _held_in_recovery(c, f"{TXN}/pendingAckStats/{_rest(c, topic)}/{s}") for s in subs}
        code, findings = _doctor(cli, c, topic)
        found = {f["subject"]: f for f in findings if f["check"] == "pending-ack-not-ready"}
        assert code == 5, findings  # warnings only: recoveries under way for less than 60 s
        for sub in subs:
            finding = found[f"persistent://public/default/{topic} / {sub}"]
            stats, internal = finding["evidence"]
            values = stats["values"]
            assert finding["severity"] == "warning", finding
            assert stats["endpoint"] == f"GET {TXN}/pendingAckStats/{_rest(c, topic)}/{sub}", stats
            assert values["state"] == "Initializing" and values["recoverStartTime"] == held[sub]["recoverStartTime"]
            assert 0 <= values["recoveringForMs"] < 60_000, values
            assert finding["summary"].startswith("the pending-ack store is Initializing, recovering for "), finding
            assert "transactional acknowledgements on this subscription wait" in finding["summary"]
        print(f"\npending-ack stores held in recovery by a {LATENCY_MS} ms bookie: {sorted(found)}")
        _fix_after_the_bookie_recovers(
            slow, cli, topic, found[f"persistent://public/default/{topic} / {subs[0]}"], "pending-ack-not-ready"
        )
        for sub in subs:
            status, stats = c.rest("GET", f"{TXN}/pendingAckStats/{_rest(c, topic)}/{sub}")
            assert status == 200 and stats["state"] == "Ready", stats
    finally:
        slow.proxy.clear()
        harness.finish_held(c, run)


def test_transaction_buffer_held_in_recovery_by_a_slow_bookie(cli, slow):
    c = slow.cluster
    topic = "drslowtb-orders"
    run, lines = harness.hold_workload(c, seed=9502, txns=4, aborts=0, ops=4, hold=2, prefix="drslowtb")
    try:
        _slow_reload(slow, topic)
        held = _held_in_recovery(c, f"{TXN}/transactionBufferStats/{_rest(c, topic)}")
        code, findings = _doctor(cli, c, topic)
        partition = f"persistent://public/default/{topic}"
        [finding] = [f for f in findings if f["check"] == "buffer-not-ready" and f["subject"] == partition]
        values = finding["evidence"][0]["values"]
        assert code == 5 and finding["severity"] == "warning", findings
        assert finding["evidence"][0]["endpoint"] == f"GET {TXN}/transactionBufferStats/{_rest(c, topic)}"
        assert values["state"] == "Initializing" and values["recoverStartTime"] == held["recoverStartTime"], values
        assert 0 <= values["recoveringForMs"] < 60_000, values
        assert finding["summary"].startswith("the transaction buffer is Initializing, recovering for "), finding
        assert "readers and transactional producers wait" in finding["summary"]
        print(f"\nbuffer held in recovery by a {LATENCY_MS} ms bookie: {finding['summary']}")
        _fix_after_the_bookie_recovers(slow, cli, topic, finding, "buffer-not-ready")
        status, stats = c.rest("GET", f"{TXN}/transactionBufferStats/{_rest(c, topic)}")
        assert status == 200 and stats["state"] == "Ready", stats
    finally:
        slow.proxy.clear()
        harness.finish_held(c, run)
