"""The downgrade verdict against the engine's oracle: a stateful property test over what
operators, clients and time do to an engine. Fixed seed; `python -m bench verdict_oracle` runs more."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import run_state_machine_as_test

from tests.conftest import isolate
from tests.downgrade.oracle_machine import VerdictOracle, VerdictOracleServed, VerdictOracleSound

# A fixed budget of walks long enough for batching to come back between checks, derandomized so a failure
# reproduces; the deep profile (`python -m bench verdict_oracle`) explores at random for longer.
FAST = settings(
    max_examples=int(os.environ.get("VERDICT_ORACLE_EXAMPLES", "80")),
    stateful_step_count=30,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=list(HealthCheck),
)

# Judged against the oracle's future: a copy and rounds of traffic per judged check, so fewer walks.
JUDGED = settings(FAST, max_examples=int(os.environ.get("VERDICT_ORACLE_JUDGED", "40")))

# Every check by URL through `engine serve`: a server started per check, so fewer walks.
SERVED = settings(FAST, max_examples=int(os.environ.get("VERDICT_ORACLE_SERVED", "15")))


@pytest.mark.timeout(900)
def test_never_a_false_safe(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    run_state_machine_as_test(VerdictOracleSound, settings=FAST)


@pytest.mark.timeout(600)
def test_never_a_false_safe_by_url(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    run_state_machine_as_test(VerdictOracleServed, settings=SERVED)


@pytest.mark.timeout(600)
def test_the_verdict_follows_the_oracle(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)
    run_state_machine_as_test(VerdictOracle, settings=JUDGED)


# -- the shrunk counterexamples, as plain regression tests ------------------------------------------


@pytest.fixture
def machine(monkeypatch, tmp_path):
    """The judged machine for one regression walk, in an isolated home, torn down after it."""
    isolate(monkeypatch, tmp_path)
    walk = VerdictOracle()
    yield walk
    walk.teardown()


def test_regression_the_batch_index_stall_was_wait(machine):
    """The property test's shrunk counterexample on the code before the oracle was written: WAIT ("the ledger has not
    rolled over yet") while the oracle says traffic and time alone never clear the batched ledger.

      1. engine init --coordinators 1; acknowledgmentAtBatchIndexLevelEnabled=False; a 40-transaction workload
      2. set-txn-tc-batch-log --enable --reload --yes
      3. set-txn-pending-ack-batch-log --enable --reload --yes
      4. a client opens 3 transaction(s) (timeout 1h) and acks in them
      5. set-txn-tc-batch-log --disable --reload --yes
      6. set-txn-pending-ack-batch-log --disable --reload --yes
    """
    machine.start(batching=True, batch_index=False, coordinators=1, held=3, downgrading=True)
    doc = machine.check()
    assert doc["verdict"] == "BLOCKED", doc
    assert doc["coordinators"][0]["cause"] == "open-across-switch"
    machine.verdicts_follow_the_oracle()  # BLOCKED agrees with the oracle, and the fixes lead to WAIT
    machine.client_ends("commit")  # the stall itself: still BLOCKED, never WAIT
    assert machine.check()["verdict"] == "BLOCKED"
    machine.verdicts_follow_the_oracle()


def test_a_fresh_engine_that_never_batched_is_safe_without_advice_to_unload(cli, monkeypatch, tmp_path):
    """An operator's trial found it: a fresh engine (BATCHES WRITTEN 0) got WAIT, "4 of 4 logs still hold ledgers that
    may contain batched entries", and advice to unload the coordinators. Its buffered-writer metrics say no
    batch was ever written, and each log's only ledger was created after they started: SAFE, as the
    oracle says."""
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.oracle import downgrade_oracle

    isolate(monkeypatch, tmp_path)
    directory = tmp_path / "engine"
    Engine.init(directory).close()
    result = cli(["downgrade", "check", "--engine-dir", directory, "--checkpoint", tmp_path / "cp.json", "-o", "json"])
    assert result.exit_code == 0, result.stdout
    doc = result.json()
    assert doc["verdict"] == "SAFE" and all(c["clear"] for c in doc["coordinators"]) and len(doc["coordinators"]) == 4
    assert "unload" not in result.stdout + result.stderr
    with Engine.open(directory) as engine:
        assert downgrade_oracle(engine)["batchedReachable"] is False


def pending_ack_batching_again_names_the_stall(machine) -> None:
    """Step 8 of the two walks below, and what it must bring: BLOCKED, with the batch-index fix from the start."""
    machine.any_switch("pa", True, True)
    doc = machine.check()
    assert doc["verdict"] == "BLOCKED"
    assert any("acknowledgmentAtBatchIndexLevelEnabled" in f for f in doc["fixes"]), doc["fixes"]
    machine.verdicts_follow_the_oracle()


def test_regression_fixes_of_step_1_alone_led_to_the_stall(machine):
    """The property test's shrunk counterexample after the first fix: the TC log's transactions were open
    across the switch, but the pending-ack log batched again, so step 1 blocked first and its fix (turn
    pending-ack batching off) alone led to BLOCKED again. The stall is named from the start now.

      1.-6. as above, with 2 coordinators
      7. engine config set acknowledgmentAtBatchIndexLevelEnabled false; engine reload
      8. set-txn-pending-ack-batch-log --enable --reload --yes
    """
    machine.start(batching=True, batch_index=False, coordinators=2, held=3, downgrading=True)
    machine.batch_index_setting(False)
    pending_ack_batching_again_names_the_stall(machine)


def test_regression_fixes_of_step_1_alone_led_to_the_formed_stall(machine):
    """The third shrunk counterexample: the stall had formed (the transactions committed) when the
    pending-ack log batched again; step 1's fix alone led to BLOCKED on the stall. Named from the start now.

      1.-6. as above, with 2 coordinators
      7. the client commits its 3 open transaction(s)
      8. set-txn-pending-ack-batch-log --enable --reload --yes
    """
    machine.start(batching=True, batch_index=False, coordinators=2, held=3, downgrading=True)
    machine.client_ends("commit")
    pending_ack_batching_again_names_the_stall(machine)


def test_regression_a_busy_cluster_hid_the_formed_stall(machine):
    """The fourth shrunk counterexample: the stall had formed (the transactions held across the switch
    timed out), then new transactions opened; the stall needed no open transaction to be named, so the
    verdict said WAIT (`open-transaction`) on a busy cluster, which always has some. The cursor that stood
    still while every transaction open then ended is pinned: BLOCKED.

      1.-6. as above, with 1 coordinator (the switches forced past the switch's guard)
      7. engine advance 2h
      8. a client opens 2 transactions (timeout 30s) and acks in them
    """
    machine.start(batching=True, batch_index=False, coordinators=1, held=3, downgrading=True)
    machine.verdicts_follow_the_oracle()  # the machine checks after every step (its invariant)
    machine.time_passes("2h")
    machine.verdicts_follow_the_oracle()
    machine.open_transactions(2, "30s")
    # On a broker time always moves between a transaction's opening and the next check; the
    # engine's clock moves only when told to (slowTransactions lists those open for more than 0 ms).
    machine.time_passes("1s")
    doc = machine.check()
    assert doc["verdict"] == "BLOCKED", doc["problems"]
    assert any(i["cause"] == "batch-index-deletion" for i in doc["coordinators"]), doc["coordinators"]
    machine.verdicts_follow_the_oracle()


def test_a_switch_on_and_off_without_reload_fails_closed_and_its_fix_works(machine):
    """With transactions held: steps 1-6 as above with batch-index acks on, then set-txn-tc-batch-log --enable,
    then set-txn-tc-batch-log --disable --force, both without --reload. The batch-log record cannot tell what a
    store runs with, so the verdict fails closed (BLOCKED) where traffic and time alone would clear every batched
    ledger; its fix (`--disable --reload --yes`), followed on a copy, leaves what the oracle says clears."""
    machine.start(batching=True, batch_index=True, coordinators=1, held=3, downgrading=True)
    machine.open_transactions(3, "1h")
    machine.time_passes("1s")
    machine.verdicts_follow_the_oracle()
    machine.any_switch("tc", True, False)
    machine.verdicts_follow_the_oracle()
    machine.any_switch("tc", False, False)
    doc = machine.check()
    assert doc["verdict"] == "BLOCKED", doc["problems"]
    assert any("whether batching is effective is unknown" in p for p in doc["problems"]), doc["problems"]
    assert any("set-txn-tc-batch-log --disable --reload --yes" in f for f in doc["fixes"]), doc["fixes"]
    machine.verdicts_follow_the_oracle()  # and the fix, followed on a copy, clears by the oracle


def test_regression_safe_turned_wait_when_idle_ledgers_rolled_over(cli, monkeypatch, tmp_path):
    """Found by the faults set: a cluster that never batched is SAFE (each log's only ledger was created after the
    brokers' buffered-writer metrics started, and they counted no batch). Then, with no traffic, each idle
    pending-ack ledger rolled over at managedLedgerMaxLedgerRolloverTimeMinutes, and the next check said
    WAIT for good ("oldest ledger 7 <= last batched ledger 7: the cursor does not move"): the record took
    the one ledger for a batched one. Seen on the real faults cluster, whose ledgers roll after a minute."""
    isolate(monkeypatch, tmp_path)
    directory, checkpoint = tmp_path / "engine", tmp_path / "cp.json"
    target = ["--engine-dir", directory, "--checkpoint", checkpoint, "-o", "json"]
    assert cli(["engine", "init", "--coordinators", "1", "--engine-dir", directory]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "20", "--engine-dir", directory]).exit_code == 0
    before = cli(["downgrade", "check", *target])
    assert before.exit_code == 0 and before.json()["verdict"] == "SAFE", before.stdout
    rolled = cli(["engine", "advance", "5h", "--engine-dir", directory, "-o", "json"])
    assert rolled.json()["ledgersRolled"] >= 8, rolled.stdout  # every idle log rolled over
    after = cli(["downgrade", "check", *target])
    doc = after.json()
    assert after.exit_code == 0 and doc["verdict"] == "SAFE", [i["reason"] for i in doc["subscriptions"]]
    assert len(doc["subscriptions"]) == 8 and all(i["clear"] for i in doc["subscriptions"])


def test_regression_batching_back_on_between_two_checks_was_safe(monkeypatch, tmp_path):
    """The machine's shrunk counterexample on the code before the checkpoint kept the buffered-writer counters:
    SAFE while two pending-ack ledgers written during a batching spell were still stored.

      1.-6. as above, with 1 coordinator, batch-index acks on and transactionPendingAckLogIndexMinLag=60
      7. downgrade check -> WAIT
      8. the client commits its 3 open transaction(s)
      9. engine simulate -n 60; engine advance 15m
      11. set-txn-pending-ack-batch-log --enable --reload --yes --force
      12. engine simulate -n 20
      13. set-txn-pending-ack-batch-log --disable --reload --yes --force
      14. engine simulate -n 20
    """
    isolate(monkeypatch, tmp_path)
    machine = VerdictOracleSound()
    try:
        machine.start(batching=True, batch_index=True, coordinators=1, held=3, downgrading=True, index_lag=60)
        machine.client_ends("commit")
        machine.an_ordinary_quarter_hour(60)
        machine.batching_spell(("pa",), 20, False)
        machine.never_a_false_safe()
        doc = machine.check()
        assert doc["verdict"] == "WAIT", doc["problems"]
        assert any("batching may have run since the last check" in p for p in doc["problems"]), doc["problems"]
    finally:
        machine.teardown()


def test_regression_a_reset_checkpoint_cannot_yet_tell_the_stall_from_open_transactions(machine):
    """The deep profile's shrunk counterexample to the rule that a WAIT clears by itself: the stall had formed
    (batch-index acks off, records of transactions held across the switch in a batched entry), then the
    checkpoint was reset while clients held transactions open. The first check after the reset cannot tell
    whether those transactions hold the cursor (it has stood still only since that check): WAIT, never SAFE.
    Once the cursor has stood still past every transaction open at that check, the next check says BLOCKED.

      1.-7. as above, with 1 coordinator, batch-index acks off; downgrade check -> BLOCKED
      8. the client commits its 3 open transaction(s); engine simulate -n 60; engine advance 15m
      9. a client opens 4 transactions (timeout 30s); downgrade check -> BLOCKED; downgrade reset
      10. a client opens 4 transactions (timeout 30s); engine simulate -n 20; a client opens 2 more
      11. downgrade check -> WAIT
    """
    machine.start(batching=True, batch_index=False, coordinators=1, held=3, downgrading=True)
    machine.an_ordinary_quarter_hour(60)  # the client commits its 3; simulate -n 60; advance 15m
    machine.open_transactions(4, "30s")
    assert machine.check()["verdict"] == "BLOCKED"
    machine.downgrade_reset()
    machine.open_transactions(4, "30s")
    machine.workload(20)
    machine.open_transactions(2, "30s")
    doc = machine.check()
    assert doc["verdict"] == "WAIT", doc["problems"]
    machine.wait_ends_by_itself(doc)  # on a copy: BLOCKED by itself, as the oracle says no wait clears it
    machine.time_passes("2h")  # and on the engine itself
    doc = machine.check()
    assert doc["verdict"] == "BLOCKED", doc["problems"]
    assert any(i["cause"] == "batch-index-deletion" for i in doc["coordinators"]), doc["coordinators"]


def test_regression_a_cursor_before_the_open_transactions_records_was_called_pinned(machine):
    """The deep profile's shrunk counterexample to BLOCKED: batching on and off with no transaction open across
    the switch, then a client opens two. The TC log's cursor stands at the last record before theirs, with no
    entry deleted after it, since it has nothing else to acknowledge; the check, its record made then, called
    it the batch-index deletion stall (BLOCKED), which traffic and time clear. It is a WAIT for those
    transactions, and a --wait ends in SAFE.

      1.-4. engine init --coordinators 1 (batch-index acks off); batching on; a client opens 3 transactions (1h)
      5. the client commits them; engine simulate -n 60; engine advance 15m
      6. set-txn-tc-batch-log --disable and set-txn-pending-ack-batch-log --disable, each --reload --yes --force
      7. a client opens 2 transactions (timeout 30s) and acks in them
      8. downgrade check -> BLOCKED
    """
    machine.start(batching=True, batch_index=False, coordinators=1, held=3, downgrading=False)
    machine.an_ordinary_quarter_hour(60)  # the client commits its 3; simulate -n 60; advance 15m
    machine.disable_and_reload(("tc", "pa"))
    machine.open_transactions(2, "30s")
    doc = machine.check()
    assert doc["verdict"] == "WAIT", doc["problems"]
    assert not any(i["cause"] == "batch-index-deletion" for i in doc["coordinators"]), doc["coordinators"]
    machine.wait_ends_by_itself(doc)  # on a copy: SAFE with traffic and time, no operator


def test_regression_the_stalls_ghosts_after_its_fix_were_called_overdue(machine):
    """The deep profile's counterexample to BLOCKED, shortened: the batch-index deletion stall, then its own fix
    (batch-index acks on, a restart). The restart's replay brings back as OPEN the transactions committed
    across the switch, long past their 30 s timeout; the engine left them open until time next passed, and
    the check called them overdue (BLOCKED: abort them). A broker's reloaded coordinator aborts them at once
    (test_harness_smoke.py, on the real broker), so the check after the fix is a WAIT that ends by itself.

      1.-3. engine init --coordinators 1 (batch-index acks off); batching on; simulate -n 60; advance 15m
      4. a client opens 4 transactions (timeout 30s); both logs' batching off, each --reload
      5. the client commits them; simulate -n 150; advance 15m; downgrade check -> BLOCKED (the stall)
      6. engine config set acknowledgmentAtBatchIndexLevelEnabled true; engine reload
      7. downgrade check -> BLOCKED (overdue-transaction)
    """
    machine.start(batching=True, batch_index=False, coordinators=1, held=0, downgrading=False)
    machine.an_ordinary_quarter_hour(60)
    machine.open_transactions(4, "30s")
    machine.disable_and_reload(("tc", "pa"))
    machine.an_ordinary_quarter_hour(150)  # the client commits its 4 first
    doc = machine.check()
    assert [i["cause"] for i in doc["coordinators"]] == ["batch-index-deletion"], doc["coordinators"]
    machine.batch_index_setting(True)
    doc = machine.check()
    assert doc["verdict"] == "WAIT" and not doc["fixes"], doc["problems"]
    machine.wait_ends_by_itself(doc)  # on a copy: SAFE with traffic and time, no operator
