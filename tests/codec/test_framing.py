"""Entry framing, record checks and the JSON shape (pulsar_txn_cli.codec)."""

from __future__ import annotations

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.errors import DecodeError
from tests.codec.samples import pending_ack, tc_lifecycle

TC, PA = codec.TC_LOG, codec.PENDING_ACK_LOG


def decode_error(data: bytes, log: str) -> DecodeError:
    with pytest.raises(DecodeError) as info:
        codec.decode_entry(data, log)
    return info.value


# ---------------------------------------------------------------- framing


def test_batched_entry_layout_is_magic_version_then_container():
    records = tc_lifecycle(7)
    data = codec.encode_batch(records)
    assert data[:4] == b"\x0e\x01\x00\x01"
    from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2

    container = tc_pb2.BatchedTransactionMetadataEntry()
    container.ParseFromString(data[4:])
    assert list(container.transaction_logs) == records


def test_single_entry_is_the_bare_record():
    record = tc_lifecycle(7)[0]
    data = codec.encode_single(record)
    assert data == record.SerializeToString()
    entry = codec.decode_entry(data, TC)
    assert (entry.batched, entry.version, entry.size, entry.records) == (False, None, len(data), [record])


@pytest.mark.parametrize(
    "log, records",
    [(TC, tc_lifecycle(1) + tc_lifecycle(2)), (PA, [pending_ack(1), pending_ack(2, op=2), pending_ack(3, op=3)])],
)
def test_batch_round_trip_keeps_order(log, records):
    entry = codec.decode_entry(codec.encode_batch(records), log)
    assert entry.batched and entry.version == 1 and entry.warnings == []
    assert entry.records == records


def test_encode_batch_serialized_matches_encode_batch():
    records = tc_lifecycle(3)
    assert codec.encode_batch_serialized([r.SerializeToString() for r in records]) == codec.encode_batch(records)


def test_large_batch_lengths_use_multibyte_varints():
    records = [pending_ack(i, positions=[(i, j) for j in range(40)]) for i in range(3)]
    assert len(records[0].SerializeToString()) > 300
    assert codec.decode_entry(codec.encode_batch(records), PA).records == records


def test_unknown_version_decodes_with_version_1_layout_and_warns():
    data = codec.encode_batch(tc_lifecycle(1), version=7)
    entry = codec.decode_entry(data, TC)
    assert entry.version == 7 and len(entry.records) == 5
    assert entry.warnings == ["unknown batch version 7; decoded with the version-1 layout"]


def test_empty_batch_is_a_warning_not_an_error():
    entry = codec.decode_entry(codec.encode_batch([]), TC)
    assert entry.records == [] and entry.warnings == ["the batched entry holds no records"]


def test_unknown_fields_are_tolerated():
    # Field 13 (is_timeout in a fork) and field 99 of every wire type the record does not know.
    record = tc_lifecycle(1)[0]
    extra = b"\x68\x01" + b"\x9a\x06\x03abc" + b"\x9d\x06\x01\x02\x03\x04"
    entry = codec.decode_entry(record.SerializeToString() + extra, TC)
    assert codec.record_to_dict(entry.records[0], TC) == codec.record_to_dict(record, TC)
    batched = codec.encode_batch_serialized([record.SerializeToString() + extra])
    assert codec.decode_entry(batched, TC).records[0].txnid_least_bits == 1


# ---------------------------------------------------------------- specific errors


def test_empty_entry():
    assert str(decode_error(b"", TC)) == "the entry is empty (0 bytes)"


@pytest.mark.parametrize("data", [b"\x0e", b"\x0e\x01", b"\x0e\x01\x00"])
def test_truncated_prefix(data):
    error = decode_error(data, PA)
    assert "prefix" in str(error) and "truncated" in str(error) or "4-byte prefix" in str(error)


def test_truncated_prefix_names_its_length():
    error = decode_error(b"\x0e\x01\x00", TC)
    assert "only 3 bytes long" in error.reason and "4-byte prefix" in error.reason
    assert error.offset == 3


def test_0x0e_without_the_magic():
    error = decode_error(b"\x0e\x02\x00\x01\x0a\x00", TC)
    assert "neither the batch magic 0x0E01 nor a protobuf record" in error.reason


def test_truncated_single_record():
    data = codec.TcRecord(
        metadata_op=1, txnid_least_bits=1, partitions=["persistent://t-partition-0"]
    ).SerializeToString()
    error = decode_error(data[:-5], TC)
    assert error.reason.startswith("the TC log record is truncated: field 6 claims")
    assert error.offset == data.index(b"\x32")


def test_truncated_batch_names_the_record():
    records = tc_lifecycle(1)
    data = codec.encode_batch(records)
    error = decode_error(data[:-3], TC)
    assert error.reason.startswith("the batched TC log entry is truncated: record 4 of the batch")
    assert error.offset == len(data) - len(records[4].SerializeToString()) - 2


def test_invalid_protobuf_names_the_wire_type():
    error = decode_error(b"\x08\x01\x0f\x00", TC)
    assert error.reason == "the TC log record is not valid protobuf: tag 0xf has wire type 7, which does not exist"
    assert error.offset == 2


def test_invalid_protobuf_inside_a_batched_record():
    good = pending_ack(1).SerializeToString()
    bad = b"\x08\x01\x2a\x04\x08\x01\x10\x80"  # a PendingAckMetadata whose entryId varint is cut
    data = codec.encode_batch_serialized([good, good, bad])
    error = decode_error(data, PA)
    assert error.reason == (
        "the batched pending-ack entry is truncated: record 2 of the batch, in pending_ack_metadata: a varint runs past the end"
    )
    assert error.offset == len(data) - 1


def test_missing_required_field_in_a_single_record():
    record = codec.PendingAckRecord(pending_ack_op=1, txnid_least_bits=1)
    record.pending_ack_metadata.add(entryId=4)  # no ledgerId
    error = decode_error(record.SerializePartialToString(), PA)
    assert error.reason == "the pending-ack record lacks required field pending_ack_metadata[0].ledgerId"


def test_missing_required_field_in_a_batch_names_record_and_offset():
    good = pending_ack(1).SerializeToString()
    bad = codec.PendingAckRecord(pending_ack_op=1)
    bad.pending_ack_metadata.add(ledgerId=4)  # no entryId
    data = codec.encode_batch_serialized([good, bad.SerializePartialToString()])
    error = decode_error(data, PA)
    assert (
        error.reason
        == "the batched pending-ack entry: record 1 of the batch lacks required field pending_ack_metadata[0].entryId"
    )
    assert error.offset == 4 + 2 + len(good)


def test_missing_subscription_fields():
    record = codec.TcRecord(metadata_op=2)
    record.subscriptions.add(topic="t")
    assert "subscriptions[0].subscription" in decode_error(record.SerializePartialToString(), TC).reason


def test_errors_are_located_when_the_caller_names_the_entry():
    error = decode_error(b"", TC).located("12:3")
    assert str(error) == "entry 12:3: the entry is empty (0 bytes)"
    assert str(decode_error(b"\x0e\x01\x00", TC).located("x #2")).endswith("(at byte 3)")


# ---------------------------------------------------------------- JSON shape


def test_tc_record_json_uses_proto_names_enum_names_and_integers():
    new = tc_lifecycle(2**63 + 5, most=2**64 - 1)[0]
    out = codec.record_to_dict(new, TC)
    assert out == {
        "txnId": f"({2**64 - 1},{2**63 + 5})",
        "metadataOp": "NEW",
        "txnidLeastBits": 2**63 + 5,
        "txnidMostBits": 2**64 - 1,
        "newStatus": "OPEN",
        "timeoutMs": 30000,
        "startTime": 1_763_770_000_000,
        "lastModificationTime": 1_763_770_000_000,
        "maxLocalTxnId": 2**63 + 5,
        "owner": "pulsar://broker-1:6650",
    }
    assert list(out)[0] == "txnId"


def test_tc_update_and_subscription_json():
    _, part, sub, committing, _ = tc_lifecycle(4)
    assert codec.record_to_dict(part, TC)["partitions"] == ["persistent://public/default/orders-partition-0"]
    assert codec.record_to_dict(sub, TC)["subscriptions"] == [
        {"topic": "persistent://public/default/orders-partition-0", "subscription": "billing"}
    ]
    update = codec.record_to_dict(committing, TC)
    assert (update["metadataOp"], update["expectedStatus"], update["newStatus"]) == ("UPDATE", "OPEN", "COMMITTING")
    assert "timeoutMs" not in update and "owner" not in update  # absent fields are omitted


def test_pending_ack_json():
    out = codec.record_to_dict(pending_ack(9, positions=[(12, 3), (12, 4)], cumulative=True), PA, batch_index=2)
    assert out == {
        "batchIndex": 2,
        "txnId": "(1,9)",
        "pendingAckOp": "ACK",
        "ackType": "Cumulative",
        "txnidLeastBits": 9,
        "txnidMostBits": 1,
        "pendingAckMetadata": [
            {"ledgerId": 12, "entryId": 3, "ackSet": [-2], "batchSize": 10},
            {"ledgerId": 12, "entryId": 4, "ackSet": [-2], "batchSize": 10},
        ],
    }
    assert codec.record_to_dict(pending_ack(9, op=3), PA) == {
        "txnId": "(1,9)",
        "pendingAckOp": "ABORT",
        "txnidLeastBits": 9,
        "txnidMostBits": 1,
    }


def test_entry_json_shape():
    entry = codec.decode_entry(codec.encode_batch(tc_lifecycle(1)[:2]), TC)
    entry.ledger_id, entry.entry_id = 12, 0
    out = codec.entry_to_json(entry)
    assert list(out) == ["ledgerId", "entryId", "log", "batched", "version", "size", "records"]
    assert (out["ledgerId"], out["entryId"], out["log"], out["batched"], out["version"]) == (12, 0, "tc", True, 1)
    assert [r["batchIndex"] for r in out["records"]] == [0, 1]
    single = codec.entry_to_json(codec.decode_entry(codec.encode_single(pending_ack(1)), PA))
    assert single["version"] is None and "batchIndex" not in single["records"][0]
    assert single["ledgerId"] is None and single["entryId"] is None


def test_invalid_utf8_string_is_shown_lossy_not_crashing():
    record = codec.TcRecord(metadata_op=1)
    data = record.SerializeToString() + b"\x32\x02\xff\xfe" + b"\x62\x01\xff"
    entry = codec.decode_entry(data, TC)
    out = codec.record_to_dict(entry.records[0], TC)
    assert out["partitions"] == ["\ufffd\ufffd"] and out["owner"] == "\ufffd"
    assert codec.summarize(entry.records[0], TC) == "\ufffd\ufffd"


def test_record_from_dict_inverts_record_to_dict():
    for record in tc_lifecycle(5):
        assert codec.record_from_dict(codec.record_to_dict(record, TC, 3), TC) == record
    record = pending_ack(5, positions=[(1, 2), (3, 4)])
    assert codec.record_from_dict(codec.record_to_dict(record, PA), PA) == record


# ---------------------------------------------------------------- names


@pytest.mark.parametrize(
    "name, log",
    [
        ("pulsar/system/persistent/__transaction_log_0", TC),
        ("persistent://pulsar/system/__transaction_log_12", TC),
        ("public/default/persistent/orders-billing__transaction_pending_ack", PA),
        ("persistent://public/default/orders-partition-0-billing__transaction_pending_ack", PA),
        ("public/default/persistent/orders", None),
        ("public/__transaction_log_x/persistent/orders", None),
        ("", None),
        (None, None),
    ],
)
def test_log_of_managed_ledger(name, log):
    assert codec.log_of_managed_ledger(name) == log


def test_op_names_and_summaries():
    new, part, sub, committing, committed = tc_lifecycle(1)
    assert [codec.op_name(r, TC) for r in (new, part, sub, committing, committed)] == [
        "NEW",
        "ADD_PARTITION",
        "ADD_SUBSCRIPTION",
        "UPDATE:COMMITTING",
        "UPDATE:COMMITTED",
    ]
    assert codec.summarize(new, TC) == "timeout 30000 ms, owner pulsar://broker-1:6650"
    assert codec.summarize(sub, TC) == "persistent://public/default/orders-partition-0 / billing"
    assert codec.summarize(committed, TC) == "COMMITTING -> COMMITTED"
    many = pending_ack(1, positions=[(1, i) for i in range(6)], cumulative=True)
    assert codec.op_name(many, PA) == "ACK"
    assert codec.summarize(many, PA) == "Cumulative 1:0, 1:1, 1:2, 1:3 (+2)"
    assert codec.op_name(pending_ack(1, op=2), PA) == "COMMIT"


def test_presence_not_values_decides_which_fields_appear():
    # Set to the default (0 / NEW / OPEN) still appears; absent never does, even where the
    # default is not zero (PendingAckOp has no 0: an absent op reads as ACK).
    zeros = codec.TcRecord(metadata_op=0, txnid_most_bits=0, txnid_least_bits=0, new_status=0, timeout_ms=0, owner="")
    assert codec.record_to_dict(zeros, TC) == {
        "txnId": "(0,0)",
        "metadataOp": "NEW",
        "txnidLeastBits": 0,
        "txnidMostBits": 0,
        "newStatus": "OPEN",
        "timeoutMs": 0,
        "owner": "",
    }
    assert codec.record_to_dict(codec.TcRecord(), TC) == {"txnId": "(0,0)"}
    no_op = codec.PendingAckRecord(txnid_least_bits=3)
    assert codec.record_to_dict(no_op, PA) == {"txnId": "(0,3)", "txnidLeastBits": 3}
    assert codec.records_to_dicts([no_op], PA, batched=True) == [
        {"batchIndex": 0, "txnId": "(0,3)", "txnidLeastBits": 3}
    ]
    ack = codec.PendingAckRecord(pending_ack_op=1, ack_type=0)
    assert codec.record_to_dict(ack, PA) == {"txnId": "(0,0)", "pendingAckOp": "ACK", "ackType": "Individual"}
