"""The entries the engine writes to a topic's managed ledger: messages and transaction markers.

A real broker writes MessageMetadata (with `txnid_*_bits` and, for markers, `marker_type`
TXN_COMMIT or TXN_ABORT) followed by the payload. The engine keeps the same information as one
compact JSON document per entry; it is only ever read back by the engine itself.
"""

from __future__ import annotations

import base64
from dataclasses import dataclass

import orjson

from pulsar_txn_cli.names import TxnID
from pulsar_txn_cli.errors import DataError

COMMIT = "TXN_COMMIT"
ABORT = "TXN_ABORT"
MARKERS = (COMMIT, ABORT)


@dataclass(frozen=True, slots=True)
class TopicEntry:
    txn: TxnID | None = None  # None: a message published outside any transaction
    marker: str | None = None  # COMMIT or ABORT for a transaction marker, else None
    payload: bytes = b""
    publish_time: int = 0

    @property
    def is_marker(self) -> bool:
        return self.marker is not None


def encode(entry: TopicEntry) -> bytes:
    return encode_fields(entry.txn, entry.marker, entry.payload, entry.publish_time)


def encode_fields(txn: TxnID | None, marker: str | None, payload: bytes, publish_time: int) -> bytes:
    """encode(TopicEntry(...)) without building the entry (the buffer writes one per message)."""
    doc: dict = {"publishTime": publish_time}
    if txn is not None:
        doc["txnidMostBits"], doc["txnidLeastBits"] = txn
    if marker:
        doc["markerType"] = marker
    else:
        doc["payload"] = base64.b64encode(payload).decode()
    return orjson.dumps(doc)


def decode(data: bytes, where: str = "") -> TopicEntry:
    try:
        doc = orjson.loads(data)
        txn = TxnID(doc["txnidMostBits"], doc["txnidLeastBits"]) if "txnidMostBits" in doc else None
        marker = doc.get("markerType")
        if marker is not None and marker not in MARKERS:
            raise ValueError(f"unknown marker type {marker!r}")
        payload = base64.b64decode(doc.get("payload", ""))
        return TopicEntry(txn, marker, payload, int(doc.get("publishTime", 0)))
    except (ValueError, KeyError, TypeError) as exc:
        raise DataError(f"topic entry {where or '?'} is not an engine message: {exc}") from None
