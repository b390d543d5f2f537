"""Tables show each answer's own fields, in units an operator reads."""


def _open_transaction(engine_dir) -> tuple[int, int]:
    from pulsar_txn_cli.engine.broker import Engine

    got = []
    with Engine.open(engine_dir) as opened:
        opened.tc(0).new_transaction(90_000, got.append)
        opened.clock.advance_ms(2_000)  # open for 2 s: a slow transaction for `slow-transactions -t 1s`
        opened.checkpoint()
    return 0, got[0]


def test_timeout_is_a_duration_not_a_date(cli, tmp_path):
    """timeoutAt is the transaction's timeout in ms (as a real broker answers): 1m30s, never 1970."""
    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    most, least = _open_transaction(engine)
    for args in (["transaction-metadata", f"({most},{least})"], ["slow-transactions", "-t", "1s"]):
        table = cli([*args, "--engine-dir", engine], env={"COLUMNS": "250"})
        assert table.exit_code == 0, table.stderr
        assert "1m30s" in table.stdout and "1970" not in table.stdout, table.stdout
    raw = cli(["transaction-metadata", f"({most},{least})", "--engine-dir", engine, "-o", "json"]).json()
    assert raw["timeoutAt"] == 90_000  # JSON keeps Pulsar's number


def test_pending_ack_stats_has_its_own_columns(cli, simulated_engine):
    engine_dir = simulated_engine
    table = cli(
        ["pending-ack-stats", "-t", "sim-topic-0", "-s", "sim-sub-0", "--engine-dir", engine_dir],
        env={"COLUMNS": "250"},
    )
    assert table.exit_code == 0, table.stderr
    header = table.stdout.lower()
    assert "subscription" in header and "ongoing" in header and "recover start" in header
    for coordinators_own in ("sequence id", "low water mark"):
        assert coordinators_own not in header, table.stdout
