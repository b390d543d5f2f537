"""Crash test: SIGKILL a running `engine simulate` at random moments, many times.

After every kill the database opens (a broker restart), `engine verify` passes, and every
transaction whose NEW was acknowledged (the simulate's --ack-log) and whose end was never
requested is still in its coordinator log.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time

import pytest

ROUNDS = 10


@pytest.mark.slow
def test_sigkill_at_random_moments(cli, tmp_path):
    edir = str(tmp_path / "engine")
    ack_log = tmp_path / "acked.log"
    assert cli(["engine", "init", "--coordinators", "2", "--engine-dir", edir]).exit_code == 0
    rng = random.Random(20260101)
    env = dict(os.environ, PULSAR_TXN_ENGINE_LOCK_TIMEOUT="30")
    kills = 0
    for round_ in range(ROUNDS):
        batch = "true" if round_ % 3 != 2 else "false"  # batched and unbatched entries mixed in one log
        for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
            assert cli(["engine", "config", "set", key, batch, "--engine-dir", edir]).exit_code == 0
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pulsar_txn_cli",
                "engine",
                "simulate",
                "-n",
                "1000000",
                "--concurrency",
                "50",
                "--subscriptions",
                "20",
                "--timeout-ratio",
                "0.05",
                "--txn-timeout-ms",
                "5",
                "--seed",
                str(round_),
                "--ack-log",
                str(ack_log),
                "--engine-dir",
                edir,
                "-q",
            ],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        # Wait until it is writing, then kill it at a random moment.
        deadline = time.monotonic() + 30
        start = ack_log.stat().st_size if ack_log.exists() else 0
        while time.monotonic() < deadline and (not ack_log.exists() or ack_log.stat().st_size <= start):
            if proc.poll() is not None:
                pytest.fail(f"simulate ended early: {proc.stderr.read().decode()}")
            time.sleep(0.02)
        time.sleep(rng.uniform(0.0, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        kills += proc.returncode == -signal.SIGKILL
        r = cli(["engine", "verify", "--ack-log", str(ack_log), "--engine-dir", edir, "-o", "json"])
        assert r.exit_code == 0, f"round {round_} (batch {batch}) in {edir}: {r.stdout[:3000]}"
        assert r.json()["ackedChecked"] > 0
    assert kills == ROUNDS
    # After all that, a normal run still works and leaves a consistent engine.
    assert cli(["engine", "simulate", "-n", "200", "--ack-log", str(ack_log), "--engine-dir", edir]).exit_code == 0
    assert cli(["engine", "reload", "--engine-dir", edir]).exit_code == 0
    r = cli(["engine", "verify", "--ack-log", str(ack_log), "--engine-dir", edir, "-o", "json"])
    assert r.exit_code == 0, r.stdout
