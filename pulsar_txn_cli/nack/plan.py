"""Steady-state memory of a nack workload in both designs, and the precision that fits a budget.

The workload is the PIP's: RATE messages a second are nacked, each held DELAY seconds; BATCH
messages share an entry (all nacked together, with the same delay); entries are consecutive and
a ledger rolls over every MAX_ENTRIES_PER_LEDGER entries. Bytes are the layout model's (layout.py).
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.nack import layout
from pulsar_txn_cli.nack.old_tracker import MIN_DELAY_MS, OldTracker

MAX_BITS = 30
SWEEP_BITS = range(0, 21)
SAMPLE_BUCKETS = 10_000
CHURN_SCALE = 20_000  # entries of the scaled-down churn run (old design)  # beyond this many buckets, evenly spaced ones stand for the rest
FILL, IDLE, INITIAL_SLOTS = 0.66, 0.15, 512
MAX_JAVA_ARRAY = 2**31 - 1
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(i?)(b?)\s*$", re.IGNORECASE)


MAX_RATE = 1e9  # nacks a second
MAX_DELAY_S = 365 * 24 * 3600


@dataclass(frozen=True)
class Workload:
    rate: float  # messages nacked a second
    delay_s: float
    bits: int = 8
    per_ledger: int = 50_000
    batch: int = 1

    def check(self) -> "Workload":
        for name, value, ok, limits in (
            # finite, and bounded far beyond any client (a billion nacks a second, a year's delay): the model's
            # integers stay integers
            ("--rate", self.rate, 0 < self.rate <= MAX_RATE, f"positive and at most {MAX_RATE:.0e}"),
            ("--delay", self.delay_s, 0 < self.delay_s <= MAX_DELAY_S, f"positive and at most {MAX_DELAY_S:,} s"),
            ("--max-entries-per-ledger", self.per_ledger, self.per_ledger >= 1, "positive"),
            ("--batch-size", self.batch, self.batch >= 1, "positive"),
            ("--precision-bits", self.bits, 0 <= self.bits <= MAX_BITS, f"between 0 and {MAX_BITS}"),
        ):
            if not ok:
                raise UsageError(f"{name} must be {limits}, not {value}")
        return self

    @property
    def delay_ms(self) -> int:
        return int(round(self.delay_s * 1000))

    @property
    def entries_per_ms(self) -> float:
        return self.rate / self.batch / 1000

    @property
    def messages(self) -> int:
        return int(round(self.rate * self.delay_s))

    @property
    def entries(self) -> int:
        return math.ceil(self.messages / self.batch)


def parse_size(text: str) -> int:
    """512MB, 2GiB, 1.5g, 800000: KB/MB/GB are powers of 1000, KiB/MiB/GiB and bare K/M/G of 1024."""
    match = _SIZE.match(text or "")
    if not match:
        raise UsageError(f"--memory-budget {text!r} is not a size such as 512MiB, 2GB or 800000")
    number, unit, binary, byte = match.groups()
    base = 1000 if (byte and not binary and unit) else 1024
    value = float(number) * base ** ("kmgt".find(unit.lower()) + 1) if unit else float(number)
    if value <= 0:
        raise UsageError(f"--memory-budget {text!r} must be more than 0 bytes")
    return int(value)


def slots_for(entries: int) -> int:
    """The table's slots once it holds `entries`: it doubles when more than 66% of them are used."""
    slots = INITIAL_SLOTS
    while entries > int(slots * FILL):
        slots *= 2
    return slots


def churned_slots(peak: int, delay_ms: int) -> int:
    """The table's slots in the steady state, tombstones included.

    A removed entry leaves a tombstone that still counts as used unless the next slot is empty, and
    the table doubles (never rehashes in place) when used slots pass the fill factor; so under churn
    it settles larger than the live entries need. The ratio depends on fractions, not on scale: the
    same workload scaled down by a power of two (to at most CHURN_SCALE entries) is run through the
    pair map for a few delays, and its settled size is scaled back up. The nack_java test holds this
    to the real client's table under the same churn.
    """
    shift = max((peak // CHURN_SCALE).bit_length(), 0)
    small_peak = max(peak >> shift, 1)
    interval = max(delay_ms, MIN_DELAY_MS) / 3
    rate_per_ms = small_peak / (delay_ms + interval)
    tracker = OldTracker(delay_ms)
    step = 1 / rate_per_ms
    for i in range(int(6 * (delay_ms + interval) * rate_per_ms)):
        now = i * step
        while tracker.timer_at is not None and tracker.timer_at <= now:
            tracker.fire(tracker.timer_at)
        tracker.add(int(now), 1000 + i // 50_000, i % 50_000, delay_ms)
    settled = max(tracker.map.slots(), slots_for(small_peak))
    return max(settled << shift, slots_for(peak))


def old_design(w: Workload) -> dict:
    interval_ms = max(w.delay_ms, MIN_DELAY_MS) / 3
    # The timer only looks every third of the delay: an entry stays until the first run after it is
    # due, so just before a run the map holds up to a third more than rate x delay.
    peak = math.ceil(w.rate * (w.delay_ms + interval_ms) / 1000 / w.batch)
    peak_slots, slots = churned_slots(peak, w.delay_ms), slots_for(w.entries)
    out = {
        "peakEntries": peak,
        "slots": peak_slots,
        "slotsWithoutTombstones": slots_for(peak),
        "timerIntervalMs": round(interval_ms),
        "maxLateMs": round(interval_ms),
        "slotsScannedPerRun": peak_slots,
        "runsPerHour": round(3_600_000 / interval_ms, 1),
    }
    if 4 * peak_slots > MAX_JAVA_ARRAY:
        return {
            **out,
            "bytes": None,
            "bytesPerEntry": None,
            "note": f"{peak_slots} slots exceed a Java array (2^31 - 1 longs): the old client cannot hold this",
        }
    at = layout.pair_map_bytes([slots])
    return {
        "bytes": layout.pair_map_bytes([peak_slots]),
        "bytesPerEntry": round(layout.pair_map_bytes([peak_slots]) / w.entries, 2),
        **out,
        "atEntries": {"entries": w.entries, "slots": slots, "bytes": at, "bytesPerEntry": round(at / w.entries, 2)},
    }


def _bucket_cost(w: Workload, bucket: int, total_entries: int) -> tuple[int, int]:
    """(bytes, ledgers) of one bucket: its entries split at ledger boundaries, one bitmap each."""
    width, rate, delay = 1 << w.bits, w.entries_per_ms, w.delay_ms
    lo = max(math.ceil((bucket * width - delay) * rate - 1e-9), 0)
    hi = min(math.ceil(((bucket + 1) * width - delay) * rate - 1e-9), total_entries)
    if hi <= lo:
        return 0, 0
    segments = []
    while lo < hi:
        end = min(hi, (lo // w.per_ledger + 1) * w.per_ledger)
        segments.append((lo % w.per_ledger, end - lo))
        lo = end
    size = layout.AVL_ENTRY + layout.open_map_bytes(len(segments))
    return size + sum(layout.roaring64_range_bytes(first, count) for first, count in segments), len(segments)


def new_design(w: Workload) -> dict:
    """The buckets of the entries nacked in one delay's worth of time (nack i at i / rate ms)."""
    width, entries = 1 << w.bits, w.entries
    first = w.delay_ms // width
    last = int((((entries - 1) / w.entries_per_ms) + w.delay_ms) // width)
    count = last - first + 1
    step = max(count / SAMPLE_BUCKETS, 1)
    picked = sorted({first + int(k * step) for k in range(min(count, SAMPLE_BUCKETS))})
    costs = [_bucket_cost(w, b, entries) for b in picked]
    scale = count / len(picked)
    size = layout.AVL_MAP + layout.AVL_KEY_SET + layout.ROARING64_SHARED + round(sum(c for c, _ in costs) * scale)
    used = sum(1 for _, n in costs if n)  # at low rates and fine precision most buckets stay empty
    return {
        "bytes": size,
        "bytesPerEntry": round(size / entries, 3),
        "buckets": round(used * scale),
        "ledgers": round(sum(n for _, n in costs) * scale),
        "bucketMs": width,
        "entriesPerBucket": round(entries / max(used * scale, 1), 1),
        "maxEarlyMs": width - 1,
        "maxLateMs": 0,
        "runsPerHour": round(3_600_000 / width, 1),
        "sampledBuckets": len(picked),
    }


def plan(w: Workload, budget: int | None = None) -> dict:
    w.check()
    before, after = old_design(w), new_design(w)
    result = {
        "workload": {
            "ratePerS": w.rate,
            "delayS": w.delay_s,
            "precisionBits": w.bits,
            "maxEntriesPerLedger": w.per_ledger,
            "batchSize": w.batch,
        },
        "messages": w.messages,
        "entries": w.entries,
        "before": before,
        "after": after,
        "maxEarlyMs": after["maxEarlyMs"],
        "saving": round(before["bytes"] / after["bytes"], 1) if before["bytes"] else None,
    }
    sweep = [_sweep_row(w, bits, budget) for bits in SWEEP_BITS]
    result["precisions"] = sweep
    if budget is not None:
        fitting = [row["bits"] for row in sweep if row["fits"]]
        result["budget"] = {
            "bytes": budget,
            "recommendedPrecisionBits": fitting[0] if fitting else None,
            "fits": bool(fitting),
        }
    return result


def _sweep_row(w: Workload, bits: int, budget: int | None) -> dict:
    after = new_design(Workload(w.rate, w.delay_s, bits, w.per_ledger, w.batch))
    return {
        "bits": bits,
        "bucketMs": after["bucketMs"],
        "bytes": after["bytes"],
        "bytesPerEntry": after["bytesPerEntry"],
        "buckets": after["buckets"],
        "maxEarlyMs": after["maxEarlyMs"],
        "fits": None if budget is None else after["bytes"] <= budget,
    }
