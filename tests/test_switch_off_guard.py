"""Prevention at the switch: turning TC batching off while transactions are open and
acknowledgmentAtBatchIndexLevelEnabled is off would pin the TC log for good (docs/real-broker-findings.md);
the set command says so first, with the commands that avoid it, and refuses under --yes without --force.
The pending-ack switch cannot pin its logs and goes through."""

from __future__ import annotations

import shlex

import pytest

from pulsar_txn_cli.engine.broker import Engine

pytestmark = pytest.mark.timeout(120)

COMMANDS = {"tc": "set-txn-tc-batch-log", "pending-ack": "set-txn-pending-ack-batch-log"}


def _batched_with_open(cli, directory, open_count: int = 3, batch_index: bool = False) -> list[int]:
    assert cli(["engine", "init", "--engine-dir", directory, "--coordinators", "1"]).exit_code == 0
    if batch_index:
        assert (
            cli(
                ["engine", "config", "set", "acknowledgmentAtBatchIndexLevelEnabled", "true", "--engine-dir", directory]
            ).exit_code
            == 0
        )
    for command in COMMANDS.values():
        assert cli([command, "--enable", "--reload", "--yes", "--engine-dir", directory]).exit_code == 0
    opened: list[int] = []
    with Engine.open(directory) as engine:
        for _ in range(open_count):
            engine.tc(0).new_transaction(3_600_000, opened.append)
        engine.checkpoint()
    assert len(opened) == open_count
    return opened


def _tc_batching(cli, directory) -> str:
    result = cli(
        ["engine", "config", "get", "transactionLogBatchedWriteEnabled", "--engine-dir", directory, "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr
    return result.json()["value"]


def _printed_commands(stderr: str) -> list[list[str]]:
    return [shlex.split(line.strip()) for line in stderr.splitlines() if line.strip().startswith("pulsar-txn ")]


@pytest.mark.parametrize("reload", [True, False])
def test_the_pending_ack_switch_with_open_transactions_goes_through(cli, tmp_path, reload):
    """A pending-ack log is not pinned by its switch (it trims whole entries; seen on a real 4.0.7 broker,
    tests/integration/test_pending_ack_switch_real_broker.py): the README recipe's second line on a busy cluster."""
    d = tmp_path / "engine"
    _batched_with_open(cli, d)
    result = cli([COMMANDS["pending-ack"], "--disable", *(["--reload"] if reload else []), "--yes", "--engine-dir", d])
    assert result.exit_code == 0 and "would pin" not in result.stderr, result.stderr


@pytest.mark.parametrize("log", ["tc"])
@pytest.mark.parametrize("reload", [True, False])
def test_switch_off_with_open_transactions_is_refused_under_yes(cli, tmp_path, log, reload):
    d = tmp_path / "engine"
    opened = _batched_with_open(cli, d)
    result = cli([COMMANDS[log], "--disable", *(["--reload"] if reload else []), "--yes", "--engine-dir", d])
    assert result.exit_code == 6, result.stderr
    assert "3 transactions are open and acknowledgmentAtBatchIndexLevelEnabled is false" in result.stderr
    assert "nothing was changed" in result.stderr and "--force" in result.stderr
    assert result.stdout == ""
    commands = _printed_commands(result.stderr)
    assert ["pulsar-txn", "slow-transactions", "--time", "0", "--engine-dir", str(d)] in commands
    for least in opened:
        assert [
            "pulsar-txn",
            "abort-transaction",
            "-m",
            "0",
            "-l",
            str(least),
            "--yes",
            "--engine-dir",
            str(d),
        ] in commands
    if log == "tc":
        assert _tc_batching(cli, d) == "true"  # nothing was changed


def test_following_the_printed_aborts_lets_the_switch_through(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d)
    refused = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert refused.exit_code == 6
    listed = cli(["slow-transactions", "--time", "0", "--engine-dir", d, "-o", "json"])
    assert listed.exit_code == 0 and len(listed.json()) == 3  # the printed listing shows them all
    for argv in _printed_commands(refused.stderr):
        if argv[1] == "abort-transaction":
            assert cli(argv[1:]).exit_code == 0
    done = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d, "-o", "json"])
    assert done.exit_code == 0, done.stderr
    assert "warning:" not in done.stderr and done.json()["stallRisk"] is None
    assert _tc_batching(cli, d) == "false"


def test_following_the_printed_batch_index_setting_lets_the_switch_through(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d)
    refused = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert refused.exit_code == 6
    for argv in _printed_commands(refused.stderr):
        if argv[1] == "engine":
            assert cli(argv[1:]).exit_code == 0, argv
    done = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert done.exit_code == 0 and "warning:" not in done.stderr, done.stderr


def test_force_turns_it_off_anyway_and_says_so(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--force", "--engine-dir", d, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert "would pin" in result.stderr and "going ahead anyway (--force)" in result.stderr
    assert result.json()["stallRisk"]["openTransactions"] == 3
    assert _tc_batching(cli, d) == "false"


def test_no_terminal_and_no_yes_is_refused_too(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--engine-dir", d], input="y\n")
    assert result.exit_code == 6 and "nothing was changed" in result.stderr


def test_no_warning_with_batch_index_acknowledgements_on(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d, batch_index=True)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert result.exit_code == 0 and "warning:" not in result.stderr, result.stderr


def test_no_warning_without_open_transactions(cli, tmp_path):
    d = tmp_path / "engine"
    _batched_with_open(cli, d, open_count=0)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert result.exit_code == 0 and "warning:" not in result.stderr, result.stderr


def _coordinator_not_ready(cli, directory) -> None:
    """Coordinator 0 stuck recovering (engine/faults.py), as a real coordinator that never finishes loading."""
    result = cli(["engine", "simulate", "--engine-dir", directory, "-n", "0", "--fault", "coordinator-not-ready"])
    assert result.exit_code == 0, result.stderr


def test_a_coordinator_not_ready_is_named_and_the_reload_reopens_it(cli, tmp_path):
    """Its stats cannot count what its log holds open: a warning that names it, not an all-clear. The switch then
    goes through and its --reload reopens every coordinator, the stuck one too (it used to stop on a KeyError
    after the setting had changed, with nothing reloaded)."""
    d = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", d, "--coordinators", "2"]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--engine-dir", d]).exit_code == 0
    _coordinator_not_ready(cli, d)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert "the open transactions of coordinator 0 could not be counted" in result.stderr
    assert f"`pulsar-txn coordinator-stats --engine-dir {d}` shows them Ready" in result.stderr
    data = result.json()
    assert data["stallRisk"]["uncountedCoordinators"] == [0] and data["stallRisk"]["openTransactions"] == 0
    assert [r["unloaded"] for r in data["reload"]] == [True, True]
    stats = cli(["coordinator-stats", "--engine-dir", d, "-o", "json"]).json()
    assert {k: v["state"] for k, v in stats.items()} == {"0": "Ready", "1": "Ready"}
    assert _tc_batching(cli, d) == "false"


def test_open_transactions_elsewhere_still_refuse_with_a_coordinator_not_ready(cli, tmp_path):
    d = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", d, "--coordinators", "2"]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--engine-dir", d]).exit_code == 0
    with Engine.open(d) as engine:
        engine.tc(1).new_transaction(3_600_000, lambda _: None)
        engine.checkpoint()
    _coordinator_not_ready(cli, d)
    result = cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--engine-dir", d])
    assert result.exit_code == 6, result.stderr
    assert "coordinator 0 could not be counted" in result.stderr
    assert "1 transaction is open" in result.stderr and "nothing was changed" in result.stderr
    assert _tc_batching(cli, d) == "true"
