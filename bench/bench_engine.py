"""Engine throughput and batching: records/s and entries per 1,000 records, batching on vs off.

    .venv/bin/python -m bench engine [--transactions=N] [--concurrency=C] [--subscriptions=S]

Runs `engine simulate` in process on fresh engines (tmp dirs), same seed for both modes, default
batch settings. Records/s is wall time of the whole simulate (coordinator, pending-ack stores,
transaction buffer, SQLite commits), counting TC-log records and all log records.
"""
from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path


def run(batch: bool, transactions: int, concurrency: int, subscriptions: int, seed: int) -> dict:
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine.init(Path(tmp) / "engine")
        try:
            if batch:
                engine.config.set("transactionLogBatchedWriteEnabled", "true")
                engine.config.set("transactionPendingAckBatchedWriteEnabled", "true")
                engine.reload()
            start = time.perf_counter()
            result = simulate(engine, SimOptions(transactions=transactions, concurrency=concurrency,
                                                 subscriptions=subscriptions, seed=seed))
            elapsed = time.perf_counter() - start
        finally:
            engine.close()
    result["seconds"] = elapsed
    return result


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench engine")
    parser.add_argument("--transactions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--subscriptions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    args = parser.parse_args(argv)
    rows = {}
    for batch in (True, False):
        r = run(batch, args.transactions, args.concurrency, args.subscriptions, args.seed)
        rows[batch] = r
        tc, pa = r["records"]["tc"], r["records"]["pendingAck"]
        print(f"batching {'on ' if batch else 'off'}: {args.transactions} txns, concurrency {args.concurrency}, "
              f"{args.subscriptions} subscriptions, {r['seconds']:.2f} s")
        print(f"  TC-log records/s        {tc / r['seconds']:>10,.0f}   ({tc} records, {r['entries']['tc']} entries)")
        print(f"  all log records/s       {(tc + pa) / r['seconds']:>10,.0f}   (+ {pa} pending-ack records, "
              f"{r['entries']['pendingAck']} entries)")
        print(f"  entries per 1,000 records: TC {1000 * r['entries']['tc'] / max(tc, 1):.1f}, "
              f"pending ack {1000 * r['entries']['pendingAck'] / max(pa, 1):.1f}")
        print(f"  add latency p50/p99 (engine ms): {r['addLatencyMs']['p50']} / {r['addLatencyMs']['p99']}")
    on, off = rows[True], rows[False]
    assert on["records"] == off["records"], "the same seed must give the same records"
    ratio = off["entries"]["tc"] / max(on["entries"]["tc"], 1)
    print(f"TC-log entries without / with batching: {off['entries']['tc']} / {on['entries']['tc']} = {ratio:.1f}x "
          f"(target >= 20x)")
    print(f"TC-log records/s with batching: {on['records']['tc'] / on['seconds']:,.0f} (target >= 20,000)")
