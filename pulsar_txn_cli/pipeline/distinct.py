"""Distinct transactions in bounded memory, with one rule both runners follow exactly.

The count is exact (distinct 64-bit transaction-id hashes) while it is at most EXACT_LIMIT;
above that it is a HyperLogLog estimate from 2**PRECISION registers (standard error about
0.8%). The registers are a pure function of the set of hashes (a max per register), so the
local runner and Spark, which build them differently, end with the same registers and the
same figure.
"""

from __future__ import annotations

import math

EXACT_LIMIT = 1 << 16
PRECISION = 14
REGISTERS = 1 << PRECISION
_LOW_BITS = 64 - PRECISION
_LOW_MASK = (1 << _LOW_BITS) - 1
_MASK64 = (1 << 64) - 1
_C1, _C2 = 0xFF51AFD7ED558CCD, 0xC4CEB9FE1A85EC53
_FLUSH = 1 << 16
# Spark cannot know cheaply that a count exceeds EXACT_LIMIT; it counts exactly wherever the
# estimate is below this, and an estimate cannot be off by a factor of two at 0.8% error.
EXACT_CHECK_BELOW = 2 * EXACT_LIMIT


def mix(h: int) -> int:
    """MurmurHash3's 64-bit finalizer: the txn hash (CPython's tuple hash) is a near-linear map
    of sequential ids, far from uniform enough for HyperLogLog; this spreads it."""
    z = h & _MASK64
    z ^= z >> 33
    z = (z * _C1) & _MASK64
    z ^= z >> 33
    z = (z * _C2) & _MASK64
    return z ^ (z >> 33)


def register_of(h: int) -> tuple[int, int]:
    """(register index, rank) of one txn hash: the top bits of its mix pick the register, the
    rank is 1 + the leading zeros of the remaining bits."""
    u = mix(h)
    return u >> _LOW_BITS, _LOW_BITS - (u & _LOW_MASK).bit_length() + 1


def update_registers(registers: bytearray, hashes) -> None:
    """registers[i] = max(registers[i], rank) for every hash; vectorized when numpy is present
    (the same integers either way)."""
    try:
        import numpy as np
    except ImportError:
        for h in hashes:
            index, rank = register_of(h)
            if rank > registers[index]:
                registers[index] = rank
        return
    index, rank = registers_np(np.asarray(hashes, dtype=np.int64), np)
    np.maximum.at(np.frombuffer(registers, dtype=np.uint8), index, rank)


def registers_np(hashes, np):
    """(index, rank) arrays for an int64 array of txn hashes (same math as register_of)."""
    z = hashes.view(np.uint64)
    z = z ^ (z >> np.uint64(33))
    z = z * np.uint64(_C1)
    z = z ^ (z >> np.uint64(33))
    z = z * np.uint64(_C2)
    z = z ^ (z >> np.uint64(33))
    index = (z >> np.uint64(_LOW_BITS)).astype(np.intp)
    low = (z & np.uint64(_LOW_MASK)).astype(np.float64)  # < 2**50: exact in a double
    bits = np.frexp(low)[1]  # the bit length (0 for 0)
    return index, (_LOW_BITS + 1 - bits).astype(np.uint8)


_POWERS = [2.0**-v for v in range(65)]  # 2 ** -rank for every possible rank


def estimate(registers: bytearray) -> int:
    """HyperLogLog estimate (with linear counting in the small range), rounded."""
    m = REGISTERS
    alpha = 0.7213 / (1 + 1.079 / m)
    raw = alpha * m * m / math.fsum(_POWERS[v] for v in registers)
    zeros = registers.count(0)
    if raw <= 2.5 * m and zeros:
        return round(m * math.log(m / zeros))
    return round(raw)


class DistinctCounter:
    """Exact set up to EXACT_LIMIT hashes, then only the registers (16 KiB) fed in chunks."""

    __slots__ = ("exact", "registers", "pending")

    def __init__(self):
        self.exact: set[int] | None = set()
        self.registers: bytearray | None = None
        self.pending: list[int] = []

    def add(self, hashes) -> None:
        exact = self.exact
        if exact is not None:
            exact.update(hashes)
            if len(exact) > EXACT_LIMIT:
                self._to_registers()
            return
        pending = self.pending
        pending.extend(hashes)
        if len(pending) >= _FLUSH:
            self._flush()

    def merge(self, codes: bytes, hashes: bytes | None) -> None:
        """Fold in another counter as Spark ships it (see codes): its exact hashes (packed int64)
        while it had them, so that the union stays exact as long as it can, else its registers."""
        import numpy as np

        if hashes is not None:
            self.add(np.frombuffer(hashes, dtype=np.int64).tolist())
            return
        if self.exact is not None:
            self._to_registers()
        self._flush()
        codes = np.frombuffer(codes, dtype=np.int32)
        np.maximum.at(np.frombuffer(self.registers, dtype=np.uint8), codes >> 6, (codes & 63).astype(np.uint8))

    def _to_registers(self) -> None:
        self.registers = self._registers_of_exact()
        self.exact = None

    def _registers_of_exact(self) -> bytearray:
        registers = bytearray(REGISTERS)
        update_registers(registers, list(self.exact))
        return registers

    def _flush(self) -> None:
        if self.pending:
            update_registers(self.registers, self.pending)
            self.pending = []

    def result(self) -> tuple[int, bool]:
        """(count, exact?)."""
        if self.exact is not None:
            return len(self.exact), True
        self._flush()
        return estimate(self.registers), False

    def codes(self) -> bytes:
        """The non-zero registers packed as int32 index * 64 + rank (how Spark's tasks ship them)."""
        import numpy as np

        if self.exact is not None:
            registers = self._registers_of_exact()
        else:
            self._flush()
            registers = self.registers
        ranks = np.frombuffer(registers, dtype=np.uint8)
        index = np.flatnonzero(ranks)
        return (index.astype(np.int32) * 64 + ranks[index]).tobytes()
