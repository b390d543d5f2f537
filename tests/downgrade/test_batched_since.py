"""Batching that came back between two checks: the counters the checkpoint keeps tell, and the records rise."""

from __future__ import annotations

from pulsar_txn_cli.downgrade import checkpoint as cp_store, verdict as v
from pulsar_txn_cli.downgrade.batched_since import UNTIL_NOW, baseline, newest_possibly_batched, since_last_check
from pulsar_txn_cli.downgrade.observations import WriterCounters
from tests.downgrade.builders import QUIET, checkpoint, obs, sub, tc

B = "http://b1:8080"


def counters(created=1_000, tc_batches=7, pa_batches=9, broker=B, **kw) -> WriterCounters:
    return WriterCounters(
        broker, {"tc": created, "pendingAck": created}, {"tc": tc_batches, "pendingAck": pa_batches}, **kw
    )


def test_the_same_counters_prove_no_batch_in_between():
    assert since_last_check(baseline(QUIET, None), QUIET, "tc").end is None
    assert since_last_check(baseline(QUIET, None), QUIET, "pendingAck").end is None


def test_a_counter_that_moved_may_have_batched_until_now_and_only_its_writer():
    moved = (counters(tc_batches=8),)
    evidence = since_last_check(baseline(QUIET, None), moved, "tc")
    assert evidence.end == UNTIL_NOW and evidence.why == [f"broker {B}'s TC writer wrote 1 batch(es)"]
    assert since_last_check(baseline(QUIET, None), moved, "pendingAck").end is None


def test_a_restart_without_batches_since_bounds_the_window_at_its_start():
    assert since_last_check(baseline(QUIET, None), (counters(created=50_000, tc_batches=0),), "tc").end == 50_000
    restarted_and_batched = (counters(created=50_000, tc_batches=2),)
    assert since_last_check(baseline(QUIET, None), restarted_and_batched, "tc").end == UNTIL_NOW


def test_a_broker_gone_or_no_counters_kept_means_until_now():
    two = (counters(), counters(broker="http://b2:8080"))
    assert since_last_check(baseline(two, None), QUIET, "tc").end == UNTIL_NOW
    assert since_last_check(None, QUIET, "tc").end == UNTIL_NOW
    assert since_last_check(baseline(QUIET, None), None, "tc").end == UNTIL_NOW


def test_unreadable_counters_are_not_known_and_their_old_ones_are_kept():
    unreadable = (WriterCounters(B, error="HTTP 500"),)
    evidence = since_last_check(baseline(QUIET, None), unreadable, "tc")
    assert evidence.end is None and evidence.unknown == [f"broker {B}: HTTP 500"]
    assert baseline(unreadable, baseline(QUIET, None)) == baseline(QUIET, None)


def test_a_release_before_pip_160_cannot_batch():
    old = (WriterCounters(B, cannot_batch=True),)
    assert since_last_check((), old, "tc").end is None and baseline(old, None) == ()


def test_a_batch_before_a_restart_cannot_be_in_a_current_ledger():
    log = tc(0, (4, 9))
    assert newest_possibly_batched(log, UNTIL_NOW) == 9
    assert newest_possibly_batched(log, 50_000) == 4  # ledger 9 was opened by a live broker that wrote no batch
    assert newest_possibly_batched(tc(0, (9,)), 50_000) == 8


def test_another_brokers_restart_does_not_hold_back_a_log_whose_old_ledgers_are_gone():
    """Two brokers; one restarts between two checks with no batch since. Every log's older ledgers are gone: the
    restart cannot have left a batch in a current ledger, so the check is SAFE without waiting for a rollover."""
    two = (counters(), counters(broker="http://b2:8080"))
    cp = checkpoint({0: 4}, {("persistent://public/default/t", "s"): 10}, writers=two)
    restarted = (counters(), counters(broker="http://b2:8080", created=90_000, tc_batches=0, pa_batches=0))
    result = v.downgrade_verdict(obs([tc(0, (7,))], [sub(ledgers=(12,))], writers=restarted), cp)
    assert result.verdict == v.SAFE, result.problems


def test_batching_on_and_off_between_two_checks_records_again_and_waits():
    """The operator's trial: recorded at ledger 4, batching on and off again before the next check, and every
    ledger up to 4 trimmed since. The configuration looks as before; only the counters moved."""
    cp = checkpoint({0: 4}, {("persistent://public/default/t", "s"): 10})
    moved = (counters(tc_batches=40, pa_batches=90),)
    result = v.downgrade_verdict(obs([tc(0, (7, 8))], [sub(ledgers=(12, 13))], writers=moved), cp)
    assert result.verdict == v.WAIT
    assert result.checkpoint.coordinators[0].last_batched_ledger_id == 8
    assert result.checkpoint.subscriptions[("persistent://public/default/t", "s")].last_batched_ledger_id == 13
    assert not any(item.clear for item in result.items)
    assert any("batching may have run since the last check" in p and "TC writer wrote 33" in p for p in result.problems)
    assert result.checkpoint.writers == baseline(moved, None)
    # The next check, counters unchanged: no new raise, and ledger 8 must go like any batched ledger.
    again = v.downgrade_verdict(obs([tc(0, (9,))], [sub(ledgers=(14,))], writers=moved), result.checkpoint)
    assert again.verdict == v.SAFE, again.problems


def test_without_the_counters_the_same_check_would_have_said_safe():
    """The false SAFE this guards against: same observations, counters as kept."""
    cp = checkpoint({0: 4}, {("persistent://public/default/t", "s"): 10})
    assert v.downgrade_verdict(obs([tc(0, (7, 8))], [sub(ledgers=(12, 13))]), cp).verdict == v.SAFE


def test_unreadable_counters_wait_without_raising_and_a_later_check_tells():
    cp = checkpoint({0: 4})
    unreadable = (WriterCounters(B, error="HTTP 503"),)
    result = v.downgrade_verdict(obs([tc(0, (7, 8))], writers=unreadable), cp)
    assert result.verdict == v.WAIT
    assert result.checkpoint.coordinators[0].last_batched_ledger_id == 4
    assert any("cannot be told yet" in p and "HTTP 503" in p for p in result.problems)
    assert v.downgrade_verdict(obs([tc(0, (7, 8))]), result.checkpoint).verdict == v.SAFE
    moved = v.downgrade_verdict(obs([tc(0, (7, 8))], writers=(counters(tc_batches=8),)), result.checkpoint)
    assert moved.verdict == v.WAIT and moved.checkpoint.coordinators[0].last_batched_ledger_id == 8


def test_a_recorded_log_not_seen_keeps_the_evidence_for_when_it_is():
    cp = checkpoint({0: 4, 1: 5})
    moved = (counters(tc_batches=8),)
    first = v.downgrade_verdict(obs([tc(0, (7, 8))], writers=moved), cp)
    assert first.checkpoint.coordinators[1].last_batched_ledger_id == 5
    assert [r for r in first.checkpoint.writers if r["log"] == "tc"] == [r for r in cp.writers if r["log"] == "tc"]
    second = v.downgrade_verdict(obs([tc(0, (9,)), tc(1, (6, 11))], writers=moved), first.checkpoint)
    assert second.checkpoint.coordinators[1].last_batched_ledger_id == 11


def test_a_checkpoint_from_before_the_counters_is_raised_once(tmp_path):
    path = tmp_path / "cp.json"
    cp_store.save(path, checkpoint({0: 4}, writers=None))
    assert "writerCounters" not in path.read_text()
    result = v.downgrade_verdict(obs([tc(0, (7, 8))]), cp_store.load(path))
    assert result.verdict == v.WAIT and result.checkpoint.coordinators[0].last_batched_ledger_id == 8
    cp_store.save(path, result.checkpoint)
    assert cp_store.load(path).writers == baseline(QUIET, None)


def test_a_restart_holds_back_only_logs_opened_since_the_last_check():
    """A broker killed and back between two checks (on a real cluster: its counters start again). A log whose
    current ledger is older than the last check was held by a live broker all along and is not held back; one
    opened since (it moved from the dead broker) is, down to the ledger before its current one."""
    two = (counters(), counters(broker="http://b2:8080"))
    cp = checkpoint({0: 4, 1: 4}, writers=two).with_writers(baseline(two, None), "2026-01-01T00:30:00Z")
    restarted = (counters(), counters(broker="http://b2:8080", created=1_800_000_000_000, tc_batches=0, pa_batches=0))
    before, since = 1767225600_000 + 10 * 60_000, 1767225600_000 + 40 * 60_000  # 00:10 and 00:40 on 2026-01-01
    held = tc(0, (6, 9), current_created_ms=before)
    moved = tc(1, (6, 9), current_created_ms=since)
    result = v.downgrade_verdict(obs([held, moved], writers=restarted), cp)
    assert result.checkpoint.coordinators[0].last_batched_ledger_id == 4
    assert result.checkpoint.coordinators[1].last_batched_ledger_id == 6
    assert result.verdict == v.WAIT and [i.clear for i in result.coordinators] == [True, False]
