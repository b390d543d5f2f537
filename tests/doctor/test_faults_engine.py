"""Every engine fault makes its check fire, and the fix the doctor prints clears it (run as printed)."""

from __future__ import annotations

import pytest

from tests.conftest import isolate
from tests.doctor.helpers import TOPIC0, advance, doctor, run_fix, sick_engine

pytestmark = pytest.mark.timeout(300)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


CASES = [
    # fault, check, severity once the clock moved 2 minutes, subject
    ("client-crash", "hanging-transaction", "error", "transaction (0,"),
    ("coordinator-not-ready", "coordinator-not-ready", "error", "coordinator 0"),
    ("buffer-recovering", "buffer-not-ready", "error", TOPIC0),
    ("buffer-no-snapshot", "buffer-not-ready", "error", TOPIC0),
    ("pending-ack-not-ready", "pending-ack-not-ready", "error", f"{TOPIC0} / sim-sub-0"),
    ("leaked-pending-ack", "leaked-pending-ack", "error", f"{TOPIC0}-sim-sub-0__transaction_pending_ack"),
    ("phantom-fence", "phantom-fence", "error", TOPIC0),
    ("replication-held", "held-replicators", "error", TOPIC0),
]


@pytest.mark.parametrize("fault,check,severity,subject", CASES, ids=[c[0] for c in CASES])
def test_fault_is_found_and_its_printed_fix_clears_it(cli, tmp_path, fault, check, severity, subject):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, fault, "--txn-timeout-ms", "3600000")
    advance(cli, directory, "2m")  # past the recovery grace (60 s); the transaction stays young (timeout 1 h)
    code, report = doctor(cli, directory, "--older-than", "1m")
    ours = [f for f in report["findings"] if f["check"] == check and f["subject"].startswith(subject)]
    assert ours, report["findings"]
    assert ours[0]["severity"] == severity and code == 6
    assert all(e["endpoint"].startswith(("GET ", "/")) for e in ours[0]["evidence"]), ours[0]["evidence"]
    assert ours[0]["fix"] and all(f"--engine-dir {directory}" in c for c in ours[0]["fix"]), ours[0]["fix"]
    for command in ours[0]["fix"]:
        run_fix(cli, command)
    code, after = doctor(cli, directory, "--older-than", "1m")
    left = [f for f in after["findings"] if f["check"] == check and f["subject"].startswith(subject)]
    assert left == [], left


def test_every_fix_applied_until_healthy(cli, tmp_path):
    """Several faults at once: apply every printed fix, check again, until exit 0 (bounded)."""
    directory = tmp_path / "engine"
    sick_engine(cli, directory, "client-crash", "--txn-timeout-ms", "3600000")
    for fault in ("pending-ack-not-ready", "coordinator-not-ready"):
        result = cli(["engine", "simulate", "--engine-dir", directory, "-n", "0", "--topics", "2", "--fault", fault])
        assert result.exit_code == 0, result.stderr
    advance(cli, directory, "2m")
    seen = set()
    for _ in range(4):
        code, report = doctor(cli, directory, "--older-than", "1m")
        if code == 0:
            break
        seen |= {f["check"] for f in report["findings"]}
        assert report["fixes"] == list(dict.fromkeys(c for f in report["findings"] for c in f["fix"]))
        for command in report["fixes"]:
            run_fix(cli, command)
    assert code == 0 and report["findings"] == []
    assert {"hanging-transaction", "held-readers", "pending-ack-not-ready", "coordinator-not-ready"} <= seen


def test_young_stuck_store_is_a_warning_exit_5(cli, tmp_path):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, "buffer-recovering")
    code, report = doctor(cli, directory)
    assert code == 5 and [f["severity"] for f in report["findings"]] == ["warning"]


def test_healthy_engine_exit_0_and_every_check_listed(cli, tmp_path):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    code, report = doctor(cli, directory)
    assert code == 0 and report["findings"] == []
    assert report["target"] == f"engine {directory}"
    checks = {c["check"]: c for c in report["checks"]}
    assert set(checks) == {
        "coordinator-not-ready",
        "hanging-transaction",
        "held-readers",
        "held-replicators",
        "phantom-fence",
        "buffer-not-ready",
        "pending-ack-not-ready",
        "leaked-pending-ack",
        "config",
        "second-coordinator",
        "downgrade",
    }
    assert all(c["ran"] for name, c in checks.items() if name != "downgrade")
    assert checks["downgrade"]["ran"] is False and "no downgrade under way" in checks["downgrade"]["why"]
    assert report["checked"]["partitions"] == 2 and report["requests"] > 0


def test_unknown_fault_is_a_usage_error(cli, tmp_path):
    result = cli(["engine", "simulate", "--engine-dir", tmp_path / "e", "-n", "1", "--fault", "gremlins"])
    assert result.exit_code == 2 and "client-crash" in result.stderr


def test_crashed_client_hangs_until_its_timeout_then_the_coordinator_aborts_it(cli, tmp_path):
    """Default bound: half the transaction's own timeout; at the timeout the engine's tracker aborts it."""
    directory = tmp_path / "engine"
    sick_engine(cli, directory, "client-crash", "--txn-timeout-ms", "300000")
    advance(cli, directory, "2m")
    assert doctor(cli, directory)[0] == 0  # under half its 5-minute timeout: a transaction in progress
    advance(cli, directory, "1m")
    code, report = doctor(cli, directory)
    assert code == 6 and {f["check"] for f in report["findings"]} == {"hanging-transaction", "held-readers"}
    found = cli(["find-hanging", "--engine-dir", directory, "-o", "json"]).json()["transactions"]
    assert [t["txnId"] for t in found] == report["findings"][0]["txnIds"]
    advance(cli, directory, "3m")
    assert doctor(cli, directory)[0] == 0
    assert cli(["find-hanging", "--engine-dir", directory, "-o", "json"]).json()["transactions"] == []


@pytest.mark.parametrize("scope", [["-n", "public/nosuch"], ["-t", "public/default/nosuch"]])
def test_a_named_scope_that_cannot_be_read_is_an_error_not_an_all_clear(cli, tmp_path, scope):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    result = cli(["doctor", *scope, "--engine-dir", directory])
    assert result.exit_code == 4 and "nosuch" in result.stderr and result.stdout == ""


def test_bad_flags_are_usage_errors(cli, tmp_path):
    d = ["--engine-dir", tmp_path / "engine"]
    for args, words in (
        (["-n", "a/b", "-t", "x"], "at most one"),
        (["-n", "bad"], "tenant/namespace"),
        (["--timeout", "5"], "--wait"),
        (["--wait", "--interval", "0.5"], "--interval"),
        (["--older-than", "soon"], "--older-than"),
    ):
        result = cli(["doctor", *args, *d])
        assert result.exit_code == 2 and words in result.stderr, (args, result.stderr)


def test_wait_repeats_until_healthy_or_an_error(cli, tmp_path):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, "buffer-recovering")  # a warning: it may settle, so --wait keeps checking
    result = cli(["doctor", "--wait", "--interval", "1", "--timeout", "2.5", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 5 and result.stderr.count("check ") >= 3, result.stderr
    assert "check 1: 0 errors, 1 warning" in result.stderr
    advance(cli, directory, "2m")  # now an error: an operator must act, so --wait stops at once
    result = cli(["doctor", "--wait", "--interval", "1", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 6 and result.stderr.count("check ") == 1
    run_fix(cli, result.json()["fixes"][0])
    result = cli(["doctor", "--wait", "--interval", "1", "--engine-dir", directory])
    assert result.exit_code == 0 and "check 1: nothing found" in result.stderr


def test_clean_pending_ack_refuses_a_log_in_use_or_not_a_log(cli, tmp_path):
    directory = tmp_path / "engine"
    sick_engine(cli, directory, None)
    d = ["--engine-dir", directory, "--yes"]
    in_use = cli(["clean-pending-ack", f"{TOPIC0}-sim-sub-0__transaction_pending_ack", *d])
    assert in_use.exit_code == 2 and "still exists" in in_use.stderr
    assert cli(["clean-pending-ack", TOPIC0, *d]).exit_code == 2
    gone = cli(["clean-pending-ack", f"{TOPIC0}-nosub__transaction_pending_ack", *d])
    assert gone.exit_code == 2 and "does not exist" in gone.stderr
    listed = cli(["subscriptions", "--engine-dir", directory, "-o", "json"]).json()
    assert f"{TOPIC0}-sim-sub-0__transaction_pending_ack" in {e["pendingAckTopic"] for e in listed}
