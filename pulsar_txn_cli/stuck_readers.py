"""Which topic partitions hold their readers back behind open transactions, and why.

Works through PulsarAdmin only (the same REST paths on a cluster and on the engine):
  transactionBufferStats        maxReadPosition and the number of ongoing transactions
  .../internalStats             the last written position and the ledgers, to count the gap
  slowTransactions/-1           every open transaction with its produced partitions
A partition is held when maxReadPosition is behind the last written position: readers stop
just before the first message of the oldest open transaction there (its "head" holder).
"""

from __future__ import annotations

from pulsar_txn_cli.admin.open_transactions import open_transactions
from pulsar_txn_cli.errors import ConnectionFailed, PulsarTxnError
from pulsar_txn_cli.names import Position, TopicName, expand_partitions
from pulsar_txn_cli.protocol import PENDING_ACK_SUFFIX
from pulsar_txn_cli.output.units import counted

SYSTEM_PREFIX = "__"
# Cause ids, kebab-case as every command's (downgrade check's `open-transaction` is the same cause).
CAUSE_OPEN_TXN = "open-transaction"
CAUSE_RECOVERING = "recovering"


def entries_between(after: tuple[int, int], last: tuple[int, int], ledgers: list[dict]) -> int:
    """How many entries lie in (after, last], from the ledger list of the topic's internal stats.

    The open ledger is reported with 0 entries; its count comes from the last position instead.
    """
    total = 0
    for info in ledgers:
        ledger_id = int(info.get("ledgerId", -1))
        count = last[1] + 1 if ledger_id == last[0] else int(info.get("entries") or 0)
        if ledger_id > last[0]:
            continue
        if ledger_id > after[0]:
            total += count
        elif ledger_id == after[0]:
            total += max(count - after[1] - 1, 0)
    return total


def partitions_of(admin, topic: str | None, namespace: str | None) -> list[str]:
    """The partitions to look at: the topic's (or the topic itself), or the namespace's user topics."""
    if topic:
        name = TopicName(topic)
        try:
            meta = admin.get(f"/admin/v2/persistent/{name.rest}/partitions") or {}
        except ConnectionFailed:
            meta = {}  # not partitioned (or a backend without partitioned metadata)
        count = int(meta.get("partitions") or 0)
        return expand_partitions(name.full, count)
    names = admin.namespace_topics(namespace, include_system=False) or []
    from pulsar_txn_cli.natural import natural_key

    return sorted((n for n in names if n.startswith("persistent://") and not _system_topic(n)), key=natural_key)


def _system_topic(name: str) -> bool:
    """Pulsar's own topics; before 3.0 a namespace's topic list includes the pending-ack logs even
    when system topics are not asked for (seen on 2.10.5)."""
    return name.rsplit("/", 1)[-1].startswith(SYSTEM_PREFIX) or name.endswith(PENDING_ACK_SUFFIX)


def holders_by_partition(open_txns: dict) -> dict[str, list[dict]]:
    """partition -> the open transactions that produced to it (from slowTransactions)."""
    found: dict[str, list[dict]] = {}
    for txn_id, meta in (open_txns or {}).items():
        for partition, in_buffer in (meta.get("producedPartitions") or {}).items():
            if (in_buffer or {}).get("aborted"):
                continue
            found.setdefault(partition, []).append(
                {
                    "txnId": meta.get("txnId", txn_id),
                    "metadata": meta,
                    "startPosition": (in_buffer or {}).get("startPosition"),
                }
            )
    return found


def fix_commands(txn_id: str) -> list[str]:
    most, least = txn_id.strip("()").split(",")
    return [f"pulsar-txn transaction-metadata '({most},{least})'", f"pulsar-txn abort-transaction -m {most} -l {least}"]


# A buffer in these states serves reads; Initializing, None and Close (or an unknown state) do not.
READY_STATES = ("Ready", "NoSnapshot", "FirstSnapshotting")


def partition_report(admin, partition: str, holders: list[dict], now_ms: int, strict: bool = False) -> dict:
    report = {"topic": partition, "held": False}
    try:
        stats = admin.transaction_buffer_stats(partition)
        internal = admin.get(f"/admin/v2/persistent/{TopicName(partition).rest}/internalStats") or {}
    except PulsarTxnError as exc:
        if strict:
            raise
        return {**report, "error": str(exc)}
    max_read = Position.find(stats.get("maxReadPosition"))
    last = Position.find(internal.get("lastConfirmedEntry"))
    behind = entries_between(max_read, last, internal.get("ledgers") or []) if max_read and last else 0
    state = stats.get("state")
    report.update(
        {
            "maxReadPosition": stats.get("maxReadPosition"),
            "lastConfirmedEntry": internal.get("lastConfirmedEntry"),
            "entriesBehind": behind,
            "ongoingTxnSize": stats.get("ongoingTxnSize", 0),
            "bufferState": state,
            "held": behind > 0 or state not in READY_STATES,
            "cause": None,
        }
    )
    if state not in READY_STATES:
        # Readers wait for the buffer's recovery, whatever the transactions do: a different fix.
        report["cause"] = CAUSE_RECOVERING
        report["note"] = (
            f"the transaction buffer has not finished recovering (state {state}): readers wait for "
            "its recovery, not for open transactions; it usually ends within seconds; if it lasts, "
            f"check the owning broker's log and unload the topic (pulsar-admin topics unload {partition})"
        )
        return report
    if not report["held"]:
        return report
    report["cause"] = CAUSE_OPEN_TXN  # the same id as downgrade check's cause

    def order(holder):  # start position when the coordinator knows it, else open time
        start = Position.find(holder["startPosition"])
        return (start is None, start or (0, 0), holder["metadata"].get("openTimestamp") or 0)

    ordered = sorted(holders, key=order)
    out = []
    for index, holder in enumerate(ordered):
        meta = holder["metadata"]
        opened = meta.get("openTimestamp")
        out.append(
            {
                "txnId": holder["txnId"],
                "head": index == 0,  # the oldest start: readers stop just before it
                "status": meta.get("status"),
                "startPosition": holder["startPosition"],
                "openTimestamp": opened,
                "openForMs": max(now_ms - opened, 0) if isinstance(opened, int) else None,
                "timeoutAt": meta.get("timeoutAt"),
                "metadata": meta,
                "fix": fix_commands(holder["txnId"]),
            }
        )
    report["holders"] = out
    report["heldSince"] = out[0]["openTimestamp"] if out else None
    if not out:
        report["note"] = (
            f"{counted(report['ongoingTxnSize'], 'ongoing transaction')} but no coordinator lists one for this partition: "
            "the buffer missed their end; the next commit or abort on this partition applies the "
            "coordinator's low-water mark, which aborts them"
        )
    return report


def find_stuck_readers(
    admin, *, topic: str | None = None, namespace: str | None = None, now_ms: int, include_all: bool = False
) -> dict:
    partitions = partitions_of(admin, topic, namespace)
    listing = open_transactions(admin)
    holders = holders_by_partition(listing.transactions)
    # One named topic that cannot be read is an error; in a namespace, one bad topic is a warning.
    strict = topic is not None and len(partitions) == 1
    reports = [partition_report(admin, p, holders.get(p, []), now_ms, strict) for p in partitions]
    held = [r for r in reports if r.get("held")]
    errors = [r for r in reports if "error" in r]
    if listing.unlisted:
        for report in held:
            if not report.get("holders"):
                report["note"] = (
                    f"no listed coordinator has a transaction on this partition; coordinator(s) "
                    f"{', '.join(map(str, sorted(listing.unlisted)))} could not be listed and may hold it"
                )
    shown = reports if include_all else held + errors
    recovering = sum(1 for r in held if r.get("cause") == CAUSE_RECOVERING)
    return {
        "checked": len(reports),
        "held": len(held),
        "recovering": recovering,
        "partitions": shown,
        "unlistedCoordinators": listing.unlisted_rows(),
    }
