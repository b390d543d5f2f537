"""What runs on the Spark executors (through mapInArrow): entries in, partial aggregates out.

Each task decodes its Arrow batches with facts.entry_facts and folds them into an
analysis.Aggregator, exactly as the local runner does, then emits the aggregator's state as
rows of one schema (column `kind` says which):
- ledger:   the counters of one (managed ledger, ledger id), first and last entry id;
- distinct: per managed ledger, its non-zero HyperLogLog registers (`codes`: index * 64 + rank,
            packed int32) and either its exact set of transaction hashes (`hashes`, packed int64)
            or `overflow` when it passed the exact limit within this task alone (packed bytes
            cross the JVM far more cheaply than arrays);
- error:    one of the first decode failures of a managed ledger.
spark_job.py merges them with DataFrame aggregations. The executors read their Parquet row
groups with pyarrow directly (as the local runner does): the entries never pass through the JVM,
which would cost more CPU than decoding them. Kept apart from spark_job.py so that these
functions are pickled by reference when spark_job.py runs as a spark-submit script.
"""
from __future__ import annotations

import pyarrow as pa

from pulsar_txn_cli.pipeline import inputs
from pulsar_txn_cli.pipeline.analysis import COUNTERS, Aggregator
from pulsar_txn_cli.pipeline.facts import entry_facts

BATCH = 8192

STATE_SCHEMA = pa.schema(
    [("kind", pa.string()), ("managedLedger", pa.string()), ("ledgerId", pa.int64()), ("entryId", pa.int64()),
     *[(name, pa.int64()) for name in COUNTERS],
     ("first", pa.int64()), ("last", pa.int64()), ("codes", pa.binary()), ("hashes", pa.binary()),
     ("overflow", pa.bool_()), ("position", pa.string()), ("error", pa.string())]
)
STATE_DDL = ", ".join(
    ["kind string", "managedLedger string", "ledgerId bigint", "entryId bigint", *[f"{name} bigint" for name in COUNTERS],
     "first bigint", "last bigint", "codes binary", "hashes binary", "overflow boolean",
     "position string", "error string"]
)
_NAMES = STATE_SCHEMA.names


def state_batches(facts_iter):
    """Fold facts into an Aggregator and yield its state as Arrow batches."""
    aggregator = Aggregator(total=False)
    add = aggregator.add
    for fact in facts_iter:
        add(fact)
    rows: list[dict] = []
    for (ml, lid), row in aggregator.rows.items():
        rows.append({"kind": "ledger", "managedLedger": ml, "ledgerId": lid, **dict(zip(COUNTERS, row.counters)),
                     "first": row.first, "last": row.last})
    import numpy as np

    for ml, counter in aggregator.distinct.items():
        codes = np.array([i * 64 + r for i, r in counter.sparse_registers().items()], dtype=np.int32).tobytes()
        exact = counter.exact
        hashes = np.fromiter(exact, dtype=np.int64, count=len(exact)).tobytes() if exact is not None else None
        rows.append({"kind": "distinct", "managedLedger": ml, "codes": codes, "hashes": hashes, "overflow": exact is None})
    for ml, samples in aggregator.first_samples().items():
        rows.extend({"kind": "error", "managedLedger": ml, "ledgerId": lid, "entryId": eid, "position": where, "error": message}
                    for lid, eid, where, message in samples)
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        yield pa.RecordBatch.from_arrays(
            [pa.array([r.get(name) for r in chunk], type=field.type) for name, field in zip(_NAMES, STATE_SCHEMA)],
            schema=STATE_SCHEMA,
        )


def decode_units(batches, managed_ledger=None, forced_log=None):
    """mapInArrow over work units (label, path, fmt, group, firstRow): each is a Parquet row group
    or a whole JSONL / readledger file, read on the executor with the local runner's readers."""

    def facts():
        for batch in batches:
            for label, path, fmt, group, first in zip(*(batch.column(i).to_pylist() for i in range(5))):
                for raw in inputs.read_unit(inputs.InputFile(label, path, fmt), group, first, managed_ledger):
                    yield entry_facts(*raw, forced_log)

    return state_batches(facts())


MERGED_DDL = "managedLedger string, codes binary, overflow boolean"


def merge_registers(batches):
    """mapInArrow over 'distinct' parts partitioned by managed ledger: the register-wise max of
    every task's registers (numpy), and whether any task overflowed; one row per managed ledger."""
    import numpy as np

    from pulsar_txn_cli.pipeline import distinct

    merged: dict = {}
    overflowed: dict = {}
    for batch in batches:
        for ml, codes, overflow in zip(*(batch.column(i).to_pylist() for i in range(3))):
            registers = merged.get(ml)
            if registers is None:
                registers = merged[ml] = np.zeros(distinct.REGISTERS, dtype=np.int32)
            if codes:
                codes = np.frombuffer(codes, dtype=np.int32)
                np.maximum.at(registers, codes >> 6, codes & 63)
            overflowed[ml] = overflowed.get(ml, False) or bool(overflow)
    if merged:
        names = list(merged)
        codes = [(np.flatnonzero(merged[ml]) * 64 + merged[ml][merged[ml] > 0]).astype(np.int32).tobytes() for ml in names]
        yield pa.RecordBatch.from_arrays(
            [pa.array(names, pa.string()), pa.array(codes, pa.binary()), pa.array([overflowed[ml] for ml in names])],
            names=["managedLedger", "codes", "overflow"],
        )


EXACT_DDL = "managedLedger string, n bigint"


def count_exact(batches):
    """mapInArrow over (managedLedger, hashes) partitioned by managed ledger: the size of the
    union of the tasks' exact sets, one row per managed ledger."""
    import numpy as np

    parts: dict = {}
    for batch in batches:
        for ml, hashes in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
            parts.setdefault(ml, []).append(np.frombuffer(hashes or b"", dtype=np.int64))
    if parts:
        names = list(parts)
        yield pa.RecordBatch.from_arrays(
            [pa.array(names, pa.string()), pa.array([int(np.unique(np.concatenate(parts[ml])).size) for ml in names], pa.int64())],
            names=["managedLedger", "n"],
        )
