"""stuck-readers against a real Pulsar broker (the integration suite's harness).

A workload holds transactions open after producing; every partition they wrote to must be
reported held, with those transactions as holders; after they are aborted, none is.
"""

from __future__ import annotations

import time

import pytest

import harness

pytestmark = pytest.mark.integration

PREFIX = "stuckrd"


@pytest.fixture
def broker(pulsar_broker):
    """The session's broker: its topics are told apart by PREFIX."""
    return pulsar_broker


def _produced(lines) -> dict[str, set[str]]:
    """partition -> txn ids of the held transactions that produced to it (msgId l:e:p gives p)."""
    found: dict[str, set[str]] = {}
    for record in lines:
        if record.get("event") != "txn" or record.get("outcome") != "open":
            continue
        txn = f"({record['most']},{record['least']})"
        for op in record["ops"]:
            if op["op"] != "produce":
                continue
            topic = op["topic"]
            partition = int(op["msgId"].split(":")[2])
            name = f"{topic}-partition-{partition}" if partition >= 0 else topic
            found.setdefault(name, set()).add(txn)
    return found


def test_real_broker_held_partitions_and_release(cli, broker):
    run, lines = harness.hold_workload(broker, seed=4242, txns=0, aborts=0, ops=8, hold=3, parallel=1, prefix=PREFIX)
    try:
        produced = _produced(lines)
        assert produced, "the held transactions produced nothing; change the seed"
        result = cli(["stuck-readers", "-n", "public/default", "--admin-url", broker.admin_url, "-o", "json"])
        assert result.exit_code == 0, result.stderr
        report = result.json()
        # A broker has no clock endpoint (it answers the engine's path with 404): its ages are on the wall clock.
        assert report["clock"] == "wall clock"
        held = {p["topic"]: p for p in report["partitions"] if p.get("held")}
        assert set(produced) <= set(held), (produced, report)
        for topic, txns in produced.items():
            partition = held[topic]
            assert {h["txnId"] for h in partition["holders"]} >= txns
            assert partition["entriesBehind"] > 0
            head = partition["holders"][0]
            assert head["head"] and head["startPosition"] is not None
            assert 0 <= head["ageMs"] < 600_000  # opened moments ago, on the broker's (wall) clock
            assert f"abort-transaction -m {head['txnId'][1:-1].split(',')[0]}" in head["fix"][1]
    finally:
        harness.finish_held(broker, run)
    # The coordinator writes the abort markers asynchronously: wait for them (at most 60 s).
    deadline = time.monotonic() + 60
    while True:
        after = cli(["stuck-readers", "-n", "public/default", "--admin-url", broker.admin_url, "-o", "json"])
        assert after.exit_code == 0, after.stderr
        still = [p["topic"] for p in after.json()["partitions"] if p["topic"].split("/")[-1].startswith(PREFIX)]
        if not still or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    assert still == []
