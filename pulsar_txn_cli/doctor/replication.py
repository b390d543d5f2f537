"""The held-replicators check: geo-replication stopped behind an open transaction. A pure judgement
over a Reading (read.py).

A replicator reads its topic only up to the transaction buffer's maxReadPosition (so that it never
sends what may still be aborted), so one open transaction stops replication of the partition to every
remote cluster until it ends or times out, and nothing says so: the replicator is connected and its
backlog just grows. Its cursor (`<replicatorPrefix>.<cluster>`) is in the partition's internal stats,
which the doctor reads anyway; what it may not send is what lies after both its mark-delete and
maxReadPosition.
"""

from __future__ import annotations

from pulsar_txn_cli.doctor.findings import ERROR, Finding, evidence
from pulsar_txn_cli.doctor.transactions import (
    BUFFER,
    INTERNAL,
    SLOW,
    _dur,
    _start,
    abort_advice,
    abort_fix,
    age_ms,
    is_hanging,
    partition_state,
    rest,
    timeout_ms,
)
from pulsar_txn_cli.stuck_readers import (
    READY_STATES,
    holders_by_partition,
    replicator_prefix,
    replicators,
    replicators_wait_for_transactions,
)

BEFORE_3_0 = (
    "these brokers ({}) predate Pulsar 3.0, whose replicators are the first to read only up to maxReadPosition "
    "(apache/pulsar#18896): an open transaction does not hold them"
)


def not_held_here(reading) -> str | None:
    """Why the check does not apply to these brokers, or None."""
    if replicators_wait_for_transactions(reading.versions):
        return None
    return BEFORE_3_0.format(", ".join(reading.versions))


def prefix_of(reading) -> str:
    """The replicators' cursor prefix the brokers run with (the first that says), else Pulsar's default."""
    runtimes = [b.get("runtime") for _, b in sorted(reading.brokers.items()) if b.get("runtime")]
    return replicator_prefix(runtimes[0] if runtimes else None)


def held_replicators(reading, older_than_ms: int | None) -> list[Finding]:
    """Partitions whose replication to some cluster waits behind a hanging transaction (the head holder)."""
    holders = holders_by_partition(reading.open_txns)
    prefix = prefix_of(reading)
    out = []
    for partition, entry in sorted(reading.partitions.items()):
        if entry.get("error") or not holders.get(partition):
            continue
        view = partition_state(entry)
        if view["entriesBehind"] <= 0 or view["state"] not in READY_STATES:
            continue
        held = [
            r for r in replicators(entry.get("internal") or {}, view["maxReadPosition"], prefix) if r["entriesHeld"]
        ]
        ordered = sorted(holders[partition], key=_start)
        late = [h for h in ordered if is_hanging(h["metadata"], reading.now_ms, older_than_ms)]
        if not held or not late or late[0] is not ordered[0]:
            continue  # no replicator waits, or the head is young: it replicates when that transaction ends
        out.append(_finding(reading, partition, view, held, ordered, late))
    return out


def _finding(reading, partition, view, held, ordered, late) -> Finding:
    head = ordered[0]["metadata"]
    clusters = ", ".join(r["cluster"] for r in held)
    most = max(r["entriesHeld"] for r in held)
    ids = [h["txnId"] for h in ordered]
    summary = (
        f"replication to {clusters} stops at maxReadPosition {view['maxReadPosition']}: {most} entries written "
        f"after it are not replicated, for {_dur(age_ms(head, reading.now_ms))}, held by "
        + ", ".join(ids[:3])
        + (f" and {len(ids) - 3} more" if len(ids) > 3 else "")
        + "; the replicator stays connected and its backlog only grows until the transaction ends or times out"
    )
    return Finding(
        "held-replicators",
        ERROR,
        partition,
        summary,
        [
            evidence(BUFFER.format(rest(partition)), state=view["state"], maxReadPosition=view["maxReadPosition"]),
            evidence(
                INTERNAL.format(rest(partition)),
                lastConfirmedEntry=view["lastConfirmedEntry"],
                replicators=held,
            ),
            evidence(
                SLOW,
                holders=[
                    {
                        "txnId": h["txnId"],
                        "status": h["metadata"].get("status"),
                        "startPosition": h["startPosition"],
                        "ageMs": age_ms(h["metadata"], reading.now_ms),
                        "timeoutAt": timeout_ms(h["metadata"]),
                    }
                    for h in ordered
                ],
                heldSince=head.get("openTimestamp"),
                heldForMs=age_ms(head, reading.now_ms),
            ),
        ],
        list(
            dict.fromkeys(c for h in late for c in abort_fix(h["txnId"], reading.versions, h["metadata"].get("status")))
        ),
        abort_advice(reading.versions),
        [h["txnId"] for h in late],
    )
