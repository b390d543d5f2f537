"""What runs on the Spark executors (through mapInArrow): entries in, partial aggregates out.

Each task decodes its entries with facts.entry_facts and folds them into an analysis.Aggregator,
exactly as the local runner does, then emits the aggregator's state as rows of one schema
(column `kind` says which):
- ledger:   the counters of one (managed ledger, ledger id), first and last entry id;
- distinct: per managed ledger, its exact set of transaction hashes (`hashes`, packed int64)
            or, with `overflow` when it passed the exact limit, its non-zero HyperLogLog registers
            (`codes`: index * 64 + rank, packed int32); packed bytes cross the JVM far more cheaply
            than arrays. Merged rows carry the registers and the count (`transactions`);
- error:    one of the first decode failures of a managed ledger;
- decoder:  which decoder a task used (`decoder`: the native scanner or the pure-Python path, see
            ship.py), passed through the merge for the driver to tell.
merge_parts then brings each managed ledger's parts together and merges them with the same
Aggregator. The executors read their Parquet row groups with pyarrow directly (as the local
runner does): the entries never pass through the JVM, which would cost more CPU than decoding
them. Kept apart from spark_job.py so that these functions are pickled by reference when
spark_job.py runs as a spark-submit script.
"""

from __future__ import annotations

import pyarrow as pa

from pulsar_txn_cli.pipeline import inputs
from pulsar_txn_cli.pipeline.analysis import COUNTERS, Aggregator
from pulsar_txn_cli.pipeline.facts import entry_facts
from pulsar_txn_cli.pipeline.ship import load_compiled

BATCH = 8192

STATE_SCHEMA = pa.schema(
    [
        ("kind", pa.string()),
        ("managedLedger", pa.string()),
        ("ledgerId", pa.int64()),
        ("entryId", pa.int64()),
        *[(name, pa.int64()) for name in COUNTERS],
        ("first", pa.int64()),
        ("last", pa.int64()),
        ("codes", pa.binary()),
        ("hashes", pa.binary()),
        ("overflow", pa.bool_()),
        ("transactions", pa.int64()),
        ("position", pa.string()),
        ("error", pa.string()),
        ("decoder", pa.string()),
    ]
)
STATE_DDL = ", ".join(
    [
        "kind string",
        "managedLedger string",
        "ledgerId bigint",
        "entryId bigint",
        *[f"{name} bigint" for name in COUNTERS],
        "first bigint",
        "last bigint",
        "codes binary",
        "hashes binary",
        "overflow boolean",
        "transactions bigint",
        "position string",
        "error string",
        "decoder string",
    ]
)
_NAMES = STATE_SCHEMA.names


def decode_units(batches, managed_ledger=None, forced_log=None, compiled=()):
    """mapInArrow over work units (label, path, fmt, group, firstRow): each is a Parquet row group
    or a whole JSONL / readledger file, read on the executor with the local runner's readers.
    `compiled`: the compiled modules shipped to a cluster's executors (ship.Shipment.names)."""

    def raws():
        for batch in batches:
            for label, path, fmt, group, first in zip(*(batch.column(i).to_pylist() for i in range(5))):
                yield from inputs.read_unit(inputs.InputFile(label, path, fmt), group, first, managed_ledger)

    return _fold(raws(), forced_log, compiled)


def decode_rows(batches, managed_ledger=None, forced_log=None, compiled=()):
    """mapInArrow over Parquet rows that Spark read from a Hadoop file system: managedLedger,
    ledgerId, entryId, data, the file's URL and the row's index in it."""

    def raws():
        for batch in batches:
            for ml, lid, eid, data, path, row in zip(*(batch.column(i).to_pylist() for i in range(6))):
                yield inputs.parquet_raw(ml, lid, eid, data, path, row, managed_ledger)

    return _fold(raws(), forced_log, compiled)


def decode_files(batches, formats, managed_ledger=None, forced_log=None, compiled=()):
    """mapInArrow over whole text files that Spark read from a Hadoop file system (binaryFile:
    path, content); `formats` gives each URL's format."""

    def raws():
        for batch in batches:
            for path, content in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                yield from inputs.read_content(inputs.InputFile(path, path, formats[path]), content, managed_ledger)

    return _fold(raws(), forced_log, compiled)


def _fold(raws, forced_log, compiled):
    """Raw tuples decoded and folded into one task's part, with the decoder the task used."""
    decoder = load_compiled(compiled)  # before the first entry is decoded
    aggregator = Aggregator(total=False)
    add = aggregator.add
    for raw in raws:
        add(entry_facts(*raw, forced_log))
    return state_batches(aggregator, merged=False, decoders=[decoder])


def merge_parts(batches):
    """mapInArrow over the tasks' parts, partitioned by managed ledger: the parts of a managed
    ledger meet in one task and merge into one Aggregator by its own rules (counters summed,
    distinct counters merged as distinct.py says, the first failures kept)."""
    merged = Aggregator(total=False)
    decoders = []
    for batch in batches:
        for row in batch.to_pylist():
            ml = row["managedLedger"]
            if row["kind"] == "decoder":
                decoders.append(row["decoder"])
            elif row["kind"] == "ledger":
                merged.merge_ledger(ml, row["ledgerId"], [row[name] for name in COUNTERS], row["first"], row["last"])
            elif row["kind"] == "distinct":
                merged.counter(ml).merge(row["codes"], row["hashes"])
            else:
                merged.sample(ml, (row["ledgerId"], row["entryId"], row["position"], row["error"]))
    return state_batches(merged, merged=True, decoders=decoders)


def state_batches(aggregator: Aggregator, *, merged: bool, decoders=()):
    """An Aggregator's state as Arrow batches: a task's part, or (merged) a managed ledger's whole
    with its distinct count instead of its hashes."""
    import numpy as np

    rows: list[dict] = [{"kind": "decoder", "decoder": decoder} for decoder in decoders]
    for (ml, lid), row in aggregator.rows.items():
        rows.append(
            {
                "kind": "ledger",
                "managedLedger": ml,
                "ledgerId": lid,
                **dict(zip(COUNTERS, row.counters)),
                "first": row.first,
                "last": row.last,
            }
        )
    for ml, counter in aggregator.distinct.items():
        out = {"kind": "distinct", "managedLedger": ml}
        exact = counter.exact
        if merged:
            count, is_exact = counter.result()
            out.update(codes=counter.codes(), transactions=count, overflow=not is_exact)
        elif exact is not None:  # the merge needs only the hashes (registers follow from them)
            out.update(hashes=np.fromiter(exact, dtype=np.int64, count=len(exact)).tobytes(), overflow=False)
        else:
            out.update(codes=counter.codes(), overflow=True)
        rows.append(out)
    for ml, samples in aggregator.first_samples().items():
        rows.extend(
            {"kind": "error", "managedLedger": ml, "ledgerId": lid, "entryId": eid, "position": where, "error": message}
            for lid, eid, where, message in samples
        )
    for start in range(0, len(rows), BATCH):
        chunk = rows[start : start + BATCH]
        yield pa.RecordBatch.from_arrays(
            [pa.array([r.get(name) for r in chunk], type=field.type) for name, field in zip(_NAMES, STATE_SCHEMA)],
            schema=STATE_SCHEMA,
        )


UNION_DDL = "n bigint"


def count_union(batches):
    """mapInArrow over every task's exact set, coalesced into one task: the size of their union
    (run only when it is known to be small)."""
    import numpy as np

    parts = [np.frombuffer(h, dtype=np.int64) for batch in batches for h in batch.column(0).to_pylist() if h]
    n = int(np.unique(np.concatenate(parts)).size) if parts else 0
    yield pa.RecordBatch.from_arrays([pa.array([n], pa.int64())], names=["n"])
