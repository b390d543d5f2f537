"""Pulsar 5.0's scalable-topics coordinator in `upgrade check` and `downgrade check` (pure judgements over the
brokers' runtime configuration; the real broker's side is tests/integration/test_second_coordinator.py)."""

from __future__ import annotations

from pulsar_txn_cli.scalable_coordinator import SecondCoordinator
from pulsar_txn_cli.downgrade import second_coordinator as second
from pulsar_txn_cli.downgrade.observations import BrokerObservation

FIVE = {
    second.SETTING: "true",
    "transactionCoordinatorEnabled": "true",
    **second.PROVIDERS,
}


def broker(name: str, version: str, **runtime) -> BrokerObservation:
    return BrokerObservation(name, runtime, version)


def test_nothing_is_asked_while_no_broker_has_it_on():
    off = broker("b1", "5.0.0-M1", **{**FIVE, second.SETTING: "false"})
    assert second.upgrade_problems([off, broker("b2", "4.2.4")]) == ([], [], [])


def test_a_5_0_broker_with_its_defaults_needs_nothing_more():
    assert second.upgrade_problems([broker("b1", "5.0.0-M1", **FIVE), broker("b2", "5.0.0-M1", **FIVE)]) == (
        [],
        [],
        [],
    )


def test_a_4_x_broker_beside_it_is_incomplete_and_named():
    blocked, incomplete, _ = second.upgrade_problems([broker("b1", "5.0.0-M1", **FIVE), broker("b2", "4.2.4")])
    assert blocked == [] and len(incomplete) == 1
    assert "b2" in incomplete[0] and "4.2.4" in incomplete[0] and "every broker runs 5.0" in incomplete[0]


def test_brokers_that_disagree_are_incomplete():
    off = broker("b2", "5.0.0-M1", **{**FIVE, second.SETTING: "false"})
    _, incomplete, _ = second.upgrade_problems([broker("b1", "5.0.0-M1", **FIVE), off])
    assert len(incomplete) == 1 and "off on b2" in incomplete[0]


def test_the_classic_providers_block_with_the_line_to_set():
    classic = {**FIVE, "transactionBufferProviderClassName": "org.apache.pulsar.broker.TopicTransactionBufferProvider"}
    blocked, _, fixes = second.upgrade_problems([broker("b1", "5.0.0-M1", **classic)])
    assert len(blocked) == 1 and "transactionBufferProviderClassName" in blocked[0]
    assert fixes == [
        f"set transactionBufferProviderClassName={second.PROVIDERS['transactionBufferProviderClassName']} "
        f"(or {second.SETTING}=false) in broker.conf and restart the broker"
    ]


def test_the_classic_coordinator_off_blocks():
    blocked, _, _ = second.upgrade_problems(
        [broker("b1", "5.0.0-M1", **{**FIVE, "transactionCoordinatorEnabled": "false"})]
    )
    assert blocked == [f"broker b1 has {second.SETTING} on but transactionCoordinatorEnabled off: it needs both"]


def test_the_rollback_lines_say_what_4_x_meets_and_how_many_are_counted_now():
    assert second.rollback_problems(None) == []
    none = second.rollback_problems(SecondCoordinator(["b1"]))
    assert len(none) == 1 and "stays open there for good" in none[0] and "/txn" in none[0]
    counted = second.rollback_problems(SecondCoordinator(["b1"], {"persistent://t/n/a": 2, "persistent://t/n/b": 1}))
    assert counted[1].startswith("the buffers count 3 open transaction(s)") and "on 2 topic(s)" in counted[1]
    unknown = second.rollback_problems(SecondCoordinator(["b1"], error="HTTP 500"))
    assert unknown[1].endswith("could not be read: HTTP 500")


def test_the_downgrade_is_blocked_while_the_buffers_count_its_transactions():
    """A broker rolled back to 4.x keeps the scalable-topics coordinator's open transactions open for good (the
    real rollback from 5.0.0-M1 to 4.2.4): while the buffers count any, no SAFE; while the count is unknown, WAIT."""
    from pulsar_txn_cli.downgrade.verdict import downgrade_verdict
    from tests.downgrade.builders import checkpoint, obs, tc

    clear = {"coordinators": [tc(0, ledgers=(5,))], "brokers": None}
    record = checkpoint(coordinators={0: 3})
    assert downgrade_verdict(obs(**clear), record).verdict == "SAFE"
    held = SecondCoordinator(["http://b1:8080"], counted={"persistent://public/default/t": 3})
    blocked = downgrade_verdict(obs(**clear, second_coordinator=held), record)
    assert blocked.verdict == "BLOCKED" and blocked.problems[0].startswith(
        "the buffers count 3 open transaction(s) of Pulsar 5.0's scalable-topics coordinator on 1 topic(s) "
        "(persistent://public/default/t): a broker rolled back to 4.x keeps each of them open for good"
    ), blocked.problems
    unknown = SecondCoordinator(["http://b1:8080"], error="metrics: 503")
    waiting = downgrade_verdict(obs(**clear, second_coordinator=unknown), record)
    assert waiting.verdict == "WAIT" and "could not be read (metrics: 503)" in waiting.problems[0], waiting.problems
    none = SecondCoordinator(["http://b1:8080"])
    assert downgrade_verdict(obs(**clear, second_coordinator=none), record).verdict == "SAFE"


def test_its_transactions_do_not_keep_the_records_from_being_taken():
    """The scalable-topics coordinator has nothing to do with batching: the first check records the last
    batched ledgers all the same, so the logs are judged and the rest of the downgrade goes on."""
    from pulsar_txn_cli.downgrade.verdict import downgrade_verdict
    from tests.downgrade.builders import obs, tc

    held = SecondCoordinator(["http://b1:8080"], counted={"persistent://public/default/t": 1})
    first = downgrade_verdict(obs(coordinators=[tc(0, ledgers=(5, 6))], second_coordinator=held), None)
    assert first.verdict == "BLOCKED" and first.newly_recorded == 1, first.problems
    assert first.coordinators[0].last_batched_ledger_id == 6
