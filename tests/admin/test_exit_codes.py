"""Inputs no broker could answer are usage errors (exit 2) before any request, not HTTP errors (exit 4) or
unexpected ones (exit 1)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["coordinator-stats", "-c", "-1"], "-1 is not in the range x>=0"),
        (["coordinator-internal-stats", "-c", "-2"], "-2 is not in the range x>=0"),
        (["slow-transactions", "-c", "-1"], "-1 is not in the range x>=0"),
        (["transaction-metadata", "-m", "0", "-l", str(2**64)], "least significant bits must be from 0 to 2^63-1"),
        (["transaction-metadata", f"(0,{2**63})"], "least significant bits must be from 0 to 2^63-1"),
        (["abort-transaction", "-m", "-1", "-l", "5", "--yes"], "most significant bits must be from 0 to 2^63-1"),
    ],
    ids=["stats", "internal-stats", "slow", "metadata-flags", "metadata-text", "abort"],
)
def test_an_id_no_coordinator_can_have_is_a_usage_error_before_any_request(cli, simulated_engine, args, said):
    result = cli([*args, "--engine-dir", str(simulated_engine)])
    assert result.exit_code == 2, result.stderr
    assert said in result.stderr and "target:" not in result.stderr


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--rate", "1e308", "--delay", "60"], "--rate must be positive and at most 1e+09, not 1e+308"),
        (["--rate", "nan", "--delay", "60"], "--rate must be positive and at most 1e+09, not nan"),
        (["--rate", "100", "--delay", "inf"], "--delay must be positive and at most 31,536,000 s, not inf"),
    ],
    ids=["huge-rate", "nan-rate", "infinite-delay"],
)
def test_nack_plan_refuses_rates_and_delays_no_client_has(cli, args, said):
    result = cli(["nack", "plan", *args])
    assert result.exit_code == 2, result.stderr
    assert said in result.stderr and "Overflow" not in result.stderr


@pytest.mark.parametrize("command", ["find-hanging", "abort-hanging"])
def test_hanging_transactions_of_a_topic_that_does_not_exist_say_so_like_stuck_readers(cli, simulated_engine, command):
    target = ["--engine-dir", str(simulated_engine)]
    missing = cli([command, "-t", "no-such-topic", *target])
    assert missing.exit_code == 4, missing.stderr
    assert "transactionBufferStats/public/default/no-such-topic" in missing.stderr
    assert "found nothing (404)" in missing.stderr and "check the topic name" in missing.stderr
    assert "hanging transaction" not in missing.stdout
    assert cli([command, "-t", "sim-topic-0", *target]).exit_code == 0  # a topic that exists: as before
