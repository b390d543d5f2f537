"""Ledger analytics (`pulsar-txn analyze`): one analysis, two runners.

- facts.py:     one entry -> one tuple of facts (the shared decode step);
- _scan.c:      facts.py's fast path, a strict native scanner (optional C extension, setup.py);
- analysis.py:  facts -> per-ledger counters (and merges of them) -> the report's JSON (build_report);
- distinct.py:  distinct transactions, exact up to a limit then HyperLogLog, same in both runners;
- inputs.py:    JSONL dumps, Parquet, readledger text; directories and globs; Parquet output;
- local.py:     the streaming single-process runner;
- ship.py:      what a Spark cluster's executors need of the tool, shipped at run time;
- spark_job.py: the PySpark runner (mapInArrow decoding, a merge per managed ledger), also a
                spark-submit script; spark_tasks.py: what its executors run;
- html_report.py: the self-contained HTML report.

Library entry points (no printing, no exits): `analyze(...)` and `batched_ledgers(...)`.
"""

from __future__ import annotations

ENGINES = ("auto", "spark", "local")


def choose_engine(engine: str, spark_master: str | None = None, urls: bool = False) -> str:
    """auto -> spark when a Spark master is given or an input is a Hadoop URL (s3a://, which only
    Spark's JVM reads), else local: one process decodes a few million entries in the time a Spark
    session takes to start, and an operator who has a cluster says so."""
    from pulsar_txn_cli.errors import UsageError

    if engine not in ENGINES:
        raise UsageError(f"--engine must be one of {', '.join(ENGINES)}, not {engine!r}")
    if engine == "local" and urls:
        raise UsageError(
            "s3a:// and hdfs:// inputs are read by Spark (Hadoop's connectors run in its JVM): "
            "use --engine spark or auto, not --engine local"
        )
    if engine != "auto":
        return engine
    return "spark" if spark_master or urls else "local"


def analyze(
    paths,
    *,
    engine="local",
    fmt="auto",
    managed_ledger=None,
    log=None,
    spark_master=None,
    spark_conf=None,
    progress=None,
) -> dict:
    """The analysis report (the JSON of `analyze -o json`) of dump files, directories or globs."""
    from pulsar_txn_cli.pipeline import inputs

    files = inputs.expand([str(p) for p in paths], fmt)
    inputs.check_inputs(files, managed_ledger, log)
    if choose_engine(engine, spark_master) == "spark":
        from pulsar_txn_cli.pipeline import spark_job

        report = spark_job.analyze(
            files,
            master=spark_master or spark_job.DEFAULT_MASTER,
            conf=spark_conf,
            managed_ledger=managed_ledger,
            forced_log=log,
        )
    else:
        from pulsar_txn_cli.pipeline import local

        report = local.run(files, managed_ledger=managed_ledger, forced_log=log, progress=progress)
    inputs.require_entries(report)
    return report


def batched_ledgers(paths, *, engine="local", **options) -> dict[str, dict[int, int]]:
    """{managedLedger: {ledgerId: batchedEntries}} for every ledger that still holds batched
    entries (for `downgrade check --verify-entries`). Managed ledgers without any are absent."""
    from pulsar_txn_cli.pipeline.analysis import batched_ledgers as from_report

    return {ml: ledgers for ml, ledgers in from_report(analyze(paths, engine=engine, **options)).items() if ledgers}
