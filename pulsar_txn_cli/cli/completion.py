"""`pulsar-txn completion bash|zsh|fish`: print the shell's completion script (pulsarctl's convention)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current


class Shell(str, Enum):
    bash = "bash"
    zsh = "zsh"
    fish = "fish"


def register(app: typer.Typer) -> None:
    command(app, "completion")(completion)


def completion(
    shell: Annotated[Shell, typer.Argument(help="The shell: bash, zsh or fish.", show_default=False)],
) -> None:
    """Print the completion script for SHELL, e.g. `source <(pulsar-txn completion bash)`.

    Installed from a wheel, this is where completions come from; the script's header says where to put it.
    """
    from pulsar_txn_cli.completion import script

    current().stdout.write(script(shell.value))
