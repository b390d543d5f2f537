"""The downgrade and upgrade verdicts, as pure functions: every rule, one case each."""

from __future__ import annotations

from dataclasses import replace

import pytest

from pulsar_txn_cli.downgrade import advice, causes, entry_scan, step1, upgrade, verdict as v
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS, TC_BATCH_KEY
from tests.downgrade.builders import T1, TARGET, broker, checkpoint, obs, sub, tc


# -- step 2: recording and clearing ------------------------------------------------------------


def test_first_check_records_the_newest_ledgers_and_waits():
    result = v.downgrade_verdict(obs([tc(0, (3, 4)), tc(1, (7,))], [sub(ledgers=(10, 12))]), None)
    assert result.verdict == v.WAIT
    assert result.newly_recorded == 3
    cp = result.checkpoint
    assert cp.target == TARGET
    assert {cid: r.last_batched_ledger_id for cid, r in cp.coordinators.items()} == {0: 4, 1: 7}
    assert cp.subscriptions[("persistent://public/default/t", "s")].last_batched_ledger_id == 12
    assert all(r.recorded_at == T1 for r in cp.coordinators.values())
    assert [i.clear for i in result.items] == [False, False, False]


def test_all_oldest_ledgers_past_the_records_is_safe():
    cp = checkpoint({0: 4, 1: 7}, {("persistent://public/default/t", "s"): 12})
    result = v.downgrade_verdict(obs([tc(0, (5, 6)), tc(1, (8,))], [sub(ledgers=(13,))]), cp)
    assert result.verdict == v.SAFE, result.problems
    assert result.problems == [] and result.fixes == []
    assert all(i.clear for i in result.items)
    assert result.coordinators[0].reason == "oldest ledger 5 > last batched ledger 4"


def test_oldest_equal_to_the_record_is_not_clear():
    result = v.downgrade_verdict(obs([tc(0, (4, 5)), tc(1, (8,))]), checkpoint({0: 4, 1: 7}))
    assert result.verdict == v.WAIT
    assert [i.clear for i in result.coordinators] == [False, True]


def test_records_are_never_replaced():
    cp = checkpoint({0: 4})
    result = v.downgrade_verdict(obs([tc(0, (4, 9))]), cp)
    assert result.checkpoint.coordinators[0].last_batched_ledger_id == 4
    assert result.newly_recorded == 0


def test_a_subscription_first_seen_later_is_recorded_then_and_holds_the_verdict():
    cp = checkpoint({0: 4})
    result = v.downgrade_verdict(obs([tc(0, (5,))], [sub(name="late", ledgers=(20, 21))]), cp)
    assert result.verdict == v.WAIT
    assert result.newly_recorded == 1
    assert result.checkpoint.subscriptions[("persistent://public/default/t", "late")].recorded_at == T1
    assert result.coordinators[0].clear and not result.subscriptions[0].clear


def test_a_recorded_item_not_found_now_is_not_clear():
    cp = checkpoint({0: 4, 1: 5})
    result = v.downgrade_verdict(obs([tc(0, (6,))]), cp)
    assert result.verdict == v.WAIT
    missing = result.coordinators[1]
    assert missing.observation.coordinator_id == 1 and not missing.clear and missing.cause == causes.CAUSE_MISSING


def test_a_recorded_ledger_newer_than_the_log_is_an_inconsistent_checkpoint():
    result = v.downgrade_verdict(obs([tc(0, (3, 4))]), checkpoint({0: 99}))
    assert result.verdict == v.BLOCKED
    assert result.coordinators[0].cause == causes.CAUSE_INCONSISTENT


# -- failing closed ------------------------------------------------------------------------------


def test_an_item_that_could_not_be_read_waits():
    result = v.downgrade_verdict(obs([tc(0, (6,)), tc(1, None, error="HTTP 500")]), checkpoint({0: 4, 1: 4}))
    assert result.verdict == v.WAIT
    assert "HTTP 500" in result.coordinators[1].reason


def test_an_empty_ledger_list_waits():
    result = v.downgrade_verdict(obs([tc(0, ())]), checkpoint({0: 4}))
    assert result.verdict == v.WAIT


def test_a_broker_whose_runtime_config_failed_waits_and_records_nothing():
    result = v.downgrade_verdict(obs([tc(0, (3,))], brokers=[broker(), broker("b2:8080", error="timed out")]), None)
    assert result.verdict == v.WAIT
    assert result.newly_recorded == 0
    assert any("b2:8080" in p and "timed out" in p for p in result.problems)


def test_an_unreadable_dynamic_config_waits():
    o = obs([tc(0, (6,))], dynamic=None, dynamic_error="HTTP 403")
    o = o.__class__(**{**o.__dict__, "dynamic_config": None})
    result = v.downgrade_verdict(o, checkpoint({0: 4}))
    assert result.verdict == v.WAIT and any("HTTP 403" in p for p in result.problems)


def test_an_unlisted_broker_set_waits():
    result = v.downgrade_verdict(obs([tc(0, (6,))], brokers=[], brokers_error="HTTP 500"), checkpoint({0: 4}))
    assert result.verdict == v.WAIT


def test_no_broker_at_all_waits():
    result = v.downgrade_verdict(obs([tc(0, (6,))], brokers=[]), checkpoint({0: 4}))
    assert result.verdict == v.WAIT


def test_a_discovery_problem_waits_even_when_every_seen_item_is_clear():
    result = v.downgrade_verdict(
        obs([tc(0, (6,))], problems=("namespace public/x could not be listed",)), checkpoint({0: 4})
    )
    assert result.verdict == v.WAIT
    assert result.problems == ["namespace public/x could not be listed"]


def test_no_coordinator_is_blocked():
    assert v.downgrade_verdict(obs([]), None).verdict == v.BLOCKED


def test_a_checkpoint_of_another_target_is_blocked_and_left_alone():
    result = v.downgrade_verdict(obs([tc(0, (6,))]), checkpoint({0: 4}, target="http://other:8080"))
    assert result.verdict == v.BLOCKED
    assert result.checkpoint is None
    assert "http://other:8080" in result.problems[0]


def test_an_unreadable_checkpoint_is_blocked_and_left_alone():
    result = v.downgrade_verdict(obs([tc(0, (6,))]), None, checkpoint_error="checkpoint x is not valid JSON")
    assert result.verdict == v.BLOCKED and result.checkpoint is None


# -- step 1 --------------------------------------------------------------------------------------


@pytest.mark.parametrize("key", BATCH_KEYS)
def test_batching_on_in_the_dynamic_config_is_blocked_with_the_fix(key):
    result = v.downgrade_verdict(obs([tc(0, (3,))], dynamic={key: "true"}), None)
    assert result.verdict == v.BLOCKED
    assert result.fixes == [
        advice.set_command(key, False),
        f"pulsar-admin brokers update-dynamic-config --config {key} --value false",
    ]
    assert result.newly_recorded == 0


def test_batching_on_in_one_brokers_runtime_is_blocked():
    result = v.downgrade_verdict(obs([tc(0, (3,))], brokers=[broker(), broker("b2:8080", batching=True)]), None)
    assert result.verdict == v.BLOCKED
    assert any("b2:8080" in p for p in result.problems)
    assert len(result.fixes) == 4


@pytest.mark.parametrize("value", [None, "yes", ""])
def test_a_runtime_value_that_is_not_a_boolean_is_blocked(value):
    runtime = {TC_BATCH_KEY: value, BATCH_KEYS[1]: "false"}
    if value is None:
        del runtime[TC_BATCH_KEY]
    b = broker().__class__("b1:8080", runtime, "4.0.4")
    assert v.downgrade_verdict(obs([tc(0, (3,))], brokers=[b]), None).verdict == v.BLOCKED


def test_a_dynamic_value_that_is_not_a_boolean_is_blocked():
    assert v.downgrade_verdict(obs([tc(0, (3,))], dynamic={TC_BATCH_KEY: "maybe"}), None).verdict == v.BLOCKED


def test_a_dynamic_override_to_false_is_fine():
    result = v.downgrade_verdict(obs([tc(0, (6,))], dynamic={k: "false" for k in BATCH_KEYS}), checkpoint({0: 4}))
    assert result.verdict == v.SAFE


def test_a_coordinator_still_batching_is_blocked_with_its_reload_command():
    result = v.downgrade_verdict(obs([tc(0, (3,)), tc(1, (3,), effective=True)]), None)
    assert result.verdict == v.BLOCKED
    assert result.fixes == ["pulsar-txn unload --coordinator 1 --yes"]
    assert result.newly_recorded == 0


def test_a_subscription_still_batching_is_blocked_with_its_reload_command():
    result = v.downgrade_verdict(obs([tc(0, (3,))], [sub(effective=True)]), None)
    assert result.verdict == v.BLOCKED
    assert result.fixes == ["pulsar-txn unload -t persistent://public/default/t --yes"]


def test_an_unknown_effective_state_is_blocked():
    result = v.downgrade_verdict(obs([tc(0, (3,), effective=None, effective_reason="no stats")]), None)
    assert result.verdict == v.BLOCKED
    assert "no stats" in result.problems[0]
    assert result.fixes == ["pulsar-txn set-txn-tc-batch-log --disable --reload --yes"]


def test_a_store_still_opening_is_wait_not_blocked():
    """After a broker restart a store replays its log before it is Ready: it opens with the
    configured value, so the check waits for it (found on a real cluster, --wait across a restart)."""
    opening = sub(effective=None, effective_reason="the store is in state Initializing", store_state="Initializing")
    result = v.downgrade_verdict(
        obs([tc(0, (3,))], [opening]), checkpoint({0: 2}, {("persistent://public/default/t", "s"): 9})
    )
    assert result.verdict == v.WAIT, result.problems
    assert any("still opening" in p for p in result.problems) and not result.fixes
    closed = sub(effective=None, effective_reason="the store is not loaded", store_state=None)
    assert v.downgrade_verdict(obs([tc(0, (3,))], [closed]), None).verdict == v.BLOCKED


def test_batching_on_again_drops_the_records():
    result = v.downgrade_verdict(obs([tc(0, (6,))], dynamic={TC_BATCH_KEY: "true"}), checkpoint({0: 4}))
    assert result.verdict == v.BLOCKED
    assert result.checkpoint.size == 0
    assert any("records were dropped" in p for p in result.problems)


def test_a_failed_observation_alone_does_not_drop_the_records():
    result = v.downgrade_verdict(obs([tc(0, (6,))], brokers=[broker(error="boom")]), checkpoint({0: 4}))
    assert result.verdict == v.WAIT
    assert result.checkpoint.coordinators[0].last_batched_ledger_id == 4


# -- likely causes -------------------------------------------------------------------------------


def _cause(log, recorded=4, brokers=None):
    result = v.downgrade_verdict(
        obs(
            [log] if log.kind == "coordinator" else [tc(0, (9,))],
            [] if log.kind == "coordinator" else [log],
            brokers=brokers,
        ),
        checkpoint({0: recorded}, {(log.topic, log.subscription): recorded} if log.kind != "coordinator" else None),
    )
    item = result.coordinators[0] if log.kind == "coordinator" else result.subscriptions[0]
    assert not item.clear and result.verdict == v.WAIT
    return item


def test_cause_ledger_not_rolled():
    item = _cause(tc(0, (4,), mark="4:1", lac="4:9"))
    assert item.cause == causes.CAUSE_NOT_ROLLED and "unload" in item.advice


def test_cause_trim_pending_when_the_cursor_consumed_everything():
    assert _cause(tc(0, (4, 5), mark="5:3", lac="5:3")).cause == causes.CAUSE_TRIM_PENDING


def test_cause_open_transaction():
    item = _cause(tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=2))
    assert item.cause == causes.CAUSE_OPEN_TXN and "slow-transactions" in item.advice
    assert "2 open transaction(s)" in item.reason


def test_transactions_long_past_their_timeout_are_blocked_with_their_aborts():
    """Their coordinator did not end them at their timeout (seen on a real 2.11.0 cluster after a client was
    killed mid-commit): waiting does not help, so BLOCKED, with the abort of each, and --wait stops there."""
    log = tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=2, overdue_txns=("(0,7)",))
    result = v.downgrade_verdict(obs([log], brokers=[broker(version="4.0.7")]), checkpoint({0: 4}))
    item = result.coordinators[0]
    assert item.cause == causes.CAUSE_OVERDUE and "(0,7)" in item.reason and "never end" in item.reason
    assert (
        result.verdict == v.BLOCKED
        and "coordinator 0: oldest ledger 4 <= last batched ledger 4: 1 transaction(s) open long past"
        in result.problems[0]
    )
    assert result.fixes == ["pulsar-txn abort-transaction -m 0 -l 7 --yes"]
    # A broker without the abort endpoint (before 3.2): the coordinator's reload ends them.
    old = v.downgrade_verdict(obs([log], brokers=[broker(version="2.11.0")]), checkpoint({0: 4}))
    assert old.fixes == ["pulsar-txn unload --coordinator 0 --yes"]
    # Open, but within their timeout: they may still end, so WAIT as before.
    assert _cause(replace(log, overdue_txns=())).cause == causes.CAUSE_OPEN_TXN


def test_the_batch_index_stall_is_blocked_with_its_fixes():
    """No open transaction, batch-index deletion off, the cursor pinned in the batched ledger: nothing
    but an operator clears it, so BLOCKED, and --wait stops there."""
    log = tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=0)
    result = v.downgrade_verdict(obs([log], brokers=[broker(batch_index=False)]), checkpoint({0: 4}))
    item = result.coordinators[0]
    assert item.cause == causes.CAUSE_BATCH_INDEX and "only an operator can clear" in item.reason
    assert "acknowledgmentAtBatchIndexLevelEnabled" in item.advice and "facts" not in item.advice
    assert result.verdict == v.BLOCKED and result.problems[0].startswith("coordinator 0: ")
    assert "acknowledgmentAtBatchIndexLevelEnabled=true in every broker's broker.conf" in result.fixes[0]


def test_the_batch_index_cause_with_open_transactions_unknown_is_not_blocked():
    item = _cause(tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=None), brokers=[broker(batch_index=False)])
    assert item.cause == causes.CAUSE_BATCH_INDEX  # WAIT: whether transactions are open is not known


def test_transactions_open_across_the_switch_without_batch_index_acks_are_blocked():
    """Opened before the coordinator reopened without batching: once they end, the stall is certain."""
    log = tc(0, (4,), mark="4:1", lac="4:9", ongoing_txns=2, oldest_open_ms=1_000, opened_ms=5_000)
    result = v.downgrade_verdict(obs([log], brokers=[broker(batch_index=False)]), checkpoint({0: 4}))
    assert result.verdict == v.BLOCKED
    assert result.coordinators[0].cause == causes.CAUSE_OPEN_ACROSS
    # The same transactions opened after the reopen hold no batched record: they only need to end.
    later = replace(log, oldest_open_ms=6_000)
    assert v.downgrade_verdict(obs([later], brokers=[broker(batch_index=False)]), checkpoint({0: 4})).verdict == v.WAIT
    # With batch-index deletion on, their records are deleted when they end.
    assert v.downgrade_verdict(obs([log], brokers=[broker(batch_index=True)]), checkpoint({0: 4})).verdict == v.WAIT


def test_an_engine_gets_the_engines_own_fix_commands():
    log = tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=0)
    result = v.downgrade_verdict(
        obs([log], brokers=[broker(batch_index=False)], identity="engine 1234", target="engine /srv/e"),
        checkpoint({0: 4}, target="engine 1234"),
    )
    assert result.fixes == [
        "pulsar-txn engine config set acknowledgmentAtBatchIndexLevelEnabled true",
        "pulsar-txn engine reload",
    ]


def test_a_served_engine_is_told_the_static_fix_in_words():
    """Reached by URL (`engine serve`), an engine is a cluster to the tool: `engine config set` would change
    whatever engine the operator's shell defaults to, so the static setting's fix is said in words."""
    log = tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=0)
    result = v.downgrade_verdict(
        obs([log], brokers=[broker(batch_index=False)], identity="engine 1234", target="cluster http://h:8080"),
        checkpoint({0: 4}, target="engine 1234"),
    )
    [fix] = result.fixes
    assert "broker.conf" in fix and "restart the brokers" in fix and "engine config set" not in fix


def test_turning_tc_batching_off_with_open_transactions_turns_batch_index_deletion_on_first():
    log = tc(0, (4,), effective=True, ongoing_txns=3)
    result = v.downgrade_verdict(obs([log], brokers=[broker(batching=True, batch_index=False)]), None)
    assert result.verdict == v.BLOCKED
    assert "turning batching off now would pin the TC log" in " ".join(result.problems)
    assert "acknowledgmentAtBatchIndexLevelEnabled=true" in result.fixes[0]
    assert any("set-txn-tc-batch-log --disable" in f for f in result.fixes[1:])


def test_cause_cursor_stuck_on_a_tc_log_with_batch_index_acks():
    item = _cause(tc(0, (4, 5), mark="4:2", lac="5:3", ongoing_txns=0), brokers=[broker(batch_index=True)])
    assert item.cause == causes.CAUSE_CURSOR_STUCK


def test_cause_pending_ack_cursor_stuck_points_at_the_subscription():
    item = _cause(sub(ledgers=(4, 5), mark="4:0", lac="5:3", ongoing_txns=0))
    assert item.cause == causes.CAUSE_CURSOR_STUCK and "topics stats persistent://public/default/t" in item.advice


# -- JSON shape ----------------------------------------------------------------------------------


def test_json_shape():
    data = v.downgrade_verdict(
        obs([tc(0, (5,))], [sub(ledgers=(13,))]), checkpoint({0: 4}, {("persistent://public/default/t", "s"): 12})
    ).to_json()
    assert data["verdict"] == "SAFE" and data["target"] == TARGET and data["problems"] == []
    assert {"coordinatorId", "oldestLedgerId", "lastBatchedLedgerId", "clear", "reason"} <= set(data["coordinators"][0])
    assert {"topic", "subscription", "oldestLedgerId", "lastBatchedLedgerId", "clear", "reason"} <= set(
        data["subscriptions"][0]
    )
    assert data["coordinators"][0]["oldestLedgerId"] == 5 and data["coordinators"][0]["lastBatchedLedgerId"] == 4


# -- upgrade -------------------------------------------------------------------------------------


def _up(**kw):
    defaults = dict(
        coordinators=[tc(0, effective=True)],
        subscriptions=[sub(effective=True)],
        brokers=[broker(batching=True), broker("b2:8080", batching=True)],
    )
    return upgrade.upgrade_verdict(obs(**{**defaults, **kw}))


def test_upgrade_complete():
    result = _up()
    assert result.verdict == upgrade.COMPLETE and result.problems == []


def test_upgrade_mixed_versions_without_batching_is_incomplete():
    result = _up(
        brokers=[broker(), broker("b2:8080", version="3.0.0")], coordinators=[tc(0, effective=False)], subscriptions=[]
    )
    assert result.verdict == upgrade.INCOMPLETE
    assert any("2 versions" in p for p in result.problems)


def test_upgrade_mixed_versions_with_batching_on_is_blocked():
    result = _up(brokers=[broker(batching=True), broker("b2:8080", version="3.0.0", batching=True)])
    assert result.verdict == v.BLOCKED
    assert advice.disable_command(TC_BATCH_KEY) in result.fixes


def test_upgrade_batching_off_on_a_broker_is_incomplete_with_the_enable_command():
    result = _up(brokers=[broker(batching=True), broker("b2:8080", batching=False)])
    assert result.verdict == upgrade.INCOMPLETE
    assert advice.enable_command(TC_BATCH_KEY) in result.fixes


def test_upgrade_not_yet_effective_is_incomplete_with_the_reload_command():
    result = _up(coordinators=[tc(0, effective=False)])
    assert result.verdict == upgrade.INCOMPLETE
    assert any("unload" in f for f in result.fixes)


@pytest.mark.parametrize(
    "change",
    [
        dict(brokers=[broker(batching=True, error="HTTP 500")]),
        dict(brokers=[broker(batching=True, version=None)]),
        dict(brokers=[]),
        dict(coordinators=[]),
        dict(coordinators=[tc(0, effective=None)]),
        dict(coordinators=[tc(0, effective=True, error="HTTP 404")]),
        dict(problems=("namespace x could not be listed",)),
    ],
)
def test_upgrade_fails_closed(change):
    assert _up(**change).verdict in (upgrade.INCOMPLETE, v.BLOCKED)


def test_upgrade_json_shape():
    data = _up().to_json()
    assert data["verdict"] == "COMPLETE" and data["target"] == TARGET
    assert data["brokers"][0]["version"] == "4.0.4"
    assert data["coordinators"][0]["effectiveBatching"] is True


def test_batch_index_flag_read_from_runtime():
    b = broker(batch_index=True)
    assert b.runtime[BATCH_INDEX_KEY] == "true"


# -- --verify-entries ----------------------------------------------------------------------------


def _safe():
    result = v.downgrade_verdict(
        obs([tc(0, (5, 6))], [sub(ledgers=(13,))]), checkpoint({0: 4}, {("persistent://public/default/t", "s"): 12})
    )
    assert result.verdict == v.SAFE
    return result


def test_entry_scan_without_batched_entries_keeps_safe():
    assert entry_scan.apply_entry_scan(_safe(), entry_scan.EntryScan({}, 10, 0)).verdict == v.SAFE


def test_a_batched_entry_in_a_ledger_said_clear_blocks():
    result = entry_scan.apply_entry_scan(
        _safe(), entry_scan.EntryScan({6: ("pulsar/system/persistent/__transaction_log_0", 2)}, 10, 0)
    )
    assert result.verdict == v.BLOCKED
    assert not result.coordinators[0].clear
    assert any("ledger 6 of coordinator 0" in p for p in result.problems)


def test_a_batched_entry_in_a_deleted_ledger_is_fine():
    assert entry_scan.apply_entry_scan(_safe(), entry_scan.EntryScan({3: (None, 1)}, 10, 0)).verdict == v.SAFE


def test_undecodable_entries_or_unreadable_dumps_wait():
    assert entry_scan.apply_entry_scan(_safe(), entry_scan.EntryScan({}, 10, 1)).verdict == v.WAIT
    assert entry_scan.apply_entry_scan(_safe(), entry_scan.EntryScan({}, 0, 0, error="no such file")).verdict == v.WAIT


def test_many_logs_still_batching_are_summarized_with_one_fix():
    subs = [sub(name=f"s{i}", effective=True) for i in range(40)]
    result = v.downgrade_verdict(obs([tc(0, (3,))], subs), None)
    assert result.verdict == v.BLOCKED
    assert len(result.problems) == step1.SHOWN + 1 and "35 more" in result.problems[-1]
    assert result.fixes == [advice.set_command(BATCH_KEYS[1], False)]


def test_no_per_store_reload_when_the_configuration_is_wrong_too():
    result = v.downgrade_verdict(obs([tc(0, (3,), effective=True)], dynamic={TC_BATCH_KEY: "true"}), None)
    assert not any(f.startswith("pulsar-txn unload") for f in result.fixes)


def test_a_coordinator_that_is_not_loaded_gets_the_advice_to_connect_a_client():
    error = "GET /admin/v3/transactions/coordinatorStats found nothing (404): Transaction coordinator not found!"
    result = v.downgrade_verdict(obs([tc(0, None, error=error)]), checkpoint({0: 4}))
    assert result.verdict == v.WAIT
    assert "transactional client connects" in result.coordinators[0].advice


# -- a log that never batched ------------------------------------------------------------------------


def test_a_log_whose_only_ledger_postdates_metrics_that_counted_no_batch_is_clear():
    fresh = tc(0, (4,), mark="4:-1", lac="4:-1", ongoing_txns=0, current_created_ms=2_000)
    result = v.downgrade_verdict(obs([fresh], unbatched_since_ms=1_000), None)
    assert result.verdict == v.SAFE and "counted no batch" in result.coordinators[0].reason
    # Without the metrics' word (a batch was counted, or no `_created` sample), the old rule: WAIT.
    assert v.downgrade_verdict(obs([fresh]), None).verdict == v.WAIT
    # A ledger older than the metrics, or a second ledger, may hold batches written before them.
    older = replace(fresh, current_created_ms=500)
    assert v.downgrade_verdict(obs([older], unbatched_since_ms=1_000), None).verdict == v.WAIT
    two = replace(fresh, ledgers=(3, 4))
    assert v.downgrade_verdict(obs([two], unbatched_since_ms=1_000), None).verdict == v.WAIT
    # Batching still on somewhere: never clear on this ground.
    on = v.downgrade_verdict(obs([fresh], brokers=[broker(batching=True)], unbatched_since_ms=1_000), None)
    assert on.verdict == v.BLOCKED and not on.coordinators[0].clear
