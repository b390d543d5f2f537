"""What runs on the Spark executors (through mapInArrow): entries in, partial aggregates out.

Each task decodes its Arrow batches with facts.entry_facts and folds them into an
analysis.Aggregator, exactly as the local runner does, then emits the aggregator's state as
rows of one schema (column `kind` says which):
- ledger:   the counters of one (managed ledger, ledger id), first and last entry id;
- distinct: per managed ledger, its non-zero HyperLogLog registers (`codes`: index * 64 + rank) and
            either its exact set of transaction hashes (`hashes`) or `overflow` when it passed the
            exact limit within this task alone;
- error:    one of the first decode failures of a managed ledger.
spark_job.py merges them with DataFrame aggregations. Kept apart from spark_job.py so that these
functions are pickled by reference when spark_job.py runs as a spark-submit script.
"""
from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

import pyarrow as pa

from pulsar_txn_cli.pipeline import inputs
from pulsar_txn_cli.pipeline.analysis import COUNTERS, Aggregator
from pulsar_txn_cli.pipeline.facts import entry_facts

BATCH = 8192

STATE_SCHEMA = pa.schema(
    [("kind", pa.string()), ("managedLedger", pa.string()), ("ledgerId", pa.int64()), ("entryId", pa.int64()),
     *[(name, pa.int64()) for name in COUNTERS],
     ("first", pa.int64()), ("last", pa.int64()), ("codes", pa.list_(pa.int32())), ("hashes", pa.list_(pa.int64())),
     ("overflow", pa.bool_()), ("position", pa.string()), ("error", pa.string())]
)
STATE_DDL = ", ".join(
    ["kind string", "managedLedger string", "ledgerId bigint", "entryId bigint", *[f"{name} bigint" for name in COUNTERS],
     "first bigint", "last bigint", "codes array<int>", "hashes array<bigint>", "overflow boolean",
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
    for ml, counter in aggregator.distinct.items():
        codes = [i * 64 + r for i, r in counter.sparse_registers().items()]
        exact = counter.exact
        rows.append({"kind": "distinct", "managedLedger": ml, "codes": codes,
                     "hashes": list(exact) if exact is not None else None, "overflow": exact is None})
    for ml, samples in aggregator.first_samples().items():
        rows.extend({"kind": "error", "managedLedger": ml, "ledgerId": lid, "entryId": eid, "position": where, "error": message}
                    for lid, eid, where, message in samples)
    for start in range(0, len(rows), BATCH):
        chunk = rows[start:start + BATCH]
        yield pa.RecordBatch.from_arrays(
            [pa.array([r.get(name) for r in chunk], type=field.type) for name, field in zip(_NAMES, STATE_SCHEMA)],
            schema=STATE_SCHEMA,
        )


def path_key(path_or_uri: str) -> str:
    """One spelling for a local path and the file URI Spark reports for it."""
    if "://" in path_or_uri or path_or_uri.startswith("file:"):
        parsed = urlparse(path_or_uri)
        if parsed.scheme == "file":
            return os.path.realpath(unquote(parsed.path))
        return path_or_uri
    return os.path.realpath(path_or_uri)


def decode_parquet(batches, labels: dict, managed_ledger=None, forced_log=None):
    """mapInArrow over Parquet rows (managedLedger, ledgerId, entryId, data, file_path, row_index)."""
    seen: dict = {}

    def label_of(file):
        label = seen.get(file)
        if label is None:
            label = seen[file] = labels.get(path_key(file), file)
        return label

    def facts():
        for batch in batches:
            mls, lids, eids, datas, files, rows = (batch.column(i).to_pylist() for i in range(6))
            for ml, lid, eid, data, file, row in zip(mls, lids, eids, datas, files, rows):
                yield entry_facts(*inputs.parquet_raw(ml, lid, eid, data, label_of(file), row, managed_ledger), forced_log)

    return state_batches(facts())


def decode_text_files(batches, managed_ledger=None, forced_log=None):
    """mapInArrow over rows (label, path, fmt): each task reads whole JSONL / readledger files."""

    def facts():
        for batch in batches:
            for label, path, fmt in zip(*(batch.column(i).to_pylist() for i in range(3))):
                for raw in inputs.read(inputs.InputFile(label, path, fmt), managed_ledger):
                    yield entry_facts(*raw, forced_log)

    return state_batches(facts())
