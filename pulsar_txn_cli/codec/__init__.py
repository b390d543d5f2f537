"""Bytes <-> records for the transaction coordinator log and the pending-ack log.

An entry is either one record (the raw protobuf of a TransactionMetadataEntry or a
PendingAckMetadataEntry) or, since PIP-160, a batch: magic 0x0E01 and a version (two
big-endian shorts) followed by the protobuf of the batched container. Both kinds share a
ledger. Decoding keeps the records as protobuf messages (fast); `entry_to_json` turns them
into the JSON shape documented in the README.

This package's __init__ only re-exports: logs.py (the two logs and their record types),
entries.py (RawEntry, DecodedEntry), framing.py (batch prefix, decode and encode), records.py
(records <-> JSON), summaries.py (table summaries), dumps.py and readledger.py (input formats).
"""

from __future__ import annotations

from pulsar_txn_cli.codec.entries import DecodedEntry, RawEntry
from pulsar_txn_cli.codec.framing import (
    MAGIC,
    PREFIX,
    PREFIX_LEN,
    VERSION,
    decode_entry,
    encode_batch,
    encode_batch_serialized,
    encode_single,
    is_batched,
)
from pulsar_txn_cli.codec.logs import (
    LOGS,
    PENDING_ACK_LOG,
    TC_LOG,
    PendingAckPosition,
    PendingAckRecord,
    Subscription,
    TcRecord,
    log_of_managed_ledger,
)
from pulsar_txn_cli.codec.records import entry_to_json, record_from_dict, record_to_dict, records_to_dicts, txn_id
from pulsar_txn_cli.codec.summaries import op_name, summarize

__all__ = [
    "DecodedEntry",
    "RawEntry",
    "MAGIC",
    "PREFIX",
    "PREFIX_LEN",
    "VERSION",
    "decode_entry",
    "encode_batch",
    "encode_batch_serialized",
    "encode_single",
    "is_batched",
    "LOGS",
    "PENDING_ACK_LOG",
    "TC_LOG",
    "PendingAckPosition",
    "PendingAckRecord",
    "Subscription",
    "TcRecord",
    "log_of_managed_ledger",
    "entry_to_json",
    "record_from_dict",
    "record_to_dict",
    "records_to_dicts",
    "txn_id",
    "op_name",
    "summarize",
]
