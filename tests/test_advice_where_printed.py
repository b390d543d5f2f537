"""Advice that works where it is printed: the verdict's and the doctor's fixes and advice, each against
the state that printed it (engine directories and served engines; the pending-ack switch's real-broker
side is tests/integration/test_pending_ack_switch_real_broker.py)."""

from __future__ import annotations

import shlex
import shutil
from pathlib import Path

import pytest

from pulsar_txn_cli.doctor.findings import ERROR, WARNING, Finding
from pulsar_txn_cli.downgrade import advice, causes
from pulsar_txn_cli.downgrade import verdict as v
from pulsar_txn_cli.engine.broker import Engine
from tests.conftest import run_cli
from tests.downgrade.builders import broker, checkpoint, obs, sub, tc
from tests.test_suggested_commands import TOPIC, Place, _batched_with_open, _overdue, _stuck_committing

pytestmark = pytest.mark.timeout(240)


def _engine_with_open_transaction(directory) -> None:
    assert run_cli(["engine", "init", "--coordinators", "1", "--engine-dir", directory]).exit_code == 0
    with Engine.open(directory) as engine:
        engine.tc(0).new_transaction(3_600_000, lambda txn: None)
        engine.checkpoint()


# -- a switch that changes nothing, and the pending-ack switch -------------------------------------------------


@pytest.mark.parametrize("reload", [[], ["--reload", "--yes"]], ids=["plain", "reload"])
def test_turning_off_what_is_off_and_never_batched_is_a_no_op(tmp_path, reload):
    """A transaction open, batch-index deletion off, batching off and never on: nothing can be pinned."""
    d = tmp_path / "engine"
    _engine_with_open_transaction(d)
    result = run_cli(["set-txn-tc-batch-log", "--disable", *reload, "--engine-dir", d])
    assert result.exit_code == 0 and "would pin" not in result.stderr, result.stderr
    # and the check after it does not take the transaction for one open across a switch from batching: no
    # broker has written a batch since before it opened
    check = run_cli(["downgrade", "check", "--engine-dir", d, "-o", "json"])
    assert check.json()["verdict"] != "BLOCKED", check.json()["problems"]


def test_the_pending_ack_switch_is_never_refused_for_the_stall(tmp_path):
    """Found on a real 4.0.7 broker: a pending-ack log is not pinned by a switch with transactions open
    (it trims whole entries); only the TC switch is refused."""
    d = tmp_path / "engine"
    _engine_with_open_transaction(d)
    e = ["--engine-dir", d]
    for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert run_cli([command, "--enable", "--reload", "--yes", *e]).exit_code == 0
    with Engine.open(d) as engine:
        engine.tc(0).new_transaction(3_600_000, lambda txn: None)
        engine.checkpoint()
    tc_switch = run_cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", *e])
    assert tc_switch.exit_code == 6 and "would pin" in tc_switch.stderr, tc_switch.stderr
    pending_ack = run_cli(["set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", *e])
    assert pending_ack.exit_code == 0 and "would pin" not in pending_ack.stderr, pending_ack.stderr


# -- batching on again while a downgrade is under way -----------------------------------------------------------


@pytest.mark.parametrize("command", ["set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"])
def test_enabling_during_a_downgrade_names_the_checkpoint_and_asks(tmp_path, command):
    d = tmp_path / "engine"
    e = ["--engine-dir", d]
    assert run_cli(["engine", "init", "--coordinators", "1", *e]).exit_code == 0
    assert run_cli(["engine", "simulate", "-n", "20", *e]).exit_code == 0
    assert run_cli([command, "--enable", "--reload", "--yes", *e]).exit_code == 0  # no downgrade yet: no question
    assert run_cli([command, "--disable", "--reload", "--yes", *e]).exit_code == 0
    check = run_cli(["downgrade", "check", "-o", "json", *e])
    path = check.json()["checkpoint"]
    assert check.json()["newlyRecorded"] > 0 and Path(path).exists()
    refused = run_cli([command, "--enable", "--reload", "--yes", *e])
    assert refused.exit_code == 6 and "a downgrade is under way" in refused.stderr and path in refused.stderr
    assert f"pulsar-txn downgrade reset --engine-dir {d}" in refused.stderr  # runnable as printed
    stat = run_cli([command.replace("set-", "get-") + "-stat", *e, "-o", "json"]).json()
    assert stat["dynamic"] is False, stat  # nothing was changed
    asked = run_cli([command, "--enable", "--reload", *e])  # no terminal: it asks, so it refuses to go on
    assert asked.exit_code in (2, 6) and "downgrade is under way" in asked.stderr
    forced = run_cli([command, "--enable", "--reload", "--yes", "--force", *e])
    assert forced.exit_code == 0 and "going ahead anyway (--force)" in forced.stderr
    reset = run_cli(["downgrade", "reset", *e])
    assert reset.exit_code == 0
    assert run_cli([command, "--enable", "--reload", "--yes", *e]).exit_code == 0  # nothing under way now


# -- the targets of printed commands ------------------------------------------------------------------------------


def test_a_served_engine_gets_no_engine_command_and_every_command_names_its_url(tmp_path):
    place = Place(tmp_path / "engine", tmp_path / "state", served=True)
    _batched_with_open(place.dir, open_transactions=2, state=place.state)
    with place:
        for args in (("downgrade", "check"), ("doctor",)):
            result = place.run(*args, *place.target)
            printed = result.stdout + result.stderr
            assert "engine config set" not in printed and "pulsar-txn engine reload" not in printed, printed
            assert "broker.conf" in printed and "restart" in printed
            for line in printed.splitlines():
                for command in [c for c in _commands(line) if c.startswith("pulsar-txn ")]:
                    assert place.server.url in shlex.split(command), command


def _commands(line: str) -> list[str]:
    import re

    quoted = re.findall(r"`(pulsar-(?:txn|admin) [^`]+)`", line)
    bare = re.sub(r"^\s*fix:\s*", "", line.strip())
    return quoted + ([bare] if bare.startswith("pulsar-txn ") and "`" not in bare else [])


# -- a transaction stuck COMMITTING or ABORTING ---------------------------------------------------------------------


def test_a_stuck_committing_transaction_is_ended_by_reloading_its_coordinator(tmp_path):
    d = tmp_path / "engine"
    _stuck_committing(d)
    e = ["--engine-dir", d]
    report = run_cli(["doctor", *e, "-o", "json"]).json()
    [hanging] = [f for f in report["findings"] if f["check"] == "hanging-transaction"]
    assert hanging["fix"] == [f"pulsar-txn unload --coordinator 0 --yes --engine-dir {d}"]
    assert "COMMITTING already" in hanging["advice"]
    aborted = run_cli(["abort-hanging", "--execute", "--yes", *e])
    assert aborted.exit_code != 0 and "unload --coordinator 0" in aborted.stderr, aborted.stderr
    unloaded = run_cli(shlex.split(hanging["fix"][0])[1:])
    assert unloaded.exit_code == 0, unloaded.stderr
    after = run_cli(["doctor", *e, "-o", "json"]).json()
    assert [f for f in after["findings"] if f["check"] in ("hanging-transaction", "held-readers")] == []


def test_the_buffer_that_blocks_an_end_is_ranked_before_the_stuck_transaction():
    from pulsar_txn_cli.doctor.transactions import causes_first

    partition = f"{TOPIC}-partition-0"
    stuck = Finding(
        "hanging-transaction",
        ERROR,
        "transaction (0,1)",
        "COMMITTING for 10m",
        [{"endpoint": "slow", "values": {"status": "COMMITTING", "producedPartitions": [partition]}}],
    )
    other = Finding("buffer-not-ready", WARNING, "persistent://public/default/x-partition-0", "Initializing")
    buffer = Finding("buffer-not-ready", WARNING, partition, "Initializing")
    ranked = causes_first([stuck, other, buffer])
    assert [f.subject for f in ranked] == [partition, "transaction (0,1)", other.subject]
    assert ranked[0].severity == ERROR  # graded as what it blocks
    opened = Finding("hanging-transaction", ERROR, "t", "OPEN", [{"endpoint": "s", "values": {"status": "OPEN"}}])
    assert causes_first([opened, buffer]) == [opened, buffer]


def test_unload_takes_a_coordinator_or_all_of_them(tmp_path):
    d = tmp_path / "engine"
    e = ["--engine-dir", d]
    assert run_cli(["engine", "init", "--coordinators", "3", *e]).exit_code == 0
    one = run_cli(["unload", "--coordinator", "2", "--yes", *e, "-o", "json"])
    assert one.exit_code == 0
    assert one.json()["topic"] == "persistent://pulsar/system/transaction_coordinator_assign-partition-2"
    every = run_cli(["unload", "--all-coordinators", "--yes", *e, "-o", "json"])
    assert [r["topic"][-1] for r in every.json()] == ["0", "1", "2"]
    missing = run_cli(["unload", "--coordinator", "7", "--yes", *e])
    assert missing.exit_code == 2 and "coordinator 7 does not exist" in missing.stderr
    both = run_cli(["unload", "--coordinator", "1", "-t", TOPIC, "--yes", *e])
    assert both.exit_code == 2 and "exactly one of" in both.stderr


# -- the demo's suggestions ----------------------------------------------------------------------------------------


def test_the_temporary_demo_suggests_a_check_that_answers_as_it_did(tmp_path):
    result = run_cli(["demo", "--transactions", "60", "--coordinators", "1", "-o", "json"])
    summary = result.json()
    directory = Path(summary["engineDir"])
    try:
        assert result.exit_code == 0 and summary["verdict"] == "SAFE", result.stderr
        [line] = [x.strip() for x in result.stderr.splitlines() if "downgrade check -o json" in x]
        check = run_cli(shlex.split(line)[1:])
        doc = check.json()
        assert (check.exit_code, doc["verdict"]) == (0, "SAFE"), doc["problems"]
        assert summary["forgotten"] >= 1  # the user's state directory keeps nothing of it
    finally:
        shutil.rmtree(directory, ignore_errors=True)


# -- doctor on a BLOCKED downgrade -----------------------------------------------------------------------------------


def test_doctor_on_a_blocked_downgrade_lists_each_log_once_graded_by_its_cause(tmp_path):
    place = Place(tmp_path / "engine", tmp_path / "state", served=False)
    _batched_with_open(place.dir, open_transactions=2, state=place.state)
    with place:
        check = place.json("downgrade", "check")
        report = place.json("doctor")
    assert check["verdict"] == "BLOCKED"
    ours = [f for f in report["findings"] if f["check"] == "downgrade"]
    subjects = [f["subject"] for f in ours]
    assert len(subjects) == len(set(subjects)), subjects  # no log twice
    assert all("pulsar-txn downgrade check" not in " ".join(f["fix"]) for f in ours)
    by_subject = {f["subject"]: f for f in ours}
    assert by_subject["coordinator 0"]["severity"] == "error"
    stall = [f for f in by_subject["coordinator 0"]["fix"] if "acknowledgmentAtBatchIndexLevelEnabled" in f]
    assert stall, by_subject["coordinator 0"]
    for finding in ours:
        if finding["subject"].startswith("subscription "):
            assert finding["severity"] == "warning", finding  # WAIT causes (ledger not rolled over...)
            assert not any("acknowledgmentAtBatchIndexLevelEnabled" in f for f in finding["fix"]), finding


# -- WAIT that waiting alone never clears ------------------------------------------------------------------------------


def test_an_idle_pending_ack_log_names_the_traffic_it_needs_and_where_to_see_its_consumers():
    log = sub(ledgers=(4, 9), mark="4:-1", lac="9:3")
    result = v.downgrade_verdict(obs([tc(0, (9,))], [log]), checkpoint({0: 3}, {(log.topic, "s"): 5}))
    [item] = result.subscriptions
    assert item.cause == causes.CAUSE_CURSOR_STUCK
    assert f"transactional acknowledgements on subscription 's' of {log.topic}" in item.reason
    assert "time alone never clears it" in item.advice
    assert f"`pulsar-admin topics stats {log.topic}`" in item.advice  # consumers and backlog
    assert f"`pulsar-txn pending-ack-stats -t {log.topic} -s s`" in item.advice


def test_an_empty_current_ledger_says_it_never_rolls_over_by_time():
    log = tc(0, (4,), mark="3:9", lac="3:9")  # ledger 4 is current and holds no entry
    result = v.downgrade_verdict(obs([log], brokers=[broker(batch_index=True)]), checkpoint({0: 4}))
    [item] = result.coordinators
    assert item.cause == causes.CAUSE_NOT_ROLLED
    assert "it is empty" in item.reason and "a transaction on coordinator 0" in item.reason
    assert "never rolls over by time alone" in item.advice
    assert "`pulsar-txn unload --coordinator 0 --yes`" in item.advice
    written = tc(0, (4,), mark="4:1", lac="4:3")
    [busy] = v.downgrade_verdict(obs([written], brokers=[broker(batch_index=True)]), checkpoint({0: 4})).coordinators
    assert "empty" not in busy.reason and "wait for the ledger to roll over" in busy.advice


# -- more overdue transactions than listed ------------------------------------------------------------------------------


def test_overdue_transactions_beyond_those_listed_are_counted_and_aborted_by_one_command(tmp_path):
    place = Place(tmp_path / "engine", tmp_path / "state", served=False)
    _overdue(place.dir, open_transactions=31, state=place.state)
    with place:
        doc = place.json("downgrade", "check")
    assert doc["verdict"] == "BLOCKED" and doc["coordinators"][0]["cause"] == "overdue-transaction"
    shown = advice.SHOWN_OVERDUE
    assert sum("abort-transaction" in f for f in doc["fixes"]) == shown
    assert any(f"{31 - shown} more overdue transaction(s)" in p for p in doc["problems"]), doc["problems"]
    [everyone] = [f for f in doc["fixes"] if "abort-hanging" in f]
    assert everyone == f"pulsar-txn abort-hanging --state OPEN --execute --yes --engine-dir {place.dir}"
    with place:  # that one command alone ends every one of them
        assert place.run(*shlex.split(everyone)[1:]).exit_code == 0
        after = place.json("downgrade", "check")
    assert after["verdict"] != "BLOCKED" and after["coordinators"][0]["cause"] != "overdue-transaction", after
