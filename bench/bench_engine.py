"""Engine throughput and batching: records/s and entries per 1,000 records, batching on vs off.

    .venv/bin/python -m bench engine [--transactions=N] [--concurrency=C] [--subscriptions=S] [--repeat=R] [--profile]
    .venv/bin/python -m bench engine --scale [--scale-transactions=N] [--scale-topics=T]

Runs `engine simulate` in process on fresh engines (tmp dirs), same seed for both modes, default
batch settings. Records/s is wall time of the whole simulate (coordinator, pending-ack stores,
transaction buffer, SQLite commits), counting TC-log records and all log records. With --repeat,
each mode runs R times and the rates are reported as the median and the range; the bytes the
simulate handed to write() (Linux's /proc/self/io: the database's WAL) are printed a log record. --profile runs the
batching-on workload once more under cProfile and prints where its time goes, by part of the engine.

--scale instead runs the large case as a real process: `pulsar-txn engine simulate` of
100,000 transactions over 1,000 topics (concurrency 200, batching on for both logs) on a fresh engine,
then `pulsar-txn engine verify`, and prints the wall time, the CPU time and the peak RSS.
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

# Where a profiled function's own time is counted: the first part whose marker its file or name holds.
PARTS = [
    ("SQLite", ("sqlite3",)),
    ("workload generator (simulate)", ("engine/simulate",)),
    ("transaction buffer", ("engine/buffer/",)),
    ("coordinators (TC log)", ("engine/coordinator",)),
    ("pending-ack stores", ("engine/pending_ack",)),
    ("buffered writer", ("engine/writer",)),
    ("managed ledgers", ("engine/ledger",)),
    ("store (transactions, callbacks)", ("engine/store",)),
    ("clock and timers", ("engine/clock",)),
    ("rest of the engine", ("pulsar_txn_cli/engine/",)),
]


def run(batch: bool, transactions: int, concurrency: int, subscriptions: int, seed: int, profiler=None) -> dict:
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    with tempfile.TemporaryDirectory() as tmp:
        engine = Engine.init(Path(tmp) / "engine")
        try:
            if batch:
                engine.config.set("transactionLogBatchedWriteEnabled", "true")
                engine.config.set("transactionPendingAckBatchedWriteEnabled", "true")
                engine.reload()
            options = SimOptions(
                transactions=transactions, concurrency=concurrency, subscriptions=subscriptions, seed=seed
            )
            written, start = bytes_written(), time.perf_counter()
            result = profiler.runcall(simulate, engine, options) if profiler else simulate(engine, options)
            elapsed = time.perf_counter() - start
            result["bytesWritten"] = bytes_written() - written
        finally:
            engine.close()
    result["seconds"] = elapsed
    return result


def bytes_written() -> int:
    """What this process has handed to write() so far (Linux's /proc/self/io: the WAL's pages, here)."""
    with open("/proc/self/io") as io:
        return next(int(line.split()[1]) for line in io if line.startswith("wchar:"))


def spread(values: list[float]) -> str:
    if len(values) == 1:
        return f"{values[0]:,.0f} (one run)"
    return f"{statistics.median(values):,.0f} (median of {len(values)}; {min(values):,.0f} to {max(values):,.0f})"


def profile_shares(args) -> None:
    import cProfile
    import pstats

    profiler = cProfile.Profile()
    run(True, args.transactions, args.concurrency, args.subscriptions, args.seed, profiler)
    stats = pstats.Stats(profiler).stats
    totals = dict.fromkeys([name for name, _ in PARTS] + ["Python and the rest"], 0.0)
    for (filename, _line, function), (_cc, _nc, own, _cum, _callers) in stats.items():
        where = f"{filename.replace(chr(92), '/')}:{function}"
        part = next((name for name, markers in PARTS if any(m in where for m in markers)), "Python and the rest")
        totals[part] += own
    whole = sum(totals.values()) or 1
    print("profile of the batching-on workload (own time per part, cProfile):")
    for part, seconds in sorted(totals.items(), key=lambda kv: -kv[1]):
        print(f"  {part:<34} {100 * seconds / whole:5.1f}%")


def scale(transactions: int, topics: int, concurrency: int) -> None:
    """The large simulate as `pulsar-txn` processes: wall, CPU and peak RSS of the simulate alone."""
    exe = Path(sys.executable).parent / "pulsar-txn"
    cli = [str(exe)] if exe.exists() else [sys.executable, "-m", "pulsar_txn_cli"]
    with tempfile.TemporaryDirectory() as tmp:
        where = ["--engine-dir", str(Path(tmp) / "engine")]
        for args in (
            ["engine", "init"],
            ["engine", "config", "set", "transactionLogBatchedWriteEnabled", "true"],
            ["engine", "config", "set", "transactionPendingAckBatchedWriteEnabled", "true"],
            ["engine", "reload"],
        ):
            subprocess.run([*cli, *args, *where], check=True, capture_output=True)
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        done = subprocess.run(
            [*cli, "engine", "simulate", "-n", str(transactions), "--topics", str(topics)]
            + ["--concurrency", str(concurrency), "-o", "json", *where],
            capture_output=True,
            text=True,
            check=True,
        )
        wall = time.perf_counter() - start
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        verify = subprocess.run([*cli, "engine", "verify", *where], capture_output=True, text=True)
    result = json.loads(done.stdout)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    tc = result["records"]["tc"]
    print(
        f"engine simulate: {transactions:,} txns over {topics:,} topics, concurrency {concurrency}, batching "
        f"{'on' if all(result['batching'].values()) else result['batching']}: {tc:,} TC-log records in "
        f"{result['entries']['tc']:,} entries"
    )
    # ru_maxrss of the children is the largest of them: the simulate (init, config and reload are small).
    print(f"  wall {wall:.1f} s, CPU {cpu:.1f} s, {tc / wall:,.0f} TC-log records/s wall")
    print(f"  peak RSS {after.ru_maxrss / 1024:.0f} MiB")
    print(f"  engine verify: exit {verify.returncode}, {verify.stdout.strip().splitlines()[-1:]}")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench engine")
    parser.add_argument("--transactions", type=int, default=10_000)
    parser.add_argument("--concurrency", type=int, default=200)
    parser.add_argument("--subscriptions", type=int, default=8)
    parser.add_argument("--seed", type=int, default=42)
    parser.add_argument("--repeat", type=int, default=1, help="runs per mode; rates are reported as median and range")
    parser.add_argument("--profile", action="store_true", help="also profile one batching-on run")
    parser.add_argument("--scale", action="store_true", help="only the large simulate as a process (see above)")
    parser.add_argument("--scale-transactions", type=int, default=100_000)
    parser.add_argument("--scale-topics", type=int, default=1_000)
    args = parser.parse_args(argv)
    if args.scale:
        scale(args.scale_transactions, args.scale_topics, args.concurrency)
        return
    rows = {}
    for batch in (True, False):
        runs = [
            run(batch, args.transactions, args.concurrency, args.subscriptions, args.seed) for _ in range(args.repeat)
        ]
        r = rows[batch] = runs[0]
        r["tcRates"] = [r["records"]["tc"] / x["seconds"] for x in runs]
        tc, pa = r["records"]["tc"], r["records"]["pendingAck"]
        seconds = [x["seconds"] for x in runs]
        print(
            f"batching {'on ' if batch else 'off'}: {args.transactions} txns, concurrency {args.concurrency}, "
            f"{args.subscriptions} subscriptions, {statistics.median(seconds):.2f} s (median)"
        )
        print(
            f"  TC-log records/s        {spread([tc / s for s in seconds])}   ({tc} records, {r['entries']['tc']} entries)"
        )
        print(
            f"  all log records/s       {spread([(tc + pa) / s for s in seconds])}   (+ {pa} pending-ack records, "
            f"{r['entries']['pendingAck']} entries)"
        )
        print(
            f"  entries per 1,000 records: TC {1000 * r['entries']['tc'] / max(tc, 1):.1f}, "
            f"pending ack {1000 * r['entries']['pendingAck'] / max(pa, 1):.1f}"
        )
        print(f"  add latency p50/p99 (engine ms): {r['addLatencyMs']['p50']} / {r['addLatencyMs']['p99']}")
        print(f"  written to the database files: {r['bytesWritten'] / (tc + pa):,.0f} bytes a log record")
    on, off = rows[True], rows[False]
    assert on["records"] == off["records"], "the same seed must give the same records"
    ratio = off["entries"]["tc"] / max(on["entries"]["tc"], 1)
    print(
        f"TC-log entries without / with batching: {off['entries']['tc']} / {on['entries']['tc']} = {ratio:.1f}x "
        f"(target >= 20x)"
    )
    print(f"TC-log records/s with batching: {spread(on['tcRates'])} (target >= 50,000)")
    if args.profile:
        profile_shares(args)
