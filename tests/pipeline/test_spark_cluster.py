"""analyze on a real Spark standalone cluster (a master and two workers, each its own JVM) whose
executors run a Python with only PySpark, pyarrow and pandas: the tool ships its own code, and
the reports equal the local runner's, for local inputs and for a bucket of a real S3-compatible server
(S3Proxy) read through Hadoop's S3A connector. One cluster for the module (starting it takes a while)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from pulsar_txn_cli.pipeline import inputs, local

from .standalone import S3Proxy, Standalone, executor_python, importable
from tests.conftest import missing_tool

pytestmark = pytest.mark.spark_cluster

TC2 = "pulsar/system/persistent/__transaction_log_2"  # the readledger file's managed ledger


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    from pulsar_txn_cli.pipeline import spark_job

    if not spark_job.java_available():
        missing_tool("Java 17, which a Spark cluster needs, is")
    python = executor_python()
    # the executors' Python provably lacks what the tool would need if nothing were shipped
    assert importable(python, "pyspark") and importable(python, "pyarrow") and importable(python, "pandas")
    assert not importable(python, "pulsar_txn_cli") and not importable(python, "google.protobuf")
    assert not importable(python, "orjson")
    with Standalone(tmp_path_factory.mktemp("spark-standalone"), workers=2) as running:
        running.python = python
        yield running


def driver_env() -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
    return {**env, "SPARK_LOCAL_IP": "127.0.0.1"}


def analyze_on(cluster, sources: list, settings: dict, env: dict) -> subprocess.CompletedProcess:
    """`pulsar-txn analyze SOURCES -m TC2 -o json` on the standalone cluster, as an operator runs it."""
    conf = [arg for key, value in settings.items() for arg in ("--spark-conf", f"{key}={value}")]
    return subprocess.run(
        [str(Path(sys.executable).parent / "pulsar-txn"), "analyze", *sources, "-m", TC2]
        + ["--spark-master", cluster.master, *conf, "-o", "json"],
        capture_output=True,
        text=True,
        env=env,
        timeout=600,
    )


def test_cli_on_the_cluster_ships_its_code_and_matches_local(cli, cluster, many_inputs):
    done = analyze_on(cluster, many_inputs, cluster.driver_conf(cluster.python), driver_env())
    assert done.returncode == 3, done.stderr  # the inputs hold corrupt entries
    assert json.loads(done.stdout) == cli(["analyze", *many_inputs, "-m", TC2, "-o", "json"]).json()
    assert "shipped to the executors: pulsar_txn_cli-" in done.stderr and "_scan.cpython-" in done.stderr
    assert "executors decoded with: native scanner (2 tasks)" in done.stderr  # one per worker core
    # nothing but the tool's own lines on stderr (the JVM's warnings go to its log file)
    said = [line for line in done.stderr.splitlines() if line.strip()]
    assert all(line.startswith(("engine: ", "shipped to ", "executors decoded ", "5 of ")) for line in said), said


def test_spark_submit_on_the_cluster_with_the_pure_python_path(cluster, many_inputs, tmp_path):
    """The documented spark-submit command; --pure-python ships no scanner, the results stay the same."""
    from pulsar_txn_cli.pipeline import spark_job

    out = tmp_path / "report.json"
    submit = Path(sys.executable).parent / "spark-submit"
    settings = {**cluster.driver_conf(cluster.python), "spark.pyspark.driver.python": sys.executable}
    conf = [arg for key, value in settings.items() for arg in ("--conf", f"{key}={value}")]
    done = subprocess.run(
        [
            str(submit),
            "--master",
            cluster.master,
            *conf,
            spark_job.__file__,
            *many_inputs,
            "--managed-ledger",
            TC2,
            "--out",
            str(out),
            "--pure-python",
        ],
        capture_output=True,
        text=True,
        env={**driver_env(), "PYSPARK_DRIVER_PYTHON": sys.executable},
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert json.loads(out.read_text()) == local.run(inputs.expand(many_inputs), managed_ledger=TC2)
    said = done.stdout  # spark-submit passes the Python driver's stderr to its stdout
    assert "no native scanner: the executors decode with the pure-Python path" in said
    assert "executors decoded with: pure-Python (no native scanner shipped) (2 tasks)" in said


def test_s3a_analysis_on_the_cluster_matches_local(cli, cluster, s3, many_inputs, tmp_path):
    """`analyze s3a://bucket/prefix/` with --spark-master: the driver adds the S3A connector, the
    executors on the two workers read the bucket; the report is the local runner's of the same files."""
    prefix = s3.bucket("cluster") / "dumps"
    prefix.mkdir()
    for name in many_inputs:
        shutil.copy(name, prefix / Path(name).name)
    settings = {**cluster.driver_conf(cluster.python), **s3.spark_conf()}
    env = {k: v for k, v in driver_env().items() if not k.startswith("AWS_")}
    done = analyze_on(cluster, ["s3a://cluster/dumps/"], settings, {**env, **s3.env()})
    assert S3Proxy.SECRET_KEY not in done.stdout + done.stderr
    assert done.returncode == 3, done.stderr  # the inputs hold corrupt entries
    assert "added spark.jars.packages org.apache.hadoop:hadoop-aws:" in done.stderr
    assert f"engine: spark ({cluster.master})" in done.stderr, done.stderr
    assert "executors decoded with: native scanner" in done.stderr, done.stderr
    local_copy = tmp_path / "same"
    shutil.copytree(prefix, local_copy)
    expected = cli(["analyze", str(local_copy), "-m", TC2, "--engine", "local", "-o", "json"])
    report = json.loads(done.stdout)
    assert report["totals"] == expected.json()["totals"] and report["totals"]["entries"] > 0
    assert report == json.loads(expected.stdout.replace(str(local_copy), "s3a://cluster/dumps"))
