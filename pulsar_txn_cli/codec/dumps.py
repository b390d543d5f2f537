"""Dump formats: where entry bytes come from.

- raw:        a file that is one entry's bytes.
- hex/base64: one entry per non-empty line.
- readledger: the text of `bookkeeper shell readledger -m -ef hex` (see readledger.py).
- jsonl:      the project's dump format, one entry a line:
              {"managedLedger": "...", "ledgerId": L, "entryId": E, "data": "<base64>"}

Readers yield RawEntry objects; an entry that cannot be read carries its error instead of
data, so one bad entry never hides the rest. Nothing here raises for bad input.
"""

from __future__ import annotations

import base64
import binascii
import re
from typing import IO, Iterable, Iterator

try:
    import orjson
except ImportError:  # a Spark executor's Python that cannot load the shipped orjson (pipeline/ship.py)
    import json as orjson  # the same entries; only a malformed line's message is worded otherwise

from pulsar_txn_cli.codec.entries import RawEntry
from pulsar_txn_cli.errors import DecodeError, EmptyInput

FORMATS = ("auto", "raw", "hex", "base64", "readledger", "jsonl")
HEAD_SIZE = 65536  # auto-detection looks at this much of an input

_HEX_LINE = re.compile(r"^(?:0[xX])?[0-9A-Fa-f\s]+$")
_B64_LINE = re.compile(r"^[A-Za-z0-9+/_-]+={0,2}$")
# Control bytes other than whitespace never occur in the text formats.
_BINARY = re.compile(rb"[\x00-\x08\x0e-\x1f\x7f]")


def check_not_empty(path, label: str, fmt: str = "auto") -> None:
    """The one rule for inputs that hold no entries (decode, analyze, downgrade check
    --verify-entries): raise EmptyInput naming the input, before any work. Empty means 0 bytes
    or, except for raw input, only whitespace (blank lines)."""
    import os

    size = os.path.getsize(path)
    if size == 0 or (fmt not in ("raw", "parquet") and size <= HEAD_SIZE and _blank(path)):
        raise EmptyInput(label, "it is empty")


def _blank(path) -> bool:
    with open(path, "rb") as f:
        return not f.read().strip()


def detect_format(head: bytes) -> str | None:
    """Guess the format from the start of an input; None when it looks like no known format.

    Binary bytes mean raw. Otherwise the first non-empty line decides (a readledger header or
    HexDump row anywhere in the head also means readledger, since log lines may come first).
    Hex wins over base64 when a line could be both.
    """
    from pulsar_txn_cli.codec import readledger

    if not head.strip():
        return "raw"
    if _BINARY.search(head):
        return "readledger" if readledger.HEADER.search(head.decode("utf-8", "replace")) else "raw"
    text = head.decode("utf-8", "replace")
    first = next(line.strip() for line in text.splitlines() if line.strip())
    if first.startswith("{"):
        return "jsonl"
    if readledger.looks_like(text, first):
        return "readledger"
    if _HEX_LINE.match(first):
        return "hex"
    if _B64_LINE.match(first):
        return "base64"
    return None


def read_entries(stream: IO[bytes], fmt: str = "auto", source: str | None = None) -> Iterator[RawEntry]:
    """Entries from a binary stream in the given format (auto detects from the first 64 KiB)."""
    head = stream.read(HEAD_SIZE)
    if not head.strip():  # an empty input yields nothing; callers apply empty_input()
        if fmt == "raw" and head:
            yield RawEntry(head, 0, source=source)
        return
    if fmt == "auto":
        fmt = detect_format(head)
        if fmt is None:
            where = source or "the input"
            yield RawEntry(
                None,
                0,
                source=source,
                error=DecodeError(
                    f"cannot tell the format of {where}: its first line is not hex, base64, JSON or readledger "
                    "output; pass --format"
                ),
            )
            return
    if fmt == "raw":
        yield RawEntry(head + stream.read(), 0, source=source)
        return
    yield from PARSERS[fmt](_lines(head, stream), source)


def _lines(head: bytes, stream: IO[bytes]) -> Iterator[bytes]:
    """The lines of head + the rest of stream, read in large chunks (line endings dropped)."""
    pending = head
    while chunk := stream.read(1 << 20):
        pending += chunk
        *lines, pending = pending.split(b"\n")
        yield from lines
    yield from pending.split(b"\n")


def entries_from_text(text: str, fmt: str = "auto", source: str | None = None) -> Iterator[RawEntry]:
    """Entries from text already in memory (same rules as read_entries)."""
    import io

    return read_entries(io.BytesIO(text.encode()), fmt, source)


def _str(line) -> str:
    return line if isinstance(line, str) else line.decode("utf-8", "replace")


def parse_hex(lines: Iterable, source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for line in lines:
        text = "".join(_str(line).split())
        if not text:
            continue
        if text[:2] in ("0x", "0X"):
            text = text[2:]
        entry = RawEntry(None, index, source=source)
        index += 1
        try:
            entry.data = bytes.fromhex(text)
        except ValueError:
            bad = next((i for i, c in enumerate(text) if c not in "0123456789abcdefABCDEF"), None)
            if bad is None:
                reason = f"the line has an odd number of hex digits ({len(text)})"
            else:
                reason = f"the line is not hexadecimal ({text[bad]!r} at character {bad + 1})"
            entry.error = DecodeError(reason)
        yield entry


def parse_base64(lines: Iterable, source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for line in lines:
        text = _str(line).strip()
        if not text:
            continue
        entry = RawEntry(None, index, source=source)
        index += 1
        try:
            entry.data = _b64(text)
        except (binascii.Error, ValueError) as exc:
            entry.error = DecodeError(f"the line is not valid base64 ({exc})")
        yield entry


def _b64(text: str) -> bytes:
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return base64.b64decode(text, validate=True)


def parse_jsonl(lines: Iterable, source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry = RawEntry(None, index, source=source)
        index += 1
        try:
            obj = orjson.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("it is not a JSON object")
            name = obj.get("managedLedger")
            if name is not None and not isinstance(name, str):
                raise ValueError('"managedLedger" is not a string')
            entry.managed_ledger = name
            entry.ledger_id = _int_or_none(obj.get("ledgerId"), "ledgerId")
            entry.entry_id = _int_or_none(obj.get("entryId"), "entryId")
            data = obj.get("data")
            if not isinstance(data, str):
                raise ValueError('it has no "data" string')
            entry.data = base64.b64decode(data, validate=True)
        except orjson.JSONDecodeError as exc:
            entry.error = DecodeError(f"{_line_of(source, number)} is not JSON ({exc})")
        except (ValueError, binascii.Error) as exc:
            entry.error = DecodeError(f"{_line_of(source, number)} is not a dump line: {exc}")
        yield entry


def _line_of(source: str | None, number: int) -> str:
    return f"line {number}" + (f" of {source}" if source else "")


def _int_or_none(value, name: str) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f'"{name}" is not an integer: {value!r}')
    return value


def parse_readledger(lines: Iterable, source: str | None = None) -> Iterator[RawEntry]:
    from pulsar_txn_cli.codec import readledger

    return readledger.parse(map(_str, lines), source)


PARSERS = {
    "hex": parse_hex,
    "base64": parse_base64,
    "jsonl": parse_jsonl,
    "readledger": parse_readledger,
}


def dump_object(managed_ledger: str | None, ledger_id: int | None, entry_id: int | None, data: bytes) -> dict:
    """One entry of the project's dump format, as an object."""
    return {
        "managedLedger": managed_ledger,
        "ledgerId": ledger_id,
        "entryId": entry_id,
        "data": base64.b64encode(data).decode("ascii"),
    }


def dump_line(managed_ledger: str | None, ledger_id: int | None, entry_id: int | None, data: bytes) -> str:
    """One line of the project's JSONL dump format (without the newline)."""
    return orjson.dumps(dump_object(managed_ledger, ledger_id, entry_id, data)).decode()
