"""Decode whole inputs: dump sources -> DecodedEntry stream; bad entries are reported, not raised.

The stream never stops because of one bad entry: each failure goes to `on_error` and the next
entry is decoded. With `strict`, or when the log of an entry cannot be told, the stream ends
cleanly and `report.stopped` says why, so a caller can still close its JSON array. An input
that holds no entries stops it too (EmptyInput): an empty input is an error, not an empty result.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable, Iterator

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps
from pulsar_txn_cli.errors import DecodeError, EmptyInput, PulsarTxnError, UsageError


@dataclass
class DecodeReport:
    total: int = 0  # entries met
    failed: int = 0
    records: int = 0
    warnings: list[str] = field(default_factory=list)
    stopped: PulsarTxnError | None = None  # why the stream ended early, if it did


@dataclass
class Source:
    label: str  # how messages name it: a path, "stdin", "--hex"
    input: object  # a Path or a binary stream
    format: str = "auto"


def resolve_log(log: str, managed_ledger: str | None, where: str, force: bool = False) -> str:
    found = codec.log_of_managed_ledger(managed_ledger)
    if log != "auto":
        if found is not None and found != log and not force:
            raise UsageError(contradiction(log, managed_ledger, f"entry {where}"))
        return log
    if found is None:
        if managed_ledger:
            reason = (
                f"its managed ledger {managed_ledger!r} is neither a TC log (…/__transaction_log_N) "
                "nor a pending-ack log (…__transaction_pending_ack)"
            )
        else:
            reason = "the input names no managed ledger (only the JSONL dump format does)"
        raise UsageError(
            f"cannot tell which log entry {where} comes from: {reason}; pass --log tc or --log pending-ack"
        )
    return found


def contradiction(log: str, managed_ledger: str, what: str) -> str:
    """The message for a --log that the input's own managed-ledger name contradicts."""
    return (
        f"--log {log} contradicts {what}: its managed ledger {managed_ledger!r} is a "
        f"{codec.log_of_managed_ledger(managed_ledger)} log; drop --log, or add --force-log to decode it as {log} anyway"
    )


def decode_raw(raw: dumps.RawEntry, log: str) -> codec.DecodedEntry:
    """Decode one RawEntry; raises DecodeError located at the entry."""
    if raw.error is not None:
        raise raw.error.located(raw.where)
    try:
        entry = codec.decode_entry(raw.data, log)
    except DecodeError as exc:
        raise exc.located(raw.where) from None
    entry.ledger_id, entry.entry_id, entry.managed_ledger = raw.ledger_id, raw.entry_id, raw.managed_ledger
    entry.where = raw.where
    if raw.warnings:
        entry.warnings[:0] = raw.warnings
    return entry


def decode_sources(
    sources: list[Source],
    log: str,
    report: DecodeReport,
    on_error: Callable[[DecodeError], None],
    on_warning: Callable[[str], None] | None = None,
    strict: bool = False,
    force_log: bool = False,
) -> Iterator[codec.DecodedEntry]:
    """Decode sources in order, streaming; see the module docstring for the error rules."""
    for source in sources:
        try:
            stream = source.input.open("rb") if isinstance(source.input, Path) else source.input
        except OSError as exc:
            error = DecodeError(f"cannot read {source.label}: {exc.strerror or exc}")
            report.total += 1
            report.failed += 1
            on_error(error)
            if strict:
                report.stopped = error
                return
            continue
        try:
            before = report.total
            for raw in dumps.read_entries(stream, source.format, source=source.label):
                report.total += 1
                try:
                    # An unreadable entry is reported as such, before asking which log it is from.
                    entry_log = (
                        log if raw.error is not None else resolve_log(log, raw.managed_ledger, raw.where, force_log)
                    )
                    entry = decode_raw(raw, entry_log)
                except UsageError as exc:
                    report.stopped = exc
                    return
                except DecodeError as exc:
                    report.failed += 1
                    on_error(exc)
                    if strict:
                        report.stopped = exc
                        return
                    continue
                report.records += len(entry.records)
                for warning in entry.warnings:
                    message = f"entry {raw.where}: {warning}"
                    report.warnings.append(message)
                    if on_warning is not None:
                        on_warning(message)
                yield entry
            if report.total == before:
                report.stopped = EmptyInput(source.label)
                return
        finally:
            if stream is not source.input:
                stream.close()


def record_rows(entries) -> Iterator[dict]:
    """One table row per record: position, batch index, txn id, op, summary."""
    for entry in entries:
        position = entry.where or "-"
        count = len(entry.records)
        for index, record in enumerate(entry.records):
            yield {
                "position": position,
                "batch": f"{index}/{count}" if entry.batched else "-",
                "txn": codec.txn_id(record),
                "op": codec.op_name(record, entry.log),
                "summary": codec.summarize(record, entry.log),
            }
