"""What an operator reads and runs, rendered from the logs' states (causes.py): each log's reason and advice,
the problems that make a verdict BLOCKED, and the commands that remove them."""

from __future__ import annotations

from pulsar_txn_cli.downgrade.causes import (
    CAUSE_BATCH_INDEX,
    CAUSE_CURSOR_STUCK,
    CAUSE_ERROR,
    CAUSE_INCONSISTENT,
    CAUSE_MISSING,
    CAUSE_NOT_RECORDED,
    CAUSE_NOT_ROLLED,
    CAUSE_OPEN_ACROSS,
    CAUSE_OPEN_TXN,
    CAUSE_OVERDUE,
    CAUSE_TRIM_PENDING,
    CREATED_UNBATCHED,
    STALL_ACROSS,
    STALL_PINNED,
    LogState,
    empty_current,
)
from pulsar_txn_cli.downgrade.observations import COORDINATOR, LogObservation
from pulsar_txn_cli.names import Position
from pulsar_txn_cli.protocol import BATCH_KEYS
from pulsar_txn_cli.transaction_ends import abort_fix, abort_supported


def disable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value false"


def enable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value true"


def set_command(key: str, want: bool) -> str:
    """pulsar-txn's own switch: it records the moment of the change, which is what lets the
    admin layer tell where the change is effective (batchlog.py), and reloads the stores."""
    name = "set-txn-tc-batch-log" if key == BATCH_KEYS[0] else "set-txn-pending-ack-batch-log"
    return f"pulsar-txn {name} --{'enable' if want else 'disable'} --reload --yes"


def reload_command(obs: LogObservation) -> str:
    """Reopening the store is what makes a configuration change effective: a coordinator or pending-ack
    store reads the batch settings only when it opens (PIP-160; docs/real-broker-findings.md). The tool's
    own unload, so that the command works as printed on every kind of target."""
    if obs.kind == COORDINATOR:
        return f"pulsar-txn unload --coordinator {obs.coordinator_id} --yes"
    return f"pulsar-txn unload -t {obs.topic} --yes"


def advice_for(state: LogState, batch_index: bool | None) -> str | None:
    """What the operator can do about a held log (None for a clear one)."""
    log, cause = state.log, state.cause
    if cause == CAUSE_ERROR:
        if log.error and log.kind == COORDINATOR and "not found" in log.error.lower():
            # A real broker loads a coordinator only when a transactional client connects to it
            # (docs/real-broker-findings.md); until then its stats answer 404 or 500.
            return (
                "the coordinator is not loaded: it loads when a transactional client connects; "
                "check again once clients are running (or start one)"
            )
        if log.error:
            return "retry; if it persists, check that the broker that owns it is healthy"
        return "retry once the log is loaded (a managed ledger always has a current ledger)"
    if cause == CAUSE_NOT_RECORDED:
        return "fix what blocks step 1, then check again"
    if cause == CAUSE_INCONSISTENT:
        return "`pulsar-txn downgrade reset`, then check again"
    if cause == CAUSE_MISSING:
        return (
            "if it was deleted on purpose, `pulsar-txn downgrade reset` and check again "
            "(a new record is taken; that only delays SAFE, it never hastens it)"
        )
    if cause == CAUSE_OPEN_ACROSS:
        return OPEN_ACROSS_ADVICE
    if cause == CAUSE_NOT_ROLLED:
        if empty_current(log):
            return (
                f"its current ledger {max(log.ledgers)} is empty, and an empty ledger never rolls over by time alone "
                f"(the rollover is checked on a write): it needs traffic, {_traffic(log)}, then a rollover after "
                "managedLedgerMaxLedgerRolloverTimeMinutes or managedLedgerMaxEntriesPerLedger; or roll it now: "
                f"`{reload_command(log)}`"
            )
        return (
            "wait for the ledger to roll over (managedLedgerMaxLedgerRolloverTimeMinutes, "
            f"managedLedgerMaxEntriesPerLedger), or roll it now: `{reload_command(log)}`"
        )
    if cause == CAUSE_TRIM_PENDING:
        mark, lac = Position.find(log.mark_delete), Position.find(log.last_confirmed)
        if mark is not None and lac is not None and mark >= lac:
            return (
                "nothing to do: the cursor has consumed everything and the old ledgers are deleted at the next "
                "trim (after a rollover); check again in a few minutes"
            )
        return "nothing to do: the cursor has passed the batched ledgers; check again shortly"
    if cause == CAUSE_BATCH_INDEX:
        return BATCH_INDEX_ADVICE
    if cause == CAUSE_OVERDUE:
        return OVERDUE_ADVICE
    if cause == CAUSE_OPEN_TXN:
        advice = (
            "let the open transactions commit, abort or time out; list them with "
            "`pulsar-txn slow-transactions --time 0` and abort a stuck one with "
            "`pulsar-txn abort-transaction -m MOST -l LEAST --yes` (MOST and LEAST from that listing)"
        )
        if log.kind == COORDINATOR and batch_index is not True:
            advice += "; but beware: " + OPEN_ACROSS_SWITCH
        return advice
    if cause == CAUSE_CURSOR_STUCK and log.kind == COORDINATOR:
        return (
            "look for slow transactions (`pulsar-txn slow-transactions --time 0`) and abort the "
            "stuck ones; the cursor moves once their records are deleted"
        )
    if cause == CAUSE_CURSOR_STUCK:
        return (
            f"time alone never clears it: it needs traffic, {_traffic(log)}. A pending-ack log is trimmed only "
            "when its store appends, up to its sparse index (a point every transactionPendingAckLogIndexMinLag "
            "records, default 500) once the subscription's mark-delete position has passed it: an idle "
            "subscription, or one whose consumers do not acknowledge its backlog, keeps its old ledgers for good. "
            f"See its consumers and backlog with `pulsar-admin topics stats {log.topic}` and its pending-ack store "
            f"with `pulsar-txn pending-ack-stats -t {log.topic} -s {log.subscription}`; slow transactions that "
            "hold acknowledgements: `pulsar-txn slow-transactions --time 0`"
        )
    return None


def reason(state: LogState) -> str:
    """Why the log is clear or held, in one sentence."""
    log, oldest, recorded = state.log, state.oldest, state.recorded
    if state.clear and state.clear_as == CREATED_UNBATCHED:
        return (
            f"its only ledger {oldest} was created after the brokers' buffered-writer metrics started, "
            "and they have counted no batch: it holds no batched entry"
        )
    if state.clear:
        return f"oldest ledger {oldest} > last batched ledger {recorded}"
    fixed = {
        CAUSE_ERROR: f"could not read its ledgers: {log.error}"
        if log.error
        else "the target reported no ledgers for it",
        CAUSE_NOT_RECORDED: "its last batched ledger is not recorded yet: batching is not confirmed off everywhere",
        CAUSE_INCONSISTENT: "the checkpoint is inconsistent with its ledgers",
        CAUSE_MISSING: f"the {'coordinator' if log.kind == COORDINATOR else 'subscription'} was recorded but not found now",
    }
    if state.cause in fixed:
        return fixed[state.cause]
    return f"oldest ledger {oldest} <= last batched ledger {recorded}: {cause_text(state.cause, log, recorded)}"


SHOWN_OVERDUE = 5  # abort fixes listed per coordinator; the reason counts them all
LIST_HANGING = "pulsar-txn abort-hanging --state OPEN"  # a dry run: what the next one aborts
ABORT_ALL_HANGING = f"{LIST_HANGING} --execute --yes"


def stall_problem(state: LogState, stall: str) -> str:
    """The problem a stall of this log adds to a BLOCKED verdict."""
    log = state.log
    if stall == CAUSE_INCONSISTENT:
        return (
            f"{log.label}: the checkpoint records ledger {state.recorded}, newer than any of its "
            f"ledgers (newest {max(log.ledgers)}); the checkpoint does not match this target"
        )
    if stall == STALL_PINNED:
        return (
            f"{log.label}: the cursor is pinned at {log.mark_delete} (last confirmed {log.last_confirmed}) with "
            "no transaction open and acknowledgmentAtBatchIndexLevelEnabled=false: the batch-index deletion stall"
        )
    if stall == STALL_ACROSS:
        return (
            f"{log.label}: {log.ongoing_txns} transaction(s) open since before the "
            "coordinator reopened without batching, with acknowledgmentAtBatchIndexLevelEnabled=false: when "
            "they end, the cursor stays pinned for good (the batch-index deletion stall)"
        )
    return f"{log.label}: {reason(state)}"


def overdue_fixes(state: LogState, versions: list[str]) -> list[str]:
    """The aborts of the first few overdue transactions of a coordinator (each, or its coordinator's reload)."""
    return [command for txn_id in state.log.overdue_txns[:SHOWN_OVERDUE] for command in abort_fix(txn_id, versions)]


def unlisted_overdue(states: list[LogState], versions: list[str]) -> tuple[str, str] | None:
    """Beyond the aborts listed one by one: the count of the others and the one command that aborts them all
    (problem, fix). Every overdue transaction is past its own timeout, so abort-hanging's default bound (half
    of it) selects each of them (and any other transaction open that long)."""
    unlisted = sum(max(len(s.log.overdue_txns) - SHOWN_OVERDUE, 0) for s in states if CAUSE_OVERDUE in s.stalls)
    if not unlisted or not abort_supported(versions):
        return None
    return (
        f"{unlisted} more overdue transaction(s) than the aborts listed one by one: "
        f"`{ABORT_ALL_HANGING}` aborts every one of them (`{LIST_HANGING}` lists them first)",
        ABORT_ALL_HANGING,
    )


def _traffic(log: LogObservation) -> str:
    """The writes that move this log on."""
    if log.kind == COORDINATOR:
        return f"a transaction on coordinator {log.coordinator_id}"
    return f"transactional acknowledgements on subscription {log.subscription!r} of {log.topic}"


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
    "as OPEN (those past their own timeout the reloaded coordinator aborts at once); abort the others "
    "(`pulsar-txn slow-transactions --time 0`, then `pulsar-txn abort-transaction -m MOST "
    "-l LEAST --yes` for each, MOST and LEAST from that listing) and the cursor moves on (verified on a real broker, docs/real-broker-findings.md). Next time, "
    "set it before disabling batching, or end every open transaction before the switch"
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
            if empty_current(log)
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
