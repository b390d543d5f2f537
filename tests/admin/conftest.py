import subprocess
from pathlib import Path

import pytest

from pulsar_txn_cli.admin.client import PulsarAdmin
from pulsar_txn_cli.target.settings import Target
from pulsar_txn_cli.transport.http_client import RestTransport

TOKEN = "s3cr3t-T0KEN.abcdef"


@pytest.fixture(autouse=True)
def isolated_env(monkeypatch, tmp_path):
    """No stray configuration from the machine: a private HOME, state dir, no target or proxy variables."""
    for name in (
        "PULSAR_TXN_ADMIN_URL",
        "PULSAR_TXN_ENGINE_DIR",
        "PULSAR_TXN_CONTEXT",
        "PULSAR_TXN_TOKEN",
        "PULSAR_TXN_TOKEN_FILE",
        "PULSAR_CLIENT_CONF",
        *(f"{scheme}_proxy" for scheme in ("http", "https", "all", "no")),
        *(f"{scheme}_PROXY" for scheme in ("HTTP", "HTTPS", "ALL", "NO")),
    ):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


class Sleeps(list):
    """Records the delays the transport asks for instead of sleeping (values are checked, not timing)."""

    def __call__(self, seconds):
        self.append(seconds)


def rest_admin(url, *, token=TOKEN, timeout=5.0, retries=3, sleeps=None, **target_kw):
    target = Target(kind="cluster", url=url, token=token, request_timeout=timeout, **target_kw)
    transport = RestTransport(target, retries=retries, sleep=sleeps if sleeps is not None else Sleeps())
    return PulsarAdmin(transport, target)


@pytest.fixture(scope="session")
def self_signed(tmp_path_factory):
    """A self-signed certificate for 127.0.0.1 made with the openssl CLI (skipped without it)."""
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    try:
        subprocess.run(
            [
                "openssl",
                "req",
                "-x509",
                "-newkey",
                "rsa:2048",
                "-nodes",
                "-days",
                "2",
                "-subj",
                "/CN=localhost",
                "-addext",
                "subjectAltName=IP:127.0.0.1,DNS:localhost",
                "-keyout",
                str(key),
                "-out",
                str(cert),
            ],
            check=True,
            capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError):
        pytest.fail("the openssl CLI is needed to make a test certificate (Debian: apt-get install openssl)")
    return Path(cert), Path(key)
