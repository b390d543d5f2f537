"""`collect --out s3a://...` against a real S3-compatible server (S3Proxy from Maven Central) with
Hadoop's S3A connector resolved as Spark users resolve it; the cluster is the `fleet` fixture's
served engine with the STAND-IN BookKeeper shell (conftest.py). Resumption works from what is in
the bucket, and `analyze` of the bucket agrees with the dump the stand-in served."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.collect.fleet import args, calls, ledgers_of
from tests.pipeline.standalone import S3Proxy
from tests.conftest import assert_no_crash

pytestmark = pytest.mark.spark_cluster


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Proxy(tmp_path_factory.mktemp("s3proxy")) as server:
        yield server


def run(argv, s3, *, credentials=True, conf=True):
    """The CLI in its own process (it starts a Spark JVM), with S3Proxy's settings and, unless
    told otherwise, its credentials in the environment as AWS's tools take them."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    env.update(s3.env() if credentials else {})
    settings = (
        [arg for key, value in s3.spark_conf().items() for arg in ("--spark-conf", f"{key}={value}")] if conf else []
    )
    done = subprocess.run(
        [str(Path(sys.executable).parent / "pulsar-txn"), *map(str, argv), *settings],
        capture_output=True,
        text=True,
        env={**env, "SPARK_LOCAL_IP": "127.0.0.1"},
        timeout=600,
    )
    assert S3Proxy.SECRET_KEY not in done.stdout + done.stderr
    return done


def test_collect_into_s3a_resumes_from_the_bucket_and_analyze_agrees(cli, fleet, s3, monkeypatch):
    bucket = s3.bucket("fleet")
    expected = ledgers_of(fleet["dump"])
    victim = sorted(lid for _, lid in expected)[0]
    monkeypatch.setenv("STANDIN_FAIL", str(victim))
    first = run(args(fleet, "s3a://fleet/collected", "--format", "parquet", "-o", "json"), s3)
    assert first.returncode == 3, first.stderr
    assert (
        "s3a:// needs Hadoop's S3A connector: added spark.jars.packages org.apache.hadoop:hadoop-aws:" in first.stderr
    )
    summary = json.loads(first.stdout)
    assert [f["ledgerId"] for f in summary["failed"]] == [victim] and summary["read"] == len(expected) - 1
    assert summary["out"] == "s3a://fleet/collected" and summary["format"] == "parquet"
    objects = sorted((bucket / "collected").rglob("ledger-*.parquet"))
    assert len(objects) == summary["read"] and all(o.read_bytes()[:4] == b"PAR1" for o in objects)
    records = [json.loads(p.read_text()) for p in (bucket / "collected" / "_collect" / "done").iterdir()]
    assert len(records) == summary["read"] and victim not in {r["ledgerId"] for r in records}

    # a second run reads only what the bucket does not hold: the failed ledger and the open ones
    monkeypatch.delenv("STANDIN_FAIL")
    fleet["calls"].unlink()
    second = run(args(fleet, "s3a://fleet/collected", "--format", "parquet", "-o", "json"), s3)
    assert second.returncode == 0, second.stderr
    open_ledgers = {r["ledgerId"] for r in records if r["open"]}
    assert set(calls(fleet)) == {victim} | open_ledgers
    assert json.loads(second.stdout)["alreadyCollected"] == len(expected) - len({victim} | open_ledgers)

    # analyze reads the bucket through Spark (the manifest under _collect/ is skipped): the same totals
    report = run(["analyze", "s3a://fleet/collected/", "-o", "json"], s3)
    assert report.returncode == 0, report.stderr
    direct = cli(["analyze", str(fleet["dump"]), "--engine", "local", "-o", "json"]).json()
    assert json.loads(report.stdout)["totals"] == direct["totals"] and direct["totals"]["batchedEntries"] > 0


def test_an_unreachable_destination_is_one_sentence_exit_4_before_any_ledger_is_read(fleet, s3):
    done = run(args(fleet, "s3a://fleet/no-credentials"), s3, credentials=False)
    assert done.returncode == 4, done.stderr
    assert "cannot use --out s3a://fleet/no-credentials" in done.stderr and "AWS_ACCESS_KEY_ID" in done.stderr
    assert_no_crash(done)
    assert done.stderr.count("\n") <= 5, done.stderr
    assert calls(fleet) == []
