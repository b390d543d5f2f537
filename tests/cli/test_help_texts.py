"""Every command's --help at 80 columns: whole option names, no `<bool>` on flags, no doubled
defaults, choices shown, and engine commands without the cluster options they refuse."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
from typer.main import get_command

from pulsar_txn_cli.cli.app import app
from pulsar_txn_cli.cli.common import TARGET_PANEL

WIDTH = 80
# The cluster's options (the root's target options but --engine-dir): an engine command that
# refuses a cluster must not offer them.
CLUSTER_OPTIONS = [
    p.opts[0]
    for p in get_command(app).params
    if getattr(p, "rich_help_panel", None) == TARGET_PANEL and p.opts[0] != "--engine-dir"
]


def _commands(command=None, path=()):
    """(path, click command) of every command and group, depth first."""
    command = command or get_command(app)
    yield path, command
    for name, sub in getattr(command, "commands", {}).items():
        yield from _commands(sub, (*path, name))


COMMANDS = list(_commands())


def _help(cli, path) -> str:
    result = cli([*path, "--help"], env={"COLUMNS": str(WIDTH)})
    assert result.exit_code == 0, result.stderr
    return result.stdout


def _option_names(command) -> list[str]:
    return [name for p in command.params if p.param_type_name == "option" for name in (*p.opts, *p.secondary_opts)]


@pytest.mark.parametrize("path,command", COMMANDS, ids=[" ".join(p) or "pulsar-txn" for p, _ in COMMANDS])
def test_help_reads_well_at_80_columns(cli, path, command):
    text = _help(cli, path)
    too_wide = [line for line in text.splitlines() if len(line) > WIDTH]
    assert not too_wide, too_wide
    assert "<bool>" not in text and "<list[" not in text  # Typer's Python types
    assert "…" not in text  # a name or a text cut to fit a column
    for name in _option_names(command):
        assert re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text), f"{name} is not shown whole"
    flat = " ".join(text.split())
    doubled = re.findall(r"\(default[^)]*\)\.?\s+\[default: [^\]]*\]", flat)
    assert not doubled, doubled


def test_help_lists_every_command_with_its_whole_first_sentence(cli):
    flat = " ".join(_help(cli, []).split())
    # click's own listing cuts it to "Stats of the transaction..."
    assert (
        "coordinator-stats Stats of the transaction coordinators (state, sequence id, low water mark, recover times)."
        in flat
    )


@pytest.mark.parametrize(
    "path,command",
    [(p, c) for p, c in COMMANDS if p[:1] == ("engine",) and not hasattr(c, "commands")],
    ids=lambda v: " ".join(v) if isinstance(v, tuple) else "",
)
def test_engine_commands_list_no_cluster_options(cli, path, command):
    text = _help(cli, path).partition("Target options:")[2]
    assert "--engine-dir" in text
    offered = [name for name in CLUSTER_OPTIONS if re.search(rf"(?<![\w-]){re.escape(name)}(?![\w-])", text)]
    # `engine simulate` and `engine advance` can act on an `engine serve`: the URL and the request timeout only.
    served = path in (("engine", "simulate"), ("engine", "advance"))
    assert offered == (["--admin-url", "--request-timeout"] if served else [])


CHOICES = {
    ("analyze", "--engine"): ["auto", "local", "spark"],
    ("analyze", "--format"): ["auto", "jsonl", "parquet", "readledger"],
    ("analyze", "--log"): ["tc", "pending-ack"],
    ("engine dump", "--log"): ["tc", "pending-ack", "all", "any"],
}


@pytest.mark.parametrize("where", list(CHOICES), ids=" ".join)
def test_choices_are_shown_and_completed(cli, where):
    path, option = where
    choices = CHOICES[where]
    assert f"{option} <{'|'.join(choices)}>" in _help(cli, path.split())
    env = {**os.environ, "_PULSAR_TXN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": f"pulsar-txn {path} {option} "}
    asked = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli"], env=env, capture_output=True, text=True, timeout=120
    )
    assert asked.returncode == 0, asked.stderr
    assert re.findall(r'"([^"]+)"', asked.stdout) == choices, asked.stdout


def test_a_value_outside_the_choices_is_a_usage_error(cli, tmp_path):
    result = cli(["analyze", str(tmp_path), "--engine", "flink"])
    assert result.exit_code == 2
    assert "--engine" in result.stderr and "'flink' is not one of 'auto', 'local', 'spark'" in result.stderr


# -- options name their values, usage lines read plainly ---------------------------------------------


@pytest.mark.parametrize(("path", "command"), COMMANDS, ids=lambda v: " ".join(v) if isinstance(v, tuple) else "")
def test_metavars_name_what_each_value_is_and_usage_lines_read_plainly(cli, path, command):
    text = _help(cli, path)
    assert "<str>" not in text and "<int range>" not in text, text  # URL, DIR, FILE, PORT...
    usage = text.split("\n\n")[0]
    for odd in ("[[", "]...]...", "{", "}"):
        assert odd not in usage, usage


def test_command_lists_do_not_cut_a_summary_after_e_g(cli):
    for path in ([], ["engine"], ["downgrade"], ["state"]):
        text = _help(cli, path)
        listed = " ".join(text.split("Commands:")[-1].split())
        for name in ("abort-transaction", "completion"):
            if name in listed:
                assert re.search(rf"{name} .*?e\.g\. \S", listed), listed


def test_summaries_keep_their_words_after_e_g():
    from pulsar_txn_cli.cli.helptext import first_sentence

    root = get_command(app)
    for name in ("abort-transaction", "completion"):
        summary = first_sentence(root.commands[name].help)
        assert "e.g. " in summary and not summary.endswith("e.g."), summary


def test_a_wrong_choice_is_one_plain_sentence(cli):
    result = cli(["completion", "tcsh"])
    assert result.exit_code == 2
    assert "Value error" not in result.stderr
    assert (
        result.stderr.splitlines()[0] == "error: Invalid value for 'shell': 'tcsh' is not one of 'bash', 'zsh', 'fish'."
    )


def test_every_concurrency_option_has_one_bound():
    bounds = {
        (" ".join(path), p.type.max)
        for path, command in COMMANDS
        for p in getattr(command, "params", [])
        if "--concurrency" in getattr(p, "opts", []) and "Admin calls" in (p.help or "")
    }  # (engine simulate's transactions in flight and collect's shells are other things)
    assert len(bounds) > 3 and {m for _, m in bounds} == {256}, sorted(bounds)
