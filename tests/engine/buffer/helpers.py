"""Buffers over in-memory managed ledgers, and a ground truth to compare recoveries with."""

from __future__ import annotations

from pulsar_txn_cli.engine.buffer.buffer import SnapshotTopics, TransactionBuffer
from pulsar_txn_cli.engine.buffer.settings import BufferConfig
from pulsar_txn_cli.engine.buffer.log import MemoryLog
from pulsar_txn_cli.names import TxnID

TOPIC = "persistent://public/default/orders"


class Clock:
    def __init__(self, start: int = 1_000_000):
        self.now = start

    def __call__(self) -> int:
        return self.now


class World:
    """One topic and its namespace's snapshot topics; buffers can be rebuilt from them (a restart)."""

    def __init__(self, segmented=False, segment_size=262144, max_count=1000, min_time=5000, ledger_size=1000):
        self.log = MemoryLog(TOPIC, max_entries=ledger_size)
        self.topics = SnapshotTopics(MemoryLog("snap"), MemoryLog("segments"), MemoryLog("indexes"))
        self.config = BufferConfig(segmented, segment_size, max_count, min_time)
        self.clock = Clock()

    def buffer(self) -> TransactionBuffer:
        return TransactionBuffer(TOPIC, self.log, self.topics, self.config, self.clock).recover()

    def replayed(self) -> TransactionBuffer:
        """The truth: a buffer rebuilt from the whole topic with no snapshot at all."""
        empty = SnapshotTopics(MemoryLog("s"), MemoryLog("g"), MemoryLog("i"))
        return TransactionBuffer(TOPIC, self.log, empty, self.config, self.clock).recover()


def txn(least: int, most: int = 0) -> TxnID:
    return TxnID(most, least)


def state(buffer: TransactionBuffer) -> dict:
    return {
        "maxReadPosition": buffer.max_read_position,
        "ongoing": {t: o.first_position for t, o in buffer.ongoing.items()},
        "aborted": sorted(t for t in _aborted(buffer)),
    }


def _aborted(buffer):
    aborts = buffer.aborts
    if hasattr(aborts, "sealed"):
        return list(aborts.sealed) + list(aborts.unsealed)
    return list(aborts.aborts)


def visible(buffer) -> list[bytes]:
    return [entry.payload for _, entry in buffer.dispatch()]
