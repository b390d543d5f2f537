"""Property tests: random records round-trip; hostile bytes only ever raise the project's DecodeError."""

from __future__ import annotations

import base64

from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import decoding, dumps, readledger
from pulsar_txn_cli.errors import DecodeError

from .strategies import LOG_RECORDS, SETTINGS

TC, PA = codec.TC_LOG, codec.PENDING_ACK_LOG


@SETTINGS
@given(LOG_RECORDS)
def test_records_round_trip_single_and_batched(log_records):
    log, records = log_records
    for record in records:
        if not record.ByteSize():
            continue  # an all-default record serializes to 0 bytes: an empty entry, an error
        entry = codec.decode_entry(codec.encode_single(record), log)
        assert entry.records == [record] and not entry.batched
        assert codec.record_from_dict(codec.record_to_dict(record, log), log) == record
    entry = codec.decode_entry(codec.encode_batch(records), log)
    assert entry.batched and entry.version == 1 and entry.records == records
    as_json = codec.entry_to_json(entry)
    assert [r["batchIndex"] for r in as_json["records"]] == list(range(len(records)))
    assert [codec.record_from_dict(r, log) for r in as_json["records"]] == records


@SETTINGS
@given(LOG_RECORDS, st.integers(0, 2**16 - 1))
def test_round_trip_through_every_text_format(log_records, version):
    log, records = log_records
    data = codec.encode_batch(records, version=version)
    texts = {
        "hex": data.hex() + "\n",
        "base64": base64.b64encode(data).decode() + "\n",
        "jsonl": dumps.dump_line("pulsar/system/persistent/__transaction_log_0", 1, 2, data) + "\n",
        "readledger": readledger.format_entry(1, 2, data, "12:00:00.000 [main] INFO  ReadLedgerCommand - "),
    }
    for fmt, text in texts.items():
        [raw] = list(dumps.entries_from_text(text, fmt))
        assert raw.data == data, fmt
        assert decoding.decode_raw(raw, log).records == records


def _only_decode_errors(data: bytes) -> None:
    for log in (TC, PA):
        try:
            entry = codec.decode_entry(data, log)
        except DecodeError:
            continue
        # What decodes must also render (JSON and table) without raising.
        codec.entry_to_json(entry)
        for record in entry.records:
            codec.summarize(record, log)
            codec.op_name(record, log)


@SETTINGS
@given(st.binary(max_size=200))
@example(b"\x0e\x01\x00\x01\x0b")  # a start-group inside the container
@example(b"\x0e\x01\x00\x01\x0a\x03\x62\x01\xff")  # invalid UTF-8 in owner
@example(b"\x0e\x01\x00\x01" + b"\x0a\x80\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01")  # an 11-byte varint
@example(b"\x0b" * 120)  # deeply nested groups
def test_random_bytes_only_raise_decode_error(data):
    _only_decode_errors(data)
    _only_decode_errors(b"\x0e\x01\x00\x01" + data)


@SETTINGS
@given(LOG_RECORDS, st.data())
def test_mutated_entries_only_raise_decode_error(log_records, data):
    _, records = log_records
    entry = bytearray(
        codec.encode_batch(records) if data.draw(st.booleans()) or not records else codec.encode_single(records[0])
    )
    for _ in range(data.draw(st.integers(1, 4))):
        kind = data.draw(st.sampled_from(["flip", "cut", "insert", "delete"]))
        if kind == "cut":
            del entry[data.draw(st.integers(0, len(entry))) :]
        elif not entry:
            entry.append(data.draw(st.integers(0, 255)))
        elif kind == "flip":
            entry[data.draw(st.integers(0, len(entry) - 1))] = data.draw(st.integers(0, 255))
        elif kind == "insert":
            entry.insert(data.draw(st.integers(0, len(entry))), data.draw(st.integers(0, 255)))
        else:
            del entry[data.draw(st.integers(0, len(entry) - 1))]
    _only_decode_errors(bytes(entry))


def _parse_all(fmt: str, text) -> None:
    for raw in dumps.PARSERS[fmt](text.splitlines()):
        assert (raw.data is None) != (raw.error is None)
        assert raw.error is None or isinstance(raw.error, DecodeError)
        if raw.data is not None:
            _only_decode_errors(raw.data)


GOOD_READLEDGER = readledger.format_entry(1, 0, codec.encode_batch([codec.TcRecord(metadata_op=0)] * 3), "INFO ")
GOOD_JSONL = dumps.dump_line("pulsar/system/persistent/__transaction_log_0", 1, 0, b"\x08\x01")


@SETTINGS
@given(
    st.text(alphabet=st.sampled_from(list("0123456789ABCDEFabcdef |-=,.\nLidEtSz\x00\ufffd")), max_size=300), st.data()
)
def test_readledger_parser_never_raises(noise, data):
    cut = data.draw(st.integers(0, len(GOOD_READLEDGER)))
    at = data.draw(st.integers(0, len(GOOD_READLEDGER)))
    mutated = GOOD_READLEDGER[:at] + noise + GOOD_READLEDGER[at:cut]
    _parse_all("readledger", mutated)
    _parse_all("readledger", noise)


@SETTINGS
@given(st.text(max_size=200), st.data())
def test_jsonl_parser_never_raises(noise, data):
    at = data.draw(st.integers(0, len(GOOD_JSONL)))
    _parse_all("jsonl", GOOD_JSONL[:at] + noise + GOOD_JSONL[at:])
    _parse_all("jsonl", noise)
    _parse_all("hex", noise)
    _parse_all("base64", noise)


@SETTINGS
@given(st.binary(max_size=300))
def test_read_entries_auto_never_raises(blob):
    import io

    for raw in dumps.read_entries(io.BytesIO(blob), "auto", source="x"):
        assert raw.error is None or isinstance(raw.error, DecodeError)
