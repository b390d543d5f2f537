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
    ["set-txn-pending-ack-batch-log", "--disable", "--force"],
    ["get-txn-tc-batch-log-stat"],
    ["get-txn-pending-ack-batch-log-stat"],
    ["metrics"],
]


def ways_to_give(token, tmp_path, url):
    token_file = tmp_path / "token"
    token_file.write_text(token)
    conf = tmp_path / "client.conf"
    conf.write_text(
        f"webServiceUrl={url}\nauthPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\nauthParams=token:{token}\n"
    )
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


OAUTH2_SECRET = "LEAKCHECK-oauth2-client-secret"


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_oauth2_secret_and_tokens_stay_secret(cli, tmp_path, command):
    """OAuth2 client credentials (stand-in OAuth2 server): success, and a broker that refuses every token."""
    import json

    from tests.admin.oauth2standin import OAuth2StandIn

    key = tmp_path / "key.json"
    key.write_text(json.dumps({"client_id": "ops", "client_secret": OAUTH2_SECRET}))
    with FakeBroker(token="none-yet") as good, FakeBroker(token="refuses-all") as refusing:
        with OAuth2StandIn("ops", OAUTH2_SECRET, on_issue=lambda t: setattr(good, "token", t)) as standin:
            auth = [
                "--auth-plugin",
                "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2",
                "--auth-params",
                json.dumps({"type": "client_credentials", "issuerUrl": standin.issuer, "privateKey": f"file://{key}"}),
            ]
            results = [
                cli([*command, "--admin-url", good.url, *auth, "--debug", "-o", "json"]),
                cli([*command, "--admin-url", refusing.url, *auth, "--debug"]),
            ]
            assert results[0].exit_code in (0, 4), results[0].stderr
            assert results[1].exit_code == 4 and "401" in results[1].stderr
            assert standin.issued
            for result in results:
                for text in (result.stdout, result.stderr):
                    assert OAUTH2_SECRET not in text
                    assert all(token not in text for token in standin.issued)


def test_redact_masks_oauth2_fields_whatever_their_value():
    from pulsar_txn_cli.transport.redact import redact

    text = redact(
        "grant_type=client_credentials&client_id=ops&client_secret=unregistered-1 "
        '{"access_token": "unregistered-2", "expires_in": 60}'
    )
    assert "unregistered-1" not in text and "unregistered-2" not in text and "client_id=ops" in text


PASSWORD = "LEAKCHECK-url-pa55"
URL_COMMANDS = [
    *COMMANDS,
    ["doctor"],
    ["downgrade", "check"],
    ["find-hanging"],
    ["abort-hanging"],
    ["coordinator-stats", "-c", "7"],  # an error that suggests a command carrying the target
]


@pytest.mark.parametrize("command", URL_COMMANDS, ids=lambda c: " ".join(c))
def test_a_password_in_the_admin_url_is_sent_as_basic_credentials_and_never_printed(cli, command):
    """The target line, verdicts, advice (pasteable commands carry the URL without its credentials), errors, and
    the --debug log."""
    import base64

    with FakeBroker() as broker:
        url = broker.url.replace("http://", f"http://admin:{PASSWORD}@")
        results = [
            cli([*command, "--admin-url", url, "--debug"]),
            cli([*command, "-o", "json"], env={"PULSAR_TXN_ADMIN_URL": url}),
        ]
    sent = {request.headers.get("Authorization") for request in broker.server.requests}
    assert sent == {"Basic " + base64.b64encode(f"admin:{PASSWORD}".encode()).decode()}
    for result in results:
        assert result.exit_code != 1, result.stderr  # no unexpected error
        assert PASSWORD not in result.stdout + result.stderr
    assert f"target: cluster {broker.url}\n" in results[0].stderr


def test_a_password_in_the_admin_url_stays_out_of_a_connection_failure(cli):
    import socket

    with socket.socket() as s:  # bound, never listening
        s.bind(("127.0.0.1", 0))
        url = f"http://admin:{PASSWORD}@127.0.0.1:{s.getsockname()[1]}"
        result = cli(["coordinators-list", "--admin-url", url, "--debug"])
    assert result.exit_code == 4 and "cannot connect to cluster http://127.0.0.1:" in result.stderr
    assert PASSWORD not in result.stdout + result.stderr


def test_a_password_in_the_admin_url_with_a_token_too_is_a_usage_error(cli):
    result = cli(["coordinators-list", "--admin-url", f"http://admin:{PASSWORD}@127.0.0.1:9", "--token", TOKEN])
    assert result.exit_code == 2
    assert "the admin URL (--admin-url) carries a user and password, and other credentials" in result.stderr
    assert PASSWORD not in result.stderr and TOKEN not in result.stderr


@pytest.mark.parametrize(
    "url",
    [f"htp://admin:{PASSWORD}@host", f"http://admin:{PASSWORD}@[::1", f"http://admin:{PASSWORD}@host:99999"],
    ids=["scheme", "ipv6", "port"],
)
def test_a_malformed_admin_url_is_named_without_its_password(cli, url):
    result = cli(["coordinators-list", "--admin-url", url])
    assert result.exit_code == 2 and "admin URL '" in result.stderr
    assert PASSWORD not in result.stderr
