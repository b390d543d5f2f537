"""A seeded, reproducible transactional workload on the engine's clock.

Closed-loop clients: `concurrency` transactions are in flight; each issues its next request a
short think time after the previous one was acknowledged, so requests from many transactions
meet in the same batch exactly as on a broker. A transaction: NEW, ADD_PARTITION for the
partitions it produces to, ADD_SUBSCRIPTION + a transactional ACK per subscription, then
commit or abort (UPDATE to COMMITTING/ABORTING, COMMIT/ABORT in the pending-ack stores, UPDATE
to COMMITTED/ABORTED); a timed-out one stops and the coordinator aborts it at its timeout.
"""

from __future__ import annotations

import gc
import random
from dataclasses import dataclass

from pulsar_txn_cli.errors import EngineError, InterruptedWork, UsageError
from pulsar_txn_cli.names import expand_partitions

SIM_NAMESPACE = "public/default"
SIM_PAYLOAD = b"simulated"


@dataclass
class SimOptions:
    transactions: int = 1000
    concurrency: int = 50
    topics: int = 4
    partitions: int = 1
    subscriptions: int = 8
    abort_ratio: float = 0.1
    timeout_ratio: float = 0.0
    seed: int = 1
    txn_timeout_ms: int = 10_000
    think_us_max: int = 500
    ack_log: str | None = None

    def check(self) -> None:
        for name in ("transactions", "topics", "partitions", "subscriptions", "concurrency"):
            value = getattr(self, name)
            if value < (0 if name == "transactions" else 1):
                raise UsageError(f"--{name} must be at least {0 if name == 'transactions' else 1}, not {value}")
        for name in ("abort_ratio", "timeout_ratio"):
            value = getattr(self, name)
            if not 0.0 <= value <= 1.0:
                raise UsageError(f"--{name.replace('_', '-')} must be between 0 and 1, not {value}")
        if self.abort_ratio + self.timeout_ratio > 1.0:
            raise UsageError("--abort-ratio plus --timeout-ratio must not exceed 1")
        if self.txn_timeout_ms < 1:
            raise UsageError("--txn-timeout-ms must be at least 1")


def topic_names(opts: SimOptions) -> list[str]:
    return [f"persistent://{SIM_NAMESPACE}/sim-topic-{i}" for i in range(opts.topics)]


def partition_names(opts: SimOptions) -> list[str]:
    out = []
    for topic in topic_names(opts):  # --partitions 1 is a non-partitioned topic
        out += expand_partitions(topic, opts.partitions if opts.partitions > 1 else 0)
    return out


def _percentile(sorted_values: list[int], q: float) -> float:
    if not sorted_values:
        return 0.0
    i = min(len(sorted_values) - 1, int(q * len(sorted_values)))
    return sorted_values[i] / 1000.0


def simulate(engine, opts: SimOptions, progress=None) -> dict:
    opts.check()
    if not engine.enabled:
        raise EngineError(
            "transactions are disabled on this engine (transactionCoordinatorEnabled=false); "
            "`pulsar-txn engine config set transactionCoordinatorEnabled true` and `engine reload`"
        )
    return Workload(engine, opts, progress).run()


class Workload:
    """One run of closed-loop clients on the engine's clock: what they share (random source,
    counters, latencies, the ack log) lives here; each transaction is a _Transaction."""

    def __init__(self, engine, opts: SimOptions, progress=None):
        self.engine = engine
        self.opts = opts
        self.progress = progress
        self.clock = engine.clock
        self.rng = random.Random(opts.seed)
        # randint(1, m) is 1 + _randbelow(m) (random.py): the same numbers without randint's checks,
        # which cost more than the engine work of a request.
        self._randbelow = self.rng._randbelow
        self.partitions = partition_names(opts)
        self.subscriptions = [
            (self.partitions[j % len(self.partitions)], f"sim-sub-{j}") for j in range(opts.subscriptions)
        ]
        self.coordinators: list = []
        self.pending_acks: dict = {}
        self.latencies: list[int] = []
        self.counts = {"committed": 0, "aborted": 0, "timedOut": 0, "failed": 0}
        self.started = 0
        self.finished = 0
        self.ack_log = None

    def run(self) -> dict:
        engine, opts, clock = self.engine, self.opts, self.clock
        for topic in topic_names(opts):
            engine.register_topic(topic, opts.partitions if opts.partitions > 1 else 0)
        self.ack_log = open(opts.ack_log, "a", buffering=1) if opts.ack_log else None
        # Also what a coordinator's load aborts: transactions a killed run left open past their timeout.
        engine.on_timeout = lambda tc_id, least: self.log(f"end {tc_id} {least}")
        self.coordinators = engine.all_tcs()
        writers_before, triggers_before = _writer_counts(engine), _triggers(engine)
        start_us = clock.now_us
        # The engine's long-lived objects (loaded ledgers, configuration, modules) need no cycle
        # collection: frozen, they are not traversed again by each collection during the run.
        gc.freeze()
        thresholds = gc.get_threshold()
        gc.set_threshold(20_000, 20, 20)
        try:
            for _ in range(min(opts.concurrency, opts.transactions)):
                self.later(self.start_next)
            clock.run_until_idle()
            self.expire()
            engine.checkpoint()
        except KeyboardInterrupt:
            raise InterruptedWork(_interrupted(opts, self.started, self.counts)) from None
        finally:
            gc.set_threshold(*thresholds)
            gc.unfreeze()
            engine.on_timeout = None
            if self.ack_log is not None:
                self.ack_log.close()
        return self.summary(writers_before, triggers_before, start_us)

    # -- what the clients share ------------------------------------------------------------------

    def later(self, fn) -> None:
        """Run fn after a client's think time."""
        clock = self.clock
        clock.call_at(clock.now_us + 1 + self._randbelow(self.opts.think_us_max), fn)

    def log(self, line: str) -> None:
        if self.ack_log is not None:
            self.ack_log.write(line + "\n")
            self.ack_log.flush()

    def pending_ack(self, pair):
        store = self.pending_acks.get(pair)
        if store is None:
            store = self.pending_acks[pair] = self.engine.pending_ack(*pair)
        return store

    def start_next(self) -> None:
        if self.started >= self.opts.transactions:
            return
        index = self.started
        self.started += 1
        _Transaction(self, index).begin()

    def done(self, outcome: str) -> None:
        self.counts[outcome] += 1
        self.finished += 1
        if self.progress is not None:
            self.progress(self.finished)
        self.later(self.start_next)

    def expire(self) -> None:
        self.engine.expire_transactions()

    def summary(self, writers_before: dict, triggers_before: dict, start_us: int) -> dict:
        writers_after, triggers_after = _writer_counts(self.engine), _triggers(self.engine)
        latencies = sorted(self.latencies)
        return {
            "transactions": self.opts.transactions,
            "committed": self.counts["committed"],
            "aborted": self.counts["aborted"],
            "timedOut": self.counts["timedOut"],
            "failed": self.counts["failed"],
            "records": {k: writers_after[k][0] - writers_before[k][0] for k in ("tc", "pendingAck")},
            "entries": {k: writers_after[k][1] - writers_before[k][1] for k in ("tc", "pendingAck")},
            "flushTriggers": {k: triggers_after[k] - triggers_before[k] for k in triggers_after},
            "addLatencyMs": {"p50": _percentile(latencies, 0.50), "p99": _percentile(latencies, 0.99)},
            "virtualMs": (self.clock.now_us - start_us) / 1000.0,
            "seed": self.opts.seed,
            "batching": {
                "tc": any(tc.writer.batch_enabled for tc in self.coordinators),
                "pendingAck": any(s.writer.batch_enabled for s in self.pending_acks.values()),
            },
        }


class _Transaction:
    """One client's transaction: NEW, its steps one after another, then the end (or walking away)."""

    def __init__(self, workload: Workload, index: int):
        opts = workload.opts
        self.workload = workload
        self.tc = workload.coordinators[index % len(workload.coordinators)]
        # Each transaction's plan comes from its own generator, so the same seed gives the same
        # transactions whatever the batching (which changes the order things happen in).
        plan = random.Random(opts.seed * 1_000_003 + index)
        below = plan._randbelow  # randint(a, b) is a + _randbelow(b - a + 1), as in later()
        produce = plan.sample(workload.partitions, min(len(workload.partitions), below(3)))
        acked = plan.sample(workload.subscriptions, min(len(workload.subscriptions), 1 + below(2)))
        acks_per_sub = [1 + below(3) for _ in acked]
        roll = plan.random()
        self.outcome = (
            "timedOut"
            if roll < opts.timeout_ratio
            else "aborted"
            if roll < opts.timeout_ratio + opts.abort_ratio
            else "committed"
        )
        self.steps = [("part", p) for p in produce]
        for pair, k in zip(acked, acks_per_sub):
            self.steps += [("sub", pair), ("ack", pair, k)]
        self.least = None
        self.next = 0
        self.issued = 0  # when the request in flight was issued (one at a time: a closed loop)
        self.topic = ""  # the partition of the ADD_PARTITION in flight

    def _issued(self) -> None:
        self.issued = self.workload.clock.now_us

    def _acked(self) -> None:
        w = self.workload
        w.latencies.append(w.clock.now_us - self.issued)

    def begin(self) -> None:
        self._issued()
        self.tc.new_transaction(self.workload.opts.txn_timeout_ms, self.created, self.failed)

    def created(self, least: int) -> None:
        self._acked()
        self.least = least
        self.workload.log(f"new {self.tc.tc_id} {least}")
        self.workload.later(self.step)

    def failed(self, exc) -> None:
        self.workload.done("failed")

    def step(self, _=None) -> None:
        if self.next < len(self.steps):
            step = self.steps[self.next]
            self.next += 1
            self._issue(step)
        else:
            self._end()

    def _issue(self, step) -> None:
        tc, least = self.tc, self.least
        self._issued()
        if step[0] == "part":
            self.topic = step[1]
            tc.add_partitions(least, [step[1]], self._produced, self.failed)
        elif step[0] == "sub":
            tc.add_subscriptions(least, [step[1]], self._stepped, self.failed)
        else:
            store = self.workload.pending_ack(step[1])
            store.ack(tc.tc_id, least, store.take_messages(step[2]), self._stepped, self.failed)

    def _produced(self, pos) -> None:
        self._acked()
        w = self.workload
        # The transaction's message, as produce() writes it (without the text of its position).
        w.engine.buffers.publish(self.topic, SIM_PAYLOAD, (self.tc.tc_id, self.least))
        w.later(self.step)

    def _stepped(self, pos) -> None:
        self._acked()
        self.workload.later(self.step)

    def _ended(self, pos) -> None:
        self._acked()
        self.workload.done(self.outcome)

    def _end(self) -> None:
        w = self.workload
        if self.outcome == "timedOut":
            # The client walks away; the coordinator aborts at the timeout.
            w.clock.call_at((w.clock.now_ms + w.opts.txn_timeout_ms + 1) * 1000, w.expire)
            w.done("timedOut")
            return
        w.log(f"end {self.tc.tc_id} {self.least}")
        self._issued()
        w.engine.end_transaction(self.tc.tc_id, self.least, self.outcome == "committed", self._ended, self.failed)


def _interrupted(opts: SimOptions, started: int, counts: dict) -> str:
    """What a Ctrl-C in the middle of a workload kept, and how to end what it left open."""
    ended = counts["committed"] + counts["aborted"]
    left = started - ended - counts["failed"]
    return (
        f"interrupted (Ctrl-C) after {ended} of {opts.transactions} transactions had ended ({counts['committed']} committed, "
        f"{counts['aborted']} aborted); the engine keeps what it had acknowledged, as a crashed broker would, so up to "
        f"{left} started transaction{'' if left == 1 else 's'} may be left open: `pulsar-txn slow-transactions --time 0` "
        "lists them, `pulsar-txn abort-transaction -m MOST -l LEAST --yes` ends one (MOST and LEAST from that "
        "listing), and the next `engine simulate` aborts those whose "
        "timeout has passed"
    )


def _writer_counts(engine) -> dict:
    tc = [0, 0]
    pa = [0, 0]
    for c in engine.coordinators.values():
        if c.writer is not None:
            tc[0] += c.writer.records_written
            tc[1] += c.writer.entries_written
    for s in engine.pending_acks.values():
        if s.writer is not None:
            pa[0] += s.writer.records_written
            pa[1] += s.writer.entries_written
    return {"tc": tc, "pendingAck": pa}


_TRIGGER_KEYS = {"maxRecords": "max_records", "maxSize": "max_size", "maxDelay": "max_delay", "largeData": "large_data"}


def _triggers(engine) -> dict:
    return {k: engine.metrics.tc.counters[v] + engine.metrics.pending_ack.counters[v] for k, v in _TRIGGER_KEYS.items()}
