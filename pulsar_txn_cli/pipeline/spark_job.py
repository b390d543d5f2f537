"""The Spark runner: a PySpark job over the same facts and the same report as the local runner.

Each task (one per core, each dealt a share of the Parquet row groups and text files) reads
and decodes its entries inside mapInArrow and folds them into partial aggregates with the local
runner's own Aggregator (spark_tasks.py). A repartition by managed ledger then brings each
managed ledger's parts into one task, which merges them with the same Aggregator (mapInArrow
again). The driver collects one small result per managed ledger and folds them with
analysis.build_report; only the exact count of all transactions, when it may be small, takes
one more job.

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
from pulsar_txn_cli.pipeline.facts import error_sort_key

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
    """The partial aggregates of every task. The work units (Parquet row groups, whole text
    files) are dealt out to spark.default.parallelism tasks (Spark's default: one per core),
    decoded and folded by spark_tasks.decode_units. Not one task per unit: every task pays for
    starting its Python work and for filling its own distinct-transaction sets, which costs
    more than a row group's decoding."""
    from pulsar_txn_cli.pipeline import spark_tasks

    quiet_pandas_check()
    units = [(f.label, os.path.abspath(f.path), f.fmt, group, first) for f in files for group, first in inputs.work_units(f)]
    tasks = min(len(units), max(1, spark.sparkContext.defaultParallelism))
    listing = spark.sparkContext.parallelize(units, tasks).toDF(
        "label string, path string, fmt string, `group` int, firstRow bigint"
    )
    task = functools.partial(spark_tasks.decode_units, managed_ledger=managed_ledger, forced_log=forced_log)
    return listing.mapInArrow(task, spark_tasks.STATE_DDL)


def merged_state(state) -> tuple[dict, dict, dict, distinct.DistinctCounter]:
    """The tasks' parts merged per managed ledger (spark_tasks.merge_parts), collected: ledger
    rows, distinct counts and failure samples by managed ledger, and every managed ledger's
    registers merged into one counter for the total."""
    from pulsar_txn_cli.pipeline import spark_tasks

    # One merge task per core: the parts are small, and each task costs more to start than to run.
    tasks = max(1, state.sparkSession.sparkContext.defaultParallelism)
    merged = state.repartition(tasks, "managedLedger").mapInArrow(spark_tasks.merge_parts, spark_tasks.STATE_DDL)
    rows, counts, samples = {}, {}, {}
    registers = distinct.DistinctCounter()
    for row in merged.toArrow().to_pylist():
        ml = row["managedLedger"]
        if row["kind"] == "ledger":
            counters = [row[name] for name in analysis.COUNTERS]
            rows[(ml, row["ledgerId"])] = analysis.LedgerRow(counters, row["first"], row["last"])
        elif row["kind"] == "distinct":
            counts[ml] = (row["transactions"], not row["overflow"])
            registers.merge(row["codes"], None)
        else:
            samples.setdefault(ml, []).append((row["ledgerId"], row["entryId"], row["position"], row["error"]))
    for kept in samples.values():
        kept.sort(key=lambda s: error_sort_key(*s))
    return rows, counts, samples, registers


def total_distinct(state, counts: dict, registers: distinct.DistinctCounter) -> tuple[int, bool]:
    """distinct.py's rule over all managed ledgers. The registers give the estimate; the exact
    union is counted (one more job) only where it can be within the limit: no managed ledger
    passed it and the estimate is below EXACT_CHECK_BELOW."""
    from pyspark.sql import functions as F

    from pulsar_txn_cli.pipeline import spark_tasks

    if not counts:
        return 0, True  # nothing decoded at all
    estimate, _ = registers.result()
    if all(exact for _, exact in counts.values()) and estimate <= distinct.EXACT_CHECK_BELOW:
        hashes = state.where(F.col("kind") == "distinct").select("hashes").coalesce(1)
        n = hashes.mapInArrow(spark_tasks.count_union, spark_tasks.UNION_DDL).toArrow().column(0)[0].as_py()
        if n <= distinct.EXACT_LIMIT:
            return n, True
    return estimate, False


def run(spark, files: list[inputs.InputFile], *, managed_ledger=None, forced_log=None) -> dict:
    """Analyze on the given SparkSession; returns the same report as local.run."""
    from pyspark import StorageLevel

    from pulsar_txn_cli.pipeline.local import describe

    # The partial aggregates are small (bounded per task by the managed ledgers and ledgers it saw);
    # kept for the rare second look at them (total_distinct).
    state = state_frame(spark, files, managed_ledger, forced_log).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows, counts, samples, registers = merged_state(state)
        total = total_distinct(state, counts, registers)
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
