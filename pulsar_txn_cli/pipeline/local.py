"""The local runner: one Python process, streaming, memory bounded by the number of managed
ledgers and ledgers (never by the number of entries or records)."""

from __future__ import annotations

import os

from pulsar_txn_cli.pipeline import analysis, inputs
from pulsar_txn_cli.pipeline.facts import entry_facts


def run(files: list[inputs.InputFile], *, managed_ledger=None, forced_log=None, progress=None) -> dict:
    """Analyze the files; `progress` (optional) has advance(n bytes) and update(total=...)."""
    aggregator = analysis.Aggregator()
    add = aggregator.add
    if progress is not None:
        progress.update(total=sum(os.path.getsize(f.path) for f in files))
    advance = progress.advance if progress is not None else None
    for f in files:
        for ml, lid, eid, data, where, error in inputs.read(f, managed_ledger, advance):
            add(entry_facts(ml, lid, eid, data, where, error, forced_log))
    rows, by_ml, total, samples = aggregator.state()
    return analysis.build_report(rows, by_ml, total, samples, forced_log=forced_log, inputs=describe(files))


def describe(files) -> list[dict]:
    return [{"path": f.label, "format": f.fmt} for f in files]
