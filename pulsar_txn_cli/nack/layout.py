"""The Java heap layout model: bytes the tracker's objects occupy on a 64-bit HotSpot JVM.

Assumes the defaults of a heap under 32 GB: compressed object pointers and class pointers, so an
object header is 12 bytes, a reference 4, an array header 16 (header + length), and every object
is padded to 8 bytes. Field lists come from the classes of pulsar-client 4.0.1 (the old design)
and 4.0.7 (PIP-393's, with fastutil and RoaringBitmap); the Roaring64Bitmap's fixed part was read
with JOL (`tests/nack_java`, the probe's `layout` mode), everything else is counted from fields.
The nack_java test holds these figures to JOL's GraphLayout.totalSize() of the real trackers.
"""

from __future__ import annotations

import math

HEADER = 12
REF = 4
ARRAY_HEADER = 16


def align(size: int) -> int:
    return (size + 7) & ~7


def long_array(length: int) -> int:
    return align(ARRAY_HEADER + 8 * length)


def ref_array(length: int) -> int:
    return align(ARRAY_HEADER + REF * length)


def char_array(length: int) -> int:
    return align(ARRAY_HEADER + 2 * length)


# --- the old design: ConcurrentLongLongPairHashMap ------------------------------------------------
# The map: header + its sections array reference.
PAIR_MAP = align(HEADER + REF)
# A section extends StampedLock (a long state after the 12-byte header leaves a 4-byte gap, then
# head/tail nodes and three lazily made views) and adds the table reference, six ints, four floats
# and a boolean: 12 + 4 + 8 + 5*4 + 4 + 6*4 + 4*4 + 1 = 89, padded to 96.
PAIR_SECTION = align(HEADER + 4 + 8 + 5 * REF + REF + 6 * 4 + 4 * 4 + 1)


def pair_map_bytes(capacities: list[int]) -> int:
    """The map, its sections array, each section and its table of 4 longs a slot."""
    return PAIR_MAP + ref_array(len(capacities)) + sum(PAIR_SECTION + long_array(4 * c) for c in capacities)


# --- the new design: Long2ObjectAVLTreeMap<Long2ObjectOpenHashMap<Roaring64Bitmap>> -----------------
# The tree map: root, first, last, three cached views, a comparator, the default return value, the
# modification flag and a count (48 bytes, read with JOL), plus the boolean[64] path it keeps for
# rebalancing; after the first timer run its key-set view stays cached (JOL: 24 bytes).
AVL_MAP = 48 + align(ARRAY_HEADER + 64)
AVL_KEY_SET = 24
# A tree entry: key (long), value, left, right (references) and the balance/thread info (int).
AVL_ENTRY = align(HEADER + 8 + 3 * REF + 4)
# The open hash map: keys and values arrays, three cached views, the default return value, five ints,
# a float and a boolean. Its arrays hold n + 1 slots (the extra one for key 0); n starts at 32
# (16 expected items at load factor 0.75) and doubles when size reaches maxFill.
OPEN_MAP = align(HEADER + 2 * REF + 4 * REF + 5 * 4 + 4 + 1)
OPEN_MAP_INITIAL_N = 32
OPEN_MAP_LOAD = 0.75


def open_map_bytes(size: int) -> int:
    n = OPEN_MAP_INITIAL_N
    while size > min(math.ceil(n * OPEN_MAP_LOAD), n - 1):  # an insert at size == maxFill doubles n
        n *= 2
    return OPEN_MAP + long_array(n + 1) + ref_array(n + 1)


# Roaring64Bitmap's fixed part with one container (the bitmap, its high-low container, the adaptive
# radix tree with its leaf, the containers' store and its first array), and what each further
# container adds to the tree, both read with JOL (probe `layout`: a bitmap of one value is 352 bytes,
# less that value's 48-byte array container; 70,000 values in two bitmap containers are 16,984).
# 72 of those bytes are the leaf's node-type enum constant and its name, shared by every bitmap.
ROARING64_SHARED = 72
ROARING64_FIXED = 304 - ROARING64_SHARED
ROARING64_PER_EXTRA_CONTAINER = 216
# Containers of 2^16 values: an array container (char[], grown 4, x2 below 64, x1.5 below 1067,
# x1.25 after, capped at 4096) up to 4096 values, a bitmap container (long[1024]) beyond.
ARRAY_CONTAINER = align(HEADER + 4 + REF)
BITMAP_CONTAINER = align(HEADER + 4 + REF) + long_array(1024)
ARRAY_MAX = 4096


def _array_capacities() -> list[int]:
    capacity, out = 4, [4]
    while capacity < ARRAY_MAX:
        capacity = capacity * 2 if capacity < 64 else capacity * 3 // 2 if capacity < 1067 else capacity * 5 // 4
        capacity = ARRAY_MAX if capacity > ARRAY_MAX - ARRAY_MAX // 16 else capacity
        out.append(capacity)
    return out


ARRAY_CAPACITIES = _array_capacities()


def array_capacity(cardinality: int) -> int:
    """The char[] length an array container reaches when values are added one at a time."""
    for capacity in ARRAY_CAPACITIES:
        if capacity >= cardinality:
            return capacity
    return ARRAY_MAX


def container_bytes(cardinality: int) -> int:
    if cardinality > ARRAY_MAX:
        return BITMAP_CONTAINER
    return ARRAY_CONTAINER + char_array(array_capacity(cardinality))


def roaring64_bytes(chunk_cardinalities: list[int]) -> int:
    """A Roaring64Bitmap whose 2^16-value chunks hold these many values (entry ids stay under 2^32)."""
    containers = [container_bytes(c) for c in chunk_cardinalities if c]
    return ROARING64_FIXED + sum(containers) + ROARING64_PER_EXTRA_CONTAINER * max(len(containers) - 1, 0)


def roaring64_range_bytes(first: int, count: int) -> int:
    """A bitmap of `count` consecutive values from `first` (what a dense ledger range holds)."""
    chunks, value, end = [], first, first + count
    while value < end:
        chunk_end = min(end, (value >> 16 << 16) + 65536)
        chunks.append(chunk_end - value)
        value = chunk_end
    return roaring64_bytes(chunks)
