"""collect's own cost per ledger: the part that is not BookKeeper's shell.

    .venv/bin/python -m bench collect [--entries=N] [--rounds=R] [--fixed-seconds=F] [--read-ms=R] [--ledgers=L]

Builds the shell's text for one ledger of N unbatched TC-log entries (default 50,000, the size of
docs/collect.md's fleet), then times what collect does with it: parse the readledger text, check
the entry ids, turn each entry into a JSONL line and write the dump atomically. CPU time of this
process (best of R rounds), so the load of a shared machine does not count. The shell's own time
per ledger is printed by the real-broker test (tests/integration/test_collect_real_broker.py).

Then docs/collect.md's estimate for a fleet of L ledgers of N entries, from the measured cost per
entry and two stated assumptions: F seconds fixed per ledger (a JVM start and the metadata
connection; default 2.4, the quiet figure of docs/real-broker-findings.md) and R ms per entry for
BookieShell's sequential reads (default 1.0, an assumption to replace with a fleet's measurement).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

TC_ML = "pulsar/system/persistent/__transaction_log_0"


def ledger_text(entries: int) -> str:
    from pulsar_txn_cli import codec
    from pulsar_txn_cli.codec.readledger import format_entry

    parts = []
    for i in range(entries):
        record = codec.TcRecord(
            metadata_op=i % 4, txnid_most_bits=1, txnid_least_bits=i // 4, last_modification_time=1_763_770_000_000 + i
        )
        parts.append(format_entry(7, i, codec.encode_single(record)))
    return "".join(parts)


def main(argv: list[str]) -> None:
    from pulsar_txn_cli.collect.plan import LedgerTask
    from pulsar_txn_cli.collect.run import _lines
    from pulsar_txn_cli.collect.shell import entries
    from pulsar_txn_cli.collect.sink import LocalDir

    parser = argparse.ArgumentParser(prog="bench collect")
    parser.add_argument("--entries", type=int, default=50_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--fixed-seconds", type=float, default=2.4)
    parser.add_argument("--read-ms", type=float, default=1.0)
    parser.add_argument("--ledgers", type=int, default=1000)
    args = parser.parse_args(argv)
    text = ledger_text(args.entries)
    task = LedgerTask(TC_ML, "tc", 7, args.entries, False)
    best = None
    with tempfile.TemporaryDirectory() as tmp:
        sink = LocalDir(Path(tmp))
        for _ in range(args.rounds):
            t0 = time.process_time()
            found = entries(iter(text.splitlines(keepends=True)), 7, args.entries, False)
            sink.write_ledger(task, _lines(task, found, {"entries": 0, "bytes": 0}))
            spent = time.process_time() - t0
            best = spent if best is None else min(best, spent)
    print(
        f"collect's own work for one ledger of {args.entries:,} entries ({len(text) / 1e6:.1f} MB of shell text): "
        f"{best:.2f} s CPU, {best / args.entries * 1e6:.1f} µs per entry (best of {args.rounds})"
    )
    per_entry = best / args.entries
    per_ledger = args.fixed_seconds + args.entries * (args.read_ms / 1000 + per_entry)
    print(
        f"estimate for {args.ledgers:,} ledgers of {args.entries:,} entries: {per_ledger:.1f} s per ledger "
        f"(F {args.fixed_seconds:g} s + {args.entries:,} x ({args.read_ms:g} ms read + {per_entry * 1e6:.1f} µs own work))"
    )
    for n in (1, 4, 16, 50, 100):
        print(
            f"  {n:>3} concurrent shells: {_duration(args.ledgers * per_ledger / n)}, about {0.3 * n:.1f} GB for the shells' JVMs"
        )


def _duration(seconds: float) -> str:
    if seconds >= 3600:
        return f"{seconds / 3600:.1f} h"
    return f"{seconds / 60:.0f} min"
