"""What runs on the Spark executors: Arrow batches in, facts batches out (through mapInArrow).

Kept apart from spark_job.py so that, when spark_job.py runs as a spark-submit script, these
functions are pickled by reference and imported from the package on the executors.
"""
from __future__ import annotations

import os
from urllib.parse import unquote, urlparse

import pyarrow as pa

from pulsar_txn_cli.pipeline import inputs
from pulsar_txn_cli.pipeline.analysis import OP_COLUMNS
from pulsar_txn_cli.pipeline.facts import entry_facts

BATCH = 4096

FACTS_SCHEMA = pa.schema(
    [
        ("managedLedger", pa.string()), ("ledgerId", pa.int64()), ("entryId", pa.int64()),
        ("decoded", pa.bool_()), ("batched", pa.bool_()), ("records", pa.int32()), ("bytes", pa.int64()),
        *[(name, pa.int32()) for name in OP_COLUMNS],
        ("txnHashes", pa.list_(pa.int64())), ("error", pa.string()), ("position", pa.string()),
    ]
)
FACTS_DDL = ", ".join(
    ["managedLedger string", "ledgerId bigint", "entryId bigint", "decoded boolean", "batched boolean",
     "records int", "bytes bigint", *[f"{name} int" for name in OP_COLUMNS],
     "txnHashes array<bigint>", "error string", "position string"]
)


def to_batch(facts: list) -> pa.RecordBatch:
    """Facts tuples -> one Arrow batch (sparse op counts spread into one column per op)."""
    columns = list(zip(*facts))
    ops = [[0] * len(facts) for _ in OP_COLUMNS]
    for row, sparse in enumerate(columns[7]):
        for index, count in sparse:
            ops[index][row] = count
    arrays = [*columns[:7], *ops, *columns[8:]]
    return pa.RecordBatch.from_arrays(
        [pa.array(values, type=field.type) for values, field in zip(arrays, FACTS_SCHEMA)], schema=FACTS_SCHEMA
    )


def _chunks(facts_iter):
    pending = []
    for fact in facts_iter:
        pending.append(fact)
        if len(pending) >= BATCH:
            yield to_batch(pending)
            pending = []
    if pending:
        yield to_batch(pending)


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
                label = label_of(file)
                yield entry_facts(*inputs.parquet_raw(ml, lid, eid, data, label, row, managed_ledger), forced_log)

    return _chunks(facts())


def decode_text_files(batches, managed_ledger=None, forced_log=None):
    """mapInArrow over rows (label, path, fmt): each task reads whole JSONL / readledger files."""

    def facts():
        for batch in batches:
            for label, path, fmt in zip(*(batch.column(i).to_pylist() for i in range(3))):
                for raw in inputs.read(inputs.InputFile(label, path, fmt), managed_ledger):
                    yield entry_facts(*raw, forced_log)

    return _chunks(facts())


REGISTERS_DDL = "managedLedger string, index int, rank int"


def hll_registers(batches):
    """mapInArrow over (managedLedger, txnHashes): the non-zero HyperLogLog registers of each
    managed ledger in the batch (distinct.registers_np); Spark takes the max per register."""
    import numpy as np
    import pyarrow.compute as pc

    from pulsar_txn_cli.pipeline import distinct

    schema = pa.schema([("managedLedger", pa.string()), ("index", pa.int32()), ("rank", pa.int32())])
    for batch in batches:
        lists = batch.column(1)
        flat = pc.list_flatten(lists)
        if len(flat) == 0:
            continue
        index, rank = distinct.registers_np(flat.to_numpy(zero_copy_only=False).astype(np.int64), np)
        names = pc.dictionary_encode(pc.take(batch.column(0), pc.list_parent_indices(lists)), null_encoding="encode")
        keys = names.indices.to_numpy(zero_copy_only=False).astype(np.int64) * distinct.REGISTERS + index
        order = np.argsort(keys, kind="stable")
        keys, rank = keys[order], rank[order]
        starts = np.flatnonzero(np.r_[True, keys[1:] != keys[:-1]])
        best = np.maximum.reduceat(rank, starts).astype(np.int32)
        firsts = keys[starts]
        yield pa.RecordBatch.from_arrays(
            [pc.take(names.dictionary, pa.array(firsts // distinct.REGISTERS)), pa.array((firsts % distinct.REGISTERS).astype(np.int32)),
             pa.array(best)], schema=schema,
        )
