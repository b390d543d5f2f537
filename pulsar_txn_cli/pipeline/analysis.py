"""The analysis, defined once: per-ledger counters, their folding into the report's JSON.

Both runners produce the same intermediate state and hand it to `build_report`:
- one counter row per (managed ledger, ledger id), fields COUNTERS plus first/last entry id;
- distinct transactions per managed ledger and overall (distinct.py's rule);
- the first SAMPLE_LIMIT decode failures per managed ledger in error_sort_key order.
The local runner folds every entry into one Aggregator; on Spark each task folds its share into
its own Aggregator, and one Aggregator per managed ledger merges the tasks' parts (spark_job.py).
"""

from __future__ import annotations

from pulsar_txn_cli.pipeline import distinct
from pulsar_txn_cli.pipeline.facts import (
    OPS,
    OPS_OF_LOG,
    RECORDS_BOUNDS,
    SIZE_BOUNDS,
    bucket,
    error_sort_key,
    resolve_log,
)

SAMPLE_LIMIT = 5

BASE = (
    "entries",
    "batchedEntries",
    "unbatchedEntries",
    "decodeErrors",
    "records",
    "batchedRecords",
    "bytes",
    "decodedBytes",
)
OP_COLUMNS = tuple("op_" + name.replace(":", "_") for name in OPS)
RECORD_BUCKETS = tuple(f"recordsLe_{i}" for i in range(len(RECORDS_BOUNDS) + 1))
SIZE_BUCKETS = tuple(f"sizeLe_{i}" for i in range(len(SIZE_BOUNDS) + 1))
COUNTERS = BASE + OP_COLUMNS + RECORD_BUCKETS + SIZE_BUCKETS
(ENTRIES, BATCHED, UNBATCHED, ERRORS, RECORDS, BATCHED_RECORDS, BYTES, DECODED_BYTES) = range(len(BASE))
OP0 = len(BASE)
REC0 = OP0 + len(OP_COLUMNS)
SIZE0 = REC0 + len(RECORD_BUCKETS)


class LedgerRow:
    __slots__ = ("counters", "first", "last")

    def __init__(self, counters=None, first=None, last=None):
        self.counters = counters or [0] * len(COUNTERS)
        self.first = first
        self.last = last

    def cover(self, first, last) -> None:
        """Widen the entry-id range to include [first, last] (None: unknown, ignored)."""
        if first is not None and (self.first is None or first < self.first):
            self.first = first
        if last is not None and (self.last is None or last > self.last):
            self.last = last


class Aggregator:
    """Folds facts tuples (facts.FACT_FIELDS) into the intermediate state, in bounded memory."""

    def __init__(self, *, total: bool = True):
        self.rows: dict[tuple, LedgerRow] = {}
        self.distinct: dict[str | None, distinct.DistinctCounter] = {}
        # Spark's partial aggregates skip it: the total follows from the per-ledger parts.
        self.total_distinct = distinct.DistinctCounter() if total else None
        self.samples: dict[str | None, list] = {}

    def add(self, fact) -> None:
        ml, ledger_id, entry_id, decoded, batched, records, size, ops, hashes, error, position = fact
        row = self.rows.get((ml, ledger_id))
        if row is None:
            row = self.rows[(ml, ledger_id)] = LedgerRow()
        c = row.counters
        c[ENTRIES] += 1
        c[BYTES] += size
        row.cover(entry_id, entry_id)
        if not decoded:
            c[ERRORS] += 1
            self.sample(ml, (ledger_id, entry_id, position, error))
            return
        c[BATCHED if batched else UNBATCHED] += 1
        c[RECORDS] += records
        if batched:
            c[BATCHED_RECORDS] += records
        c[DECODED_BYTES] += size
        c[REC0 + bucket(records, RECORDS_BOUNDS)] += 1
        c[SIZE0 + bucket(size, SIZE_BOUNDS)] += 1
        for index, count in ops:
            c[OP0 + index] += count
        self.counter(ml).add(hashes)
        if self.total_distinct is not None:
            self.total_distinct.add(hashes)

    def counter(self, ml) -> distinct.DistinctCounter:
        counter = self.distinct.get(ml)
        if counter is None:
            counter = self.distinct[ml] = distinct.DistinctCounter()
        return counter

    def merge_ledger(self, ml, ledger_id, counters, first, last) -> None:
        """Fold in another aggregator's row of one ledger (Spark's merge of the tasks' parts)."""
        row = self.rows.get((ml, ledger_id))
        if row is None:
            self.rows[(ml, ledger_id)] = LedgerRow(list(counters), first, last)
            return
        row.counters = [a + b for a, b in zip(row.counters, counters)]
        row.cover(first, last)

    def sample(self, ml, sample) -> None:
        """Keep `sample` (ledger id, entry id, position, message) if it may be one of the first."""
        kept = self.samples.setdefault(ml, [])
        kept.append(sample)
        if len(kept) > 4 * SAMPLE_LIMIT:
            kept.sort(key=lambda s: error_sort_key(*s))
            del kept[SAMPLE_LIMIT:]

    def first_samples(self) -> dict:
        return {ml: sorted(kept, key=lambda s: error_sort_key(*s))[:SAMPLE_LIMIT] for ml, kept in self.samples.items()}

    def state(self):
        """(rows, distinct by managed ledger, total distinct, samples) for build_report."""
        counts = {ml: counter.result() for ml, counter in self.distinct.items()}
        return self.rows, counts, self.total_distinct.result(), self.first_samples()


# ---------------------------------------------------------------- the report


def _name_key(name):
    from pulsar_txn_cli.natural import natural_key

    return natural_key(name)


def _id_key(value):
    return (value is None, value or 0)


def build_report(rows, distinct_by_ml, total_distinct, samples, *, forced_log=None, inputs=None) -> dict:
    """The JSON of `analyze -o json` from the intermediate state (identical for both runners)."""
    by_ml: dict = {}
    for (ml, ledger_id), row in rows.items():
        by_ml.setdefault(ml, []).append((ledger_id, row))
    managed = []
    for ml in sorted(by_ml, key=_name_key):
        ledgers = sorted(by_ml[ml], key=lambda item: _id_key(item[0]))
        log = resolve_log(ml, forced_log)
        summary = _summary([row.counters for _, row in ledgers], log)
        count, exact = distinct_by_ml.get(ml, (0, True))
        batched_ids = [lid for lid, row in ledgers if row.counters[BATCHED] and lid is not None]
        managed.append(
            {
                "name": ml,
                "log": log,
                **summary,
                "lastBatchedLedgerId": max(batched_ids) if batched_ids else None,
                "transactions": count,
                "transactionsExact": exact,
                "decodeErrorSamples": [_sample_json(s) for s in samples.get(ml, [])],
                "ledgers": [_ledger_json(lid, row) for lid, row in ledgers],
            }
        )
    count, exact = total_distinct
    batched_ids = [m["lastBatchedLedgerId"] for m in managed if m["lastBatchedLedgerId"] is not None]
    totals = {
        "managedLedgers": len(managed),
        "ledgers": len(rows),
        **_summary([row.counters for row in rows.values()], None),
        "lastBatchedLedgerId": max(batched_ids) if batched_ids else None,
        "transactions": count,
        "transactionsExact": exact,
    }
    report = {"managedLedgers": managed, "totals": totals}
    if inputs is not None:
        report["inputs"] = inputs
    return report


def _summary(counter_rows, log) -> dict:
    total = [sum(values) for values in zip(*counter_rows)] if counter_rows else [0] * len(COUNTERS)
    decoded = total[BATCHED] + total[UNBATCHED]
    names = OPS_OF_LOG.get(log, OPS)
    return {
        "entries": total[ENTRIES],
        "batchedEntries": total[BATCHED],
        "unbatchedEntries": total[UNBATCHED],
        "records": total[RECORDS],
        "batchedRecords": total[BATCHED_RECORDS],
        "bytes": total[BYTES],
        "decodeErrors": total[ERRORS],
        "entriesSaved": total[RECORDS] - decoded,
        "recordsPerEntry": _histogram(total[REC0:SIZE0], RECORDS_BOUNDS, total[RECORDS], decoded),
        "entrySizeBytes": _histogram(total[SIZE0:], SIZE_BOUNDS, total[DECODED_BYTES], decoded),
        "ops": {name: total[OP0 + OPS.index(name)] for name in names},
    }


def _histogram(counts, bounds, total_sum, count) -> dict:
    les = [*bounds, "+Inf"]
    return {
        "buckets": [{"le": le, "count": n} for le, n in zip(les, counts)],
        "count": count,
        "sum": total_sum,
        "mean": round(total_sum / count, 2) if count else None,
    }


def _ledger_json(ledger_id, row) -> dict:
    c = row.counters
    return {
        "ledgerId": ledger_id,
        "entries": c[ENTRIES],
        "batchedEntries": c[BATCHED],
        "unbatchedEntries": c[UNBATCHED],
        "records": c[RECORDS],
        "bytes": c[BYTES],
        "decodeErrors": c[ERRORS],
        "entriesSaved": c[RECORDS] - c[BATCHED] - c[UNBATCHED],
        "firstEntryId": row.first,
        "lastEntryId": row.last,
    }


def _sample_json(sample) -> dict:
    ledger_id, entry_id, position, message = sample
    where = f"{ledger_id}:{entry_id}" if ledger_id is not None and entry_id is not None else position
    return {"position": where, "ledgerId": ledger_id, "entryId": entry_id, "error": message}


def batched_ledgers(report: dict) -> dict[str, dict[int, int]]:
    """{managedLedger: {ledgerId: batchedEntries}} for the ledgers that hold batched entries."""
    return {
        m["name"]: {l["ledgerId"]: l["batchedEntries"] for l in m["ledgers"] if l["batchedEntries"]}
        for m in report["managedLedgers"]
    }


__all__ = ["Aggregator", "COUNTERS", "LedgerRow", "build_report", "batched_ledgers"]
