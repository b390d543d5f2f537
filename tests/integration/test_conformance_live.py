"""Conformance, live: the embedded engine's answers against the running real broker's, endpoint by
endpoint, with the cases, documented differences and known engine differences of
tests/test_conformance.py (which does the same against the captured answers in the fast suite).

The workload here uses the capture's names (fx-orders, fxplain, fx-part; sub-a and subb), so the
captured requests replay as they are; transaction ids are the live ones.
"""

from __future__ import annotations

import re

import pytest

import harness

from tests.test_conformance import (  # noqa: F401 - engine_world is a fixture
    _fixture,
    _params,
    conformance_problems,
    engine_answer,
    engine_world,
    judge,
)

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def live(pulsar_broker):
    """The capture's layout on the session broker, with two transactions held open."""
    b = pulsar_broker
    b.run_workload(seed=71, txns=6, aborts=2, ops=3, parallel=2, prefix="fx")
    # a transactional ack on every subscription: a real broker answers pendingAckInternalStats with
    # 503 "Pending ack have not init success!" for a subscription that never had one
    b.run_workload(seed=73, txns=0, aborts=0, drain=1, prefix="fx")
    run, lines = harness.hold_workload(b, seed=72, txns=4, aborts=1, ops=3, parallel=2, hold=2, prefix="fx")
    held = [(r["most"], r["least"]) for r in lines if r.get("event") == "txn" and r["outcome"] == "open"]
    assert held
    yield held[0]
    harness.finish_held(b, run, "commit")


@pytest.mark.parametrize("name", _params())
def test_engine_answers_like_the_live_broker(pulsar_broker, live, engine_world, name):  # noqa: F811 - a fixture
    b = pulsar_broker
    transport, least = engine_world
    request = _fixture(name)["request"]
    method, path = request["method"], request["path"]
    live_path = (
        re.sub(r"transactionMetadata/0/\d+$", "transactionMetadata/%d/%d" % live, path)
        if not path.endswith("999999")
        else path
    )
    status, body = b.rest(method, live_path)
    if "/unload" in path:
        b.wait_coordinators_ready()  # a real coordinator reloads when a transactional client connects
    ours_status, ours = engine_answer(transport, method, path, least)
    problems = conformance_problems(name, status, body, ours_status, ours)
    judge(name, problems, f"{method} {live_path} (live) vs the engine")


def test_metrics_sample_names_match_the_live_broker(pulsar_broker, engine_world):  # noqa: F811 - a fixture
    status, text = pulsar_broker.rest("GET", "/metrics/", raw=True)
    assert status == 200
    transport, _ = engine_world
    _, _, raw = transport.request("GET", "/metrics/")
    pattern = re.compile(r"^(pulsar_txn_(?:tc|pending_ack_store)_bufferedwriter_\w+)\{([^}]*)\}", re.M)

    def samples(t):
        return {(m.group(1), tuple(sorted(re.findall(r'(\w+)="', m.group(2))))) for m in pattern.finditer(t)}

    assert samples(text) and samples(text) <= samples(raw.decode()), sorted(samples(text) - samples(raw.decode()))
