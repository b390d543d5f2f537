"""Wires the command groups and the global options; nothing else lives here."""

from __future__ import annotations

import typer

from pulsar_txn_cli import __version__
from pulsar_txn_cli.cli import (
    analyze,
    batchlog,
    collect,
    common,
    completion,
    decode,
    demo,
    doctor,
    downgrade,
    engine,
    exporter,
    hanging,
    helptext,
    metrics,
    nack,
    state,
    stuck_readers,
    transactions,
)

app = typer.Typer(
    cls=helptext.Group,
    name="pulsar-txn",
    help=(
        "Operate Apache Pulsar transactions and PIP-160 batched transaction logs, on a real cluster "
        "(--admin-url) or on the embedded engine (the default target)."
    ),
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _version(value: bool) -> None:
    if value:
        print(f"pulsar-txn {__version__}")
        raise typer.Exit()


def root(
    version: bool = typer.Option(
        False, "-V", "--version", callback=_version, is_eager=True, help="Print the version and exit."
    ),
) -> None:
    """Global options given before the subcommand apply to it."""


common.root_callback(app, root)

# In the order an operator meets them (the help lists commands in registration order).
for group in (
    demo,
    batchlog,
    transactions,
    stuck_readers,
    doctor,
    hanging,
    metrics,
    exporter,
    downgrade,
    decode,
    collect,
    analyze,
    engine,
    nack,
    state,
    completion,
):
    group.register(app)
