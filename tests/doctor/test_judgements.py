"""The checks as pure judgements over a hand-made Reading: what an engine cannot be (two brokers, old
releases, answers without a field), and the config and downgrade checks on the engine."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.doctor import config, coordinators, stores, transactions
from pulsar_txn_cli.doctor.read import Reading, Scope
from tests.conftest import isolate
from tests.doctor.helpers import doctor, run_fix, sick_engine

pytestmark = pytest.mark.timeout(300)
NOW = 1_800_000_000_000


def reading(**fields) -> Reading:
    return Reading("cluster http://b1:8080", Scope(), NOW, "wall clock", **fields)


def _no_fix(key, value):
    return None


def test_brokers_that_disagree_are_named_each():
    r = reading(
        brokers={
            "http://b1:8080": {"runtime": {"transactionCoordinatorEnabled": "true", "transactionLogBatchedWriteEnabled": "true", "acknowledgmentAtBatchIndexLevelEnabled": "true"}},
            "http://b2:8080": {"runtime": {"transactionCoordinatorEnabled": "true", "transactionLogBatchedWriteEnabled": "false", "acknowledgmentAtBatchIndexLevelEnabled": "true"}},
        }
    )  # fmt: skip
    [finding] = config.config(r, _no_fix)
    assert finding.check == "config" and finding.severity == "warning" and finding.subject == "brokers"
    assert "transactionLogBatchedWriteEnabled" in finding.summary
    assert "http://b1:8080: true" in finding.summary and "http://b2:8080: false" in finding.summary
    assert finding.evidence[0]["values"]["values"] == {"http://b1:8080": "true", "http://b2:8080": "false"}


def test_config_that_cannot_work():
    r = reading(
        brokers={
            "http://b1:8080": {"runtime": {"transactionCoordinatorEnabled": "false"}},
            "http://b2:8080": {"runtime": {"transactionCoordinatorEnabled": "true", "systemTopicEnabled": "false", "allowAutoTopicCreation": "false", "transactionPendingAckBatchedWriteEnabled": "true", "acknowledgmentAtBatchIndexLevelEnabled": "false"}},
        }
    )  # fmt: skip
    found = {(f.subject, f.severity, f.summary.split("=")[0]) for f in config.config(r, _no_fix)}
    assert ("broker http://b1:8080", "error", "transactionCoordinatorEnabled") in found
    assert ("broker http://b2:8080", "error", "systemTopicEnabled") in found
    assert ("broker http://b2:8080", "warning", "allowAutoTopicCreation") in found
    assert (
        "broker http://b2:8080",
        "warning",
        "transactionPendingAckBatchedWriteEnabled on while acknowledgmentAtBatchIndexLevelEnabled",
    ) in found


def test_coordinator_not_found_and_2_10_advice():
    r = reading(
        tc_count=2,
        tc_stats={"0": {"state": "Ready"}},
        tc_errors={"1": "Transaction coordinator not found! coordinator id : 1"},
        owners={"0": "pulsar://b1:6650", "1": None},
        brokers={"http://b1:8080": {"runtime": {}, "version": "2.10.5"}},
    )
    [finding] = coordinators.coordinator_not_ready(r)
    assert finding.subject == "coordinator 1" and finding.severity == "error"
    assert "not loaded" in finding.summary and "no broker owns" in finding.summary
    assert "predates PIP-160" in finding.advice and "downgrade check --wait" in finding.advice
    assert finding.evidence[0]["values"]["error"].startswith("Transaction coordinator not found")
    assert coordinators.coordinator_not_ready(reading(tc_count=0))[0].severity == "error"


def test_hanging_past_timeout_and_before_3_2():
    meta = {"txnId": "(0,5)", "status": "OPEN", "openTimestamp": NOW - 120_000, "timeoutAt": 60_000, "producedPartitions": {}, "ackedPartitions": {"persistent://t/n/x": {"s": {}}}}  # fmt: skip
    r = reading(open_txns={"(0,5)": meta}, brokers={"http://b1:8080": {"runtime": {}, "version": "3.0.5"}})
    [finding] = transactions.hanging(r, None)
    assert finding.severity == "error" and "past its timeout" in finding.summary
    assert finding.fix == ["pulsar-txn unload --coordinator 0 --yes"]
    assert "predate Pulsar 3.2" in finding.advice
    young = dict(meta, openTimestamp=NOW - 20_000)
    assert transactions.hanging(reading(open_txns={"(0,5)": young}), None) == []  # under half its timeout
    [acks_only] = transactions.hanging(reading(open_txns={"(0,5)": young}), 10_000)
    assert acks_only.severity == "warning"  # holds no readers and its timeout ends it


def test_a_phantom_is_never_called_without_the_open_transactions():
    partitions = {"p": {"stats": {"state": "Ready", "maxReadPosition": "1:1", "ongoingTxnSize": 0}, "internal": {"lastConfirmedEntry": "1:5", "ledgers": [{"ledgerId": 1, "entries": 0}]}}}  # fmt: skip
    assert transactions.phantom_fence(reading(partitions=partitions, open_error="HTTP 500")) == []
    [finding] = transactions.phantom_fence(reading(partitions=partitions))
    assert finding.severity == "error" and "4 entries behind" in finding.summary


def test_stores_recovering_grace():
    stats = {"state": "Initializing", "recoverStartTime": NOW - 5_000, "recoverEndTime": 0}
    r = reading(partitions={"p": {"stats": stats, "internal": {}}})
    assert [f.severity for f in stores.buffer_not_ready(r)] == ["warning"]
    r = reading(partitions={"p": {"stats": dict(stats, recoverStartTime=NOW - 600_000), "internal": {}}})
    assert [f.severity for f in stores.buffer_not_ready(r)] == ["error"]


def test_a_store_whose_log_is_still_opening_is_a_warning_of_unknown_age():
    """Initializing with no recovery under way in its times (seen on 4.0.7 in the faults set): how long it has
    been so is unknown, so one sight of it is never an error; an Error is."""
    opening = {"state": "Initializing", "recoverStartTime": 0, "recoverEndTime": 0}
    r = reading(partitions={"p": {"stats": opening, "internal": {}}})
    [finding] = stores.buffer_not_ready(r)
    assert finding.severity == "warning" and "since when is unknown" in finding.summary, finding.summary
    sub = {"topic": "persistent://t/n/x", "subscription": "s", "stats": opening, "internal": {}}
    [finding] = stores.pending_ack_not_ready(reading(subscriptions=[sub]))
    assert finding.severity == "warning" and "since when is unknown" in finding.summary, finding.summary
    earlier = dict(sub, stats=dict(opening, recoverStartTime=NOW - 900_000, recoverEndTime=NOW - 899_000))
    assert [f.severity for f in stores.pending_ack_not_ready(reading(subscriptions=[earlier]))] == ["warning"]
    [finding] = coordinators.coordinator_not_ready(reading(tc_count=1, tc_stats={"0": opening}, owners={"0": "b"}))
    assert finding.severity == "warning" and "since when is unknown" in finding.summary, finding.summary
    failed = dict(sub, stats=dict(opening, state="Error"))
    assert [f.severity for f in stores.pending_ack_not_ready(reading(subscriptions=[failed]))] == ["error"]


def test_a_store_pulsar_never_opened_is_named_so():
    """After commits cut short by unloads, a 4.0.7 broker answered `state: None` for stores with a log
    (docs/real-broker-findings.md): the summary says the store was not opened, never "is None"."""
    unopened = {"state": "None", "ongoingTxnSize": 0, "recoverStartTime": 0, "recoverEndTime": 0}
    sub = {"topic": "persistent://t/n/x", "subscription": "s", "stats": unopened, "internal": {}}
    [finding] = stores.pending_ack_not_ready(reading(subscriptions=[sub]))
    assert finding.summary.startswith("the pending-ack store is not opened (state None): "), finding.summary
    assert finding.severity == "error" and finding.evidence[0]["values"]["state"] == "None"
    [finding] = stores.buffer_not_ready(reading(partitions={"p": {"stats": unopened, "internal": {}}}))
    assert finding.summary.startswith("the transaction buffer is not opened (state None)"), finding.summary


def test_a_leaked_log_read_from_its_metadata_is_named_by_its_ledgers():
    """A real 4.0.7 broker will not load a leaked pending-ack log (internalStats 409); its managed ledger's
    metadata (`internal-info`) names its ledgers but cannot count the last one's entries: the summary gives the
    ledgers and no made-up size, and the evidence names the endpoint the numbers came from."""
    log = "persistent://t/n/x-audit:eu__transaction_pending_ack"
    endpoint = "GET /admin/v2/persistent/t/n/x-audit%3Aeu__transaction_pending_ack/internal-info"
    orphan = {
        "topic": "persistent://t/n/x",
        "subscription": "audit:eu",
        "pendingAckTopic": log,
        "status": "orphan",
        "internal": {"ledgers": [{"ledgerId": 35}]},
        "internalEndpoint": endpoint,
        "error": None,
    }
    [finding] = stores.leaked_pending_ack(reading(subscriptions=[orphan]))
    assert finding.summary == (
        "a pending-ack log whose subscription is gone: it keeps 1 ledger, and can block deleting its "
        "namespace (apache/pulsar#11000, #19719)"
    )
    assert finding.evidence[0] == {"endpoint": endpoint, "values": {"ledgers": [35]}}
    counted = dict(orphan, internal={"ledgers": [{"ledgerId": 35}], "numberOfEntries": 7, "totalSize": 90})
    del counted["internalEndpoint"]
    [finding] = stores.leaked_pending_ack(reading(subscriptions=[counted]))
    assert "it keeps 1 ledger, 7 entries, 90 bytes, and can block" in finding.summary, finding.summary
    assert finding.evidence[0]["endpoint"].endswith("/internalStats")


@pytest.fixture
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def test_checks_that_cannot_run_are_listed_with_why(cli, tmp_path, isolated):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    assert (
        cli(["engine", "config", "set", "transactionCoordinatorEnabled", "false", "--engine-dir", directory]).exit_code
        == 0
    )
    code, report = doctor(cli, directory)
    ran = {c["check"]: c for c in report["checks"]}
    assert code == 6
    assert not ran["coordinator-not-ready"]["ran"] and "disabled" in ran["coordinator-not-ready"]["why"]
    assert ran["config"]["ran"]
    [finding] = [f for f in report["findings"] if f["check"] == "config"]
    assert finding["fix"] == [
        f"pulsar-txn engine config set transactionCoordinatorEnabled true --engine-dir {directory}"
    ]
    run_fix(cli, finding["fix"][0])
    assert doctor(cli, directory)[0] == 0


def test_batched_logs_without_batch_index_acks_on_the_engine(cli, tmp_path, isolated):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    for key, value in (
        ("transactionLogBatchedWriteEnabled", "true"),
        ("acknowledgmentAtBatchIndexLevelEnabled", "false"),
    ):
        assert cli(["engine", "config", "set", key, value, "--engine-dir", directory]).exit_code == 0
    code, report = doctor(cli, directory)
    [finding] = report["findings"]
    assert code == 5 and finding["check"] == "config" and "batch-index" in finding["summary"]
    run_fix(cli, finding["fix"][0])
    assert doctor(cli, directory)[0] == 0


def test_downgrade_state_as_findings(cli, tmp_path, isolated):
    """With a downgrade under way (a checkpoint), the logs that hold it back are findings with its causes."""
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    e = ["--engine-dir", directory]
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *e]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "40", "--topics", "2", *e]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", *e]).exit_code == 0
    check = cli(["downgrade", "check", "-o", "json", *e])
    assert check.exit_code == 5, check.stderr
    verdict = check.json()
    held = [i for i in verdict["coordinators"] + verdict["subscriptions"] if not i["clear"]]
    code, report = doctor(cli, directory)
    ran = {c["check"]: c for c in report["checks"]}
    assert ran["downgrade"]["ran"] is True
    ours = [f for f in report["findings"] if f["check"] == "downgrade"]
    labels = {
        f"coordinator {i['coordinatorId']}"
        if "coordinatorId" in i
        else f"subscription {i['subscription']!r} on {i['topic']}"
        for i in held
    }
    assert code == 5 and {f["subject"] for f in ours} == labels and len(ours) == len(held) > 0
    assert all(f["severity"] == "warning" and "downgrade WAIT" in f["summary"] for f in ours)
    assert {f["evidence"][1]["values"].get("cause") for f in ours} == {i["cause"] for i in held}


def test_before_3_2_abort_hanging_says_so_and_doctor_gives_what_works(cli, isolated):
    """A stand-in 3.0.5 broker (tests/admin/fakebroker.py: no broker of that line runs in the fast suite)."""
    from tests.admin.fakebroker import FakeBroker

    with FakeBroker(version="3.0.5") as fake:
        meta = fake.txn_meta("0", "7")
        fake.extra_routes.append(
            (r"/admin/v3/transactions/slowTransactions/-1", "GET", lambda query=None: {"(0,7)": meta})
        )
        url = ["--admin-url", fake.url]
        found = cli(["find-hanging", "--older-than", "1h", *url, "-o", "json"])
        assert found.exit_code == 0, found.stderr
        assert [t["txnId"] for t in found.json()["transactions"]] == ["(0,7)"]
        result = cli(["abort-hanging", "--older-than", "1h", "--execute", "--yes", *url])
        assert result.exit_code == 2 and "3.2" in result.stderr and "unload" in result.stderr, result.stderr
        report = cli(["doctor", "--older-than", "1h", *url, "-o", "json"]).json()
        [hanging] = [f for f in report["findings"] if f["check"] == "hanging-transaction"]
        assert hanging["fix"] == [f"pulsar-txn unload --coordinator 0 --yes --admin-url {fake.url}"]
        assert "predate Pulsar 3.2" in hanging["advice"]
