"""The downgrade verdict against the engine's oracle, longer than the fast suite.

Runs the Hypothesis state machine of tests/downgrade/oracle_machine.py: the full profile (broker
restarts, unloads, scale-up, and a `--wait` on a copy for every WAIT) with N examples of up to S steps,
then prints how many examples ran, how long it took, and the counterexample if the verdict and the
oracle disagree. The state and data directories are temporary.

    python -m bench verdict_oracle [--examples=N] [--steps=S] [--fast]

Derandomized: the same examples every run (more examples reach further).
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench verdict_oracle")
    parser.add_argument("--examples", type=int, default=100)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--fast", action="store_true", help="the fast suite's machine instead of the full one")
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="bench-verdict-oracle-")
    for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
        os.environ.pop(name, None)
    for name in ("HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        os.environ[name] = os.path.join(scratch, name.lower())

    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.downgrade.oracle_machine import VerdictOracle, VerdictOracleFull

    machine = VerdictOracle if args.fast else VerdictOracleFull
    options = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        derandomize=True,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.monotonic()
    try:
        run_state_machine_as_test(machine, settings=options)
        outcome = "the verdict followed the oracle in every example"
    except AssertionError as exc:
        outcome = f"DISAGREEMENT:\n{exc}"
    elapsed = time.monotonic() - started
    print(f"verdict_oracle: {machine.__name__}, {args.examples} examples of up to {args.steps} steps: {elapsed:.0f} s")
    print(outcome)
