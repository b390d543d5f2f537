"""What `set-txn-*-batch-log` says it changed, and which stores still need reopening."""


def test_previous_value_is_the_value_right_before_this_command(cli, tmp_path):
    target = ["--engine-dir", str(tmp_path / "engine")]
    assert cli(["engine", "init", *target]).exit_code == 0
    first = cli(["set-txn-tc-batch-log", "--enable", *target, "-o", "json"])
    assert first.exit_code == 0 and first.json()["previous"] is False
    again = cli(["set-txn-tc-batch-log", "--enable", *target])
    assert "is now true" in again.stderr and "(was true)" in again.stderr, again.stderr


def test_re_enabling_over_stores_that_still_batch_needs_no_reload(cli, tmp_path):
    """enable + reload (the stores batch), disable without reload (they still batch), enable again:
    nothing needs reopening, and the stat says every coordinator batches."""
    target = ["--engine-dir", str(tmp_path / "engine")]
    assert cli(["engine", "init", *target]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *target]).exit_code == 0
    off = cli(["set-txn-tc-batch-log", "--disable", *target, "-o", "json"])
    assert off.json()["staleStores"] == off.json()["openStores"] > 0
    assert "do not run with it yet" in off.stderr
    stat = cli(["get-txn-tc-batch-log-stat", *target, "-o", "json"]).json()
    assert all(c["effective"] is True for c in stat["coordinators"]), stat["coordinators"]
    on = cli(["set-txn-tc-batch-log", "--enable", *target, "-o", "json"])
    assert on.exit_code == 0 and on.json()["staleStores"] == 0
    assert "already runs with batching enabled" in on.stderr and "keep their old setting" not in on.stderr
    stat = cli(["get-txn-tc-batch-log-stat", *target, "-o", "json"]).json()
    assert all(c["effective"] is True for c in stat["coordinators"]), stat["coordinators"]
