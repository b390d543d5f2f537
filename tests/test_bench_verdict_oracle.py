"""`python -m bench verdict_oracle` runs the oracle machine as the fast suite does, with its own counting
subclass: one short round keeps the two in step."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.timeout(300)
def test_one_short_round_of_the_deep_profile_counts_what_it_checked():
    args = ["--minutes=0.001", "--steps=8", "--examples=3", "--derandomize", "--profile=deep"]
    done = subprocess.run(
        [sys.executable, "-m", "bench", "verdict_oracle", *args], cwd=ROOT, capture_output=True, text=True, timeout=280
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    line = next(line for line in done.stdout.splitlines() if line.startswith("verdict_oracle: "))
    assert line.startswith("verdict_oracle: VerdictOracleFull, 3 examples of up to 8 steps, "), line
    states = int(line.split(" steps, ")[1].split(" states")[0])
    confirmed = int(line.split(" of the ")[1].split(" WAITs")[0])
    assert states > 3 and confirmed > 0, line  # the checks and their confirmations were both counted
    assert "the verdict followed the oracle in every example" in done.stdout, done.stdout
