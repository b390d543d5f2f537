"""OAuth2 client credentials against a real OAuth2/OIDC server (mock-oauth2-server from Maven Central)
and a real Pulsar 4.0.7 broker that validates its tokens (oauth2.py says how): from --auth-params,
client.conf and a pulsarctl context; a wrong secret; a token expiring while a run goes on; and no
secret or token in any output, --debug log or state file.

One OAuth2 server and one broker for the module; about two minutes on 2 cores."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

from oauth2 import ADMIN_CLIENT, AUDIENCE, OAUTH2_PLUGIN, TOKEN_LIFETIME, OAuth2Server, start_oauth2_broker
from tests.conftest import run_cli
from tool import recording_runner

pytestmark = pytest.mark.secured

COMMANDS = [
    ["coordinators-list"],
    ["coordinator-stats"],
    ["get-txn-tc-batch-log-stat"],
    ["subscriptions"],
    ["downgrade", "check"],
]  # the last one records a checkpoint in the state directory


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    started = OAuth2Server(tmp_path_factory.mktemp("oauth2"))
    try:
        started.start()
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"could not start mock-oauth2-server (JDK 17 and Maven Central needed):\n{exc}", pytrace=False)
    yield started
    started.stop()


@pytest.fixture(scope="module")
def broker(server):
    try:
        started = start_oauth2_broker(server)
    except Exception as exc:  # noqa: BLE001
        pytest.fail(f"could not start a Pulsar broker that trusts the OAuth2 server:\n{exc}", pytrace=False)
    started.run_workload(seed=3, txns=3, aborts=1, ops=2, prefix="oauth")  # a real client, with the server's token
    yield started
    started.cleanup()


@pytest.fixture(scope="module")
def outputs():
    """Everything pulsar-txn printed in this module, searched for secrets at the end."""
    return []


@pytest.fixture
def tool(tmp_path_factory, outputs):
    return recording_runner(tmp_path_factory.getbasetemp() / "oauth2-state", outputs, {"PULSARCONFIG": "/nonexistent"})


def fetched(result) -> int:
    """How many tokens the run fetched (its --debug log says, one line per token)."""
    return len(re.findall(r"OAuth2: token \d+ for client", result.stderr))


@pytest.mark.parametrize("command", COMMANDS, ids=lambda c: " ".join(c))
def test_commands_with_auth_params(tool, broker, server, command):
    result = tool(
        *command,
        "--admin-url",
        broker.admin_url,
        "--auth-plugin",
        OAUTH2_PLUGIN,
        "--auth-params",
        server.auth_params(),
        "-o",
        "json",
    )
    assert result.exit_code in ((0, 5) if command[0] == "downgrade" else (0,)), result.stderr  # 5: WAIT
    assert result.json() is not None and result.stdout.strip() not in ("", "[]", "{}")
    assert fetched(result) == 1 and "token endpoint http://127.0.0.1" in result.stderr


def test_client_conf(tool, broker, server, tmp_path):
    conf = tmp_path / "client.conf"
    # as Java's Properties.store() writes it: ':' escaped
    params = server.auth_params(scope="pulsar-admin").replace(":", "\\:")
    conf.write_text(
        f"webServiceUrl={broker.admin_url.replace(':', chr(92) + ':')}\n"
        f"authPlugin={OAUTH2_PLUGIN}\nauthParams={params}\n"
    )
    result = tool("get-txn-tc-batch-log-stat", "-o", "json", env={"PULSAR_CLIENT_CONF": str(conf)})
    assert result.exit_code == 0, result.stderr
    assert result.json()["coordinators"]


def pulsarctl_config(path: Path, broker, server, key_file: Path) -> Path:
    """The file `pulsarctl context set cloud --admin-service-url ... --issuer-endpoint ... --client-id ...
    --audience ... --key-file ...` writes (pulsarctl's own field names)."""
    path.write_text(f"""auth-info:
  cloud:
    locationoforigin: {path}
    tls_trust_certs_file_path: ""
    tls_allow_insecure_connection: false
    token: ""
    tokenFile: ""
    issuer_endpoint: {server.issuer}
    client_id: {ADMIN_CLIENT}
    audience: {AUDIENCE}
    scope: ""
    key_file: file://{key_file}
contexts:
  cloud:
    admin-service-url: {broker.admin_url}
    bookie-service-url: ""
current-context: cloud
""")
    return path


def test_pulsarctl_context(tool, broker, server, tmp_path):
    config = pulsarctl_config(tmp_path / "config", broker, server, server.key_file(ADMIN_CLIENT))
    current = tool("coordinators-list", "-o", "json", env={"PULSARCONFIG": str(config)})
    named = tool("coordinator-stats", "--context", "cloud", "-o", "json", env={"PULSARCONFIG": str(config)})
    for result in (current, named):
        assert result.exit_code == 0, result.stderr
        assert result.json()


def test_a_wrong_secret_is_one_sentence(tool, broker, server, outputs):
    wrong = json.dumps(
        {
            "type": "client_credentials",
            "issuerUrl": server.issuer,
            "audience": AUDIENCE,
            "privateKey": f"file://{server.key_file(ADMIN_CLIENT, secret='cs-WRONG-secret-xyz')}",
        }
    )
    args = [
        "coordinators-list",
        "--admin-url",
        broker.admin_url,
        "--auth-plugin",
        OAUTH2_PLUGIN,
        "--auth-params",
        wrong,
    ]
    plain = run_cli(args, env={"PULSARCONFIG": "/nonexistent", "NO_COLOR": "1", "COLUMNS": "200"})
    outputs.append(plain.stdout + plain.stderr)
    assert plain.exit_code == 4, plain.stderr
    last = plain.stderr.strip().splitlines()[-1]
    assert last.startswith("error: ") and "refused as unauthenticated (401)" in last and "Traceback" not in plain.stderr
    assert "cs-WRONG-secret-xyz" not in plain.stdout + plain.stderr
    debug = tool(*args)
    assert debug.exit_code == 4
    assert fetched(debug) == 2 and "fetching a new one and retrying once" in debug.stderr  # one retry, not more


def test_a_token_expiring_mid_run_is_fetched_again(broker, server, tmp_path, outputs):
    """The exporter observes the broker every 2 s for longer than a token lives: the tokens are
    renewed before they expire, no request is refused, and the target stays up."""
    log = tmp_path / "exporter.log"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PULSARCONFIG": "/nonexistent"}
    with log.open("w+") as sink:
        proc = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "pulsar_txn_cli",
                "exporter",
                "--port",
                "0",
                "--interval",
                "2",
                "--admin-url",
                broker.admin_url,
                "--auth-plugin",
                OAUTH2_PLUGIN,
                "--auth-params",
                server.auth_params(),
                "--debug",
            ],
            stdout=subprocess.DEVNULL,
            stderr=sink,
            env=env,
        )
        try:
            deadline = time.monotonic() + 60
            while not re.search(r"on (http://\S+)/metrics", log.read_text()) and time.monotonic() < deadline:
                assert proc.poll() is None, log.read_text()[-3000:]
                time.sleep(0.5)
            url = re.search(r"on (http://\S+)/metrics", log.read_text()).group(1)
            time.sleep(TOKEN_LIFETIME * 1.6)
            with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
                metrics = answer.read().decode()
        finally:
            proc.terminate()
            proc.wait(15)
    text = log.read_text()
    state = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert state, "the exporter recorded no checkpoint"
    outputs.extend([text, metrics, *(p.read_text(errors="replace") for p in state)])
    assert re.search(r"^pulsar_txn_exporter_up(\{[^}]*\})? 1\.0$", metrics, re.M), metrics[-2000:]
    tokens = len(re.findall(r"OAuth2: token \d+ for client", text))
    assert tokens >= 2, text[-3000:]  # renewed at least once while running
    assert "< 401" not in text and "HTTP 401" not in text  # renewed before the broker would refuse it


def test_no_secret_or_token_anywhere(tool, broker, server, outputs):
    """Last in the module: every output and log above, and the state files, hold no secret or token."""
    assert len(outputs) >= 6
    header = server.token().split(".")[0]
    secret = server.secrets[ADMIN_CLIENT]
    files = [p for p in tool.state.rglob("*") if p.is_file()]
    assert files, "no state file was written (downgrade check records a checkpoint)"
    for text in [*outputs, *(p.read_text(errors="replace") for p in files)]:
        assert secret not in text and "cs-WRONG-secret-xyz" not in text
        assert header not in text  # no JWT at all (the server's tokens all start with this header)
