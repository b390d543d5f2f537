"""Records <-> the documented JSON shape (entry_to_json, record_to_dict and back)."""

from __future__ import annotations

from pulsar_txn_cli.codec import tojson
from pulsar_txn_cli.codec.entries import DecodedEntry
from pulsar_txn_cli.codec.logs import RECORD_TYPE

try:  # decode's native renderer (setup.py builds it where a C compiler is present)
    from pulsar_txn_cli.codec import _render as NATIVE
except ImportError:
    NATIVE = None

_RECORD_TO_DICT, _RECORDS_TO_DICTS, _SCHEMA = {}, {}, {}
for _log, _type in RECORD_TYPE.items():
    _RECORD_TO_DICT[_log], _RECORDS_TO_DICTS[_log] = tojson.converters(_type.DESCRIPTOR)
    if NATIVE is not None:
        _SCHEMA[_log] = NATIVE.schema(tojson.native_spec(_type.DESCRIPTOR))


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


def entry_to_json(entry: DecodedEntry, compact: bool = False) -> dict:
    """The documented JSON object of one entry.

    compact: the caller writes it with orjson without indentation (JSONL), so the records may
    come as one orjson.Fragment from the native renderer, the very bytes orjson would write for
    the list; where it is not built, or leaves an entry to Python, they are dicts as always."""
    records = None
    if compact and NATIVE is not None and entry.data is not None:
        records = NATIVE.render(_SCHEMA[entry.log], entry.data, entry.batched)
        if records is not None:
            import orjson

            records = orjson.Fragment(records)
    out = {
        "ledgerId": entry.ledger_id,
        "entryId": entry.entry_id,
        "log": entry.log,
        "batched": entry.batched,
        "version": entry.version,
        "size": entry.size,
        "records": records if records is not None else records_to_dicts(entry.records, entry.log, entry.batched),
    }
    if entry.managed_ledger is not None:
        out["managedLedger"] = entry.managed_ledger
    if entry.warnings:
        out["warnings"] = list(entry.warnings)
    return out


def record_from_dict(data: dict, log: str):
    """Inverse of record_to_dict (ignores txnId and batchIndex); enums by name or number."""
    return _from_dict(RECORD_TYPE[log](), data)


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
