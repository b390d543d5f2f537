"""What an operator reads and runs: the causes of a held item, their advice, and the commands."""

from __future__ import annotations

from pulsar_txn_cli.downgrade.observations import COORDINATOR, LogObservation
from pulsar_txn_cli.protocol import BATCH_KEYS
from pulsar_txn_cli.names import Position

# Likely causes of an item that holds the downgrade back (the "cause" field of the JSON).
CAUSE_ERROR = "observation-failed"
CAUSE_NOT_RECORDED = "not-recorded"
CAUSE_NOT_ROLLED = "ledger-not-rolled"
CAUSE_TRIM_PENDING = "trim-pending"
CAUSE_OPEN_TXN = "open-transaction"
CAUSE_OVERDUE = "overdue-transaction"
CAUSE_BATCH_INDEX = "batch-index-deletion"
CAUSE_OPEN_ACROSS = "open-across-switch"
CAUSE_CURSOR_STUCK = "cursor-not-moving"
CAUSE_MISSING = "not-found"
CAUSE_INCONSISTENT = "inconsistent-checkpoint"


def disable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value false"


def enable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value true"


def set_command(key: str, want: bool) -> str:
    """pulsar-txn's own switch: it records the moment of the change, which is what lets the
    admin layer tell where the change is effective (admin/batchlog.py), and reloads the stores."""
    name = "set-txn-tc-batch-log" if key == BATCH_KEYS[0] else "set-txn-pending-ack-batch-log"
    return f"pulsar-txn {name} --{'enable' if want else 'disable'} --reload --yes"


def reload_command(obs: LogObservation) -> str:
    """Reopening the store is what makes a configuration change effective: a coordinator or pending-ack
    store reads the batch settings only when it opens (PIP-160; docs/real-broker-findings.md). The tool's
    own unload, so that the command works as printed on every kind of target."""
    if obs.kind == COORDINATOR:
        return f"pulsar-txn unload --coordinator {obs.coordinator_id} --yes"
    return f"pulsar-txn unload -t {obs.topic} --yes"


def diagnose(
    log: LogObservation,
    recorded: int,
    batch_index: bool | None,
    held_since: int | None = None,
    unbatched_since: int | None = None,
) -> tuple[str, str]:
    """The likely reason the ledgers up to `recorded` still exist, and what the operator can do.
    `held_since`: since when (epoch ms, the target's clock) the cursor has stood where it is, if known;
    `unbatched_since`: since when no broker has written a batch (Observations.unbatched_since_ms)."""
    newest = max(log.ledgers)
    mark = Position.find(log.mark_delete)
    lac = Position.find(log.last_confirmed)
    if open_across_switch(log, batch_index, unbatched_since) and (mark is None or mark[0] <= recorded):
        return CAUSE_OPEN_ACROSS, OPEN_ACROSS_ADVICE
    if newest <= recorded and not _pinned_without_open_transactions(log, mark, lac, batch_index, held_since):
        if _empty_current(log, lac):
            return CAUSE_NOT_ROLLED, (
                f"its current ledger {newest} is empty, and an empty ledger never rolls over by time alone (the "
                f"rollover is checked on a write): it needs traffic, {_traffic(log)}, then a rollover after "
                "managedLedgerMaxLedgerRolloverTimeMinutes or managedLedgerMaxEntriesPerLedger; or roll it now: "
                f"`{reload_command(log)}`"
            )
        return CAUSE_NOT_ROLLED, (
            "wait for the ledger to roll over (managedLedgerMaxLedgerRolloverTimeMinutes, "
            f"managedLedgerMaxEntriesPerLedger), or roll it now: `{reload_command(log)}`"
        )
    if mark is not None and lac is not None and mark >= lac:
        return CAUSE_TRIM_PENDING, (
            "nothing to do: the cursor has consumed everything and the old ledgers are deleted at the next "
            "trim (after a rollover); check again in a few minutes"
        )
    if mark is not None and mark[0] > recorded:
        return CAUSE_TRIM_PENDING, "nothing to do: the cursor has passed the batched ledgers; check again shortly"
    if log.ongoing_txns and _pinned_without_open_transactions(log, mark, lac, batch_index, held_since):
        return CAUSE_BATCH_INDEX, BATCH_INDEX_ADVICE
    if log.ongoing_txns and log.overdue_txns:
        return CAUSE_OVERDUE, OVERDUE_ADVICE
    if log.ongoing_txns:
        advice = (
            "let the open transactions commit, abort or time out; list them with "
            "`pulsar-txn slow-transactions --time 0` and abort a stuck one with "
            "`pulsar-txn abort-transaction -m MOST -l LEAST --yes` (MOST and LEAST from that listing)"
        )
        if log.kind == COORDINATOR and batch_index is not True:
            advice += "; but beware: " + OPEN_ACROSS_SWITCH
        return CAUSE_OPEN_TXN, advice
    if log.kind == COORDINATOR and batch_index is not False:
        return CAUSE_CURSOR_STUCK, (
            "look for slow transactions (`pulsar-txn slow-transactions --time 0`) and abort the "
            "stuck ones; the cursor moves once their records are deleted"
        )
    if log.kind == COORDINATOR:
        return CAUSE_BATCH_INDEX, BATCH_INDEX_ADVICE
    return CAUSE_CURSOR_STUCK, (
        f"time alone never clears it: it needs traffic, {_traffic(log)}. A pending-ack log is trimmed only "
        "when its store appends, up to its sparse index (a point every transactionPendingAckLogIndexMinLag "
        "records, default 500) once the subscription's mark-delete position has passed it: an idle subscription, "
        "or one whose consumers do not acknowledge its backlog, keeps its old ledgers for good. See its consumers "
        f"and backlog with `pulsar-admin topics stats {log.topic}` and its pending-ack store with "
        f"`pulsar-txn pending-ack-stats -t {log.topic} -s {log.subscription}`; slow transactions that hold "
        "acknowledgements: `pulsar-txn slow-transactions --time 0`"
    )


def _traffic(log: LogObservation) -> str:
    """The writes that move this log on."""
    if log.kind == COORDINATOR:
        return f"a transaction on coordinator {log.coordinator_id}"
    return f"transactional acknowledgements on subscription {log.subscription!r} of {log.topic}"


def _empty_current(log: LogObservation, lac) -> bool:
    """The current ledger holds no entry: the last confirmed entry is before it (or its entry -1)."""
    return lac is not None and bool(log.ledgers) and (lac[0] < max(log.ledgers) or lac[1] < 0)


# Inferred from Pulsar's MLTransactionLogImpl and ManagedCursorImpl and confirmed on a real Pulsar 4.0.7
# broker (docs/real-broker-findings.md): with
# acknowledgmentAtBatchIndexLevelEnabled=false, once TC batching is off and the coordinator reloaded,
# deletes of records inside batched entries are no-ops, so a transaction open across the switch pins
# the TC log's cursor for good; with it true, the same sequence trims every batched ledger.
OPEN_ACROSS_SWITCH = (
    "with acknowledgmentAtBatchIndexLevelEnabled=false (or unknown), records of these transactions that sit "
    "in batched entries cannot be deleted once batching is off, so when they end the cursor stays pinned for "
    "good (seen on a real Pulsar 4.0.7 broker); set acknowledgmentAtBatchIndexLevelEnabled=true in every "
    "broker.conf and restart the brokers while they are still open (with it true the real broker trimmed "
    "every batched ledger)"
)
BATCH_INDEX_ADVICE = (
    "this is the batch-index deletion stall (docs/real-broker-findings.md, seen on a real Pulsar 4.0.7 broker): with "
    "acknowledgmentAtBatchIndexLevelEnabled=false, deletes of records inside batched TC-log entries are "
    "no-ops once batching is off, so the cursor stays in the batched ledger while its individually deleted "
    "ranges grow, and it never ends by itself. Set acknowledgmentAtBatchIndexLevelEnabled=true in every "
    "broker.conf and restart the brokers (it is not dynamic): the coordinator reopens its log with "
    "batch-index deletion and replays the pinned records, and the transactions they belonged to come back "
    "as OPEN; abort those (`pulsar-txn slow-transactions --time 0`, then `pulsar-txn abort-transaction -m MOST "
    "-l LEAST --yes` for each, MOST and LEAST from that listing) and the cursor moves on (verified on a real broker, docs/real-broker-findings.md). Next time, "
    "set it before disabling batching, or end every open transaction before the switch"
)


def pinned_without_open_transactions(log: LogObservation, batch_index: bool | None) -> bool:
    """The same, from the observation alone (before the log is recorded)."""
    return log.effective_batching is False and _pinned_without_open_transactions(
        log, Position.find(log.mark_delete), Position.find(log.last_confirmed), batch_index
    )


def _pinned_without_open_transactions(
    log: LogObservation, mark, lac, batch_index: bool | None, held_since: int | None = None
) -> bool:
    """The TC log's cursor is behind its last entry, batch-index deletion is off, and no transaction
    holds it: records that cannot be deleted pin it. Either none is open and entries after the cursor
    were deleted, or the cursor has stood where it is since `held_since` while every transaction open
    then has ended (each open one opened later): a busy cluster always has some open, which do not
    hold it."""
    if log.kind != COORDINATOR or batch_index is not False or mark is None or lac is None or not mark < lac:
        return False
    ranges = (log.individually_deleted or "").strip()
    if log.ongoing_txns == 0:
        return ranges not in ("", "[]")
    return held_since is not None and log.oldest_open_ms is not None and log.oldest_open_ms > held_since


def open_across_switch(log: LogObservation, batch_index: bool | None, unbatched_since: int | None = None) -> bool:
    """Transactions open since before the coordinator reopened without batching, while batch-index
    deletion is off: their records sit in batched entries that cannot be deleted once they end. Not when
    no broker has written a batch since before the oldest of them opened (a reopen of a coordinator that
    never batched, say): their records are all unbatched."""
    return (
        log.kind == COORDINATOR
        and batch_index is False
        and log.effective_batching is False
        and bool(log.ongoing_txns)
        and log.oldest_open_ms is not None
        and log.opened_ms is not None
        and log.oldest_open_ms < log.opened_ms
        and (unbatched_since is None or log.oldest_open_ms < unbatched_since)
    )


OPEN_ACROSS_ADVICE = (
    "these transactions were opened while the coordinator still batched, and acknowledgmentAtBatchIndexLevelEnabled "
    "is false: once they end, deletes of their records inside batched entries are no-ops and the TC log's cursor "
    "stays pinned for good (the batch-index deletion stall, seen on a real Pulsar 4.0.7 broker, "
    "docs/real-broker-findings.md); waiting does not help. Set acknowledgmentAtBatchIndexLevelEnabled=true in "
    "every broker.conf and restart the brokers now, while they are still open (with it true the real broker "
    "trimmed every batched ledger)"
)


OVERDUE_ADVICE = (
    "abort them (the fixes below): their coordinator did not end them at their own timeout, so waiting does not "
    "help (apache/pulsar#19200 left such transactions open on brokers before 2.11.1; a client killed mid-commit "
    "left one on a real 2.11.0 cluster, docs/real-broker-findings.md). Brokers before 3.2 have no abort endpoint "
    "(PIP-325): there, the coordinator's reload (the unload in the fixes) or a restart of the client that owns "
    "them ends them"
)


def stall_fixes(engine: bool) -> list[str]:
    """What removes the stall: batch-index deletion on, then the coordinators reopened with it."""
    if engine:
        return [
            "pulsar-txn engine config set acknowledgmentAtBatchIndexLevelEnabled true",
            "pulsar-txn engine reload",
        ]
    return [
        "set acknowledgmentAtBatchIndexLevelEnabled=true in every broker's broker.conf and restart the brokers "
        "(it is not a dynamic setting: only the brokers' operator can change it); then abort the transactions "
        "that come back open: `pulsar-txn slow-transactions --time 0` lists them, "
        "`pulsar-txn abort-transaction -m MOST -l LEAST --yes` aborts each (MOST and LEAST from that listing)"
    ]


def cause_text(cause: str, log: LogObservation, recorded: int) -> str:
    return {
        CAUSE_NOT_ROLLED: f"ledger {recorded} is still the current ledger; it has not rolled over yet"
        + (
            f" (it is empty: it rolls over only after a write, {_traffic(log)}, or a reload)"
            if _empty_current(log, Position.find(log.last_confirmed))
            else ""
        ),
        CAUSE_TRIM_PENDING: "the cursor is past the batched entries; the old ledgers are not trimmed yet",
        CAUSE_OPEN_TXN: f"{log.ongoing_txns} open transaction(s) keep the cursor "
        f"at {log.mark_delete} (last confirmed {log.last_confirmed})",
        CAUSE_BATCH_INDEX: f"the cursor is pinned at {log.mark_delete} (last confirmed {log.last_confirmed}"
        f"{_ranges(log)}), likely the batch-index deletion stall, which only an operator can clear",
        CAUSE_OPEN_ACROSS: f"{log.ongoing_txns} transaction(s) open since before the coordinator reopened without "
        "batching, with acknowledgmentAtBatchIndexLevelEnabled=false: when they end, the cursor stays pinned "
        "for good (the batch-index deletion stall), which only an operator can prevent or clear",
        CAUSE_CURSOR_STUCK: f"the cursor does not move ({log.mark_delete}, last confirmed {log.last_confirmed})"
        + ("" if log.kind == COORDINATOR else f"; it needs {_traffic(log)}"),
        CAUSE_OVERDUE: f"{len(log.overdue_txns)} transaction(s) open long past their own timeout "
        f"({', '.join(log.overdue_txns[:3])}{' …' if len(log.overdue_txns) > 3 else ''}) keep the cursor at "
        f"{log.mark_delete} (last confirmed {log.last_confirmed}); they may never end by themselves",
    }.get(cause, cause)


def _ranges(log: LogObservation) -> str:
    ranges = (log.individually_deleted or "").strip()
    if not ranges or ranges == "[]":
        return ""
    count = ranges.count("..")
    return f"; {count} individually deleted range(s) after it" if count else ""
