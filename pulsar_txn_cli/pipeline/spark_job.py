"""The Spark runner: a PySpark job over the same facts and the same report as the local runner.

Decoding happens on the executors in Arrow batches (mapInArrow, spark_tasks.py); everything
after it is DataFrame aggregation: one groupBy for the per-ledger counters, one for the
HyperLogLog registers, exact distinct counts where they can be exact, a window for the decode
failure samples. The driver folds the small results with analysis.build_report.

Also runs as-is under spark-submit (the package must be importable on the driver and the
executors: installed, or shipped with --py-files):

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[*]' \\
        pulsar_txn_cli/pipeline/spark_job.py DUMP... --out result.json
"""
from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.pipeline import analysis, distinct, inputs
from pulsar_txn_cli.pipeline.facts import RECORDS_BOUNDS, SIZE_BOUNDS

INSTALL_HINT = "pip install 'pulsar-txn[spark]'"


def require_spark() -> None:
    """One clear sentence when Spark cannot run here."""
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise UsageError(
            f"--engine spark needs PySpark and pyarrow, which are not installed: run `{INSTALL_HINT}` or use --engine local"
        ) from None
    if not java_available():
        raise UsageError(
            "--engine spark needs Java 17, which was not found (no java on PATH and no JAVA_HOME): "
            "install it, e.g. `apt-get install openjdk-17-jre-headless`, or use --engine local"
        )


def java_available() -> bool:
    home = os.environ.get("JAVA_HOME")
    if home and os.path.exists(os.path.join(home, "bin", "java")):
        return True
    return shutil.which("java") is not None


def spark_available() -> bool:
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return java_available()


class Session:
    """A SparkSession for the duration of one analysis; an already active session (tests,
    spark-submit, notebooks) is reused and left running."""

    def __init__(self, master: str = "local[*]", conf: dict | None = None):
        self.master, self.conf, self.spark, self.owned = master, conf or {}, None, False

    def __enter__(self):
        import warnings

        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            self.spark = active
            return active
        quiet = "-Dlog4j2.configurationFile=" + os.path.join(os.path.dirname(__file__), "log4j2.properties")
        defaults = {"spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false", "spark.driver.extraJavaOptions": quiet}
        builder = SparkSession.builder.master(self.master).appName("pulsar-txn analyze")
        for key, value in {**defaults, **self.conf}.items():
            builder = builder.config(key, value)
        self.spark = builder.getOrCreate()
        self.spark.sparkContext.setLogLevel("ERROR")
        self.owned = True
        return self.spark

    def __exit__(self, *exc):
        if self.owned:
            self.spark.stop()


def facts_frame(spark, files: list[inputs.InputFile], managed_ledger=None, forced_log=None):
    """One DataFrame of per-entry facts over every input file."""
    from pulsar_txn_cli.pipeline import spark_tasks

    frames = []
    parquet = [f for f in files if f.fmt == "parquet"]
    text = [f for f in files if f.fmt != "parquet"]
    if parquet:
        from pyspark.sql import functions as F

        labels = {spark_tasks.path_key(f.path): f.label for f in parquet}
        rows = spark.read.parquet(*[os.path.abspath(f.path) for f in parquet]).select(
            F.col("managedLedger").cast("string"), F.col("ledgerId").cast("bigint"), F.col("entryId").cast("bigint"),
            F.col("data").cast("binary"), F.col("_metadata.file_path"), F.col("_metadata.row_index"),
        )
        task = functools.partial(spark_tasks.decode_parquet, labels=labels, managed_ledger=managed_ledger, forced_log=forced_log)
        frames.append(rows.mapInArrow(task, spark_tasks.FACTS_DDL))
    if text:
        listing = spark.createDataFrame([(f.label, os.path.abspath(f.path), f.fmt) for f in text], "label string, path string, fmt string")
        listing = listing.repartition(min(len(text), spark.sparkContext.defaultParallelism))
        task = functools.partial(spark_tasks.decode_text_files, managed_ledger=managed_ledger, forced_log=forced_log)
        frames.append(listing.mapInArrow(task, spark_tasks.FACTS_DDL))
    frame = frames[0]
    for other in frames[1:]:
        frame = frame.unionByName(other)
    return frame


def _bucket(col, bounds):
    from pyspark.sql import functions as F

    expr = F.when(col <= bounds[0], 0)
    for i, bound in enumerate(bounds[1:], 1):
        expr = expr.when(col <= bound, i)
    return expr.otherwise(len(bounds))


def ledger_rows(facts) -> dict:
    """analysis.LedgerRow per (managed ledger, ledger id), from one groupBy."""
    from pyspark.sql import functions as F

    ok, bad = F.col("decoded"), ~F.col("decoded")
    one = lambda cond: F.sum(F.when(cond, 1).otherwise(0))  # noqa: E731
    records_bucket, size_bucket = _bucket(F.col("records"), RECORDS_BOUNDS), _bucket(F.col("bytes"), SIZE_BOUNDS)
    sums = {
        "entries": F.count(F.lit(1)),
        "batchedEntries": one(ok & F.col("batched")),
        "unbatchedEntries": one(ok & ~F.col("batched")),
        "decodeErrors": one(bad),
        "records": F.sum("records"),
        "batchedRecords": F.sum(F.when(F.col("batched"), F.col("records")).otherwise(0)),
        "bytes": F.sum("bytes"),
        "decodedBytes": F.sum(F.when(ok, F.col("bytes")).otherwise(0)),
        **{name: F.sum(name) for name in analysis.OP_COLUMNS},
        **{name: one(ok & (records_bucket == i)) for i, name in enumerate(analysis.RECORD_BUCKETS)},
        **{name: one(ok & (size_bucket == i)) for i, name in enumerate(analysis.SIZE_BUCKETS)},
    }
    assert list(sums) == list(analysis.COUNTERS)
    aggregated = facts.groupBy("managedLedger", "ledgerId").agg(
        *[expr.alias(name) for name, expr in sums.items()], F.min("entryId").alias("first"), F.max("entryId").alias("last")
    )
    out = {}
    for row in aggregated.collect():
        counters = [int(row[name] or 0) for name in analysis.COUNTERS]
        out[(row["managedLedger"], row["ledgerId"])] = analysis.LedgerRow(counters, row["first"], row["last"])
    return out


def distinct_counts(facts):
    """distinct.py's rule on Spark: registers for every managed ledger, exact counts wherever
    the estimate says the count may be within the exact limit."""
    from pyspark.sql import functions as F

    from pulsar_txn_cli.pipeline import spark_tasks

    decoded = facts.where(F.col("decoded")).select("managedLedger", "txnHashes")
    hashes = decoded.select("managedLedger", F.explode("txnHashes").alias("h"))
    registers = (
        decoded.mapInArrow(spark_tasks.hll_registers, spark_tasks.REGISTERS_DDL)
        .groupBy("managedLedger", "index").agg(F.max("rank").alias("rank"))
    )
    by_ml: dict = {}
    for row in registers.collect():
        by_ml.setdefault(row["managedLedger"], {})[row["index"]] = row["rank"]
    estimates = {ml: distinct.estimate(regs) for ml, regs in by_ml.items()}
    small = [ml for ml, est in estimates.items() if est <= distinct.EXACT_CHECK_BELOW]
    exact: dict = {}
    if small:
        names = [ml for ml in small if ml is not None]
        cond = F.col("managedLedger").isin(names) if names else F.lit(False)
        if None in small:
            cond = cond | F.col("managedLedger").isNull()
        for row in hashes.where(cond).groupBy("managedLedger").agg(F.countDistinct("h").alias("n")).collect():
            exact[row["managedLedger"]] = row["n"]
    counts = {}
    for ml, est in estimates.items():
        n = exact.get(ml)
        counts[ml] = (n, True) if n is not None and n <= distinct.EXACT_LIMIT else (est, False)
    merged = distinct.merge(by_ml.values())
    total_est = distinct.estimate(merged) if merged else 0
    total = (total_est, False)
    if total_est <= distinct.EXACT_CHECK_BELOW:
        n = hashes.select("h").distinct().count()
        if n <= distinct.EXACT_LIMIT:
            total = (n, True)
    return counts, total


def error_samples(facts) -> dict:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.coalesce(F.col("ledgerId"), F.lit(-1)), F.coalesce(F.col("entryId"), F.lit(-1)),
             F.coalesce(F.col("position"), F.lit("")), F.coalesce(F.col("error"), F.lit(""))]
    window = Window.partitionBy("managedLedger").orderBy(*order)
    failed = facts.where(~F.col("decoded")).withColumn("n", F.row_number().over(window))
    out: dict = {}
    for row in failed.where(F.col("n") <= analysis.SAMPLE_LIMIT).orderBy("managedLedger", "n").collect():
        out.setdefault(row["managedLedger"], []).append((row["ledgerId"], row["entryId"], row["position"], row["error"]))
    return out


def run(spark, files: list[inputs.InputFile], *, managed_ledger=None, forced_log=None) -> dict:
    """Analyze on the given SparkSession; returns the same report as local.run."""
    from pyspark import StorageLevel

    from pulsar_txn_cli.pipeline.local import describe

    facts = facts_frame(spark, files, managed_ledger, forced_log).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = ledger_rows(facts)
        counts, total = distinct_counts(facts)
        samples = error_samples(facts)
    finally:
        facts.unpersist()
    return analysis.build_report(rows, counts, total, samples, forced_log=forced_log, inputs=describe(files))


def analyze(files, *, master="local[*]", conf=None, managed_ledger=None, forced_log=None) -> dict:
    require_spark()
    with Session(master, conf) as spark:
        return run(spark, files, managed_ledger=managed_ledger, forced_log=forced_log)


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point: spark_job.py INPUT... --out result.json."""
    import orjson

    parser = argparse.ArgumentParser(prog="spark_job.py", description="pulsar-txn ledger analytics on Spark")
    parser.add_argument("inputs", nargs="+", help="dump files, directories or globs (JSONL, Parquet, readledger text)")
    parser.add_argument("--out", required=True, help="where to write the JSON report")
    parser.add_argument("--format", default="auto", choices=inputs.FORMATS)
    parser.add_argument("--managed-ledger", help="managed-ledger name for readledger text")
    parser.add_argument("--log", choices=("tc", "pending-ack"), help="force the log kind")
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    files = inputs.expand(args.inputs, args.format)
    inputs.check_inputs(files, args.managed_ledger, args.log)
    spark = SparkSession.builder.appName("pulsar-txn analyze").getOrCreate()
    report = run(spark, files, managed_ledger=args.managed_ledger, forced_log=args.log)
    with open(args.out, "wb") as out:
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    totals = report["totals"]
    print(f"analyzed {totals['entries']} entries ({totals['records']} records) of {totals['managedLedgers']} "
          f"managed ledgers into {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
