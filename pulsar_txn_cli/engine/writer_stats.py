"""TxnLogBufferedWriterMetricsStats as Pulsar exports it, cumulative across CLI invocations.

Two process-wide instances, prefixes `pulsar_txn_tc` and `pulsar_txn_pending_ack_store`, with
Pulsar's buckets (the delay histogram's {1, 5, 10} are seconds, so sub-second delays all land
in le="1", as on a real broker). Labels are cluster and broker.
"""

from __future__ import annotations

import bisect

import orjson

from pulsar_txn_cli.protocol import camel

TC_PREFIX = "pulsar_txn_tc"
PENDING_ACK_PREFIX = "pulsar_txn_pending_ack_store"
PREFIXES = (TC_PREFIX, PENDING_ACK_PREFIX)

HISTOGRAMS = {
    "batch_records": ((10, 50, 100, 200, 500, 1000), "Records per batch histogram"),
    "batch_size_bytes": ((128, 512, 1024, 2048, 4096, 16384, 102400, 1232896), "Batch size in bytes histogram"),
    "batch_oldest_record_delay_seconds": ((1, 5, 10), "Max record latency in batch histogram"),
}
COUNTERS = {
    "max_records": "Event count of batch flush triggered by max records count",
    "max_size": "Event count of batch flush triggered by max bytes size",
    "max_delay": "Event count of batch flush triggered by max delay time",
    "large_data": "Event count of batch flush triggered by the single large data write",
}
TRIGGERS = tuple(COUNTERS)


class WriterMetrics:
    """One prefix's counters and histograms (plain lists so they persist as JSON)."""

    def __init__(self, owner, prefix: str, state: dict | None = None):
        self.owner = owner
        self.prefix = prefix
        state = state or {}
        self.counters = {t: int(state.get("counters", {}).get(t, 0)) for t in TRIGGERS}
        self.hist = {}
        for name, (buckets, _) in HISTOGRAMS.items():
            h = state.get("hist", {}).get(name)
            if not h or len(h["buckets"]) != len(buckets) + 1:
                h = {"buckets": [0] * (len(buckets) + 1), "sum": 0.0, "count": 0}
            self.hist[name] = h

    def trigger(self, trigger: str, records: int, size: int, delay_ms: float) -> None:
        self.counters[trigger] += 1
        self._observe("batch_records", records)
        self._observe("batch_size_bytes", size)
        self._observe("batch_oldest_record_delay_seconds", delay_ms / 1000.0)
        self.owner.changed()

    def _observe(self, name: str, value: float) -> None:
        h = self.hist[name]
        h["buckets"][bisect.bisect_left(HISTOGRAMS[name][0], value)] += 1
        h["sum"] += value
        h["count"] += 1

    def state(self) -> dict:
        return {"counters": self.counters, "hist": self.hist}


class Metrics:
    """Both instances; saved in the meta table before each commit that changed them."""

    def __init__(self, store, cluster: str, broker: str):
        self.store = store
        self.cluster = cluster
        self.broker = broker
        saved = orjson.loads(store.meta("metrics") or "{}")
        self.created_ms = int(saved.get("createdMs", 0))
        self.writers = {p: WriterMetrics(self, p, saved.get(p)) for p in PREFIXES}

    @property
    def tc(self) -> WriterMetrics:
        return self.writers[TC_PREFIX]

    @property
    def pending_ack(self) -> WriterMetrics:
        return self.writers[PENDING_ACK_PREFIX]

    def changed(self) -> None:
        self.store.dirty(self)

    def save(self) -> None:
        state = {p: w.state() for p, w in self.writers.items()}
        state["createdMs"] = self.created_ms
        self.store.set_meta("metrics", orjson.dumps(state).decode())

    def restart(self, now_ms: int) -> None:
        """A broker restart: its metrics start again from zero, with `_created` at the restart (Prometheus'
        simpleclient counters live in the broker's process)."""
        self.created_ms = now_ms
        self.writers = {p: WriterMetrics(self, p) for p in PREFIXES}
        self.store.dirty(self)

    def reset(self) -> None:
        self.writers = {p: WriterMetrics(self, p) for p in PREFIXES}
        self.store.dirty(self)
        self.store.save_all()

    def summary(self) -> dict:
        """A compact JSON view (camelCase keys): per log, the trigger counters and histogram sums/counts."""
        return {
            log: {
                "metricPrefix": p,
                "flushTriggers": {camel(t): n for t, n in w.counters.items()},
                **{camel(name): {"sum": h["sum"], "count": h["count"]} for name, h in w.hist.items()},
            }
            for log, (p, w) in zip(("tc", "pendingAck"), self.writers.items())
        }

    def prometheus(self) -> str:
        """Prometheus text exposition, as the broker's /metrics servlet writes these families."""
        labels = f'cluster="{_esc(self.cluster)}",broker="{_esc(self.broker)}"'
        created = java_double(self.created_ms / 1000.0)
        out: list[str] = []
        for prefix, w in self.writers.items():
            for name, (buckets, _help) in HISTOGRAMS.items():
                full = f"{prefix}_bufferedwriter_{name}"
                h = w.hist[name]
                out.append(f"# TYPE {full} histogram")
                running = 0
                for bound, count in zip([*buckets, None], h["buckets"]):
                    running += count
                    le = "+Inf" if bound is None else f"{float(bound)}"
                    out.append(f'{full}_bucket{{{labels},le="{le}"}} {float(running)}')
                out.append(f"{full}_count{{{labels}}} {float(h['count'])}")
                out.append(f"{full}_sum{{{labels}}} {float(h['sum'])}")
                out.append(f"{full}_created{{{labels}}} {created}")
            for trigger, _help in COUNTERS.items():
                full = f"{prefix}_bufferedwriter_flush_trigger_{trigger}"
                out.append(f"# TYPE {full} counter")
                out.append(f"{full}_total{{{labels}}} {float(w.counters[trigger])}")
                out.append(f"{full}_created{{{labels}}} {created}")
        return "\n".join(out) + "\n"


def java_double(value: float) -> str:
    """Java's Double.toString, as the Prometheus simpleclient prints samples (1.795312910881E9)."""
    if value == 0 or 1e-3 <= abs(value) < 1e7:
        text = repr(float(value))
        return text if "e" not in text else text
    from decimal import Decimal

    sign, digits, exponent = Decimal(repr(float(value))).as_tuple()
    digits = "".join(map(str, digits)).rstrip("0") or "0"
    power = len("".join(map(str, Decimal(repr(float(value))).as_tuple().digits))) + exponent - 1
    mantissa = digits[0] + "." + (digits[1:] or "0")
    return ("-" if sign else "") + f"{mantissa}E{power}"


def _esc(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
