"""`pulsar-txn state list|prune`: what the tool remembers on this machine, per target identity.

The records (batch-log changes, downgrade checkpoints) are keyed by what the target says it is
(admin/identity.py), not by the URL; these commands show and delete them without a connection,
except `prune --current`, which asks the selected target who it is.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli import helptext
from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.output.units import counted

COLUMNS = [
    ("identity", "identity"),
    ("kind", "record"),
    ("detail", "detail"),
    ("updatedAt", "updated"),
    ("file", "file"),
]


def register(app: typer.Typer) -> None:
    state = typer.Typer(
        cls=helptext.Group,
        help="What pulsar-txn remembers on this machine (batch-log changes, downgrade "
        "checkpoints, the audit of abort-hanging), keyed by each cluster's or engine's identity.",
        no_args_is_help=True,
    )
    command(state, "list")(list_records)
    command(state, "prune", target=True)(prune)
    app.add_typer(state, name="state")


def list_records() -> None:
    """Every record kept on this machine: whose (identity), what, when it was last updated, where."""
    from pulsar_txn_cli.target import remembered
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    rows = [remembered.public(r) for r in remembered.listing()]
    lines = [] if rows else [f"nothing remembered in {remembered.state_dir()}"]
    table = [Table(COLUMNS, _shown(rows), "Remembered")] if rows else []
    emit(Result(data=rows, records=rows, tables=table, lines=lines), env)


def _shown(rows: list[dict]) -> list[dict]:
    """Table rows: the moments as text (JSON keeps epoch ms)."""
    from pulsar_txn_cli.output.units import iso_seconds

    return [{**r, "updatedAt": iso_seconds(r["updatedAt"])} for r in rows]


def prune(
    identities: Annotated[
        Optional[list[str]],
        typer.Argument(
            metavar="IDENTITY", show_default=False, help="Forget these identities (as `state list` shows them)."
        ),
    ] = None,
    older_than: Annotated[
        Optional[float],
        typer.Option(
            "--older-than",
            metavar="DAYS",
            min=0.0,
            show_default=False,
            help="Forget records not updated for DAYS days.",
        ),
    ] = None,
    this_target: Annotated[
        bool,
        typer.Option(
            "--current", help="Forget the records of the selected target (--admin-url/--engine-dir; asks it who it is)."
        ),
    ] = False,
    everything: Annotated[bool, typer.Option("--all", help="Forget every record.")] = False,
    audits: Annotated[
        bool,
        typer.Option(
            "--include-audit", help="Forget the audit of abort-hanging too (without it, a chosen audit is kept)."
        ),
    ] = False,
) -> None:
    """Forget records: a forgotten batch-log change makes the stat say `unknown` until the stores
    reopen; a forgotten downgrade checkpoint is taken again by the next check, which can only
    delay SAFE, never hasten it. The audit of abort-hanging is kept unless --include-audit names it."""
    from pulsar_txn_cli.target import remembered
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    chosen = list(identities or [])
    if not (chosen or older_than is not None or this_target or everything):
        raise UsageError(
            "say what to forget: IDENTITY..., --current, --older-than DAYS or --all "
            "(`pulsar-txn state list` shows what is remembered)"
        )
    known = {r["identity"] for r in remembered.listing()}
    unknown = [i for i in chosen if i not in known]
    if unknown:  # a typo must not look like "forgot 0 records"
        raise UsageError(f"no record of {', '.join(map(repr, unknown))} on this machine; {_known(unknown, known)}")
    if this_target:
        chosen.append(env.admin().identity())
    forgotten, kept = remembered.prune(chosen, None if older_than is None else older_than * 86400, everything, audits)
    gone = [remembered.public(r) for r in forgotten]
    env.info(f"forgot {counted(len(gone), 'record')}")
    for row in kept:
        env.info(kept_audit(row))
    emit(Result(data=gone, records=gone, tables=[Table(COLUMNS, _shown(gone), "Forgotten")] if gone else []), env)


def kept_audit(row: dict) -> str:
    """The line that says an abort audit was kept, and how to forget it."""
    import shlex

    return (
        f"kept the abort audit {row['file']} ({row['detail']}): "
        f"`pulsar-txn state prune {shlex.quote(row['identity'])} --include-audit` forgets it"
    )


def _known(unknown: list[str], known: set[str]) -> str:
    """What is known, in one sentence however many: the closest identities, else a few, and how many."""
    import difflib

    if not known:
        return "nothing is remembered"
    close = [m for u in unknown for m in difflib.get_close_matches(u, sorted(known), n=3, cutoff=0.6)]
    shown = list(dict.fromkeys(close)) or sorted(known)[:3]
    if len(known) > len(shown):
        where = f" (of {len(known)} known; `pulsar-txn state list` shows them all)"
    else:
        where = " (`pulsar-txn state list` shows them)"
    return f"{'did you mean' if close else 'known'}: {', '.join(map(repr, shown))}{where}"
