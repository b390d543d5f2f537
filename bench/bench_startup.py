"""Start-up: `pulsar-txn --help`'s wall time, what importing the CLI costs, and what the heavy modules
it keeps out of `--help` would add.

    .venv/bin/python -m bench startup [--runs=N]

First `pulsar-txn --help` as a real process (the console script next to this Python), wall time,
best and median of N runs, and its CPU time (target: <= 150 ms wall on a quiet host), beside the
floor of the same interpreter doing nothing (`python -c pass`, site and the editable install's
finder included). Every run has the bytecode cache, as an installed package does
(PYTHONDONTWRITEBYTECODE is dropped from the runs' environment).
Then the CPU time of a command built, parsed and run up to its first request (coordinator-stats against
a closed port), best of N. Then each figure is the best of N (default 10) fresh interpreters run with
`python -X importtime`:
  the CLI      the cumulative import time of pulsar_txn_cli.cli.app (what every command pays);
  + MODULE     after the CLI is imported, what importing MODULE adds (the codec with the protobuf
               runtime, httpx, pyspark.sql); the commands that need them import them themselves.
tests/cli/test_cli_core.py checks that none of them is loaded by the CLI's import.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

from bench.machine import installed_env

MARK = "bench-startup-mark"
EXTRAS = {"the codec with the protobuf runtime": "pulsar_txn_cli.codec", "httpx": "httpx", "pyspark.sql": "pyspark.sql"}


def _top_level_ms(stderr: str) -> float:
    """The sum of the top-level imports' cumulative times after the mark (nested imports are indented)."""
    total, counting = 0, False
    for line in stderr.splitlines():
        if line.strip() == MARK:
            counting = True
        elif counting and line.startswith("import time:") and "|" in line:
            _self, cumulative, name = line[len("import time:") :].split("|")
            if not name.startswith("  ") and cumulative.strip().isdigit():  # "| package", not "|   nested"
                total += int(cumulative)
    return total / 1000


def import_ms(before: str, module: str, runs: int) -> float:
    """Best of `runs`: milliseconds that `import module` takes once `before` is imported."""
    code = f"import sys; {before + '; ' if before else ''}print({MARK!r}, file=sys.stderr, flush=True); import {module}"
    best = float("inf")
    for _ in range(runs):
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True, env=ENV)
        if done.returncode:
            raise SystemExit(f"import {module} failed: {done.stderr.strip().splitlines()[-1]}")
        best = min(best, _top_level_ms(done.stderr))
    return best


ENV = installed_env()


def wall_ms(command: list[str], runs: int, check: bool = True) -> tuple[float, float, float]:
    """(best wall, median wall, best CPU) milliseconds of running command, output discarded. The CPU
    time (user + system, from the kernel) is what the process itself spent: on a loaded machine it
    is near what the wall time would be on a quiet one."""
    import resource
    import statistics
    import time

    walls, cpus = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        subprocess.run(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, check=check, env=ENV)
        walls.append((time.perf_counter() - start) * 1000)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        cpus.append(1000 * (after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime))
    return min(walls), statistics.median(walls), min(cpus)


def _closed_url() -> str:
    import socket

    with socket.socket() as probe:  # a port nothing listens on once it is closed again
        probe.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{probe.getsockname()[1]}"


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench startup")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    from pathlib import Path

    exe = Path(sys.executable).parent / "pulsar-txn"
    command = [str(exe)] if exe.exists() else [sys.executable, "-m", "pulsar_txn_cli"]
    wall_ms([*command, "--help"], 1)  # writes the bytecode cache
    best, median, cpu = wall_ms([*command, "--help"], args.runs)
    floor_best, floor_median, floor_cpu = wall_ms([sys.executable, "-c", "pass"], args.runs)
    print(
        f"pulsar-txn --help: {best:.0f} ms wall (best of {args.runs}; median {median:.0f} ms; "
        f"CPU {cpu:.0f} ms; target <= 150 ms wall on a quiet host)"
    )
    print(f"  floor, python -c pass: {floor_best:.0f} ms wall (median {floor_median:.0f} ms; CPU {floor_cpu:.0f} ms)")
    # A command is built, parsed and run up to its first request (a closed port: it fails there, exit 4);
    # its CPU, not its wall, which waits out the connection retries.
    _best, _median, run_cpu = wall_ms([*command, "coordinator-stats", "--admin-url", _closed_url()], args.runs, False)
    print(
        f"a command to its first request (coordinator-stats, a closed port): CPU {run_cpu:.0f} ms (best of {args.runs})"
    )
    app = "pulsar_txn_cli.cli.app"
    print(f"import {app}: {import_ms('', app, args.runs):.0f} ms (python -X importtime, best of {args.runs})")
    for label, module in EXTRAS.items():
        print(f"  + {label} ({module}): {import_ms(f'import {app}', module, args.runs):.0f} ms more")
