"""`pulsar-txn collect`: every transaction log of a cluster, from its bookies into dumps (JSONL or Parquet, local or s3a://)."""

from __future__ import annotations

from typing import Annotated, Literal, Optional

import typer

from pulsar_txn_cli.cli.common import SparkConfOption, command
from pulsar_txn_cli.cli.common import spark_conf as parse_spark_conf
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ExitCode
from pulsar_txn_cli.output.units import counted


# BookKeeper's shell and metadata service, as `collect` and `downgrade check --confirm-from-bookies` take them.
BookkeeperShellOpt = Annotated[
    Optional[str],
    typer.Option(
        "--bookkeeper-shell",
        metavar="PATH",
        help="A distribution's bin/bookkeeper (run as `PATH shell ...`).",
        show_default=False,
    ),
]
BookkeeperClasspathOpt = Annotated[
    Optional[str],
    typer.Option(
        "--bookkeeper-classpath",
        metavar="CLASSPATH",
        help="Or BookieShell's Java classpath (bookkeeper-server and log4j).",
        show_default=False,
    ),
]
MetadataServiceUriOpt = Annotated[
    Optional[str],
    typer.Option(
        "--metadata-service-uri",
        metavar="URI",
        help="BookKeeper's metadata service (default: from the brokers' configuration).",
        show_default=False,
    ),
]
LedgerTimeoutOpt = Annotated[
    float, typer.Option("--ledger-timeout", metavar="SECONDS", help="Give up on one ledger after this long.")
]


def register(app: typer.Typer) -> None:
    command(app, "collect", target=True)(collect)


def collect(
    out: Annotated[
        str,
        typer.Option(
            "--out",
            metavar="DIR|URL",
            help="Where the dumps (one file per ledger) and the manifest go: a directory, or an s3a:// or hdfs:// URL (written through a local Spark). A second run resumes.",
            show_default=False,
        ),
    ],
    fmt: Annotated[
        Literal["jsonl", "parquet"],
        typer.Option(
            "--format", "-f", help="Dump format: jsonl (the project's dump format) or parquet (needs pyarrow)."
        ),
    ] = "jsonl",
    bookkeeper_shell: BookkeeperShellOpt = None,
    bookkeeper_classpath: BookkeeperClasspathOpt = None,
    metadata_service_uri: MetadataServiceUriOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", "-c", help="Ledgers read at once (one shell each).")] = 4,
    ledger_timeout: LedgerTimeoutOpt = 600.0,
    spark_conf: SparkConfOption = None,
) -> None:
    """Read every transaction-coordinator log and pending-ack log of the cluster with BookKeeper's
    shell (readledger), in parallel, into dumps that `analyze` reads: JSONL (which `decode` reads
    too) or Parquet, in a directory or on object storage (s3a://).

    Exits 3 when some ledger or log could not be read (the rest is kept: run again to retry them).
    """
    from pulsar_txn_cli.collect import collect as run
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    admin = env.admin()
    with env.progress(None, "collect", unit="items") as progress:
        summary = run(
            admin,
            out,
            concurrency=concurrency,
            fmt=fmt,
            spark_conf=parse_spark_conf(spark_conf),
            metadata_uri=metadata_service_uri,
            progress=progress,
            note=env.info,
            shell_options={"script": bookkeeper_shell, "classpath": bookkeeper_classpath, "timeout": ledger_timeout},
        )
    rows = [{"what": k, "value": v} for k, v in summary.items() if k not in ("failed", "problems")]
    tables = [Table([("what", ""), ("value", "")], rows, title="Collected")]
    if summary["failed"]:
        tables.append(
            Table(
                [("managedLedger", "managed ledger"), ("ledgerId", "ledger"), ("error", "error")],
                summary["failed"],
                title="Ledgers not read",
            )
        )
    emit(Result(data=summary, tables=tables), env)
    for problem in summary["problems"]:
        env.warn(problem)
    missing = len(summary["failed"]) + len(summary["problems"])
    if missing:
        env.info(
            f"{counted(len(summary['failed']), 'ledger')} and {counted(len(summary['problems']), 'log')} could not be read; "
            "run the same command again to retry them"
        )
        raise typer.Exit(int(ExitCode.DATA))
    env.info(f"collected {summary['ledgers']} ledgers into {summary['out']}; next: pulsar-txn analyze {summary['out']}")
