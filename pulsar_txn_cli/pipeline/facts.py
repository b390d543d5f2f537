"""Per-entry facts: the one decode step both runners share (local and the Spark executors).

An entry becomes one tuple of plain values (see FACT_FIELDS): where it lives, whether it is
batched, how many records and bytes, the operations it holds (sparse counts by OPS index) and
the distinct 64-bit hashes of its transaction ids. A bad entry yields the same tuple with an
error message and no records: analysis never stops at a corrupt entry.
"""

from __future__ import annotations

from bisect import bisect_left
from collections import Counter
from operator import attrgetter

from pulsar_txn_cli import codec
from pulsar_txn_cli.errors import DecodeError

try:  # the native scanner (setup.py builds it where a C compiler is present)
    from pulsar_txn_cli.pipeline import _scan as NATIVE
except ImportError:
    NATIVE = None

# Operation names as codec.op_name spells them; the index is the op's column everywhere.
TC_OPS = (
    "NEW",
    "ADD_PARTITION",
    "ADD_SUBSCRIPTION",
    "UPDATE:OPEN",
    "UPDATE:COMMITTING",
    "UPDATE:COMMITTED",
    "UPDATE:ABORTING",
    "UPDATE:ABORTED",
)
PENDING_ACK_OPS = ("ACK", "COMMIT", "ABORT")
OPS = TC_OPS + PENDING_ACK_OPS
OPS_OF_LOG = {codec.TC_LOG: TC_OPS, codec.PENDING_ACK_LOG: PENDING_ACK_OPS}
_UPDATE = 3  # TransactionMetadataOp.UPDATE; its status picks one of five columns
_PA_BASE = len(TC_OPS) - 1  # PendingAckOp starts at 1 (ACK)

# Powers of two, fine at the low end where most entries are (an unbatched entry holds 1 record of
# tens of bytes; Pulsar's metric buckets (10, 50, ... and 128, 512, ...) would put them all in the
# first one). A value v falls in the first bucket with v <= bound (Prometheus "le"); the last is
# +Inf. The top bounds cover the writers' defaults (512 records, 4 MiB).
RECORDS_BOUNDS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)
SIZE_BOUNDS = (32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 65536, 262144, 1048576, 4194304)

FACT_FIELDS = (
    "managedLedger",
    "ledgerId",
    "entryId",
    "decoded",
    "batched",
    "records",
    "bytes",
    "ops",
    "txnHashes",
    "error",
    "position",
)

_TC_KEY = attrgetter("metadata_op", "new_status")
_PA_KEY = attrgetter("pending_ack_op")
_TXN = attrgetter("txnid_most_bits", "txnid_least_bits")


def bucket(value: int, bounds: tuple[int, ...]) -> int:
    return bisect_left(bounds, value)


def op_index(log: str, key) -> int:
    """Column of one record's operation: key is (metadata_op, new_status) or pending_ack_op."""
    if log == codec.TC_LOG:
        op, status = key
        return _UPDATE + status if op == _UPDATE else op
    return _PA_BASE + key


def resolve_log(managed_ledger: str | None, forced: str | None) -> str | None:
    return forced or codec.log_of_managed_ledger(managed_ledger)


def txn_hash(most: int, least: int) -> int:
    """A 64-bit hash of a transaction id; CPython's tuple hash of ints is not randomized, so it
    is the same in every process (driver, executors, local) on 64-bit CPython >= 3.8."""
    return hash((most, least))


def use_native(module) -> bool:
    """Decode with `module` (a loaded scanner) from now on, unless this interpreter's tuple hash
    differs from the scanner's (its hashes would not match the pure-Python path's)."""
    global NATIVE
    if module is None or any(module.txn_hash(m, l) != txn_hash(m, l) for m, l in ((0, 1), (7, 2**64 - 1))):
        return False
    NATIVE = module
    return True


if NATIVE is not None:
    _built, NATIVE = NATIVE, None
    use_native(_built)


def entry_facts(managed_ledger, ledger_id, entry_id, data, where, read_error, forced_log=None):
    """The facts tuple of one entry (FACT_FIELDS order). Never raises for bad data.

    The native scanner answers for the entries it is sure of; every other entry (corrupt, or
    merely unusual) takes the protobuf decoder, which gives the same facts and the messages."""
    size = len(data) if data is not None else 0
    if read_error is not None:
        return _failed(managed_ledger, ledger_id, entry_id, size, read_error, where)
    log = resolve_log(managed_ledger, forced_log)
    if NATIVE is not None and log is not None:
        scanned = NATIVE.scan(data, log == codec.PENDING_ACK_LOG)
        if scanned is not None:
            batched, records, ops, hashes = scanned
            return (managed_ledger, ledger_id, entry_id, True, batched, records, size, ops, hashes, None, None)
    if log is None:
        return _failed(
            managed_ledger,
            ledger_id,
            entry_id,
            size,
            f"cannot tell which log the managed ledger {managed_ledger!r} is (pass --log tc or --log pending-ack)",
            where,
        )
    try:
        entry = codec.decode_entry(data, log)
    except DecodeError as exc:
        return _failed(managed_ledger, ledger_id, entry_id, size, str(exc), where)
    records = entry.records
    if len(records) == 1:  # the common unbatched case, without the Counter
        record = records[0]
        key = _TC_KEY(record) if log == codec.TC_LOG else _PA_KEY(record)
        ops = [(op_index(log, key), 1)]
        hashes = [hash(_TXN(record))]
    else:
        counts = Counter(map(_TC_KEY if log == codec.TC_LOG else _PA_KEY, records))
        ops = [(op_index(log, key), n) for key, n in counts.items()]
        hashes = list(set(map(hash, map(_TXN, records))))
    return (managed_ledger, ledger_id, entry_id, True, entry.batched, len(records), size, ops, hashes, None, None)


def _failed(managed_ledger, ledger_id, entry_id, size, message, where):
    return (managed_ledger, ledger_id, entry_id, False, False, 0, size, [], [], message, where)


def error_sort_key(ledger_id, entry_id, position, message):
    """Which decode failures are sampled: the smallest positions, ties broken by text."""
    return (-1 if ledger_id is None else ledger_id, -1 if entry_id is None else entry_id, position or "", message or "")
