"""Pending-ack stores: MLPendingAckStore on the engine, one per subscription acking in transactions.

Managed ledger `{tenant}/{ns}/persistent/{topic}-{sub}__transaction_pending_ack`, cursor
`__pending_ack_state`. Records ACK / COMMIT / ABORT; the sparse log index
(maxAckPosition -> logPosition, lag from transactionPendingAckLogIndexMinLag) lets the store
mark-delete whole entries once the subscription's mark-delete passes them. Never per batch index.

The origin subscription is modelled minimally (the transaction buffer issue brings real topic
entries): it hands out consecutive message positions; a message counts as consumed once the
transaction that acked it ended (aborted acks are redelivered and acked outside a transaction),
and the subscription's mark-delete is the consumed prefix.
"""

from __future__ import annotations

import bisect

import orjson

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2
from pulsar_txn_cli.engine.ledger import BatchedPosition, ManagedLedger
from pulsar_txn_cli.engine.writer import BufferedWriter, open_log
from pulsar_txn_cli.names import pending_ack_managed_ledger
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, PENDING_ACK_BATCH_KEY, PENDING_ACK_CURSOR

ACK, COMMIT, ABORT = 1, 2, 3
INDIVIDUAL, CUMULATIVE = 0, 1

_Record = pa_pb2.PendingAckMetadataEntry


def _recorded(cfg: dict) -> dict:
    """What a pending-ack store's load reads from the configuration once and keeps while the broker runs."""
    return dict(
        batchEnabled=bool(cfg[PENDING_ACK_BATCH_KEY]),
        maxRecords=cfg["transactionPendingAckBatchedWriteMaxRecords"],
        maxSize=cfg["transactionPendingAckBatchedWriteMaxSize"],
        maxDelayMs=cfg["transactionPendingAckBatchedWriteMaxDelayInMillis"],
        indexMinLag=cfg["transactionPendingAckLogIndexMinLag"],
        # The provider never enables batch-index deletion for this ledger (MLPendingAckStoreProvider).
        batchIndexDeletion=bool(cfg[BATCH_INDEX_KEY]),
    )


def decode_pa_entry(data: bytes) -> list:
    """MLPendingAckStore.deserializeEntry: a batch (0x0E01 prefix) or one record."""
    return codec.decode_entry(data, codec.PENDING_ACK_LOG).records


class LogIndexLagBackoff:
    """LogIndexLagBackoff(minLag, Long.MAX_VALUE, exponent 1): the lag grows with the index size."""

    def __init__(self, min_lag: int):
        self.min_lag = max(int(min_lag), 1)

    def next(self, index_count: int) -> int:
        return self.min_lag if index_count <= 0 else max(self.min_lag, self.min_lag * index_count)


class Subscription:
    """The origin subscription's consumption, enough to drive clearUselessLogData."""

    def __init__(self, store, topic: str, name: str):
        self.store = store
        self.topic = topic
        self.name = name
        row = store.db.execute("SELECT state FROM subscriptions WHERE topic=? AND name=?", (topic, name)).fetchone()
        state = orjson.loads(row[0]) if row else {}
        self.ledger_id = state.get("ledgerId")
        self.next = state.get("next", 0)
        self.md = state.get("md", -1)
        self.ended: set[int] = set(state.get("ended", []))
        self.exists = row is not None

    def save(self) -> None:
        state = {"ledgerId": self.ledger_id, "next": self.next, "md": self.md, "ended": sorted(self.ended)}
        self.store.db.execute(
            "INSERT INTO subscriptions(topic, name, state) VALUES(?, ?, ?) ON CONFLICT(topic, name) DO UPDATE SET state=excluded.state",
            (self.topic, self.name, orjson.dumps(state).decode()),
        )
        self.exists = True

    def take(self, count: int) -> list[tuple[int, int]]:
        first = self.next
        self.next += count
        self.store.dirty(self)
        return [(self.ledger_id, n) for n in range(first, first + count)]

    def consumed(self, positions) -> bool:
        """Mark messages consumed; returns True when the mark-delete moved."""
        for _, n in positions:
            if n > self.md:
                self.ended.add(n)
        moved = False
        while self.md + 1 in self.ended:
            self.ended.discard(self.md + 1)
            self.md += 1
            moved = True
        self.store.dirty(self)
        return moved

    @property
    def mark_delete(self) -> tuple[int, int]:
        return (self.ledger_id, self.md)


class PendingAckStore:
    def __init__(self, engine, topic: str, sub: str):
        self.engine = engine
        self.topic = topic
        self.sub_name = sub
        self.name = pending_ack_managed_ledger(topic, sub)
        self.ml = ManagedLedger.get(engine.store, engine.clock, self.name)
        self.subscription = Subscription(engine.store, topic, sub)
        self.acks: dict[tuple[int, int], list[tuple[int, tuple[int, int]]]] = {}  # txn -> [(ackType, pos)]
        self.index: list[tuple[tuple[int, int], BatchedPosition]] = []  # sorted by maxAckPosition
        self.state = "None"
        self.cursor = None
        self.writer: BufferedWriter | None = None
        self._lag = 0
        self._max_ack = None
        self._backoff = LogIndexLagBackoff(500)
        self._max_lag = 500
        self._pending: list = []
        self.recovering_since: int | None = None  # a recovery that does not finish (engine/faults.py)

    # ---------------------------------------------------------------- open / replay

    def open(self, reopen: bool) -> None:
        engine = self.engine
        with engine.store.tx():
            if self.subscription.ledger_id is None:
                self.subscription.ledger_id = engine.topic_ledger(self.topic)
                engine.store.dirty(self.subscription)
            self.writer = open_log(self, reopen, _recorded, engine.metrics.pending_ack)
        self.state = "Ready"

    def _open_cursor(self) -> None:
        self.cursor = self.ml.open_cursor(PENDING_ACK_CURSOR, batch_index_deletion=self.ml.owner["batchIndexDeletion"])
        self._backoff = LogIndexLagBackoff(self.ml.owner.get("indexMinLag", 500))

    def _replay(self) -> None:
        """Replay: every record (no batch-index filtering); index once per entry."""
        self.acks = {}
        self.index = []
        self._lag = 0
        self._max_ack = None
        self._max_lag = self._backoff.next(0)
        cursor = self.cursor
        for lid, eid, data in self.ml.read_after(cursor.mark_delete):
            if (lid, eid) in cursor.deleted:
                continue
            records = decode_pa_entry(data)
            for record in records:
                self._apply(record)
            self._index(BatchedPosition(lid, eid), records)

    def _apply(self, r) -> None:
        txn = (r.txnid_most_bits, r.txnid_least_bits)
        op = r.pending_ack_op
        if op == ACK:
            entry = self.acks.setdefault(txn, [])
            for p in r.pending_ack_metadata:
                entry.append((r.ack_type, (p.ledgerId, p.entryId)))
        else:
            self.acks.pop(txn, None)

    def _index(self, log_pos: BatchedPosition, records) -> None:
        """handleMetadataEntry: track the max acked position; index it every maxIndexLag records."""
        for r in records:
            if r.pending_ack_op == ACK:
                for p in r.pending_ack_metadata:
                    key = (p.ledgerId, p.entryId)
                    if self._max_ack is None or key > self._max_ack:
                        self._max_ack = key
        self._lag += len(records)
        if self._lag >= self._max_lag and self._max_ack is not None:
            keys = [k for k, _ in self.index]
            i = bisect.bisect_left(keys, self._max_ack)
            if i < len(self.index) and self.index[i][0] == self._max_ack:
                self.index[i] = (self._max_ack, log_pos)
            else:
                self.index.insert(i, (self._max_ack, log_pos))
            self._max_ack = None
            self._lag = 0

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.state = "Close"

    # ---------------------------------------------------------------- operations

    def take_messages(self, count: int) -> list[tuple[int, int]]:
        return self.subscription.take(count)

    def ack(self, most: int, least: int, positions, callback, failed=None, ack_type: int = INDIVIDUAL) -> None:
        record = _Record(pending_ack_op=ACK, ack_type=ack_type, txnid_most_bits=most, txnid_least_bits=least)
        add = record.pending_ack_metadata.add
        for lid, eid in positions:
            add(ledgerId=lid, entryId=eid)
        acked = [(ack_type, (p.ledgerId, p.entryId)) for p in record.pending_ack_metadata]
        self._append(record, (most, least), acked, callback, failed)

    def end(self, most: int, least: int, commit: bool, callback, failed=None) -> None:
        record = _Record(pending_ack_op=COMMIT if commit else ABORT, txnid_most_bits=most, txnid_least_bits=least)
        self._append(record, (most, least), None, callback, failed)

    def _append(self, record, txn, acked, callback, failed) -> None:
        """acked: the ACK record's (ackType, position) pairs; None for a COMMIT or ABORT record."""
        data = record.SerializeToString()

        def done(pos):
            # What _apply(record) does, from the values at hand rather than the protobuf's fields.
            if acked is not None:
                ended = None
                entry = self.acks.get(txn)
                if entry is None:
                    self.acks[txn] = list(acked)
                else:
                    entry += acked
            else:
                ended = [p for _, p in self.acks.pop(txn, ())]
            # With batching the index moves once per entry, at the batch's last record.
            self._pending.append(record)
            if pos.batch_size is None or pos.batch_index == pos.batch_size - 1:
                self._index(pos, self._pending)
                self._pending = []
            if ended is not None and self.subscription.consumed(ended):
                self.clear_useless_log_data()
            callback(pos)

        self.writer.add(data, done, failed)

    def clear_useless_log_data(self) -> None:
        """Mark-delete the log up to the last index point behind the subscription's mark-delete."""
        md = self.subscription.mark_delete
        delete_to = None
        while self.index and self.index[0][0] <= md:
            delete_to = self.index.pop(0)[1]
        if delete_to is not None:
            self._max_lag = self._backoff.next(len(self.index))
            self.cursor.mark_delete_to(delete_to)

    # ---------------------------------------------------------------- admin views

    def stats(self, low_water_marks: bool = False) -> dict:
        out = {
            "state": self.state,
            "ongoingTxnSize": len(self.acks),
            "recoverStartTime": self.recovering_since or self.ml.owner.get("recoverStartTime", 0),
            "recoverEndTime": 0 if self.recovering_since else self.ml.owner.get("recoverEndTime", 0),
        }
        if low_water_marks:
            out["lowWaterMarks"] = {}
        return out

    def internal_stats(self, metadata: bool = False) -> dict:
        return {
            "pendingAckLogStats": {
                "managedLedgerName": self.name,
                "managedLedgerInternalStats": self.ml.internal_stats(metadata),
            }
        }

    def cumulative_ack_position(self, most: int, least: int) -> str | None:
        for ack_type, (lid, eid) in self.acks.get((most, least), []):
            if ack_type == CUMULATIVE:
                return f"{lid}:{eid}"
        return None

    def position_state(self, lid: int, eid: int) -> str:
        if (lid, eid) <= self.subscription.mark_delete:
            return "MarkDelete"
        for acks in self.acks.values():
            if any(p == (lid, eid) for _, p in acks):
                return "PendingAck"
        return "NotInPendingAck"
