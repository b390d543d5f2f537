"""`engine advance`: let time pass on the engine with no client traffic, as a broker left alone.

The clock moves in steps that stop at every instant something is due, so what a broker does on
its own happens in order: the coordinators' timeout tracker aborts transactions whose timeout
passed (and their end records are flushed), the transaction logs' current ledgers roll over once
they reach managedLedgerMaxLedgerRolloverTimeMinutes (not before the minimum), ledgers wholly
behind the slowest cursor are trimmed (the broker's consumed-ledger check runs every
retentionCheckIntervalInSeconds, 120 s by default; retention is 0 on the engine), and each loaded
transaction buffer takes its timed snapshot (transactionBufferSnapshotMinTimeInMillis).
"""

from __future__ import annotations

from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.names import PENDING_ACK_SUFFIX

# The broker's consumed-ledger check (retentionCheckIntervalInSeconds, default 120 s).
TRIM_CHECK_MS = 120_000
# The longest stretch `engine advance` takes at once (a year): beyond it nothing new happens.
MAX_ADVANCE_MS = 366 * 86_400_000


def advance(engine, duration_ms: int) -> dict:
    """Move the engine's clock forward by duration_ms, running the broker's background work."""
    if isinstance(duration_ms, bool) or not isinstance(duration_ms, int) or duration_ms < 0:
        raise UsageError(f"the duration must be a whole number of milliseconds, at least 0, not {duration_ms!r}")
    if duration_ms > MAX_ADVANCE_MS:
        raise UsageError(f"the duration must be at most 366 days (it was {duration_ms} ms); advance in parts")
    engine.checkpoint()  # whatever was in flight is acknowledged before time passes
    clock = engine.clock
    start_ms = clock.now_ms
    end_ms = start_ms + duration_ms
    tcs = engine.all_tcs() if engine.enabled else []
    stores = _pending_ack_stores(engine)
    buffers = _buffers(engine)
    logs = [tc.ml for tc in tcs] + [s.ml for s in stores]
    before = {ml.name: {l.ledger_id for l in ml.ledgers} for ml in logs}
    timed_out = rolled = snapshots = steps = 0
    rolled_ids: dict[str, set[int]] = {}
    while True:
        steps += 1
        timed_out += engine.expire_transactions()
        clock.run_until_idle()  # the end records flush and the ends complete
        for ml in logs:
            if ml.roll_if_aged():
                rolled += 1
                rolled_ids.setdefault(ml.name, set()).add(ml.current)
            ml.trim()
        snapshots += engine.buffers.tick_all() if buffers else 0
        now = clock.now_ms
        if now >= end_ms:
            break
        clock.run_until(min(end_ms, _next_due(now, tcs, logs)) * 1000)
    engine.checkpoint()
    trimmed = []
    for ml in logs:
        gone = (before.get(ml.name, set()) | rolled_ids.get(ml.name, set())) - {l.ledger_id for l in ml.ledgers}
        if gone:
            trimmed.append({"managedLedger": ml.name, "ledgerIds": sorted(gone)})
    return {
        "fromMs": start_ms,
        "toMs": clock.now_ms,
        "advancedMs": clock.now_ms - start_ms,
        "transactionsTimedOut": timed_out,
        "ledgersRolled": rolled,
        "ledgersTrimmed": sum(len(t["ledgerIds"]) for t in trimmed),
        "trimmed": trimmed,
        "snapshotsTaken": snapshots,
        "steps": steps,
    }


def _pending_ack_stores(engine) -> list:
    names = set(engine.pending_ack_names())
    out = []
    for topic, sub in engine.subscriptions():
        store = engine.pending_ack_if_exists(topic, sub)
        if store is not None and store.name in names:
            out.append(store)
    return out


def _buffers(engine) -> list:
    """The transaction buffers of the topics that have a managed ledger (a broker has them loaded)."""
    service = engine.buffers
    out = []
    for topic in engine.topics():
        if "/pulsar/system/" in topic or topic.endswith(PENDING_ACK_SUFFIX) or "__transaction_buffer" in topic:
            continue
        if "__change_events" in topic or not service.exists(topic):
            continue
        out.append(service.buffer(topic))
    return out


def _next_due(now_ms: int, tcs, logs: list[ManagedLedger]) -> int:
    """The next instant something is due: a timeout, a rollover, or the periodic trim check."""
    due = now_ms + TRIM_CHECK_MS
    for tc in tcs:
        if tc._timeouts:
            due = min(due, max(now_ms + 1, tc._timeouts[0][0]))
    for ml in logs:
        at = ml.rollover_due_ms()
        if at is not None:
            due = min(due, max(now_ms + 1, at))
    return due
