"""Parse the text of BookKeeper's `bookkeeper shell readledger -m -ef hex`.

What the tool prints (apache/bookkeeper ReadLedgerCommand, HexDumpEntryFormatter):
- per entry a header `--------- Lid=L, Eid=E, EntrySize=N ---------`, written through the
  logger, so it may carry a log prefix (timestamp, level, class) and is lost without INFO logging;
- then, on stdout, commons-io HexDump rows: an 8-digit uppercase hex offset (0 for every entry),
  a space, 16 cells of `XX ` (missing bytes of the last row padded with three spaces), the ASCII
  column;
- other log lines may be interleaved anywhere.
With `-b host:port` (one bookie) the header has no EntrySize and the body is `Data: ` plus Netty's
pretty hex dump, a box of `|OOOOOOOO| xx xx ... |ascii|` rows; that buffer probably still starts
with BookKeeper's own entry header (ledger id, entry id, LAC, length, digest), which is stripped
when its ids match the dump's header.

Only lines that match the row grammar at the next expected offset are taken, so interleaved log
lines cannot corrupt an entry. Without headers, an offset that restarts at 0 starts a new entry.
"""
from __future__ import annotations

import re
from typing import Iterable, Iterator

from pulsar_txn_cli.codec.dumps import RawEntry
from pulsar_txn_cli.errors import DecodeError

HEADER = re.compile(r"-{3,} Lid=(?P<lid>[^,\s]+), Eid=(?P<eid>-?\d+)(?:, EntrySize=(?P<size>\d+))? -{3,}")
# commons-io HexDump: offset, space, exactly 16 cells of three characters, then the ASCII column.
HEX_ROW = re.compile(r"^(?P<offset>[0-9A-Fa-f]{8}) (?P<cells>(?:[0-9A-Fa-f]{2} ){1,16}(?:   )*)")
# Netty ByteBufUtil.prettyHexDump: |00000000| 0e 01 ... |ascii|
PRETTY_ROW = re.compile(r"\|(?P<offset>[0-9a-fA-F]{8})\|(?P<cells>(?: [0-9a-fA-F]{2}){1,16})(?:   )* \|")
_BORDER = re.compile(r"^\s*(?:Data: )?\s*\+-{8}[-+]*\+?\s*$|^\s*\|\s+0\s+1\s+2\s+3 ")
# A log line: starts with a date, a time or a bracket, or names a level.
_LOG_LINE = re.compile(r"^\s*(?:\d{4}-\d\d-\d\d|\d\d:\d\d:\d\d|\[)|\b(?:TRACE|DEBUG|INFO|WARN|WARNING|ERROR|FATAL)\b")

LOSSY_MESSAGE = (
    "the entry was dumped as text (readledger's default string formatter), which loses bytes; "
    "dump it again with `readledger -m -ef hex`"
)


def looks_like(text: str, first_line: str) -> bool:
    """Whether an input (its head and first non-empty line) is readledger output."""
    return bool(
        HEADER.search(text) or HEX_ROW.match(first_line) or PRETTY_ROW.search(first_line) or _BORDER.match(first_line)
    )


class _Entry:
    """An entry being assembled from rows."""

    __slots__ = ("raw", "expected", "buf", "stray", "gap", "pretty")

    def __init__(self, raw: RawEntry, expected: int | None):
        self.raw = raw
        self.expected = expected  # bytes announced by EntrySize, None when unknown
        self.buf = bytearray()
        self.stray = 0  # non-log text lines between the header and the first row
        self.gap = None  # offset of the first row that came out of sequence
        self.pretty = False

    def full(self) -> bool:
        return self.expected is not None and len(self.buf) >= self.expected


def parse(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    current: _Entry | None = None
    index = 0
    for line in lines:
        line = line.rstrip("\r\n")
        header = HEADER.search(line)
        if header:
            if current is not None:
                yield _finish(current)
            raw = RawEntry(None, index, source=source, entry_id=int(header["eid"]))
            index += 1
            raw.ledger_id = _ledger_id(header["lid"], raw)
            current = _Entry(raw, int(header["size"]) if header["size"] is not None else None)
            continue
        row = HEX_ROW.match(line)
        pretty = False
        if row is None:
            row = PRETTY_ROW.search(line)
            pretty = row is not None
        if row is not None:
            offset = int(row["offset"], 16)
            if offset == 0 and (current is None or current.buf or current.full()):
                # A dump without headers (INFO logging off): a new entry starts at offset 0.
                if current is not None:
                    yield _finish(current)
                current = _Entry(RawEntry(None, index, source=source), None)
                index += 1
            if current is None or current.full():
                continue
            if offset != len(current.buf):
                if current.gap is None and offset > len(current.buf):
                    current.gap = len(current.buf)
                continue
            cells = row["cells"].split()
            if current.expected is not None:
                cells = cells[: current.expected - len(current.buf)]
            current.buf += bytes.fromhex("".join(cells))
            current.pretty = current.pretty or pretty
            continue
        if current is not None and not current.buf and line.strip() and not _LOG_LINE.search(line) and not _BORDER.match(line):
            current.stray += 1
    if current is not None:
        yield _finish(current)


def _ledger_id(text: str, raw: RawEntry) -> int | None:
    """Ledger ids are printed as longs, or as UUIDs with a UUID formatter (-lf)."""
    try:
        return int(text)
    except ValueError:
        try:
            import uuid

            value = uuid.UUID(text).int
            return value if value < 1 << 63 else None
        except ValueError:
            raw.warnings.append(f"the ledger id {text!r} is neither a number nor a UUID")
            return None


def _finish(entry: _Entry) -> RawEntry:
    raw, buf, expected = entry.raw, entry.buf, entry.expected
    if expected is not None and len(buf) < expected:
        if not buf:
            if entry.gap is not None:
                raw.error = DecodeError("the hex dump of the entry lacks its first row (offset 00000000)", offset=0)
            elif entry.stray:
                raw.error = DecodeError(LOSSY_MESSAGE)
            elif expected == 0:
                raw.data = b""
            else:
                raw.error = DecodeError(
                    f"the dump has the header of a {expected}-byte entry but none of its bytes; "
                    "dump it with `readledger -m -ef hex` (-m prints the entry)"
                )
        else:
            missing = f"; the row at offset {entry.gap:08X} is missing" if entry.gap is not None else ""
            raw.error = DecodeError(
                f"the hex dump of the entry stops after {len(buf)} of {expected} bytes{missing}", offset=len(buf)
            )
        return raw
    if not buf and expected is None:
        raw.error = DecodeError(LOSSY_MESSAGE if entry.stray else "the dump has an entry header but no hex rows")
        return raw
    data = bytes(buf)
    if entry.pretty:
        data = _strip_bookie_header(data, raw)
    raw.data = data
    return raw


# BookKeeper's digest after its 32-byte header: CRC32C (Pulsar's default) 4 bytes, CRC32 8,
# HMAC 20, DUMMY 0.
_DIGEST_LENGTHS = (4, 8, 20, 0)


def _strip_bookie_header(data: bytes, raw: RawEntry) -> bytes:
    """Drop BookKeeper's per-entry header from a `-b` dump, recognised by its ledger and entry ids."""
    if raw.ledger_id is None or raw.entry_id is None or len(data) < 32:
        return data
    if data[:16] != raw.ledger_id.to_bytes(8, "big") + (raw.entry_id & (1 << 64) - 1).to_bytes(8, "big"):
        return data
    for digest in _DIGEST_LENGTHS:
        payload = data[32 + digest :]
        if payload[:2] == b"\x0e\x01" or payload[:1] == b"\x08":
            raw.warnings.append(
                f"dropped BookKeeper's {32 + digest}-byte entry header (ids and a {digest}-byte digest) "
                "from the `-b` dump"
            )
            return payload
    return data


def hexdump_rows(data: bytes) -> list[str]:
    """commons-io HexDump.dump rows for data (offset from 0), as readledger -ef hex prints them."""
    rows = []
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        cells = "".join(f"{b:02X} " for b in chunk) + "   " * (16 - len(chunk))
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk)
        rows.append(f"{start:08X} {cells}{text}")
    return rows


def format_entry(ledger_id, entry_id: int, data: bytes, log_prefix: str = "") -> str:
    """One entry as readledger -m -ef hex prints it (header through the logger, then the rows)."""
    header = f"{log_prefix}--------- Lid={ledger_id}, Eid={entry_id}, EntrySize={len(data)} ---------"
    return "\n".join([header, *hexdump_rows(data)]) + "\n"
