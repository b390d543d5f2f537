"""The brokers' buffered-writer metrics (Prometheus text), as evidence that some store on a broker batches."""

from __future__ import annotations

from pulsar_txn_cli.batchlog.logs import Log
from pulsar_txn_cli.admin.client import broker_at
from pulsar_txn_cli.errors import ConnectionFailed


def add_metrics(admin, log: Log, brokers: list[dict]) -> None:
    from pulsar_txn_cli.admin.writer_metrics import summarize

    for broker in brokers:
        url = broker_at(broker["broker"], len(brokers))
        try:
            summary = summarize(admin.metrics_text(url))
        except ConnectionFailed:
            broker["batches"] = None
            continue
        part = next((s for s in summary if s["log"] == log.kind), None)
        broker["batches"] = part["batches"] if part else 0
