"""Which topic partitions hold their readers back behind open transactions, and why.

Works through PulsarAdmin only (the same REST paths on a cluster and on the engine):
  .../internalStats             the last written position and the ledgers, to count the gap
  transactionBufferStats        maxReadPosition and the number of ongoing transactions
  slowTransactions/-1           every open transaction with its produced partitions
A partition is held when maxReadPosition is behind the last written position: readers stop
just before the first message of the oldest open transaction there (its "head" holder). A geo-replicator
is such a reader: its cursor (`<replicatorPrefix>.<cluster>` in the internal stats) reads only up to
maxReadPosition too, so the open transaction also holds replication to that cluster.
"""

from __future__ import annotations

from pulsar_txn_cli.admin.features import release
from pulsar_txn_cli.admin.open_transactions import open_transactions
from pulsar_txn_cli.errors import PulsarTxnError
from pulsar_txn_cli.names import Position
from pulsar_txn_cli.output.units import counted
from pulsar_txn_cli.protocol import DEFAULT_REPLICATOR_PREFIX, PENDING_ACK_SUFFIX, REPLICATOR_PREFIX_KEY

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


def replicators(internal: dict, max_read_position, prefix: str = DEFAULT_REPLICATOR_PREFIX) -> list[dict]:
    """The partition's geo-replicators (its `<prefix>.<cluster>` cursors), each with its backlog and the
    entries it may not read yet: those after both its mark-delete and maxReadPosition."""
    last = Position.find(internal.get("lastConfirmedEntry"))
    fence = Position.find(max_read_position)
    ledgers = internal.get("ledgers") or []
    out = []
    for name, cursor in sorted((internal.get("cursors") or {}).items()):
        if not name.startswith(prefix + ".") or not isinstance(cursor, dict):
            continue
        done = Position.find(cursor.get("markDeletePosition"))
        backlog = entries_between(done, last, ledgers) if done and last else None
        held = entries_between(max(done, fence), last, ledgers) if done and fence and last else 0
        out.append(
            {
                "cluster": name[len(prefix) + 1 :],
                "cursor": name,
                "markDeletePosition": cursor.get("markDeletePosition"),
                "readPosition": cursor.get("readPosition"),
                "replicationBacklog": backlog,
                "entriesHeld": held,
            }
        )
    return out


# Pulsar 3.0's replicators read only up to maxReadPosition (apache/pulsar#18896); 2.10.5's and 2.11.0's read past
# it and sent uncommitted messages instead (seen in their released jars), so nothing holds them.
REPLICATOR_HELD_SINCE = (3, 0)


def replicators_wait_for_transactions(versions) -> bool:
    """False when some broker is known to predate REPLICATOR_HELD_SINCE."""
    return not any((release(v) or (99,))[:2] < REPLICATOR_HELD_SINCE for v in versions if v)


def replicator_prefix(runtime: dict | None) -> str:
    """The brokers' replicatorPrefix (runtime configuration), else Pulsar's default."""
    value = (runtime or {}).get(REPLICATOR_PREFIX_KEY)
    return value if isinstance(value, str) and value else DEFAULT_REPLICATOR_PREFIX


def partitions_of(admin, topic: str | None, namespace: str | None) -> list[str]:
    """The partitions to look at: the topic's (or the topic itself), or the namespace's user topics."""
    if topic:
        return admin.topic_partitions(topic)
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


def partition_report(
    admin,
    partition: str,
    holders: list[dict],
    now_ms: int,
    strict: bool = False,
    prefix=lambda: DEFAULT_REPLICATOR_PREFIX,
) -> dict:
    """prefix: called only when the partition is held and has cursors (it may cost requests); None: the
    broker's replicators are not held by transactions."""
    report = {"topic": partition, "held": False}
    try:
        internal, stats = admin.partition_stats(partition)
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
            "state": state,
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
    if internal.get("cursors") and prefix() is not None:
        found = replicators(internal, report["maxReadPosition"], prefix())
        report["replicators"] = [r for r in found if r["entriesHeld"] > 0]

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
                "ageMs": max(now_ms - opened, 0) if isinstance(opened, int) else None,
                "timeoutMs": meta.get("timeoutAt"),  # Pulsar's timeoutAt is the timeout, a duration
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
    prefix = _once(lambda: _held_replicators_prefix(admin))
    reports = [partition_report(admin, p, holders.get(p, []), now_ms, strict, prefix) for p in partitions]
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


def _held_replicators_prefix(admin) -> str | None:
    """The replicators' cursor prefix, or None where the broker's replicators do not wait for transactions."""
    try:
        version = admin.version()
    except PulsarTxnError:
        version = None
    if not replicators_wait_for_transactions([version]):
        return None
    return replicator_prefix(_runtime(admin))


def _runtime(admin) -> dict:
    """The brokers' runtime configuration, or {} where it cannot be read (it needs a superuser)."""
    try:
        return admin.runtime_config() or {}
    except PulsarTxnError:
        return {}


def _once(fn):
    """fn's answer, asked for on first use only."""
    kept: list = []

    def get():
        if not kept:
            kept.append(fn())
        return kept[0]

    return get
