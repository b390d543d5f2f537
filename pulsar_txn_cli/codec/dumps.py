"""Dump formats: where entry bytes come from.

- raw:        a file that is one entry's bytes.
- hex/base64: one entry per non-empty line.
- readledger: the text of `bookkeeper shell readledger -m -ef hex` (headers may carry a log
              prefix; other log lines may be interleaved).
- jsonl:      the project's dump format, one entry a line:
              {"managedLedger": "...", "ledgerId": L, "entryId": E, "data": "<base64>"}

Readers yield RawEntry objects; an entry that cannot be read carries its error instead of
data, so one bad entry never hides the rest.
"""
from __future__ import annotations

import base64
import binascii
import re
from dataclasses import dataclass
from typing import IO, Iterable, Iterator

import orjson

from pulsar_txn_cli.errors import DataError, DecodeError

FORMATS = ("auto", "raw", "hex", "base64", "readledger", "jsonl")

_HEADER = re.compile(r"-{5,} Lid=(?P<lid>[^,\s]+), Eid=(?P<eid>-?\d+)(?:, EntrySize=(?P<size>\d+))? -{5,}")
_HEX_ROW = re.compile(r"^(?P<offset>[0-9A-Fa-f]{8}) (?P<rest>.*)$")
_HEX_CHARS = re.compile(rb"^[0-9A-Fa-f\s]+$")
_B64_CHARS = re.compile(rb"^[A-Za-z0-9+/=\s_-]+$")


@dataclass(slots=True)
class RawEntry:
    data: bytes | None
    index: int  # 0-based position in the input
    ledger_id: int | None = None
    entry_id: int | None = None
    managed_ledger: str | None = None
    error: DecodeError | None = None
    source: str | None = None

    @property
    def where(self) -> str:
        if self.ledger_id is not None and self.entry_id is not None:
            return f"{self.ledger_id}:{self.entry_id}"
        prefix = f"{self.source} " if self.source else ""
        return f"{prefix}#{self.index + 1}"


def detect_format(head: bytes) -> str:
    """Guess the format from the first bytes of an input."""
    text = head.lstrip()
    if not text:
        return "raw"
    if text.startswith(b"{"):
        return "jsonl"
    if b"Lid=" in head and b"Eid=" in head:
        return "readledger"
    if _HEX_CHARS.match(text):
        return "hex"
    if _B64_CHARS.match(text):
        return "base64"
    return "raw"


def read_entries(stream: IO[bytes], fmt: str = "auto", source: str | None = None) -> Iterator[RawEntry]:
    """Entries from a binary stream in the given format (auto detects from the first 64 KiB)."""
    if fmt == "auto":
        head = stream.peek(65536)[:65536] if hasattr(stream, "peek") else b""
        if not head:
            data = stream.read()
            fmt = detect_format(data[:65536])
            yield from _read_bytes(data, fmt, source)
            return
        fmt = detect_format(head)
    if fmt == "raw":
        yield RawEntry(stream.read(), 0, source=source)
        return
    lines = (line.decode("utf-8", "replace") for line in stream)
    yield from _PARSERS[fmt](lines, source)


def _read_bytes(data: bytes, fmt: str, source: str | None) -> Iterator[RawEntry]:
    if fmt == "raw":
        yield RawEntry(data, 0, source=source)
        return
    yield from _PARSERS[fmt](data.decode("utf-8", "replace").splitlines(), source)


def entries_from_text(text: str, fmt: str, source: str | None = None) -> Iterator[RawEntry]:
    return _PARSERS[fmt](text.splitlines(), source)


def parse_hex(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for line in lines:
        text = "".join(line.split())
        if not text:
            continue
        if text.lower().startswith("0x"):
            text = text[2:]
        try:
            yield RawEntry(bytes.fromhex(text), index, source=source)
        except ValueError:
            yield RawEntry(None, index, source=source, error=DecodeError("the line is not valid hexadecimal"))
        index += 1


def parse_base64(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for line in lines:
        text = line.strip()
        if not text:
            continue
        try:
            yield RawEntry(_b64(text), index, source=source)
        except (binascii.Error, ValueError):
            yield RawEntry(None, index, source=source, error=DecodeError("the line is not valid base64"))
        index += 1


def _b64(text: str) -> bytes:
    if "-" in text or "_" in text:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    return base64.b64decode(text, validate=True)


def parse_jsonl(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    index = 0
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        entry = RawEntry(None, index, source=source)
        index += 1
        try:
            obj = orjson.loads(line)
            if not isinstance(obj, dict):
                raise ValueError("not a JSON object")
            entry.managed_ledger = obj.get("managedLedger")
            entry.ledger_id = _int_or_none(obj.get("ledgerId"))
            entry.entry_id = _int_or_none(obj.get("entryId"))
            data = obj.get("data")
            if not isinstance(data, str):
                raise ValueError('no "data" string')
            entry.data = base64.b64decode(data, validate=True)
        except (orjson.JSONDecodeError, ValueError, binascii.Error, TypeError) as exc:
            entry.error = DecodeError(f"line {number} is not a valid dump line ({exc})")
        yield entry


def _int_or_none(value) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError(f"expected an integer, got {value!r}")
    return value


def parse_readledger(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    """Parse readledger's hex output. Rows are only taken right after a header and must be
    contiguous (offsets 0, 16, 32...), so interleaved log lines cannot corrupt an entry."""
    current: RawEntry | None = None
    expected = 0
    buf = bytearray()
    stray_text = False
    index = 0

    def finish():
        nonlocal current
        entry = current
        current = None
        if entry is None:
            return None
        if entry.error is None:
            if len(buf) < expected:
                if not buf and stray_text:
                    entry.error = DecodeError(
                        "the entry was dumped as text (readledger's string formatter), which loses bytes; "
                        "dump it again with `readledger -m -ef hex`"
                    )
                elif not buf:
                    entry.error = DecodeError(
                        "the dump has a header but no entry bytes; dump it with `readledger -m -ef hex`"
                    )
                else:
                    entry.error = DecodeError(
                        f"the hex dump stops after {len(buf)} of {expected} bytes", offset=len(buf)
                    )
            else:
                entry.data = bytes(buf)
        return entry

    for line in lines:
        header = _HEADER.search(line)
        if header:
            done = finish()
            if done is not None:
                yield done
            lid = header["lid"]
            current = RawEntry(None, index, source=source, entry_id=int(header["eid"]))
            index += 1
            try:
                current.ledger_id = int(lid)
            except ValueError:
                current.ledger_id = None
                current.managed_ledger = None
            expected = int(header["size"]) if header["size"] else -1
            buf = bytearray()
            stray_text = False
            continue
        if current is None or (expected >= 0 and len(buf) >= expected):
            continue
        row = _HEX_ROW.match(line)
        if row and int(row["offset"], 16) == len(buf):
            want = 16 if expected < 0 else min(16, expected - len(buf))
            chunk = _row_bytes(row["rest"], want)
            if chunk is not None:
                buf += chunk
                if expected < 0 and len(chunk) < 16:
                    expected = len(buf)
                continue
        if line.strip() and not buf:
            stray_text = True
    if expected < 0 and current is not None:
        expected = len(buf)
    done = finish()
    if done is not None:
        yield done


def _row_bytes(rest: str, want: int) -> bytes | None:
    """The `want` bytes of one HexDump row ("XX XX ... ASCII"), or None if it is not one."""
    tokens = rest.split(" ")
    out = bytearray()
    for token in tokens[:want]:
        if len(token) != 2:
            break
        try:
            out.append(int(token, 16))
        except ValueError:
            break
    if len(out) == want:
        return bytes(out)
    if want == 16 and out:
        return bytes(out)  # a short last row when the size is unknown
    return None


_PARSERS = {
    "hex": parse_hex,
    "base64": parse_base64,
    "jsonl": parse_jsonl,
    "readledger": parse_readledger,
}


def dump_line(managed_ledger: str | None, ledger_id: int | None, entry_id: int | None, data: bytes) -> str:
    """One line of the project's JSONL dump format (without the newline)."""
    return orjson.dumps(
        {
            "managedLedger": managed_ledger,
            "ledgerId": ledger_id,
            "entryId": entry_id,
            "data": base64.b64encode(data).decode("ascii"),
        }
    ).decode()


def require_format(fmt: str) -> str:
    if fmt not in FORMATS:
        raise DataError(f"unknown dump format {fmt!r}; use one of {', '.join(FORMATS)}")
    return fmt
