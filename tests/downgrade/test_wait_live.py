"""`downgrade check --wait`: a live table of the held logs on a terminal, plain lines when piped.

The terminal is a real pseudo-terminal (os.openpty) on the command's stderr."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from tests.exporter import scenario

WAIT = ["downgrade", "check", "--wait", "--interval", "1", "--timeout", "1.5", "-o", "json"]


@pytest.fixture
def engine_dir(cli, monkeypatch, tmp_path):
    scenario.isolate(monkeypatch, tmp_path)
    return scenario.downgrade_in_progress(cli, tmp_path / "engine")


def run(args, stderr_tty: bool) -> tuple[int, str, str]:
    command = [sys.executable, "-m", "pulsar_txn_cli", *map(str, args)]
    env = {**os.environ, "COLUMNS": "120", "LINES": "40", "TERM": "xterm"}
    if not stderr_tty:
        done = subprocess.run(command, capture_output=True, text=True, timeout=120, env=env)
        return done.returncode, done.stdout, done.stderr
    leader, follower = os.openpty()
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=follower, env=env)
    os.close(follower)
    chunks = []
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: every writer closed the terminal
            break
        if not chunk:
            break
        chunks.append(chunk)
    out = proc.stdout.read().decode()
    os.close(leader)
    return proc.wait(60), out, b"".join(chunks).decode(errors="replace")


def test_a_terminal_gets_a_live_table_of_the_held_logs(engine_dir):
    code, out, err = run([*WAIT, "--engine-dir", engine_dir], stderr_tty=True)
    assert code == 5
    assert "Logs holding the downgrade back" in err and "coordinator 0" in err and "ledger-not-rolled" in err
    assert "\x1b[1A" in err or "\x1b[2K" in err  # redrawn in place
    assert "check 1: WAIT" in err  # the caption under the table
    assert '"verdict": "WAIT"' in out  # stdout keeps the data, untouched by the view


def test_a_pipe_gets_plain_lines(engine_dir):
    code, out, err = run([*WAIT, "--engine-dir", engine_dir], stderr_tty=False)
    assert code == 5
    assert "\x1b[" not in err and "Logs holding the downgrade back" not in err
    lines = [line for line in err.splitlines() if line.startswith("check ")]
    assert lines and all(line.endswith("; next check in 1s") for line in lines)
    assert lines[0].startswith("check 1: WAIT, 0 of ")
