"""Every admin command over REST against the stand-in broker (fakebroker.py), through the real CLI."""

import pytest

from tests.admin.conftest import TOKEN, isolated_env  # noqa: F401 - autouse: no target from the machine
from tests.admin.fakebroker import FakeBroker
from tests.conftest import assert_no_crash


@pytest.fixture
def broker():
    with FakeBroker(token=TOKEN) as fake:
        yield fake


@pytest.fixture
def run(cli, broker):
    def run(*args, input=None):
        return cli([*args, "--admin-url", broker.url, "--token", TOKEN], input=input)

    return run


def ok(result):
    assert result.exit_code == 0, result.stderr
    return result


def test_coordinators_list(run, broker):
    result = ok(run("coordinators-list", "-o", "json"))
    assert result.json() == [
        {"id": 0, "brokerServiceUrl": "pulsar://127.0.0.1:6650", "webServiceUrl": broker.url},
        {"id": 1, "brokerServiceUrl": "pulsar://127.0.0.1:6650", "webServiceUrl": broker.url},
    ]
    assert f"target: cluster {broker.url}" in result.stderr


def test_coordinator_stats_all_and_one(run, broker):
    every = ok(run("coordinator-stats", "-o", "json")).json()
    assert set(every) == {"0", "1"} and every["0"]["state"] == "Ready"
    one = ok(run("coordinator-stats", "-c", "1", "-o", "json")).json()
    assert one == every["1"]
    lines = ok(run("coordinator-stats", "-o", "jsonl")).jsonl()
    assert [line["coordinatorId"] for line in lines] == [0, 1]
    table = ok(run("coordinator-stats")).stdout
    assert "RECOVER START" in table and "2026-01-01T" in table


def test_coordinator_internal_stats(run):
    data = ok(run("coordinator-internal-stats", "-c", "0", "-o", "json")).json()
    assert data["transactionLogStats"]["managedLedgerName"] == "pulsar/system/persistent/__transaction_log_0"
    assert "transaction.subscription" in ok(run("coordinator-internal-stats", "-c", "0")).stdout


def test_pending_ack_stats_and_internal_stats(run):
    stats = ok(run("pending-ack-stats", "-t", "my-topic", "-s", "my-sub", "-l", "-o", "json")).json()
    assert stats["state"] == "Ready" and stats["lowWaterMarks"] == {"0": 0}
    internal = ok(
        run(
            "pending-ack-internal-stats",
            "-t",
            "persistent://public/default/my-topic",
            "--subscription-name",
            "my-sub",
            "-o",
            "json",
        )
    ).json()
    assert internal["pendingAckLogStats"]["managedLedgerName"].endswith("my-topic-my-sub__transaction_pending_ack")


def test_missing_subscription_is_exit_4_with_reason(run):
    result = run("pending-ack-stats", "-t", "my-topic", "-s", "nope")
    assert result.exit_code == 4
    assert "Subscription not found" in result.stderr
    assert_no_crash(result)


def test_transaction_metadata_both_forms(run):
    a = ok(run("transaction-metadata", "(0,7)", "-o", "json")).json()
    b = ok(run("transaction-metadata", "-m", "0", "-l", "7", "-o", "json")).json()
    assert a == b and a["txnId"] == "(0,7)"
    assert run("transaction-metadata", "(0,7)", "-m", "1").exit_code == 2
    assert run("transaction-metadata", "zero").exit_code == 2


def test_slow_transactions(run):
    data = ok(run("slow-transactions", "-t", "10s", "-o", "json")).json()
    assert list(data) == ["(0,7)"]
    assert ok(run("slow-transactions", "-t", "1m", "-o", "jsonl")).jsonl()[0]["txnId"] == "(0,7)"
    assert run("slow-transactions", "-t", "soon").exit_code == 2


def test_transaction_buffer_stats_and_snapshot_error(run):
    assert ok(run("transaction-buffer-stats", "-t", "my-topic", "-o", "json")).json()["maxReadPosition"] == "30:4"
    result = run("buffer-snapshot-internal-stats", "-t", "my-topic")
    assert result.exit_code == 4 and "405" in result.stderr


def test_subscriptions_resolves_dashes_and_orphans(run):
    result = ok(run("subscriptions", "-o", "json"))
    data = result.json()
    found = {(d["topic"], d["subscription"], d["status"]) for d in data}
    assert ("persistent://public/default/a-b", "c-d", "ok") in found  # not a / b-c-d: topic a has no such subscription
    assert ("persistent://public/default/my-topic", "my-sub", "ok") in found
    assert [d["status"] for d in data if d["pendingAckTopic"].endswith("/gone-sub__transaction_pending_ack")] == [
        "orphan"
    ]
    assert "orphan" in result.stderr


def _rows(table: str, section: str | None = None) -> list[list[str]]:
    """The cells of a plain table's rows (under SECTION's title when there are several), split on 2+ spaces."""
    import re

    lines = table.splitlines()
    start = lines.index(section) + 1 if section else 0
    rows = []
    for line in lines[start + 2 :]:  # the header and its rule
        if not line.strip():
            break
        rows.append(re.split(r"\s{2,}", line.strip()))
    return rows


def test_every_command_renders_the_same_answer_in_all_formats(run, broker):
    """Each format says the same thing: the JSON document, its JSON lines, and the table's rows and cells."""

    def forms(*args):
        return tuple(ok(run(*args, "-o", fmt)) for fmt in ("table", "json", "jsonl"))

    table, doc, lines = forms("coordinators-list")
    assert lines.jsonl() == doc.json() and [c["id"] for c in doc.json()] == [0, 1]
    assert _rows(table.stdout) == [[str(i), "pulsar://127.0.0.1:6650", broker.url] for i in (0, 1)]

    table, doc, lines = forms("coordinator-stats")
    assert lines.jsonl() == [{"coordinatorId": int(k), **v} for k, v in doc.json().items()]
    assert [row[:5] for row in _rows(table.stdout)] == [[str(i), "Ready", "7", "0", "1"] for i in (0, 1)]

    table, doc, lines = forms("subscriptions")
    assert lines.jsonl() == doc.json()
    assert _rows(table.stdout) == [[d["topic"], d["subscription"], d["status"]] for d in doc.json()]
    assert [d["status"] for d in doc.json()] == ["ok", "orphan", "ok"]

    table, doc, lines = forms("metrics")
    assert lines.jsonl() == doc.json() and len(doc.json()) == 1
    assert _rows(table.stdout) == [["localhost", "tc", "4", "10", "500", "2", "25%", "0%", "75%", "0%"]]

    table, doc, lines = forms("get-txn-tc-batch-log-stat")
    assert doc.json()["txnTcBatchLogEnabled"] is False and doc.json()["coodinatorArray"] == [{"0": False}, {"1": False}]
    assert [(line["coordinatorId"], line["txnTcBatchLogEnabled"], line["effective"]) for line in lines.jsonl()] == [
        (0, False, False),
        (1, False, False),
    ]
    assert all(line["target"] == doc.json()["target"] for line in lines.jsonl())
    assert [row[:5] for row in _rows(table.stdout, "coordinators")] == [
        [str(i), broker.url, "Ready", "no", "no"] for i in (0, 1)
    ]
    assert "effective in 0 of 2 coordinators, off in 2" in table.stdout

    table, doc, lines = forms("get-txn-pending-ack-batch-log-stat")
    assert doc.json()["txnPendingAckBatchLogEnabled"] is False
    assert [(line["topic"], line["subscription"], line["effective"]) for line in lines.jsonl()] == [
        ("persistent://public/default/a-b", "c-d", False),
        ("persistent://public/default/gone", "sub", None),
        ("persistent://public/default/my-topic", "my-sub", False),
    ]
    assert [row[:5] for row in _rows(table.stdout, "subscriptions")] == [
        ["persistent://public/default/a-b", "c-d", "Ready", "no", "no"],
        ["persistent://public/default/gone", "sub", "-", "no", "-"],
        ["persistent://public/default/my-topic", "my-sub", "Ready", "no", "no"],
    ]
    assert "effective in 0 of 3 subscriptions, off in 2, unknown in 1" in table.stdout


def test_metrics_summary_and_delay_warning(run):
    result = ok(run("metrics", "-o", "json"))
    [tc] = result.json()
    assert (
        tc["log"] == "tc"
        and tc["batches"] == 4
        and tc["avgRecordsPerBatch"] == 10.0
        and tc["avgBytesPerBatch"] == 500.0
    )
    assert tc["flushTriggerShare"] == {"maxRecords": 0.25, "maxSize": 0.0, "maxDelay": 0.75, "largeData": 0.0}
    assert tc["avgOldestRecordDelayMs"] == 2.0 and tc["delayHistogramBlind"] is True
    assert "buckets are in seconds" in result.stderr


def test_set_then_stat_then_reload_coordinators(run, broker):
    before = ok(run("get-txn-tc-batch-log-stat", "-o", "json")).json()
    assert before["txnTcBatchLogEnabled"] is False
    assert before["coodinatorArray"] == [{"0": False}, {"1": False}]
    result = ok(run("set-txn-tc-batch-log", "--enable", "-o", "json"))
    assert broker.dynamic == {"transactionLogBatchedWriteEnabled": "true"}
    assert "only when its store is reopened" in result.stderr
    assert result.json()["previous"] is False
    pending = ok(run("get-txn-tc-batch-log-stat", "-o", "json")).json()
    assert pending["txnTcBatchLogEnabled"] is True
    assert pending["coodinatorArray"] == [{"0": False}, {"1": False}]  # opened before the change
    assert "not reopened since the change" in pending["coordinators"][0]["reason"]
    broker.unload("pulsar", "system", "transaction_coordinator_assign-partition-1")  # someone reloads coordinator 1
    partial = ok(run("get-txn-tc-batch-log-stat", "-o", "json")).json()
    assert partial["coodinatorArray"] == [{"0": False}, {"1": True}]
    reloaded = ok(run("set-txn-tc-batch-log", "--enable", "true", "--reload", "--yes", "-o", "json"))
    said = reloaded.json()
    assert (said["setting"], said["value"], said["previous"]) == ("transactionLogBatchedWriteEnabled", True, True)
    assert [(r["topic"], r["unloaded"], r["error"]) for r in said["reload"]] == [
        (f"persistent://pulsar/system/transaction_coordinator_assign-partition-{i}", True, None) for i in (0, 1)
    ]
    assert "reloaded 2 of 2 topics; batching is enabled for every coordinator whose store reopened." in (
        reloaded.stderr
    )
    assert broker.unloaded[-2:] == [
        f"persistent://pulsar/system/transaction_coordinator_assign-partition-{i}" for i in (0, 1)
    ]
    after = ok(run("get-txn-tc-batch-log-stat", "-o", "json")).json()
    assert after["coodinatorArray"] == [{"0": True}, {"1": True}]
    assert after["brokers"][0]["batches"] == 4


def test_reload_asks_and_refuses_without_a_terminal(run, broker):
    result = run("set-txn-tc-batch-log", "--enable", "--reload", input="y\n")
    assert result.exit_code == 2 and "--yes" in result.stderr
    assert broker.dynamic == {} and broker.unloaded == []


def test_pending_ack_set_reload_and_stat(run, broker):
    result = ok(run("set-txn-pending-ack-batch-log", "--enable", "--reload", "-y"))
    assert _rows(result.stdout) == [["transactionPendingAckBatchedWriteEnabled", "yes", "no", f"cluster {broker.url}"]]
    assert _rows(result.stdout, "reload") == [
        ["persistent://public/default/a-b", "yes", "-"],
        ["persistent://public/default/my-topic", "yes", "-"],
    ]
    assert f"transactionPendingAckBatchedWriteEnabled is now true on cluster {broker.url} (was false)." in result.stderr
    assert set(broker.unloaded) == {"persistent://public/default/my-topic", "persistent://public/default/a-b"}
    data = ok(run("get-txn-pending-ack-batch-log-stat", "-o", "json")).json()
    assert data["txnPendingAckBatchLogEnabled"] is True
    arrays = {k: v for d in data["subscriptionArray"] for k, v in d.items()}
    assert arrays["persistent://public/default/my-topic-my-sub"] is True
    assert arrays["persistent://public/default/a-b-c-d"] is True


def _replaying(broker, answers: list[str]):
    """my-topic/my-sub answers these states in turn (then Ready), as a store replaying its log does."""
    states = list(answers)

    def stats(query=None):
        state = states.pop(0) if states else "Ready"
        return {
            "state": state,
            "ongoingTxnSize": 0,
            **broker.pending_ack[("persistent://public/default/my-topic", "my-sub")],
        }

    broker.extra_routes = [(r"/admin/v3/transactions/pendingAckStats/public/default/my-topic/my-sub", "GET", stats)]


def test_reload_waits_for_a_replaying_pending_ack_store(run, broker):
    _replaying(broker, ["None", "Initializing"])
    result = ok(run("set-txn-pending-ack-batch-log", "--enable", "--reload", "-y", "-o", "json"))
    assert set(broker.unloaded) == {"persistent://public/default/my-topic", "persistent://public/default/a-b"}
    assert all(r["unloaded"] for r in result.json()["reload"])


def test_reload_leaves_a_store_that_never_gets_ready_alone(run, broker, monkeypatch):
    from pulsar_txn_cli.batchlog import changes

    monkeypatch.setattr(changes, "SETTLE_SECONDS", 1.0)
    _replaying(broker, ["Initializing"] * 1000)
    result = run("set-txn-pending-ack-batch-log", "--enable", "--reload", "-y", "-o", "json")
    assert result.exit_code == 4, result.stderr
    assert broker.unloaded == ["persistent://public/default/a-b"]
    assert "not Ready" in result.stderr and "rerun with --reload later" in result.stderr
    skipped = [r for r in result.json()["reload"] if not r["unloaded"]]
    assert skipped == [
        {
            "topic": "persistent://public/default/my-topic",
            "unloaded": False,
            "error": "its pending-ack store is not Ready yet",
        }
    ]


def test_change_made_elsewhere_is_unknown(run, broker):
    broker.dynamic["transactionLogBatchedWriteEnabled"] = "true"
    data = ok(run("get-txn-tc-batch-log-stat", "-o", "json")).json()
    assert data["coodinatorArray"] == [{"0": None}, {"1": None}]
    assert "outside pulsar-txn" in data["coordinators"][0]["reason"]


@pytest.mark.parametrize(
    "args, message",
    [
        (["set-txn-tc-batch-log"], "--enable, --disable"),
        (["set-txn-tc-batch-log", "--enable", "--disable"], "not both"),
        (["set-txn-tc-batch-log", "--enable", "maybe"], "true or false"),
    ],
)
def test_set_usage_errors(run, args, message):
    result = run(*args)
    assert result.exit_code == 2 and message in result.stderr


def test_a_reload_that_fails_half_way_says_what_it_left_behind(run, broker, monkeypatch):
    unload = broker.unload

    def refuse_the_second(tenant, ns, local):
        if local.endswith("partition-1"):
            return 503, {}, {"reason": "the broker is going down"}
        return unload(tenant, ns, local)

    monkeypatch.setattr(broker, "unload", refuse_the_second)
    result = run("set-txn-tc-batch-log", "--enable", "--reload", "-y", "-o", "json")
    assert result.exit_code == 4, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1, result.stderr
    assert errors[0].startswith("error: transactionLogBatchedWriteEnabled is now true on "), errors[0]
    assert "1 of 2 topics were unloaded and 1 could not be" in errors[0]
    assert "still run with the previous value until reopened" in errors[0]
    assert [r["unloaded"] for r in result.json()["reload"]] == [True, False]
