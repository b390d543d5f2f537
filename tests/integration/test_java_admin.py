"""Pulsar's own Java admin client (pulsar-client-admin 4.0.7) against a real broker and `engine serve`.

The probe (harness/src/main/java/pulsartxn/harness/AdminProbe.java) calls every method of
`org.apache.pulsar.client.admin.Transactions`, sync and async, plus the topics(), namespaces(),
brokers(), clusters(), tenants() and lookups() calls pulsar-txn makes, and prints what each gave:
the object Pulsar's client deserialised, serialised again by Pulsar's Jackson mapper, or the
exception. Both targets get the same workload shape first (a real broker: the harness's
TxnWorkload; the engine: the same topics and subscriptions with three transactions held open, then
`engine simulate --admin-url` over HTTP), and each side's arguments come from its own workload.

Each call must succeed on both or fail on both the same way (exception class and HTTP status), and
the objects must carry the same fields with values of the same JSON kind (tests/conformance_shapes.py).
The interface's methods are read by the probe through reflection from the 4.0.7 jar and must equal
TRANSACTIONS below: a method Pulsar adds fails the test until it is decided here.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

import harness
from tests.conformance_shapes import differences

pytestmark = pytest.mark.java_admin

REPO = Path(__file__).resolve().parents[2]
NS = "persistent://public/default"
PREFIX = "ja"
SUBS = ("sub-a", "subb")

# Every method of org.apache.pulsar.client.admin.Transactions in 4.0.7 (name and parameter types).
# Decided: the probe calls each one, the async twins too (they are separate HTTP calls in
# TransactionsImpl and the sync ones wrap them, so both must work against the engine).
TRANSACTIONS = (
    "abortTransaction(TxnID)",
    "abortTransactionAsync(TxnID)",
    "getCoordinatorInternalStats(int,boolean)",
    "getCoordinatorInternalStatsAsync(int,boolean)",
    "getCoordinatorStats()",
    "getCoordinatorStatsAsync()",
    "getCoordinatorStatsById(int)",
    "getCoordinatorStatsByIdAsync(int)",
    "getPendingAckInternalStats(String,String,boolean)",
    "getPendingAckInternalStatsAsync(String,String,boolean)",
    "getPendingAckStats(String,String)",
    "getPendingAckStats(String,String,boolean)",
    "getPendingAckStatsAsync(String,String)",
    "getPendingAckStatsAsync(String,String,boolean)",
    "getPositionStatsInPendingAck(String,String,Long,Long,Integer)",
    "getPositionStatsInPendingAckAsync(String,String,Long,Long,Integer)",
    "getSlowTransactions(long,TimeUnit)",
    "getSlowTransactionsAsync(long,TimeUnit)",
    "getSlowTransactionsByCoordinatorId(Integer,long,TimeUnit)",
    "getSlowTransactionsByCoordinatorIdAsync(Integer,long,TimeUnit)",
    "getTransactionBufferInternalStats(String,boolean)",
    "getTransactionBufferInternalStatsAsync(String,boolean)",
    "getTransactionBufferStats(String)",
    "getTransactionBufferStats(String,boolean)",
    "getTransactionBufferStats(String,boolean,boolean)",
    "getTransactionBufferStatsAsync(String)",
    "getTransactionBufferStatsAsync(String,boolean)",
    "getTransactionBufferStatsAsync(String,boolean,boolean)",
    "getTransactionInBufferStats(TxnID,String)",
    "getTransactionInBufferStatsAsync(TxnID,String)",
    "getTransactionInPendingAckStats(TxnID,String,String)",
    "getTransactionInPendingAckStatsAsync(TxnID,String,String)",
    "getTransactionMetadata(TxnID)",
    "getTransactionMetadataAsync(TxnID)",
    "listTransactionCoordinators()",
    "listTransactionCoordinatorsAsync()",
    "scaleTransactionCoordinators(int)",
    "scaleTransactionCoordinatorsAsync(int)",
)

# The other admin calls pulsar-txn (admin/client.py, stuck_readers.py, doctor) makes, as the Java client spells them.
OTHERS = (
    "topics().getPartitionedTopicMetadata(String)",
    "lookups().lookupTopic(String)",
    "tenants().getTenants()",
    "namespaces().getNamespaces(String)",
    "namespaces().getTopics(String,ListNamespaceTopicsOptions)",
    "topics().getSubscriptions(String)",
    "topics().getInternalStats(String,boolean)",
    "topics().unload(String)",
    "brokers().getDynamicConfigurationNames()",
    "brokers().updateDynamicConfiguration(String,String)",
    "brokers().getAllDynamicConfigurations()",
    "brokers().deleteDynamicConfiguration(String)",
    "brokers().getRuntimeConfigurations()",
    "brokers().getActiveBrokers(String)",
    "brokers().getVersion()",
    "brokers().getLeaderBroker()",
    "clusters().getClusters()",
    "clusters().getCluster(String)",
    "transactions().getTransactionBufferStats(partitioned topic)",
)

# method -> the documented difference; what is left is compared as a subset (every key the engine
# answers must be in the real answer, its value of the same kind)
SUBSET = {
    "brokers().getRuntimeConfigurations()": "the engine models only the broker keys it implements "
    "(engine/broker_config.py KEYS), as tests/test_conformance.py allows for the same endpoint",
}


# --------------------------------------------------------------------------- the probe


def _probe(classpath: str, base: Path, admin_url: str, args: dict) -> list[dict]:
    log4j = base / "log4j2-probe.xml"
    log4j.write_text(harness._log4j_xml(str(base / "probe.log"), level="INFO"))
    flat = [x for k, v in {"admin-url": admin_url, **args}.items() for x in (f"--{k}", str(v))]
    done = subprocess.run(
        [
            "java",
            "-Xmx256m",
            "-XX:TieredStopAtLevel=1",
            "-Djava.net.preferIPv4Stack=true",
            f"-Dlog4j.configurationFile={log4j}",
            "-Dlog4j2.is.webapp=false",
            "-cp",
            classpath,
            "pulsartxn.harness.AdminProbe",
            *flat,
        ],
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert done.returncode == 0, f"AdminProbe exited {done.returncode}:\n{done.stderr[-4000:]}"
    lines = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    assert lines and lines[0].get("interface") == "org.apache.pulsar.client.admin.Transactions", done.stdout[:2000]
    return lines


def _args_from_held(held: list[dict]) -> dict:
    """The probe's arguments from three open transactions: the first one that produced and acked
    is looked at, the other two are aborted by the probe."""
    for i, txn in enumerate(held):
        # like with like on both sides: the buffer of a non-partitioned topic
        produced = [op for op in txn["ops"] if op["op"] == "produce" and not op["topic"].endswith("-part")]
        acked = [op for op in txn["ops"] if op["op"] == "ack"]
        if produced and acked:
            others = [t for j, t in enumerate(held) if j != i]
            ledger, entry = acked[0]["msgId"].split(":")[:2]
            return {
                "coordinator": 0,
                "buffer-topic": produced[0]["topic"],
                "ack-topic": acked[0]["topic"],
                "sub": acked[0]["sub"],
                "txn": f"{txn['most']}:{txn['least']}",
                "abort-txn": f"{others[0]['most']}:{others[0]['least']}",
                "abort-txn-async": f"{others[1]['most']}:{others[1]['least']}",
                "position": f"{ledger}:{entry}",
                "cluster": "standalone",
                "namespace": "public/default",
                "replicas": 2,
                "partitioned-topic": f"{NS}/{PREFIX}-part",
            }
    raise AssertionError(f"no held transaction both produced and acknowledged: {held}")


# --------------------------------------------------------------------------- the real broker


def _real_side() -> list[dict]:
    broker = harness.start_broker_or_fail(name="javaadmin")
    try:
        broker.run_workload(seed=81, txns=10, aborts=3, ops=6, parallel=2, prefix=PREFIX)
        run = broker.start_workload(seed=82, txns=0, aborts=0, ops=6, hold=3, prefix=PREFIX)
        try:
            lines = run.wait_holding(timeout=300)
            held = [r for r in lines if r.get("event") == "txn" and r["outcome"] == "open"]
            return _probe(broker.tools_classpath, broker.base, broker.admin_url, _args_from_held(held))
        finally:
            run.proc.kill()  # two of its transactions were aborted by the probe: nothing to commit
            run.proc.wait(timeout=30)
    finally:
        harness.release_broker(broker)


# --------------------------------------------------------------------------- engine serve


def _engine_held(directory: Path) -> list[dict]:
    """The TxnWorkload's topics and subscriptions in a new engine, with three transactions held
    open that each produce to one topic and acknowledge on another (as TxnWorkload's --hold does)."""
    from pulsar_txn_cli.engine.broker import Engine

    engine = Engine.init(directory, coordinators=1)
    topics = [f"{NS}/{PREFIX}-orders", f"{NS}/{PREFIX}plain", f"{NS}/{PREFIX}-part"]
    engine.register_topic(topics[0], 0)
    engine.register_topic(topics[1], 0)
    engine.register_topic(topics[2], 2)
    tc = engine.tc(0)
    held = []
    for n in range(3):
        got = []
        tc.new_transaction(600_000, got.append)
        engine.checkpoint()
        least = got[0]
        produce_to = topics[n % 2]
        ack_on, sub = f"{topics[2]}-partition-{n % 2}", SUBS[n % 2]
        tc.add_partitions(least, [produce_to], lambda p: None)
        engine.checkpoint()
        engine.buffers.produce(produce_to, (0, least))
        tc.add_subscriptions(least, [(ack_on, sub)], lambda p: None)
        store = engine.pending_ack(ack_on, sub)
        positions = store.take_messages(1)
        store.ack(0, least, positions, lambda p: None)
        engine.checkpoint()
        ledger, entry = positions[0]
        held.append(
            {
                "most": 0,
                "least": least,
                "ops": [
                    {"op": "produce", "topic": produce_to},
                    {"op": "ack", "topic": ack_on, "sub": sub, "msgId": f"{ledger}:{entry}:-1"},
                ],
            }
        )
    engine.close()
    return held


def _engine_side(tmp: Path, classpath: str) -> list[dict]:
    env = {
        **os.environ,
        "PYTHONPATH": str(REPO),
        "PYTHONUNBUFFERED": "1",
        "HOME": str(tmp / "home"),
        "XDG_STATE_HOME": str(tmp / "state"),
        "XDG_DATA_HOME": str(tmp / "data"),
    }
    for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
        env.pop(name, None)
    directory = tmp / "engine"
    held = _engine_held(directory)
    cli = [sys.executable, "-m", "pulsar_txn_cli"]
    serving = subprocess.Popen(
        [*cli, "engine", "serve", "--port", "0", "--engine-dir", str(directory)],
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        url = None
        for line in serving.stderr:
            found = re.search(r"on (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
            if found:
                url = found.group(1)
                break
        assert url, "engine serve did not say where it listens"
        # TxnWorkload's shape: 10 transactions, 3 aborted, 3 topics (one of 2 partitions), 2 subscriptions
        workload = ["-n", "10", "--abort-ratio", "0.3", "--topics", "3", "--subscriptions", "2", "--seed", "81"]
        sim = subprocess.run(
            [*cli, "engine", "simulate", "--admin-url", url, *workload, "-o", "json"],
            capture_output=True,
            text=True,
            env=env,
            timeout=120,
        )
        assert sim.returncode == 0, sim.stderr
        return _probe(classpath, tmp, url, _args_from_held(held))
    finally:
        serving.terminate()  # SIGTERM stops engine serve cleanly, whatever SIGINT the run inherited
        serving.wait(timeout=30)


# --------------------------------------------------------------------------- the comparison


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[str, list[dict]]:
    classpath = harness.build_module()
    return {
        "engine": _engine_side(tmp_path_factory.mktemp("java-admin-engine"), classpath),
        "real": _real_side(),
    }


def _by_method(lines: list[dict]) -> dict[str, dict]:
    return {line["method"]: line for line in lines[1:]}


def problems(real: dict, ours: dict) -> list[str]:
    if real["ok"] != ours["ok"]:
        what = {True: "succeeded", False: "failed"}
        return [
            f"real {what[real['ok']]} ({real.get('exception', '')} {real.get('status', '')}), "
            f"engine {what[ours['ok']]} ({ours.get('exception', '')} {ours.get('status', '')} {ours.get('message', '')})"
        ]
    if not real["ok"]:
        out = []
        for key in ("exception", "status"):
            if real.get(key) != ours.get(key):
                out.append(f"{key}: real {real.get(key)}, engine {ours.get(key)} ({ours.get('message')})")
        return out
    real_value, value = real.get("value"), ours.get("value")
    if real["method"] in SUBSET and isinstance(real_value, dict) and isinstance(value, dict):
        if not value:
            return ["the engine answered no keys at all"]
        extra = [f"$.{k}: the engine has it, the real broker does not" for k in value if k not in real_value]
        return extra + differences({k: v for k, v in real_value.items() if k in value}, value)
    return differences(real_value, value)


@pytest.mark.parametrize("side", ["real", "engine"])
def test_every_method_of_transactions_is_decided(answers, side):
    declared = answers[side][0]["methods"]
    assert sorted(declared) == sorted(TRANSACTIONS), (
        f"Transactions on the {side} probe's classpath declares {sorted(set(declared) - set(TRANSACTIONS))} "
        f"not listed here, and this list has {sorted(set(TRANSACTIONS) - set(declared))} it does not declare"
    )
    calls = _by_method(answers[side])
    assert [m for m in TRANSACTIONS if calls.get(m, {}).get("exception") == "NotCalled"] == []
    assert set(calls) == set(TRANSACTIONS) | set(OTHERS)


@pytest.mark.parametrize("method", TRANSACTIONS + OTHERS)
def test_the_engine_answers_the_java_client_like_the_real_broker(answers, method):
    real, ours = _by_method(answers["real"]).get(method), _by_method(answers["engine"]).get(method)
    assert real and ours, f"{method}: the probe printed nothing for it (real: {real}, engine: {ours})"
    found = problems(real, ours)
    assert not found, (
        f"{method}:\n" + "\n".join(found) + f"\nreal: {json.dumps(real)[:1500]}\nengine: {json.dumps(ours)[:1500]}"
    )
