"""The native scanner against the protobuf decoder: same facts wherever it answers, and it
answers for every entry a real writer produces (else the fast path would silently not run)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pulsar_txn_cli import codec
from pulsar_txn_cli.pipeline import facts, inputs, local

from ..codec.strategies import LOG_RECORDS, MUTATIONS, PA, SETTINGS, TC, damaged_entry, whole_entries
from .conftest import PA_ML, TC_ML, write_jsonl

NATIVE = facts.NATIVE
ML = {TC: TC_ML, PA: PA_ML}


def test_the_native_scanner_is_built():
    # setup.py builds it as optional (an install without a compiler still works), so a broken
    # build would go unnoticed but for this test; this machine kind has gcc.
    assert NATIVE is not None, "pulsar_txn_cli.pipeline._scan was not built: install gcc, then ./dev setup"


def python_facts(data: bytes, log: str):
    saved, facts.NATIVE = facts.NATIVE, None
    try:
        return facts.entry_facts(ML[log], 1, 2, data, "here", None)
    finally:
        facts.NATIVE = saved


def normalized(fact):
    """Facts with the unordered parts in a canonical form: op counts summed per column (the
    decoder's path may name a column twice), distinct hashes sorted."""
    fact = list(fact)
    ops: dict[int, int] = {}
    for column, count in fact[7]:
        ops[column] = ops.get(column, 0) + count
    fact[7], fact[8] = sorted(ops.items()), sorted(fact[8])
    return fact


def native_facts(data: bytes, log: str):
    scanned = NATIVE.scan(data, log == PA)
    if scanned is None:
        return None
    batched, records, ops, hashes = scanned
    assert len(set(hashes)) == len(hashes), "the scanner's hashes are distinct per entry"
    return (ML[log], 1, 2, True, batched, records, len(data), ops, hashes, None, None)


def agree(data: bytes, log: str) -> bool:
    """Where the scanner answers, it says what the decoder says; True when it answered."""
    native = native_facts(data, log)
    if native is not None:
        assert normalized(native) == normalized(python_facts(data, log)), data.hex()
    return native is not None


@pytest.mark.parametrize("most, least", [(0, 0), (1, 2), (2**64 - 1, 2**64 - 1), (2**61 - 1, 2**61), (2**63, 5)])
def test_txn_hash_is_the_interpreters_tuple_hash(most, least):
    assert NATIVE.txn_hash(most, least) == facts.txn_hash(most, least) == hash((most, least))


@SETTINGS
@given(LOG_RECORDS)
def test_every_encoded_entry_is_scanned_with_the_decoders_facts(log_records):
    log, records = log_records
    for data in whole_entries(records):
        assert agree(data, log), data.hex()


@SETTINGS
@given(LOG_RECORDS, MUTATIONS, st.booleans())
def test_damaged_entries_are_scanned_right_or_left_to_the_decoder(log_records, mutations, batched):
    log, records = log_records
    agree(damaged_entry(records, batched, mutations), log)


@given(st.binary(max_size=64), st.sampled_from([TC, PA]))
def test_arbitrary_bytes_never_disagree(data, log):
    agree(data, log)
    agree(b"\x0e\x01\x00\x01" + data, log)


def test_unusual_but_valid_entries_go_to_the_decoder():
    padded_op = bytes([0x08, 0x83, 0x00])  # metadata_op = 3 in a two-byte varint
    unknown_field = codec.encode_single(codec.TcRecord(metadata_op=1)) + bytes([0x68, 0x01])  # field 13
    unknown_enum = bytes([0x08, 0x07])  # metadata_op = 7: the decoder sets it aside
    long_tag = bytes([0x88, 0x80, 0x80, 0x80, 0x80, 0x00, 0x01])  # field 1 in a six-byte tag
    for data in (padded_op, unknown_field, unknown_enum, long_tag):
        assert NATIVE.scan(data, False) is None, data.hex()
        agree(data, TC)
    assert python_facts(padded_op, TC)[7] == [(3, 1)]  # UPDATE:OPEN, through the decoder


def test_missing_required_nested_fields_are_left_to_the_decoders_message():
    record = codec.TcRecord(metadata_op=2)
    record.subscriptions.add(topic="t", subscription="s")
    whole = codec.encode_single(record)
    lacking = bytes([0x3A, 0x03, 0x0A, 0x01, 0x74])  # subscriptions { topic: "t" }, no subscription
    assert NATIVE.scan(whole, False) is not None and NATIVE.scan(lacking, False) is None
    fact = python_facts(lacking, TC)
    assert not fact[3] and "subscription" in fact[9]


def test_packed_ack_sets_empty_batches_and_unknown_versions_are_scanned():
    position = bytes([0x08, 0x07, 0x10, 0x01, 0x1A, 0x02, 0x7E, 0x03])  # ledgerId 7, entryId 1, ack_set packed [126, 3]
    ack = bytes([0x08, 0x01, 0x18, 0x05, 0x2A, len(position)]) + position
    assert agree(ack, PA)
    assert NATIVE.scan(ack, True)[2] == [(8, 1)]
    assert agree(b"\x0e\x01\x00\x01", TC) and NATIVE.scan(b"\x0e\x01\x00\x01", False) == (True, 0, [], [])
    assert agree(b"\x0e\x01\x00\x07" + codec.encode_batch([codec.TcRecord(metadata_op=1)])[4:], TC)
    assert NATIVE.scan(bytearray(ack), True) is None  # only bytes take the fast path


def test_reports_are_identical_with_and_without_the_scanner(mixed, monkeypatch):
    tmp, entries = mixed
    entries = entries + [(TC_ML, 6, 0, bytes([0x08, 0x83, 0x00])), (PA_ML, 11, 0, b"\x0e\x01\x00\x01")]
    files = inputs.expand([write_jsonl(tmp / "d.jsonl", entries)])
    answered = []

    class Counting:
        txn_hash = staticmethod(NATIVE.txn_hash)

        @staticmethod
        def scan(data, pending_ack):
            out = NATIVE.scan(data, pending_ack)
            answered.append(out is not None)
            return out

    monkeypatch.setattr(facts, "NATIVE", Counting)
    fast = local.run(files)
    monkeypatch.setattr(facts, "NATIVE", None)
    assert fast == local.run(files)
    assert answered.count(True) == len(entries) - 2  # all but the corrupt entry and the padded varint


def test_analyze_says_which_decoding_it_uses(cli, mixed, monkeypatch):
    tmp, entries = mixed
    source = write_jsonl(tmp / "d.jsonl", entries)
    fast = cli(["analyze", source, "--engine", "local", "-o", "json"])
    monkeypatch.setattr(facts, "NATIVE", None)
    slow = cli(["analyze", source, "--engine", "local", "-o", "json"])
    assert "engine: local (native scanner)" in fast.stderr
    assert "pure-Python decoding: the native scanner is not built" in slow.stderr
    assert fast.json() == slow.json()
