"""Parse the text of BookKeeper's `bookkeeper shell readledger -m -ef hex`.

What the tool prints (apache/bookkeeper ReadLedgerCommand, HexDumpEntryFormatter):
- per entry a header `--------- Lid=L, Eid=E, EntrySize=N ---------`, written through the
  logger, so it may carry a log prefix (timestamp, level, class) and is lost without INFO logging;
  N is the ledger's cumulative length up to that entry, not the entry's size (see _expected_size);
- then, on stdout, commons-io HexDump rows: an 8-digit uppercase hex offset (0 for every entry),
  a space, 16 cells of `XX ` (missing bytes of the last row padded with three spaces), the ASCII
  column;
- other log lines may be interleaved anywhere.
With `-b host:port` (one bookie) the header has no EntrySize and the body is `Data: ` plus Netty's
pretty hex dump, a box of `|OOOOOOOO| xx xx ... |ascii|` rows; that buffer probably still starts
with BookKeeper's own entry header (ledger id, entry id, LAC, length, digest), which is stripped
when its ids match the dump's header.

An entry ends at the next header (or, without headers, at a row whose offset restarts at 0).
Only lines that match the row grammar at the next expected offset are taken, so interleaved log
lines cannot corrupt an entry.
"""

from __future__ import annotations

import re
from typing import Iterable, Iterator

from pulsar_txn_cli.codec.entries import RawEntry
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

    __slots__ = ("raw", "entry_size", "buf", "stray", "gap", "pretty")

    def __init__(self, raw: RawEntry, entry_size: int | None):
        self.raw = raw
        self.entry_size = entry_size  # the header's EntrySize (see _expected_size), None if absent
        self.buf = bytearray()
        self.stray = 0  # non-log text lines between the header and the first row
        self.gap = None  # offset where a row is missing (rows after it are skipped)
        self.pretty = False


def parse(lines: Iterable[str], source: str | None = None) -> Iterator[RawEntry]:
    current: _Entry | None = None
    previous: _Entry | None = None  # the entry before current, for cumulative EntrySize
    index = 0
    for line in lines:
        line = line.rstrip("\r\n")
        row = HEX_ROW.match(line)  # most lines are rows: test them first
        header = None if row is not None else HEADER.search(line)
        if header:
            if current is not None:
                yield _finish(current, previous)
            raw = RawEntry(None, index, source=source, entry_id=int(header["eid"]))
            index += 1
            raw.ledger_id = _ledger_id(header["lid"], raw)
            previous, current = current, _Entry(raw, int(header["size"]) if header["size"] is not None else None)
            continue
        pretty = False
        if row is None:
            row = PRETTY_ROW.search(line)
            pretty = row is not None
        if row is not None:
            offset = int(row["offset"], 16)
            if offset == 0 and (current is None or current.buf):
                # A dump without headers (INFO logging off): a new entry starts at offset 0.
                if current is not None:
                    yield _finish(current, previous)
                previous, current = None, _Entry(RawEntry(None, index, source=source), None)
                index += 1
            if offset != len(current.buf):
                if current.gap is None and offset > len(current.buf):
                    current.gap = len(current.buf)
                continue
            if current.gap is not None:
                continue
            current.buf += bytes.fromhex(row["cells"].replace(" ", ""))
            current.pretty = current.pretty or pretty
            continue
        if (
            current is not None
            and not current.buf
            and line.strip()
            and not _LOG_LINE.search(line)
            and not _BORDER.match(line)
        ):
            current.stray += 1
    if current is not None:
        yield _finish(current, previous)


def _expected_size(entry: _Entry, previous: _Entry | None) -> tuple[set[int], int | None]:
    """(sizes that mean "complete", the size known for sure or None).

    BookKeeper prints LedgerEntry.getLength() as EntrySize, which is the ledger's cumulative
    length up to and including the entry (seen in real dumps), not the entry's own size. So an
    entry's size is EntrySize minus the previous entry's EntrySize when the two follow each other,
    and EntrySize itself for entry 0. An EntrySize that equals the byte count is accepted too.
    """
    size, raw = entry.entry_size, entry.raw
    if size is None:
        return set(), None
    ok = {size}
    sure = None
    if raw.entry_id == 0:
        sure = size
    elif (
        previous is not None
        and previous.entry_size is not None
        and previous.raw.ledger_id == raw.ledger_id
        and previous.raw.entry_id == raw.entry_id - 1
        and size >= previous.entry_size
    ):
        sure = size - previous.entry_size
        ok.add(sure)
    return ok, sure


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


def _finish(entry: _Entry, previous: _Entry | None) -> RawEntry:
    raw, buf = entry.raw, entry.buf
    if not buf:
        if entry.gap is not None:
            raw.error = DecodeError("the hex dump of the entry lacks its first row (offset 00000000)", offset=0)
        elif entry.stray:
            raw.error = DecodeError(LOSSY_MESSAGE)
        elif entry.entry_size == 0:
            raw.data = b""  # an empty entry, for the codec to reject
        else:
            raw.error = DecodeError(
                "the dump has an entry header but none of the entry's bytes; "
                "dump it with `readledger -m -ef hex` (-m prints the entry)"
            )
        return raw
    if entry.gap is not None:
        raw.error = DecodeError(
            f"the hex dump of the entry has a gap: the row at offset {entry.gap:08X} is missing", offset=entry.gap
        )
        return raw
    ok, sure = _expected_size(entry, previous)
    if sure is not None and len(buf) not in ok:
        if len(buf) < sure:
            raw.error = DecodeError(
                f"the hex dump of the entry stops after {len(buf)} of {sure} bytes", offset=len(buf)
            )
            return raw
        raw.warnings.append(f"the dump holds {len(buf)} bytes but its header announces {sure}")
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


def format_entry(ledger_id, entry_id: int, data: bytes, log_prefix: str = "", entry_size: int | None = None) -> str:
    """One entry as readledger -m -ef hex prints it (header through the logger, then the rows).
    entry_size is what the header shows (BookKeeper prints the ledger's cumulative length)."""
    size = len(data) if entry_size is None else entry_size
    header = f"{log_prefix}--------- Lid={ledger_id}, Eid={entry_id}, EntrySize={size} ---------"
    return "\n".join([header, *hexdump_rows(data)]) + "\n"


def format_ledger(
    ledger_id, entries: list[bytes], log_prefix: str = "", first_entry: int = 0, start_length: int = 0
) -> str:
    """Entries first_entry.. of a ledger as readledger prints them, with cumulative EntrySize
    (start_length: the ledger's length before first_entry)."""
    out, length = [], start_length
    for offset, data in enumerate(entries):
        length += len(data)
        out.append(format_entry(ledger_id, first_entry + offset, data, log_prefix, entry_size=length))
    return "".join(out)
