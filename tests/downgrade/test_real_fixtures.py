"""`downgrade check` and `upgrade check` against a real Pulsar 4.0.7 broker's captured REST answers
(tests/fixtures/real/rest), served by a local HTTP server that replays them by path. Answers
that were not captured are 404s, as for a subscription the broker does not know."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

import pytest

from tests.conftest import assert_no_crash, isolate

from tests.admin.scripted import ScriptedServer

REST = Path(__file__).resolve().parents[1] / "fixtures" / "real" / "rest"


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _answers():
    table = {}
    for path in sorted(REST.glob("*.json")):
        doc = json.loads(path.read_text())
        request = doc.get("request") or {}
        if request.get("method") != "GET" or doc.get("status") != 200:
            continue
        parts = urlsplit(request["path"])
        table.setdefault(parts.path, []).append((dict(parse_qsl(parts.query)), doc["body"]))
    return table


@pytest.fixture
def replay():
    answers = _answers()

    def answer(request):
        parts = urlsplit(request.path)
        query = dict(parse_qsl(parts.query))
        # The capture whose query parameters the request also has (most of them first).
        matching = sorted(
            (c for c in answers.get(parts.path, []) if all(query.get(k) == v for k, v in c[0].items())),
            key=lambda c: -len(c[0]),
        )
        if not matching:
            return 404, {}, {"reason": "not captured"}
        body = matching[0][1]
        return 200, {"Content-Type": "application/json"}, body if isinstance(body, str) else json.dumps(body)

    with ScriptedServer(answer) as server:
        yield server.url


def _captured(name):
    return json.loads((REST / name).read_text())["body"]


def test_downgrade_check_reads_the_real_shapes_and_fails_closed(cli, replay, tmp_path):
    result = cli(["downgrade", "check", "--admin-url", replay, "--checkpoint", tmp_path / "cp.json", "-o", "json"])
    assert result.exit_code in (5, 6), result.stderr
    assert_no_crash(result)
    doc = result.json()
    assert doc["verdict"] != "SAFE" and doc["target"] == f"cluster {replay}"
    real = _captured("coordinatorInternalStats_0_metadata_false.json")["transactionLogStats"][
        "managedLedgerInternalStats"
    ]
    [tc0] = doc["coordinators"]
    assert tc0["oldestLedgerId"] == min(l["ledgerId"] for l in real["ledgers"])
    assert tc0["lastConfirmedEntry"] == real["lastConfirmedEntry"]
    assert tc0["markDeletePosition"] == real["cursors"]["transaction.subscription"]["markDeletePosition"]
    subs = {(s["topic"], s["subscription"]): s for s in doc["subscriptions"]}
    # Discovery split the real pending-ack topic names (topics with '-' in them) into real subscriptions.
    assert ("persistent://public/default/fx-orders", "sub-a") in subs
    pa = _captured("pendingAckInternalStats_metadata_false.json")["pendingAckLogStats"]["managedLedgerInternalStats"]
    assert subs[("persistent://public/default/fx-orders", "sub-a")]["oldestLedgerId"] == min(
        l["ledgerId"] for l in pa["ledgers"]
    )
    # The settings were changed outside pulsar-txn, so where they are effective is unknown: blocked,
    # and the fix is the tool's own switch (which records the moment of the change).
    assert doc["verdict"] == "BLOCKED"
    assert f"pulsar-txn set-txn-tc-batch-log --disable --reload --yes --admin-url {replay}" in doc["fixes"]


def test_upgrade_check_reads_the_real_broker_version(cli, replay):
    result = cli(["upgrade", "check", "--admin-url", replay, "-o", "json"])
    assert result.exit_code in (5, 6)
    assert_no_crash(result)
    doc = result.json()
    assert [b["version"] for b in doc["brokers"]] == [_captured("brokers_version.json")]
    assert doc["verdict"] == "INCOMPLETE"  # batching is off in the captured configuration
