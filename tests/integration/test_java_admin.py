"""Pulsar's own Java admin client (pulsar-client-admin 4.0.7) against a real broker and `engine serve`.

The probe (harness/src/main/java/pulsartxn/harness/AdminProbe.java) calls every method of
`org.apache.pulsar.client.admin.Transactions`, sync and async, plus the topics(), namespaces(),
brokers(), clusters(), tenants() and lookups() calls pulsar-txn makes, and prints what each gave:
the object Pulsar's client deserialised, serialised again by Pulsar's Jackson mapper, or the
exception.

Both sides get the same state. The real broker runs the harness's TxnWorkload (10 transactions, 3 aborted,
then 3 held open); the engine is then given what the workload recorded there (`_engine_replayed`): the
broker's configuration, the same topics, and every transaction under the same id with the same partitions
and subscriptions, ended as it ended. The probe gets the same arguments on both sides (only an
acknowledgement's position is each side's own).

Each call must succeed on both or fail on both the same way (exception class and HTTP status); a call that
fails on both counts only when BOTH_FAIL says why. The answers are compared by value (states, counts, ids,
statuses, names, lists item by item); what differs between any two brokers given one state (times,
ledger positions and sizes, addresses: VOLATILE, VOLATILE_IN, SHAPE_ONLY, SUBSET, each with why) is
compared by its JSON kind. Apart from that comparison, each side's answers must hold what the workload's own record
implies (the open transactions listed, counted and described; the buffer's and the store's counts), so
two empty answers cannot agree. The interface's methods are read by the probe through reflection from
the 4.0.7 jar and must equal TRANSACTIONS below: a method Pulsar adds fails the test until it is decided here.
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
from tests.conformance_shapes import differences, json_type

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

# The real broker's own process: its address and ports (the engine answers its own).
PROCESS_KEYS = {"advertisedAddress", "brokerServicePort", "webServicePort"}

# Values that differ between two brokers given the same state, compared by JSON kind only; each with why.
VOLATILE = {
    **dict.fromkeys(
        (
            "openTimestamp",
            "recoverStartTime",
            "recoverEndTime",
            "lastSnapshotTimestamps",
            "lastLedgerCreatedTimestamp",
            "lastLedgerSwitchTimestamp",
        ),
        "a time on each process's own clock",
    ),
    **dict.fromkeys(
        (
            "startPosition",
            "maxReadPosition",
            "lastConfirmedEntry",
            "ledgers",
            "numberOfEntries",
            "totalSize",
            "currentLedgerEntries",
            "currentLedgerSize",
            "entriesAddedCounter",
            "markDeletePosition",
            "readPosition",
            "cursorLedger",
            "cursorLedgerLastEntry",
        ),
        "where the records lie: each BookKeeper's own ledger ids, the real broker's non-transactional messages, "
        "the bookie's entry sizes and the ledger rollover's timing",
    ),
    **dict.fromkeys(
        ("brokerServiceUrl", "serviceUrl", "brokerId") + tuple(sorted(PROCESS_KEYS)), "the process's address"
    ),
    "lowWaterMarks": "a transaction buffer's and a pending-ack store's marks live in the broker's memory, set by "
    "the end-transaction commands that reached the topic since it was opened: `engine serve` opens each afresh "
    "and answers {}",
    "numberOfEntriesSinceFirstNotAckedMessage": "the real broker counts the entries after the mark-delete up to "
    "its read position (the fixtures show 1, 7 and 11), the engine up to the last entry: a difference of the "
    "engine's no command reads",
    "waitingCursorsCount": "the real broker's connected readers (the workload's consumers, the snapshot topic's "
    "reader); the engine has none",
}

# method -> {key: why its value is compared by JSON kind only, in that answer}
VOLATILE_IN = {
    **dict.fromkeys(
        ("getTransactionBufferInternalStats(String,boolean)", "getTransactionBufferInternalStatsAsync(String,boolean)"),
        {
            "cursors": "the snapshot topic's readers and its compaction cursor are the real broker's; the engine keeps "
            "its snapshots without them"
        },
    ),
    **dict.fromkeys(
        ("getPendingAckInternalStats(String,String,boolean)", "getPendingAckInternalStatsAsync(String,String,boolean)"),
        dict.fromkeys(
            ("__pending_ack_state.state", "__pending_ack_state.messagesConsumedCounter"),
            "the pending-ack log's cursor shows NoLedger or Open, and a counter that goes below zero after a "
            "recovery, as its history of recoveries and flushes has it (the fixtures: NoLedger and -10 with a moved "
            "mark-delete; this set's runs: NoLedger and 0, Open and 5), not as its transactions do",
        ),
    ),
    "topics().getInternalStats(String,boolean)": {
        "cursors": "the engine keeps a subscription's consumption beside its pending-ack store, not as a cursor of "
        "the topic's ledger (the tool reads only lastConfirmedEntry and ledgers from this answer)"
    },
}

# method -> why only the JSON shapes are compared
SHAPE_ONLY = {
    "lookups().lookupTopic(String)": "the answer is the process's address",
    "brokers().getActiveBrokers(String)": "the answer is the process's address",
    "brokers().getVersion()": "the engine models the 4.0 line and answers 4.0.0 (the real broker 4.0.7)",
}

# method -> the documented difference; what is left is compared as a subset (every key or item the engine
# answers must be in the real answer, with the same value)
SUBSET = {
    "brokers().getRuntimeConfigurations()": "the engine models only the broker keys it implements "
    "(engine/broker_config.py KEYS), as tests/test_conformance.py allows for the same endpoint",
    "brokers().getDynamicConfigurationNames()": "the engine's dynamic keys are the two batch-log switches",
    "namespaces().getTopics(String,ListNamespaceTopicsOptions)": "the engine keeps no topic policies, so it has no "
    "__change_events topic",
}

# method -> why it fails on both sides; a call that fails on both is agreement only when listed here
BOTH_FAIL = {
    "scaleTransactionCoordinatorsAsync(int)": "it asks again for the count scaleTransactionCoordinators(int) just "
    "set, and a broker refuses a count that does not grow (406)",
    "transactions().getTransactionBufferStats(partitioned topic)": "a partitioned topic's own name has no "
    "transaction buffer, only its partitions have (404)",
}

# How long the engine's clock moves on after the replay: the real broker's held transactions were open for
# seconds when the probe asked (its JVM's start alone takes that), so getSlowTransactions(1 ms) lists them.
HELD_FOR_MS = 5_000


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


def _args_from_held(held: list[dict], positions: dict | None = None) -> dict:
    """The probe's arguments from three open transactions: the first one that produced to a
    non-partitioned topic and acked is looked at, the other two are aborted by the probe. POSITIONS:
    the engine's own position of each (txn, topic, subscription) acknowledgement, where they differ from
    the real broker's message ids."""
    for i, txn in enumerate(held):
        # like with like on both sides: the buffer of a non-partitioned topic
        produced = [op for op in txn["ops"] if op["op"] == "produce" and not op["topic"].endswith("-part")]
        acked = [op for op in txn["ops"] if op["op"] == "ack"]
        if produced and acked:
            others = [t for j, t in enumerate(held) if j != i]
            ledger, entry = acked[0]["msgId"].split(":")[:2]
            if positions is not None:
                ledger, entry = positions[txn["most"], txn["least"], acked[0]["topic"], acked[0]["sub"]]
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


def _real_side() -> dict:
    """The workload on a real broker, then the probe; returns the probe's lines, every transaction the
    workloads ran (as TxnWorkload printed them) and the coordinators' ids, for the engine to get the same state."""
    broker = harness.start_broker_or_fail(name="javaadmin")
    try:
        done = broker.run_workload(seed=81, txns=10, aborts=3, ops=6, parallel=2, prefix=PREFIX)
        run = broker.start_workload(seed=82, txns=0, aborts=0, ops=6, hold=3, prefix=PREFIX)
        try:
            lines = run.wait_holding(timeout=300)
            txns = [r for r in done + lines if r.get("event") == "txn"]
            held = [r for r in txns if r["outcome"] == "open"]
            coordinators = broker.coordinator_ids()
            probe = _probe(broker.tools_classpath, broker.base, broker.admin_url, _args_from_held(held))
            return {"probe": probe, "txns": txns, "coordinators": coordinators}
        finally:
            run.proc.kill()  # two of its transactions were aborted by the probe: nothing to commit
            run.proc.wait(timeout=30)
    finally:
        harness.release_broker(broker)


# --------------------------------------------------------------------------- engine serve


def _partition(op: dict) -> str:
    """The partition a TxnWorkload operation reached: a produce to the partitioned topic names the topic, and its
    message id (ledger:entry:partition) the partition."""
    partition = int(op["msgId"].split(":")[2])
    return f"{op['topic']}-partition-{partition}" if op["op"] == "produce" and partition >= 0 else op["topic"]


def _engine_replayed(directory: Path, txns: list[dict], coordinators: list[int], config: dict) -> dict:
    """A new engine given the real broker's state: its configuration (the keys the engine models, but the
    addresses and ports of the broker's process), its topics, its coordinators, and every transaction the
    workloads ran there, under the same ids (an id the real coordinator spent elsewhere, the harness's pings,
    is spent here on an empty aborted transaction), with the same partitions and subscriptions, ended as they
    ended (committed, aborted, or still open); a client registers a partition or a subscription with the
    coordinator once a transaction, and so does the replay. The clock then moves on by HELD_FOR_MS, as the real
    broker's did before the probe asked. Returns the engine's position of each acknowledgement, keyed by
    (most, least, topic, subscription): the first one each transaction made there."""
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.broker_config import KEYS

    engine = Engine.init(directory, coordinators=len(coordinators))
    for key in sorted(config, key=lambda k: "Min" not in k):  # a minimum before the maximum it bounds
        if key in KEYS and key not in PROCESS_KEYS:
            engine.config.set(key, config[key], dynamic=False)
    engine.reload()  # the stores reopen with the broker's configuration, as the real broker opened them
    engine.register_topic(f"{NS}/{PREFIX}-orders", 0)
    engine.register_topic(f"{NS}/{PREFIX}plain", 0)
    engine.register_topic(f"{NS}/{PREFIX}-part", 2)
    positions: dict = {}

    def settled(call, *args) -> None:
        done, errors = [], []
        call(*args, done.append, errors.append)
        engine.checkpoint()
        assert done and not errors, f"the engine refused {call.__name__}{args}: {errors}"

    for txn in sorted(txns, key=lambda t: (t["most"], t["least"])):
        tc, registered = engine.tc(txn["most"]), set()
        while tc.sequence + 1 < txn["least"]:
            got = []
            tc.new_transaction(600_000, got.append)
            engine.checkpoint()
            settled(engine.end_transaction, txn["most"], got[0], False)
        got = []
        tc.new_transaction(600_000, got.append)
        engine.checkpoint()
        assert got == [txn["least"]], f"the engine gave id {got}, the real broker {txn['least']}"
        for op in txn["ops"]:
            topic = _partition(op)
            if op["op"] == "produce":
                if topic not in registered:
                    settled(tc.add_partitions, txn["least"], [topic])
                    registered.add(topic)
                engine.buffers.produce(topic, (txn["most"], txn["least"]))
            else:
                if (topic, op["sub"]) not in registered:
                    settled(tc.add_subscriptions, txn["least"], [(topic, op["sub"])])
                    registered.add((topic, op["sub"]))
                store = engine.pending_ack(topic, op["sub"])
                taken = store.take_messages(1)
                settled(store.ack, txn["most"], txn["least"], taken)
                positions.setdefault((txn["most"], txn["least"], topic, op["sub"]), taken[0])
            engine.checkpoint()
        if txn["outcome"] != "open":  # the first workload ended each of its transactions before the next began
            settled(engine.end_transaction, txn["most"], txn["least"], txn["outcome"] == "committed")
    engine.clock.advance_ms(HELD_FOR_MS)
    engine.checkpoint()
    engine.close()
    return positions


def _engine_side(tmp: Path, classpath: str, real: dict) -> list[dict]:
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
    config = _by_method(real["probe"])["brokers().getRuntimeConfigurations()"]["value"]
    positions = _engine_replayed(directory, real["txns"], real["coordinators"], config)
    held = [t for t in real["txns"] if t["outcome"] == "open"]
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
        return _probe(classpath, tmp, url, _args_from_held(held, positions))
    finally:
        serving.terminate()  # SIGTERM stops engine serve cleanly, whatever SIGINT the run inherited
        serving.wait(timeout=30)


# --------------------------------------------------------------------------- the comparison


@pytest.fixture(scope="module")
def answers(tmp_path_factory) -> dict[str, list[dict]]:
    """Both sides' probe lines ("real", "engine") and the transactions both were given ("txns")."""
    classpath = harness.build_module()
    real = _real_side()
    return {
        "real": real["probe"],
        "engine": _engine_side(tmp_path_factory.mktemp("java-admin-engine"), classpath, real),
        "txns": real["txns"],
    }


def _by_method(lines: list[dict]) -> dict[str, dict]:
    return {line["method"]: line for line in lines[1:]}


def value_differences(real, ours, where: str = "$", volatile: dict = VOLATILE) -> list[str]:
    """Every place where OURS does not hold REAL's value: keys both ways, lists item by item (a list of
    scalars as a set: the broker's order is its hash map's), scalars by value. What VOLATILE names is
    compared by its JSON kind only."""
    key = where.rsplit(".", 1)[-1]
    if key in volatile or any("." in k and where.endswith("." + k) for k in volatile):
        return differences(real, ours, where, parent=key)
    if json_type(real) != json_type(ours):
        return [f"{where}: real {json.dumps(real)[:200]}, engine {json.dumps(ours)[:200]}"]
    if isinstance(real, dict):
        out = [f"{where}.{k}: missing in the engine" for k in real if k not in ours]
        out += [f"{where}.{k}: not in the real answer" for k in ours if k not in real]
        for k in real.keys() & ours.keys():
            out += value_differences(real[k], ours[k], f"{where}.{k}", volatile)
        return out
    if isinstance(real, list):
        if all(not isinstance(v, (dict, list)) for v in real + ours):
            if sorted(map(json.dumps, real)) != sorted(map(json.dumps, ours)):
                return [f"{where}: real {sorted(real, key=json.dumps)}, engine {sorted(ours, key=json.dumps)}"]
            return []
        if len(real) != len(ours):
            return [f"{where}: real has {len(real)} items, the engine {len(ours)}"]
        return [
            d for i, (r, o) in enumerate(zip(real, ours)) for d in value_differences(r, o, f"{where}[{i}]", volatile)
        ]
    return [] if real == ours else [f"{where}: real {real!r}, engine {ours!r}"]


def problems(real: dict, ours: dict) -> list[str]:
    method = real["method"]
    if real["ok"] != ours["ok"]:
        what = {True: "succeeded", False: "failed"}
        return [
            f"real {what[real['ok']]} ({real.get('exception', '')} {real.get('status', '')}), "
            f"engine {what[ours['ok']]} ({ours.get('exception', '')} {ours.get('status', '')} {ours.get('message', '')})"
        ]
    if not real["ok"]:
        out = [
            f"{key}: real {real.get(key)}, engine {ours.get(key)} ({ours.get('message')})"
            for key in ("exception", "status")
            if real.get(key) != ours.get(key)
        ]
        if method not in BOTH_FAIL:
            out.append(
                f"both failed ({real.get('exception')} {real.get('status')}: {real.get('message')}): not agreement "
                "until BOTH_FAIL lists it with why"
            )
        return out
    if method in BOTH_FAIL:
        return [f"BOTH_FAIL lists it, but both succeeded: {BOTH_FAIL[method]}"]
    real_value, value = real.get("value"), ours.get("value")
    if method in SHAPE_ONLY:
        return differences(real_value, value)
    if method in SUBSET and isinstance(real_value, list) and isinstance(value, list):
        if not value:
            return ["the engine answered an empty list"]
        return [f"$: {v!r} is in the engine's answer, not in the real one" for v in value if v not in real_value]
    if method in SUBSET and isinstance(real_value, dict) and isinstance(value, dict):
        if not value:
            return ["the engine answered no keys at all"]
        extra = [f"$.{k}: the engine has it, the real broker does not" for k in value if k not in real_value]
        return extra + value_differences({k: v for k, v in real_value.items() if k in value}, value)
    return value_differences(real_value, value, volatile={**VOLATILE, **VOLATILE_IN.get(method, {})})


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
    listed = set(BOTH_FAIL) | set(SHAPE_ONLY) | set(SUBSET) | set(VOLATILE_IN)
    assert listed <= set(calls), f"listed but never called: {sorted(listed - set(calls))}"


@pytest.mark.parametrize("method", TRANSACTIONS + OTHERS)
def test_the_engine_answers_the_java_client_like_the_real_broker(answers, method):
    real, ours = _by_method(answers["real"]).get(method), _by_method(answers["engine"]).get(method)
    assert real and ours, f"{method}: the probe printed nothing for it (real: {real}, engine: {ours})"
    found = problems(real, ours)
    assert not found, (
        f"{method}:\n" + "\n".join(found) + f"\nreal: {json.dumps(real)[:1500]}\nengine: {json.dumps(ours)[:1500]}"
    )


def expected_from_the_workload(txns: list[dict]) -> dict[str, dict]:
    """What the state both sides were given makes some answers hold, from TxnWorkload's own record of what it
    did (not from either side's answer): the probe asks before it aborts anything."""
    args = _args_from_held([t for t in txns if t["outcome"] == "open"])
    held = [t for t in txns if t["outcome"] == "open"]
    txn = next(t for t in held if f"{t['most']}:{t['least']}" == args["txn"])

    def produced(t: dict) -> set[str]:
        return {_partition(op) for op in t["ops"] if op["op"] == "produce"}

    def acked(t: dict) -> set[tuple[str, str]]:
        return {(op["topic"], op["sub"]) for op in t["ops"] if op["op"] == "ack"}

    acked_by_topic: dict[str, set[str]] = {}
    for topic, sub in acked(txn):
        acked_by_topic.setdefault(topic, set()).add(sub)
    ack_at = (args["ack-topic"], args["sub"])
    return {
        "getCoordinatorStatsById(int)": {
            "state": "Ready",
            "leastSigBits": max(t["least"] for t in txns),
            "lowWaterMark": min(t["least"] for t in held) - 1,
            "ongoingTxnSize": len(held),
        },
        "getSlowTransactions(long,TimeUnit)": {"keys": {f"({t['most']},{t['least']})" for t in held}},
        "getTransactionMetadata(TxnID)": {
            "txnId": f"({txn['most']},{txn['least']})",
            "status": "OPEN",
            "producedPartitions": produced(txn),
            "ackedPartitions": acked_by_topic,
        },
        "getTransactionBufferStats(String)": {
            "state": "Ready",
            "ongoingTxnSize": sum(args["buffer-topic"] in produced(t) for t in held),
            "totalAbortedTransactions": sum(
                args["buffer-topic"] in produced(t) for t in txns if t["outcome"] == "aborted"
            ),
        },
        "getTransactionInBufferStats(TxnID,String)": {"aborted": False},
        "getPendingAckStats(String,String)": {
            "state": "Ready",
            "ongoingTxnSize": sum(ack_at in acked(t) for t in held),
        },
        "getPositionStatsInPendingAck(String,String,Long,Long,Integer)": {"state": "PendingAck"},
        "topics().getSubscriptions(String)": {
            "includes": {s for t in txns for (topic, s) in acked(t) if topic == ack_at[0]}
        },
    }


def _as_expected(key: str, value):
    """An answer's field in the form expected_from_the_workload gives it: names as sets."""
    if key == "producedPartitions":
        return set(value or {})
    if key == "ackedPartitions":
        return {topic: set(subs) for topic, subs in (value or {}).items()}
    return value


@pytest.mark.parametrize("side", ["real", "engine"])
def test_each_side_answers_what_the_workload_left(answers, side):
    """Non-empty where the state has data, and the values the workload's own record implies: the open
    transactions listed, counted and described, the buffer's and the pending-ack store's counts."""
    calls = _by_method(answers[side])
    wrong = []
    for method, want in expected_from_the_workload(answers["txns"]).items():
        line = calls[method]
        if not line["ok"]:
            wrong.append(f"{method}: failed ({line.get('exception')} {line.get('status')}: {line.get('message')})")
            continue
        value = line["value"]
        if "keys" in want:
            got = set(value)
            if got != want["keys"]:
                wrong.append(f"{method}: lists {sorted(got)}, the workload left {sorted(want['keys'])} open")
            continue
        if "includes" in want:
            if not want["includes"] <= set(value):
                wrong.append(f"{method}: {value} lacks some of {sorted(want['includes'])}")
            continue
        for key, expected in want.items():
            if _as_expected(key, value.get(key)) != expected:
                wrong.append(f"{method}: {key} is {value.get(key)!r}, the workload implies {expected!r}")
    assert not wrong, f"the {side} side:\n" + "\n".join(wrong)
