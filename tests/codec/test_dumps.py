"""Dump formats: detection, hex/base64/JSONL lines and readledger text (pulsar_txn_cli.codec.dumps)."""

from __future__ import annotations

import base64
import io

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps, readledger
from tests.codec.samples import LOG_PREFIX, PA_ML, TC_ML, pending_ack, tc_lifecycle

# A batched pending-ack entry of two records (an ACK and a COMMIT), 41 bytes.
ENTRY = codec.encode_batch([pending_ack(1), pending_ack(2, op=2)])

# What `readledger -l 21 -fe 4 -le 4 -m -ef hex` prints for it: the header through log4j's console
# appender, then commons-io HexDump rows on stdout (uppercase, 16 cells, the last row padded).
READLEDGER_TEXT = (
    "SLF4J: Class path contains multiple SLF4J bindings.\n"
    "2026-11-22T01:02:03,401+0000 [main] INFO  org.apache.bookkeeper.client.BookKeeperAdmin - Resetting LAC\n"
    + LOG_PREFIX
    + "--------- Lid=21, Eid=4, EntrySize=41 ---------\n"
    "00000000 0E 01 00 01 0A 1B 08 01 10 00 18 01 20 01 2A 11 ............ .*.\n"
    "00000010 08 0C 10 03 18 FE FF FF FF FF FF FF FF FF 01 20 ............... \n"
    "00000020 0A 0A 06 08 02 18 02 20 01                      ....... .\n"
)

# The same entry read with `-b host:3181`: no EntrySize, Netty's pretty dump after "Data: ".
PRETTY = (
    "         +-------------------------------------------------+\n"
    "         |  0  1  2  3  4  5  6  7  8  9  a  b  c  d  e  f |\n"
    "+--------+-------------------------------------------------+----------------+\n"
    "|00000000| 0e 01 00 01 0a 1b 08 01 10 00 18 01 20 01 2a 11 |............ .*.|\n"
    "|00000010| 08 0c 10 03 18 fe ff ff ff ff ff ff ff ff 01 20 |............... |\n"
    "|00000020| 0a 0a 06 08 02 18 02 20 01                      |....... .       |\n"
    "+--------+-------------------------------------------------+----------------+"
)


def entries(text: str, fmt: str = "auto"):
    return list(dumps.read_entries(io.BytesIO(text.encode()), fmt, source="dump.txt"))


# ---------------------------------------------------------------- detection


@pytest.mark.parametrize(
    "head, fmt",
    [
        (b"0e01\n08\nzz\n", "hex"),  # the first non-empty line decides
        (b"\n\n  0x0e0100010a00\n", "hex"),
        (b"DgEAAQoA\n", "base64"),
        (b"CAEQAhgD\n0e01\n", "base64"),
        (b'{"managedLedger": null, "ledgerId": 1, "entryId": 0, "data": "CAE="}\n', "jsonl"),
        (READLEDGER_TEXT.encode(), "readledger"),
        (b"00000000 08 01                                           ..\n", "readledger"),
        (("Data: " + PRETTY).encode(), "readledger"),
        (ENTRY, "raw"),
        (b"\x08\x01\x10\x02", "raw"),
        (b"", "raw"),
        (b"hello, world!\n", None),
    ],
)
def test_detect_format(head, fmt):
    assert dumps.detect_format(head) == fmt


def test_detection_finds_a_header_after_a_long_log_preamble():
    preamble = "".join(
        f"2026-11-22T01:02:03,{i:03d}+0000 [main] INFO  org.apache.zookeeper.ZooKeeper - Client environment:x={i}\n"
        for i in range(200)
    )
    assert len(preamble) > 8192
    [entry] = entries(preamble + READLEDGER_TEXT)
    assert entry.data == ENTRY and entry.where == "21:4"


def test_unknown_text_is_one_error_naming_the_input():
    [entry] = entries("hello, world!\n")
    assert "cannot tell the format of dump.txt" in str(entry.error) and "--format" in str(entry.error)


def test_large_inputs_are_read_across_chunks():
    lines = [dumps.dump_line(TC_ML, 3, i, codec.encode_batch(tc_lifecycle(i) * 20)) for i in range(60)]
    text = "\n".join(lines) + "\n"
    assert len(text) > dumps.HEAD_SIZE * 2
    got = entries(text)
    assert [e.entry_id for e in got] == list(range(60)) and all(e.error is None for e in got)


# ---------------------------------------------------------------- hex, base64, raw


def test_hex_lines_and_their_errors():
    got = entries("0e01\n\n08\nzz\n0x0801\n0e0 1\n080\n", "hex")
    assert [e.data for e in got[:3]] == [b"\x0e\x01", b"\x08", None]
    assert str(got[2].error) == "the line is not hexadecimal ('z' at character 1)"
    assert got[3].data == b"\x08\x01" and got[4].data == b"\x0e\x01"
    assert str(got[5].error) == "the line has an odd number of hex digits (3)"
    assert [e.where for e in got] == [f"dump.txt #{i}" for i in range(1, 7)]


def test_base64_lines():
    good = base64.b64encode(ENTRY).decode()
    urlsafe = base64.urlsafe_b64encode(ENTRY).decode().rstrip("=")
    got = entries(f"{good}\n{urlsafe}\nnot base64!\n", "base64")
    assert got[0].data == ENTRY and got[1].data == ENTRY
    assert "not valid base64" in str(got[2].error)


def test_raw_is_one_entry():
    [entry] = list(dumps.read_entries(io.BytesIO(ENTRY), "auto"))
    assert entry.data == ENTRY


# ---------------------------------------------------------------- jsonl


def test_jsonl_dump_lines():
    text = "\n".join(
        [
            dumps.dump_line(TC_ML, 12, 0, ENTRY),
            "",
            dumps.dump_line(PA_ML, 13, 5, ENTRY),
            '{"managedLedger": null, "ledgerId": null, "entryId": null, "data": "CAE="}',
        ]
    )
    got = entries(text)
    assert [(e.managed_ledger, e.ledger_id, e.entry_id, e.where) for e in got] == [
        (TC_ML, 12, 0, "12:0"),
        (PA_ML, 13, 5, "13:5"),
        (None, None, None, "dump.txt #3"),
    ]
    assert got[2].data == b"\x08\x01"


@pytest.mark.parametrize(
    "line, message",
    [
        ("{not json", "line 1 of dump.txt is not JSON"),
        ("[1, 2]", "is not a dump line: it is not a JSON object"),
        ('{"ledgerId": 1, "entryId": 2}', 'it has no "data" string'),
        ('{"ledgerId": "1", "entryId": 2, "data": ""}', '"ledgerId" is not an integer'),
        ('{"ledgerId": 1, "entryId": true, "data": ""}', '"entryId" is not an integer'),
        ('{"managedLedger": 5, "data": ""}', '"managedLedger" is not a string'),
        ('{"data": "%%%"}', "is not a dump line"),
    ],
)
def test_jsonl_errors(line, message):
    [entry] = entries(line, "jsonl")
    assert entry.data is None and message in str(entry.error)


# ---------------------------------------------------------------- readledger


def test_readledger_with_log_prefix_and_padded_last_row():
    [entry] = entries(READLEDGER_TEXT)
    assert (entry.ledger_id, entry.entry_id, entry.data, entry.error) == (21, 4, ENTRY, None)


def test_readledger_renderer_matches_the_literal_dump():
    assert readledger.format_entry(21, 4, ENTRY, LOG_PREFIX) in READLEDGER_TEXT


def test_readledger_ignores_interleaved_log_lines_and_crlf():
    rows = READLEDGER_TEXT.splitlines()
    noisy = (
        rows[:4]
        + ["2026-11-22T01:02:03,500+0000 [BookKeeperClientWorker-0] WARN  o.a.b.c.PendingReadOp - slow read"]
        + rows[4:]
    )
    noisy += [
        LOG_PREFIX + "--------- Lid=21, Eid=5, EntrySize=2 ---------",
        "00000000 08 01                                           ..",
    ]
    got = entries("\r\n".join(noisy) + "\r\n")
    assert [(e.entry_id, e.data) for e in got] == [(4, ENTRY), (5, b"\x08\x01")]


def test_readledger_many_entries_exact_multiple_of_16():
    data = [b"\x08\x01" * 8, codec.encode_batch(tc_lifecycle(1)), b"\x08\x02" * 16, b"\x08\x03"]
    text = "".join(readledger.format_entry(7, i, d, LOG_PREFIX) for i, d in enumerate(data))
    assert [e.data for e in entries(text)] == data


def test_readledger_entry_size_is_cumulative_as_bookkeeper_prints_it():
    # Real dumps: EntrySize is the ledger's length up to and including the entry.
    data = [codec.encode_batch(tc_lifecycle(i)) for i in range(4)] + [b"\x08\x01" * 8]
    text = readledger.format_ledger(7, data, LOG_PREFIX)
    assert f"Eid=1, EntrySize={len(data[0]) + len(data[1])} " in text
    got = entries(text)
    assert [e.data for e in got] == data and all(not e.warnings for e in got)
    # A dump that starts in the middle of the ledger (-fe 3) cannot check its first entry.
    got = entries(readledger.format_ledger(7, data[3:], LOG_PREFIX, first_entry=3, start_length=999))
    assert [e.data for e in got] == data[3:] and all(e.error is None for e in got)


def test_readledger_truncated_dump_says_how_far_it_got():
    data = [codec.encode_batch(tc_lifecycle(1)), ENTRY]
    text = readledger.format_ledger(21, data, LOG_PREFIX)
    first, second = entries(text.rsplit("\n", 2)[0] + "\n")  # the last row is gone
    assert first.data == data[0]
    assert str(second.error) == "the hex dump of the entry stops after 32 of 41 bytes (at byte 32)"
    [only] = entries(readledger.format_entry(21, 0, ENTRY, LOG_PREFIX)[:-60])  # entry 0: EntrySize is its size
    assert "stops after 32 of 41 bytes" in str(only.error)


def test_readledger_missing_row_in_the_middle():
    rows = READLEDGER_TEXT.splitlines()
    [entry] = entries("\n".join(rows[:4] + rows[5:]))
    assert str(entry.error) == "the hex dump of the entry has a gap: the row at offset 00000010 is missing (at byte 16)"
    [entry] = entries("\n".join(rows[:3] + rows[4:]))
    assert str(entry.error) == "the hex dump of the entry lacks its first row (offset 00000000) (at byte 0)"


def test_readledger_string_formatter_dump_is_called_lossy():
    lossy = ENTRY.decode("utf-8", "replace")
    text = LOG_PREFIX + "--------- Lid=21, Eid=4, EntrySize=41 ---------\n" + lossy + "\n"
    [entry] = entries(text)
    assert "readledger's default string formatter" in str(entry.error) and "-ef hex" in str(entry.error)


def test_readledger_header_without_body_asks_for_m():
    text = (
        LOG_PREFIX
        + "--------- Lid=21, Eid=4, EntrySize=41 ---------\n"
        + LOG_PREFIX
        + "--------- Lid=21, Eid=5, EntrySize=0 ---------\n"
    )
    first, second = entries(text)
    assert "none of the entry's bytes" in str(first.error) and "-m" in str(first.error)
    assert second.data == b"" and second.error is None  # an empty entry, for the codec to reject


def test_readledger_without_headers_splits_on_offset_zero():
    # No INFO logging: the headers are lost, only the rows remain.
    data = [codec.encode_batch(tc_lifecycle(1)), b"\x08\x01" * 8, pending_ack(3).SerializeToString()]
    text = "\n".join(row for d in data for row in readledger.hexdump_rows(d))
    got = entries(text)
    assert [e.data for e in got] == data
    assert [e.where for e in got] == ["dump.txt #1", "dump.txt #2", "dump.txt #3"]


def test_readledger_uuid_ledger_ids():
    text = readledger.format_entry("00000000-0000-0000-0000-000000000015", 4, ENTRY)
    [entry] = entries(text)
    assert entry.ledger_id == 21 and entry.data == ENTRY


def test_readledger_single_bookie_pretty_dump():
    text = LOG_PREFIX + "--------- Lid=21, Eid=4 ---------\n" + LOG_PREFIX + "Data: " + PRETTY + "\n"
    [entry] = entries(text)
    assert (entry.where, entry.data, entry.warnings) == ("21:4", ENTRY, [])


def test_readledger_single_bookie_dump_with_bookkeeper_header_is_stripped():
    header = (21).to_bytes(8, "big") + (4).to_bytes(8, "big") + (3).to_bytes(8, "big") + (1000).to_bytes(8, "big")
    stored = header + b"\x12\x34\x56\x78" + ENTRY  # CRC32C digest
    rows = "\n".join(_pretty_rows(stored))
    [entry] = entries(LOG_PREFIX + "--------- Lid=21, Eid=4 ---------\nData: " + rows + "\n")
    assert entry.data == ENTRY
    assert entry.warnings == ["dropped BookKeeper's 36-byte entry header (ids and a 4-byte digest) from the `-b` dump"]


def _pretty_rows(data: bytes) -> list[str]:
    rows = ["         +-------------------------------------------------+"]
    for start in range(0, len(data), 16):
        chunk = data[start : start + 16]
        cells = "".join(f" {b:02x}" for b in chunk) + "   " * (16 - len(chunk))
        text = "".join(chr(b) if 0x20 <= b < 0x7F else "." for b in chunk).ljust(16)
        rows.append(f"|{start:08x}|{cells} |{text}|")
    return rows


def test_entries_from_text():
    assert [e.data for e in dumps.entries_from_text(READLEDGER_TEXT, "auto")] == [ENTRY]
    assert [e.data for e in dumps.entries_from_text("0801\n", "hex")] == [b"\x08\x01"]
