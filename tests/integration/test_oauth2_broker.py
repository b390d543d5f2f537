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
from tests.conftest import assert_no_crash, run_cli
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
    assert last.startswith("error: ") and "refused as unauthenticated (401)" in last
    assert_no_crash(plain)
    assert "cs-WRONG-secret-xyz" not in plain.stdout + plain.stderr
    debug = tool(*args)
    assert debug.exit_code == 4
    assert fetched(debug) == 2 and "fetching a new one and retrying once" in debug.stderr  # one retry, not more


LIFETIMES = 3.3  # the long runs below outlive this many tokens


def _metric(text: str, name: str) -> float | None:
    found = re.search(rf"^{name}(?:\{{[^}}]*\}})? ([0-9.e+-]+)$", text, re.M)
    return float(found.group(1)) if found else None


@pytest.mark.timeout(600)
def test_tokens_expiring_again_and_again_under_the_exporter(broker, server, tmp_path, outputs):
    """The exporter observes the broker every 2 s for more than three token lifetimes, scraped every
    second: each token is renewed before it expires, no request is refused, no observation fails and
    no scrape finds the target down (no gap in the metrics)."""
    log = tmp_path / "exporter.log"
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PULSARCONFIG": "/nonexistent"}
    scrapes: list[str] = []
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
            while (
                _metric(scrapes[-1] if scrapes else "", "pulsar_txn_exporter_up") != 1 and time.monotonic() < deadline
            ):
                with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
                    scrapes = [answer.read().decode()]
                time.sleep(0.5)
            end = time.monotonic() + TOKEN_LIFETIME * LIFETIMES
            while time.monotonic() < end and len(scrapes) < 500:
                with urllib.request.urlopen(url + "/metrics", timeout=10) as answer:
                    scrapes.append(answer.read().decode())
                time.sleep(1)
        finally:
            proc.terminate()
            proc.wait(15)
    text = log.read_text()
    state = [p for p in (tmp_path / "state").rglob("*") if p.is_file()]
    assert state, "the exporter recorded no checkpoint"
    outputs.extend([text, *scrapes[-2:], *(p.read_text(errors="replace") for p in state)])
    assert len(scrapes) >= TOKEN_LIFETIME * LIFETIMES * 0.7, len(scrapes)
    gaps = [i for i, t in enumerate(scrapes) if _metric(t, "pulsar_txn_exporter_up") != 1]
    assert not gaps, scrapes[gaps[0]][-2000:] if gaps else ""
    assert all(_metric(t, "pulsar_txn_exporter_observation_failures_total") == 0 for t in scrapes), scrapes[-1][-2000:]
    observed = [_metric(t, "pulsar_txn_exporter_observations_total") for t in scrapes]
    assert observed[-1] - observed[0] >= TOKEN_LIFETIME * LIFETIMES / 2 * 0.6, observed  # it kept observing
    tokens = len(re.findall(r"OAuth2: token \d+ for client", text))
    assert tokens >= 3, text[-3000:]  # renewed again and again while running
    assert "< 401" not in text and "HTTP 401" not in text  # renewed before the broker would refuse it


@pytest.mark.timeout(600)
def test_tokens_expiring_again_and_again_during_a_long_wait(broker, server, tmp_path, outputs):
    """`downgrade check --wait` for more than three token lifetimes: no check fails, no 401, the tokens
    are renewed, and the run ends with the verdict it would have had (WAIT after --timeout: the logs'
    current ledgers do not roll on their own here)."""
    env = {**os.environ, "XDG_STATE_HOME": str(tmp_path / "state"), "PULSARCONFIG": "/nonexistent"}
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pulsar_txn_cli",
            "downgrade",
            "check",
            "--wait",
            "--interval",
            "3",
            "--timeout",
            str(int(TOKEN_LIFETIME * LIFETIMES)),
            "-o",
            "json",
            "--admin-url",
            broker.admin_url,
            "--auth-plugin",
            OAUTH2_PLUGIN,
            "--auth-params",
            server.auth_params(),
            "--debug",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=TOKEN_LIFETIME * LIFETIMES + 240,
    )
    outputs.append(done.stdout + done.stderr)
    assert done.returncode in (0, 5), done.stderr[-4000:]
    assert json.loads(done.stdout)["verdict"] in ("SAFE", "WAIT")
    assert not re.search(r"check \d+ failed", done.stderr), done.stderr[-4000:]  # "warning: check N failed: ..."
    checks = re.findall(r"^(?!debug:).*\bcheck (\d+)", done.stderr, re.M)
    assert checks and int(checks[-1]) >= TOKEN_LIFETIME * LIFETIMES / 3 * 0.5, checks[-5:]
    assert len(re.findall(r"OAuth2: token \d+ for client", done.stderr)) >= 3, done.stderr[-3000:]
    assert "< 401" not in done.stderr and "HTTP 401" not in done.stderr


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
