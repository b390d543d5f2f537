"""The transaction buffer's admin answers, in Pulsar's JSON shapes (Pulsar's TransactionBufferStats and
TransactionBufferInternalStats in pulsar-client-admin-api)."""

from __future__ import annotations

from pulsar_txn_cli.engine.buffer.aborts import SEGMENT


def transaction_buffer_stats(buffer, low_water_marks: bool = False, segment_stats: bool = False) -> dict:
    """TransactionBufferStats as a 4.x broker answers it (null fields are left out, as Jackson does).

    lowWaterMarks only when asked; segmentsStats only with segmented snapshots (its segmentStats
    list only when asked).
    """
    stats = {
        "state": buffer.state,
        "maxReadPosition": str(buffer.max_read_position),
        "lastSnapshotTimestamps": buffer.last_snapshot_timestamp,
    }
    if low_water_marks:
        stats["lowWaterMarks"] = {str(tc): mark for tc, mark in sorted(buffer.low_water_marks.items())}
    stats["ongoingTxnSize"] = len(buffer.ongoing)
    stats["recoverStartTime"] = buffer.recover_start_time
    stats["recoverEndTime"] = buffer.recover_end_time
    if buffer.aborts.kind == SEGMENT:
        stats["segmentsStats"] = buffer.aborts.snapshot_stats(segment_stats)
    stats["totalAbortedTransactions"] = len(buffer.aborts)
    stats["snapshotType"] = buffer.aborts.kind
    return stats


NO_COMPACTED_LEDGER = {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False, "underReplicated": False}


def transaction_buffer_internal_stats(buffer, metadata: bool = False) -> dict:
    """TransactionBufferInternalStats: the snapshot system topics this buffer uses."""
    topics = buffer.snapshot_topics
    stats = {"snapshotType": buffer.aborts.kind}
    if buffer.aborts.kind == SEGMENT:
        stats["segmentInternalStats"] = _system_topic(topics.segments, metadata)
        stats["segmentIndexInternalStats"] = _system_topic(topics.indexes, metadata)
    else:
        stats["singleSnapshotSystemTopicInternalStats"] = _system_topic(topics.single, metadata)
    return stats


def _system_topic(log, metadata: bool) -> dict:
    """SnapshotSystemTopicInternalStats {managedLedgerName, managedLedgerInternalStats}.

    A 4.x broker names the system topic here by its local name (e.g. __transaction_buffer_snapshot).
    """
    internal = log.internal_stats(metadata) if hasattr(log, "internal_stats") else _memory_internal_stats(log)
    # A system topic's stats are a topic's PersistentTopicInternalStats: schema and compaction too.
    internal.setdefault("schemaLedgers", [])
    internal.setdefault("compactedLedger", dict(NO_COMPACTED_LEDGER))
    return {"managedLedgerName": log.name.rsplit("/", 1)[-1], "managedLedgerInternalStats": internal}


def _memory_internal_stats(log) -> dict:
    """A minimal ManagedLedgerInternalStats for in-memory logs (tests without the engine)."""
    entries = log.ledger_entries()
    return {
        "entriesAddedCounter": sum(n for _, n in entries),
        "numberOfEntries": sum(n for _, n in entries),
        "lastConfirmedEntry": str(log.last_confirmed()),
        "ledgers": [{"ledgerId": lid, "entries": n} for lid, n in entries],
        "cursors": {},
    }
