"""collect's own cost per ledger: the part that is not BookKeeper's shell.

    .venv/bin/python -m bench collect [--entries=N] [--rounds=R]

Builds the shell's text for one ledger of N unbatched TC-log entries (default 50,000, the size of
docs/collect.md's fleet), then times what collect does with it: parse the readledger text, check
the entry ids, turn each entry into a JSONL line and write the dump atomically. CPU time of this
process (best of R rounds), so the load of a shared machine does not count. The shell's own time
per ledger is printed by the real-broker test (tests/integration/test_collect_real_broker.py).
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
        record = codec.TcRecord(metadata_op=i % 4, txnid_most_bits=1, txnid_least_bits=i // 4,
                                last_modification_time=1_763_770_000_000 + i)
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
    print(f"collect's own work for one ledger of {args.entries:,} entries ({len(text) / 1e6:.1f} MB of shell text): "
          f"{best:.2f} s CPU, {best / args.entries * 1e6:.1f} µs per entry (best of {args.rounds})")
