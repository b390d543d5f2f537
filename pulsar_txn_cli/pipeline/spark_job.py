"""The Spark runner: a PySpark job over the same facts and the same report as the local runner.

Each task (one per Parquet row group or text file) reads and decodes its share of the entries
inside mapInArrow and folds them into partial aggregates with the local runner's own Aggregator
(spark_tasks.py). DataFrame operations merge the parts: a groupBy sums the per-ledger counters,
a repartition by managed ledger feeds the register-wise HyperLogLog max and the exact-set unions
(mapInArrow again, numpy), a window picks the first decode failures. The driver folds the small
results with analysis.build_report.

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


def quiet_pandas_check() -> None:
    """PySpark warns about pandas 3 when it starts and at every mapInArrow; this job never uses pandas."""
    import warnings

    warnings.filterwarnings("ignore", message="PySpark does not yet fully support pandas", category=FutureWarning)


class Session:
    """A SparkSession for the duration of one analysis; an already active session (tests,
    spark-submit, notebooks) is reused and left running."""

    def __init__(self, master: str = "local[*]", conf: dict | None = None):
        self.master, self.conf, self.spark, self.owned = master, conf or {}, None, False

    def __enter__(self):
        os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        quiet_pandas_check()
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            self.spark = active
            return active
        # Only errors from Spark's logs; and the C1 JIT only: the JVM merely schedules tasks and merges
        # small partial aggregates here, and C2 compilations cost more CPU than they save.
        java = "-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=" + os.path.join(os.path.dirname(__file__), "log4j2.properties")
        defaults = {
            "spark.ui.showConsoleProgress": "false", "spark.ui.enabled": "false", "spark.driver.extraJavaOptions": java,
        }
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


def state_frame(spark, files: list[inputs.InputFile], managed_ledger=None, forced_log=None):
    """The partial aggregates of every task: one task per work unit (a Parquet row group or a
    whole text file), decoded and folded by spark_tasks.decode_units."""
    from pulsar_txn_cli.pipeline import spark_tasks

    quiet_pandas_check()
    units = [(f.label, os.path.abspath(f.path), f.fmt, group, first) for f in files for group, first in inputs.work_units(f)]
    listing = spark.sparkContext.parallelize(units, len(units)).toDF(
        "label string, path string, fmt string, `group` int, firstRow bigint"
    )
    task = functools.partial(spark_tasks.decode_units, managed_ledger=managed_ledger, forced_log=forced_log)
    return listing.mapInArrow(task, spark_tasks.STATE_DDL)


def ledger_rows(state) -> dict:
    """analysis.LedgerRow per (managed ledger, ledger id): the tasks' counters summed."""
    from pyspark.sql import functions as F

    merged = state.where(F.col("kind") == "ledger").groupBy("managedLedger", "ledgerId").agg(
        *[F.sum(name).alias(name) for name in analysis.COUNTERS], F.min("first").alias("first"), F.max("last").alias("last")
    )
    out = {}
    for row in merged.collect():
        counters = [int(row[name]) for name in analysis.COUNTERS]
        out[(row["managedLedger"], row["ledgerId"])] = analysis.LedgerRow(counters, row["first"], row["last"])
    return out


def distinct_counts(state):
    """distinct.py's rule from the tasks' parts. Registers: the max per register over all tasks.
    A managed ledger can be exact only when no task overflowed and its estimate is below
    EXACT_CHECK_BELOW; only for those are the tasks' exact sets unioned and counted."""
    from pyspark.sql import functions as F

    from pulsar_txn_cli.pipeline import spark_tasks

    parts = state.where(F.col("kind") == "distinct")
    merged = (
        parts.select("managedLedger", "codes", "overflow")
        .repartition(spark_partitions(state), "managedLedger")
        .mapInArrow(spark_tasks.merge_registers, spark_tasks.MERGED_DDL)
    )
    by_ml: dict = {}
    overflowed = set()
    for row in merged.toArrow().to_pylist():
        codes = memoryview(row["codes"]).cast("i")
        by_ml[row["managedLedger"]] = {code >> 6: code & 63 for code in codes}
        if row["overflow"]:
            overflowed.add(row["managedLedger"])
    estimates = {ml: distinct.estimate(regs) for ml, regs in by_ml.items()}
    candidates = [ml for ml, est in estimates.items() if ml not in overflowed and est <= distinct.EXACT_CHECK_BELOW]
    exact: dict = {}
    if candidates:
        named = [ml for ml in candidates if ml is not None]
        cond = F.col("managedLedger").isin(named) if named else F.lit(False)
        if None in candidates:
            cond = cond | F.col("managedLedger").isNull()
        unions = (
            parts.where(cond).select("managedLedger", "hashes")
            .repartition(spark_partitions(state), "managedLedger")
            .mapInArrow(spark_tasks.count_exact, spark_tasks.EXACT_DDL)
        )
        for row in unions.toArrow().to_pylist():
            exact[row["managedLedger"]] = row["n"]
    counts = {}
    for ml, est in estimates.items():
        n = exact.get(ml, 0 if ml in candidates else None)  # a candidate without hashes has no transactions
        counts[ml] = (n, True) if n is not None and n <= distinct.EXACT_LIMIT else (est, False)
    everything = distinct.merge(by_ml.values())
    total_est = distinct.estimate(everything) if everything else 0
    total = (total_est, False)
    if not overflowed and total_est <= distinct.EXACT_CHECK_BELOW:
        everyone = parts.select(F.lit("").alias("managedLedger"), "hashes").coalesce(1)
        rows = everyone.mapInArrow(spark_tasks.count_exact, spark_tasks.EXACT_DDL).toArrow().to_pylist()
        n = rows[0]["n"] if rows else 0  # nothing decoded at all
        if n <= distinct.EXACT_LIMIT:
            total = (n, True)
    return counts, total


def spark_partitions(frame) -> int:
    return int(frame.sparkSession.conf.get("spark.sql.shuffle.partitions"))


def error_samples(state) -> dict:
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    order = [F.coalesce(F.col("ledgerId"), F.lit(-1)), F.coalesce(F.col("entryId"), F.lit(-1)),
             F.coalesce(F.col("position"), F.lit("")), F.coalesce(F.col("error"), F.lit(""))]
    window = Window.partitionBy("managedLedger").orderBy(*order)
    failed = state.where(F.col("kind") == "error").withColumn("n", F.row_number().over(window))
    out: dict = {}
    for row in failed.where(F.col("n") <= analysis.SAMPLE_LIMIT).orderBy("managedLedger", "n").collect():
        out.setdefault(row["managedLedger"], []).append((row["ledgerId"], row["entryId"], row["position"], row["error"]))
    return out


def run(spark, files: list[inputs.InputFile], *, managed_ledger=None, forced_log=None) -> dict:
    """Analyze on the given SparkSession; returns the same report as local.run."""
    from pyspark import StorageLevel

    from pulsar_txn_cli.pipeline.local import describe

    # The partial aggregates are small (bounded per task by the managed ledgers and ledgers it saw).
    state = state_frame(spark, files, managed_ledger, forced_log).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows = ledger_rows(state)
        counts, total = distinct_counts(state)
        failed = any(row.counters[analysis.ERRORS] for row in rows.values())
        samples = error_samples(state) if failed else {}  # one Spark job less in the usual case
    finally:
        state.unpersist()
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
