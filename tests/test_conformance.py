"""Conformance: the embedded engine answers every admin endpoint the tool uses with the same JSON
keys and value types (recursively) as a real Pulsar 4.0.7 broker.

The real answers are the ones the harness captured (tests/fixtures/real/rest/, by
tests/integration/capture_fixtures.py). The engine is driven into the captured broker's layout
(one coordinator; fx-orders, fxplain and fx-part with 2 partitions; subscriptions sub-a and subb;
an open transaction) and asked the same request through the in-process engine transport, the
path PulsarAdmin uses. tests/integration/test_conformance_live.py does the same against a live
broker.

Documented differences carry their reason in ALLOWED; cases where the engine is wrong are
xfail(strict=True) with the precise difference, so they turn green when the engine is fixed.
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import orjson
import pytest

from tests.conformance_shapes import differences

REST = Path(__file__).resolve().parent / "fixtures" / "real" / "rest"
NS = "persistent://public/default"

# fixture file -> why the tool does not call it (so it is not a conformance case)
NOT_USED = {
    "brokers_leaderBroker.json": "the tool never asks for the leader broker",
    "transactionInBufferStats.json": "the captured transaction had ended on the real broker while the engine's replica keeps it in its "
    "buffer; the shapes of both answers are checked in tests/engine/buffer/test_shapes.py, the command against "
    "a live broker in tests/integration/test_cli_real_broker.py",
    "error_404_unknown_path.json": "Jersey's own 404 for a path that does not exist; the tool calls only real paths",
    "error_405_wrong_method_coordinatorStats.json": "the tool never uses a wrong method",
    "error_500_coordinatorStats_tc_not_loaded.json": "a real coordinator is not loaded between start/unload and the next transactional client; "
    "the engine's coordinators are always loaded (documented in docs/real-broker-findings.md)",
    "error_404_coordinatorStats_id_0_tc_not_loaded.json": "same: the engine's coordinator is always loaded",
    "error_412_invalid_dynamic_config_value.json": "the capture's name is wrong: the real broker accepted 'notaboolean' with 200 (Pulsar does not "
    "validate dynamic values); the tool only ever sends true/false",
}

# fixture file -> (documented difference, how to make the real answer comparable)
ALLOWED = {
    "brokers_configuration_runtime.json": (
        "the engine models only the broker keys it implements (engine/broker_config.py KEYS); every one of "
        "them must be in the real answer with the same type",
        "subset",
    ),
    "brokers_configuration.json": (
        "the engine lists only its dynamic keys; each must be a dynamic key of the real broker",
        "subset",
    ),
    "clusters_standalone.json": (
        "the engine's cluster metadata also carries its engine id (pulsarTxnEngineId, docs/identity.md); "
        "every other field must be the real broker's",
        "engine-id",
    ),
}

# fixture file -> (why, the exact problems it has); xfail(strict=True, raises=KnownDifference) until the
# engine is fixed: any other problem, or the known one gone, fails the test.
ENGINE_DIFFERS: dict[str, tuple[str, list[str]]] = {
    "transactionBufferInternalStats_metadata_true.json": (
        "engine differs: the engine does not compact the snapshot system topic, so its compactedLedger is "
        "Pulsar's 'none' (-1) and carries no metadata string, where the real broker's compacted ledger has one",
        [
            "$.singleSnapshotSystemTopicInternalStats.managedLedgerInternalStats.compactedLedger.metadata: "
            "missing in the engine (real: string)"
        ],
    ),
}


class KnownDifference(AssertionError):
    """The engine differs from the real broker exactly as ENGINE_DIFFERS says, and in nothing else."""


def _fixture(name: str) -> dict:
    return json.loads((REST / name).read_text())


def _cases() -> list[str]:
    if not REST.is_dir():
        return []
    return sorted(p.name for p in REST.glob("*.json") if p.name not in NOT_USED)


def _world(directory):
    """The captured broker's layout, in the engine (see the module docstring)."""
    from pulsar_txn_cli.engine.broker import Engine

    engine = Engine.init(directory, coordinators=1)
    engine.register_topic(f"{NS}/fx-orders", 0)
    engine.register_topic(f"{NS}/fxplain", 0)
    engine.register_topic(f"{NS}/fx-part", 2)
    tc = engine.tc(0)
    topics = [f"{NS}/{t}" for t in ("fx-orders", "fxplain", "fx-part-partition-0", "fx-part-partition-1")]

    def txn(open_: bool, commit: bool = True) -> int:
        got = []
        tc.new_transaction(600_000, got.append)
        engine.checkpoint()
        least = got[0]
        for topic in topics:
            for sub in ("sub-a", "subb"):
                tc.add_subscriptions(least, [(topic, sub)], lambda p: None)
                store = engine.pending_ack(topic, sub)
                store.ack(0, least, store.take_messages(1), lambda p: None)
        tc.add_partitions(least, [f"{NS}/fxplain"], lambda p: None)
        engine.checkpoint()
        engine.buffers.produce(f"{NS}/fxplain", (0, least))
        if not open_:
            engine.end_transaction(0, least, commit, lambda p: None)
            engine.clock.run_until_idle()
        engine.checkpoint()
        return least

    txn(False, commit=True)
    txn(False, commit=False)
    least = txn(True)
    for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
        engine.config.store_override(key, "false")
    engine.checkpoint()
    engine.clock.advance_ms(5000)
    return engine, least


@pytest.fixture(scope="module")
def engine_world(tmp_path_factory):
    from pulsar_txn_cli.engine.transport import EngineTransport

    engine, least = _world(tmp_path_factory.mktemp("conformance") / "engine")
    transport = EngineTransport(target=None, engine=engine)
    yield transport, least
    engine.close()


def engine_answer(transport, method: str, url: str, least: int):
    """(status, JSON or text) from the engine for a captured request, with the engine's txn id."""
    parts = urlsplit(url)
    path = (
        re.sub(
            r"(transactionMetadata|transactionInBufferStats/.+|transactionInPendingAckStats/.+)/0/\d+$",
            rf"\1/0/{least}",
            parts.path,
        )
        if not url.endswith("999999")
        else parts.path
    )
    status, _headers, raw = transport.request(method, path, dict(parse_qsl(parts.query)) or None)
    if not raw:
        return status, None
    try:
        return status, orjson.loads(raw)
    except orjson.JSONDecodeError:
        return status, raw.decode()


def comparable(name: str, real, ours):
    """Apply a documented difference; returns (real, ours) to compare."""
    how = ALLOWED.get(name, (None, None))[1]
    if how == "subset" and isinstance(real, dict):
        return {k: v for k, v in real.items() if k in ours}, ours
    if how == "subset" and isinstance(real, list):
        return [x for x in real if x in ours] or real[:1], ours
    if how == "engine-id" and isinstance(ours, dict):
        from pulsar_txn_cli.protocol import ENGINE_ID_FIELD

        assert ours.get(ENGINE_ID_FIELD), "the engine's cluster metadata has no engine id"
        return real, {k: v for k, v in ours.items() if k != ENGINE_ID_FIELD}
    return real, ours


def conformance_problems(name: str, real_status: int, real_body, status: int, body) -> list[str]:
    problems = []
    if status != real_status:
        problems.append(f"status: real {real_status}, engine {status}")
    real_body, body = comparable(name, real_body, body)
    if name in ALLOWED and ALLOWED[name][1] == "subset":
        missing = [k for k in (body if isinstance(body, (dict, list)) else []) if k not in (real_body or [])]
        problems += [f"$.{k}: the engine has it, the real broker does not" for k in missing]
    root = "$configuration" if name.startswith("brokers_configuration_") else ""  # {config name: value}
    problems += differences(real_body, body, parent=root)
    return problems


def judge(name: str, problems: list[str], what: str) -> None:
    """No problems; or, for a known difference, exactly the known ones (raised as KnownDifference)."""
    said = f"{what}:\n" + "\n".join(problems)
    if name in ENGINE_DIFFERS and problems == ENGINE_DIFFERS[name][1]:
        raise KnownDifference(said)
    assert not problems, said


def _params():
    out = []
    for name in _cases():
        known = ENGINE_DIFFERS.get(name)
        marks = [pytest.mark.xfail(strict=True, raises=KnownDifference, reason=known[0])] if known else []
        out.append(pytest.param(name, marks=marks, id=name.removesuffix(".json")))
    return out


def test_the_captured_answers_are_committed():
    assert _cases(), "no captured real-broker answers in tests/fixtures/real/rest: the committed fixtures are missing"


@pytest.mark.parametrize("name", _params())
def test_engine_answers_like_the_real_broker(engine_world, name):
    transport, least = engine_world
    fixture = _fixture(name)
    request = fixture["request"]
    status, body = engine_answer(transport, request["method"], request["path"], least)
    problems = conformance_problems(name, fixture["status"], fixture["body"], status, body)
    judge(name, problems, f"{request['method']} {request['path']}")


def test_every_captured_answer_is_a_case_or_says_why_not():
    """A new capture is either compared or listed in NOT_USED with its reason."""
    names = {p.name for p in REST.glob("*.json")}
    assert set(NOT_USED) <= names, sorted(set(NOT_USED) - names)
    assert set(ALLOWED) <= set(_cases()) and set(ENGINE_DIFFERS) <= set(_cases())
    assert all(reason for reason in NOT_USED.values())


def test_every_endpoint_of_the_admin_client_has_a_captured_answer():
    """Every path PulsarAdmin asks, declared (calls.py) or built in client.py, is covered by at
    least one captured real answer."""
    from pulsar_txn_cli import calls
    from pulsar_txn_cli.admin import client

    source = Path(client.__file__).read_text()
    used = set(re.findall(r'f?"((?:\{TXN\}|/admin/v2|/lookup/v2)[^"]*)"', source))
    used |= {call.path.replace(calls.TXN, "{TXN}") for call in calls.COMMANDS if call.path}
    captured = [_fixture(n)["request"]["path"].split("?")[0] for n in _cases()]
    uncovered = []
    for template in used:
        pattern = (
            "^"
            + re.sub(r"\\\{[^}]*\\\}", "[^?]+", re.escape(template.replace("{TXN}", "/admin/v3/transactions")))
            + "$"
        )
        if not any(re.match(pattern, path) for path in captured):
            uncovered.append(template)
    # abortTransaction was not captured (it would end the capture's open transaction), nor the
    # replicas POST (it would grow the capture's coordinators); positionStatsInPendingAck is newer
    # than the capture and checked against a live broker (tests/integration/test_cli_real_broker.py).
    # brokers/{cluster} is captured as brokers_standalone.json.
    assert sorted(uncovered) == [
        "{TXN}/abortTransaction/{most}/{least}",
        "{TXN}/positionStatsInPendingAck/{topic}/{subscription}/{ledger_id}/{entry_id}",
        "{TXN}/transactionCoordinator/replicas",
        # captured, but compared by shape only (NOT_USED says why)
        "{TXN}/transactionInBufferStats/{topic}/{most}/{least}",
    ], uncovered


def test_metrics_sample_names_match_the_real_broker(engine_world):
    """/metrics/: every buffered-writer sample a real broker exports, with its labels, is in the engine's."""
    real = (REST / "metrics_pulsar_txn_after_batched_phase.txt").read_text()
    transport, _ = engine_world
    status, _h, raw = transport.request("GET", "/metrics/")
    assert status == 200
    pattern = re.compile(r"^(pulsar_txn_(?:tc|pending_ack_store)_bufferedwriter_\w+)\{([^}]*)\}", re.M)

    def samples(text):
        return {(m.group(1), tuple(sorted(re.findall(r'(\w+)="', m.group(2))))) for m in pattern.finditer(text)}

    wanted = samples(real)
    assert wanted
    assert wanted <= samples(raw.decode()), sorted(wanted - samples(raw.decode()))


# ---------------------------------------------------------------- the comparison itself can fail


@pytest.mark.parametrize(
    "real, ours, expected",
    [
        ({"a": 1, "b": "x"}, {"a": 2, "b": "y"}, []),
        ({"a": 1}, {"a": "1"}, ["$.a: real number, engine string"]),
        ({"a": 1}, {}, ["$.a: missing in the engine (real: number)"]),
        ({}, {"z": None}, ["$.z: not in the real answer (engine: null)"]),
        (
            {"0": {"state": "Ready"}},
            {"0": {"state": "Ready"}, "1": {"state": 3}},
            ["$['1'].state: real string, engine number"],
        ),
        (
            {"ledgers": [{"id": 1, "size": 2}, {"id": 3}]},
            {"ledgers": [{"id": 1}, {"id": 3}]},
            ["$.ledgers[0].size: missing in the engine (real: number)"],
        ),
        (
            {"ackedPartitions": {"persistent://a/b/c": {"sub-a": {}}}},
            {"ackedPartitions": {"persistent://a/b/d": {"s": []}}},
            ["$.ackedPartitions['persistent://a/b/d']['s']: real object, engine array"],
        ),
    ],
)
def test_shape_differences(real, ours, expected):
    assert differences(real, ours) == expected
