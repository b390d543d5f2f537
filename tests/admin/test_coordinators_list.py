"""`coordinators-list`: Pulsar's GET /admin/v3/transactions/coordinators where the broker has it
(3.0 and later), the TC-assign partitions' lookups where it answers 404 (2.10, 2.11)."""

from __future__ import annotations

import pytest

from tests.admin.scripted import ScriptedServer
from tests.conftest import isolate

TC_ASSIGN = "/lookup/v2/topic/persistent/pulsar/system/transaction_coordinator_assign-partition-"
RUNTIME = "/admin/v2/brokers/configuration/runtime"
JERSEY_404 = {"servlet": "org.glassfish.jersey.servlet.ServletContainer", "message": "Not Found", "status": "404"}
OWNERS = {"a": ("pulsar://a:6650", "http://a:8080"), "b": ("pulsar://b:6650", "http://b:8080")}


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _lookup(path: str):
    owner = OWNERS["a" if int(path.rsplit("-", 1)[1]) % 2 == 0 else "b"]
    return 200, {}, {"brokerUrl": owner[0], "httpUrl": owner[1], "nativeUrl": owner[0], "brokerUrlSsl": ""}


def broker(has_endpoint: bool):
    def answer(request):
        path = request.path.split("?", 1)[0]
        if path == "/admin/v3/transactions/coordinators":
            if not has_endpoint:
                return 404, {}, JERSEY_404
            # Pulsar answers the values of a HashMap: not necessarily in id order
            return 200, {}, [{"id": i, "brokerServiceUrl": OWNERS["ab"[i % 2]][0]} for i in (3, 0, 2, 1)]
        if path.endswith("transaction_coordinator_assign/partitions"):
            return 200, {}, {"partitions": 4, "deleted": False}
        if path.startswith(TC_ASSIGN):
            return _lookup(path)
        return 404, {}, JERSEY_404

    return ScriptedServer(answer)


EXPECTED = [
    {"id": i, "brokerServiceUrl": OWNERS["ab"[i % 2]][0], "webServiceUrl": OWNERS["ab"[i % 2]][1]} for i in range(4)
]


def test_a_broker_with_the_endpoint_is_asked_once_and_each_owner_looked_up_once(cli):
    with broker(has_endpoint=True) as server:
        result = cli(["coordinators-list", "--admin-url", server.url, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json() == EXPECTED
    paths = [r.path.split("?", 1)[0] for r in server.requests]
    # and the broker's runtime configuration: whether Pulsar 5.0's scalable-topics coordinator is on (it is not)
    assert paths == ["/admin/v3/transactions/coordinators", TC_ASSIGN + "0", TC_ASSIGN + "1", RUNTIME]


def test_a_tls_only_owner_is_looked_up_for_its_urls(cli):
    def answer(request):
        path = request.path.split("?", 1)[0]
        if path == "/admin/v3/transactions/coordinators":
            return 200, {}, [{"id": 0}]  # Pulsar leaves out the null plain URL of a TLS-only broker
        if path.startswith(TC_ASSIGN):
            return 200, {}, {"brokerUrlTls": "pulsar+ssl://a:6651", "httpUrlTls": "https://a:8443"}
        return 404, {}, JERSEY_404

    with ScriptedServer(answer) as server:
        result = cli(["coordinators-list", "--admin-url", server.url, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json() == [{"id": 0, "brokerServiceUrl": "pulsar+ssl://a:6651", "webServiceUrl": "https://a:8443"}]


def test_a_broker_without_it_is_asked_coordinator_by_coordinator(cli):
    with broker(has_endpoint=False) as server:
        result = cli(["coordinators-list", "--admin-url", server.url, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json() == EXPECTED
    paths = [r.path.split("?", 1)[0] for r in server.requests]
    assert paths[0] == "/admin/v3/transactions/coordinators"
    assert paths[2:] == [TC_ASSIGN + str(i) for i in range(4)] + [RUNTIME]


def test_the_engine_answers_the_endpoint(cli, tmp_path):
    from pulsar_txn_cli.engine import server
    from pulsar_txn_cli.engine.broker import Engine

    Engine.init(tmp_path / "engine", coordinators=3).close()
    with server.start(str(tmp_path / "engine")) as served:
        result = cli(["coordinators-list", "--admin-url", served.url, "-o", "json"])
        assert result.exit_code == 0, result.stderr
        listed = result.json()
    assert [c["id"] for c in listed] == [0, 1, 2]
    assert len({c["brokerServiceUrl"] for c in listed}) == 1 and listed[0]["brokerServiceUrl"].startswith("pulsar://")
    assert listed[0]["webServiceUrl"].startswith("http://")


def test_a_broker_without_transactions_says_so(cli):
    reason = {"reason": "This Broker is not configured with transactionCoordinatorEnabled=true."}
    with ScriptedServer(lambda request: (503, {}, reason)) as server:
        result = cli(["coordinators-list", "--admin-url", server.url])
    assert result.exit_code == 4
    assert "transactionCoordinatorEnabled" in result.stderr
    # a GET that answers 5xx is retried; nothing else is asked
    assert {r.path.split("?", 1)[0] for r in server.requests} == {"/admin/v3/transactions/coordinators"}
