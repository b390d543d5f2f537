"""`pulsar-txn metrics`: PIP-160's buffered-writer metrics per broker, summarised."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current


def register(app: typer.Typer) -> None:
    command(app, "metrics", target=True)(metrics)


def metrics(
    broker: Annotated[
        Optional[list[str]],
        typer.Option(
            "--broker",
            help="A broker's web URL to scrape; repeatable (default: every broker of the target's cluster).",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Scrape /metrics and summarise the batched writers: batches, records and bytes per batch, flush triggers.

    The metrics are per broker (one writer-metrics instance per broker), not per coordinator, so
    every broker of the cluster is scraped and named (`scraped`).
    """
    from pulsar_txn_cli.admin.writer_metrics import DELAY_WARNING, summarize
    from pulsar_txn_cli.output import Result, Table, emit
    from pulsar_txn_cli.output.table import percent

    env = current()
    admin = env.admin()
    summaries = []
    if not broker:
        every = admin.broker_web_urls()
        broker = every if len(every) > 1 else None  # one broker: through the admin URL (a proxy may hide it)
    for url in broker or [None]:
        for summary in summarize(admin.metrics_text(url)):
            summaries.append({"scraped": url or admin.target.describe(), **summary})
    if not summaries:
        env.info(
            "no buffered-writer metrics found: batching has not written anything yet, or transactions are disabled"
        )
    if any(s["delayHistogramBlind"] for s in summaries):
        env.warn(DELAY_WARNING)
    rows = [{**s, **{f"share_{k}": percent(v) for k, v in s["flushTriggerShare"].items()}} for s in summaries]
    columns = [
        ("broker", "broker"),
        ("log", "log"),
        ("batches", "batches"),
        ("avgRecordsPerBatch", "records/batch"),
        ("avgBytesPerBatch", "bytes/batch"),
        ("avgOldestRecordDelayMs", "avg delay ms"),
        ("share_maxRecords", "by records"),
        ("share_maxSize", "by size"),
        ("share_maxDelay", "by delay"),
        ("share_largeData", "by large data"),
    ]
    emit(Result(data=summaries, tables=[Table(columns, rows)]), env)
