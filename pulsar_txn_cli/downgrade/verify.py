"""`--verify-entries`: decode dumps of the remaining ledgers and count batched entries per ledger.

Uses the analysis pipeline's library entry point (`pipeline.analyze`, local runner): the
project's one definition of "batched entry", over any of the project's dump formats.
"""

from __future__ import annotations

from pulsar_txn_cli.downgrade.entry_scan import EntryScan
from pulsar_txn_cli.errors import EmptyInput, PulsarTxnError


def scan(paths: list[str], progress=None) -> EntryScan:
    from pulsar_txn_cli.pipeline import analysis, analyze

    try:
        report = analyze(list(paths), engine="local", progress=progress)
    except EmptyInput:
        raise  # an empty dump verifies nothing: an error, not a WAIT
    except PulsarTxnError as exc:
        return EntryScan({}, 0, 0, error=str(exc))
    batched = {}
    for name, ledgers in analysis.batched_ledgers(report).items():
        for ledger_id, count in ledgers.items():
            if ledger_id is not None:
                _, before = batched.get(ledger_id, (name, 0))
                batched[ledger_id] = (name, before + count)
    totals = report["totals"]
    return EntryScan(batched, totals["entries"], totals["decodeErrors"])
