"""Entry framing: one record's protobuf, or since PIP-160 a batch (magic 0x0E01, a version, then the
batched container's protobuf); decoding with located errors, and encoding.
"""

from __future__ import annotations

import struct

from pulsar_txn_cli.codec.entries import DecodedEntry
from pulsar_txn_cli.codec.logs import BATCH_FIELD, BATCH_TYPE, KIND, RECORD_TYPE
from pulsar_txn_cli.errors import DecodeError

MAGIC = 0x0E01
VERSION = 1
PREFIX = struct.pack(">HH", MAGIC, VERSION)
PREFIX_LEN = 4
_MAGIC_BYTES = PREFIX[:2]


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
    record = RECORD_TYPE[log]()
    _parse(record, data, 0, f"the {KIND[log]} record")
    return DecodedEntry(log, False, None, size, [record], [], data=data)


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
    container = BATCH_TYPE[log]()
    _parse(container, data, PREFIX_LEN, f"the batched {KIND[log]} entry")
    records = list(getattr(container, BATCH_FIELD[log]))
    warnings = []
    if version != VERSION:
        warnings.append(f"unknown batch version {version}; decoded with the version-1 layout")
    if not records:
        warnings.append("the batched entry holds no records")
    return DecodedEntry(log, True, version, size, records, warnings, data=data)


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
    append = parts.append
    for body in serialized:
        size = len(body)
        # field 1, length-delimited; the header of a short record (most of them) comes from a table
        append(_SHORT_HEADERS[size] if size < 128 else b"\x0a" + _varint(size))
        append(body)
    return b"".join(parts)


def _varint(value: int) -> bytes:
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


_SHORT_HEADERS = [b"\x0a" + bytes((size,)) for size in range(128)]
