"""`analyze` throughput: local runner, Spark local[1] and local[2], next to a bare protobuf parse.

    .venv/bin/python -m bench analyze [--records=N] [--workdir=DIR] [--skip-spark] [--repeat=N] [--pure-python]

Generates a Parquet dump of N records (default 20 million) by repeating a pool of pre-encoded
entries under fresh (managed ledger, ledger, entry) positions, plus a quarter-size dump to show
that the local runner's peak RSS does not grow with the input. Every measured run is a child
process (so its peak RSS is its own), repeated (--repeat, default 3) and reported by its median;
Spark's figure excludes the JVM start. The local runner's RSS is also sampled while it runs and
printed at each tenth of its run time (memory that stays flat as the input streams by). With
--pure-python the local runner also runs without the native scanner (as on a machine without a
C compiler), a figure of the interpreter's own speed.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TC_MLS = [f"pulsar/system/persistent/__transaction_log_{i}" for i in range(4)]
PA_MLS = [f"public/default/persistent/orders-partition-{i}-billing__transaction_pending_ack" for i in range(12)]
POOL_ENTRIES = 6000
ENTRIES_PER_LEDGER = 5000


def build_pool():
    """(managed-ledger kind, entry bytes, records): TC batches of 40..200 records, pending-ack
    batches, and a few unbatched entries, with distinct transaction ids across the pool."""
    from pulsar_txn_cli import codec

    pool, txn = [], 0
    t0 = 1_763_770_000_000
    for i in range(POOL_ENTRIES):
        if i % 20 == 19:  # an unbatched entry (a large record, or batching off)
            txn += 1
            pool.append(
                (
                    "tc",
                    codec.encode_single(
                        codec.TcRecord(
                            metadata_op=0, txnid_most_bits=i % 4, txnid_least_bits=txn, timeout_ms=30000, start_time=t0
                        )
                    ),
                    1,
                )
            )
            continue
        size = (40, 80, 120, 200)[i % 4]
        if i % 3 == 2:
            records = []
            for j in range(size):
                txn += 1 if j % 2 == 0 else 0
                if j % 2 == 0:
                    r = codec.PendingAckRecord(pending_ack_op=1, ack_type=0, txnid_most_bits=1, txnid_least_bits=txn)
                    r.pending_ack_metadata.add(ledgerId=100 + i, entryId=j, batch_size=10, ack_set=[-2])
                else:
                    r = codec.PendingAckRecord(
                        pending_ack_op=2 if j % 4 == 1 else 3, txnid_most_bits=1, txnid_least_bits=txn
                    )
                records.append(r)
            pool.append(("pa", codec.encode_batch(records), size))
            continue
        records = []
        while len(records) < size:
            txn += 1
            most = i % 4
            new = codec.TcRecord(
                metadata_op=0,
                txnid_most_bits=most,
                txnid_least_bits=txn,
                new_status=0,
                timeout_ms=30000,
                start_time=t0 + txn,
                last_modification_time=t0 + txn,
                max_local_txn_id=txn,
                owner="pulsar://broker-1:6650",
            )
            part = codec.TcRecord(
                metadata_op=1,
                txnid_most_bits=most,
                txnid_least_bits=txn,
                partitions=["persistent://public/default/orders-partition-0"],
            )
            sub = codec.TcRecord(metadata_op=2, txnid_most_bits=most, txnid_least_bits=txn)
            sub.subscriptions.add(topic="persistent://public/default/orders-partition-0", subscription="billing")
            end = 2 if txn % 10 else 4
            records += [
                new,
                part,
                sub,
                codec.TcRecord(
                    metadata_op=3, txnid_most_bits=most, txnid_least_bits=txn, expected_status=0, new_status=end - 1
                ),
                codec.TcRecord(
                    metadata_op=3, txnid_most_bits=most, txnid_least_bits=txn, expected_status=end - 1, new_status=end
                ),
            ]
        records = records[:size]
        pool.append(("tc", codec.encode_batch(records), size))
    return pool


def generate(path: Path, records: int, pool) -> tuple[int, int]:
    """Write a Parquet dump of at least `records` records; returns (entries, records)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    schema = pa.schema(
        [("managedLedger", pa.string()), ("ledgerId", pa.int64()), ("entryId", pa.int64()), ("data", pa.binary())]
    )
    tmp = path.with_suffix(".tmp")
    written = entries = 0
    with pq.ParquetWriter(tmp, schema, compression="zstd") as writer:
        while written < records:
            cols = ([], [], [], [])
            for _ in range(2048):
                kind, data, n = pool[entries % len(pool)]
                mls = TC_MLS if kind == "tc" else PA_MLS
                ml = mls[(entries // 7) % len(mls)]
                cols[0].append(ml)
                cols[1].append(1000 + entries // ENTRIES_PER_LEDGER)
                cols[2].append(entries % ENTRIES_PER_LEDGER)
                cols[3].append(data)
                entries += 1
                written += n
                if written >= records:
                    break
            writer.write_table(pa.table(list(cols), schema=schema), row_group_size=2048)
    os.replace(tmp, path)
    return entries, written


def tree_cpu(root: int | None = None) -> float:
    """CPU seconds (user + system, reaped children included) of a process and its descendants:
    Spark's JVM and Python workers are descendants of the measuring child. Under load, CPU time
    per record is the figure that wall-clock time cannot give."""
    root = root or os.getpid()
    parents, times = {}, {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            fields = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        parents[int(entry)] = int(fields[1])
        times[int(entry)] = sum(int(v) for v in fields[11:15])
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        total += times.get(pid, 0)
        todo.extend(child for child, parent in parents.items() if parent == pid)
    return total / os.sysconf("SC_CLK_TCK")


def child(mode: str, path: str, warm: str | None = None) -> None:
    """Run one measurement in this process and print {seconds, records, rss_mb} as JSON."""
    from pulsar_txn_cli.pipeline import inputs

    files = inputs.expand([path])
    if mode == "baseline":
        from pulsar_txn_cli.codec.gen import PulsarTransactionMetadata_pb2 as tc_pb2
        from pulsar_txn_cli.codec.gen import TransactionPendingAck_pb2 as pa_pb2
        import pyarrow.parquet as pq

        kinds = {
            True: (tc_pb2.BatchedTransactionMetadataEntry, "transaction_logs", tc_pb2.TransactionMetadataEntry),
            False: (pa_pb2.BatchedPendingAckMetadataEntry, "pending_ack_logs", pa_pb2.PendingAckMetadataEntry),
        }
        start, cpu = time.perf_counter(), tree_cpu()
        records = 0
        for batch in pq.ParquetFile(path).iter_batches(batch_size=4096, columns=["managedLedger", "data"]):
            for ml, data in zip(batch.column(0).to_pylist(), batch.column(1).to_pylist()):
                batch_type, field, single = kinds["__transaction_log_" in ml]
                if data[:2] == b"\x0e\x01":
                    message = batch_type()
                    message.ParseFromString(data[4:])
                    records += len(getattr(message, field))
                else:
                    single().ParseFromString(data)
                    records += 1
        seconds, cpu = time.perf_counter() - start, tree_cpu() - cpu
    elif mode in ("local", "local-pure"):
        from pulsar_txn_cli.pipeline import facts, local

        if mode == "local-pure":
            facts.NATIVE = None  # what an install without a C compiler runs

        start, cpu = time.perf_counter(), tree_cpu()
        report = local.run(files)
        seconds, cpu = time.perf_counter() - start, tree_cpu() - cpu
        records = report["totals"]["records"]
    else:
        from pulsar_txn_cli.pipeline import spark_job

        cores = int(mode[len("spark") :])
        conf = {"spark.driver.memory": "2g"}
        with spark_job.Session(f"local[{cores}]", conf) as spark:
            # The first analysis in a JVM pays for class loading, JIT and Python workers; it runs on
            # the quarter dump (reported as "cold") before the clock starts for the full one.
            start = time.perf_counter()
            cold = spark_job.run(spark, inputs.expand([warm]))["totals"]["records"] if warm else 0
            cold_seconds = time.perf_counter() - start
            start, cpu = time.perf_counter(), tree_cpu()
            report = spark_job.run(spark, files)
            seconds, cpu = time.perf_counter() - start, tree_cpu() - cpu
        records = report["totals"]["records"]
    # VmHWM, not ru_maxrss: Linux carries ru_maxrss over from the forking parent.
    status = Path("/proc/self/status").read_text()
    rss = int(next(line for line in status.splitlines() if line.startswith("VmHWM:")).split()[1]) / 1024
    out = {"seconds": seconds, "records": records, "rss_mb": rss, "cpu": cpu}
    if mode.startswith("spark") and warm:
        out["cold"] = cold / cold_seconds
    print(json.dumps(out))


def measure(mode: str, path: Path, warm: Path | None, repeat: int) -> dict:
    """The median of `repeat` runs, each in a child process of its own, with the range of rates:
    this VM's host sometimes steals a quarter of a core for seconds, so one run can mislead."""
    code = f"from bench.bench_analyze import child; child({mode!r}, {str(path)!r}, {str(warm) if warm else None!r})"
    runs = []
    for _ in range(repeat):
        returncode, stdout, stderr, rss = run_sampled([sys.executable, "-c", code])
        if returncode:
            raise SystemExit(f"{mode} failed:\n{stderr[-3000:]}")
        result = json.loads(stdout.strip().splitlines()[-1])
        result["rate"] = result["records"] / result["seconds"]
        result["rssSamples"] = rss
        runs.append(result)
    runs.sort(key=lambda r: r["rate"])
    median = dict(runs[len(runs) // 2])
    median["range"] = (runs[0]["rate"], runs[-1]["rate"])
    return median


def run_sampled(command: list[str], every: float = 0.2) -> tuple[int, str, str, list[float]]:
    """Run a child process and sample its resident set size (MB) every `every` seconds."""
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    streams: list = []
    reader = threading.Thread(target=lambda: streams.extend(proc.communicate()))
    reader.start()
    samples = []
    while proc.poll() is None:
        try:
            status = Path(f"/proc/{proc.pid}/status").read_text()
            samples.append(
                int(next(line for line in status.splitlines() if line.startswith("VmRSS:")).split()[1]) / 1024
            )
        except (OSError, StopIteration):
            pass  # the process ended between poll() and the read
        time.sleep(every)
    reader.join()
    return proc.returncode, streams[0], streams[1], samples


def rss_over_time(samples: list[float]) -> str:
    """The RSS at each tenth of the run (MB), from the samples taken while it ran."""
    if not samples:
        return "no samples (the run was shorter than one sampling interval)"
    picks = [samples[min(len(samples) - 1, round(i * (len(samples) - 1) / 10))] for i in range(1, 11)]
    return " ".join(f"{mb:,.0f}" for mb in picks)


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench analyze")
    parser.add_argument("--records", type=int, default=20_000_000)
    parser.add_argument("--workdir", default="/tmp/pulsar-txn-bench-analyze")
    parser.add_argument("--skip-spark", action="store_true")
    parser.add_argument("--repeat", type=int, default=3, help="runs per measurement; the median is reported")
    parser.add_argument(
        "--pure-python", action="store_true", help="also run the local runner without the native scanner"
    )
    args = parser.parse_args(argv)
    work = Path(args.workdir)
    work.mkdir(parents=True, exist_ok=True)
    big, small = work / f"dump-{args.records}.parquet", work / f"dump-{args.records // 4}.parquet"
    started = time.perf_counter()
    pool = build_pool()
    for path, n in ((big, args.records), (small, args.records // 4)):
        if not path.exists():
            entries, records = generate(path, n, pool)
            print(
                f"generated {path.name}: {entries:,} entries, {records:,} records, {path.stat().st_size / 1e6:,.0f} MB"
            )
    print(
        f"inputs ready in {time.perf_counter() - started:.0f} s; load average {os.getloadavg()[0]:.1f} before the first run"
    )
    rows = {}
    modes = [("baseline", big), ("local", small), ("local", big)] + ([("local-pure", big)] if args.pure_python else [])
    for mode, path in modes + ([] if args.skip_spark else [("spark1", big), ("spark2", big)]):
        key = mode if path == big else f"{mode}-quarter"
        rows[key] = measure(mode, path, small if mode.startswith("spark") else None, args.repeat)
        r = rows[key]
        cold = f"  (cold, first analysis in the JVM: {r['cold']:,.0f} records/s)" if "cold" in r else ""
        print(
            f"{key:14} {r['records']:>12,} records  {r['seconds']:7.1f} s  {r['rate']:>11,.0f} records/s "
            f"({r['range'][0]:,.0f} to {r['range'][1]:,.0f})  {r['records'] / r['cpu']:>11,.0f} records/CPU-s  "
            f"{r['cpu'] / r['seconds']:.2f} cores  peak RSS {r['rss_mb']:,.0f} MB{cold}",
            flush=True,
        )
    base, loc = rows["baseline"]["rate"], rows["local"]["rate"]
    per_cpu = {k: r["records"] / r["cpu"] for k, r in rows.items()}
    print(
        f"local / baseline          = {loc / base:.2f} wall clock, {per_cpu['local'] / per_cpu['baseline']:.2f} per CPU-second  (target >= 0.25)"
    )
    print(
        f"local peak RSS            = {rows['local-quarter']['rss_mb']:,.0f} MB at {rows['local-quarter']['records']:,} records, "
        f"{rows['local']['rss_mb']:,.0f} MB at {rows['local']['records']:,} records"
    )
    print(
        f"local RSS over the run    = {rss_over_time(rows['local']['rssSamples'])} MB (at each tenth of the median run's time)"
    )
    if not args.skip_spark:
        s1, s2 = rows["spark1"]["rate"], rows["spark2"]["rate"]
        print(
            f"spark local[2] / local[1] = {s2 / s1:.2f}  (target >= 1.6); CPU per record local[2] / local[1] = "
            f"{per_cpu['spark1'] / per_cpu['spark2']:.2f} (1.0 = no parallel overhead; the cores column shows what the machine granted)"
        )
        print(
            f"spark per core / local    = {s2 / 2 / loc:.2f} (local[2]), {s1 / loc:.2f} (local[1]) wall clock; "
            f"{per_cpu['spark2'] / per_cpu['local']:.2f}, {per_cpu['spark1'] / per_cpu['local']:.2f} per CPU-second  (target >= 0.5)"
        )
