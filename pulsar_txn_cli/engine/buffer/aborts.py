"""The aborted-transaction map in Pulsar's two shipped forms (AbortedTxnProcessor).

`SingleAbortedTxns` keeps every aborted id with its abort marker's position and writes them
all in one `TransactionBufferSnapshot`. `SegmentedAbortedTxns` (PIP-178 as shipped) seals
every `capacity` aborted ids into a `TransactionBufferSnapshotSegment`, written before the
`TransactionBufferSnapshotIndexes` that lists it; a regular snapshot only rewrites the index.
Both keep ids in abort-marker order, so pruning after ledger trimming is FIFO.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.names import Position, TxnID
from pulsar_txn_cli.engine.buffer.snapshots import (
    SystemTopicStore,
    TransactionBufferSnapshot,
    TransactionBufferSnapshotIndex,
    TransactionBufferSnapshotIndexes,
    TransactionBufferSnapshotIndexesMetadata,
    TransactionBufferSnapshotSegment,
    abort_list,
    segment_key,
    txn_data,
)
from pulsar_txn_cli.errors import EngineError

SINGLE = "Single"
SEGMENT = "Segment"


def segment_capacity(segment_size: int, topic_name: str) -> int:
    """Aborted ids per segment, computed as SnapshotSegmentAbortedTxnProcessorImpl does."""
    return max(1, (segment_size - 8 - len(topic_name)) // 3)


@dataclass
class Recovered:
    """What a snapshot gave back: where replay starts, and whether it must start at the beginning."""

    max_read_position: Position | None
    full_replay: bool = False
    note: str | None = None


class SingleAbortedTxns:
    kind = SINGLE

    def __init__(self, topic_name: str, store: SystemTopicStore):
        self.topic_name = topic_name
        self.store = store
        self.aborts: dict[TxnID, Position] = {}

    def put(self, txn: TxnID, marker: Position) -> None:
        self.aborts.setdefault(txn, marker)

    def contains(self, txn: TxnID) -> bool:
        return txn in self.aborts

    def __len__(self) -> int:
        return len(self.aborts)

    def trim(self, ledger_exists) -> int:
        """Forget the oldest ids whose abort marker's ledger is gone; nothing of theirs is left to filter."""
        removed = 0
        while self.aborts:
            txn, position = next(iter(self.aborts.items()))
            if ledger_exists(position.ledger):
                break
            del self.aborts[txn]
            removed += 1
        return removed

    def take_snapshot(self, max_read: Position) -> None:
        snapshot = TransactionBufferSnapshot(self.topic_name, max_read.ledger, max_read.entry, abort_list(self.aborts))
        self.store.write(self.topic_name, snapshot)

    def recover(self, ledger_exists) -> Recovered:
        snapshot = self.store.latest(self.topic_name)
        if snapshot is None:
            return Recovered(None)
        self.aborts = {
            TxnID(a.txnIdMostBits, a.txnIdLeastBits): Position(a.ledgerId, a.entryId) for a in snapshot.aborts
        }
        return Recovered(Position(snapshot.maxReadPositionLedgerId, snapshot.maxReadPositionEntryId))

    def reset(self) -> None:
        self.aborts = {}

    def snapshot_stats(self, segment_stats: bool = False) -> None:
        return None


class SegmentedAbortedTxns:
    kind = SEGMENT

    def __init__(
        self,
        topic_name: str,
        segments: SystemTopicStore,
        indexes: SystemTopicStore,
        segment_size: int,
        single_store: SystemTopicStore | None = None,
    ):
        self.topic_name = topic_name
        self.single_store = single_store
        self.segments = segments
        self.indexes_store = indexes
        self.capacity = segment_capacity(segment_size, topic_name)
        self.unsealed: list[TxnID] = []
        self.sealed: dict[TxnID, int] = {}  # id -> sequence id of its segment
        self.indexes: dict[int, TransactionBufferSnapshotIndex] = {}  # in abort-marker order
        self.segment_txns: dict[int, list[TxnID]] = {}
        self.next_sequence = 0
        self.last_metadata: TransactionBufferSnapshotIndexesMetadata | None = None
        self.last_segment_timestamp = 0  # lastTookSnapshotSegmentTimestamp

    def put(self, txn: TxnID, marker: Position) -> None:
        if self.contains(txn):
            return  # replay after recovery sees markers a segment already holds
        self.unsealed.append(txn)
        if len(self.unsealed) >= self.capacity:
            self._seal(marker)

    def contains(self, txn: TxnID) -> bool:
        return txn in self.sealed or txn in self.unsealed

    def __len__(self) -> int:
        return len(self.sealed) + len(self.unsealed)

    def _seal(self, marker: Position) -> None:
        """Write the segment, then the index naming it (a crash in between leaves an orphan segment)."""
        sequence = self.next_sequence
        self.next_sequence += 1
        txns, self.unsealed = self.unsealed, []
        segment = TransactionBufferSnapshotSegment(
            self.topic_name, sequence, marker.ledger, marker.entry, txn_data(txns)
        )
        where = self.segments.write(segment_key(self.topic_name, sequence), segment)
        self.last_segment_timestamp = self.segments.clock()
        index = TransactionBufferSnapshotIndex(sequence, marker.ledger, marker.entry, where.ledger, where.entry)
        self._add_segment(index, txns)
        # Like Pulsar, the index keeps the last regular snapshot's maxReadPosition and unsealed ids.
        self._write_indexes(self.last_metadata)

    def _add_segment(self, index: TransactionBufferSnapshotIndex, txns: list[TxnID]) -> None:
        self.indexes[index.sequenceID] = index
        self.segment_txns[index.sequenceID] = txns
        for txn in txns:
            self.sealed[txn] = index.sequenceID

    def _write_indexes(self, metadata) -> None:
        indexes = TransactionBufferSnapshotIndexes(self.topic_name, list(self.indexes.values()), metadata)
        self.indexes_store.write(self.topic_name, indexes)

    def trim(self, ledger_exists) -> int:
        """Delete the oldest segments whose last abort marker's ledger is gone (FIFO)."""
        removed = 0
        for sequence, index in list(self.indexes.items()):
            if ledger_exists(index.abortedMarkLedgerID):
                break
            for txn in self.segment_txns.pop(sequence):
                self.sealed.pop(txn, None)
                removed += 1
            del self.indexes[sequence]
            self.segments.write(segment_key(self.topic_name, sequence), None)  # delete, then re-index
            self._write_indexes(self.last_metadata)
        return removed

    def take_snapshot(self, max_read: Position) -> None:
        self.last_metadata = TransactionBufferSnapshotIndexesMetadata(
            max_read.ledger, max_read.entry, txn_data(self.unsealed)
        )
        self._write_indexes(self.last_metadata)

    def recover(self, ledger_exists) -> Recovered:
        indexes = self.indexes_store.latest(self.topic_name)
        if indexes is None:
            return self._recover_old_snapshot()
        dropped = False
        for index in sorted(indexes.indexList, key=lambda i: (i.abortedMarkLedgerID, i.abortedMarkEntryID)):
            self.next_sequence = max(self.next_sequence, index.sequenceID + 1)
            where = Position(index.segmentLedgerID, index.segmentEntryID)
            found = self.segments.read(where)
            segment = found[1] if found else None
            if segment is None or segment.sequenceId != index.sequenceID or segment.topicName != self.topic_name:
                if ledger_exists(index.abortedMarkLedgerID):
                    # Its aborted messages can still be read but nothing says which they are:
                    # Pulsar fails the recovery (and the topic load) here, and so does the engine.
                    raise EngineError(
                        f"transaction buffer recovery of {self.topic_name} failed: snapshot segment {where} "
                        f"(sequence {index.sequenceID}) listed in the index is missing, and ledger "
                        f"{index.abortedMarkLedgerID} holding its abort markers still exists"
                    )
                dropped = True  # pruned: its abort markers' ledger is trimmed, nothing left to filter
                continue
            self._add_segment(index, [TxnID(a.mostSigBits, a.leastSigBits) for a in segment.aborts])
        metadata = indexes.snapshot or TransactionBufferSnapshotIndexesMetadata(-1, -1, [])
        self.last_metadata = metadata
        self.unsealed = [
            t for t in (TxnID(a.mostSigBits, a.leastSigBits) for a in metadata.aborts) if t not in self.sealed
        ]
        if dropped:
            self._write_indexes(metadata)  # like Pulsar: rewrite the index without the invalid entries
        if indexes.snapshot is None:
            return Recovered(
                None, full_replay=True, note="the index has no snapshot metadata; replaying the whole topic"
            )
        return Recovered(
            Position(metadata.maxReadPositionLedgerId, metadata.maxReadPositionEntryId),
            note="dropped index entries of pruned segments" if dropped else None,
        )

    def _recover_old_snapshot(self) -> Recovered:
        """No index yet: start from a v1 single snapshot if there is one (enabling segments later)."""
        if self.single_store is None:
            return Recovered(None)
        snapshot = self.single_store.latest(self.topic_name)
        if snapshot is None:
            return Recovered(None)
        self.unsealed = [TxnID(a.txnIdMostBits, a.txnIdLeastBits) for a in snapshot.aborts]
        return Recovered(
            Position(snapshot.maxReadPositionLedgerId, snapshot.maxReadPositionEntryId),
            note="recovered from a single (v1) snapshot",
        )

    def reset(self) -> None:
        """Forget everything but the sequence counter (new segments must not reuse a key)."""
        self.unsealed, self.sealed, self.indexes, self.segment_txns = [], {}, {}, {}

    def snapshot_stats(self, segment_stats: bool = False) -> dict:
        """SegmentsStats (segmentStats, one entry per segment, only when asked)."""
        stats = {
            "segmentsSize": len(self.indexes),
            "currentSegmentCapacity": self.capacity,
            "unsealedAbortTxnIDSize": len(self.unsealed),
            "lastTookSnapshotSegmentTimestamp": self.last_segment_timestamp,
        }
        if segment_stats:
            stats["segmentStats"] = [
                {
                    "lastTxnID": str(self.segment_txns[seq][-1]),
                    "persistentPosition": f"{index.abortedMarkLedgerID}:{index.abortedMarkEntryID}",
                }
                for seq, index in self.indexes.items()
                if self.segment_txns.get(seq)
            ]
        return stats
