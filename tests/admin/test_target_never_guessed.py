"""A target is never guessed (target/settings.py): an empty or malformed --admin-url, --engine-dir or their
environment variables is a usage error naming the flag or variable, never a fall through to client.conf, a
pulsarctl context or the default engine; and a command that changes state names its target even under -q."""

from __future__ import annotations

import pytest

from pulsar_txn_cli.cli.common import changes_state
from tests.admin.fakebroker import FakeBroker
from tests.conftest import assert_no_crash


@pytest.mark.parametrize(
    ("args", "env", "said"),
    [
        (["--admin-url", ""], {}, "error: --admin-url is empty; give the broker's web service URL"),
        (["--admin-url", "  "], {}, "error: --admin-url is empty"),
        (["--engine-dir", ""], {}, "error: --engine-dir is empty; give the engine's directory"),
        ([], {"PULSAR_TXN_ADMIN_URL": ""}, "error: PULSAR_TXN_ADMIN_URL is set but empty; give the broker's"),
        ([], {"PULSAR_TXN_ENGINE_DIR": ""}, "error: PULSAR_TXN_ENGINE_DIR is set but empty; give the engine's"),
        (["--admin-url", "http://[::1"], {}, "error: admin URL 'http://[::1' (--admin-url) is malformed"),
        ([], {"PULSAR_TXN_ADMIN_URL": "http://[::1"}, "(PULSAR_TXN_ADMIN_URL) is malformed"),
        (["--admin-url", "http://broker :8080"], {}, "(--admin-url) holds a space or control character"),
    ],
    ids=["empty-flag", "blank-flag", "empty-engine-dir", "empty-url-var", "empty-dir-var", "ipv6", "ipv6-var", "space"],
)
def test_an_empty_or_malformed_target_is_a_usage_error_and_nothing_else_is_reached(cli, tmp_path, args, env, said):
    with FakeBroker() as fallback:
        conf = tmp_path / "client.conf"
        conf.write_text(f"webServiceUrl={fallback.url}\n")
        result = cli(["abort-hanging", "--execute", "--yes", *args], env={"PULSAR_CLIENT_CONF": str(conf), **env})
    assert result.exit_code == 2, result.stderr
    assert said in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "target:" not in result.stderr
    assert_no_crash(result)
    assert fallback.server.requests == []  # client.conf's cluster was never asked


def test_engine_commands_refuse_an_empty_engine_directory_too(cli):
    for args, env in ((["--engine-dir", ""], {}), ([], {"PULSAR_TXN_ENGINE_DIR": ""})):
        result = cli(["engine", "config", "list", *args], env=env)
        assert result.exit_code == 2 and "empty" in result.stderr, result.stderr


def test_a_state_changing_command_names_its_target_under_quiet(cli, simulated_engine):
    target = ["--engine-dir", str(simulated_engine)]
    changed = cli(["set-txn-tc-batch-log", "true", "-q", *target])
    refused = cli(["abort-transaction", "-m", "0", "-l", "999", "--yes", "-q", *target])
    read = cli(["coordinators-list", "-q", *target])
    assert changed.exit_code == 0, changed.stderr
    assert changed.stderr == f"target: engine {simulated_engine}\n"
    assert refused.exit_code == 4 and refused.stderr.startswith(f"target: engine {simulated_engine}\n")
    assert read.exit_code == 0 and read.stderr == ""  # a read stays quiet


def test_which_commands_change_state():
    from typer.main import get_command

    from pulsar_txn_cli.cli.app import app

    names = sorted(name for name in get_command(app).commands if changes_state(name))
    assert names == [
        "abort-hanging",
        "abort-transaction",
        "clean-pending-ack",
        "scale-transactionCoordinators",
        "set-txn-pending-ack-batch-log",
        "set-txn-tc-batch-log",
        "unload",
    ]
