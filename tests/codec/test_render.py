"""The native JSON renderer against the Python converters: the same bytes wherever it answers,
and it answers for every entry a real writer produces (else the fast path would silently not run)."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from pulsar_txn_cli import codec
from pulsar_txn_cli.codec import dumps, records, tojson
from pulsar_txn_cli.errors import DecodeError

from .strategies import LOG_RECORDS, MUTATIONS, PA, SETTINGS, TC, damaged_entry, whole_entries

NATIVE = records.NATIVE
TC_ML = "pulsar/system/persistent/__transaction_log_0"
PA_ML = "public/default/persistent/orders-partition-0-billing__transaction_pending_ack"


def test_the_native_renderer_is_built():
    # setup.py builds it as optional (an install without a compiler still works), so a broken
    # build would go unnoticed but for this test; this machine kind has gcc.
    assert NATIVE is not None, "pulsar_txn_cli.codec._render was not built: install gcc, then ./dev setup"


def python_json(entry) -> bytes:
    return orjson.dumps(records.records_to_dicts(entry.records, entry.log, entry.batched))


def agree(data: bytes, log: str) -> bool:
    """Where the renderer answers for an entry the decoder accepts, it writes what the Python
    path writes; True when it answered. Entries the decoder refuses never reach it, but must not
    crash it either."""
    batched = codec.is_batched(data)
    try:
        entry = codec.decode_entry(data, log)
    except DecodeError:
        NATIVE.render(records._SCHEMA[log], data, batched)
        return False
    rendered = NATIVE.render(records._SCHEMA[log], data, entry.batched)
    if rendered is not None:
        assert rendered == python_json(entry), data.hex()
        assert orjson.loads(rendered) == orjson.loads(python_json(entry))
    return rendered is not None


@SETTINGS
@given(LOG_RECORDS)
def test_every_encoded_entry_is_rendered_as_the_python_path_writes_it(log_records):
    log, records_ = log_records
    for data in whole_entries(records_):
        assert agree(data, log), data.hex()


@SETTINGS
@given(LOG_RECORDS, MUTATIONS, st.booleans())
@example((PA, [codec.PendingAckRecord(pending_ack_op=1)]), [("flip", 6, 0x80)], True)
def test_damaged_entries_are_rendered_right_or_left_to_python(log_records, mutations, batched):
    log, records_ = log_records
    agree(damaged_entry(records_, batched, mutations), log)


@given(st.binary(max_size=64), st.sampled_from([TC, PA]))
def test_arbitrary_bytes_never_disagree(data, log):
    agree(data, log)
    agree(b"\x0e\x01\x00\x01" + data, log)


def test_what_protobuf_sets_aside_or_tolerates_is_rendered_as_python_shows_it():
    cases = {
        "unknown enum number": bytes([0x08, 0x07, 0x10, 0x05]),  # metadata_op 7 dropped, txnid_least_bits 5
        "unknown enum after a known one": bytes([0x08, 0x01, 0x08, 0x07]),  # ADD_PARTITION stays
        "unknown field": codec.encode_single(codec.TcRecord(metadata_op=1)) + bytes([0x68, 0x01]),  # field 13
        "repeated singular": bytes([0x10, 0x01, 0x10, 0x02]),  # txnid_least_bits twice: the last wins
        "enum from a 64-bit varint": bytes([0x08]) + bytes([0x81, 0x80, 0x80, 0x80, 0x10]),  # 2**32 + 1 -> 1
        "control characters": codec.encode_single(codec.TcRecord(owner='a"\\\x00\x1f\x7f\n\u2028é😀')),
    }
    for name, data in cases.items():
        assert agree(data, TC), name
    position = bytes([0x08, 0x07, 0x10, 0x01, 0x1A, 0x02, 0x7E, 0x03, 0x20, 0xFF] + [0xFF] * 8 + [0x01])
    packed = bytes([0x08, 0x01, 0x18, 0x05, 0x2A, len(position)]) + position  # ack_set [126, 3], batch_size -1
    assert agree(packed, PA) and agree(b"\x0e\x01\x00\x01" + bytes([0x0A, len(packed)]) + packed, PA)
    rendered = orjson.loads(NATIVE.render(records._SCHEMA[PA], packed, False))
    assert rendered[0]["pendingAckMetadata"] == [{"ledgerId": 7, "entryId": 1, "ackSet": [126, 3], "batchSize": -1}]
    assert NATIVE.render(records._SCHEMA[TC], b"\x0e\x01\x00\x01", True) == b"[]"
    assert NATIVE.render(records._SCHEMA[TC], b"\x0e\x01\x00\x07" + codec.encode_batch([codec.TcRecord()])[4:], True)


def test_what_only_protobuf_can_say_is_left_to_python():
    cases = {
        "invalid UTF-8": bytes([0x62, 0x02, 0xC3, 0x28]),  # owner: shown lossy by Python
        "a surrogate in UTF-8": bytes([0x62, 0x03, 0xED, 0xA0, 0x80]),
        "a group": bytes([0x6B, 0x6C]),  # field 13, start and end group
        "a wrong wire type": bytes([0x08, 0x01, 0x15, 0x01, 0x00, 0x00, 0x00]),  # txnid_least_bits as fixed32
        "a packed singular": bytes([0x12, 0x01, 0x05]),
        "a padded varint": bytes([0x08, 0x83, 0x00]),  # metadata_op = 3 in two bytes (the scanner's rule too)
        "a required field missing": bytes([0x3A, 0x03, 0x0A, 0x01, 0x74]),  # subscriptions { topic: "t" }
    }
    for name, data in cases.items():
        assert NATIVE.render(records._SCHEMA[TC], data, False) is None, name
        agree(data, TC)
    assert NATIVE.render(records._SCHEMA[TC], bytearray(b"\x08\x01"), False) is None  # only bytes


def test_a_singular_message_given_twice_is_left_to_protobuf_which_merges_them():
    # Neither log has a singular message field today; a schema with one shows the rule holds.
    record = ((2, 0, b'"least":', False, False, None, -1), (3, 0, b'"most":', False, False, None, -1))
    record += ((7, 7, b'"sub":', False, False, None, 1),)
    schema = NATIVE.schema(((record, ((1, 6, b'"topic":', False, False, None, -1),)), 3, 2))
    once = bytes([0x3A, 0x03, 0x0A, 0x01, 0x74])
    assert NATIVE.render(schema, once, False) == b'[{"txnId":"(0,0)","sub":{"topic":"t"}}]'
    assert NATIVE.render(schema, once + bytes([0x3A, 0x00]), False) is None


def test_a_schema_is_checked_when_compiled():
    spec = tojson.native_spec(codec.TcRecord.DESCRIPTOR)
    assert [field[2] for field in spec[0][0]][:3] == [b'"metadataOp":', b'"txnidLeastBits":', b'"txnidMostBits":']
    with pytest.raises(ValueError):
        NATIVE.schema(((), 3, 2))  # no message
    with pytest.raises(ValueError):
        NATIVE.schema((spec[0], 99, 2))  # txnid_most_bits is not field 99
    with pytest.raises(ValueError):
        NATIVE.schema((((((1, 7, b'"x":', False, False, None, 5),),)), 1, 1))  # nested type 5 does not exist


def test_decode_jsonl_writes_the_same_bytes_with_and_without_the_renderer(cli, tmp_path, monkeypatch):
    record = codec.TcRecord(metadata_op=2, txnid_most_bits=1, txnid_least_bits=2)
    record.subscriptions.add(topic="persistent://public/default/t", subscription="s")
    ack = codec.PendingAckRecord(pending_ack_op=1, ack_type=0, txnid_most_bits=1, txnid_least_bits=2)
    ack.pending_ack_metadata.add(ledgerId=12, entryId=3, ack_set=[-2, 5], batch_size=10)
    entries = [
        (TC_ML, codec.encode_batch([record, codec.TcRecord(metadata_op=0, owner="b")])),
        (PA_ML, codec.encode_batch([ack, ack])),
        (PA_ML, codec.encode_single(ack)),
        (TC_ML, bytes([0x62, 0x02, 0xC3, 0x28])),  # invalid UTF-8: the Python path's lossy text
        (TC_ML, b"\x0e\x01\x00\x02" + codec.encode_batch([record])[4:]),  # unknown version: a warning
    ]
    dump = tmp_path / "d.jsonl"
    dump.write_text("".join(dumps.dump_line(ml, 5, i, data) + "\n" for i, (ml, data) in enumerate(entries)))
    answered = []

    class Counting:
        @staticmethod
        def render(schema, data, batched):
            out = NATIVE.render(schema, data, batched)
            answered.append(out is not None)
            return out

    monkeypatch.setattr(records, "NATIVE", Counting)
    fast = cli(["decode", dump, "-o", "jsonl"])
    monkeypatch.setattr(records, "NATIVE", None)
    slow = cli(["decode", dump, "-o", "jsonl"])
    assert fast.exit_code == slow.exit_code == 0, fast.stderr
    assert fast.stdout == slow.stdout and fast.stderr == slow.stderr
    assert answered == [True, True, True, False, True]
    assert "\ufffd(" in fast.stdout.splitlines()[3]


def test_every_entry_of_the_real_brokers_dumps_is_rendered_natively():
    from .test_real_dumps import FILES, LOGS, REAL

    assert FILES, "the real readledger dumps are missing"
    count = 0
    for name, info in FILES:
        with open(REAL / name, "rb") as stream:
            for raw in dumps.read_entries(stream, "readledger", source=name):
                assert agree(raw.data, LOGS[info["kind"]]), f"{name} {raw.where}"
                count += 1
    assert count >= 100, count
