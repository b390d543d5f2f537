"""The broker settings the transaction buffer reads (Pulsar's ServiceConfiguration,
PIP-178; none is dynamic)."""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.names import parse_bool

# name -> default, as in ServiceConfiguration
DEFAULTS = {
    "transactionBufferSegmentedSnapshotEnabled": False,
    "transactionBufferSnapshotSegmentSize": 262144,
    "transactionBufferSnapshotMaxTransactionCount": 1000,
    "transactionBufferSnapshotMinTimeInMillis": 5000,
}


@dataclass(frozen=True)
class BufferConfig:
    segmented: bool = False
    segment_size: int = 262144
    max_transaction_count: int = 1000
    min_time_ms: int = 5000

    @classmethod
    def from_settings(cls, get) -> "BufferConfig":
        """From any lookup `get(name, default)` (a dict's .get, or the engine's config)."""
        value = {name: get(name, default) for name, default in DEFAULTS.items()}
        return cls(
            segmented=parse_bool(value["transactionBufferSegmentedSnapshotEnabled"]),
            segment_size=int(value["transactionBufferSnapshotSegmentSize"]),
            max_transaction_count=int(value["transactionBufferSnapshotMaxTransactionCount"]),
            min_time_ms=int(value["transactionBufferSnapshotMinTimeInMillis"]),
        )


DOCS = {
    "transactionBufferSegmentedSnapshotEnabled": "Transaction buffer snapshots in segments plus an index (PIP-178) instead of one entry.",
    "transactionBufferSnapshotSegmentSize": "Bytes of one transaction-buffer snapshot segment.",
    "transactionBufferSnapshotMaxTransactionCount": "Take a transaction-buffer snapshot after this many changes.",
    "transactionBufferSnapshotMinTimeInMillis": "Take a transaction-buffer snapshot at most this often (ms) when something changed.",
}
