"""Bytes <-> records for the transaction coordinator log and the pending-ack log.

An entry is either one record (the raw protobuf of a TransactionMetadataEntry or a
PendingAckMetadataEntry) or, since PIP-160, a batch: magic 0x0E01 and a version (two
big-endian shorts) followed by the protobuf of the batched container. Both kinds share a
ledger. Decoding keeps the records as protobuf messages (fast); `entry_to_json` turns them
into the JSON shape documented in the README.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from google.protobuf.message import DecodeError as _ProtoDecodeError

from pulsar_txn_cli.codec.gen import PulsarApi_pb2 as api_pb2
from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2
from pulsar_txn_cli.errors import DecodeError

TC_LOG = "tc"
PENDING_ACK_LOG = "pending-ack"
LOGS = (TC_LOG, PENDING_ACK_LOG)

MAGIC = 0x0E01
VERSION = 1
PREFIX = struct.pack(">HH", MAGIC, VERSION)
PREFIX_LEN = 4
_MAGIC_BYTES = PREFIX[:2]

TcRecord = tc_pb2.TransactionMetadataEntry
PendingAckRecord = pa_pb2.PendingAckMetadataEntry
Subscription = api_pb2.Subscription
PendingAckPosition = pa_pb2.PendingAckMetadata

_RECORD = {TC_LOG: tc_pb2.TransactionMetadataEntry, PENDING_ACK_LOG: pa_pb2.PendingAckMetadataEntry}
_BATCH = {TC_LOG: tc_pb2.BatchedTransactionMetadataEntry, PENDING_ACK_LOG: pa_pb2.BatchedPendingAckMetadataEntry}
_BATCH_FIELD = {TC_LOG: "transaction_logs", PENDING_ACK_LOG: "pending_ack_logs"}

TC_LOG_MARKER = "__transaction_log_"
PENDING_ACK_MARKER = "__transaction_pending_ack"


@dataclass(slots=True)
class DecodedEntry:
    """One BookKeeper entry of a transaction log, decoded."""

    log: str
    batched: bool
    version: int | None
    size: int
    records: list = field(default_factory=list)  # protobuf messages, in batch-index order
    warnings: list[str] = field(default_factory=list)
    ledger_id: int | None = None
    entry_id: int | None = None
    managed_ledger: str | None = None


def log_of_managed_ledger(name: str | None) -> str | None:
    """Which log a managed-ledger (or topic) name belongs to, or None when it tells nothing."""
    if not name:
        return None
    if name.endswith(PENDING_ACK_MARKER):
        return PENDING_ACK_LOG
    if TC_LOG_MARKER in name.rsplit("/", 1)[-1]:
        return TC_LOG
    return None


def is_batched(data: bytes) -> bool:
    return data[:2] == _MAGIC_BYTES


def decode_entry(data: bytes, log: str) -> DecodedEntry:
    """Decode one entry. Raises DecodeError (with a byte offset where one is known)."""
    size = len(data)
    if size == 0:
        raise DecodeError("the entry is empty (0 bytes)", offset=0)
    if data[0] == 0x0E and (size < 2 or data[1] == 0x01):
        if size < PREFIX_LEN:
            raise DecodeError(
                f"the entry starts with the batch magic 0x0E01 but is only {size} byte(s) long; "
                "a batched entry needs a 4-byte prefix",
                offset=0,
            )
        version = int.from_bytes(data[2:4], "big")
        container = _BATCH[log]()
        _parse(container, data, PREFIX_LEN, "batched container")
        records = list(getattr(container, _BATCH_FIELD[log]))
        warnings = []
        if version != VERSION:
            warnings.append(f"unknown batch version {version}; decoded with the version-1 layout")
        if not records:
            warnings.append("the batched entry holds no records")
        return DecodedEntry(log, True, version, size, records, warnings)
    record = _RECORD[log]()
    _parse(record, data, 0, "record")
    return DecodedEntry(log, False, None, size, [record], [])


def _parse(message, data: bytes, start: int, what: str) -> None:
    try:
        message.ParseFromString(data[start:] if start else data)
    except _ProtoDecodeError as exc:
        raise DecodeError(f"the {what} is truncated or not valid protobuf ({exc})", offset=start) from None
    except Exception as exc:  # upb raises a few other types on hostile input
        raise DecodeError(f"the {what} is not valid protobuf ({exc})", offset=start) from None
    if not message.IsInitialized():
        missing = ", ".join(message.FindInitializationErrors())
        raise DecodeError(f"the {what} lacks required field(s): {missing}", offset=start)


# ---------------------------------------------------------------- encoding


def encode_single(record) -> bytes:
    """An unbatched entry: the record's protobuf, no prefix."""
    return record.SerializeToString()


def encode_batch(records, version: int = VERSION) -> bytes:
    """A batched entry from record messages (either log; both containers use field 1)."""
    return encode_batch_serialized([r.SerializeToString() for r in records], version)


def encode_batch_serialized(serialized: list[bytes], version: int = VERSION) -> bytes:
    """A batched entry from already-serialized records, without re-encoding them."""
    parts = [struct.pack(">HH", MAGIC, version)]
    for body in serialized:
        parts.append(b"\x0a")  # field 1, length-delimited
        parts.append(_varint(len(body)))
        parts.append(body)
    return b"".join(parts)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


# ---------------------------------------------------------------- JSON shape


def _converter(descriptor):
    """A fast message -> dict function for one message type (proto field names, enum names).

    The plan is keyed by field descriptor so the hot loop does one dict lookup per set field.
    """
    plan = {}
    for fd in descriptor.fields:
        if fd.enum_type is not None:
            kind, extra = "enum", {v.number: v.name for v in fd.enum_type.values}
        elif fd.message_type is not None:
            kind, extra = "message", fd.message_type
        else:
            kind, extra = "scalar", None
        plan[fd] = (fd.name, kind, extra, fd.is_repeated)
    nested: dict = {}

    def convert(message) -> dict:
        out = {}
        for fd, value in message.ListFields():
            name, kind, extra, repeated = plan[fd]
            if kind == "scalar":
                out[name] = list(value) if repeated else value
            elif kind == "enum":
                out[name] = [extra.get(v, v) for v in value] if repeated else extra.get(value, value)
            else:
                conv = nested.get(name) or nested.setdefault(name, _converter(extra))
                out[name] = [conv(v) for v in value] if repeated else conv(value)
        return out

    return convert


_TO_DICT = {
    TC_LOG: _converter(tc_pb2.TransactionMetadataEntry.DESCRIPTOR),
    PENDING_ACK_LOG: _converter(pa_pb2.PendingAckMetadataEntry.DESCRIPTOR),
}


def txn_id(record) -> str:
    return f"({record.txnid_most_bits},{record.txnid_least_bits})"


def record_to_dict(record, log: str, batch_index: int | None = None) -> dict:
    out: dict = {}
    if batch_index is not None:
        out["batchIndex"] = batch_index
    out["txnId"] = txn_id(record)
    out.update(_TO_DICT[log](record))
    return out


def entry_to_json(entry: DecodedEntry) -> dict:
    """The documented JSON object of one entry."""
    log = entry.log
    if entry.batched:
        records = [record_to_dict(r, log, i) for i, r in enumerate(entry.records)]
    else:
        records = [record_to_dict(r, log) for r in entry.records]
    out = {
        "ledgerId": entry.ledger_id,
        "entryId": entry.entry_id,
        "log": log,
        "batched": entry.batched,
        "version": entry.version,
        "size": entry.size,
        "records": records,
    }
    if entry.managed_ledger is not None:
        out["managedLedger"] = entry.managed_ledger
    if entry.warnings:
        out["warnings"] = list(entry.warnings)
    return out


def record_from_dict(data: dict, log: str):
    """Inverse of record_to_dict (ignores txnId and batchIndex); used by tests and the engine."""
    record = _RECORD[log]()
    for key, value in data.items():
        if key in ("txnId", "batchIndex"):
            continue
        fd = record.DESCRIPTOR.fields_by_name[key]
        if fd.message_type is not None:
            container = getattr(record, key)
            for item in value:
                container.add(**item)
        elif fd.is_repeated:
            getattr(record, key).extend(value)
        else:
            setattr(record, key, value)
    return record


def summarize(record, log: str) -> str:
    """A short human summary of one record, for tables."""
    if log == TC_LOG:
        op = TcRecord.TransactionMetadataOp.Name(record.metadata_op)
        if op == "NEW":
            return f"timeout {record.timeout_ms} ms" + (f", owner {record.owner}" if record.owner else "")
        if op == "ADD_PARTITION":
            return ", ".join(record.partitions)
        if op == "ADD_SUBSCRIPTION":
            return ", ".join(f"{s.topic} / {s.subscription}" for s in record.subscriptions)
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
