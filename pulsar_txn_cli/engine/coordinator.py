"""Transaction coordinators: MLTransactionMetadataStore + MLTransactionLogImpl on the engine.

Each TC owns the managed ledger `pulsar/system/persistent/__transaction_log_{id}` (cursor
`transaction.subscription`). Opening a TC reads the configuration once (whether it batches,
and whether its cursor deletes at batch-index level: on while batching, or with
acknowledgmentAtBatchIndexLevelEnabled) and replays the log. Attaching to a TC that is already
open (a later CLI invocation of the same running broker) replays into memory only.
"""

from __future__ import annotations

import heapq

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
from pulsar_txn_cli.engine.ledger import BatchedPosition, ManagedLedger
from pulsar_txn_cli.engine.writer import BufferedWriter, open_log
from pulsar_txn_cli.errors import EngineError
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, TC_BATCH_KEY, TC_CURSOR, TC_LOG_PREFIX

NEW, ADD_PARTITION, ADD_SUBSCRIPTION, UPDATE = 0, 1, 2, 3
OPEN, COMMITTING, COMMITTED, ABORTING, ABORTED = 0, 1, 2, 3, 4
STATUS = {OPEN: "OPEN", COMMITTING: "COMMITTING", COMMITTED: "COMMITTED", ABORTING: "ABORTING", ABORTED: "ABORTED"}
FINAL = (COMMITTED, ABORTED)

_Record = tc_pb2.TransactionMetadataEntry


class CoordinatorNotFound(EngineError):
    def __init__(self, message: str, tc_id=None):
        super().__init__(message)
        self.tc_id = tc_id


class TransactionNotFound(EngineError):
    pass


class InvalidTxnStatus(EngineError):
    pass


def tc_log_name(tc_id: int) -> str:
    return f"{TC_LOG_PREFIX}{tc_id}"


class TxnMeta:
    __slots__ = (
        "most",
        "least",
        "status",
        "timeout_ms",
        "start",
        "last_mod",
        "partitions",
        "subscriptions",
        "positions",
        "owner",
    )

    def __init__(self, most, least, timeout_ms, start, owner=""):
        self.most = most
        self.least = least
        self.status = OPEN
        self.timeout_ms = timeout_ms
        self.start = start
        self.last_mod = start
        self.partitions: list[str] = []
        self.subscriptions: list[tuple[str, str]] = []
        self.positions: list[BatchedPosition] = []
        self.owner = owner

    @property
    def txn_id(self) -> str:
        return f"({self.most},{self.least})"

    @property
    def timeout_at(self) -> int:
        return self.start + self.timeout_ms


def _recorded(cfg: dict) -> dict:
    """What a TC load reads from the configuration once and keeps while the broker runs."""
    batch = bool(cfg[TC_BATCH_KEY])
    return dict(
        batchEnabled=batch,
        maxRecords=cfg["transactionLogBatchedWriteMaxRecords"],
        maxSize=cfg["transactionLogBatchedWriteMaxSize"],
        maxDelayMs=cfg["transactionLogBatchedWriteMaxDelayInMillis"],
        # MLTransactionLogImpl forces batch-index deletion on while batching (MLTransactionLogImpl's constructor).
        batchIndexDeletion=batch or bool(cfg[BATCH_INDEX_KEY]),
        endedUndeletable=[],  # a reopened TC replays them as open again (the batch-index deletion stall)
    )


def decode_tc_entry(data: bytes) -> list:
    """MLTransactionLogImpl.deserializeEntry: a batch (0x0E01 prefix) or one record."""
    return codec.decode_entry(data, codec.TC_LOG).records


class Coordinator:
    def __init__(self, engine, tc_id: int):
        self.engine = engine
        self.tc_id = tc_id
        self.name = tc_log_name(tc_id)
        self.ml = ManagedLedger.get(engine.store, engine.clock, self.name)
        self.txns: dict[int, TxnMeta] = {}
        self.sequence = int(self.ml.properties.get("max_local_txn_id", -1))
        self.state = "None"
        self.cursor = None
        self.writer: BufferedWriter | None = None
        self._timeouts: list = []
        self.replayed_records = 0
        self.orphans_deleted = 0
        self.recovering_since: int | None = None  # a recovery that does not finish (engine/faults.py)

    # ---------------------------------------------------------------- open / replay

    def open(self, reopen: bool) -> None:
        """reopen=True is a TC load on a broker (new ledger, config read); False attaches."""
        self.writer = open_log(self, reopen, _recorded, self.engine.metrics.tc)
        self.state = "Ready"

    def _open_cursor(self) -> None:
        self.cursor = self.ml.open_cursor(TC_CURSOR, batch_index_deletion=self.ml.owner["batchIndexDeletion"])

    def _replay(self) -> None:
        """TransactionLogReplayer: every live record, batched or not, in log order."""
        self.txns = {}
        self._timeouts = []
        self.replayed_records = 0
        # Ended transactions whose records could not be deleted (the batch-index deletion stall, docs/real-broker-findings.md): a running broker has
        # forgotten them, so attaching to it must not bring them back; only a reopen does.
        self._ended = set(self.ml.owner.get("endedUndeletable") or ())
        cursor = self.cursor
        for lid, eid, data in self.ml.read_after(cursor.mark_delete):
            key = (lid, eid)
            if key in cursor.deleted:
                continue
            records = decode_tc_entry(data)
            if len(records) == 1:
                self._handle(BatchedPosition(lid, eid), records[0])
                continue
            bits = cursor.deleted_batch_bits(key)
            size = len(records)
            for i, record in enumerate(records):
                if bits is not None and not (bits >> i) & 1:
                    continue  # this batch index was deleted
                self._handle(BatchedPosition(lid, eid, size, i), record)
        for meta in self.txns.values():
            if meta.status == OPEN:
                heapq.heappush(self._timeouts, (meta.timeout_at, meta.least))

    def _handle(self, pos: BatchedPosition, r) -> None:
        self.replayed_records += 1
        least = r.txnid_least_bits
        if r.max_local_txn_id > self.sequence:
            self.sequence = r.max_local_txn_id
        op = r.metadata_op
        if op == NEW:
            if least in self._ended:
                return
            meta = TxnMeta(r.txnid_most_bits, least, r.timeout_ms, r.start_time, r.owner)
            meta.last_mod = r.last_modification_time
            meta.positions.append(pos)
            self.txns[least] = meta
            return
        meta = self.txns.get(least)
        if meta is None:
            # A record of a transaction that is gone: Pulsar deletes it on replay.
            self.cursor.delete([pos])
            self.orphans_deleted += 1
            return
        meta.positions.append(pos)
        meta.last_mod = r.last_modification_time
        if op == ADD_PARTITION:
            meta.partitions.extend(p for p in r.partitions if p not in meta.partitions)
        elif op == ADD_SUBSCRIPTION:
            for s in r.subscriptions:
                pair = (s.topic, s.subscription)
                if pair not in meta.subscriptions:
                    meta.subscriptions.append(pair)
        elif op == UPDATE:
            meta.status = r.new_status
            if meta.status in FINAL:
                self._forget(meta)

    def _forget(self, meta) -> None:
        """An ended transaction: delete its records and drop it (remembering undeletable ones)."""
        if self.cursor.delete(meta.positions):
            self._ended.add(meta.least)
            self.ml.set_owner_state(endedUndeletable=sorted(self._ended))
        self.txns.pop(meta.least, None)

    def close(self) -> None:
        if self.writer is not None:
            self.writer.close()
        self.state = "Close"

    # ---------------------------------------------------------------- operations

    def _ready(self, failed) -> bool:
        if self.state != "Ready":
            _fail(failed, EngineError(f"transaction coordinator {self.tc_id} is not ready ({self.state})"))
            return False
        return True

    def new_transaction(self, timeout_ms: int, callback, failed=None, owner: str = "") -> None:
        """NEW; callback(least) once the record is durable."""
        if not self._ready(failed):
            return
        self.sequence += 1
        least = self.sequence
        self.ml.properties["max_local_txn_id"] = str(least)
        self.engine.store.dirty(self.ml)
        now = self.engine.clock.now_ms
        # Records are built field by field in each operation: a shared helper's **fields cost more than the record.
        record = _Record(
            metadata_op=NEW,
            txnid_most_bits=self.tc_id,
            txnid_least_bits=least,
            last_modification_time=now,
            max_local_txn_id=self.sequence,
            timeout_ms=timeout_ms,
            start_time=now,
        )
        if owner:
            record.owner = owner
        data = record.SerializeToString()

        def done(pos):
            meta = TxnMeta(self.tc_id, least, timeout_ms, now, owner)
            meta.positions.append(pos)
            self.txns[least] = meta
            heapq.heappush(self._timeouts, (meta.timeout_at, least))
            callback(least)

        self.writer.add(data, done, failed)

    def _open_txn(self, least: int, failed) -> TxnMeta | None:
        meta = self.txns.get(least)
        if meta is None:
            _fail(failed, TransactionNotFound(f"transaction ({self.tc_id},{least}) not found"))
            return None
        if meta.status != OPEN:
            _fail(failed, InvalidTxnStatus(f"transaction {meta.txn_id} is {STATUS[meta.status]}, expected OPEN"))
            return None
        return meta

    def add_partitions(self, least: int, partitions: list[str], callback, failed=None) -> None:
        if not self._ready(failed):
            return
        meta = self._open_txn(least, failed)
        if meta is None:
            return
        data = _Record(
            metadata_op=ADD_PARTITION,
            txnid_most_bits=self.tc_id,
            txnid_least_bits=least,
            last_modification_time=self.engine.clock.now_ms,
            max_local_txn_id=self.sequence,
            partitions=partitions,
        ).SerializeToString()

        def done(pos):
            meta.positions.append(pos)
            known = meta.partitions
            for p in partitions:
                if p not in known:
                    known.append(p)
            callback(pos)

        self.writer.add(data, done, failed)

    def add_subscriptions(self, least: int, subscriptions: list[tuple[str, str]], callback, failed=None) -> None:
        if not self._ready(failed):
            return
        meta = self._open_txn(least, failed)
        if meta is None:
            return
        record = _Record(
            metadata_op=ADD_SUBSCRIPTION,
            txnid_most_bits=self.tc_id,
            txnid_least_bits=least,
            last_modification_time=self.engine.clock.now_ms,
            max_local_txn_id=self.sequence,
        )
        for topic, sub in subscriptions:
            record.subscriptions.add(topic=topic, subscription=sub)
        data = record.SerializeToString()

        def done(pos):
            meta.positions.append(pos)
            for pair in subscriptions:
                if pair not in meta.subscriptions:
                    meta.subscriptions.append(tuple(pair))
            callback(pos)

        self.writer.add(data, done, failed)

    def update_status(self, least: int, new_status: int, expected: int, callback, failed=None) -> None:
        """UPDATE expected -> new; at COMMITTED/ABORTED every record of the txn is deleted."""
        if not self._ready(failed):
            return
        meta = self.txns.get(least)
        if meta is None:
            _fail(failed, TransactionNotFound(f"transaction ({self.tc_id},{least}) not found"))
            return
        if meta.status != expected:
            _fail(
                failed,
                InvalidTxnStatus(f"transaction {meta.txn_id} is {STATUS[meta.status]}, expected {STATUS[expected]}"),
            )
            return
        data = _Record(
            metadata_op=UPDATE,
            txnid_most_bits=self.tc_id,
            txnid_least_bits=least,
            last_modification_time=self.engine.clock.now_ms,
            max_local_txn_id=self.sequence,
            expected_status=expected,
            new_status=new_status,
        ).SerializeToString()

        def done(pos):
            meta.positions.append(pos)
            meta.status = new_status
            meta.last_mod = self.engine.clock.now_ms
            if new_status in FINAL:
                self._forget(meta)
            callback(pos)

        self.writer.add(data, done, failed)

    def due_timeouts(self, now_ms: int) -> list[int]:
        """Open transactions whose timeout has passed (the TC's timeout tracker)."""
        out = []
        heap = self._timeouts
        while heap and heap[0][0] <= now_ms:
            _, least = heapq.heappop(heap)
            meta = self.txns.get(least)
            if meta is not None and meta.status == OPEN:
                out.append(least)
        return out

    # ---------------------------------------------------------------- admin views

    def stats(self) -> dict:
        """TransactionCoordinatorStats."""
        o = self.ml.owner
        return {
            "state": self.state,
            "leastSigBits": max(self.sequence, 0) if self.sequence >= 0 else 0,
            "lowWaterMark": self.low_water_mark(),
            "ongoingTxnSize": len(self.txns),
            "recoverStartTime": self.recovering_since or o.get("recoverStartTime", 0),
            "recoverEndTime": 0 if self.recovering_since else o.get("recoverEndTime", 0),
        }

    def low_water_mark(self) -> int:
        return (min(self.txns) - 1) if self.txns else max(self.sequence, 0)

    def internal_stats(self, metadata: bool = False) -> dict:
        return {
            "transactionLogStats": {
                "managedLedgerName": self.name,
                "managedLedgerInternalStats": self.ml.internal_stats(metadata),
            }
        }

    def metadata(self, least: int) -> dict | None:
        meta = self.txns.get(least)
        return transaction_metadata(self.engine, meta) if meta else None


def transaction_metadata(engine, meta: TxnMeta) -> dict:
    """TransactionMetadata, as the transactionMetadata call (calls.TRANSACTION_METADATA) returns it."""
    acked: dict = {}
    for topic, sub in meta.subscriptions:
        store = engine.pending_ack_if_exists(topic, sub)
        cumulative = store.cumulative_ack_position(meta.most, meta.least) if store else None
        acked.setdefault(topic, {})[sub] = {"cumulativeAckPosition": cumulative}
    return {
        "txnId": meta.txn_id,
        "status": STATUS[meta.status],
        "openTimestamp": meta.start,
        "timeoutAt": meta.timeout_ms,
        "producedPartitions": {p: engine.buffers.in_buffer_stats(p, (meta.most, meta.least)) for p in meta.partitions},
        "ackedPartitions": acked,
    }


def _fail(failed, exc) -> None:
    if failed is not None:
        failed(exc)
