"""Distinct transactions: exact up to the limit, then HyperLogLog with order-independent registers."""

from __future__ import annotations

import random

from pulsar_txn_cli.pipeline import distinct
from pulsar_txn_cli.pipeline.facts import txn_hash


def test_exact_up_to_the_limit():
    counter = distinct.DistinctCounter()
    hashes = [txn_hash(1, i) for i in range(distinct.EXACT_LIMIT)]
    counter.add(hashes[:10])
    counter.add(hashes)
    assert counter.result() == (distinct.EXACT_LIMIT, True)


def test_estimate_above_the_limit_is_close_and_order_independent():
    n = 3 * distinct.EXACT_LIMIT
    hashes = [txn_hash(most, least) for most in range(3) for least in range(distinct.EXACT_LIMIT)]
    a, b = distinct.DistinctCounter(), distinct.DistinctCounter()
    a.add(hashes)
    shuffled = hashes[:]
    random.Random(7).shuffle(shuffled)
    for i in range(0, n, 1000):
        b.add(shuffled[i : i + 1000])
    count, exact = a.result()
    assert not exact and abs(count - n) / n < 0.03
    assert b.result() == a.result()
    assert a.codes() == b.codes()


def test_register_rank():
    assert distinct.mix(0) == 0 and distinct.register_of(0) == (0, 64 - distinct.PRECISION + 1)
    index, rank = distinct.register_of(12345)
    assert 0 <= index < distinct.REGISTERS and 1 <= rank <= 64 - distinct.PRECISION + 1
    assert distinct.estimate(bytearray(distinct.REGISTERS)) == 0


def parts(hashes, sizes):
    """Counters over consecutive slices of `hashes`, shipped as Spark's tasks ship them."""
    import numpy as np

    out, start = [], 0
    for size in sizes:
        counter = distinct.DistinctCounter()
        counter.add(hashes[start : start + size])
        start += size
        if counter.exact is not None:
            out.append((None, np.array(sorted(counter.exact), dtype=np.int64).tobytes()))
        else:
            out.append((counter.codes(), None))
    return out


def test_merging_parts_equals_counting_everything_at_once():
    limit = distinct.EXACT_LIMIT
    hashes = [txn_hash(2, i) for i in range(3 * limit)]
    overlapping = hashes[: limit // 2] + hashes[: limit // 2] + hashes[limit // 2 : limit]  # union exactly at the limit
    for values, sizes in [
        (overlapping, [limit // 2] * 3),
        (hashes, [limit, limit, limit]),
        (hashes, [limit + 5, 2 * limit - 5]),
    ]:
        whole, merged = distinct.DistinctCounter(), distinct.DistinctCounter()
        whole.add(values)
        for codes, exact in parts(values, sizes):
            merged.merge(codes, exact)
        assert merged.result() == whole.result() and merged.codes() == whole.codes()
    assert merged.result()[1] is False  # the last case merged an overflowed part's registers


def test_numpy_and_pure_python_registers_agree(monkeypatch):
    import builtins

    hashes = [txn_hash(5, i) for i in range(5000)] + [0, -1, 2**63 - 1, -(2**63)]
    fast = bytearray(distinct.REGISTERS)
    distinct.update_registers(fast, hashes)
    real_import = builtins.__import__

    def no_numpy(name, *args, **kwargs):  # a real ImportError for numpy only
        if name == "numpy":
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_numpy)
    slow = bytearray(distinct.REGISTERS)
    distinct.update_registers(slow, hashes)
    assert fast == slow and any(fast)
