"""The downgrade verdict against the engine's oracle, for as long as you give it.

Runs the Hypothesis state machine of tests/downgrade/oracle_machine.py at random (a new seed each round of
examples) until the time is up, then prints how many examples and steps (states visited) it ran, how long it
took, the verdicts the checks gave, and the counterexample if the verdict and the oracle disagree. The
state and data directories are temporary.

    python -m bench verdict_oracle [--minutes=60] [--steps=30] [--examples=20] [--derandomize]
                                   [--profile=deep|judged|sound]

deep: every judgement, and a --wait on a copy for every judged WAIT; judged: the fast suite's judged
machine; sound: soundness only (never a false SAFE, SAFE stays SAFE), the widest exploration.
"""

from __future__ import annotations

import argparse
import collections
import os
import tempfile
import time


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench verdict_oracle")
    parser.add_argument("--minutes", type=float, default=60.0)
    parser.add_argument("--steps", type=int, default=30)
    parser.add_argument("--examples", type=int, default=20, help="examples per round (each round a fresh seed)")
    parser.add_argument("--derandomize", action="store_true", help="the same examples every run (a smoke test)")
    parser.add_argument("--profile", choices=["deep", "judged", "sound"], default="deep")
    args = parser.parse_args(argv)
    scratch = tempfile.mkdtemp(prefix="bench-verdict-oracle-")
    for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
        os.environ.pop(name, None)
    for name in ("HOME", "XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME"):
        os.environ[name] = os.path.join(scratch, name.lower())

    from hypothesis import HealthCheck, settings
    from hypothesis.stateful import run_state_machine_as_test

    from tests.downgrade import oracle_machine as om

    base = {"deep": om.VerdictOracleFull, "judged": om.VerdictOracle, "sound": om.VerdictOracleSound}[args.profile]
    seen = collections.Counter()

    class Counted(base):
        def check(self, directory=None, checkpoint=None, *extra):
            doc = super().check(directory, checkpoint, *extra)
            if checkpoint is not None and str(checkpoint).endswith("peek.json"):
                if extra:  # a WAIT asked again with --confirm-from-bookies
                    seen["confirmed"] += 1
                    seen["confirmed SAFE"] += doc["verdict"] == "SAFE"
                else:
                    seen["states"] += 1
                    seen[doc["verdict"]] += 1
            return doc

        def teardown(self):
            seen["examples"] += 1
            super().teardown()

    options = settings(
        max_examples=args.examples,
        stateful_step_count=args.steps,
        derandomize=args.derandomize,
        deadline=None,
        database=None,
        suppress_health_check=list(HealthCheck),
    )
    started = time.monotonic()
    outcome = "the verdict followed the oracle in every example"
    try:
        while time.monotonic() - started < args.minutes * 60:
            run_state_machine_as_test(Counted, settings=options)
    except AssertionError as exc:
        outcome = f"DISAGREEMENT:\n{exc}"
    elapsed = time.monotonic() - started
    verdicts = ", ".join(f"{v} {seen[v]}" for v in ("SAFE", "WAIT", "BLOCKED"))
    print(
        f"verdict_oracle: {base.__name__}, {seen['examples']} examples of up to {args.steps} steps, "
        f"{seen['states']} states visited ({verdicts}; {seen['confirmed SAFE']} of the {seen['confirmed']} WAITs "
        f"asked with --confirm-from-bookies were SAFE) in {elapsed:.0f} s"
    )
    print(outcome)
