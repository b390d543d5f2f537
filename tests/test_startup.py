"""Start-up: `pulsar-txn --help` builds none of the subcommands it lists, and
the lazily built tree (cli/lazy.py) prints every help exactly as typer's eager one does."""

from __future__ import annotations

import pytest
from typer.main import get_command
from typer.testing import CliRunner

from pulsar_txn_cli.cli.app import app
from pulsar_txn_cli.cli.lazy import LazyCommands, root_command

WIDTH = {"COLUMNS": "100", "TERMINAL_WIDTH": "100", "NO_COLOR": "1", "TERM": "dumb"}


def _paths(command, path=()):
    yield path
    for name, sub in getattr(command, "commands", {}).items():
        yield from _paths(sub, (*path, name))


PATHS = list(_paths(get_command(app)))


@pytest.mark.timeout(120)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "(root)")
def test_the_lazy_tree_prints_the_same_help(path, cli):
    eager = CliRunner().invoke(app, [*path, "--help"], prog_name="pulsar-txn", env=WIDTH, color=False)
    lazy = cli([*path, "--help"], env=WIDTH)
    assert eager.exit_code == lazy.exit_code == 0, lazy.stderr
    assert lazy.stdout == eager.output


def test_the_root_help_builds_no_subcommand():
    root = root_command(app)
    assert isinstance(root.commands, LazyCommands)
    ctx = root.make_context("pulsar-txn", ["--help"], resilient_parsing=True)
    text = root.get_help(ctx)
    assert "engine" in text and "downgrade" in text
    assert all(root.commands.summary(name) is not None for name in root.commands)
    assert not root.commands._built  # listed from names and docstrings only
    engine = root.commands["engine"]  # asked for: built, with its own subcommands lazy
    assert isinstance(engine.commands, LazyCommands) and "serve" in engine.commands


def test_the_lazy_tree_has_every_command_in_order():
    eager = get_command(app)

    def names(command):
        subs = getattr(command, "commands", None)
        return None if subs is None else [(name, names(subs[name])) for name in subs]

    assert names(root_command(app)) == names(eager)
