"""PIP-160's buffered-writer metrics, from a broker's Prometheus /metrics text.

Shipped names (Pulsar's TxnLogBufferedWriterMetricsStats): `<prefix>_bufferedwriter_*` with prefixes `pulsar_txn_tc` and
`pulsar_txn_pending_ack_store`, one writer-metrics instance per broker (label `broker`).
The delay histogram's buckets are {1, 5, 10} *seconds* while delays are milliseconds, so
every sub-second delay lands in le="1"; the exact mean still follows from _sum / _count.
"""

from __future__ import annotations

import math
import re

PREFIXES = {"tc": "pulsar_txn_tc", "pending-ack": "pulsar_txn_pending_ack_store"}
TRIGGERS = {"maxRecords": "max_records", "maxSize": "max_size", "maxDelay": "max_delay", "largeData": "large_data"}
_SAMPLE = re.compile(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{(.*)\})?\s+(\S+)")
_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


WRITER = "_bufferedwriter_"  # in every buffered-writer metric's name


def parse(text: str, only: str | None = None) -> list[tuple[str, dict, float]]:
    """(name, labels, value) for every sample line; comments and malformed lines are skipped. With `only`, just
    the lines that contain it: a broker's page has samples for every topic and subscription, and at 1,000
    transactional subscriptions keeping them all (a dict of labels each) was nearly half a command's peak memory."""
    samples = []
    for line in text.splitlines():
        if not line or line.startswith("#") or (only and only not in line):
            continue
        match = _SAMPLE.match(line)
        if not match:
            continue
        name, _, labels, value = match.groups()
        try:
            number = float(value)
        except ValueError:
            continue
        samples.append((name, dict(_LABEL.findall(labels or "")), number))
    return samples


def summarize(text: str) -> list[dict]:
    """One summary per (broker label, log) that has buffered-writer metrics."""
    groups: dict[tuple[str, str], dict[str, float]] = {}
    buckets: dict[tuple[str, str], dict[float, float]] = {}
    for name, labels, value in parse(text, only=WRITER):
        for log, prefix in PREFIXES.items():
            head = f"{prefix}_bufferedwriter_"
            if not name.startswith(head):
                continue
            key = (labels.get("broker", ""), log)
            metric = name[len(head) :]
            if metric == "batch_oldest_record_delay_seconds_bucket":
                le = float("inf") if labels.get("le") in ("+Inf", "Inf") else float(labels.get("le", "nan"))
                buckets.setdefault(key, {})[le] = buckets.setdefault(key, {}).get(le, 0.0) + value
            else:
                groups.setdefault(key, {})[metric] = groups.setdefault(key, {}).get(metric, 0.0) + value
    return [
        _summary(broker, log, groups.get((broker, log), {}), buckets.get((broker, log), {}))
        for broker, log in sorted(set(groups) | set(buckets))
    ]


def _summary(broker: str, log: str, m: dict, delay_buckets: dict) -> dict:
    batches = int(m.get("batch_records_count", 0))
    records = m.get("batch_records_sum", 0.0)
    size = m.get("batch_size_bytes_sum", 0.0)
    delay_sum = m.get("batch_oldest_record_delay_seconds_sum", 0.0)
    triggers = {
        key: int(m.get(f"flush_trigger_{suffix}_total", m.get(f"flush_trigger_{suffix}", 0)))
        for key, suffix in TRIGGERS.items()
    }
    flushes = sum(triggers.values())
    within_first = delay_buckets.get(1.0, 0.0)
    delay_count = m.get("batch_oldest_record_delay_seconds_count", 0.0)
    return {
        "broker": broker,
        "log": log,
        "batches": batches,
        "records": int(records),
        "bytes": int(size),
        "avgRecordsPerBatch": _ratio(records, batches),
        "avgBytesPerBatch": _ratio(size, batches),
        "avgOldestRecordDelayMs": None if not delay_count else round(delay_sum / delay_count * 1000, 3),
        "flushTriggers": triggers,
        "flushTriggerShare": {k: _ratio(v, flushes, 4) for k, v in triggers.items()},
        # True when every observed delay sits in the first bucket (le=1 s): the histogram cannot tell them apart.
        "delayHistogramBlind": bool(delay_count) and math.isclose(within_first, delay_count),
    }


def _ratio(part: float, whole: float, digits: int = 2) -> float | None:
    return round(part / whole, digits) if whole else None


DELAY_WARNING = (
    "the delay histogram's buckets are in seconds (le=1, 5, 10) while batching delays are milliseconds, "
    "so all sub-second delays fall in le=1 and cannot be told apart; the mean from _sum/_count is exact"
)
