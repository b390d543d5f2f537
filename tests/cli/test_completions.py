"""completions/: not stale, and they really complete (bash runs the checked-in script)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
COMPLETIONS = ROOT / "completions"
BIN = Path(sys.executable).parent


def test_checked_in_completions_are_not_stale(tmp_path):
    result = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_completions.py"), str(tmp_path)], capture_output=True, text=True
    )
    assert result.returncode == 0, result.stderr
    fresh = sorted(p.name for p in tmp_path.iterdir())
    assert fresh == ["_pulsar-txn", "pulsar-txn.bash", "pulsar-txn.fish"]
    stale = [
        name
        for name in fresh
        if not (COMPLETIONS / name).exists() or (COMPLETIONS / name).read_text() != (tmp_path / name).read_text()
    ]
    assert not stale, f"completions/{stale} are stale; run: .venv/bin/python scripts/gen_completions.py"


def _ask(shell_env: dict) -> str:
    """What pulsar-txn answers a shell's completion request (a real process, as a shell runs it)."""
    env = {**os.environ, **shell_env}
    result = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli"], env=env, capture_output=True, text=True, timeout=120
    )
    assert result.returncode == 0, result.stderr
    return result.stdout


def test_zsh_and_fish_requests_are_answered():
    zsh = _ask({"_PULSAR_TXN_COMPLETE": "complete_zsh", "_TYPER_COMPLETE_ARGS": "pulsar-txn decode --format "})
    assert all(f'"{choice}"' in zsh for choice in ("auto", "raw", "hex", "base64", "readledger", "jsonl"))
    fish = _ask(
        {
            "_PULSAR_TXN_COMPLETE": "complete_fish",
            "_TYPER_COMPLETE_FISH_ACTION": "get-args",
            "_TYPER_COMPLETE_ARGS": "pulsar-txn decode --st",
        }
    )
    assert fish.startswith("--strict\t")
    # fish reads one candidate a line: long help texts must not wrap onto lines of their own.
    every = _ask(
        {
            "_PULSAR_TXN_COMPLETE": "complete_fish",
            "_TYPER_COMPLETE_FISH_ACTION": "get-args",
            "_TYPER_COMPLETE_ARGS": "pulsar-txn decode --",
        }
    )
    lines = every.splitlines()
    assert "--format" in [line.split("\t")[0] for line in lines]
    assert all(line.startswith("-") for line in lines), [line for line in lines if not line.startswith("-")]


def test_bash_script_completes_commands_options_and_choices():
    script = f"""
        set -e
        export PATH={BIN}:$PATH
        source {COMPLETIONS / "pulsar-txn.bash"}
        ask() {{ COMP_WORDS=("$@"); COMP_CWORD=$(( $# - 1 )); _pulsar_txn_completion pulsar-txn; echo "${{COMPREPLY[*]}}"; }}
        ask pulsar-txn dec
        ask pulsar-txn decode --lo
        ask pulsar-txn decode --log ''
        complete -p pulsar-txn
    """
    if not (BIN / "pulsar-txn").exists():
        pytest.fail("the pulsar-txn console script is not installed next to this Python: ./dev setup installs it")
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    assert lines[0] == "decode"
    assert lines[1] == "--log"
    assert lines[2].split() == ["auto", "tc", "pending-ack"]
    assert lines[3] == "complete -o default -F _pulsar_txn_completion pulsar-txn"


@pytest.mark.parametrize("shell", ["bash", "zsh", "fish"])
def test_the_completion_command_prints_the_checked_in_script(cli, shell):
    """Users installed from a wheel have no completions/ folder: the command prints the same script."""
    from pulsar_txn_cli.completion import SHELLS

    result = cli(["completion", shell])
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (COMPLETIONS / SHELLS[shell][0]).read_text()


def test_pulsarctl_runs_the_tool_as_its_txn_plugin():
    """pulsarctl runs an executable named `pulsarctl-txn` on PATH for `pulsarctl txn ...`."""
    plugin = BIN / "pulsarctl-txn"
    assert plugin.exists(), "the pulsarctl-txn entry point is not installed (pip install -e . again)"
    result = subprocess.run([str(plugin), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("pulsar-txn "), result.stderr


@pytest.mark.tools
def test_fish_completes_file_paths_for_decode_and_analyze(tmp_path):
    """In a real fish (Debian's package), the checked-in script offers files after decode and analyze."""
    import shutil

    fish = shutil.which("fish")
    if fish is None:
        pytest.fail(
            "fish is not installed: `./dev setup` installs it (its Chromium and fish step, Debian's package)",
            pytrace=False,
        )
    (tmp_path / "dump-one.jsonl").write_text("{}\n")
    for command in ("decode", "analyze", "collect --out"):
        script = (
            f"set -x PATH {BIN} $PATH; source {COMPLETIONS / 'pulsar-txn.fish'}; "
            f"cd {tmp_path}; complete -C 'pulsar-txn {command} dump-'"
        )
        result = subprocess.run([fish, "--no-config", "-c", script], capture_output=True, text=True, timeout=120)
        assert "dump-one.jsonl" in result.stdout, (command, result.stdout, result.stderr)
