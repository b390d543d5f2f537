"""`downgrade check --confirm-from-bookies`: a SAFE confirmed by what is stored, applied to a finished verdict.

SAFE rests on ledger ids: every ledger up to the one recorded as the last batched is gone. The
confirmation does not trust that reasoning: every remaining ledger of every transaction log is read
(collect/scan.py: a cluster's from its bookies with BookKeeper's own shell, the engine's from its
store) and each entry's first two bytes are checked for the batch magic 0x0E01. SAFE stays SAFE only
when every ledger was read and none holds a batched entry; a batched entry makes it BLOCKED (cause
`batched-entry-found`, naming the ledgers and entries: batching was on after the record, so the
record cannot be trusted); a ledger or log that could not be read makes it WAIT (fail closed).

A current ledger is read up to the bookies' last-add-confirmed, which trails the broker by the adds
in flight at its last add. Its unread entries were written by the same writer as the rest of it (a
store's writer fixes batching when it opens, and a ledger is written only by the store that created
it), and a batching writer writes batched every record smaller than its batchedWriteMaxSize (4 MB
by default), so a read part with entries and none batched answers for the tail; a current ledger whose entries the bookies have not
confirmed at all is WAIT.

A WAIT with batching off and effective on every broker, held only by what may be stored (ledgers not yet
trimmed, records not taken, counters that cannot tell whether a batch was written since the last check, as
on Pulsar 2.11, which exports none), is decided by the same reading: when every remaining ledger was read
and none holds a batched entry, an old broker can read everything stored, and nothing batches any more: SAFE.
Otherwise the WAIT stands, as time and traffic still clear it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from pulsar_txn_cli.downgrade.verdict import BLOCKED, SAFE, WAIT, DowngradeVerdict
from pulsar_txn_cli.output.units import counted

CAUSE_BATCHED_FOUND = "batched-entry-found"
SHOWN_ENTRIES = 5  # entry ids named per ledger; the count says how many in all
FLAG = "--confirm-from-bookies"


@dataclass(frozen=True)
class LedgerRead:
    """One remaining ledger as read: its entries' ids that are batched, or why it could not be read."""

    managed_ledger: str
    ledger_id: int
    expected: int  # what the broker counts (up to its last confirmed entry when open)
    open: bool  # the log's current ledger
    read: int = 0  # entries read
    batched: tuple[int, ...] = ()  # ids of the entries that start with the batch magic
    error: str | None = None  # the ledger could not be read (and is still listed)


@dataclass(frozen=True)
class Reading:
    """Every remaining ledger of every transaction log, read after the check."""

    source: str  # where the entries came from, for messages ("the bookies (zk+null://…)", "the engine's store")
    ledgers: tuple[LedgerRead, ...]
    logs: int  # transaction logs listed
    problems: tuple[str, ...] = ()  # logs that could not be listed: their ledgers were not read
    gone: int = 0  # ledgers listed that were deleted before they could be read (trimmed meanwhile)

    def to_json(self) -> dict:
        return {
            "source": self.source,
            "logs": self.logs,
            "ledgers": len(self.ledgers),
            "entries": sum(ledger.read for ledger in self.ledgers),
            "batchedEntries": sum(len(ledger.batched) for ledger in self.ledgers),
            "batchedLedgers": [
                {
                    "managedLedger": ledger.managed_ledger,
                    "ledgerId": ledger.ledger_id,
                    "batchedEntries": len(ledger.batched),
                    "entryIds": list(ledger.batched[:SHOWN_ENTRIES]),
                }
                for ledger in self.ledgers
                if ledger.batched
            ],
            "unread": [
                {"managedLedger": ledger.managed_ledger, "ledgerId": ledger.ledger_id, "error": why}
                for ledger in self.ledgers
                if (why := unread(ledger))
            ],
            "goneBeforeRead": self.gone,
            "problems": list(self.problems),
        }


def unread(ledger: LedgerRead) -> str | None:
    """Why this ledger's entries are not all accounted for, or None when they are."""
    if ledger.error:
        return ledger.error
    if ledger.open and ledger.read == 0 and ledger.expected > 0:
        return (
            f"it is the current ledger and the bookies have confirmed none of its {ledger.expected} entries "
            "yet, so how they were written cannot be told; check again after more traffic"
        )
    return None


def read_for(result: DowngradeVerdict) -> bool:
    """Whether a reading can change this verdict: a SAFE it confirms, or a WAIT it decides."""
    return result.verdict == SAFE or (result.verdict == WAIT and result.reading_decides)


def apply_confirmation(result: DowngradeVerdict, reading: Reading) -> DowngradeVerdict:
    """The verdict once the remaining ledgers were read: a SAFE becomes BLOCKED when a batched entry
    is stored, WAIT when something could not be read; a WAIT the reading decides is SAFE when every ledger
    was read and none is batched; any other verdict is returned as it is."""
    if result.verdict == WAIT and result.reading_decides:
        return _settled(result, reading)
    if result.verdict != SAFE:
        return result
    owner = {ledger: item for item in result.items for ledger in (item.observation.ledgers or ())}
    blocked, waiting, found = [], [], {}
    for ledger in reading.ledgers:
        item = owner.get(ledger.ledger_id)
        where = item.observation.label if item is not None else ledger.managed_ledger
        if ledger.batched:
            blocked.append(f"{where}: ledger {ledger.ledger_id} holds {_entries(ledger)}")
            if item is not None:
                found.setdefault(id(item), []).append(ledger)
        elif why := unread(ledger):
            waiting.append(f"{FLAG}: {where}: ledger {ledger.ledger_id} was not read: {why}")
    waiting += [f"{FLAG}: {problem}" for problem in reading.problems]
    if not blocked and not waiting:
        return result
    if blocked:
        blocked.insert(0, _batched_problem(len(blocked), reading.source))
    marked = {id(i): _marked(i, found[id(i)]) if id(i) in found else i for i in result.items}
    return replace(
        result,
        verdict=BLOCKED if blocked else WAIT,
        coordinators=[marked[id(i)] for i in result.coordinators],
        subscriptions=[marked[id(i)] for i in result.subscriptions],
        problems=result.problems + blocked + waiting,
        fixes=result.fixes + (["pulsar-txn downgrade reset"] if blocked else []),
    )


def _settled(result: DowngradeVerdict, reading: Reading) -> DowngradeVerdict:
    if reading.problems or any(ledger.batched or unread(ledger) for ledger in reading.ledgers):
        return result
    why = f"none of its remaining ledgers holds a batched entry (read from {reading.source})"
    items = {id(i): replace(i, clear=True, reason=why, cause=None, advice=None) for i in result.items if not i.clear}
    return replace(
        result,
        verdict=SAFE,
        coordinators=[items.get(id(i), i) for i in result.coordinators],
        subscriptions=[items.get(id(i), i) for i in result.subscriptions],
        problems=[],
        fixes=[],
    )


def _batched_problem(ledgers: int, source: str) -> str:
    return (
        f"{counted(ledgers, 'remaining ledger')} {'holds' if ledgers == 1 else 'hold'} batched entries (read from {source}, listed below), although the "
        "ledger ids said every ledger that may hold batched entries is gone: batching was on after the checkpoint "
        "recorded the last batched ledgers, so the record cannot be trusted; make sure batching is off and "
        "effective everywhere (`pulsar-txn get-txn-tc-batch-log-stat`, `pulsar-txn get-txn-pending-ack-batch-log-stat`), "
        "then `pulsar-txn downgrade reset` and check again"
    )


def _entries(ledger: LedgerRead) -> str:
    count = len(ledger.batched)
    shown = ", ".join(str(e) for e in ledger.batched[:SHOWN_ENTRIES])
    more = f" and {count - SHOWN_ENTRIES} more" if count > SHOWN_ENTRIES else ""
    return f"{count} batched entr{'y' if count == 1 else 'ies'} (entr{'y' if count == 1 else 'ies'} {shown}{more})"


def _marked(item, ledgers: list[LedgerRead]):
    return replace(
        item,
        clear=False,
        cause=CAUSE_BATCHED_FOUND,
        reason="; ".join(f"ledger {ledger.ledger_id} holds {_entries(ledger)}" for ledger in ledgers),
        advice="batching was on after the record: make sure it is off everywhere, "
        "then `pulsar-txn downgrade reset` and check again",
    )
