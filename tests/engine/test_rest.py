"""The engine's REST router: Pulsar's paths, JSON shapes and error codes (Pulsar's
admin/v3/Transactions.java and admin/v2 resources)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.router import handle

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "rest"
TOPIC = "persistent://public/default/fx-orders"
PART = "persistent://public/default/fx-part-partition-0"


def _world(directory, coordinators=2):
    """An engine with an open transaction that acked on fx-orders/sub-a and fx-part-partition-0/subb."""
    engine = Engine.init(directory, coordinators=coordinators)
    engine.register_topic("persistent://public/default/fx-orders", 0)
    engine.register_topic("persistent://public/default/fx-part", 1)
    got = []
    engine.tc(0).new_transaction(60_000, got.append)
    engine.checkpoint()
    least = got[0]
    tc = engine.tc(0)
    for topic, sub in ((TOPIC, "sub-a"), (PART, "subb")):
        tc.add_subscriptions(least, [(topic, sub)], lambda p: None)
        store = engine.pending_ack(topic, sub)
        store.ack(0, least, store.take_messages(1), lambda p: None)
    tc.add_partitions(least, [TOPIC], lambda p: None)
    engine.checkpoint()
    engine.clock.advance_ms(2000)
    return engine, (0, least)


@pytest.fixture
def world(tmp_path):
    engine, txn = _world(tmp_path / "e")
    yield engine, txn
    engine.close()


def get(engine, path, **query):
    return handle(engine, "GET", path, {k: str(v) for k, v in query.items()})


def test_coordinator_endpoints(world):
    engine, (most, least) = world
    status, body = get(engine, "/admin/v3/transactions/coordinatorStats")
    assert status == 200 and set(body) == {"0", "1"}
    assert set(body["0"]) == {
        "state",
        "leastSigBits",
        "lowWaterMark",
        "ongoingTxnSize",
        "recoverStartTime",
        "recoverEndTime",
    }
    assert body["0"]["ongoingTxnSize"] == 1 and body["0"]["state"] == "Ready"
    status, one = get(engine, "/admin/v3/transactions/coordinatorStats", coordinatorId=1)
    assert status == 200 and one["ongoingTxnSize"] == 0
    assert get(engine, "/admin/v3/transactions/coordinatorStats", coordinatorId=7)[0] == 404
    status, stats = get(engine, "/admin/v3/transactions/coordinatorInternalStats/0", metadata="true")
    assert stats["transactionLogStats"]["managedLedgerName"] == "pulsar/system/persistent/__transaction_log_0"
    assert "metadata" in stats["transactionLogStats"]["managedLedgerInternalStats"]["ledgers"][0]
    assert get(engine, "/admin/v3/transactions/coordinatorInternalStats/9")[0] == 404


def test_transaction_endpoints(world):
    engine, (most, least) = world
    status, meta = get(engine, f"/admin/v3/transactions/transactionMetadata/{most}/{least}")
    assert status == 200 and meta["txnId"] == f"({most},{least})" and meta["status"] == "OPEN"
    assert set(meta["ackedPartitions"]) == {TOPIC, PART}
    assert TOPIC in meta["producedPartitions"]
    assert get(engine, f"/admin/v3/transactions/transactionMetadata/{most}/999999")[0] == 404
    status, slow = get(engine, "/admin/v3/transactions/slowTransactions/1000")
    assert status == 200 and list(slow) == [f"({most},{least})"]
    assert get(engine, "/admin/v3/transactions/slowTransactions/60000")[1] == {}
    assert get(engine, "/admin/v3/transactions/slowTransactions/1000", coordinatorId=1)[1] == {}
    status, body = handle(engine, "POST", f"/admin/v3/transactions/abortTransaction/{most}/{least}", {})
    assert status == 204
    assert get(engine, f"/admin/v3/transactions/transactionMetadata/{most}/{least}")[0] == 404


def test_pending_ack_endpoints(world):
    engine, (most, least) = world
    base = "/admin/v3/transactions"
    status, stats = get(engine, f"{base}/pendingAckStats/public/default/fx-orders/sub-a")
    assert status == 200 and stats["ongoingTxnSize"] == 1 and stats["state"] == "Ready"
    status, internal = get(engine, f"{base}/pendingAckInternalStats/public/default/fx-orders/sub-a")
    assert (
        internal["pendingAckLogStats"]["managedLedgerName"]
        == "public/default/persistent/fx-orders-sub-a__transaction_pending_ack"
    )
    assert "__pending_ack_state" in internal["pendingAckLogStats"]["managedLedgerInternalStats"]["cursors"]
    assert get(engine, f"{base}/pendingAckInternalStats/public/default/fx-orders/no-such-sub")[0] == 404
    assert get(engine, f"{base}/pendingAckStats/public/default/no-topic/sub-a")[0] == 404
    assert get(engine, f"{base}/pendingAckStats/public/default/fx-orders/no-such-sub")[0] == 500  # as a real broker
    status, body = get(engine, f"{base}/transactionInPendingAckStats/public/default/fx-orders/sub-a/{most}/{least}")
    assert status == 200 and body == {}  # cumulativeAckPosition null is omitted
    store = engine.pending_ack(TOPIC, "sub-a")
    lid = store.subscription.ledger_id
    assert get(engine, f"{base}/positionStatsInPendingAck/public/default/fx-orders/sub-a/{lid}/0")[1] == {
        "state": "PendingAck"
    }
    assert get(engine, f"{base}/positionStatsInPendingAck/public/default/fx-orders/sub-a/{lid}/5")[1] == {
        "state": "NotInPendingAck"
    }


def test_topics_and_namespaces(world):
    engine, _ = world
    assert (
        get(engine, "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions")[1]["partitions"]
        == 2
    )
    status, lookup = get(engine, "/lookup/v2/topic/persistent/pulsar/system/transaction_coordinator_assign-partition-1")
    assert status == 200 and set(lookup) == {"brokerUrl", "httpUrl", "nativeUrl", "brokerUrlSsl"}
    assert get(engine, "/admin/v2/tenants")[1] == ["public", "pulsar"]
    assert get(engine, "/admin/v2/namespaces/pulsar")[1] == ["pulsar/system"]
    plain = get(engine, "/admin/v2/namespaces/public/default/topics")[1]
    assert TOPIC in plain and not any("__transaction" in t for t in plain)
    full = get(engine, "/admin/v2/namespaces/public/default/topics", includeSystemTopic="true")[1]
    assert "persistent://public/default/fx-orders-sub-a__transaction_pending_ack" in full
    system = get(engine, "/admin/v2/namespaces/pulsar/system/topics", includeSystemTopic="true")[1]
    assert "persistent://pulsar/system/__transaction_log_0" in system
    assert get(engine, "/admin/v2/persistent/public/default/fx-orders/subscriptions")[1] == ["sub-a"]
    assert get(engine, "/admin/v2/persistent/public/default/nothing/subscriptions")[0] == 404


def test_unload_reopens_the_right_stores(world):
    engine, _ = world
    tc_ledger = engine.tc(1).ml.current
    store_ledger = engine.pending_ack(TOPIC, "sub-a").ml.current
    other = engine.pending_ack(PART, "subb").ml.current
    assert (
        handle(engine, "PUT", "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign-partition-1/unload")[0]
        == 204
    )
    assert engine.tc(1).ml.current > tc_ledger
    assert handle(engine, "PUT", "/admin/v2/persistent/public/default/fx-orders/unload")[0] == 204
    assert engine.pending_ack(TOPIC, "sub-a").ml.current > store_ledger
    assert engine.pending_ack(PART, "subb").ml.current == other


def test_dynamic_configuration(world):
    engine, _ = world
    assert get(engine, "/admin/v2/brokers/configuration")[1] == [
        "transactionLogBatchedWriteEnabled",
        "transactionPendingAckBatchedWriteEnabled",
    ]
    assert handle(engine, "POST", "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/true") == (
        200,
        None,
    )
    assert get(engine, "/admin/v2/brokers/configuration/values")[1] == {"transactionLogBatchedWriteEnabled": "true"}
    assert get(engine, "/admin/v2/brokers/configuration/runtime")[1]["transactionLogBatchedWriteEnabled"] == "true"
    status, body = handle(engine, "POST", "/admin/v2/brokers/configuration/transactionLogBatchedWriteMaxRecords/20")
    assert status == 412 and "non-dynamic" in body["reason"]
    # As a real broker: a non-boolean text is taken as false; an unknown key is "non-dynamic".
    assert handle(engine, "POST", "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/maybe")[0] == 200
    assert get(engine, "/admin/v2/brokers/configuration/values")[1] == {"transactionLogBatchedWriteEnabled": "false"}
    assert handle(engine, "POST", "/admin/v2/brokers/configuration/noSuchKey/1")[0] == 412
    assert handle(engine, "DELETE", "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled")[0] == 200
    assert get(engine, "/admin/v2/brokers/configuration/values")[1] == {}


def test_brokers_clusters_metrics_and_errors(world):
    engine, _ = world
    assert get(engine, "/admin/v2/clusters")[1] == ["standalone"]
    assert get(engine, "/admin/v2/brokers/standalone")[1] == ["localhost:8080"]
    assert get(engine, "/admin/v2/brokers/elsewhere")[0] == 404
    assert isinstance(get(engine, "/admin/v2/brokers/version")[1], str)
    status, text = get(engine, "/metrics")
    assert status == 200 and "pulsar_txn_tc_bufferedwriter_batch_records_count" in text
    assert handle(engine, "DELETE", "/admin/v3/transactions/coordinatorStats") == (405, None)
    status, body = get(engine, "/admin/v3/transactions/noSuchEndpoint")
    assert status == 404 and body["message"] == "Not Found"


def test_transactions_disabled_is_503(tmp_path):
    engine = Engine.init(tmp_path / "e")
    try:
        engine.config.set("transactionCoordinatorEnabled", "false")
        status, body = get(engine, "/admin/v3/transactions/coordinatorStats")
        assert status == 503 and "transactionCoordinatorEnabled" in body["reason"]
        assert get(engine, "/metrics") == (200, "")  # DisabledTxnLogBufferedWriterMetricsStats
    finally:
        engine.close()


# ---------------------------------------------------------------- against a real broker's answers


def _fixtures():
    return sorted(FIXTURES.glob("*.json")) if FIXTURES.is_dir() else []


def _shape(value):
    """Keys and value types, recursively (lists by their first item)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(value[0])] if value else []
    if value is None:
        return None
    return "number" if isinstance(value, (int, float)) and not isinstance(value, bool) else type(value).__name__


def _differences(real, ours, where="$") -> list[str]:
    out = []
    if isinstance(real, dict) and isinstance(ours, dict):
        for key, value in real.items():
            if re.fullmatch(r"\(?-?\d+(,\d+\))?|\d+", key) and ours:
                # keyed by ids (coordinator ids, txn ids): compare with any of ours
                other = next(iter(ours.values()))
                out += _differences(value, other, f"{where}[id]")
                break
            if key not in ours:
                out.append(f"{where}.{key} missing")
            else:
                out += _differences(value, ours[key], f"{where}.{key}")
    elif isinstance(real, list) and isinstance(ours, list):
        if real and ours:
            out += _differences(real[0], ours[0], f"{where}[0]")
    elif real is not None and ours is not None and real != ours:
        out.append(f"{where}: {real!r} vs {ours!r}")
    return out


def _real_world(directory):
    """The captured broker's layout: one coordinator, fx-orders, fxplain and fx-part (2 partitions),
    subscriptions sub-a and subb acking in an open transaction on each."""
    engine = Engine.init(directory, coordinators=1)
    engine.register_topic("persistent://public/default/fx-orders", 0)
    engine.register_topic("persistent://public/default/fxplain", 0)
    engine.register_topic("persistent://public/default/fx-part", 2)
    got = []
    engine.tc(0).new_transaction(600_000, got.append)
    engine.checkpoint()
    least = got[0]
    topics = ["fx-orders", "fxplain", "fx-part-partition-0", "fx-part-partition-1"]
    for name in topics:
        for sub in ("sub-a", "subb"):
            topic = f"persistent://public/default/{name}"
            engine.tc(0).add_subscriptions(least, [(topic, sub)], lambda p: None)
            store = engine.pending_ack(topic, sub)
            store.ack(0, least, store.take_messages(1), lambda p: None)
    engine.tc(0).add_partitions(least, ["persistent://public/default/fxplain"], lambda p: None)
    engine.checkpoint()
    engine.buffers.produce("persistent://public/default/fxplain", (0, least))
    for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
        engine.config.store_override(key, "false")
    engine.checkpoint()
    engine.clock.advance_ms(5000)
    return engine, (0, least)


def test_answers_match_a_real_broker(tmp_path):
    """Same status, and every key of the real answer present with the same type."""
    assert _fixtures(), "no real-broker REST answers in tests/fixtures/real/rest: the committed fixtures are missing"
    from pulsar_txn_cli.engine.broker_config import KEYS

    engine, (most, least) = _real_world(tmp_path / "e")
    problems = []
    skipped = ("transactionBuffer", "InBuffer", "/coordinators")  # the transaction buffer's routes: tested with it
    try:
        for path in _fixtures():
            fixture = json.loads(path.read_text())
            request = fixture.get("request") or {}
            method, url = request.get("method", "GET"), request.get("path", "")
            if any(s in url for s in skipped) or "tc_not_loaded" in path.name:
                continue  # tc_not_loaded: a real coordinator between unload and reconnect; the engine's stays loaded
            parts = urlsplit(url)
            route = parts.path
            if not path.name.startswith("error_"):
                route = re.sub(r"transactionMetadata/\d+/\d+", f"transactionMetadata/{most}/{least}", route)
                route = re.sub(r"(transactionInPendingAckStats/.+)/\d+/\d+$", rf"\1/{most}/{least}", route)
            status, body = handle(engine, method, route, dict(parse_qsl(parts.query)))
            real_status, real_body = fixture.get("status"), fixture.get("body")
            if status != real_status:
                problems.append(f"{path.name}: status {status}, real broker {real_status}")
                continue
            if path.name == "brokers_configuration_runtime.json":
                real_body = {k: v for k, v in real_body.items() if k in KEYS}  # the engine models these keys only
            if path.name == "brokers_configuration.json":
                real_body = real_body[:1]
            if isinstance(real_body, (dict, list)):
                for d in _differences(_shape(real_body), _shape(body)):
                    problems.append(f"{path.name}: {d}")
            elif real_body is None and body not in (None, ""):
                problems.append(f"{path.name}: the real broker answers no body, the engine {body!r}")
    finally:
        engine.close()
    assert not problems, "\n".join(problems)


def test_metrics_lines_match_a_real_broker(tmp_path):
    """Every bufferedwriter sample name a real broker exports, with the same labels, is in the engine's text."""
    real = (FIXTURES / "metrics_pulsar_txn_after_batched_phase.txt").read_text()
    pattern = re.compile(
        r"^(pulsar_txn_(?:tc|pending_ack_store)_bufferedwriter_\w+)\{cluster=\"[^\"]*\",broker=\"[^\"]*\"(,le=\"[^\"]+\")?\}",
        re.M,
    )
    wanted = {(m.group(1), m.group(2) or "") for m in pattern.finditer(real)}
    assert wanted
    engine = Engine.init(tmp_path / "e")
    try:
        ours = {(m.group(1), m.group(2) or "") for m in pattern.finditer(engine.metrics.prometheus())}
    finally:
        engine.close()
    assert wanted <= ours, sorted(wanted - ours)
    types = set(re.findall(r"^# TYPE (pulsar_txn_\w*bufferedwriter\w*) (\w+)", real, re.M))
    assert types <= set(re.findall(r"^# TYPE (\S+) (\w+)", engine_text(tmp_path), re.M))


def engine_text(tmp_path):
    engine = Engine.open(tmp_path / "e")
    try:
        return engine.metrics.prometheus()
    finally:
        engine.close()
