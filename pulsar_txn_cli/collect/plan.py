"""Which ledgers to collect: every transaction-coordinator log and every pending-ack log.

The coordinators come from the TC-assign partitions, the transactional subscriptions from the
admin layer's discovery (admin/discovery.py); each log's internal stats name its managed ledger
and its ledgers with their entry counts. The newest ledger of an open managed ledger shows 0
entries there, so its count is taken from the last confirmed entry and marked as open: BookieShell
reads it only up to the bookies' last-add-confirmed, which may lag by an entry.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from pulsar_txn_cli.codec import PENDING_ACK_LOG, TC_LOG


@dataclass(frozen=True)
class LedgerTask:
    managed_ledger: str
    log: str  # codec.TC_LOG or codec.PENDING_ACK_LOG
    ledger_id: int
    entries: int  # what the broker says the ledger holds (up to its last confirmed entry when open)
    open: bool  # the managed ledger's current ledger: it may still grow

    @property
    def key(self) -> str:
        return f"{self.managed_ledger}@{self.ledger_id}"


def plan(admin, concurrency: int) -> tuple[list[LedgerTask], list[str]]:
    """(every ledger of every transaction log, problems met on the way: logs that could not be listed)."""
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions
    from pulsar_txn_cli.errors import describe

    coordinators = admin.tc_partitions()
    subscriptions = transactional_subscriptions(admin, concurrency=concurrency)
    problems = [
        f"pending-ack log {s['pendingAckTopic']} belongs to no existing subscription: its ledgers cannot be listed"
        for s in subscriptions
        if s["status"] == "orphan"
    ]
    calls = [
        (f"coordinator {i}", TC_LOG, "transactionLogStats", lambda i=i: admin.coordinator_internal_stats(i))
        for i in range(coordinators)
    ]
    calls += [
        (
            f"subscription {s['subscription']} of {s['topic']}",
            PENDING_ACK_LOG,
            "pendingAckLogStats",
            lambda s=s: admin.pending_ack_internal_stats(s["topic"], s["subscription"]),
        )
        for s in subscriptions
        if s["status"] != "orphan"
    ]

    def one(call):
        what, log, key, fetch = call
        try:
            return ledger_tasks(fetch(), log, key), None
        except Exception as exc:  # noqa: BLE001 - one log that cannot be listed is reported, the rest go on
            return [], f"{what}: {describe(exc)}"

    tasks = []
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="collect-plan") as pool:
        for found, problem in pool.map(one, calls):
            tasks += found
            if problem:
                problems.append(problem)
    return tasks, problems


def ledger_tasks(stats, log: str, key: str) -> list[LedgerTask]:
    """The ledgers of one log from its internal stats (coordinatorInternalStats or pendingAckInternalStats)."""
    from pulsar_txn_cli.errors import DataError

    section = (stats or {}).get(key) if isinstance(stats, dict) else None
    name = (section or {}).get("managedLedgerName")
    ml = (section or {}).get("managedLedgerInternalStats")
    if not isinstance(name, str) or not isinstance(ml, dict) or not isinstance(ml.get("ledgers"), list):
        raise DataError(f"the internal stats have no {key}.managedLedgerName and managedLedgerInternalStats.ledgers")
    ledgers = ml["ledgers"]
    last_ledger, last_entry = _position(ml.get("lastConfirmedEntry"))
    tasks = []
    for index, info in enumerate(ledgers):
        ledger_id = int(info["ledgerId"])
        current = index == len(ledgers) - 1 and ml.get("state") != "Closed"
        entries = int(info.get("entries") or 0)
        if current:
            entries = last_entry + 1 if last_ledger == ledger_id else 0
        tasks.append(LedgerTask(name, log, ledger_id, entries, current))
    return tasks


def trimmed_meanwhile(admin, keys: set[tuple[str, int]], concurrency: int) -> set[tuple[str, int]]:
    """Of these (managed ledger, ledger id) that could not be read, the ones their own logs, listed again, no
    longer list: a log whose consumed ledgers are trimmed may drop one between the listing and its read, which
    is gone, not a failure. A ledger whose log cannot be listed again stays failed: nothing tells it from a
    trim. Other logs that cannot be listed (an orphaned pending-ack log, say) change nothing here."""
    if not keys:
        return set()
    tasks, _ = plan(admin, concurrency)
    listed = {t.managed_ledger for t in tasks}
    still = {(t.managed_ledger, t.ledger_id) for t in tasks}
    return {key for key in keys if key[0] in listed and key not in still}


def _position(text) -> tuple[int | None, int]:
    try:
        ledger, entry = str(text).split(":")
        return int(ledger), int(entry)
    except ValueError:
        return None, -1
