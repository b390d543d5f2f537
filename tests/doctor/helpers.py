"""Shared steps of the doctor's fast suite: a sick engine, its clock moved, the printed fixes run."""

from __future__ import annotations

import shlex

TOPIC0 = "persistent://public/default/sim-topic-0"


def sick_engine(cli, directory, fault: str | None, *extra: str) -> None:
    """A fresh engine after a small seeded workload, made sick with --fault."""
    result = cli(["engine", "init", "--engine-dir", directory])
    assert result.exit_code == 0, result.stderr
    args = ["engine", "simulate", "--engine-dir", directory, "-n", "40", "--topics", "2", "--seed", "7", *extra]
    result = cli(args + (["--fault", fault] if fault else []))
    assert result.exit_code == 0, result.stderr


def advance(cli, directory, duration: str) -> None:
    """Let time pass on the engine (`engine advance`: timeouts, rollovers, snapshots, as a broker left alone)."""
    result = cli(["engine", "advance", duration, "--engine-dir", directory])
    assert result.exit_code == 0, result.stderr


def doctor(cli, directory, *args: str):
    result = cli(["doctor", "--engine-dir", directory, "-o", "json", *args])
    assert result.exit_code in (0, 5, 6), result.stderr
    return result.exit_code, result.json()


def run_fix(cli, command: str) -> None:
    """Run a printed fix exactly as printed (only the program name is dropped: the test runs it in process)."""
    words = shlex.split(command)
    assert words[0] == "pulsar-txn", command
    result = cli(words[1:])
    assert result.exit_code == 0, f"{command}: {result.stderr}"
