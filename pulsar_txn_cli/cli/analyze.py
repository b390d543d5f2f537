"""`pulsar-txn analyze`: ledger analytics on Spark or in one local process."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated, Literal, Optional

import typer

from pulsar_txn_cli.cli.common import SparkConfOption, command
from pulsar_txn_cli.cli.common import spark_conf as parse_spark_conf
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ExitCode, UsageError
from pulsar_txn_cli.pipeline import remote
from pulsar_txn_cli.output.units import counted

BAR_WIDTH = 30


def register(app: typer.Typer) -> None:
    command(app, "analyze")(analyze)


def analyze(
    inputs: Annotated[
        list[str],
        typer.Argument(
            metavar="INPUT",
            help="Dump files, directories or globs: JSONL dumps, Parquet, readledger hex text; also s3a:// or hdfs:// URLs (Spark reads them).",
            show_default=False,
        ),
    ],
    engine: Annotated[
        Literal["auto", "local", "spark"],
        typer.Option(
            "--engine",
            help="spark, local, or auto (spark when --spark-master is given or an input is an s3a:// or hdfs:// URL, else local).",
        ),
    ] = "auto",
    spark_master: Annotated[
        Optional[str],
        typer.Option(
            "--spark-master",
            metavar="URL",
            help="Spark master URL, e.g. spark://host:7077 or local[4] (--engine spark without it: local[*]). A cluster's executors need only PySpark, pyarrow and pandas: the tool ships its own code.",
            show_default=False,
        ),
    ] = None,
    spark_conf: SparkConfOption = None,
    fmt: Annotated[
        Literal["auto", "jsonl", "parquet", "readledger"],
        typer.Option("--format", "-f", help="Input format: auto, jsonl, parquet or readledger."),
    ] = "auto",
    managed_ledger: Annotated[
        Optional[str],
        typer.Option(
            "--managed-ledger",
            "-m",
            help="Managed-ledger name of readledger input (e.g. pulsar/system/persistent/__transaction_log_0).",
            show_default=False,
        ),
    ] = None,
    log: Annotated[
        Optional[Literal["tc", "pending-ack"]],
        typer.Option(
            "--log",
            help="Force the log kind (tc or pending-ack) instead of telling it from the managed-ledger name.",
            show_default=False,
        ),
    ] = None,
    force_log: Annotated[
        bool,
        typer.Option("--force-log", help="Keep --log even where the input's managed-ledger name says the other log."),
    ] = False,
    dump_parquet: Annotated[
        Optional[str],
        typer.Option(
            "--dump-parquet",
            metavar="OUT",
            help="Convert the (local) inputs to one Parquet file and stop; OUT may be an s3a:// URL.",
            show_default=False,
        ),
    ] = None,
    html: Annotated[
        Optional[Path],
        typer.Option("--html", metavar="REPORT", help="Also write a self-contained HTML report.", show_default=False),
    ] = None,
) -> None:
    """Batching figures per managed ledger and ledger: records and bytes per entry, operations,
    transactions, entries saved, the last ledger with batched entries, decode failures.

    Exits 3 (after the report) when some entries could not be decoded.
    """
    from pulsar_txn_cli import pipeline
    from pulsar_txn_cli.output import Result, emit
    from pulsar_txn_cli.pipeline import inputs as inputs_module

    env = current()
    conf = parse_spark_conf(spark_conf)
    if html is not None:
        _check_html(html)  # before the work, not after it
    local_inputs, urls = remote.split(inputs)
    files = inputs_module.expand(local_inputs, fmt) if local_inputs else []
    inputs_module.check_inputs(files, managed_ledger, log, force_log)
    if dump_parquet is not None:
        if urls:
            raise UsageError(f"--dump-parquet converts local inputs; {urls[0]} is a URL (analyze it directly instead)")
        _dump_parquet(env, files, managed_ledger, remote.local_path(dump_parquet), spark_master, conf)
        return
    chosen = pipeline.choose_engine(engine, spark_master, bool(urls))
    if chosen == "spark":
        from pulsar_txn_cli.pipeline import spark_job

        spark_job.require_spark()
        master = spark_master or spark_job.DEFAULT_MASTER
        conf = _connector(env, urls, conf)
        env.info(f"engine: spark ({master}), {counted(len(files) + len(urls), 'input')}")
        with env.progress(None, "analyze on Spark: tasks", unit="tasks") as progress:
            report = spark_job.analyze(
                files,
                master=master,
                conf=conf,
                managed_ledger=managed_ledger,
                forced_log=log,
                progress=progress,
                tell=env.info,
                urls=urls,
                fmt=fmt,
            )
    else:
        if spark_conf or spark_master:
            env.warn("--spark-master and --spark-conf are ignored by --engine local")
        from pulsar_txn_cli.pipeline import facts, local

        decoding = (
            "native scanner"
            if facts.NATIVE is not None
            else "pure-Python decoding: the native scanner is not built, see docs/analyze.md"
        )
        env.info(f"engine: local ({decoding}), {counted(len(files), 'input file')}")
        with env.progress(None, "analyze", unit="bytes") as progress:
            report = local.run(files, managed_ledger=managed_ledger, forced_log=log, progress=progress)
    inputs_module.require_entries(report)
    inputs_module.contradicted(report, log, force_log)
    if html is not None:
        from pulsar_txn_cli.pipeline.html_report import context_of, render

        context = context_of(inputs, engine=f"spark ({spark_master})" if chosen == "spark" else "local")
        try:
            html.parent.mkdir(parents=True, exist_ok=True)
            html.write_text(render(report, context), encoding="utf-8")
        except OSError as exc:
            raise UsageError(f"cannot write the HTML report {html}: {exc.strerror or exc}") from None
        env.info(f"wrote {html}")
    emit(Result(data=report, records=_records(report), tables=lambda: tables(report)), env)
    errors = report["totals"]["decodeErrors"]
    if errors:
        env.info(f"{errors} of {report['totals']['entries']} entries could not be decoded (see decodeErrorSamples)")
        raise typer.Exit(int(ExitCode.DATA))


def _dump_parquet(env, files, managed_ledger, out: str, spark_master, conf) -> None:
    """One Parquet file; written locally, then moved to a URL by Hadoop's file system in Spark."""
    import tempfile

    from pulsar_txn_cli.pipeline import inputs

    def raw():
        for f in files:
            yield from inputs.read(f, managed_ledger)

    if not remote.is_url(out):
        count = inputs.write_parquet(raw(), out)
    else:
        from pulsar_txn_cli.pipeline import spark_job

        spark_job.require_spark()
        with tempfile.TemporaryDirectory(prefix="pulsar-txn-parquet-") as tmp:
            local = os.path.join(tmp, "dump.parquet")
            count = inputs.write_parquet(raw(), local)
            with spark_job.Session(
                spark_master or spark_job.DEFAULT_MASTER, _connector(env, [out], conf), ship=False
            ) as spark:
                remote.upload(spark, local, out)
    env.info(f"wrote {counted(count, 'entry', 'entries')} from {counted(len(files), 'input file')} to {out}")


def _connector(env, urls, conf: dict) -> dict:
    conf, said = remote.with_connector(urls, conf)
    if said:
        env.info(said)
    return conf


def _records(report: dict):
    for ml in report["managedLedgers"]:
        yield {"managedLedger": ml}
    yield {"totals": report["totals"]}


# ---------------------------------------------------------------- table mode


def tables(report: dict):
    from pulsar_txn_cli.output import Table

    managed = report["managedLedgers"]
    totals = report["totals"]
    out = [
        Table(
            [
                ("name", "managed ledger"),
                ("log", "log"),
                ("entries", "entries"),
                ("batchedEntries", "batched"),
                ("unbatchedEntries", "unbatched"),
                ("records", "records"),
                ("entriesSaved", "saved"),
                ("bytes", "bytes"),
                ("transactions", "txns"),
                ("lastBatchedLedgerId", "last batched ledger"),
                ("decodeErrors", "errors"),
            ],
            [{**m, "transactions": _txns(m)} for m in managed]
            + [{**totals, "name": "TOTAL", "log": "", "transactions": _txns(totals)}],
            title="Managed ledgers",
        ),
        Table(
            [
                ("managedLedger", "managed ledger"),
                ("ledgerId", "ledger"),
                ("entries", "entries"),
                ("batchedEntries", "batched"),
                ("records", "records"),
                ("bytes", "bytes"),
                ("entriesSaved", "saved"),
                ("decodeErrors", "errors"),
            ],
            [{"managedLedger": m["name"], **ledger} for m in managed for ledger in m["ledgers"]],
            title="Ledgers",
        ),
        Table(
            [("op", "operation"), ("count", "records")],
            [{"op": k, "count": v} for k, v in totals["ops"].items() if v],
            title="Operations (all managed ledgers)",
        ),
        histogram_table(totals["recordsPerEntry"], "Records per entry (all managed ledgers)"),
        histogram_table(totals["entrySizeBytes"], "Entry size in bytes (all managed ledgers)"),
    ]
    samples = [{"managedLedger": m["name"], **s} for m in managed for s in m["decodeErrorSamples"]]
    if samples:
        out.append(
            Table(
                [("managedLedger", "managed ledger"), ("position", "position"), ("error", "error")],
                samples,
                title="Decode failures (first few per managed ledger)",
            )
        )
    return out


def _txns(summary: dict) -> str:
    return str(summary["transactions"]) if summary["transactionsExact"] else f"~{summary['transactions']}"


def histogram_table(histogram: dict, title: str):
    from pulsar_txn_cli.output import Table

    return Table(
        [("le", "<="), ("count", "entries"), ("bar", "")],
        [
            {
                "le": b["le"],
                "count": b["count"],
                "bar": bar(b["count"], max((x["count"] for x in histogram["buckets"]), default=0)),
            }
            for b in histogram["buckets"]
        ],
        title=f"{title}, mean {histogram['mean']}",
    )


def bar(value: int, peak: int, width: int = BAR_WIDTH) -> str:
    """A terminal bar; a non-zero value always shows at least a sliver."""
    if not value or not peak:
        return ""
    eighths = max(1, round(value * width * 8 / peak))
    return "█" * (eighths // 8) + ("", "▏", "▎", "▍", "▌", "▋", "▊", "▉")[eighths % 8]


def _check_html(path) -> None:
    """--html names a local file that can be written: a URL, a directory or an unwritable place is a usage error."""
    if remote.is_url(str(path)):
        raise UsageError(f"--html writes a local file, not {path}: the report is for people, open it where you are")
    if path.is_dir():
        raise UsageError(f"--html {path} is a directory; give a file name, e.g. {path / 'report.html'}")
    parent = next((p for p in [path.parent, *path.parent.parents] if p.exists()), None)
    if parent is not None and not parent.is_dir():
        raise UsageError(f"--html {path}: {parent} is a file, not a directory")
    if parent is not None and not os.access(parent, os.W_OK):
        raise UsageError(f"--html {path}: cannot write in {parent}")
