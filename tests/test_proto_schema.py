"""The project's .proto files: equal to Pulsar's schema (apache/pulsar's PulsarTransactionMetadata.proto and TransactionPendingAck.proto), generated modules not stale."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
GEN = ROOT / "pulsar_txn_cli" / "codec" / "gen"

O, R, REP = "optional", "required", "repeated"

# (number, label, type, name) transcribed from apache/pulsar's pulsar-transaction/coordinator/src/main/proto/
# PulsarTransactionMetadata.proto and pulsar-broker/src/main/proto/TransactionPendingAck.proto.
SCHEMA = {
    "pulsar.proto.TransactionMetadataEntry": [
        (1, O, "pulsar.proto.TransactionMetadataEntry.TransactionMetadataOp", "metadata_op"),
        (2, O, "uint64", "txnid_least_bits"),
        (3, O, "uint64", "txnid_most_bits"),
        (4, O, "pulsar.proto.TxnStatus", "expected_status"),
        (5, O, "pulsar.proto.TxnStatus", "new_status"),
        (6, REP, "string", "partitions"),
        (7, REP, "pulsar.proto.Subscription", "subscriptions"),
        (8, O, "uint64", "timeout_ms"),
        (9, O, "uint64", "start_time"),
        (10, O, "uint64", "last_modification_time"),
        (11, O, "uint64", "max_local_txn_id"),
        (12, O, "string", "owner"),
    ],
    "pulsar.proto.BatchedTransactionMetadataEntry": [
        (1, REP, "pulsar.proto.TransactionMetadataEntry", "transaction_logs")
    ],
    "pulsar.proto.Subscription": [(1, R, "string", "topic"), (2, R, "string", "subscription")],
    "pulsar.proto.PendingAckMetadata": [
        (1, R, "uint64", "ledgerId"),
        (2, R, "uint64", "entryId"),
        (3, REP, "int64", "ack_set"),
        (4, O, "int32", "batch_size"),
    ],
    "pulsar.proto.PendingAckMetadataEntry": [
        (1, O, "pulsar.proto.PendingAckOp", "pending_ack_op"),
        (2, O, "pulsar.proto.CommandAck.AckType", "ack_type"),
        (3, O, "uint64", "txnid_least_bits"),
        (4, O, "uint64", "txnid_most_bits"),
        (5, REP, "pulsar.proto.PendingAckMetadata", "pending_ack_metadata"),
    ],
    "pulsar.proto.BatchedPendingAckMetadataEntry": [
        (1, REP, "pulsar.proto.PendingAckMetadataEntry", "pending_ack_logs")
    ],
}
ENUMS = {
    "pulsar.proto.TxnStatus": [("OPEN", 0), ("COMMITTING", 1), ("COMMITTED", 2), ("ABORTING", 3), ("ABORTED", 4)],
    "pulsar.proto.TransactionMetadataEntry.TransactionMetadataOp": [
        ("NEW", 0),
        ("ADD_PARTITION", 1),
        ("ADD_SUBSCRIPTION", 2),
        ("UPDATE", 3),
    ],
    "pulsar.proto.PendingAckOp": [("ACK", 1), ("COMMIT", 2), ("ABORT", 3)],
    "pulsar.proto.CommandAck.AckType": [("Individual", 0), ("Cumulative", 1)],
}
_SCALARS = {3: "int64", 4: "uint64", 5: "int32", 9: "string"}


def _pool():
    from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2, TransactionPendingAck_pb2  # noqa: F401
    from google.protobuf import descriptor_pool

    return descriptor_pool.Default()


def _describe(fd) -> tuple:
    label = REP if fd.is_repeated else (R if fd.is_required else O)
    if fd.message_type is not None:
        kind = fd.message_type.full_name
    elif fd.enum_type is not None:
        kind = fd.enum_type.full_name
    else:
        kind = _SCALARS[fd.type]
    return (fd.number, label, kind, fd.name)


@pytest.mark.parametrize("message", sorted(SCHEMA))
def test_message_fields_match_the_fact_sheet(message):
    descriptor = _pool().FindMessageTypeByName(message)
    assert sorted(_describe(fd) for fd in descriptor.fields) == SCHEMA[message]


@pytest.mark.parametrize("enum", sorted(ENUMS))
def test_enums_match_the_fact_sheet(enum):
    descriptor = _pool().FindEnumTypeByName(enum)
    assert [(v.name, v.number) for v in descriptor.values] == ENUMS[enum]


def test_txnid_defaults_are_zero():
    fields = _pool().FindMessageTypeByName("pulsar.proto.TransactionMetadataEntry").fields_by_name
    assert fields["txnid_least_bits"].has_default_value and fields["txnid_least_bits"].default_value == 0
    assert fields["txnid_most_bits"].has_default_value and fields["txnid_most_bits"].default_value == 0


def test_proto_files_declare_proto2_and_the_pulsar_package():
    for proto in (ROOT / "pulsar_txn_cli" / "codec" / "proto").glob("*.proto"):
        text = proto.read_text()
        assert 'syntax = "proto2";' in text and "package pulsar.proto;" in text, proto.name


def test_generated_modules_are_not_stale(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_proto.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    fresh = sorted(p.name for p in tmp_path.glob("*.py"))
    assert fresh == sorted(p.name for p in GEN.glob("*.py"))
    stale = [name for name in fresh if (tmp_path / name).read_text() != (GEN / name).read_text()]
    assert not stale, f"{stale} differ from the .proto files; run: .venv/bin/python scripts/gen_proto.py"
