"""held-replicators: geo-replication stopped behind an open transaction. As judgements over hand-made
readings (what the engine cannot be: replicators that lag for their own reasons, a custom replicatorPrefix,
Pulsar before 3.2), and on the engine's replication-held fault: found, named by stuck-readers, and the
printed fix lets the replicator send everything but the aborted transaction's messages."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.doctor import replication
from pulsar_txn_cli.doctor.read import Reading, Scope
from pulsar_txn_cli.stuck_readers import replicators
from tests.conftest import isolate
from tests.doctor.helpers import TOPIC0, advance, doctor, run_fix, sick_engine

pytestmark = pytest.mark.timeout(300)
NOW = 1_800_000_000_000
TOPIC = "persistent://geo/txn/orders"
LEDGERS = [{"ledgerId": 3, "entries": 10}, {"ledgerId": 4, "entries": 0}]  # 4 is open: its count comes from LCE


def _cursor(md: str) -> dict:
    ledger, entry = md.split(":")
    return {"markDeletePosition": md, "readPosition": f"{ledger}:{int(entry) + 1}"}


def _reading(cursors: dict, *, opened=NOW - 2_000_000, timeout=3_600_000, runtime=None, version="4.0.7") -> Reading:
    internal = {"lastConfirmedEntry": "4:5", "ledgers": LEDGERS, "cursors": cursors}
    stats = {"state": "Ready", "maxReadPosition": "3:7", "ongoingTxnSize": 1}
    meta = {
        "txnId": "(1,42)",
        "status": "OPEN",
        "openTimestamp": opened,
        "timeoutAt": timeout,
        "producedPartitions": {TOPIC: {"startPosition": "3:8", "aborted": False}},
        "ackedPartitions": {},
    }
    return Reading(
        "cluster http://east:8080",
        Scope(),
        NOW,
        "wall clock",
        open_txns={"(1,42)": meta},
        partitions={TOPIC: {"stats": stats, "internal": internal}},
        brokers={"http://east:8080": {"runtime": runtime or {}, "version": version}},
    )


def test_a_replicator_caught_up_to_max_read_is_named_with_its_holder_age_and_timeout():
    cursors = {"pulsar.repl.west": _cursor("3:7"), "pulsar.repl.south": _cursor("3:7"), "sub-a": _cursor("3:2")}
    [finding] = replication.held_replicators(_reading(cursors), None)
    assert finding.check == "held-replicators" and finding.severity == "error" and finding.subject == TOPIC
    assert finding.txn_ids == ["(1,42)"] and finding.fix == ["pulsar-txn abort-transaction -m 1 -l 42 --yes"]
    assert "replication to south, west stops at maxReadPosition 3:7: 8 entries" in finding.summary
    internal = finding.evidence[1]["values"]
    assert internal["lastConfirmedEntry"] == "4:5"
    # entries after 3:7 up to 4:5: 3:8, 3:9 and 4:0..4:5; a subscription cursor is not a replicator
    assert [
        (r["cluster"], r["cursor"], r["entriesHeld"], r["replicationBacklog"]) for r in internal["replicators"]
    ] == [
        ("south", "pulsar.repl.south", 8, 8),
        ("west", "pulsar.repl.west", 8, 8),
    ]
    [holder] = finding.evidence[2]["values"]["holders"]
    assert holder == {
        "txnId": "(1,42)",
        "status": "OPEN",
        "startPosition": "3:8",
        "ageMs": 2_000_000,
        "timeoutAt": 3_600_000,
    }


def test_a_replicator_that_lags_on_its_own_counts_only_what_the_transaction_keeps():
    """Its backlog starts before maxReadPosition (a slow or unreachable remote); only what lies after
    maxReadPosition is the transaction's doing."""
    [west] = replicators(
        {"lastConfirmedEntry": "4:5", "ledgers": LEDGERS, "cursors": {"pulsar.repl.west": _cursor("3:1")}}, "3:7"
    )
    assert west["replicationBacklog"] == 14 and west["entriesHeld"] == 8


def test_nothing_held_when_the_replicator_is_past_everything_or_the_head_is_young():
    done = {"pulsar.repl.west": _cursor("4:5")}  # its backlog was cleared: nothing left to send
    assert replication.held_replicators(_reading(done), None) == []
    young = _reading({"pulsar.repl.west": _cursor("3:7")}, opened=NOW - 60_000)  # under half its timeout
    assert replication.held_replicators(young, None) == []
    assert len(replication.held_replicators(young, 30_000)) == 1  # --older-than 30s makes it hanging
    assert replication.held_replicators(_reading({"sub-a": _cursor("3:7")}), None) == []  # no replicator at all


def test_the_brokers_replicator_prefix_names_the_cursors():
    cursors = {"geo.west": _cursor("3:7"), "pulsar.repl.south": _cursor("3:7")}
    [finding] = replication.held_replicators(_reading(cursors, runtime={"replicatorPrefix": "geo"}), None)
    assert [r["cluster"] for r in finding.evidence[1]["values"]["replicators"]] == ["west"]


def test_before_3_0_replicators_are_not_held_and_the_check_says_why():
    """2.10.5's and 2.11.0's replicators read past maxReadPosition (their jars have no such bound)."""
    old = _reading({"pulsar.repl.west": _cursor("3:7")}, version="2.11.0")
    assert "predate Pulsar 3.0" in replication.not_held_here(old) and "2.11.0" in replication.not_held_here(old)
    assert replication.not_held_here(_reading({}, version="3.0.0")) is None
    assert replication.not_held_here(_reading({}, version="5.0.0-M1")) is None


def test_before_3_2_the_fix_is_the_coordinators_reload():
    [finding] = replication.held_replicators(_reading({"pulsar.repl.west": _cursor("3:7")}, version="3.0.5"), None)
    assert finding.fix == ["pulsar-txn unload --coordinator 1 --yes"] and "predate Pulsar 3.2" in finding.advice


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def test_engine_fault_found_named_by_stuck_readers_and_fixed_as_printed(cli, tmp_path, isolated):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, "replication-held", "--txn-timeout-ms", "3600000")
    advance(cli, directory, "2m")
    code, report = doctor(cli, directory, "--older-than", "1m")
    [finding] = [f for f in report["findings"] if f["check"] == "held-replicators"]
    assert code == 6 and finding["subject"] == TOPIC0 and finding["severity"] == "error"
    [held] = finding["evidence"][1]["values"]["replicators"]
    # the open transaction's own message and the 3 plain messages written after it
    assert held["cluster"] == "remote" and held["cursor"] == "pulsar.repl.remote" and held["entriesHeld"] == 4
    assert held["markDeletePosition"] == finding["evidence"][0]["values"]["maxReadPosition"]
    [holder] = finding["evidence"][2]["values"]["holders"]
    assert holder["ageMs"] == 120_000 and holder["timeoutAt"] == 3_600_000 and finding["txnIds"] == [holder["txnId"]]

    stuck = cli(["stuck-readers", "--engine-dir", directory, "-t", TOPIC0, "-o", "json"]).json()
    [partition] = stuck["partitions"]
    assert [(r["cluster"], r["entriesHeld"]) for r in partition["replicators"]] == [("remote", 4)]
    text = cli(["stuck-readers", "--engine-dir", directory, "-t", TOPIC0]).stdout
    assert f"replication of {TOPIC0} to remote is held too: 4 entries not replicated" in text

    for command in finding["fix"]:
        run_fix(cli, command)
    code, after = doctor(cli, directory, "--older-than", "1m")
    assert code == 0 and after["findings"] == []
    stats = _internal_stats(directory, TOPIC0)
    # the abort marker moved maxReadPosition to the end: the replicator sent everything it may
    assert stats["cursors"]["pulsar.repl.remote"]["markDeletePosition"] == stats["lastConfirmedEntry"]
    assert cli(["engine", "verify", "--engine-dir", directory]).exit_code == 0


def _internal_stats(directory, topic: str) -> dict:
    """The topic's internal stats through PulsarAdmin on the engine's own transport (the REST path a broker has)."""
    from pulsar_txn_cli.admin.client import PulsarAdmin
    from pulsar_txn_cli.engine.transport import EngineTransport
    from pulsar_txn_cli.engine.broker import Engine

    engine = Engine.open(str(directory))
    try:
        admin = PulsarAdmin(EngineTransport(target=None, engine=engine), None)
        return admin.get(f"/admin/v2/persistent/{topic.split('://', 1)[1]}/internalStats")
    finally:
        engine.close()


def test_stuck_readers_asks_the_prefix_once_and_falls_back_to_pulsars_default(cli, tmp_path, isolated):
    """The runtime configuration needs a superuser: where it is refused, the cursors are named by `pulsar.repl`."""
    from pulsar_txn_cli.admin.client import PulsarAdmin
    from pulsar_txn_cli.engine.transport import EngineTransport
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.errors import ConnectionFailed
    from pulsar_txn_cli.stuck_readers import find_stuck_readers

    directory = tmp_path / "engine"
    sick_engine(cli, directory, "replication-held", "--txn-timeout-ms", "3600000")
    asked = []

    class Refusing(PulsarAdmin):
        def runtime_config(self, broker_url=None):
            asked.append(broker_url)
            raise ConnectionFailed("HTTP 401: Unauthorized", status=401)

    engine = Engine.open(str(directory))
    try:
        admin = Refusing(EngineTransport(target=None, engine=engine), None)
        report = find_stuck_readers(admin, namespace="public/default", now_ms=admin.clock()[0])
    finally:
        engine.close()
    [partition] = report["partitions"]
    assert partition["topic"] == TOPIC0 and [r["cursor"] for r in partition["replicators"]] == ["pulsar.repl.remote"]
    assert asked == [None]  # once, for the one held partition with cursors

    class Old(Refusing):
        def version(self, broker_url=None):
            return "2.11.0"

    engine = Engine.open(str(directory))
    try:
        admin = Old(EngineTransport(target=None, engine=engine), None)
        report = find_stuck_readers(admin, namespace="public/default", now_ms=admin.clock()[0])
    finally:
        engine.close()
    [partition] = report["partitions"]
    assert "replicators" not in partition and asked == [None]  # a 2.11.0 replicator is not held: nothing asked
