"""PIP-393's two tracker models: inserts/s, timer runs/s, and memory (modelled Java heap, Python RSS).

Workload: the PIP's 10,000 nacks/s held 1 h, precision 8 bits, one message an entry, 50,000
entries a ledger. The first N entries of it are inserted for real into both Python structures
(1 M by default; `--full` adds 10 M); 36 M (the PIP's hour) is computed by `nack plan`'s model,
since inserting it in pure Python would take minutes and gigabytes.
"""

from __future__ import annotations

import gc
import os
import time

RATE, DELAY_MS, BITS, PER_LEDGER = 10_000, 3_600_000, 8, 50_000


def _rss() -> int:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def _fill(tracker, count: int) -> float:
    started = time.perf_counter()
    add = tracker.add
    for i in range(count):
        add(i // 10, 1000 + i // PER_LEDGER, i % PER_LEDGER, DELAY_MS)  # 10 a ms: 10,000/s
    return count / (time.perf_counter() - started)


def _make(design: str):
    from pulsar_txn_cli.nack.new_tracker import NewTracker
    from pulsar_txn_cli.nack.old_tracker import OldTracker

    return OldTracker(DELAY_MS) if design == "old" else NewTracker(BITS)


def _measure(design: str, count: int) -> dict:
    """Run in a fresh interpreter (spawn), so the RSS growth is this structure's alone."""
    import pulsar_txn_cli.nack.new_tracker  # noqa: F401  (imports before the baseline)
    import pyroaring  # noqa: F401

    gc.collect()
    before = _rss()
    tracker = _make(design)
    rate = _fill(tracker, count)
    rss, java = _rss() - before, tracker.java_bytes()
    started, runs = time.perf_counter(), 0
    while (
        runs < 3 or time.perf_counter() - started < 1.0
    ):  # timer runs that find nothing due yet (old) / one bucket (new)
        tracker.fire(DELAY_MS - 1 + runs * (1 << BITS) if hasattr(tracker, "bits") else 0)
        runs += 1
        if runs >= 50:
            break
    fires = runs / (time.perf_counter() - started)
    return {"inserts_per_s": rate, "fires_per_s": fires, "java": java, "rss": rss}


def main(argv: list[str]) -> None:
    import multiprocessing

    from pulsar_txn_cli.nack.plan import Workload, new_design, old_design

    sizes = [100_000] if "--quick" in argv else [1_000_000] + ([10_000_000] if "--full" in argv else [])
    print(
        f"{'entries':>10} {'design':>7} {'inserts/s':>10} {'timer runs/s':>13} {'Java bytes':>14} {'B/entry':>8} {'Python RSS':>12}"
    )
    for count in sizes:
        for name in ("old", "new"):
            with multiprocessing.get_context("spawn").Pool(1) as pool:
                m = pool.apply(_measure, (name, count))
            print(
                f"{count:>10} {name:>7} {m['inserts_per_s']:>10.0f} {m['fires_per_s']:>13.2f} {m['java']:>14} "
                f"{m['java'] / count:>8.2f} {m['rss'] / 2**20:>10.0f} MiB"
            )
    for count in (1_000_000, 10_000_000, 36_000_000):
        w = Workload(RATE, count / RATE, BITS, PER_LEDGER, 1)
        old, new = old_design(w)["atEntries"], new_design(w)  # count entries, no churn
        print(
            f"{count:>10} modelled: old {old['bytes']:>13} B ({old['bytesPerEntry']} B/entry, {old['slots']} slots), "
            f"new {new['bytes']:>11} B ({new['bytesPerEntry']} B/entry, {new['buckets']} buckets)"
        )
