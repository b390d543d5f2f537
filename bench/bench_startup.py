"""Start-up: what importing the CLI costs, and what the heavy modules it keeps out of `--help` would add.

    .venv/bin/python -m bench startup [--runs=N]

Each figure is the best of N (default 10) fresh interpreters run with `python -X importtime`:
  the CLI      the cumulative import time of pulsar_txn_cli.cli.app (what every command pays);
  + MODULE     after the CLI is imported, what importing MODULE adds (the codec with the protobuf
               runtime, httpx, pyspark.sql); the commands that need them import them themselves.
tests/cli/test_cli_core.py checks that none of them is loaded by the CLI's import.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

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
        done = subprocess.run([sys.executable, "-X", "importtime", "-c", code], capture_output=True, text=True)
        if done.returncode:
            raise SystemExit(f"import {module} failed: {done.stderr.strip().splitlines()[-1]}")
        best = min(best, _top_level_ms(done.stderr))
    return best


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench startup")
    parser.add_argument("--runs", type=int, default=10)
    args = parser.parse_args(argv)
    app = "pulsar_txn_cli.cli.app"
    print(f"import {app}: {import_ms('', app, args.runs):.0f} ms (python -X importtime, best of {args.runs})")
    for label, module in EXTRAS.items():
        print(f"  + {label} ({module}): {import_ms(f'import {app}', module, args.runs):.0f} ms more")
