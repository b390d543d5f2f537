"""Spark and the local runner give identical reports on the same inputs (one shared SparkSession)."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.pipeline import inputs, local

from .conftest import TC_ML, TC_ML1, write_jsonl
from tests.conftest import missing_tool

pytestmark = pytest.mark.spark


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
    assert (empty["batchedEntries"], empty["records"], empty["transactions"], empty["transactionsExact"]) == (
        1,
        0,
        0,
        True,
    )


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
        missing_tool("spark-submit (pyspark, the spark extra) or Java 17 is")
    _, entries = mixed
    source = write_jsonl(tmp_path / "d.jsonl", entries)
    out = tmp_path / "result.json"
    job = Path(spark_job.__file__)
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable}
    done = subprocess.run(
        [str(submit), "--master", "local[1]", "--conf", "spark.ui.enabled=false", str(job), source, "--out", str(out)],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert "analyzed 10 entries" in done.stdout
    assert json.loads(out.read_text()) == local.run(inputs.expand([source]))


def test_nothing_decodable_on_spark(spark, tmp_path):
    from pulsar_txn_cli.pipeline import spark_job

    files = inputs.expand([write_jsonl(tmp_path / "bad.jsonl", [(TC_ML, 1, 0, b"\x0e"), "{nope"])])
    report = spark_job.run(spark, files)
    assert report == local.run(files)
    assert (report["totals"]["decodeErrors"], report["totals"]["transactions"]) == (2, 0)


@pytest.mark.parametrize(
    ("summary", "code"),
    [
        ("java.nio.file.AccessDeniedException: s3a://dumps/x: org.apache.hadoop.fs.s3a.auth.NoAuthWithAWSException", 4),
        ("java.net.UnknownHostException: minio.internal", 4),
        ("org.apache.spark.api.python.PythonException: ValueError: not a dump line", 3),
    ],
)
def test_a_failed_job_exits_as_a_storage_or_an_input_failure(summary, code):
    from pulsar_txn_cli.pipeline import spark_job

    assert spark_job.failure_class(summary).exit_code == code
