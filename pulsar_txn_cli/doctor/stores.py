"""Checks on the stores a topic needs for transactions: buffer-not-ready, pending-ack-not-ready,
leaked-pending-ack. Pure judgements over a Reading (read.py)."""

from __future__ import annotations

from pulsar_txn_cli.doctor.findings import ERROR, WARNING, Finding, evidence
from pulsar_txn_cli.doctor.transactions import BUFFER, INTERNAL, SLOW, partition_state, rest
from pulsar_txn_cli.protocol import SUBSCRIPTIONS, TXN, topic_path
from pulsar_txn_cli.stuck_readers import READY_STATES, holders_by_partition
from pulsar_txn_cli.output.units import counted

# A store that recovers for longer than this needs a look (a topic load normally takes seconds).
RECOVERY_GRACE_MS = 60_000
PA_STATS = f"GET {TXN}/pendingAckStats/{{}}/{{}}"
PA_INTERNAL = f"GET {TXN}/pendingAckInternalStats/{{}}/{{}}"


def state_phrase(state: str | None) -> str:
    """A store's state as a summary says it: Pulsar calls a store it has not begun to open `None`."""
    if state is None:
        return "not answering"
    return "not opened (state None)" if state == "None" else state


def _under_way(stats: dict) -> bool:
    """The times show a recovery that started and has not ended."""
    start, end = stats.get("recoverStartTime") or 0, stats.get("recoverEndTime") or 0
    return bool(start) and not (end and end >= start)


def recovering_for(stats: dict, now_ms: int) -> int | None:
    return max(now_ms - stats["recoverStartTime"], 0) if _under_way(stats) else None


def opening(stats: dict) -> bool:
    """Initializing, with no recovery under way in its times (no recoverStartTime, or an earlier recovery's):
    since when is unknown; a store that was loaded moments ago looks so (docs/real-broker-findings.md)."""
    return stats.get("state") == "Initializing" and not _under_way(stats)


def severity(stats: dict, now_ms: int) -> str:
    """A store (or coordinator) not Ready: an error once its recovery outlasts the grace, else a warning."""
    if opening(stats):
        return WARNING  # its age is unknown: never an error on one sight
    took = recovering_for(stats, now_ms)
    return WARNING if took is not None and took < RECOVERY_GRACE_MS else ERROR


def since_phrase(stats: dict, recovering_ms: int | None) -> str:
    """What its times tell of how long it has not been Ready, as a clause of a finding's summary."""
    if opening(stats):
        return (
            ", with no recovery under way in its times (since when is unknown; if a later check finds it so, unload it)"
        )
    from pulsar_txn_cli.output.units import duration

    return f", recovering for {duration(recovering_ms)}" if recovering_ms else ""


def buffer_not_ready(reading) -> list[Finding]:
    holders = holders_by_partition(reading.open_txns)
    out = []
    for partition, entry in sorted(reading.partitions.items()):
        stats = entry.get("stats") or {}
        if entry.get("error") or "state" not in stats:
            continue
        view = partition_state(entry)
        state = view["state"]
        values = dict(
            state=state,
            recoverStartTime=stats.get("recoverStartTime"),
            recoverEndTime=stats.get("recoverEndTime"),
            recoveringForMs=recovering_for(stats, reading.now_ms),
            lastSnapshotTimestamps=stats.get("lastSnapshotTimestamps"),
            ongoingTxnSize=stats.get("ongoingTxnSize"),
            replayEntries=view["entriesBehind"],
        )
        fix = [f"pulsar-txn unload -t {partition} --yes"]
        if state not in READY_STATES:
            out.append(
                Finding(
                    "buffer-not-ready",
                    severity(stats, reading.now_ms),
                    partition,
                    f"the transaction buffer is {state_phrase(state)}{since_phrase(stats, values['recoveringForMs'])}"
                    f": readers and transactional producers wait; a recovery replays up to {view['entriesBehind']}"
                    " entries after maxReadPosition",
                    [evidence(BUFFER.format(rest(partition)), **values)],
                    fix,
                    "an unload makes the owning broker recover the buffer again; if it does not reach Ready, its log "
                    "says why (apache/pulsar#15249, #18833)",
                )
            )
            continue
        writers = [h["txnId"] for h in holders.get(partition, [])]
        if state == "NoSnapshot" and writers and not stats.get("ongoingTxnSize"):
            out.append(
                Finding(
                    "buffer-not-ready",
                    ERROR,
                    partition,
                    f"the transaction buffer is still NoSnapshot though {counted(len(writers), 'open transaction')} registered "
                    "this partition and none of their messages is in the buffer: its first snapshot was not taken, "
                    "and the topic refuses transactional messages (apache/pulsar#24945, Pulsar 4.0.7)",
                    [
                        evidence(BUFFER.format(rest(partition)), **values),
                        evidence(SLOW, transactionsProducingHere=writers),
                    ],
                    fix,
                    "unload the partition so the buffer loads again and takes its first snapshot; Pulsar 4.0.8 "
                    "reworked the first snapshot",
                    writers,
                )
            )
    return out


def pending_ack_not_ready(reading) -> list[Finding]:
    out = []
    for sub in reading.subscriptions:
        if sub.get("status") == "orphan":
            continue
        topic, name = sub["topic"], sub["subscription"]
        stats, internal = sub.get("stats") or {}, sub.get("internal") or {}
        state = stats.get("state")
        if state == "Ready":
            continue
        if not stats and not sub.get("error"):
            continue
        values = dict(
            state=state,
            error=sub.get("error") if not stats else None,
            recoverStartTime=stats.get("recoverStartTime"),
            recoverEndTime=stats.get("recoverEndTime"),
            recoveringForMs=recovering_for(stats, reading.now_ms),
        )
        out.append(
            Finding(
                "pending-ack-not-ready",
                severity(stats, reading.now_ms) if stats else WARNING,
                f"{topic} / {name}",
                f"the pending-ack store is {state_phrase(state)}{since_phrase(stats, values['recoveringForMs'])}: "
                "transactional acknowledgements on this "
                f"subscription wait; recovery replays {internal.get('numberOfEntries', '?')} log entries "
                f"({internal.get('totalSize', '?')} bytes)",
                [
                    evidence(PA_STATS.format(rest(topic), name), **values),
                    evidence(
                        PA_INTERNAL.format(rest(topic), name),
                        numberOfEntries=internal.get("numberOfEntries"),
                        totalSize=internal.get("totalSize"),
                        ledgers=len(internal.get("ledgers") or []),
                    ),
                ],
                [f"pulsar-txn unload -t {topic} --yes"],
                "an unload reopens the subscription's pending-ack store, which replays its log "
                "(apache/pulsar#21274, #16240)",
            )
        )
    return out


def leaked_pending_ack(reading) -> list[Finding]:
    out = []
    for sub in reading.subscriptions:
        if sub.get("status") != "orphan":
            continue
        name = sub["pendingAckTopic"]
        internal = sub.get("internal") or {}
        size = (
            f", {internal['numberOfEntries']} entries, {internal.get('totalSize', '?')} bytes"
            if "numberOfEntries" in internal
            else ""
        )
        out.append(
            Finding(
                "leaked-pending-ack",
                ERROR,
                name,
                f"a pending-ack log whose subscription is gone: it keeps "
                f"{counted(len(internal.get('ledgers') or []), 'ledger')}{size}, "
                "and can block deleting its namespace (apache/pulsar#11000, #19719)",
                [
                    evidence(
                        sub.get("internalEndpoint") or INTERNAL.format(rest(name)),
                        numberOfEntries=internal.get("numberOfEntries"),
                        totalSize=internal.get("totalSize"),
                        ledgers=[ledger.get("ledgerId") for ledger in internal.get("ledgers") or []],
                        error=sub.get("error"),
                    ),
                    evidence(
                        f"GET {topic_path(rest(sub.get('topic') or ''), SUBSCRIPTIONS)}",
                        subscription=sub.get("subscription"),
                        exists=False,
                    ),
                ],
                [f"pulsar-txn clean-pending-ack {name} --yes"],
            )
        )
    return out
