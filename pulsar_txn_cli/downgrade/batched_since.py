"""Did any broker write a batch since the last check? The buffered-writer counters answer it.

Batching can come back at any moment of a downgrade and go again before the next check: through the
switches, a dynamic-config change by someone else, a broker restarted with broker.conf saying true. The
configuration then looks as it did, and the checkpoint's last-batched ledgers no longer mark the last
batched ledgers. The only trace left is in each broker's PIP-160 buffered-writer counters: a batch
counter that moved, or that restarted (the broker did). So every check keeps the counters it saw, and
the next one compares, writer by writer (the TC log's and the pending-ack log's):

- the same counters (same start, same batches): no batch in between;
- counters that restarted with no batch since: a batch only before their start (the broker restarted);
- counters that moved, or restarted with batches since, or a broker that answered the last check and is
  gone, or no counters kept by the last check: a batch may have been written until now;
- counters that cannot be read now: not known yet. The old counters are kept, so a later check that
  reads them tells; until then the verdict cannot be SAFE.

Pure functions of two sets of counters; the verdict raises the records with them (downgrade/verdict.py).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from pulsar_txn_cli.downgrade.observations import PENDING_ACK_WRITER, TC_WRITER, LogObservation, WriterCounters
from pulsar_txn_cli.output.units import iso_seconds

UNTIL_NOW = math.inf
LABEL = {TC_WRITER: "TC", PENDING_ACK_WRITER: "pending-ack"}


@dataclass
class Evidence:
    """What the counters say of one writer since the last check."""

    end: float | None = None  # a batch may have been written up to here (epoch ms or UNTIL_NOW); None: none was
    why: list[str] = field(default_factory=list)  # what says so
    unknown: list[str] = field(default_factory=list)  # brokers whose counters cannot be read now, and why

    def add(self, end: float, why: str) -> None:
        self.end = end if self.end is None else max(self.end, end)
        self.why.append(why)


def since_last_check(before: tuple[dict, ...] | None, now: tuple[WriterCounters, ...] | None, log: str) -> Evidence:
    """What the brokers' counters of writer `log` ("tc" or "pendingAck") say since the check that kept `before`."""
    evidence = Evidence()
    if before is None or now is None:
        what = "the last check kept no buffered-writer counters" if before is None else "the brokers were not listed"
        evidence.add(UNTIL_NOW, what)
        return evidence
    previous = {row["broker"]: (row["createdMs"], row["batches"]) for row in before if row["log"] == log}
    for writer in now:
        if not writer.cannot_batch:
            _compare(writer, previous.get(writer.broker), log, evidence)
    for broker in sorted(set(previous) - {w.broker for w in now}):
        evidence.add(UNTIL_NOW, f"broker {broker} answered the last check and is not listed now")
    return evidence


def _compare(now: WriterCounters, previous: tuple | None, log: str, evidence: Evidence) -> None:
    if now.error or log not in now.created_ms:
        why = now.error or f"it exports no {LABEL[log]} buffered-writer counters"
        evidence.unknown.append(f"broker {now.broker}: {why}")
        return
    created, batches = now.created_ms[log], now.batches.get(log, 0)
    if previous == (created, batches):
        return
    if previous is not None and previous[0] == created:
        evidence.add(UNTIL_NOW, f"broker {now.broker}'s {LABEL[log]} writer wrote {batches - previous[1]} batch(es)")
    elif batches:
        evidence.add(
            UNTIL_NOW, f"broker {now.broker} restarted, and its {LABEL[log]} writer wrote {batches} batch(es) since"
        )
    elif previous is None:
        evidence.add(created, f"broker {now.broker} was not seen by the last check")
    else:
        evidence.add(created, f"broker {now.broker} restarted at {iso_seconds(created)}")


def baseline(
    now: tuple[WriterCounters, ...] | None, before: tuple[dict, ...] | None, keep: set[str] = frozenset()
) -> tuple[dict, ...] | None:
    """The counters a check keeps for the next: those it read, except the kept ones of brokers it could not
    read and of the writers in `keep` (whose evidence it could not apply to every record yet)."""
    if now is None or (keep and before is None):
        return before
    unread = {w.broker for w in now if w.error}
    rows = [dict(row) for row in before or () if row["broker"] in unread or row["log"] in keep]
    rows += [
        {"broker": w.broker, "log": log, "createdMs": w.created_ms[log], "batches": w.batches.get(log, 0)}
        for w in now
        if not w.error and not w.cannot_batch
        for log in w.created_ms
        if log not in keep
    ]
    return tuple(sorted(rows, key=lambda row: (row["broker"], row["log"])))


# Brokers' clocks and the checking machine's may disagree by this much; a ledger created this close to the last
# check counts as created after it.
SKEW_MS = 60_000


def newest_possibly_batched(log: LogObservation, end: float, last_check_ms: int | None = None) -> int:
    """The newest ledger of `log` a batch written before `end` can be in, since the last check (at `last_check_ms`).

    Until now: its newest. Before a broker's start (the window of a broker that restarted): a log is read on the
    live broker that opened it, which created its current ledger and has written no batch since the last check
    or its own start, and a ledger is written only by its creator; so a ledger before the current one. None at
    all when the current ledger is older than the last check: its owner has held the log since then (a move
    opens a new ledger) and wrote no batch, so no other broker wrote to it in between. Returns -1 for none."""
    newest = max(log.ledgers)
    if end == UNTIL_NOW:
        return newest
    created = log.current_created_ms
    if created is not None and last_check_ms is not None and created < last_check_ms - SKEW_MS:
        return -1
    older = [ledger for ledger in log.ledgers if ledger < newest]
    return max(older) if older else newest - 1
