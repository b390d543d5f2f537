"""The tracker before Pulsar 4.0.2: one pair map (ledger, entry) -> (partition, due time).

A nack puts its entry's due time, replacing any earlier one (two nacks into one batch share a
slot: the last wins). The timer runs every third of the configured delay (at least 100 ms / 3),
scans the whole table and redelivers every entry whose due time has passed; it is started by the
first nack and stops when the map empties. Times are simulated milliseconds.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.nack import layout
from pulsar_txn_cli.nack.pair_map import LongLongPairHashMap

MIN_DELAY_MS = 100
NO_PARTITION = (1 << 63) - 1  # a non-partitioned topic's partition index is stored as Long.MAX_VALUE


@dataclass
class Tick:
    """One timer run: what it redelivered and how much it looked at."""

    at_ms: int
    entries: set
    scanned: int  # table slots visited


class OldTracker:
    def __init__(self, delay_ms: int):
        self.interval_ms = max(delay_ms, MIN_DELAY_MS) / 3
        self.map = LongLongPairHashMap(expected_items=256, concurrency=1, fill=0.66, idle=0.15, auto_shrink=True)
        self.timer_at: float | None = None

    def add(self, now_ms: int, ledger: int, entry: int, delay_ms: int) -> None:
        self.map.put(ledger, entry, NO_PARTITION, now_ms + max(delay_ms, 0))
        if self.timer_at is None:
            self.timer_at = now_ms + self.interval_ms

    def fire(self, now_ms: float) -> Tick:
        due = {(k1, k2) for k1, k2, _, when in self.map.items() if when <= now_ms}
        scanned = self.map.slots()
        for ledger, entry in due:
            self.map.remove(ledger, entry)
        self.timer_at = now_ms + self.interval_ms if len(self.map) else None
        return Tick(now_ms, due, scanned)

    def __len__(self) -> int:
        return len(self.map)

    def java_bytes(self) -> int:
        return layout.pair_map_bytes(self.map.capacities())
