"""Hints that fit the mistake."""


def test_aborting_a_transaction_that_is_gone_points_at_the_id(cli, simulated_engine):
    target = ["--engine-dir", str(simulated_engine)]
    result = cli(["abort-transaction", "-m", "0", "-l", "999", "--yes", *target])
    assert result.exit_code == 4
    assert "check the transaction id" in result.stderr and "check the URL" not in result.stderr


def test_a_missing_subscription_is_named_without_the_java_stack(cli, simulated_engine):
    target = ["--engine-dir", str(simulated_engine)]
    result = cli(["pending-ack-stats", "-t", "sim-topic-0", "-s", "no-such-sub", *target])
    assert result.exit_code == 4
    assert "the topic has no such subscription" in result.stderr
    assert "Cannot invoke" not in result.stderr and "retry" not in result.stderr


def test_verify_entries_typos_are_usage_errors_before_any_check(cli, simulated_engine, tmp_path):
    target = ["--engine-dir", str(simulated_engine)]
    checkpoint = tmp_path / "cp.json"
    missing = cli(
        ["downgrade", "check", "--verify-entries", tmp_path / "nonexistent", "--checkpoint", checkpoint, *target]
    )
    assert missing.exit_code == 2 and "no such file or directory" in missing.stderr
    assert "WAIT" not in missing.stdout and not checkpoint.exists()
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("not a dump\n")
    result = cli(["downgrade", "check", "--verify-entries", garbage, "--checkpoint", checkpoint, *target])
    assert result.exit_code == 3 and "neither a JSONL dump" in result.stderr
    assert "--format" not in result.stderr and not checkpoint.exists()
