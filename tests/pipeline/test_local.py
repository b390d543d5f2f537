"""The local runner and the analysis definition on hand-built dumps with known counts."""

from __future__ import annotations

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.pipeline import analysis, facts, inputs, local

from .conftest import PA_ML, TC_ML, lifecycle, tc, write_jsonl, write_parquet, write_readledger


def run(paths, **options):
    return local.run(inputs.expand([str(p) for p in paths]), **options)


def by_name(report):
    return {m["name"]: m for m in report["managedLedgers"]}


def test_known_counts_on_mixed_ledgers(mixed):
    tmp, entries = mixed
    report = run([write_jsonl(tmp / "d.jsonl", entries)])
    tcl, pa = by_name(report)[TC_ML], by_name(report)[PA_ML]
    assert (tcl["log"], tcl["entries"], tcl["batchedEntries"], tcl["unbatchedEntries"], tcl["decodeErrors"]) == (
        "tc",
        7,
        3,
        3,
        1,
    )
    assert tcl["records"] == 10 + 2 + 1 + 6 + 2 and tcl["batchedRecords"] == 18
    assert tcl["entriesSaved"] == 21 - 6
    assert tcl["lastBatchedLedgerId"] == 4
    assert tcl["ops"] == {
        "NEW": 6,
        "ADD_PARTITION": 3,
        "ADD_SUBSCRIPTION": 3,
        "UPDATE:OPEN": 0,
        "UPDATE:COMMITTING": 4,
        "UPDATE:COMMITTED": 3,
        "UPDATE:ABORTING": 1,
        "UPDATE:ABORTED": 1,
    }
    assert (tcl["transactions"], tcl["transactionsExact"]) == (8, True)
    assert tcl["bytes"] == sum(len(e[3]) for e in entries if e[0] == TC_ML)
    ledgers = {l["ledgerId"]: l for l in tcl["ledgers"]}
    assert [
        (l["entries"], l["batchedEntries"], l["unbatchedEntries"], l["records"], l["decodeErrors"])
        for l in ledgers.values()
    ] == [(2, 2, 0, 12, 0), (3, 1, 1, 7, 1), (2, 0, 2, 2, 0)]
    assert (ledgers[4]["firstEntryId"], ledgers[4]["lastEntryId"]) == (0, 2)
    assert [s["position"] for s in tcl["decodeErrorSamples"]] == ["4:2"]
    assert "truncated" in tcl["decodeErrorSamples"][0]["error"] or "protobuf" in tcl["decodeErrorSamples"][0]["error"]
    assert (pa["log"], pa["entries"], pa["batchedEntries"], pa["records"], pa["lastBatchedLedgerId"]) == (
        "pending-ack",
        3,
        1,
        5,
        9,
    )
    assert pa["ops"] == {"ACK": 3, "COMMIT": 1, "ABORT": 1}
    assert pa["transactions"] == 2
    totals = report["totals"]
    assert (totals["managedLedgers"], totals["ledgers"], totals["entries"], totals["records"]) == (2, 5, 10, 26)
    assert totals["transactions"] == 8  # txn (0,1) and (0,2) are in both logs
    assert totals["ops"]["ACK"] == 3 and totals["ops"]["NEW"] == 6
    assert totals["lastBatchedLedgerId"] == 9


def test_histograms_use_power_of_two_buckets_fine_at_the_low_end(tmp_path):
    sizes = [1, 10, 11, 50, 100, 101, 1000, 1001]
    entries = [(TC_ML, 1, i, codec.encode_batch([tc(0, j) for j in range(n)])) for i, n in enumerate(sizes)]
    tcl = by_name(run([write_jsonl(tmp_path / "h.jsonl", entries)]))[TC_ML]
    hist = tcl["recordsPerEntry"]
    assert [b["le"] for b in hist["buckets"]] == [1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024, "+Inf"]
    # 1 | 10, 11 (<= 16) | 50 (<= 64) | 100, 101 (<= 128) | 1000 (<= 1024) | 1001 (<= 1024)
    assert [b["count"] for b in hist["buckets"]] == [1, 0, 0, 0, 2, 0, 1, 2, 0, 0, 2, 0]
    assert (hist["count"], hist["sum"]) == (8, sum(sizes))
    size = tcl["entrySizeBytes"]
    assert [b["le"] for b in size["buckets"]] == [
        32,
        64,
        128,
        256,
        512,
        1024,
        2048,
        4096,
        8192,
        16384,
        65536,
        262144,
        1048576,
        4194304,
        "+Inf",
    ]
    expected = [0] * 15
    for _, _, _, data in entries:
        expected[facts.bucket(len(data), facts.SIZE_BOUNDS)] += 1
    assert [b["count"] for b in size["buckets"]] == expected
    assert facts.bucket(32, facts.SIZE_BOUNDS) == 0 and facts.bucket(33, facts.SIZE_BOUNDS) == 1


def test_op_columns_match_the_codecs_op_names():
    for op in range(4):
        for status in range(5):
            record = tc(op, 1, status)
            assert facts.OPS[facts.op_index("tc", (op, status))] == codec.op_name(record, "tc")
    for op in (1, 2, 3):
        record = codec.PendingAckRecord(pending_ack_op=op)
        assert facts.OPS[facts.op_index("pending-ack", op)] == codec.op_name(record, "pending-ack")


def test_corrupt_entries_never_stop_the_analysis(tmp_path):
    entries = [
        (TC_ML, 1, 0, b""),
        (TC_ML, 1, 1, b"\xff\xff\xff"),
        (TC_ML, 1, 2, codec.encode_batch(lifecycle(1))),
        "{not json",
        '{"managedLedger": "%s", "ledgerId": 1, "entryId": 3, "data": "!!"}' % TC_ML,
        ("some/other/persistent/topic", 2, 0, codec.encode_single(tc(0, 1))),
    ]
    report = run([write_jsonl(tmp_path / "bad.jsonl", entries)])
    tcl = by_name(report)[TC_ML]
    assert (tcl["entries"], tcl["decodeErrors"], tcl["records"]) == (4, 3, 5)
    assert [s["position"] for s in tcl["decodeErrorSamples"]] == ["1:0", "1:1", "1:3"]
    unknown = by_name(report)[None]
    assert unknown["decodeErrorSamples"][0]["position"].endswith("bad.jsonl #4")
    other = by_name(report)["some/other/persistent/topic"]
    assert other["log"] is None and "--log" in other["decodeErrorSamples"][0]["error"]
    assert report["totals"]["decodeErrors"] == 5
    # --log decides for names that tell nothing
    forced = by_name(run([tmp_path / "bad.jsonl"], forced_log="tc"))["some/other/persistent/topic"]
    assert (forced["log"], forced["records"], forced["decodeErrors"]) == ("tc", 1, 0)


def test_error_samples_are_the_first_positions_and_bounded(tmp_path):
    entries = [(TC_ML, 100 - i, 0, b"\x0e") for i in range(30)]
    tcl = by_name(run([write_jsonl(tmp_path / "e.jsonl", entries)]))[TC_ML]
    assert tcl["decodeErrors"] == 30
    assert [s["ledgerId"] for s in tcl["decodeErrorSamples"]] == [71, 72, 73, 74, 75]


def test_parquet_readledger_directories_and_globs_agree(mixed):
    tmp, entries = mixed
    tc_entries = [e for e in entries if e[0] == TC_ML and e[1] == 3]
    jsonl = run([write_jsonl(tmp / "a.jsonl", tc_entries)])
    (tmp / "pq").mkdir()
    parquet = run([write_parquet(tmp / "pq" / "a.parquet", tc_entries)])
    text = run([write_readledger(tmp / "rl.txt", 3, [e[3] for e in tc_entries])], managed_ledger=TC_ML)
    for other in (parquet, text):
        assert other["managedLedgers"] == jsonl["managedLedgers"] and other["totals"] == jsonl["totals"]
    (tmp / "pq" / "_SUCCESS").write_text("")
    assert run([tmp / "pq"])["totals"] == jsonl["totals"]
    assert run([str(tmp / "p*" / "*.parquet")])["totals"] == jsonl["totals"]


def test_input_errors_are_one_sentence(tmp_path):
    from pulsar_txn_cli.errors import DataError, UsageError

    with pytest.raises(UsageError, match="no such file"):
        inputs.expand([str(tmp_path / "missing.jsonl")])
    with pytest.raises(UsageError, match="no file matches"):
        inputs.expand([str(tmp_path / "*.nothing")])
    rl = write_readledger(tmp_path / "rl.txt", 3, [codec.encode_single(tc(0, 1))])
    with pytest.raises(UsageError, match="--managed-ledger"):
        inputs.check_inputs(inputs.expand([rl]), None, None)
    import pyarrow as pa
    import pyarrow.parquet as pq

    pq.write_table(pa.table({"ledgerId": [1]}), str(tmp_path / "x.parquet"))
    with pytest.raises(DataError, match="lacks the Parquet column"):
        inputs.check_inputs(inputs.expand([str(tmp_path / "x.parquet")]), None, None)


def test_dump_parquet_round_trip(mixed):
    tmp, entries = mixed
    source = write_jsonl(tmp / "d.jsonl", entries)
    out = str(tmp / "out" / "d.parquet")
    files = inputs.expand([source])
    assert inputs.write_parquet((raw for f in files for raw in inputs.read(f)), out, row_group_rows=4) == len(entries)
    assert run([out])["managedLedgers"] == run([source])["managedLedgers"]


def test_batched_ledgers_for_the_downgrade_check(mixed):
    from pulsar_txn_cli import pipeline

    tmp, entries = mixed
    assert pipeline.batched_ledgers([write_jsonl(tmp / "d.jsonl", entries)]) == {TC_ML: {3: 2, 4: 1}, PA_ML: {9: 1}}
    assert analysis.batched_ledgers(run([tmp / "d.jsonl"]))[TC_ML] == {3: 2, 4: 1}
