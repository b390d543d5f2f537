"""Transaction-buffer snapshots: the AVRO POJOs of Pulsar as dataclasses, and where they are kept.

Field names are Pulsar's (PIP-178's snapshot classes in
org.apache.pulsar.broker.transaction.buffer.metadata), so the JSON the engine stores reads like the
broker's objects. Each snapshot is one entry of a namespace system topic, stored as JSON
`{"key": ..., "schema": ..., "value": {...} | null}` (a real broker writes AVRO; the key is the
message key that topic compaction and the broker's table view use; a null value deletes the key).

- v1, single: `TransactionBufferSnapshot` on `__transaction_buffer_snapshot`, key = topic name.
- v2, segmented (PIP-178 as shipped): `TransactionBufferSnapshotSegment` on
  `__transaction_buffer_snapshot_segments`, one per sealed segment, and
  `TransactionBufferSnapshotIndexes` on `__transaction_buffer_snapshot_indexes`, key = topic name,
  which lists the segments and carries maxReadPosition and the unsealed aborted ids.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from typing import Iterator

import orjson

from pulsar_txn_cli.names import EARLIEST, Position, TxnID
from pulsar_txn_cli.errors import DataError

SNAPSHOT_TOPIC = "__transaction_buffer_snapshot"
SEGMENTS_TOPIC = "__transaction_buffer_snapshot_segments"
INDEXES_TOPIC = "__transaction_buffer_snapshot_indexes"


@dataclass
class AbortTxnMetadata:
    txnIdMostBits: int
    txnIdLeastBits: int
    ledgerId: int
    entryId: int


@dataclass
class TransactionBufferSnapshot:
    topicName: str
    maxReadPositionLedgerId: int
    maxReadPositionEntryId: int
    aborts: list[AbortTxnMetadata] = field(default_factory=list)


@dataclass
class TxnIDData:
    mostSigBits: int
    leastSigBits: int

    def __str__(self) -> str:
        return f"({self.mostSigBits},{self.leastSigBits})"


@dataclass
class TransactionBufferSnapshotIndex:
    sequenceID: int
    abortedMarkLedgerID: int
    abortedMarkEntryID: int
    segmentLedgerID: int
    segmentEntryID: int


@dataclass
class TransactionBufferSnapshotIndexesMetadata:
    maxReadPositionLedgerId: int
    maxReadPositionEntryId: int
    aborts: list[TxnIDData] = field(default_factory=list)


@dataclass
class TransactionBufferSnapshotIndexes:
    topicName: str
    indexList: list[TransactionBufferSnapshotIndex] = field(default_factory=list)
    snapshot: TransactionBufferSnapshotIndexesMetadata | None = None


@dataclass
class TransactionBufferSnapshotSegment:
    topicName: str
    sequenceId: int
    persistentPositionLedgerId: int
    persistentPositionEntryId: int
    aborts: list[TxnIDData] = field(default_factory=list)


def _fields(cls, doc: dict) -> dict:
    """Only the fields the class knows: Pulsar adds fields across versions."""
    names = cls.__dataclass_fields__
    return {k: v for k, v in doc.items() if k in names}


def _list(cls, items) -> list:
    return [cls(**_fields(cls, item)) for item in items or []]


def snapshot_from_dict(doc: dict) -> TransactionBufferSnapshot:
    value = _fields(TransactionBufferSnapshot, doc)
    value["aborts"] = _list(AbortTxnMetadata, doc.get("aborts"))
    return TransactionBufferSnapshot(**value)


def segment_from_dict(doc: dict) -> TransactionBufferSnapshotSegment:
    value = _fields(TransactionBufferSnapshotSegment, doc)
    value["aborts"] = _list(TxnIDData, doc.get("aborts"))
    return TransactionBufferSnapshotSegment(**value)


def indexes_from_dict(doc: dict) -> TransactionBufferSnapshotIndexes:
    value = _fields(TransactionBufferSnapshotIndexes, doc)
    value["indexList"] = _list(TransactionBufferSnapshotIndex, doc.get("indexList"))
    meta = doc.get("snapshot")
    if meta is not None:
        meta = dict(
            _fields(TransactionBufferSnapshotIndexesMetadata, meta), aborts=_list(TxnIDData, meta.get("aborts"))
        )
        meta = TransactionBufferSnapshotIndexesMetadata(**meta)
    value["snapshot"] = meta
    return TransactionBufferSnapshotIndexes(**value)


_DECODERS = {
    "TransactionBufferSnapshot": snapshot_from_dict,
    "TransactionBufferSnapshotSegment": segment_from_dict,
    "TransactionBufferSnapshotIndexes": indexes_from_dict,
}


def encode_entry(key: str, value, publish_time: int = 0) -> bytes:
    schema = type(value).__name__ if value is not None else None
    return orjson.dumps(
        {
            "key": key,
            "schema": schema,
            "publishTime": publish_time,
            "value": asdict(value) if value is not None else None,
        }
    )


def decode_entry(data: bytes, where: str = "?"):
    """(key, value or None) of one system-topic entry."""
    key, value, _ = decode_entry_timed(data, where)
    return key, value


def decode_entry_timed(data: bytes, where: str = "?"):
    """(key, value or None, publish time in ms) of one system-topic entry."""
    try:
        doc = orjson.loads(data)
        value = doc.get("value")
        if value is not None:
            value = _DECODERS[doc["schema"]](value)
        return doc["key"], value, int(doc.get("publishTime") or 0)
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"snapshot entry {where} cannot be read: {exc}") from None


def segment_key(topic_name: str, sequence_id: int) -> str:
    """The message key of a segment, one per (topic, sequence id), so compaction keeps the newest."""
    return f"multiple-{sequence_id}-{topic_name}"


class SystemTopicStore:
    """Snapshots on one system topic's log (any object with append/read/read_after)."""

    def __init__(self, log, clock=None):
        self.log = log
        self.clock = clock or (lambda: 0)  # stamps each entry's publishTime, in ms

    def write(self, key: str, value) -> Position:
        return self.log.append(encode_entry(key, value, self.clock()))

    def read(self, position: Position):
        data = self.log.read(position)
        return None if data is None else decode_entry(data, str(position))

    def entries(self) -> Iterator[tuple[Position, str, object, int]]:
        for position, data in self.log.read_after(EARLIEST):
            if data is not None:
                key, value, published = decode_entry_timed(data, str(position))
                yield position, key, value, published

    def latest_entry(self, key: str) -> tuple[object, int]:
        """(newest value for `key` or None when absent or deleted, its publish time), like a table view."""
        found, published = None, 0
        for _, entry_key, value, when in self.entries():
            if entry_key == key:
                found, published = value, when
        return found, published

    def latest(self, key: str):
        return self.latest_entry(key)[0]


def abort_list(aborts: dict[TxnID, Position]) -> list[AbortTxnMetadata]:
    return [AbortTxnMetadata(t.most, t.least, p.ledger, p.entry) for t, p in aborts.items()]


def txn_data(txns) -> list[TxnIDData]:
    return [TxnIDData(t.most, t.least) for t in txns]
