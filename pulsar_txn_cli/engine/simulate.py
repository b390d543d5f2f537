"""A seeded, reproducible transactional workload on the engine's clock.

Closed-loop clients: `concurrency` transactions are in flight; each issues its next request a
short think time after the previous one was acknowledged, so requests from many transactions
meet in the same batch exactly as on a broker. A transaction: NEW, ADD_PARTITION for the
partitions it produces to, ADD_SUBSCRIPTION + a transactional ACK per subscription, then
commit or abort (UPDATE to COMMITTING/ABORTING, COMMIT/ABORT in the pending-ack stores, UPDATE
to COMMITTED/ABORTED); a timed-out one stops and the coordinator aborts it at its timeout.
"""
from __future__ import annotations

import random
from dataclasses import dataclass

from pulsar_txn_cli.errors import EngineError, InterruptedWork, UsageError
from pulsar_txn_cli.names import expand_partitions

SIM_NAMESPACE = "public/default"


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
        raise EngineError("transactions are disabled on this engine (transactionCoordinatorEnabled=false); "
                          "`pulsar-txn engine config set transactionCoordinatorEnabled true` and `engine reload`")
    rng = random.Random(opts.seed)
    clock = engine.clock
    parts = partition_names(opts)
    subs = [(parts[j % len(parts)], f"sim-sub-{j}") for j in range(opts.subscriptions)]
    for topic in topic_names(opts):
        engine.register_topic(topic, opts.partitions if opts.partitions > 1 else 0)
    tcs = engine.all_tcs()
    pa_stores = {}

    def store_of(pair):
        s = pa_stores.get(pair)
        if s is None:
            s = pa_stores[pair] = engine.pending_ack(*pair)
        return s

    writers_before = _writer_counts(engine)
    triggers_before = _triggers(engine)
    ack_log = open(opts.ack_log, "a", buffering=1) if opts.ack_log else None
    latencies: list[int] = []
    counts = {"committed": 0, "aborted": 0, "timedOut": 0, "failed": 0}
    started = [0]
    finished = [0]
    think = opts.think_us_max

    def log(line: str) -> None:
        if ack_log is not None:
            ack_log.write(line + "\n")
            ack_log.flush()

    def start_next() -> None:
        if started[0] >= opts.transactions:
            return
        index = started[0]
        started[0] += 1
        run_txn(index)

    def done_txn(outcome: str) -> None:
        counts[outcome] += 1
        finished[0] += 1
        if progress is not None:
            progress(finished[0])
        clock.call_at(clock.now_us + rng.randint(1, think), start_next)

    def run_txn(index: int) -> None:
        tc = tcs[index % len(tcs)]
        # Each transaction's plan comes from its own generator, so the same seed gives the same
        # transactions whatever the batching (which changes the order things happen in).
        plan = random.Random(opts.seed * 1_000_003 + index)
        produce = plan.sample(parts, min(len(parts), plan.randint(0, 2)))
        acked = plan.sample(subs, min(len(subs), plan.randint(1, 2)))
        acks_per_sub = [plan.randint(1, 3) for _ in acked]
        roll = plan.random()
        outcome = "timedOut" if roll < opts.timeout_ratio else ("aborted" if roll < opts.timeout_ratio + opts.abort_ratio else "committed")
        steps = [("part", p) for p in produce]
        for pair, k in zip(acked, acks_per_sub):
            steps.append(("sub", pair))
            steps.append(("ack", pair, k))
        state = {"least": None, "i": 0}

        def failed(exc) -> None:
            done_txn("failed")

        def timed(fn):
            issued = clock.now_us

            def cb(result):
                latencies.append(clock.now_us - issued)
                fn(result)

            return cb

        def later(fn) -> None:
            clock.call_at(clock.now_us + rng.randint(1, think), fn)

        def next_step(_=None) -> None:
            i = state["i"]
            least = state["least"]
            if i < len(steps):
                state["i"] = i + 1
                step = steps[i]
                if step[0] == "part":
                    def produced(pos, topic=step[1]):
                        engine.buffers.produce(topic, (tc.tc_id, least))  # the transaction's message
                        later(next_step)

                    tc.add_partitions(least, [step[1]], timed(produced), failed)
                elif step[0] == "sub":
                    tc.add_subscriptions(least, [step[1]], timed(lambda pos: later(next_step)), failed)
                else:
                    store = store_of(step[1])
                    store.ack(tc.tc_id, least, store.take_messages(step[2]), timed(lambda pos: later(next_step)), failed)
                return
            if outcome == "timedOut":
                # The client walks away; the coordinator aborts at the timeout.
                clock.call_at((clock.now_ms + opts.txn_timeout_ms + 1) * 1000, expire)
                done_txn("timedOut")
                return
            log(f"end {tc.tc_id} {least}")
            engine.end_transaction(tc.tc_id, least, outcome == "committed", timed(lambda pos: done_txn(outcome)), failed)

        def created(least: int) -> None:
            state["least"] = least
            log(f"new {tc.tc_id} {least}")
            later(next_step)

        tc.new_transaction(opts.txn_timeout_ms, timed(created), failed)

    def expire() -> None:
        engine.expire_transactions(on_expire=lambda tc_id, least: log(f"end {tc_id} {least}"))

    start_us = clock.now_us
    try:
        for _ in range(min(opts.concurrency, opts.transactions)):
            clock.call_at(clock.now_us + rng.randint(1, think), start_next)
        clock.run_until_idle()
        expire()
        engine.checkpoint()
    except KeyboardInterrupt:
        raise InterruptedWork(_interrupted(opts, started[0], counts)) from None
    finally:
        if ack_log is not None:
            ack_log.close()
    writers_after = _writer_counts(engine)
    triggers_after = _triggers(engine)
    latencies.sort()
    return {
        "transactions": opts.transactions,
        "committed": counts["committed"],
        "aborted": counts["aborted"],
        "timedOut": counts["timedOut"],
        "failed": counts["failed"],
        "records": {k: writers_after[k][0] - writers_before[k][0] for k in ("tc", "pendingAck")},
        "entries": {k: writers_after[k][1] - writers_before[k][1] for k in ("tc", "pendingAck")},
        "flushTriggers": {k: triggers_after[k] - triggers_before[k] for k in triggers_after},
        "addLatencyMs": {"p50": _percentile(latencies, 0.50), "p99": _percentile(latencies, 0.99)},
        "virtualMs": (clock.now_us - start_us) / 1000.0,
        "seed": opts.seed,
        "batching": {
            "tc": any(tc.writer.batch_enabled for tc in tcs),
            "pendingAck": any(s.writer.batch_enabled for s in pa_stores.values()),
        },
    }


def _interrupted(opts: SimOptions, started: int, counts: dict) -> str:
    """What a Ctrl-C in the middle of a workload kept, and how to end what it left open."""
    ended = counts["committed"] + counts["aborted"]
    left = started - ended - counts["failed"]
    return (
        f"interrupted (Ctrl-C) after {ended} of {opts.transactions} transactions had ended ({counts['committed']} committed, "
        f"{counts['aborted']} aborted); the engine keeps what it had acknowledged, as a crashed broker would, so up to "
        f"{left} started transaction{'' if left == 1 else 's'} may be left open: `pulsar-txn slow-transactions --time 0` "
        "lists them, `pulsar-txn abort-transaction` ends one, and the next `engine simulate` aborts those whose "
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
