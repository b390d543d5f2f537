"""Short human summaries of records, for tables."""

from __future__ import annotations

from pulsar_txn_cli.codec.gen import PulsarApi_pb2 as api_pb2
from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2
from pulsar_txn_cli.codec.logs import TC_LOG, TcRecord
from pulsar_txn_cli.codec.tojson import text as _text


def summarize(record, log: str) -> str:
    """A short human summary of one record, for tables."""
    if log == TC_LOG:
        op = TcRecord.TransactionMetadataOp.Name(record.metadata_op)
        if op == "NEW":
            return f"timeout {record.timeout_ms} ms" + (f", owner {_text(record.owner)}" if record.owner else "")
        if op == "ADD_PARTITION":
            return ", ".join(map(_text, record.partitions))
        if op == "ADD_SUBSCRIPTION":
            return ", ".join(f"{_text(s.topic)} / {_text(s.subscription)}" for s in record.subscriptions)
        return f"{tc_pb2.TxnStatus.Name(record.expected_status)} -> {tc_pb2.TxnStatus.Name(record.new_status)}"
    positions = ", ".join(f"{p.ledgerId}:{p.entryId}" for p in record.pending_ack_metadata[:4])
    more = len(record.pending_ack_metadata) - 4
    if more > 0:
        positions += f" (+{more})"
    ack = api_pb2.CommandAck.AckType.Name(record.ack_type) if record.HasField("ack_type") else ""
    return f"{ack} {positions}".strip()


def op_name(record, log: str) -> str:
    """NEW / ADD_PARTITION / ADD_SUBSCRIPTION / UPDATE:<status> for TC, ACK / COMMIT / ABORT for pending ack."""
    if log == TC_LOG:
        op = TcRecord.TransactionMetadataOp.Name(record.metadata_op)
        if op == "UPDATE":
            return f"UPDATE:{tc_pb2.TxnStatus.Name(record.new_status)}"
        return op
    return pa_pb2.PendingAckOp.Name(record.pending_ack_op)
