"""Geo-replication held by an open transaction, on two real clusters (marker `replication`).

Two standalone Pulsar 4.0.7 brokers, clusters `east` and `west`, each with the other registered as a cluster,
and a tenant and namespace (geo/txn) replicated to both. A client opens a transaction on east, produces to the
replicated topics and is SIGKILLed (timeout 1 h); committed transactions and plain messages follow it. East's
replicator to west reads only up to the transaction buffer's maxReadPosition, so west gets what was written
before the transaction and nothing after it on the partitions it wrote to. `doctor` on east names the
replicators it holds (`held-replicators`), `stuck-readers` names them among the held readers, `abort-hanging`
ends the transaction, and west then receives every committed and plain message, none twice, and none of the
aborted transaction's.
"""

from __future__ import annotations

import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor

import pytest

import harness
from workload_records import open_partitions, produced, received
from tests.conftest import isolate

pytestmark = pytest.mark.replication

EAST, WEST = "east", "west"
NS = "geo/txn"
PREFIX = "geo"
TOPICS = (f"{PREFIX}-orders", f"{PREFIX}plain")  # and f"{PREFIX}-part", 2 partitions (TxnWorkload's three)
REPLICATOR = f"pulsar.repl.{WEST}"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


@pytest.fixture(scope="module")
def geo():
    """east and west, started at once, replicating geo/txn to each other."""
    with ThreadPoolExecutor(2) as pool:
        futures = [pool.submit(harness.start_broker_or_fail, {"clusterName": name}, name) for name in (EAST, WEST)]
    brokers = []
    try:
        for future in futures:
            brokers.append(future.result())
        _replicate(*brokers)
        yield brokers
    finally:
        for broker in brokers:
            harness.release_broker(broker)


def _ok(answer, what: str, also=()) -> None:
    status, body = answer
    assert status in (200, 204, *also), f"{what}: HTTP {status} {body}"


def _replicate(east, west) -> None:
    for here, there, name in ((east, west, WEST), (west, east, EAST)):
        cluster = {"serviceUrl": there.admin_url, "brokerServiceUrl": there.service_url}
        _ok(here.rest("PUT", f"/admin/v2/clusters/{name}", cluster), f"{here.name}: register cluster {name}")
    for broker in (east, west):
        tenant = {"adminRoles": [], "allowedClusters": [EAST, WEST]}
        _ok(broker.rest("PUT", "/admin/v2/tenants/geo", tenant), f"{broker.name}: tenant geo")
        _ok(broker.rest("PUT", f"/admin/v2/namespaces/{NS}", {}), f"{broker.name}: namespace {NS}")
        _ok(broker.rest("POST", f"/admin/v2/namespaces/{NS}/replication", [EAST, WEST]), f"{broker.name}: replication")
        # Keep everything: the harness's brokers keep nothing consumed (retention 0), and on west the only
        # cursor of a topic, until a subscription exists, is west's own replicator to east, which skips (and
        # acknowledges at once) what came from east; a rolled-over ledger behind it would be gone before the
        # test reads it (seen on 4.0.7).
        retention = {"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}
        _ok(broker.rest("POST", f"/admin/v2/namespaces/{NS}/retention", retention), f"{broker.name}: retention")
    # The same topics on both sides before anything is written (west first: creating a partitioned topic
    # in a replicated namespace may create it on the remote clusters too, which then answers 409).
    for broker in (west, east):
        for topic in TOPICS:
            _ok(broker.rest("PUT", f"/admin/v2/persistent/{NS}/{topic}"), f"{broker.name}: {topic}", (409,))
        path = f"/admin/v2/persistent/{NS}/{PREFIX}-part/partitions"
        _ok(broker.rest("PUT", path, 2), f"{broker.name}: {PREFIX}-part", (409,))
        status, meta = broker.rest("GET", path)
        assert status == 200 and meta["partitions"] == 2, (broker.name, status, meta)


def _seed_values(seed: int, total: int, ops: int) -> set[str]:
    """The plain messages TxnWorkload writes to every topic before its transactions."""
    return {f"seed-{seed}-{i}" for i in range(max(4, total * ops // 3 + 2))}


def _replicator(broker, partition: str) -> tuple[str, str, str]:
    """(the replicator's mark-delete, maxReadPosition, the last written entry) of a partition on `broker`."""
    rest = partition.split("://", 1)[1]
    status, internal = broker.rest("GET", f"/admin/v2/persistent/{rest}/internalStats")
    assert status == 200, (partition, status, internal)
    status, buffer = broker.rest("GET", f"/admin/v3/transactions/transactionBufferStats/{rest}")
    assert status == 200, (partition, status, buffer)
    cursor = internal["cursors"].get(REPLICATOR)
    assert cursor is not None, f"{partition} has no replicator cursor {REPLICATOR}: {sorted(internal['cursors'])}"
    return cursor["markDeletePosition"], buffer["maxReadPosition"], internal["lastConfirmedEntry"]


def _waits(broker, partition: str) -> bool:
    """The replicator sent everything up to maxReadPosition, and entries lie after it."""
    done, fence, last = _replicator(broker, partition)
    return done == fence != last


def _drained(broker, partition: str) -> bool:
    done, _, last = _replicator(broker, partition)
    return done == last


def _until(what: str, done, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not done():
        assert time.monotonic() < deadline, f"not within {timeout} s: {what}"
        time.sleep(1)


def test_open_transaction_holds_replication_until_abort_hanging(cli, geo, request):
    east, west = geo
    url = ["--admin-url", east.admin_url]
    all_partitions = [f"persistent://{NS}/{t}" for t in TOPICS] + [
        f"persistent://{NS}/{PREFIX}-part-partition-{i}" for i in (0, 1)
    ]
    # 1. on east, a client opens a transaction, produces to the replicated topics, and dies (SIGKILL)
    killed_seed, ops = 9101, 6
    run, lines = harness.hold_workload(
        east, seed=killed_seed, txns=0, aborts=0, ops=ops, hold=1, prefix=PREFIX, namespace=NS, txn_timeout_sec=3600
    )
    run.proc.kill()
    run.proc.wait(60)
    for r in lines:  # left open (1-hour timeout), it would outlive a failed test
        if r.get("event") == "txn":
            path = f"/admin/v3/transactions/abortTransaction/{r['most']}/{r['least']}"
            request.addfinalizer(lambda path=path: east.rest("POST", path))
    [killed] = [f"({r['most']},{r['least']})" for r in lines if r.get("event") == "txn"]
    held = open_partitions(lines)
    hung = {v for values in produced(lines, "open").values() for v in values}
    assert held and hung, "the killed client produced nothing; change its seed"
    # 2. committed transactions and plain messages after it, on east
    after_seed = 9102
    after = east.run_workload(seed=after_seed, txns=4, aborts=0, ops=4, prefix=PREFIX, namespace=NS)
    committed = produced(after, "committed")
    assert committed, "the committed transactions produced nothing; change their seed"
    # 3. east's replicator to west sends everything up to maxReadPosition and stops there on the held partitions
    for partition in held:
        _until(f"{REPLICATOR} of {partition} waits at maxReadPosition", lambda p=partition: _waits(east, p))
    before = received(west, "repl-before", prefix=PREFIX, namespace=NS)
    for topic in {f"persistent://{NS}/{t}" for t in TOPICS} & held:  # non-partitioned: nothing after the txn
        assert set(before.get(topic, [])) == _seed_values(killed_seed, 1, ops), (topic, before.get(topic))
    assert not {v for values in before.values() for v in values} & hung
    # 4. doctor on east names the replicators held, with the transaction, its age and timeout
    time.sleep(5)
    result = cli(["doctor", *url, "--older-than", "5s", "-o", "json"])
    assert result.exit_code == 6, result.stderr
    findings = [f for f in result.json()["findings"] if f["check"] == "held-replicators"]
    assert {f["subject"] for f in findings} == held, findings
    for finding in findings:
        assert finding["severity"] == "error" and killed in finding["txnIds"], finding
        [replicator] = finding["evidence"][1]["values"]["replicators"]
        assert replicator["cluster"] == WEST and replicator["cursor"] == REPLICATOR and replicator["entriesHeld"] > 0
        [holder] = finding["evidence"][2]["values"]["holders"]
        assert holder["txnId"] == killed and holder["timeoutAt"] == 3_600_000 and holder["ageMs"] >= 5_000
        assert f"abort-transaction -m {killed[1:-1].split(',')[0]}" in " ".join(finding["fix"])
    # stuck-readers names the replicator among the held readers
    stuck = cli(["stuck-readers", *url, "-n", NS, "-o", "json"])
    assert stuck.exit_code == 0, stuck.stderr
    named = {p["topic"]: [r["cluster"] for r in p.get("replicators", [])] for p in stuck.json()["partitions"]}
    assert named == {p: [WEST] for p in held}, named
    # 5. abort-hanging ends it
    done = cli(["abort-hanging", *url, "--older-than", "5s", "--execute", "--yes", "--reason", "test", "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert {"txnId": killed, "aborted": True, "error": None} in done.json()["results"]
    # 6. the replicator sends the rest (the aborted messages and the markers are skipped, never sent)
    for partition in all_partitions:
        _until(f"{REPLICATOR} of {partition} reaches the end", lambda p=partition: _drained(east, p))
    report = cli(["doctor", *url, "--older-than", "5s", "-o", "json"]).json()
    assert not [f for f in report["findings"] if f["check"] == "held-replicators"], report["findings"]
    # 7. west has every committed and plain message, none twice, none of the aborted transaction's
    got = received(west, "repl-after", prefix=PREFIX, namespace=NS)
    for topic in [f"persistent://{NS}/{t}" for t in (*TOPICS, f"{PREFIX}-part")]:
        values = got.get(topic, [])
        assert [v for v, n in Counter(values).items() if n > 1] == [], topic
        expected = committed.get(topic, set()) | _seed_values(after_seed, 4, 4) | _seed_values(killed_seed, 1, ops)
        assert set(values) == expected, (topic, sorted(set(values) ^ expected))
