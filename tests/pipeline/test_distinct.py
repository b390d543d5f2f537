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
        b.add(shuffled[i:i + 1000])
    count, exact = a.result()
    assert not exact and abs(count - n) / n < 0.03
    assert b.result() == a.result()
    assert a.sparse_registers() == b.sparse_registers()


def test_register_rank_and_merge():
    assert distinct.mix(0) == 0 and distinct.register_of(0) == (0, 64 - distinct.PRECISION + 1)
    index, rank = distinct.register_of(12345)
    assert 0 <= index < distinct.REGISTERS and 1 <= rank <= 64 - distinct.PRECISION + 1
    assert distinct.merge([{1: 3, 2: 1}, {1: 2, 3: 4}]) == {1: 3, 2: 1, 3: 4}
    assert distinct.estimate({}) == 0


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
