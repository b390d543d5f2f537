"""`pulsar-txn decode`: ledger entries of the TC log or a pending-ack log, batched or not."""

from __future__ import annotations

import sys
from enum import Enum
from pathlib import Path
from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import DataError, EmptyInput, UsageError


class InputFormat(str, Enum):
    auto = "auto"
    raw = "raw"
    hex = "hex"
    base64 = "base64"
    readledger = "readledger"
    jsonl = "jsonl"


class LogChoice(str, Enum):
    auto = "auto"
    tc = "tc"
    pending_ack = "pending-ack"


def register(app: typer.Typer) -> None:
    command(app, "decode")(decode)


def decode(
    inputs: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="FILE",
            help="Dump files, or - for stdin (the default when stdin is not a terminal).",
            show_default=False,
        ),
    ] = None,
    hex_: Annotated[
        Optional[list[str]], typer.Option("--hex", help="One entry as hexadecimal (repeatable).", show_default=False)
    ] = None,
    base64_: Annotated[
        Optional[list[str]], typer.Option("--base64", help="One entry as base64 (repeatable).", show_default=False)
    ] = None,
    fmt: Annotated[
        InputFormat,
        typer.Option(
            "--format",
            "-f",
            help="Format of the files: auto (detect), raw (one entry's bytes), hex or base64 (one entry a line), readledger (`bookkeeper shell readledger -m -ef hex` output) or jsonl (the project's dump format).",
        ),
    ] = InputFormat.auto,
    log: Annotated[
        LogChoice,
        typer.Option(
            "--log",
            help="Which log the bytes come from: tc, pending-ack, or auto (from the managed-ledger name of JSONL dumps).",
        ),
    ] = LogChoice.auto,
    force_log: Annotated[
        bool,
        typer.Option(
            "--force-log", help="Decode as --log says even where the input's managed-ledger name says the other log."
        ),
    ] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Stop at the first entry that cannot be decoded.")] = False,
) -> None:
    """Decode transaction-log entries: PIP-160 batched entries (0x0E01) and single records.

    Every bad entry is reported on stderr with its position and byte offset; the other entries
    are still decoded, and the exit code is 3 when any entry failed. An input that holds no
    entries is an error too (exit 3).
    """
    from pulsar_txn_cli.codec import decoding
    from pulsar_txn_cli.output import Result, emit

    env = current()
    sources = _sources(inputs or [], hex_ or [], base64_ or [], fmt.value)
    if log is LogChoice.auto and all(source.format in ("hex", "base64", "raw", "readledger") for source in sources):
        raise UsageError(
            "cannot tell which log the entries come from: only JSONL dumps name their managed ledger; "
            "pass --log tc or --log pending-ack"
        )
    report = decoding.DecodeReport()

    def on_error(error) -> None:
        print(f"error: {error}", file=env.stderr)

    stream = decoding.decode_sources(
        sources, log.value, report, on_error=on_error, on_warning=env.warn, strict=strict, force_log=force_log
    )
    stream = _primed(stream, report)
    if stream is None:  # not one entry decoded: an error (exit 3), never "(none)" or [] on stdout
        _finish(report, strict, env)
        raise DataError("the input holds no entries")
    if env.output == "table":
        emit(Result(data=None, tables=lambda: [_record_table(decoding.record_rows(stream))]), env)
    else:
        from pulsar_txn_cli.codec import entry_to_json

        if env.output == "jsonl":  # compact lines: the records may come rendered natively
            emit(Result(data=None, records=(entry_to_json(entry, compact=True) for entry in stream)), env)
        else:
            emit(Result(data=map(entry_to_json, stream)), env)
    _finish(report, strict, env)


def _record_table(rows):
    from pulsar_txn_cli.output import Table

    return Table(
        [("position", "position"), ("batch", "batch"), ("txn", "txn id"), ("op", "op"), ("summary", "summary")], rows
    )


def _primed(stream, report):
    """The stream, with its first entry already decoded: a --log that the input contradicts (or
    cannot be told) stops the command before anything is written to stdout."""
    import itertools

    first = next(stream, None)
    if isinstance(report.stopped, (UsageError, EmptyInput)):
        raise report.stopped
    return None if first is None else itertools.chain([first], stream)


def _finish(report, strict: bool, env) -> None:
    if isinstance(report.stopped, (UsageError, EmptyInput)):
        raise report.stopped
    if report.stopped is not None and strict:
        raise DataError(
            f"stopped at the first entry that could not be decoded (--strict), after {_count(report.total - 1, 'good entry', 'good entries')}"
        )
    if report.failed and report.failed == report.total == 1:
        raise DataError("")  # its one entry's error, already printed, is the whole story
    if report.failed:
        good = report.total - report.failed
        rest = f"; the other {_count(good, 'was', 'were')} decoded" if good else ""
        raise DataError(f"{report.failed} of {report.total} entries could not be decoded{rest}")
    if report.total:
        env.info(f"decoded {_count(report.total, 'entry', 'entries')} ({_count(report.records, 'record', 'records')})")


def _count(n: int, one: str, many: str) -> str:
    return f"{n} {one if n == 1 else many}"


def _sources(inputs: list[str], hex_: list[str], base64_: list[str], fmt: str):
    """The inputs in the order given on the command line (options first)."""
    import io

    from pulsar_txn_cli.codec.decoding import Source
    from pulsar_txn_cli.codec.dumps import check_not_empty

    # All --hex values form one input (one entry a line), so they are numbered --hex #1, #2...
    sources = [
        Source(flag, io.BytesIO("\n".join(values).encode()), fmt_)
        for flag, values, fmt_ in (("--hex", hex_, "hex"), ("--base64", base64_, "base64"))
        if values
    ]
    for name in inputs:
        if name == "-":
            sources.append(Source("stdin", sys.stdin.buffer, fmt))
            continue
        path = Path(name)
        if not path.exists():
            raise UsageError(f"cannot read {name}: no such file")
        if path.is_dir():
            raise UsageError(f"cannot read {name}: it is a directory")
        check_not_empty(path, name, fmt)
        sources.append(Source(name, path, fmt))
    if not sources:
        if sys.stdin.isatty():
            raise UsageError("nothing to decode: give files, - for stdin, --hex or --base64")
        sources.append(Source("stdin", sys.stdin.buffer, fmt))
    return sources
