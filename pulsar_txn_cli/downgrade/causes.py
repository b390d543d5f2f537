"""Each transaction log's state in a downgrade: clear, or held with a cause, decided from its observation,
its record and two facts about the fleet, and nothing else. The verdict follows from these states alone
(verdict.py); what an operator reads and runs is rendered from them last (advice.py).

Why SAFE is SAFE. A log is clear in exactly two cases, each of which rules out a batched entry in what
remains of it:
- TRIMMED: its oldest remaining ledger is newer than its record, the newest ledger that may hold a
  batched entry (a record only ever rises: checkpoint.py, batched_since.py); or
- CREATED_UNBATCHED: its only ledger was created after every broker's buffered-writer metrics started,
  and they have counted no batch since (a ledger is written by the broker that created it only).
Every other case is a cause, and a log with a cause is never clear. Some causes need an operator: the
log's `stalls` say which, and any of them makes the verdict BLOCKED. (What is stored can settle a cause
that only stored entries keep: `--confirm-from-bookies` reads them, downgrade/confirm.py.)
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.downgrade.checkpoint import Record
from pulsar_txn_cli.downgrade.observations import COORDINATOR, LogObservation
from pulsar_txn_cli.names import Position
from pulsar_txn_cli.output.units import iso_ms

# Why a log is held (the "cause" field of the JSON).
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

# Why a log is clear.
TRIMMED = "trimmed"
CREATED_UNBATCHED = "created-unbatched"

# What only an operator removes (a log's stalls): its cause itself, or, for a log held by another cause (not
# recorded yet, say), a cursor pinned with no transaction open, or transactions open across the switch.
STALL_PINNED = "pinned"
STALL_ACROSS = "open-across"


@dataclass(frozen=True)
class Fleet:
    """What every log's state shares: acknowledgmentAtBatchIndexLevelEnabled across the brokers (None: not
    known everywhere), and since when no broker has written a batch (None: not known, or step 1 not clean)."""

    batch_index: bool | None
    unbatched_since: int | None = None


@dataclass(frozen=True)
class LogState:
    log: LogObservation
    oldest: int | None  # its oldest remaining ledger
    recorded: int | None  # the newest ledger that may hold a batched entry, if recorded
    cause: str | None  # None: clear
    clear_as: str | None = None  # TRIMMED or CREATED_UNBATCHED when clear
    stalls: tuple[str, ...] = ()  # causes only an operator removes, in the order they are told

    @property
    def clear(self) -> bool:
        return self.cause is None


def log_state(log: LogObservation, record: Record | None, fleet: Fleet) -> LogState:
    """The state of one log seen now, given its record (None: not recorded yet)."""
    recorded = record.last_batched_ledger_id if record else None
    if log.error or not log.ledgers:
        return _held(LogState(log, None, recorded, CAUSE_ERROR), fleet)
    oldest, newest = min(log.ledgers), max(log.ledgers)
    if holds_no_batch(log, fleet.unbatched_since):
        return LogState(log, oldest, recorded, None, CREATED_UNBATCHED)
    if record is None:
        return _held(LogState(log, oldest, None, CAUSE_NOT_RECORDED), fleet)
    if recorded > newest:
        return _held(LogState(log, oldest, recorded, CAUSE_INCONSISTENT, stalls=(CAUSE_INCONSISTENT,)), fleet)
    if oldest > recorded:
        return LogState(log, oldest, recorded, None, TRIMMED)
    held_since = iso_ms(record.mark_since) if record.mark_delete == log.mark_delete else None
    return _held(LogState(log, oldest, recorded, cause_of(log, recorded, fleet, held_since)), fleet)


def missing_state(log: LogObservation, record: Record) -> LogState:
    """A recorded log the check did not see: it may have been missed, so it is not clear."""
    return LogState(log, None, record.last_batched_ledger_id, CAUSE_MISSING)


def _held(state: LogState, fleet: Fleet) -> LogState:
    """The stalls of a held coordinator: its cause, when only an operator removes it (with transactions
    open, the batch-index cause counts only where the cursor provably outlived every transaction open when
    it stopped: cause_of; with their number unknown it stays a wait), else what its cursor shows."""
    log, cause = state.log, state.cause
    if log.kind != COORDINATOR:
        return state
    stalls = list(state.stalls)
    if cause == CAUSE_OPEN_ACROSS or (cause == CAUSE_BATCH_INDEX and log.ongoing_txns is not None):
        stalls.append(cause)
    elif pinned_without_open_transactions(log, fleet.batch_index):
        stalls.append(STALL_PINNED)
    elif open_across_switch(log, fleet.batch_index, fleet.unbatched_since):
        stalls.append(STALL_ACROSS)
    if cause == CAUSE_OVERDUE:
        stalls.append(CAUSE_OVERDUE)
    return LogState(log, state.oldest, state.recorded, cause, stalls=tuple(stalls))


def cause_of(log: LogObservation, recorded: int, fleet: Fleet, held_since: int | None = None) -> str:
    """Why the ledgers up to `recorded` still exist. `held_since`: since when (epoch ms, the target's
    clock) the cursor has stood where it is, if known."""
    batch_index = fleet.batch_index
    newest = max(log.ledgers)
    mark = Position.find(log.mark_delete)
    lac = Position.find(log.last_confirmed)
    if open_across_switch(log, batch_index, fleet.unbatched_since) and (mark is None or mark[0] <= recorded):
        return CAUSE_OPEN_ACROSS
    if newest <= recorded and not _pinned(log, mark, lac, batch_index, held_since):
        return CAUSE_NOT_ROLLED
    if mark is not None and lac is not None and mark >= lac:
        return CAUSE_TRIM_PENDING
    if mark is not None and mark[0] > recorded:
        return CAUSE_TRIM_PENDING
    if log.ongoing_txns and _pinned(log, mark, lac, batch_index, held_since):
        return CAUSE_BATCH_INDEX
    if log.ongoing_txns and log.overdue_txns:
        return CAUSE_OVERDUE
    if log.ongoing_txns:
        return CAUSE_OPEN_TXN
    if log.kind == COORDINATOR and batch_index is False:
        return CAUSE_BATCH_INDEX
    return CAUSE_CURSOR_STUCK


def holds_no_batch(log: LogObservation, unbatched_since: int | None) -> bool:
    """Its only ledger was created after every broker's buffered-writer metrics started, and they
    counted no batch: it cannot hold a batched entry (a ledger is written by its creator only)."""
    return (
        unbatched_since is not None
        and not log.error
        and len(log.ledgers or ()) == 1
        and (log.current_created_ms or -1) >= unbatched_since
    )


def empty_current(log: LogObservation) -> bool:
    """The current ledger holds no entry: the last confirmed entry is before it (or its entry -1)."""
    lac = Position.find(log.last_confirmed)
    return lac is not None and bool(log.ledgers) and (lac[0] < max(log.ledgers) or lac[1] < 0)


def pinned_without_open_transactions(log: LogObservation, batch_index: bool | None) -> bool:
    """The TC log's cursor is pinned with no transaction open, seen from the observation alone (before
    the log is recorded)."""
    return log.effective_batching is False and _pinned(
        log, Position.find(log.mark_delete), Position.find(log.last_confirmed), batch_index
    )


def _pinned(log: LogObservation, mark, lac, batch_index: bool | None, held_since: int | None = None) -> bool:
    """The TC log's cursor is behind its last entry, batch-index deletion is off, entries after the cursor
    were deleted (records of transactions that ended), and no transaction holds it: records that cannot be
    deleted pin it. Either none is open, or the cursor has stood where it is since `held_since` while every
    transaction open then has ended (each open one opened later): a busy cluster always has some open,
    which do not hold it. Without deleted entries after it, the cursor may stand right before the records
    of the transactions open now, which hold it until they end."""
    if log.kind != COORDINATOR or batch_index is not False or mark is None or lac is None or not mark < lac:
        return False
    if (log.individually_deleted or "").strip() in ("", "[]"):
        return False
    if log.ongoing_txns == 0:
        return True
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
