"""A real broker with JWT authentication, authorization and TLS: the superuser's every
way in, the ordinary role's 403s, TLS failures, and no token in any output, log or state file."""

from __future__ import annotations

from pathlib import Path

import pytest

from secured import BASIC_USER, ORDINARY, SUPERUSER, Credentials, start_secured_broker, start_secured_cluster
from tool import recording_runner

pytestmark = pytest.mark.secured

READS = [
    ["coordinators-list"],
    ["coordinator-stats"],
    ["get-txn-tc-batch-log-stat"],
    ["subscriptions"],
    ["downgrade", "check"],
]
# What the ordinary role may not do: every one needs the superuser (transaction stats, broker config).
SUPERUSER_ONLY = [
    ["coordinator-stats"],
    ["get-txn-tc-batch-log-stat"],
    ["set-txn-tc-batch-log", "--disable"],
    ["downgrade", "check"],
    ["slow-transactions"],
]


@pytest.fixture(scope="module")
def creds(tmp_path_factory):
    return Credentials(tmp_path_factory.mktemp("credentials"))


@pytest.fixture(scope="module")
def broker(creds):
    started = start_secured_broker(creds)
    started.run_workload(seed=3, txns=3, aborts=1, ops=2, prefix="sec")  # authenticated with the superuser's token
    yield started
    started.cleanup()


@pytest.fixture(scope="module")
def outputs():
    """Everything the tool printed in this module, searched for tokens at the end."""
    return []


@pytest.fixture
def tool(tmp_path_factory, outputs):
    return recording_runner(tmp_path_factory.getbasetemp() / "secured-state", outputs)


def https(broker, host: str = "localhost") -> str:
    return f"https://{host}:{broker.tls_port}"


@pytest.mark.parametrize("command", READS, ids=lambda c: " ".join(c))
def test_the_superuser_with_token_and_ca(tool, broker, creds, command):
    result = tool(
        *command,
        "--admin-url",
        https(broker),
        "--token",
        creds.tokens[SUPERUSER],
        "--tls-trust-cert-path",
        creds.ca_path,
        "-o",
        "json",
    )
    assert result.exit_code in (0, 5), result.stderr  # downgrade check: WAIT
    assert result.stdout.strip()


def test_the_superuser_with_a_token_file(tool, broker, creds):
    result = tool(
        "coordinators-list",
        "--admin-url",
        https(broker),
        "--token-file",
        creds.token_file(SUPERUSER),
        "--tls-trust-cert-path",
        creds.ca_path,
        "-o",
        "json",
    )
    assert result.exit_code == 0, result.stderr
    assert len(result.json()) == 1


def test_the_superuser_through_client_conf(tool, broker, creds, tmp_path):
    conf = tmp_path / "client.conf"
    conf.write_text(
        f"webServiceUrl={https(broker)}\n"
        "authPlugin=org.apache.pulsar.client.impl.auth.AuthenticationToken\n"
        f"authParams=file://{creds.token_file(SUPERUSER)}\n"
        f"tlsTrustCertsFilePath={creds.ca_path}\n"
    )
    result = tool("get-txn-tc-batch-log-stat", "-o", "json", env={"PULSAR_CLIENT_CONF": str(conf)})
    assert result.exit_code == 0, result.stderr
    assert result.json()["coordinators"]


@pytest.mark.parametrize("command", SUPERUSER_ONLY, ids=lambda c: " ".join(c))
def test_the_ordinary_role_gets_one_sentence_and_exit_4(tool, broker, creds, command):
    result = tool(
        *command,
        "--admin-url",
        https(broker),
        "--token",
        creds.tokens[ORDINARY],
        "--tls-trust-cert-path",
        creds.ca_path,
        "--yes" if command[0].startswith("set-") else "-q",
    )
    assert result.exit_code == 4, result.stderr
    errors = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    # Pulsar answers 403, or 401 "Unauthorized to validate…" for a role that is known but not allowed.
    assert len(errors) == 1 and "lacks permission" in errors[0] and "superUserRoles" in errors[0], result.stderr


def test_a_wrong_ca_is_one_sentence(tool, broker, creds):
    result = tool(
        "coordinators-list",
        "--admin-url",
        https(broker),
        "--token",
        creds.tokens[SUPERUSER],
        "--tls-trust-cert-path",
        creds.stranger_ca_path,
    )
    assert result.exit_code == 4
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "TLS handshake with" in error and "--tls-trust-cert-path" in error


def test_a_wrong_host_name_is_one_sentence(tool, broker, creds):
    result = tool(
        "coordinators-list",
        "--admin-url",
        https(broker, "127.0.0.1"),
        "--token",
        creds.tokens[SUPERUSER],
        "--tls-trust-cert-path",
        creds.ca_path,
    )
    assert result.exit_code == 4
    [error] = [line for line in result.stderr.splitlines() if line.startswith("error:")]
    assert "TLS handshake with" in error and "host name" in error


def test_a_redirect_to_the_other_secured_broker_keeps_the_token(tool, creds):
    """Between two brokers of one secured cluster: the 307 to the owner goes to its TLS address, the
    token goes along (it belongs to the cluster) and the CA still checks the other broker."""
    cluster = start_secured_cluster(creds)
    try:
        first, other = cluster.brokers
        owners = cluster.coordinator_owners()
        foreign = next(tc for tc, owner in owners.items() if owner == other.address)
        result = tool(
            "coordinator-stats",
            "-c",
            foreign,
            "--admin-url",
            f"https://localhost:{first.tls_port}",
            "--token",
            creds.tokens[SUPERUSER],
            "--tls-trust-cert-path",
            creds.ca_path,
            "-o",
            "json",
        )
        assert result.exit_code == 0, result.stderr
        assert result.json()["state"] == "Ready"
        [hop] = [line for line in result.stderr.splitlines() if "redirect 307" in line]
        assert f"https://127.0.0.1:{other.tls_port}/" in hop and "(Authorization kept)" in hop
    finally:
        cluster.cleanup()


def test_basic_authentication_on_a_real_broker(tool, creds):
    broker = start_secured_broker(creds, basic=True)
    try:
        plugin = "org.apache.pulsar.client.impl.auth.AuthenticationBasic"
        good = tool(
            "get-txn-tc-batch-log-stat",
            "--admin-url",
            broker.admin_url,
            "--auth-plugin",
            plugin,
            "--auth-params",
            f'{{"userId": "{BASIC_USER}", "password": "{creds.basic_password}"}}',
            "-o",
            "json",
        )
        assert good.exit_code == 0, good.stderr
        assert good.json()["coordinators"]
        bad = tool(
            "coordinators-list",
            "--admin-url",
            broker.admin_url,
            "--auth-plugin",
            plugin,
            "--auth-params",
            f"userId:{BASIC_USER},password:not-{creds.basic_password}",
        )
        assert bad.exit_code == 4
        [error] = [line for line in bad.stderr.splitlines() if line.startswith("error:")]
        assert "(401)" in error
        for text in (good.stdout + good.stderr, bad.stdout + bad.stderr):
            assert creds.basic_password not in text
    finally:
        broker.cleanup()


def test_no_token_anywhere(tool, broker, creds, outputs):
    """Last in this module: every output of the tests above (with --debug), and every state file."""
    assert len(outputs) >= len(READS) + len(SUPERUSER_ONLY) + 4
    files = [p for p in Path(tool.state).rglob("*") if p.is_file()]
    assert files, "the tool wrote no state file: nothing was searched"
    texts = outputs + [p.read_text(errors="replace") for p in files]
    for role, token in creds.tokens.items():
        leaks = [t[:200] for t in texts if token in t or token.split(".")[2] in t]
        assert not leaks, f"{role}'s token leaked: {leaks}"
    assert creds.secret.hex() not in "".join(texts)
