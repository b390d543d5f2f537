"""PIP-393's tracker (Pulsar 4.0.2 and later): time bucket -> ledger id -> 64-bit Roaring bitmap.

A nack's due time is trimmed to its bucket (the lowest `bits` bits cleared), so it is redelivered
up to 2^bits - 1 ms early and never late on the bucket's account. The timer is started by a nack
when none is pending, for that nack's own delay; each run redelivers every bucket that is due,
then is set for the earliest remaining bucket. As in the Java client, a nack with a shorter delay
than the pending timer's does not move the timer (the only way this design is late). Times are
simulated milliseconds. pyroaring is imported where a bitmap is made, so importing this is cheap.
"""

from __future__ import annotations

import heapq
from dataclasses import dataclass

from pulsar_txn_cli.nack import layout


def bucket_of(timestamp_ms: int, bits: int) -> int:
    """The timestamp with its lowest `bits` bits cleared (Java: timestamp & (-1L << bits))."""
    return timestamp_ms & ~((1 << bits) - 1)


@dataclass
class Fire:
    at_ms: int
    entries: set
    buckets: list  # bucket timestamps redelivered, oldest first


class NewTracker:
    def __init__(self, bits: int = 8):
        self.bits = bits
        self.buckets: dict[int, dict] = {}
        self._order: list[int] = []  # a heap of the bucket keys
        self.timer_at: int | None = None
        self._fired = False  # the sorted map's key-set view is cached from the first timer run on

    def add(self, now_ms: int, ledger: int, entry: int, delay_ms: int) -> int:
        from pyroaring import BitMap64

        bucket = bucket_of(now_ms + delay_ms, self.bits)
        ledgers = self.buckets.get(bucket)
        if ledgers is None:
            ledgers = self.buckets[bucket] = {}
            heapq.heappush(self._order, bucket)
        bitmap = ledgers.get(ledger)
        if bitmap is None:
            bitmap = ledgers[ledger] = BitMap64()
        bitmap.add(entry)
        if self.timer_at is None:
            self.timer_at = now_ms + delay_ms
        return bucket

    def fire(self, now_ms: int) -> Fire:
        self._fired = True
        entries, done = set(), []
        while self._order and self._order[0] <= now_ms:
            bucket = heapq.heappop(self._order)
            for ledger, bitmap in self.buckets.pop(bucket).items():
                entries.update((ledger, e) for e in bitmap)
            done.append(bucket)
        self.timer_at = max(self._order[0], now_ms) if self._order else None
        return Fire(now_ms, entries, done)

    def __len__(self) -> int:
        return sum(len(b) for ledgers in self.buckets.values() for b in ledgers.values())

    def java_bytes(self) -> int:
        total = layout.AVL_MAP + (layout.AVL_KEY_SET if self._fired else 0)
        total += layout.ROARING64_SHARED if self.buckets else 0
        for ledgers in self.buckets.values():
            total += layout.AVL_ENTRY + layout.open_map_bytes(len(ledgers))
            total += sum(layout.roaring64_bytes(_chunks(b)) for b in ledgers.values())
        return total


def _chunks(bitmap) -> list[int]:
    """Values per 2^16 chunk, the unit of a Roaring container."""
    if not bitmap:
        return []
    first, last = bitmap.min() >> 16, bitmap.max() >> 16
    return [bitmap.range_cardinality(c << 16, (c + 1) << 16) for c in range(first, last + 1)]
