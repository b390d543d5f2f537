"""analyze with inputs and outputs on s3a://, against a real S3-compatible server (S3Proxy from
Maven Central, filesystem blobstore, 127.0.0.1) and Hadoop's S3A connector resolved as Spark users
resolve it (spark.jars.packages); credentials from the environment, never printed."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from .standalone import S3Proxy
from tests.conftest import assert_no_crash

pytestmark = pytest.mark.spark_cluster

TC2 = "pulsar/system/persistent/__transaction_log_2"


def run(args, s3, *, credentials=True):
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    env.update(s3.env() if credentials else {})
    conf = [arg for key, value in s3.spark_conf().items() for arg in ("--spark-conf", f"{key}={value}")]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "pulsar-txn"), "analyze", *args, *conf],
        capture_output=True,
        text=True,
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1"},
        timeout=600,
    )
    assert S3Proxy.SECRET_KEY not in done.stdout + done.stderr
    return done


def test_dump_parquet_to_s3a_then_analyze_the_bucket(cli, s3, many_inputs, tmp_path):
    bucket = s3.bucket("dumps")
    jsonl, parquet, acks, text = many_inputs
    for name in (jsonl, acks, text):
        shutil.copy(name, bucket / Path(name).name)
    # a local dump converted into the bucket, by Hadoop's S3A in a local Spark
    done = run([parquet, "--dump-parquet", "s3a://dumps/converted/big.parquet"], s3)
    assert done.returncode == 0, done.stderr
    assert "added spark.jars.packages org.apache.hadoop:hadoop-aws:" in done.stderr
    uploaded = bucket / "converted" / "big.parquet"
    assert uploaded.read_bytes()[:4] == b"PAR1"
    # the whole bucket: Spark reads it (auto picks Spark for an s3a:// input), the same report as local
    done = run(["s3a://dumps/", "-m", TC2, "-o", "json"], s3)
    assert done.returncode == 3, done.stderr  # corrupt entries, as in the local run
    assert done.stderr.startswith("s3a:// needs Hadoop's S3A connector") and "engine: spark (local[*])" in done.stderr
    local_copy = tmp_path / "same"
    shutil.copytree(bucket, local_copy)
    expected = cli(["analyze", str(local_copy), "-m", TC2, "-o", "json"])
    assert json.loads(done.stdout) == json.loads(expected.stdout.replace(str(local_copy), "s3a://dumps"))


def test_s3a_without_credentials_and_local_engine_are_one_sentence(s3):
    done = run(["s3a://dumps/", "--engine", "local"], s3)
    assert done.returncode == 2 and "use --engine spark or auto" in done.stderr
    done = run(["s3a://dumps/nothing-here/"], s3, credentials=False)
    assert done.returncode == 4 and done.stderr.count("\n") <= 4, done.stderr  # S3 refused: a connection error
    assert "NoAuthWithAWSException" in done.stderr, done.stderr
    assert_no_crash(done)
