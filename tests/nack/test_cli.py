"""`pulsar-txn nack` through the CLI: JSON shapes, the recommendation, bad input."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.conftest import assert_no_crash


def run(*args):
    return subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli", "nack", *args], capture_output=True, text=True, timeout=120
    )


def test_plan_json_shape():
    done = run("plan", "--rate", "10000", "--delay", "3600", "--precision-bits", "8", "-o", "json")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["entries"] == 36_000_000
    for key in ("bytes", "bytesPerEntry"):
        assert data["before"][key] > data["after"][key] > 0
    assert data["after"]["buckets"] == 14063 and data["after"]["ledgers"] >= 720
    assert data["maxEarlyMs"] == 255


def test_plan_recommends_the_finest_precision_that_fits():
    done = run("plan", "--rate", "10000", "--delay", "3600", "--precision-bits", "8", "--memory-budget", "64MiB")
    assert done.returncode == 0, done.stderr
    assert "recommended: --precision-bits 9" in done.stdout
    data = json.loads(
        run("plan", "--rate", "10000", "--delay", "3600", "--memory-budget", "64MiB", "-o", "json").stdout
    )
    fitting = [r["bits"] for r in data["precisions"] if r["fits"]]
    assert data["budget"]["recommendedPrecisionBits"] == min(fitting) == 9


def test_plan_says_when_nothing_fits():
    done = run("plan", "--rate", "10000", "--delay", "3600", "--memory-budget", "1KiB")
    assert done.returncode == 0 and "no precision up to 20 bits fits 1KiB" in done.stdout


def test_simulate_json_shape():
    done = run(
        "simulate",
        "--rate",
        "500",
        "--delay",
        "5",
        "--delay",
        "2",
        "--duration",
        "10",
        "--batch-size",
        "3",
        "-o",
        "json",
    )
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["entries"] == 1666 and data["messages"] == 3 * 1666
    assert data["memory"] and data["timer"]["before"]["runs"] > 0 and data["timer"]["after"]["runs"] > 0
    assert set(data["error"]["after"]) >= {"minMs", "p50Ms", "maxMs", "late", "early", "earlyWithSibling"}
    assert len(data["batchProblem"]) == 4


@pytest.mark.parametrize(
    "args,needle",
    [
        (["plan", "--rate", "0", "--delay", "1"], "--rate must be positive"),
        (
            ["plan", "--rate", "1", "--delay", "1", "--precision-bits", "64"],
            "--precision-bits must be between 0 and 30",
        ),
        (["plan", "--rate", "1", "--delay", "1", "--memory-budget", "lots"], "--memory-budget 'lots' is not a size"),
        (["simulate", "--rate", "1000000", "--duration", "3600"], "the simulation takes at most"),
        (["simulate", "--delay", "-1"], "must be positive"),
    ],
)
def test_bad_input_is_one_sentence_and_exit_2(args, needle):
    done = run(*args)
    assert done.returncode == 2
    assert needle in done.stderr and done.stdout == ""
    assert_no_crash(done)
