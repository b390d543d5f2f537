"""`pulsar-txn decode`: ledger entries of the TC log or a pending-ack log, batched or not."""
from __future__ import annotations

import sys
from pathlib import Path
from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import DataError, ExitCode, UsageError

LOG_CHOICES = ("auto", "tc", "pending-ack")


def register(app: typer.Typer) -> None:
    command(app, "decode")(decode)


def decode(
    inputs: Annotated[Optional[list[str]], typer.Argument(metavar="[FILE]...", help="Dump files, or - for stdin.", show_default=False)] = None,
    hex_: Annotated[Optional[str], typer.Option("--hex", help="One entry as hexadecimal.", show_default=False)] = None,
    base64_: Annotated[Optional[str], typer.Option("--base64", help="One entry as base64.", show_default=False)] = None,
    fmt: Annotated[str, typer.Option("--format", "-f", help="Input format: auto, raw, hex, base64, readledger (readledger -m -ef hex output) or jsonl (the project's dump format).")] = "auto",
    log: Annotated[str, typer.Option("--log", help="Which log the bytes come from: tc, pending-ack, or auto (from the managed-ledger name in the input).")] = "auto",
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first entry that cannot be decoded.")] = False,
) -> None:
    """Decode transaction-log entries (batched 0x0E01 entries and single records).

    Every bad entry is reported on stderr with its position; the others are still decoded and
    the exit code is 3 when any entry failed.
    """
    from pulsar_txn_cli.codec import decoding, dumps
    from pulsar_txn_cli.output import Result, emit

    env = current()
    if log not in LOG_CHOICES:
        raise UsageError(f"--log must be one of {', '.join(LOG_CHOICES)}, not {log!r}")
    dumps.require_format(fmt)
    sources = _sources(inputs or [], hex_, base64_, fmt)
    report = decoding.DecodeReport()

    def on_error(error) -> None:
        env.warn(str(error))
        if strict:
            raise DataError(f"stopped at the first bad entry (--strict): {error}")

    stream = decoding.decode_sources(sources, log, report, on_error=on_error)
    if env.output == "table":
        emit(Result(data=None, tables=lambda: [decoding.record_table(stream)]), env)
    else:
        from pulsar_txn_cli.codec import entry_to_json

        jsons = (entry_to_json(entry) for entry in stream)
        if env.output == "jsonl":
            emit(Result(data=None, records=jsons), env)
        else:
            emit(Result(data=jsons), env)
    for warning in report.warnings:
        env.warn(warning)
    if report.failed:
        env.info(f"{report.failed} of {report.total} entries could not be decoded")
        raise typer.Exit(int(ExitCode.DATA))


def _sources(inputs: list[str], hex_: str | None, base64_: str | None, fmt: str):
    """(label, binary stream, format) for every input, in the order given."""
    import io

    sources = []
    if hex_ is not None:
        sources.append(("--hex", io.BytesIO(hex_.encode()), "hex"))
    if base64_ is not None:
        sources.append(("--base64", io.BytesIO(base64_.encode()), "base64"))
    for name in inputs:
        if name == "-":
            sources.append(("stdin", sys.stdin.buffer, fmt))
            continue
        path = Path(name)
        if not path.is_file():
            raise UsageError(f"cannot read {name}: no such file")
        sources.append((name, path, fmt))
    if not sources:
        if sys.stdin.isatty():
            raise UsageError("nothing to decode: give files, - for stdin, --hex or --base64")
        sources.append(("stdin", sys.stdin.buffer, fmt))
    return sources
