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

from pulsar_txn_cli.codec import tojson
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
_KIND = {TC_LOG: "TC log", PENDING_ACK_LOG: "pending-ack"}

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
    where: str | None = None  # how messages name it: "ledger:entry" or "source #n"


def log_of_managed_ledger(name: str | None) -> str | None:
    """Which log a managed-ledger (or topic) name belongs to, or None when it tells nothing."""
    if not name:
        return None
    if name.endswith(PENDING_ACK_MARKER):
        return PENDING_ACK_LOG
    if name.rsplit("/", 1)[-1].startswith(TC_LOG_MARKER):
        return TC_LOG
    return None


def is_batched(data: bytes) -> bool:
    return data[:2] == _MAGIC_BYTES


def decode_entry(data: bytes, log: str) -> DecodedEntry:
    """Decode one entry. Raises DecodeError (with a byte offset where one is known).

    Like Pulsar's readers, only the magic decides: an unknown version is decoded with the
    version-1 layout and reported in the entry's warnings.
    """
    size = len(data)
    if size == 0:
        raise DecodeError("the entry is empty (0 bytes)")
    if data[0] == 0x0E:
        return _decode_batched(data, log)
    record = _RECORD[log]()
    _parse(record, data, 0, f"the {_KIND[log]} record")
    return DecodedEntry(log, False, None, size, [record], [])


def _decode_batched(data: bytes, log: str) -> DecodedEntry:
    size = len(data)
    if size < 2 or data[1] != 0x01:
        if size < 2:
            raise DecodeError("the entry is the single byte 0x0E: a truncated batch prefix")
        # 0x0E is field 1 with wire type 6, so no valid record starts with it either.
        raise DecodeError(
            f"the entry starts with 0x0E{data[1]:02X}, neither the batch magic 0x0E01 nor a protobuf record", offset=0
        )
    if size < PREFIX_LEN:
        raise DecodeError(
            f"the entry starts with the batch magic 0x0E01 but is only {size} bytes long; "
            f"a batched entry needs a {PREFIX_LEN}-byte prefix (magic and version)",
            offset=size,
        )
    version = (data[2] << 8) | data[3]
    container = _BATCH[log]()
    _parse(container, data, PREFIX_LEN, f"the batched {_KIND[log]} entry")
    records = list(getattr(container, _BATCH_FIELD[log]))
    warnings = []
    if version != VERSION:
        warnings.append(f"unknown batch version {version}; decoded with the version-1 layout")
    if not records:
        warnings.append("the batched entry holds no records")
    return DecodedEntry(log, True, version, size, records, warnings)


def _parse(message, data: bytes, start: int, what: str) -> None:
    try:
        message.ParseFromString(data[start:] if start else data)
    except Exception:  # noqa: BLE001 - upb raises DecodeError and, on hostile input, a few others
        raise _parse_error(message.DESCRIPTOR, data, start, what) from None
    if not message.IsInitialized():
        raise _missing_fields_error(message, data, start, what)


def _parse_error(descriptor, data: bytes, start: int, what: str) -> DecodeError:
    from pulsar_txn_cli.codec import wire

    problem = wire.diagnose(data, start, len(data), descriptor)
    if problem is None:
        return DecodeError(f"{what} is not valid protobuf", offset=start)
    verdict = "is truncated" if problem.kind == "truncated" else "is not valid protobuf"
    context, detail = _batch_context(descriptor, data, start, problem.offset), problem.detail
    if context:
        inner = detail.removeprefix(f"in {descriptor.fields[0].name}: ")
        if inner != detail:
            detail = f"{context}, {inner}"  # the problem is inside the record
        elif detail.startswith("field 1 claims"):
            detail = f"{context} {detail.removeprefix('field 1 ')}"  # the record's own length
        else:
            detail = f"{context}: {detail}"
    return DecodeError(f"{what} {verdict}: {detail}", offset=problem.offset)


def _missing_fields_error(message, data: bytes, start: int, what: str) -> DecodeError:
    missing = message.FindInitializationErrors()
    first, offset = missing[0], None
    more = f" (and {len(missing) - 1} more)" if len(missing) > 1 else ""
    head, _, rest = first.partition(".")
    if rest and head.endswith("]") and message.DESCRIPTOR.name.startswith("Batched"):
        # "pending_ack_logs[3].pending_ack_metadata[0].ledgerId": name the record of the batch.
        from pulsar_txn_cli.codec import wire

        index = int(head[head.index("[") + 1 : -1])
        spans = wire.element_spans(data, start, len(data), 1)
        offset = spans[index][0] if index < len(spans) else None
        return DecodeError(f"{what}: record {index} of the batch lacks required field {rest}{more}", offset=offset)
    return DecodeError(f"{what} lacks required field {first}{more}", offset=offset)


def _batch_context(descriptor, data: bytes, start: int, offset: int) -> str:
    """'record N of the batch' when the problem sits in (or after) a batched container's record N."""
    if not descriptor.name.startswith("Batched"):
        return ""
    from pulsar_txn_cli.codec import wire

    spans = wire.element_spans(data, start, len(data), 1)
    index = sum(1 for _, _, value_end in spans if value_end <= offset)
    return f"record {index} of the batch"


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


_text = tojson.text
_RECORD_TO_DICT, _RECORDS_TO_DICTS = {}, {}
for _log, _type in _RECORD.items():
    _RECORD_TO_DICT[_log], _RECORDS_TO_DICTS[_log] = tojson.converters(_type.DESCRIPTOR)


def txn_id(record) -> str:
    """Pulsar's TxnID text: "(most,least)"."""
    return f"({record.txnid_most_bits},{record.txnid_least_bits})"


def record_to_dict(record, log: str, batch_index: int | None = None) -> dict:
    """One record in the documented JSON shape (batchIndex only for records of a batch)."""
    txn = txn_id(record)
    out = {"batchIndex": batch_index, "txnId": txn} if batch_index is not None else {"txnId": txn}
    return _RECORD_TO_DICT[log](record, out)


def records_to_dicts(records, log: str, batched: bool) -> list[dict]:
    """record_to_dict over an entry's records (batchIndex = position when batched), in one loop."""
    return _RECORDS_TO_DICTS[log](records, batched)


def entry_to_json(entry: DecodedEntry) -> dict:
    """The documented JSON object of one entry."""
    out = {
        "ledgerId": entry.ledger_id,
        "entryId": entry.entry_id,
        "log": entry.log,
        "batched": entry.batched,
        "version": entry.version,
        "size": entry.size,
        "records": records_to_dicts(entry.records, entry.log, entry.batched),
    }
    if entry.managed_ledger is not None:
        out["managedLedger"] = entry.managed_ledger
    if entry.warnings:
        out["warnings"] = list(entry.warnings)
    return out


def record_from_dict(data: dict, log: str):
    """Inverse of record_to_dict (ignores txnId and batchIndex); enums by name or number."""
    return _from_dict(_RECORD[log](), data)


def _from_dict(message, data: dict):
    descriptor = message.DESCRIPTOR
    fields = {**descriptor.fields_by_name, **{fd.json_name: fd for fd in descriptor.fields}}  # both casings
    for key, value in data.items():
        fd = fields.get(key)
        if fd is None:
            if key in ("txnId", "batchIndex"):
                continue
            raise ValueError(f"{message.DESCRIPTOR.name} has no field {key!r}")
        key = fd.name
        if fd.message_type is not None:
            container = getattr(message, key)
            for item in value if fd.is_repeated else [value]:
                _from_dict(container.add() if fd.is_repeated else container, item)
            continue
        if fd.enum_type is not None:
            numbers = fd.enum_type.values_by_name
            def to_number(v, numbers=numbers):
                return numbers[v].number if isinstance(v, str) else v
            value = [to_number(v) for v in value] if fd.is_repeated else to_number(value)
        if fd.is_repeated:
            getattr(message, key).extend(value)
        else:
            setattr(message, key, value)
    return message


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
