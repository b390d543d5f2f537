"""find-hanging, abort-hanging and doctor when a coordinator cannot list its open transactions.

A local HTTP server answers with a real 4.0.7 broker's answers after a restart (docs/real-broker-findings.md):
the all-coordinators slowTransactions fails, coordinator 0 answers 500 "Topic not found" (a topic one of its
transactions acknowledged on is not loaded) or never answers (one it produced to is not), coordinator 1
lists its transactions. The others' transactions are still listed, and the output never reads as complete.
"""

from __future__ import annotations

import time

import pytest

from tests.admin.scripted import ScriptedServer
from tests.conftest import isolate
from tests.engine.buffer.test_stuck_readers_http import ROUTES, YOUNGER

SLOW = "/admin/v3/transactions/slowTransactions/-1"
UNLOADED = (
    "\n --- An unexpected error occurred in the server ---\n\nMessage: Topic not found "
    "persistent://public/default/orders\n\nStacktrace:\n\norg.apache.pulsar.client.admin.PulsarAdminException...\n"
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _broker(coordinator_0):
    """coordinator_0: the answer (status, headers, body) or ("sleep", s, answer) of its listing."""

    def answer(request):
        path, _, query = request.path.partition("?")
        if request.method == "POST" and path.startswith("/admin/v3/transactions/abortTransaction/"):
            return 204, {}, None
        if path == SLOW:
            if "coordinatorId=1" in query:
                return 200, {}, {"(1,9)": YOUNGER}
            return coordinator_0  # the all-coordinators call fails as coordinator 0's does
        if path.endswith("transaction_coordinator_assign/partitions"):
            return 200, {}, {"partitions": 2}
        if path == "/admin/v2/clusters":
            return 200, {}, ["standalone"]
        if path == "/admin/v2/clusters/standalone":
            return 200, {}, {"serviceUrl": "http://127.0.0.1:8080", "brokerServiceUrl": "pulsar://127.0.0.1:6650"}
        body = ROUTES.get(path)
        return (200, {}, body) if body is not None else (404, {}, {"reason": "Topic not found"})

    return ScriptedServer(answer)


def test_find_hanging_lists_the_other_coordinators_and_names_the_unloaded_topic(cli):
    with _broker((500, {}, {"reason": UNLOADED})) as server:
        result = cli(["find-hanging", "--older-than", "1s", "--admin-url", server.url, "-o", "json"])
    assert result.exit_code == 4, result.stderr
    report = result.json()
    assert [t["txnId"] for t in report["transactions"]] == ["(1,9)"]
    [unlisted] = report["unlistedCoordinators"]
    assert unlisted["coordinatorId"] == 0
    assert "`pulsar-admin topics stats persistent://public/default/orders` loads it" in unlisted["error"]
    [line] = result.stderr.strip().splitlines()[-1:]
    assert line.startswith("error: coordinator 0 could not list their open transactions, so some may be missing")


def test_a_coordinator_that_never_answers_costs_one_request_timeout_and_is_named(cli):
    with _broker(("sleep", 3.0, (200, {}, {}))) as server:
        started = time.monotonic()
        result = cli(
            ["find-hanging", "--older-than", "1s", "--admin-url", server.url, "--request-timeout", "0.5", "-o", "json"]
        )
        took = time.monotonic() - started
    assert result.exit_code == 4, result.stderr
    assert [t["txnId"] for t in result.json()["transactions"]] == ["(1,9)"]
    [unlisted] = result.json()["unlistedCoordinators"]
    assert "got no answer within 0.5s" in unlisted["error"] and "produced to is not loaded" in unlisted["error"]
    assert took < 2.5, took  # the all-coordinators call, then every coordinator at once: two timeouts, not one each


def test_abort_hanging_dry_run_aborts_nothing_and_says_the_list_is_partial(cli):
    with _broker((500, {}, {"reason": UNLOADED})) as server:
        result = cli(["abort-hanging", "--older-than", "1s", "--admin-url", server.url, "-o", "json"])
        posted = [r for r in server.requests if r.method == "POST"]
    assert result.exit_code == 4 and posted == [], result.stderr
    assert result.json()["dryRun"] and [t["txnId"] for t in result.json()["transactions"]] == ["(1,9)"]
    assert "could not list their open transactions" in result.stderr


def test_abort_hanging_execute_aborts_what_it_listed_then_says_the_list_was_partial(cli):
    with _broker((500, {}, {"reason": UNLOADED})) as server:
        result = cli(
            ["abort-hanging", "--older-than", "1s", "--execute", "--yes", "--admin-url", server.url, "-o", "json"]
        )
        posted = [r.path for r in server.requests if r.method == "POST"]
    assert posted == ["/admin/v3/transactions/abortTransaction/1/9"], posted
    assert result.exit_code == 4, result.stderr
    assert result.json()["results"] == [{"txnId": "(1,9)", "aborted": True, "error": None}]
    assert "coordinator 0 could not list their open transactions" in result.stderr


def test_doctor_judges_what_was_listed_and_calls_no_phantom(cli):
    with _broker((500, {}, {"reason": UNLOADED})) as server:
        result = cli(["doctor", "-t", "orders", "--older-than", "1s", "--admin-url", server.url, "-o", "json"])
    report = result.json()
    checks = {c["check"]: c for c in report["checks"]}
    assert checks["hanging-transaction"]["ran"], checks["hanging-transaction"]
    assert any("(1,9)" in f.get("txnIds", []) for f in report["findings"] if f["check"] == "hanging-transaction")
    phantom = checks["phantom-fence"]
    assert not phantom["ran"] and "coordinator 0 could not be listed" in phantom["why"], phantom
    assert not any(f["check"] == "phantom-fence" for f in report["findings"])
    assert result.exit_code != 0, result.stderr  # an incomplete doctor is never an all-clear
