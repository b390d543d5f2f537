"""Decode whole inputs: dump sources -> DecodedEntry stream, errors reported, never raised."""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps
from pulsar_txn_cli.errors import DecodeError, UsageError


@dataclass
class DecodeReport:
    total: int = 0
    failed: int = 0
    warnings: list[str] = field(default_factory=list)


def resolve_log(log: str, managed_ledger: str | None, where: str) -> str:
    if log != "auto":
        return log
    found = codec.log_of_managed_ledger(managed_ledger)
    if found is None:
        raise UsageError(
            f"cannot tell which log entry {where} comes from (no managed-ledger name in the input); "
            "pass --log tc or --log pending-ack"
        )
    return found


def decode_raw(raw: dumps.RawEntry, log: str) -> codec.DecodedEntry:
    """Decode one RawEntry; raises DecodeError located at the entry."""
    if raw.error is not None:
        raise raw.error.located(raw.where)
    try:
        entry = codec.decode_entry(raw.data, log)
    except DecodeError as exc:
        raise exc.located(raw.where) from None
    entry.ledger_id, entry.entry_id, entry.managed_ledger = raw.ledger_id, raw.entry_id, raw.managed_ledger
    return entry


def decode_sources(
    sources, log: str, report: DecodeReport, on_error: Callable[[DecodeError], None]
) -> Iterator[codec.DecodedEntry]:
    """Decode (label, path-or-stream, format) sources in order, streaming."""
    for label, src, fmt in sources:
        if isinstance(src, Path):
            with src.open("rb") as stream:
                yield from _decode_stream(stream, fmt, label, log, report, on_error)
        else:
            yield from _decode_stream(src, fmt, label, log, report, on_error)


def _decode_stream(stream, fmt, label, log, report, on_error):
    import io

    if not hasattr(stream, "peek"):
        stream = io.BufferedReader(stream) if hasattr(stream, "readinto") else stream
    for raw in dumps.read_entries(stream, fmt, source=label):
        report.total += 1
        try:
            entry = decode_raw(raw, resolve_log(log, raw.managed_ledger, raw.where))
        except DecodeError as exc:
            report.failed += 1
            on_error(exc)
            continue
        for warning in entry.warnings:
            report.warnings.append(f"entry {raw.where}: {warning}")
        yield entry


def record_table(entries):
    """One row per record: position, batch index, txn id, op, summary."""
    from pulsar_txn_cli.output import Table

    def rows():
        for entry in entries:
            position = f"{entry.ledger_id}:{entry.entry_id}" if entry.ledger_id is not None else "-"
            for index, record in enumerate(entry.records):
                yield {
                    "position": position,
                    "batch": f"{index}/{len(entry.records)}" if entry.batched else "-",
                    "txn": codec.txn_id(record),
                    "op": codec.op_name(record, entry.log),
                    "summary": codec.summarize(record, entry.log),
                }

    return Table(
        [("position", "position"), ("batch", "batch"), ("txn", "txn id"), ("op", "op"), ("summary", "summary")],
        rows(),
    )
