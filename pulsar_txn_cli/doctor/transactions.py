"""Checks on open transactions and the readers they hold: hanging-transaction, held-readers,
phantom-fence. Pure judgements over a Reading (read.py).

Who holds a partition is found by inverting every coordinator's open transactions' produced
partitions (the buffer's stats give only a count, apache/pulsar#19786).
"""

from __future__ import annotations

from pulsar_txn_cli.doctor.findings import ERROR, WARNING, Finding, evidence
from pulsar_txn_cli.transaction_ends import (
    ENDING,
    ENDING_ADVICE,
    abort_advice,
    abort_fix,
    age_ms,
    bound_ms,
    is_hanging,
    past_timeout,
    timeout_ms,
)
from pulsar_txn_cli.names import Position, TopicName, TxnID
from pulsar_txn_cli.protocol import PERSISTENT, TXN
from pulsar_txn_cli.stuck_readers import READY_STATES, entries_between, holders_by_partition
from pulsar_txn_cli.output.units import counted

SLOW = f"GET {TXN}/slowTransactions/-1"
BUFFER = f"GET {TXN}/transactionBufferStats/{{}}"
INTERNAL = f"GET {PERSISTENT}/{{}}/internalStats"


def rest(topic: str) -> str:
    """A topic as it appears in an admin path (tenant/namespace/local)."""
    try:
        return TopicName(topic).rest
    except Exception:  # noqa: BLE001 - evidence names what it can
        return topic


def partition_state(entry: dict) -> dict:
    """maxReadPosition, the last written position and how many entries lie between, for one partition."""
    stats, internal = entry.get("stats") or {}, entry.get("internal") or {}
    max_read, last = Position.find(stats.get("maxReadPosition")), Position.find(internal.get("lastConfirmedEntry"))
    behind = entries_between(max_read, last, internal.get("ledgers") or []) if max_read and last else 0
    return {
        "state": stats.get("state"),
        "maxReadPosition": stats.get("maxReadPosition"),
        "lastConfirmedEntry": internal.get("lastConfirmedEntry"),
        "entriesBehind": behind,
        "ongoingTxnSize": stats.get("ongoingTxnSize"),
        "lowWaterMarks": stats.get("lowWaterMarks"),
    }


def in_scope(reading, meta: dict) -> bool:
    """Whether a transaction touches the partitions or subscriptions the doctor was asked about."""
    if not reading.scope.topic and not reading.scope.namespace:
        return True
    topics = set(meta.get("producedPartitions") or {}) | set(meta.get("ackedPartitions") or {})
    known = set(reading.partitions) | {s.get("topic") for s in reading.subscriptions}
    return bool(topics & known)


def readers_held(reading, txn_id: str) -> list[dict]:
    """The partitions whose readers this transaction holds (its first message is after maxReadPosition)."""
    meta = reading.open_txns.get(txn_id) or {}
    held = []
    for partition, in_buffer in (meta.get("producedPartitions") or {}).items():
        entry = reading.partitions.get(partition)
        if entry is None or entry.get("error") or (in_buffer or {}).get("aborted"):
            continue
        view = partition_state(entry)
        if view["entriesBehind"] > 0 and view["state"] in READY_STATES:
            held.append({"topic": partition, "entriesBehind": view["entriesBehind"]})
    return held


def hanging(reading, older_than_ms: int | None) -> list[Finding]:
    out = []
    versions = reading.versions
    for txn_id, meta in sorted(reading.open_txns.items()):
        if not in_scope(reading, meta) or not is_hanging(meta, reading.now_ms, older_than_ms):
            continue
        age, timeout, late = age_ms(meta, reading.now_ms), timeout_ms(meta), past_timeout(meta, reading.now_ms)
        held = readers_held(reading, txn_id)
        produced, acked = sorted(meta.get("producedPartitions") or {}), meta.get("ackedPartitions") or {}
        subs = sorted(f"{t} / {s}" for t, by in acked.items() for s in by)
        most = TxnID.parse(txn_id)[0]
        summary = (
            f"{meta.get('status', 'OPEN')} for {_dur(age)} (timeout {_dur(timeout)})"
            + (", past its timeout: the coordinator should have aborted it" if late else "")
            + f"; produced to {counted(len(produced), 'partition')}, acknowledged on {counted(len(subs), 'subscription')}"
            + (f"; holds the readers of {counted(len(held), 'partition')}" if held else "")
        )
        out.append(
            Finding(
                "hanging-transaction",
                ERROR if late or held else WARNING,
                f"transaction {txn_id}",
                summary,
                [
                    evidence(
                        SLOW,
                        status=meta.get("status"),
                        openTimestamp=meta.get("openTimestamp"),
                        ageMs=age,
                        timeoutMs=timeout,
                        boundMs=bound_ms(meta, older_than_ms),
                        producedPartitions=produced,
                        ackedSubscriptions=subs,
                        ownerBroker=reading.owners.get(str(most)),
                    ),
                    *[evidence(BUFFER.format(rest(h["topic"])), entriesBehind=h["entriesBehind"]) for h in held],
                ],
                abort_fix(txn_id, versions, meta.get("status")),
                ENDING_ADVICE.format(status=meta.get("status"))
                if meta.get("status") in ENDING
                else abort_advice(versions),
                [txn_id],
            )
        )
    return out


def held_readers(reading, older_than_ms: int | None) -> list[Finding]:
    holders = holders_by_partition(reading.open_txns)
    out = []
    for partition, entry in sorted(reading.partitions.items()):
        if entry.get("error"):
            continue
        view = partition_state(entry)
        if view["entriesBehind"] <= 0 or view["state"] not in READY_STATES or not holders.get(partition):
            continue
        ordered = sorted(holders[partition], key=_start)
        late = [h for h in ordered if is_hanging(h["metadata"], reading.now_ms, older_than_ms)]
        if not late or late[0] is not ordered[0]:
            continue  # the head is young: a transaction in progress, readers move on when it ends
        head = ordered[0]["metadata"]
        ids = [h["txnId"] for h in ordered]
        out.append(
            Finding(
                "held-readers",
                ERROR,
                partition,
                f"readers wait at maxReadPosition {view['maxReadPosition']}, "
                f"{counted(view['entriesBehind'], 'entry', 'entries')} behind the last written {view['lastConfirmedEntry']}, for {_dur(age_ms(head, reading.now_ms))}, held by "
                + ", ".join(ids[:3])
                + (f" and {len(ids) - 3} more" if len(ids) > 3 else ""),
                [
                    evidence(
                        BUFFER.format(rest(partition)),
                        state=view["state"],
                        maxReadPosition=view["maxReadPosition"],
                        ongoingTxnSize=view["ongoingTxnSize"],
                    ),
                    evidence(INTERNAL.format(rest(partition)), lastConfirmedEntry=view["lastConfirmedEntry"]),
                    evidence(
                        SLOW,
                        holders=[
                            {
                                "txnId": h["txnId"],
                                "startPosition": h["startPosition"],
                                "status": h["metadata"].get("status"),
                            }
                            for h in ordered
                        ],
                        heldSince=head.get("openTimestamp"),
                        heldForMs=age_ms(head, reading.now_ms),
                    ),
                ],
                list(
                    dict.fromkeys(
                        c for h in late for c in abort_fix(h["txnId"], reading.versions, h["metadata"].get("status"))
                    )
                ),
                abort_advice(reading.versions),
                [h["txnId"] for h in late],
            )
        )
    return out


def phantom_fence(reading) -> list[Finding]:
    """Readers held while no coordinator lists an open transaction on the partition (apache/pulsar#14889)."""
    holders = holders_by_partition(reading.open_txns)
    out = []
    if reading.open_error:
        return out  # without the open transactions nothing can be called a phantom
    for partition, entry in sorted(reading.partitions.items()):
        if entry.get("error"):
            continue
        view = partition_state(entry)
        if view["entriesBehind"] <= 0 or view["state"] not in READY_STATES or holders.get(partition):
            continue
        ongoing = view["ongoingTxnSize"] or 0
        summary = (
            f"readers wait at maxReadPosition {view['maxReadPosition']}, "
            f"{counted(view['entriesBehind'], 'entry', 'entries')} behind {view['lastConfirmedEntry']}, but no coordinator lists an open transaction on this partition"
        )
        if ongoing:
            summary += (
                f"; the buffer still counts {ongoing} ongoing: it missed their end, and the next commit or abort "
                "here applies the coordinators' low-water marks"
            )
        out.append(
            Finding(
                "phantom-fence",
                WARNING if ongoing else ERROR,
                partition,
                summary,
                [
                    evidence(
                        BUFFER.format(rest(partition)),
                        state=view["state"],
                        maxReadPosition=view["maxReadPosition"],
                        ongoingTxnSize=ongoing,
                        lowWaterMarks=view["lowWaterMarks"],
                    ),
                    evidence(INTERNAL.format(rest(partition)), lastConfirmedEntry=view["lastConfirmedEntry"]),
                    evidence(SLOW, openTransactionsOnPartition=0),
                ],
                [f"pulsar-txn unload -t {partition} --yes"],
                "unloading the partition makes its transaction buffer recover, which recomputes maxReadPosition",
            )
        )
    return out


def causes_first(findings: list[Finding]) -> list[Finding]:
    """A transaction stuck COMMITTING or ABORTING waits for the stores that take its end marker: a buffer
    or pending-ack store that is not Ready is its root cause, so it moves right before it (at its grade)."""
    out = list(findings)
    for symptom in [f for f in findings if f.check == "hanging-transaction"]:
        values = symptom.evidence[0]["values"] if symptom.evidence else {}
        if values.get("status") not in ENDING:
            continue
        touched = set(values.get("producedPartitions") or []) | set(values.get("ackedSubscriptions") or [])
        causes = [f for f in out if f.check in ("buffer-not-ready", "pending-ack-not-ready") and f.subject in touched]
        for cause in causes:
            out.remove(cause)
            cause.severity = ERROR if symptom.severity == ERROR else cause.severity
            out.insert(out.index(symptom), cause)
    return out


def _start(holder: dict):
    start = Position.find(holder.get("startPosition"))
    return (start is None, start or (0, 0), holder["metadata"].get("openTimestamp") or 0)


def _dur(ms) -> str:
    from pulsar_txn_cli.output.units import duration

    return "?" if ms is None else duration(ms)
