"""A broker older than PIP-160 (2.10) over REST: the stand-in broker answers as 2.10.5 did on the real
one (tests/integration/test_versions.py), with neither batch-log setting; plus Jersey's own 404."""

import pytest

from pulsar_txn_cli.admin import features
from pulsar_txn_cli.transport.http_errors import http_failure
from tests.admin.conftest import TOKEN
from tests.admin.fakebroker import FakeBroker

NO_TC = "this broker (2.10.5) has no transactionLogBatchedWriteEnabled; batched logs need Pulsar 2.11 or newer"


@pytest.fixture
def run(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    with FakeBroker(token=TOKEN, version="2.10.5") as broker:
        for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
            del broker.runtime[key]
        yield lambda *args: cli([*args, "--admin-url", broker.url, "--token", TOKEN])


def test_the_switch_is_refused_in_one_sentence(run):
    result = run("set-txn-tc-batch-log", "--enable", "--yes")
    assert result.exit_code == 2
    assert result.stderr.splitlines()[-1] == f"error: {NO_TC}"


def test_the_stat_says_no_store_can_batch(run):
    result = run("get-txn-tc-batch-log-stat", "-o", "json")
    assert result.exit_code == 0, result.stderr
    stat = result.json()
    assert stat["withoutBatchedLogs"] == "2.10.5"
    assert [(c["effective"], c["reason"]) for c in stat["coordinators"]] == [(False, NO_TC)] * 2
    assert stat["brokers"][0]["version"] == "2.10.5" and stat["brokers"][0]["runtime"] is False


def test_the_upgrade_check_says_upgrade_first_without_a_useless_fix(run):
    result = run("upgrade", "check", "-o", "json")
    assert result.exit_code == 5
    verdict = result.json()
    assert any(p.endswith(f"{NO_TC}; upgrade it before enabling batching") for p in verdict["problems"])
    assert verdict["fixes"] == []


def test_the_downgrade_check_is_not_blocked_by_the_missing_setting(run):
    result = run("downgrade", "check", "-o", "json")
    assert result.exit_code == 5, result.stderr
    verdict = result.json()
    assert verdict["verdict"] == "WAIT"  # BLOCKED before: "reports transactionLogBatchedWriteEnabled=None"
    assert not [p for p in verdict["problems"] if "BatchedWriteEnabled" in p], verdict["problems"]


@pytest.mark.parametrize(
    ("version", "lacks"),
    [
        ("2.10.5", True),
        ("2.10", True),
        ("2.11.0", False),
        ("4.0.7-SNAPSHOT", False),
        ("3.0.0", False),
        (None, False),
        ("garbage", False),
    ],
)
def test_which_releases_lack_batched_logs(version, lacks):
    assert features.lacks_batched_logs(version) is lacks


def test_a_missing_endpoint_is_named():
    jersey = b'{ "servlet":"org.glassfish.jersey.servlet.ServletContainer-1", "message":"Not Found", "url":"/x", "status":"404" }'
    error = http_failure(
        404,
        "GET",
        "/admin/v3/transactions/transactionBufferInternalStats/public/default/t",
        "cluster http://b:8080",
        jersey,
    )
    assert str(error).startswith(
        "cluster http://b:8080 has no /admin/v3/transactions/transactionBufferInternalStats endpoint (404)"
    )
    pulsar = http_failure(
        404,
        "GET",
        "/admin/v3/transactions/transactionMetadata/0/9",
        "cluster http://b:8080",
        b'{"reason": "not found"}',
    )
    assert "has no" not in str(pulsar) and "check the transaction id" in str(pulsar)


def test_an_authorization_401_says_the_role_lacks_permission():
    """A real 4.0.7 broker answers a known role that may not act with 401, not 403 (test_secured_broker.py)."""
    body = b'{"reason": "Unauthorized to validateTopicOperation for operation [LOOKUP] on topic [persistent://pulsar/system/x]"}'
    error = str(http_failure(401, "GET", "/admin/v3/transactions/coordinatorStats", "cluster https://b:8443", body))
    assert "the token's role lacks permission (401)" in error and "superUserRoles" in error
    assert "check the token" not in error
    unauthenticated = str(
        http_failure(
            401, "GET", "/admin/v2/clusters", "cluster https://b:8443", b'{"reason": "Authentication required"}'
        )
    )
    assert "unauthenticated (401)" in unauthenticated and "check the token" in unauthenticated
