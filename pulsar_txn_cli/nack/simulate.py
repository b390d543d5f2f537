"""Drive both trackers with one generated nack workload on a simulated clock, and measure them.

Entries arrive at RATE / BATCH a second; every message of an entry is nacked when the entry
arrives, each with a delay drawn from DELAYS (two delays into one entry is the PIP's batch
problem). Each timer runs when it is due. A nack's redelivery is the timer run that sends the
record holding it (old: its entry's slot, which a later nack of the same entry overwrites; new:
its bucket's bit), and its error is that time minus the time asked for (negative: early). In the
new design a redelivery is per entry, so a message can also come back early with a sibling of its
batch that was due sooner; those are counted apart (`earlyWithSibling`).
"""

from __future__ import annotations

import random
import time
from collections import defaultdict
from dataclasses import dataclass

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.nack.new_tracker import NewTracker
from pulsar_txn_cli.nack.old_tracker import OldTracker

MAX_MESSAGES = 5_000_000
FIRST_LEDGER = 1000


@dataclass(frozen=True)
class SimWorkload:
    rate: float
    delays_ms: tuple[int, ...]
    duration_s: float
    bits: int = 8
    per_ledger: int = 50_000
    batch: int = 1
    samples: int = 20
    seed: int = 1

    def check(self) -> "SimWorkload":
        if self.rate <= 0 or self.duration_s <= 0 or not self.delays_ms or min(self.delays_ms) <= 0:
            raise UsageError("--rate, --duration and every --delay must be positive")
        if not 0 <= self.bits <= 30 or self.batch < 1 or self.per_ledger < 1 or self.samples < 1:
            raise UsageError(
                "--precision-bits must be 0 to 30, and --batch-size, --max-entries-per-ledger and --samples at least 1"
            )
        if self.rate * self.duration_s > MAX_MESSAGES:
            raise UsageError(
                f"--rate x --duration is {self.rate * self.duration_s:.0f} messages; the simulation takes at most "
                f"{MAX_MESSAGES} (use `nack plan` for larger workloads)"
            )
        return self


class _Design:
    """One tracker with the bookkeeping of its nacks' redeliveries."""

    def __init__(self, tracker, width_ms: int):
        self.tracker, self.width_ms = tracker, width_ms
        self.by_record: dict = defaultdict(list)  # record key -> nack indexes it holds
        self.by_entry: dict = defaultdict(set)  # entry -> nack indexes not yet redelivered
        self.redelivered_at: dict[int, float] = {}
        self.early_with_sibling = 0
        self.ticks: list[tuple[float, int]] = []  # (seconds, work: slots or buckets)

    def add(self, index: int, now: int, ledger: int, entry: int, delay: int) -> None:
        record = self.tracker.add(now, ledger, entry, delay)
        self.by_record[(ledger, entry) if record is None else record].append(index)
        self.by_entry[(ledger, entry)].add(index)

    def fire(self, at: float, due: list[float]) -> None:
        started = time.perf_counter()
        run = self.tracker.fire(at)
        spent = time.perf_counter() - started
        records = getattr(run, "buckets", None)
        self.ticks.append((spent, run.scanned if records is None else len(records)))
        for key in run.entries if records is None else records:
            for index in self.by_record.pop(key, ()):
                self.redelivered_at[index] = at
        for key in run.entries:
            waiting = {i for i in self.by_entry.pop(key, ()) if i not in self.redelivered_at}
            self.early_with_sibling += sum(1 for i in waiting if due[i] - at >= self.width_ms)
            if waiting:
                self.by_entry[key] = waiting


def simulate(w: SimWorkload) -> dict:
    w.check()
    rng = random.Random(w.seed)
    old, new = _Design(_OldRecords(w.delays_ms[0]), 1), _Design(NewTracker(w.bits), 1 << w.bits)
    entry_every_ms = w.batch * 1000 / w.rate
    entries = max(int(w.duration_s * 1000 / entry_every_ms), 1)
    every = max(entries // w.samples, 1)
    due: list[float] = []
    memory = []
    for j in range(entries):
        now = int(j * entry_every_ms)
        _run_timers((old, new), now, due)
        ledger, entry = FIRST_LEDGER + j // w.per_ledger, j % w.per_ledger
        for _ in range(w.batch):
            delay = rng.choice(w.delays_ms)
            due.append(now + delay)
            old.add(len(due) - 1, now, ledger, entry, delay)
            new.add(len(due) - 1, now, ledger, entry, delay)
        if (j + 1) % every == 0 or j == entries - 1:
            memory.append(_sample(now, old.tracker, new.tracker))
    _run_timers((old, new), float("inf"), due)
    return {
        "workload": {
            "ratePerS": w.rate,
            "delaysMs": list(w.delays_ms),
            "durationS": w.duration_s,
            "precisionBits": w.bits,
            "maxEntriesPerLedger": w.per_ledger,
            "batchSize": w.batch,
            "seed": w.seed,
        },
        "messages": len(due),
        "entries": entries,
        "memory": memory,
        "peak": {
            "beforeBytes": max(m["beforeBytes"] for m in memory),
            "afterBytes": max(m["afterBytes"] for m in memory),
        },
        "timer": {"before": _timer(old, "slotsScanned"), "after": _timer(new, "bucketsRedelivered")},
        "error": {"before": _errors(old, due), "after": _errors(new, due)},
        "batchProblem": batch_problem(w.bits),
    }


class _OldRecords(OldTracker):
    """The old tracker, returning None from add: its record is the entry itself."""

    def add(self, now_ms, ledger, entry, delay_ms):
        super().add(now_ms, ledger, entry, delay_ms)
        return None


def _run_timers(designs, until: float, due: list[float]) -> None:
    """Fire every due timer up to `until`, earliest first, each at its own time."""
    while True:
        pending = [(d.tracker.timer_at, i) for i, d in enumerate(designs) if d.tracker.timer_at is not None]
        if not pending or min(pending)[0] > until:
            return
        at, i = min(pending)
        designs[i].fire(at, due)


def _sample(now: int, old, new) -> dict:
    return {
        "atS": round(now / 1000, 3),
        "beforeBytes": old.java_bytes(),
        "beforeEntries": len(old),
        "afterBytes": new.java_bytes(),
        "afterBuckets": len(new.buckets),
        "afterEntries": len(new),
    }


def _timer(design: _Design, work: str) -> dict:
    ticks = design.ticks
    spent = [s for s, _ in ticks]
    return {
        "runs": len(ticks),
        "meanMs": round(1000 * sum(spent) / len(ticks), 4) if ticks else 0,
        "maxMs": round(1000 * max(spent), 4) if ticks else 0,
        work + "PerRun": round(sum(n for _, n in ticks) / len(ticks), 1) if ticks else 0,
    }


def _errors(design: _Design, due: list[float]) -> dict:
    errors = sorted(design.redelivered_at[i] - due[i] for i in range(len(due)))
    pick = lambda q: round(errors[min(int(q * len(errors)), len(errors) - 1)], 1)  # noqa: E731
    return {
        "minMs": round(errors[0], 1),
        "p1Ms": pick(0.01),
        "p50Ms": pick(0.5),
        "p99Ms": pick(0.99),
        "maxMs": round(errors[-1], 1),
        "late": sum(1 for e in errors if e > 0),
        "early": sum(1 for e in errors if e < 0),
        "earlyWithSibling": design.early_with_sibling,
    }


def batch_problem(bits: int = 8) -> list[dict]:
    """Two messages of one entry nacked at 0 for 10 s and 20 s, in both orders: when each comes back."""
    rows = []
    for order in ((10_000, 20_000), (20_000, 10_000)):
        for name, tracker in (("before", OldTracker(10_000)), ("after", NewTracker(bits))):
            for delay in order:
                tracker.add(0, 7, 3, delay)
            first_timer = tracker.timer_at
            runs = []
            while tracker.timer_at is not None:
                run = tracker.fire(tracker.timer_at)
                if run.entries:
                    runs.append(run.at_ms)
            rows.append(
                {
                    "order": "10s then 20s" if order[0] < order[1] else "20s then 10s",
                    "design": name,
                    "firstTimerMs": round(first_timer),
                    "entryRedeliveredAtMs": [round(r) for r in runs],
                    "msg10sLateMs": round(runs[0] - 10_000),
                    "msg20sFirstBackMs": round(runs[0]),
                }
            )
    return rows
