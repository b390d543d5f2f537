"""The two transaction logs: their names, record types and how a managed-ledger name tells them apart."""

from __future__ import annotations

from pulsar_txn_cli.codec.gen import PulsarApi_pb2 as api_pb2
from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2
from pulsar_txn_cli.protocol import PENDING_ACK_SUFFIX, TC_LOG_MARKER

TC_LOG = "tc"
PENDING_ACK_LOG = "pending-ack"
LOGS = (TC_LOG, PENDING_ACK_LOG)

TcRecord = tc_pb2.TransactionMetadataEntry
PendingAckRecord = pa_pb2.PendingAckMetadataEntry
Subscription = api_pb2.Subscription
PendingAckPosition = pa_pb2.PendingAckMetadata

RECORD_TYPE = {TC_LOG: tc_pb2.TransactionMetadataEntry, PENDING_ACK_LOG: pa_pb2.PendingAckMetadataEntry}
BATCH_TYPE = {TC_LOG: tc_pb2.BatchedTransactionMetadataEntry, PENDING_ACK_LOG: pa_pb2.BatchedPendingAckMetadataEntry}
BATCH_FIELD = {TC_LOG: "transaction_logs", PENDING_ACK_LOG: "pending_ack_logs"}
KIND = {TC_LOG: "TC log", PENDING_ACK_LOG: "pending-ack"}


def log_of_managed_ledger(name: str | None) -> str | None:
    """Which log a managed-ledger (or topic) name belongs to, or None when it tells nothing."""
    if not name:
        return None
    if name.endswith(PENDING_ACK_SUFFIX):
        return PENDING_ACK_LOG
    if name.rsplit("/", 1)[-1].startswith(TC_LOG_MARKER):
        return TC_LOG
    return None
