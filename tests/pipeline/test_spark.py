"""Spark and the local runner give identical reports on the same inputs (one shared SparkSession)."""
from __future__ import annotations

import pytest

from pulsar_txn_cli import codec
from pulsar_txn_cli.pipeline import distinct, inputs, local

from .conftest import PA_ML, TC_ML, TC_ML1, ack, tc, write_jsonl, write_parquet, write_readledger

pytestmark = pytest.mark.spark


@pytest.fixture
def many_inputs(mixed):
    """Every input kind, corrupt entries, three logs, and one log past the exact distinct limit."""
    tmp, entries = mixed
    bad_lines = ["{oops", '{"managedLedger": "%s", "ledgerId": 8, "entryId": 0, "data": "%%%%"}' % TC_ML]
    empty = [("pulsar/system/persistent/__transaction_log_7", 1, 0, codec.encode_batch([]))]  # no records at all
    files = [write_jsonl(tmp / "mixed.jsonl", entries + bad_lines + empty)]
    (tmp / "pq").mkdir()
    per_entry = 500
    big = [
        (TC_ML1, 20 + i // 50, i % 50, codec.encode_batch([tc(0, i * per_entry + j, most=1) for j in range(per_entry)]))
        for i in range(distinct.EXACT_LIMIT // per_entry + 20)
    ]
    files.append(write_parquet(tmp / "pq" / "big.parquet", big + [(TC_ML1, 99, 0, None)]))
    files.append(write_parquet(tmp / "pq" / "acks.parquet", [(PA_ML, 11, i, codec.encode_batch([ack(i), ack(i + 1)])) for i in range(7)]))
    files.append(write_readledger(tmp / "rl.txt", 30, [codec.encode_single(tc(0, 900)), b"\x0e\x01", codec.encode_batch([tc(1, 900)] * 3)]))
    return files


def test_spark_and_local_reports_are_identical(spark, many_inputs):
    from pulsar_txn_cli.pipeline import spark_job

    files = inputs.expand(many_inputs)
    expected = local.run(files, managed_ledger="pulsar/system/persistent/__transaction_log_2")
    got = spark_job.run(spark, files, managed_ledger="pulsar/system/persistent/__transaction_log_2")
    assert got == expected
    # and the inputs really exercised what they should
    big = next(m for m in expected["managedLedgers"] if m["name"] == TC_ML1)
    assert big["transactionsExact"] is False and big["decodeErrors"] == 1
    assert abs(big["transactions"] - big["records"]) / big["records"] < 0.03
    assert expected["totals"]["decodeErrors"] == 5 and expected["totals"]["transactionsExact"] is False
    assert {m["log"] for m in expected["managedLedgers"]} == {"tc", "pending-ack"}
    empty = next(m for m in expected["managedLedgers"] if m["name"].endswith("_7"))
    assert (empty["batchedEntries"], empty["records"], empty["transactions"], empty["transactionsExact"]) == (1, 0, 0, True)


def test_cli_spark_engine_matches_local(cli, spark, mixed):
    tmp, entries = mixed
    source = write_jsonl(tmp / "d.jsonl", entries)
    via_spark = cli(["analyze", source, "--engine", "spark", "--spark-master", "local[2]", "-o", "json"])
    via_local = cli(["analyze", source, "--engine", "local", "-o", "json"])
    assert via_spark.exit_code == via_local.exit_code == 3, via_spark.stderr
    assert via_spark.json() == via_local.json()
    assert "engine: spark" in via_spark.stderr
    assert not spark.sparkContext._jsc.sc().isStopped()  # the shared session was reused, not stopped


def test_parquet_is_split_across_tasks(spark, many_inputs):
    from pulsar_txn_cli.pipeline import spark_job

    frame = spark_job.state_frame(spark, inputs.expand([p for p in many_inputs if p.endswith(".parquet")]))
    assert frame.rdd.getNumPartitions() > 1
    # the big log reaches the report's estimate through several tasks' exact sets and registers
    parts = frame.where((frame.kind == "distinct") & (frame.managedLedger == TC_ML1)).select("overflow").collect()
    assert len(parts) > 1 and not all(row["overflow"] for row in parts)


@pytest.mark.slow
def test_job_module_runs_under_spark_submit(tmp_path, mixed):
    """The documented command: PYSPARK_PYTHON=.venv/bin/python spark-submit .../spark_job.py INPUT --out FILE."""
    import json
    import os
    import subprocess
    import sys
    from pathlib import Path

    from pulsar_txn_cli.pipeline import spark_job

    submit = Path(sys.executable).parent / "spark-submit"
    if not submit.exists() or not spark_job.java_available():
        pytest.fail("spark-submit (pyspark, the spark extra) and Java 17 are needed: ./dev setup installs them")
    _, entries = mixed
    source = write_jsonl(tmp_path / "d.jsonl", entries)
    out = tmp_path / "result.json"
    job = Path(spark_job.__file__)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run([str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(job), source, "--out", str(out)],
                          env=env, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "analyzed 10 entries" in done.stdout
    assert json.loads(out.read_text()) == local.run(inputs.expand([source]))


def test_nothing_decodable_on_spark(spark, tmp_path):
    from pulsar_txn_cli.pipeline import spark_job

    files = inputs.expand([write_jsonl(tmp_path / "bad.jsonl", [(TC_ML, 1, 0, b"\x0e"), "{nope"])])
    report = spark_job.run(spark, files)
    assert report == local.run(files)
    assert (report["totals"]["decodeErrors"], report["totals"]["transactions"]) == (2, 0)
