"""`pulsar-txn demo`: PIP-160's whole story on a fresh embedded engine, narrated step by step.

It calls the library (engine, admin layer, downgrade runner) in process, on one engine instance,
and leaves the engine directory in place so the user can try the commands on it.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current


def register(app: typer.Typer) -> None:
    command(app, "demo")(demo)


def demo(
    directory: Annotated[
        Optional[str],
        typer.Option(
            "--dir",
            metavar="DIR",
            show_default=False,
            help="A new directory for the demo's engine (also --engine-dir; default: a new temporary directory).",
        ),
    ] = None,
    coordinators: Annotated[int, typer.Option("--coordinators", min=1, max=64, help="Transaction coordinators.")] = 4,
    transactions: Annotated[
        int,
        typer.Option(
            "--transactions",
            min=10,
            max=100_000,
            help="Transactions per workload round (a drain round runs at least 60, and 4 per coordinator, "
            "so that every log rolls its ledger).",
        ),
    ] = 400,
) -> None:
    """Walk PIP-160 on a fresh embedded engine: enable batching, run a workload, see the entries
    saved, disable it, and follow the downgrade check from WAIT to SAFE."""
    from pulsar_txn_cli.downgrade.demo import DemoStory
    from pulsar_txn_cli.output import Result, emit

    env = current()
    directory = _directory(directory, env.target)
    say = env.info if env.output != "table" else (lambda line: print(line, file=env.stdout, flush=True))
    story = DemoStory(directory, coordinators=coordinators, transactions=transactions, say=say)
    summary = story.run()
    if env.output != "table":
        emit(Result(data=summary, records=[summary]), env)
    if summary.get("verdict") != "SAFE":  # the story did not end where it should: say so
        from pulsar_txn_cli.errors import ExitCode, Verdict

        raise Verdict(f"the demo's downgrade check ended at {summary.get('verdict')}, not SAFE", ExitCode.NOT_YET)


def _directory(directory: str | None, flags) -> str | None:
    """The demo builds an engine of its own: --engine-dir (before the command) names its directory as
    --dir does; a cluster's flags cannot apply, and ignoring them silently would mislead."""
    from pulsar_txn_cli.errors import UsageError

    for name, flag in (("admin_url", "--admin-url"), ("context", "--context")):
        if getattr(flags, name, None):
            raise UsageError(f"the demo runs on an embedded engine of its own; {flag} does not apply to it")
    given = getattr(flags, "engine_dir", None)
    if given and directory and given != directory:
        raise UsageError(f"--engine-dir {given} and --dir {directory} name two directories; give one")
    return directory or given
