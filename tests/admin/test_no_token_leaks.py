"""No token reaches stdout, stderr or the --debug log, for any admin command, success or failure."""
import pytest

from tests.admin.fakebroker import FakeBroker

TOKEN = "LEAKCHECK-eyJhbGciOiJIUzI1NiJ9.c3ViOmFkbWlu.sig"

COMMANDS = [
    ["coordinators-list"],
    ["coordinator-stats"],
    ["coordinator-stats", "-c", "0"],
    ["coordinator-internal-stats", "-c", "0", "-m"],
    ["pending-ack-stats", "-t", "my-topic", "-s", "my-sub", "-l"],
    ["pending-ack-internal-stats", "-t", "my-topic", "-s", "my-sub"],
    ["transaction-metadata", "(0,7)"],
    ["slow-transactions", "-t", "1s"],
    ["transaction-buffer-stats", "-t", "my-topic"],
    ["buffer-snapshot-internal-stats", "-t", "my-topic"],
    ["subscriptions"],
    ["set-txn-tc-batch-log", "--enable", "--reload", "--yes"],
    ["set-txn-pending-ack-batch-log", "--disable"],
    ["get-txn-tc-batch-log-stat"],
    ["get-txn-pending-ack-batch-log-stat"],
    ["metrics"],
]


def ways_to_give(token, tmp_path, url):
    token_file = tmp_path / "token"
    token_file.write_text(token)
    conf = tmp_path / "client.conf"
    conf.write_text(f"webServiceUrl={url}\nauthPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\nauthParams=token:{token}\n")
    return [
        (["--admin-url", url, "--token", token], {}),
        (["--admin-url", url, "--auth-params", f"token:{token}"], {}),
        (["--admin-url", url, "--token-file", str(token_file)], {}),
        ([], {"PULSAR_TXN_ADMIN_URL": url, "PULSAR_TXN_TOKEN": token}),
        ([], {"PULSAR_CLIENT_CONF": str(conf)}),
    ]


def assert_clean(result, token):
    for stream in (result.stdout, result.stderr):
        assert token not in stream
        assert token.split(".")[0] not in stream  # not even a prefix of it


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_success_and_failure_keep_the_token_secret(cli, tmp_path, command):
    with FakeBroker(token=TOKEN) as good, FakeBroker(token="another-token-entirely") as refusing:
        for fmt in ("table", "json"):
            result = cli([*command, "--admin-url", good.url, "--token", TOKEN, "--debug", "-o", fmt])
            assert result.exit_code in (0, 4), result.stderr  # 4: buffer-snapshot-internal-stats answers 405
            assert "Authorization: ***" in result.stderr
            assert_clean(result, TOKEN)
        # the refusing broker echoes the Authorization header back in its 401 reason
        result = cli([*command, "--admin-url", refusing.url, "--token", TOKEN, "--debug"])
        assert result.exit_code == 4 and "401" in result.stderr
        assert_clean(result, TOKEN)


def test_every_way_of_giving_a_token_stays_secret(cli, tmp_path):
    with FakeBroker(token=TOKEN) as good:
        for flags, env in ways_to_give(TOKEN, tmp_path, good.url):
            result = cli(["coordinator-stats", "--debug", *flags], env=env)
            assert result.exit_code == 0, result.stderr
            assert_clean(result, TOKEN)
    # nothing listens any more: connection refused (after retries), with the token still given
    flags, env = ways_to_give(TOKEN, tmp_path, good.url)[1]
    result = cli(["coordinator-stats", "--debug", *flags], env=env)
    assert result.exit_code == 4 and "cannot connect" in result.stderr
    assert_clean(result, TOKEN)


def test_state_file_holds_no_token(cli, tmp_path):
    with FakeBroker(token=TOKEN) as good:
        assert cli(["set-txn-tc-batch-log", "--enable", "--admin-url", good.url, "--token", TOKEN]).exit_code == 0
    files = list((tmp_path / "state").rglob("*.json"))
    assert files and all(TOKEN not in f.read_text() for f in files)
