"""`collect --out s3a://…` against the real broker of the integration suite, with BookKeeper's real
BookieShell (the harness's classpath), into a real S3-compatible server (S3Proxy) through Hadoop's
S3A connector; then `analyze s3a://…` of the bucket agrees with the broker's internal stats as in
test_collect_real_broker.py. Marked `integration` and `spark_cluster`: it runs in either set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from test_collect_real_broker import _agrees, _internal_stats, only_trimmed
from tests.pipeline.standalone import S3Proxy
from tool import Tool

pytestmark = [pytest.mark.integration, pytest.mark.spark_cluster]


@pytest.fixture(scope="module")
def s3(tmp_path_factory):
    with S3Proxy(tmp_path_factory.mktemp("s3proxy")) as server:
        yield server


def run(argv, s3, state: Path):
    """The CLI in its own process (it starts a Spark JVM), S3Proxy's credentials in its environment."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("AWS_", "PYSPARK_"))}
    settings = [arg for key, value in s3.spark_conf().items() for arg in ("--spark-conf", f"{key}={value}")]
    done = subprocess.run(
        [str(Path(sys.executable).parent / "pulsar-txn"), *map(str, argv), *settings],
        capture_output=True,
        text=True,
        env={**env, **s3.env(), "SPARK_LOCAL_IP": "127.0.0.1", "XDG_STATE_HOME": str(state)},
        timeout=900,
    )
    assert S3Proxy.SECRET_KEY not in done.stdout + done.stderr
    return done


def test_collect_into_s3a_from_the_real_broker_then_analyze_agrees(collect_broker, s3, tmp_path):
    b = collect_broker
    tool = Tool(b.admin_url, tmp_path / "state")
    bucket = s3.bucket("realbroker")
    b.wait_coordinators_ready()
    b.run_workload(seed=71, txns=12, aborts=2, ops=3, parallel=4, prefix="collect-s3a")
    collect = ["collect", "--admin-url", b.admin_url, "--out", "s3a://realbroker/collected"]
    collect += ["--bookkeeper-classpath", b.tools_classpath, "--concurrency", "2", "-o", "json"]
    done = run(collect, s3, tmp_path / "state")
    assert done.returncode in (0, 3), done.stderr[-3000:]
    stats = _internal_stats(tool)
    summary = json.loads(done.stdout)
    # a ledger trimmed between collect's listing and its shell is a failed one (run again); no other
    only_trimmed(summary["failed"], {(name, l["ledgerId"]) for name, ml in stats.items() for l in ml["ledgers"]})
    assert all("belongs to no existing subscription" in p for p in summary["problems"]), summary["problems"]
    assert summary["out"] == "s3a://realbroker/collected" and summary["read"] > 0
    records = [json.loads(p.read_text()) for p in (bucket / "collected" / "_collect" / "done").iterdir()]
    assert len(records) == summary["read"]
    was_open = {(r["managedLedger"], r["ledgerId"]) for r in records if r["open"]}

    report = run(["analyze", "s3a://realbroker/collected/", "-o", "json"], s3, tmp_path / "state")
    assert report.returncode == 0, report.stderr[-3000:]
    assert "engine: spark (local[*])" in report.stderr, report.stderr
    analyzed = json.loads(report.stdout)
    assert analyzed["totals"]["decodeErrors"] == 0 and analyzed["totals"]["entries"] == summary["entries"]
    ledgers = {m["name"]: {l["ledgerId"]: l["entries"] for l in m["ledgers"]} for m in analyzed["managedLedgers"]}
    assert _agrees(stats, ledgers, was_open) > 0
