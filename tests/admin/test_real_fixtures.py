"""The admin commands on a real broker's captured answers (tests/fixtures/real/rest/, from the harness).

A replay server answers each captured request with the broker's own status and JSON, so the
commands' parsing and error sentences are checked against what Pulsar really sends. Skipped
until the integration harness has captured the answers.
"""

import json
import re
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.admin.scripted import ScriptedServer

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "rest"


def load(directory: Path) -> dict:
    answers = {}
    for path in sorted(directory.glob("*.json")):
        doc = json.loads(path.read_text())
        request = doc.get("request") or {}
        if "path" in request:
            answers[path.stem] = doc
    return answers


def key(method: str, path: str) -> tuple:
    parts = urlsplit(path)
    return method, parts.path, tuple(sorted(parse_qsl(parts.query)))


def replay(answers: dict):
    # Error captures share paths with successful ones (a coordinator not loaded yet): the
    # successful answer wins, the error captures are checked on their own below.
    docs = [d for _, d in sorted(answers.items(), key=lambda item: not item[0].startswith("error_"))]
    exact = {key(d["request"]["method"], d["request"]["path"]): d for d in docs}
    loose = {}
    for d in reversed(docs):
        method, path, query = key(d["request"]["method"], d["request"]["path"])
        if not query or (method, path) not in loose:
            loose[(method, path)] = d

    def handle(request):
        method, path, query = key(request.method, request.path)
        doc = exact.get((method, path, query)) or loose.get((method, path))
        if doc is None:
            return 404, {}, {"reason": f"not captured: {method} {request.path}"}
        body = doc["body"]
        if body is None:
            return doc["status"], {}, b""
        return doc["status"], {}, body if not isinstance(body, str) else body

    return handle


ANSWERS = load(FIXTURES) if FIXTURES.is_dir() else {}


def test_the_captured_answers_are_committed():
    assert "coordinatorStats" in ANSWERS, (
        f"no captured real-broker REST answers in {FIXTURES}: the committed fixtures are missing"
    )


@pytest.fixture(scope="module")
def broker():
    with ScriptedServer(replay(ANSWERS)) as server:
        yield server


def body(name):
    return ANSWERS[name]["body"]


def run_json(cli, broker, *args):
    result = cli([*args, "--admin-url", broker.url, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    return result.json()


def test_coordinator_stats_are_the_brokers_json(cli, broker):
    assert run_json(cli, broker, "coordinator-stats") == body("coordinatorStats")
    assert run_json(cli, broker, "coordinator-stats", "-c", "0") == body("coordinatorStats_id_0")
    assert run_json(cli, broker, "coordinator-internal-stats", "-c", "0", "-m") == body(
        "coordinatorInternalStats_0_metadata_true"
    )
    assert cli(["coordinator-internal-stats", "-c", "0", "--admin-url", broker.url]).exit_code == 0  # the table renders


def test_coordinators_list_from_the_partitioned_lookup(cli, broker):
    data = run_json(cli, broker, "coordinators-list")
    assert [c["id"] for c in data] == list(range(body("tc_assign_partitions")["partitions"]))
    assert data[0]["brokerServiceUrl"] == body("lookup_tc_assign_partition_0")["brokerUrl"]


def test_pending_ack_and_transaction_commands(cli, broker):
    path = ANSWERS["pendingAckStats"]["request"]["path"]
    topic, sub = re.match(r".*/pendingAckStats/(.+)/([^/?]+)$", path).groups()
    assert run_json(cli, broker, "pending-ack-stats", "-t", topic, "-s", sub) == body("pendingAckStats")
    assert run_json(cli, broker, "pending-ack-internal-stats", "-t", topic, "-s", sub, "-m") == body(
        "pendingAckInternalStats_metadata_true"
    )
    most, least = re.search(
        r"/transactionMetadata/(\d+)/(\d+)", ANSWERS["transactionMetadata_open"]["request"]["path"]
    ).groups()
    meta = run_json(cli, broker, "transaction-metadata", f"({most},{least})")
    assert meta == body("transactionMetadata_open") and meta["txnId"] == f"({most},{least})"
    assert run_json(cli, broker, "transaction-buffer-stats", "-t", topic) == body("transactionBufferStats")
    assert cli(["slow-transactions", "-t", "1s", "--admin-url", broker.url]).exit_code == 0


def test_subscriptions_found_among_the_real_topic_names(cli, broker):
    path = ANSWERS["pendingAckStats"]["request"]["path"]
    topic, sub = re.match(r".*/pendingAckStats/(.+)/([^/?]+)$", path).groups()
    data = run_json(cli, broker, "subscriptions", "-n", "public/default")
    assert {"topic": f"persistent://{topic}", "subscription": sub, "status": "ok"}.items() <= next(
        d for d in data if d["topic"] == f"persistent://{topic}" and d["subscription"] == sub
    ).items()


def test_batch_log_stat_on_the_real_shapes(cli, broker):
    data = run_json(cli, broker, "get-txn-tc-batch-log-stat")
    assert set(data) >= {"txnTcBatchLogEnabled", "coodinatorArray", "coordinators"}
    assert len(data["coodinatorArray"]) == body("tc_assign_partitions")["partitions"]


@pytest.mark.parametrize("name", sorted(n for n in ANSWERS if n.startswith("error_")))
def test_real_error_answers_become_one_sentence(name):
    from pulsar_txn_cli.transport.http_errors import http_failure

    doc = ANSWERS[name]
    error = http_failure(
        doc["status"],
        doc["request"]["method"],
        doc["request"]["path"],
        "cluster http://broker:8080",
        json.dumps(doc["body"]),
    )
    message = str(error)
    assert "\n" not in message
    assert f"({doc['status']})" in message or f"HTTP {doc['status']}" in message
    assert error.exit_code == 4


def test_coordinator_stats_falls_back_when_a_coordinator_is_not_loaded(cli):
    """The real 500 for the all-coordinators call: each coordinator is then asked on its own."""
    answers = dict(ANSWERS)
    answers["coordinatorStats"] = answers["error_500_coordinatorStats_tc_not_loaded"]
    with ScriptedServer(
        replay({k: v for k, v in answers.items() if k != "error_500_coordinatorStats_tc_not_loaded"})
    ) as server:
        result = cli(["coordinator-stats", "--admin-url", server.url, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json() == {"0": body("coordinatorStats_id_0")}
