"""The old design's map: open addressing with linear probing over (key1, key2) -> (value1, value2).

Keys are non-negative longs (ledger and entry ids); a slot is 4 longs in one flat table per
section. The table grows by 2x when the used slots (live + tombstones) pass fillFactor x capacity,
and with autoShrink halves (never below the initial capacity) when the live slots fall under
idleFactor x capacity, provided the halved table stays under its own fill threshold. Removal
leaves a tombstone unless the next slot is empty, in which case the run of tombstones before it
is cleared. This is how Pulsar's ConcurrentLongLongPairHashMap behaves with the tracker's settings
(one section of 512 slots to start, autoShrink on, factors 0.66 / 0.15).
"""

from __future__ import annotations

from array import array

EMPTY = -1
DELETED = -2
_MASK = (1 << 64) - 1
_MIX = 0x9E3779B97F4A7C15


def _hash(key1: int, key2: int) -> int:
    """A 64-bit mix of both keys (any good mix will do: the model needs the spread, not Java's bits)."""
    h = (key1 * _MIX) & _MASK
    h ^= h >> 29
    h = ((h + key2 + 0x632BE59BD9B4E019) * _MIX) & _MASK
    return h ^ (h >> 32)


def align_to_power_of_two(n: int) -> int:
    return 1 << max(n - 1, 0).bit_length()


class _Section:
    __slots__ = ("table", "capacity", "init_capacity", "size", "used", "up", "below", "fill", "idle", "auto_shrink")

    def __init__(self, capacity: int, fill: float, idle: float, auto_shrink: bool):
        self.fill, self.idle, self.auto_shrink = fill, idle, auto_shrink
        self.init_capacity = capacity
        self.size = 0
        self._allocate(capacity)

    def _allocate(self, capacity: int) -> None:
        self.capacity = capacity
        self.table = array("q", [EMPTY]) * (4 * capacity)
        self.used = 0
        self.up = int(capacity * self.fill)
        self.below = int(capacity * self.idle)

    def _slot(self, h: int) -> int:
        return (h & (self.capacity - 1)) * 4

    def put(self, k1: int, k2: int, v1: int, v2: int, h: int) -> bool:
        """Insert or replace; True when the key was new."""
        table, mask = self.table, len(self.table) - 1
        slot, tombstone = self._slot(h), -1
        while True:
            key = table[slot]
            if key == k1 and table[slot + 1] == k2:
                table[slot + 2], table[slot + 3] = v1, v2
                return False
            if key == EMPTY:
                if tombstone >= 0:
                    slot = tombstone  # reuse the first tombstone met: used slots do not grow
                else:
                    self.used += 1
                table[slot : slot + 4] = array("q", (k1, k2, v1, v2))
                self.size += 1
                if self.used > self.up:
                    self._rehash(align_to_power_of_two(int(self.capacity * 2)))
                return True
            if key == DELETED and tombstone < 0:
                tombstone = slot
            slot = (slot + 4) & mask

    def remove(self, k1: int, k2: int, h: int) -> bool:
        table, mask = self.table, len(self.table) - 1
        slot = self._slot(h)
        while True:
            key = table[slot]
            if key == EMPTY:
                return False
            if key == k1 and table[slot + 1] == k2:
                self.size -= 1
                table[slot] = DELETED
                self._clean(slot)
                self._maybe_shrink()
                return True
            slot = (slot + 4) & mask

    def _clean(self, slot: int) -> None:
        """A tombstone followed by an empty slot ends no probe run: clear it and those before it."""
        table, mask = self.table, len(self.table) - 1
        if table[(slot + 4) & mask] != EMPTY:
            return
        while table[slot] == DELETED:
            table[slot : slot + 4] = array("q", (EMPTY, EMPTY, EMPTY, EMPTY))
            self.used -= 1
            slot = (slot - 4) & mask

    def _maybe_shrink(self) -> None:
        if not self.auto_shrink or self.size >= self.below:
            return
        new_capacity = max(align_to_power_of_two(int(self.capacity / 2)), self.init_capacity)
        if new_capacity < self.capacity and int(new_capacity * self.fill) > self.size:
            self._rehash(new_capacity)

    def _rehash(self, capacity: int) -> None:
        old = self.table
        self._allocate(capacity)
        table, mask = self.table, len(self.table) - 1
        for slot in range(0, len(old), 4):
            k1 = old[slot]
            if k1 >= 0:
                k2 = old[slot + 1]
                new = self._slot(_hash(k1, k2))
                while table[new] != EMPTY:
                    new = (new + 4) & mask
                table[new : new + 4] = old[slot : slot + 4]
                self.used += 1

    def items(self):
        table = self.table
        for slot in range(0, len(table), 4):
            if table[slot] >= 0:
                yield table[slot], table[slot + 1], table[slot + 2], table[slot + 3]


class LongLongPairHashMap:
    """(key1, key2) -> (value1, value2), keys >= 0, split into power-of-two sections."""

    def __init__(
        self,
        expected_items: int = 256,
        concurrency: int = 1,
        fill: float = 0.66,
        idle: float = 0.15,
        auto_shrink: bool = True,
    ):
        if not 0 < idle < fill < 1:
            raise ValueError("factors must satisfy 0 < idle < fill < 1")
        sections = align_to_power_of_two(concurrency)
        # room for the expected items at the fill factor: 256 expected -> 387 -> 512 slots
        per_section = align_to_power_of_two(int(max(expected_items // sections, 1) / fill))
        self.sections = [_Section(per_section, fill, idle, auto_shrink) for _ in range(sections)]

    def _section(self, h: int) -> _Section:
        return self.sections[(h >> 32) & (len(self.sections) - 1)]

    def put(self, k1: int, k2: int, v1: int, v2: int) -> bool:
        h = _hash(k1, k2)
        return self._section(h).put(k1, k2, v1, v2, h)

    def remove(self, k1: int, k2: int) -> bool:
        h = _hash(k1, k2)
        return self._section(h).remove(k1, k2, h)

    def items(self):
        for section in self.sections:
            yield from section.items()

    def __len__(self) -> int:
        return sum(s.size for s in self.sections)

    def capacities(self) -> list[int]:
        return [s.capacity for s in self.sections]

    def slots(self) -> int:
        return sum(self.capacities())
