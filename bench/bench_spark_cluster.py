"""`analyze` on a real Spark standalone cluster: one worker against two, and per core against the
local runner.

    .venv/bin/python -m bench spark_cluster [--records N] [--workdir DIR] [--repeat N]

A Parquet dump of N records (default 10 million; bench_analyze's generator) is analyzed by the
local runner and by a standalone cluster (tests/pipeline/standalone.py: a master and 1 or 2
workers of one core each, separate JVMs on 127.0.0.1) whose executors run a Python without
pulsar-txn, so the tool ships its code as it would to any cluster. Each cluster figure is for a
second analysis in the same driver (the first, on a quarter dump, pays for the executors' Python
workers and JIT) and the median of --repeat runs. The load average is printed with the figures:
on a shared machine it says how far to trust them.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.bench_analyze import ROOT, build_pool, generate, measure


def child(master: str, conf: str, path: str, warm: str, repeat: int) -> None:
    """In a process of its own: the driver, against the running cluster; prints one JSON line."""
    from pulsar_txn_cli.pipeline import inputs, spark_job

    rates, decoders = [], spark_job.Counter()
    session = spark_job.Session(master, json.loads(conf))
    with session as spark:
        spark_job.run(spark, inputs.expand([warm]), shipment=session.shipment)  # executors' Python workers start here
        for _ in range(repeat):
            start = time.perf_counter()
            report = spark_job.run(spark, inputs.expand([path]), shipment=session.shipment, decoders=decoders)
            rates.append(report["totals"]["records"] / (time.perf_counter() - start))
    rates.sort()
    print(
        json.dumps(
            {
                "rate": rates[len(rates) // 2],
                "range": [rates[0], rates[-1]],
                "records": report["totals"]["records"],
                "decoders": spark_job.describe_decoders(decoders),
            }
        )
    )


def on_cluster(workers: int, path: Path, warm: Path, workdir: Path, repeat: int) -> dict:
    from tests.pipeline.standalone import Standalone, executor_python

    python = executor_python()
    with Standalone(workdir / f"cluster-{workers}", workers=workers, cores=1) as cluster:
        conf = json.dumps(cluster.driver_conf(python))
        code = (
            f"from bench.bench_spark_cluster import child; "
            f"child({cluster.master!r}, {conf!r}, {str(path)!r}, {str(warm)!r}, {repeat})"
        )
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PYSPARK_PYTHON")}
        done = subprocess.run(
            [sys.executable, "-c", code],
            cwd=ROOT,
            capture_output=True,
            text=True,
            env={**env, "SPARK_LOCAL_IP": "127.0.0.1"},
        )
    if done.returncode:
        raise SystemExit(f"the cluster run with {workers} worker(s) failed:\n{done.stderr[-3000:]}")
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench spark_cluster")
    parser.add_argument("--records", type=int, default=10_000_000)
    parser.add_argument("--workdir", default=os.path.join(tempfile.gettempdir(), "pulsar-txn-bench-spark-cluster"))
    parser.add_argument("--repeat", type=int, default=3, help="timed analyses per measurement; the median is reported")
    args = parser.parse_args(argv)
    workdir = Path(args.workdir)
    workdir.mkdir(parents=True, exist_ok=True)
    path, warm = workdir / f"dump-{args.records}.parquet", workdir / f"warm-{args.records // 4}.parquet"
    pool = None
    for target, records in ((path, args.records), (warm, args.records // 4)):
        if not target.exists():
            pool = pool or build_pool()
            generate(target, records, pool)
    load = os.getloadavg()[0]
    start = time.monotonic()
    local = measure("local", path, None, args.repeat)
    one = on_cluster(1, path, warm, workdir, args.repeat)
    two = on_cluster(2, path, warm, workdir, args.repeat)
    print(
        f"load average (1 min) at the start: {load:.1f}, at the end: {os.getloadavg()[0]:.1f}, on {os.cpu_count()} cores; "
        f"{time.monotonic() - start:.0f} s in all"
    )
    print(f"{local['records']:,} records; records/s, median of {args.repeat} (range):")
    print("| run | records/s | per core | per core / local |")
    print("|---|---|---|---|")
    rows = [
        ("local runner (1 process)", local["rate"], local["range"], 1),
        ("standalone, 1 worker x 1 core", one["rate"], one["range"], 1),
        ("standalone, 2 workers x 1 core", two["rate"], two["range"], 2),
    ]
    for name, rate, (low, high), cores in rows:
        print(
            f"| {name} | {rate:,.0f} ({low / 1e6:.2f} M to {high / 1e6:.2f} M) | {rate / cores:,.0f} | "
            f"{rate / cores / local['rate']:.2f} |"
        )
    print(f"two workers / one worker: {two['rate'] / one['rate']:.2f}")
    print(f"1 worker: {one['decoders']}; 2 workers: {two['decoders']}")
