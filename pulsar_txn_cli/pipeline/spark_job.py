"""The Spark runner: a PySpark job over the same facts and the same report as the local runner.

Each task (one per core, each dealt a share of the Parquet row groups and text files) reads
and decodes its entries inside mapInArrow and folds them into partial aggregates with the local
runner's own Aggregator (spark_tasks.py). A repartition by managed ledger then brings each
managed ledger's parts into one task, which merges them with the same Aggregator (mapInArrow
again). The driver collects one small result per managed ledger and folds them with
analysis.build_report; only the exact count of all transactions, when it may be small, takes
one more job.

Also runs as-is under spark-submit (the package must be importable on the driver; a cluster's
executors get it shipped, see ship.py):

    PYSPARK_PYTHON=.venv/bin/python .venv/bin/spark-submit --master 'local[*]' \\
        pulsar_txn_cli/pipeline/spark_job.py DUMP... --out result.json
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
from collections import Counter

from pulsar_txn_cli.errors import ConnectionFailed, DataError, PulsarTxnError, UsageError
from pulsar_txn_cli.pipeline import analysis, distinct, inputs
from pulsar_txn_cli.pipeline.facts import error_sort_key

INSTALL_HINT = "pip install 'pulsar-txn[spark]'"


def require_spark(needs: str = "--engine spark", otherwise: str = " or use --engine local") -> None:
    """One clear sentence when Spark cannot run here: what `needs` it, and what to do `otherwise`."""
    try:
        import pyspark  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        raise UsageError(
            f"{needs} needs PySpark and pyarrow, which are not installed: run `{INSTALL_HINT}`{otherwise}"
        ) from None
    if not java_available():
        raise UsageError(
            f"{needs} needs Java 17, which was not found (no java on PATH and no JAVA_HOME): "
            f"install it, e.g. `apt-get install openjdk-17-jre-headless`{otherwise}"
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


DEFAULT_MASTER = "local[*]"


def is_local(master: str) -> bool:
    """local / local[N] run the executors in the driver's own machine and Python; local-cluster
    and every cluster manager start executors of their own."""
    return master == "local" or master.startswith("local[")


class Session:
    """A SparkSession for the duration of one analysis; an already active session (tests,
    spark-submit, notebooks) is reused and left running.

    On a local master the executors run the tool's own Python. On a cluster they run the Python
    that spark.pyspark.python (or PYSPARK_PYTHON) names there, and the tool's code is shipped to
    them (ship.py; `shipment` says what). The JVM's own output (its warnings, Spark's errors)
    goes to `jvm_log`, not to stderr."""

    def __init__(
        self, master: str = DEFAULT_MASTER, conf: dict | None = None, ship_native: bool = True, ship: bool = True
    ):
        self.master, self.conf, self.ship_native, self.ship = master, conf or {}, ship_native, ship
        self.spark, self.owned, self.shipment, self.jvm_log = None, False, None, None

    def __enter__(self):
        quiet_pandas_check()
        from pyspark.sql import SparkSession

        active = SparkSession.getActiveSession()
        if active is not None:
            self.spark = active
        else:
            try:
                self.spark = self._start()
            except Exception as exc:  # the JVM did not start (a bad setting), or a package could not be resolved
                # A setting or an environment to correct, said in full: a usage error, not an unexpected one.
                where = f"Spark's own log: {self.jvm_log}" if self.jvm_log else None
                raise UsageError(f"cannot start Spark ({self.master}): {failure_summary(exc)}", hint=where) from None
            self.owned = True
        if self.ship and not is_local(self.spark.sparkContext.master):
            from pulsar_txn_cli.pipeline import ship

            self.shipment = ship.build(native=self.ship_native)
            ship.ship(self.spark.sparkContext, self.shipment)
        return self.spark

    def _start(self):
        import tempfile

        from pyspark import SparkConf, SparkContext
        from pyspark.java_gateway import launch_gateway
        from pyspark.sql import SparkSession

        python = self.conf.get("spark.pyspark.python")
        if python:
            os.environ["PYSPARK_PYTHON"] = python  # PySpark's executors take it from here
        elif is_local(self.master):
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
        # Only errors from Spark's logs; and the C1 JIT only: the JVM merely schedules tasks and merges
        # small partial aggregates here, and C2 compilations cost more CPU than they save.
        java = "-XX:TieredStopAtLevel=1 -Dlog4j2.configurationFile=" + os.path.join(
            os.path.dirname(__file__), "log4j2.properties"
        )
        defaults = {
            "spark.ui.showConsoleProgress": "false",
            "spark.ui.enabled": "false",
            "spark.driver.extraJavaOptions": java,
        }
        conf = SparkConf(loadDefaults=False).setMaster(self.master).setAppName("pulsar-txn analyze")
        for key, value in {**defaults, **self.conf}.items():
            conf.set(key, value)
        log = tempfile.NamedTemporaryFile(prefix="pulsar-txn-spark-", suffix=".log", delete=False)
        self.jvm_log = log.name
        with log:
            gateway = launch_gateway(conf, popen_kwargs={"stderr": log})
        SparkContext(conf=conf, gateway=gateway).setLogLevel("ERROR")
        return SparkSession.builder.getOrCreate()

    def __exit__(self, exc_type, *exc):
        if self.owned:
            self.spark.stop()
            if exc_type is None and self.jvm_log:
                os.unlink(self.jvm_log)  # kept after a failure, for its errors


def state_frame(spark, files: list[inputs.InputFile], managed_ledger=None, forced_log=None, compiled=()):
    """The partial aggregates of every task. The work units (Parquet row groups, whole text
    files) are dealt out to spark.default.parallelism tasks (Spark's default: one per core),
    decoded and folded by spark_tasks.decode_units. Not one task per unit: every task pays for
    starting its Python work and for filling its own distinct-transaction sets, which costs
    more than a row group's decoding."""
    from pulsar_txn_cli.pipeline import spark_tasks

    quiet_pandas_check()
    units = [
        (f.label, os.path.abspath(f.path), f.fmt, group, first) for f in files for group, first in inputs.work_units(f)
    ]
    tasks = min(len(units), max(1, spark.sparkContext.defaultParallelism))
    listing = spark.sparkContext.parallelize(units, tasks).toDF(
        "label string, path string, fmt string, `group` int, firstRow bigint"
    )
    task = functools.partial(
        spark_tasks.decode_units, managed_ledger=managed_ledger, forced_log=forced_log, compiled=compiled
    )
    return listing.mapInArrow(task, spark_tasks.STATE_DDL)


def hadoop_frames(spark, files: list[inputs.InputFile], managed_ledger=None, forced_log=None, compiled=()) -> list:
    """The partial aggregates of files on Hadoop file systems (remote.py), which only the JVM can
    open: Spark reads their Parquet (with each row's index, for the same positions as the local
    runner's) and their text files whole; the executors decode as for local files."""
    from pyspark.sql import functions as F

    from pulsar_txn_cli.pipeline import spark_tasks

    options = {"managed_ledger": managed_ledger, "forced_log": forced_log, "compiled": compiled}
    parquet = [f.path for f in files if f.fmt == "parquet"]
    text = {f.path: f.fmt for f in files if f.fmt != "parquet"}
    frames = []
    if parquet:
        rows = spark.read.parquet(*parquet).select(
            *inputs.PARQUET_COLUMNS,
            F.col("_metadata.file_path").alias("path"),
            F.col("_metadata.row_index").alias("row"),
        )
        frames.append(rows.mapInArrow(functools.partial(spark_tasks.decode_rows, **options), spark_tasks.STATE_DDL))
    if text:
        whole = spark.read.format("binaryFile").load(list(text)).select("path", "content")
        task = functools.partial(spark_tasks.decode_files, formats=text, **options)
        frames.append(whole.mapInArrow(task, spark_tasks.STATE_DDL))
    return frames


def merged_state(state) -> tuple[dict, dict, dict, distinct.DistinctCounter, Counter]:
    """The tasks' parts merged per managed ledger (spark_tasks.merge_parts), collected: ledger
    rows, distinct counts and failure samples by managed ledger, every managed ledger's
    registers merged into one counter for the total, and the decoders the tasks used."""
    from pulsar_txn_cli.pipeline import spark_tasks

    # One merge task per core: the parts are small, and each task costs more to start than to run.
    tasks = max(1, state.sparkSession.sparkContext.defaultParallelism)
    merged = state.repartition(tasks, "managedLedger").mapInArrow(spark_tasks.merge_parts, spark_tasks.STATE_DDL)
    rows, counts, samples = {}, {}, {}
    registers = distinct.DistinctCounter()
    decoders = Counter()
    for row in merged.toArrow().to_pylist():
        ml = row["managedLedger"]
        if row["kind"] == "decoder":
            decoders[row["decoder"]] += 1
        elif row["kind"] == "ledger":
            counters = [row[name] for name in analysis.COUNTERS]
            rows[(ml, row["ledgerId"])] = analysis.LedgerRow(counters, row["first"], row["last"])
        elif row["kind"] == "distinct":
            counts[ml] = (row["transactions"], not row["overflow"])
            registers.merge(row["codes"], None)
        else:
            samples.setdefault(ml, []).append((row["ledgerId"], row["entryId"], row["position"], row["error"]))
    for kept in samples.values():
        kept.sort(key=lambda s: error_sort_key(*s))
    return rows, counts, samples, registers, decoders


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


def run(
    spark, files: list[inputs.InputFile], *, managed_ledger=None, forced_log=None, shipment=None, decoders=None
) -> dict:
    """Analyze on the given SparkSession; returns the same report as local.run. `shipment`: what
    was shipped to the executors (Session.shipment); `decoders` (a Counter), if given, counts the
    tasks by the decoder they used."""
    from pyspark import StorageLevel

    from pulsar_txn_cli.pipeline.local import describe
    from pulsar_txn_cli.pipeline.remote import is_url

    compiled = shipment.names() if shipment is not None else ()
    local_files = [f for f in files if not is_url(f.path)]
    frames = [state_frame(spark, local_files, managed_ledger, forced_log, compiled)] if local_files else []
    frames += hadoop_frames(spark, [f for f in files if is_url(f.path)], managed_ledger, forced_log, compiled)
    # The partial aggregates are small (bounded per task by the managed ledgers and ledgers it saw);
    # kept for the rare second look at them (total_distinct).
    state = functools.reduce(lambda a, b: a.unionByName(b), frames).persist(StorageLevel.MEMORY_AND_DISK)
    try:
        rows, counts, samples, registers, used = merged_state(state)
        if decoders is not None:
            decoders.update(used)
        total = total_distinct(state, counts, registers)
    finally:
        state.unpersist()
    return analysis.build_report(rows, counts, total, samples, forced_log=forced_log, inputs=describe(files))


def analyze(
    files,
    *,
    master=DEFAULT_MASTER,
    conf=None,
    managed_ledger=None,
    forced_log=None,
    progress=None,
    tell=None,
    ship_native=True,
    urls=(),
    fmt="auto",
) -> dict:
    """`urls`: inputs on Hadoop file systems (remote.py), expanded once Spark runs;
    `progress` (optional): update(total=, completed=) with the tasks of the running stages;
    `tell` (optional): takes a sentence about what was shipped to the executors and what they used."""
    require_spark()
    session = Session(master, conf, ship_native)
    with session as spark:
        if tell is not None and session.shipment is not None:
            tell(session.shipment.describe())
        decoders = Counter()
        try:
            files = with_urls(spark, files, urls, fmt, managed_ledger, forced_log)
            with watch(spark, progress):
                report = run(
                    spark,
                    files,
                    managed_ledger=managed_ledger,
                    forced_log=forced_log,
                    shipment=session.shipment,
                    decoders=decoders,
                )
        except PulsarTxnError:
            raise
        except Exception as exc:  # Py4JJavaError, PythonException...: one sentence, the logs named
            where = f"Spark's own log: {session.jvm_log}; " if session.owned else ""
            summary = failure_summary(exc)
            raise failure_class(summary)(
                f"the Spark job failed: {summary}",
                hint=f"{where}the executors' logs are in the workers' work directories",
            ) from exc
    if tell is not None:
        tell(describe_decoders(decoders))
    return report


# A storage that refused or could not be reached (S3 credentials, a host, a socket): a connection error;
# any other failure of the job is one on its inputs.
STORAGE_FAILURES = ("AccessDenied", "NoAuthWith", "UnknownHost", "ConnectException", "SocketTimeout", "SdkClient")


def failure_class(summary: str) -> type[PulsarTxnError]:
    return ConnectionFailed if any(name in summary for name in STORAGE_FAILURES) else DataError


def failure_summary(exc: Exception) -> str:
    """The line of a Spark failure that says what went wrong: the executor's Python exception if
    there is one (the last `SomeError: ...` line), else the first line."""
    import re

    lines = [line.strip().lstrip(": ") for line in str(exc).splitlines() if line.strip()]  # py4j: ": java.io..."
    found = [line for line in lines if re.match(r"^[\w.]+(Error|Exception): ", line)]
    text = found[-1] if found else lines[0] if lines else type(exc).__name__
    return text if len(text) <= 300 else text[:297] + "..."


def with_urls(spark, files: list, urls, fmt: str, managed_ledger, forced_log) -> list:
    """files plus every file under the Hadoop URLs (remote.py), listed once Spark runs."""
    if not urls:
        return files
    from pulsar_txn_cli.pipeline import remote

    found = remote.expand(spark, list(urls), fmt)
    # the --log check reads a file's first entry, which only Spark can here: the report is checked after
    inputs.check_inputs([f for f in found if f.fmt != "parquet"], managed_ledger, forced_log, force_log=True)
    return [*files, *found]


def describe_decoders(decoders: Counter) -> str:
    return "executors decoded with: " + "; ".join(
        f"{name} ({n} task{'s' if n != 1 else ''})" for name, n in sorted(decoders.items())
    )


class watch:
    """Progress of a Spark job: the tasks of its running stages, polled from Spark's status
    tracker twice a second (the JVM reports nothing on its own without its console bar)."""

    def __init__(self, spark, progress):
        import threading

        self.tracker, self.progress = spark.sparkContext.statusTracker(), progress
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._poll, daemon=True) if progress is not None else None

    def __enter__(self):
        if self.thread is not None:
            self.thread.start()
        return self

    def _poll(self):
        while not self.stop.wait(0.5):
            try:
                stages = [self.tracker.getStageInfo(i) for i in self.tracker.getActiveStageIds()]
            except Exception:  # the context stopping under us: the last poll has no answer
                return
            stages = [s for s in stages if s is not None]
            if stages:
                self.progress.update(
                    total=sum(s.numTasks for s in stages), completed=sum(s.numCompletedTasks for s in stages)
                )

    def __exit__(self, *exc):
        if self.thread is not None:
            self.stop.set()
            self.thread.join()


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point: spark_job.py INPUT... --out result.json."""
    import orjson

    parser = argparse.ArgumentParser(prog="spark_job.py", description="pulsar-txn ledger analytics on Spark")
    parser.add_argument("inputs", nargs="+", help="dump files, directories or globs (JSONL, Parquet, readledger text)")
    parser.add_argument("--out", required=True, help="where to write the JSON report")
    parser.add_argument("--format", default="auto", choices=inputs.FORMATS)
    parser.add_argument("--managed-ledger", help="managed-ledger name for readledger text")
    parser.add_argument("--log", choices=("tc", "pending-ack"), help="force the log kind")
    parser.add_argument(
        "--pure-python",
        action="store_true",
        help="ship no native scanner: a cluster's executors decode with the pure-Python path",
    )
    args = parser.parse_args(argv)
    from pyspark.sql import SparkSession

    from pulsar_txn_cli.pipeline import remote

    names, urls = remote.split(args.inputs)
    files = inputs.expand(names, args.format) if names else []
    inputs.check_inputs(files, args.managed_ledger, args.log)
    SparkSession.builder.appName("pulsar-txn analyze").getOrCreate()  # spark-submit's settings
    session = Session(ship_native=not args.pure_python)
    decoders = Counter()
    with session as spark:
        if session.shipment is not None:
            print(session.shipment.describe(), file=sys.stderr)
        files = with_urls(spark, files, urls, args.format, args.managed_ledger, args.log)
        report = run(
            spark,
            files,
            managed_ledger=args.managed_ledger,
            forced_log=args.log,
            shipment=session.shipment,
            decoders=decoders,
        )
    print(describe_decoders(decoders), file=sys.stderr)
    with open(args.out, "wb") as out:
        out.write(orjson.dumps(report, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    totals = report["totals"]
    print(
        f"analyzed {totals['entries']} entries ({totals['records']} records) of {totals['managedLedgers']} "
        f"managed ledgers into {args.out}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
