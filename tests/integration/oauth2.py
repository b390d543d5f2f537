"""A real OAuth2/OIDC server and a real broker that trusts its tokens, for the `secured` OAuth2 tests.

The server is NAV's mock-oauth2-server (no.nav.security:mock-oauth2-server from Maven Central, a
standalone JVM application; its classpath is resolved by the Maven module in oauth2server/). It
serves OIDC discovery, a JWKS and a client-credentials token endpoint on 127.0.0.1, and signs RS256
JWTs with a key of its own.

It accepts any client secret: what a token says is chosen by request mappings on the token
request's form. Here the right secret of each client maps to a token with that client's subject
and the broker's audience; any other secret gets the server's default token, with neither, which
the broker refuses (401). So a wrong secret fails at the broker, after pulsar-txn's one retry with
a fresh token, not at the token endpoint (the fast suite covers an `invalid_client` answer).

The broker: Pulsar's OIDC provider (org.apache.pulsar:pulsar-broker-auth-oidc) is not on Maven
Central (`mvn dependency:get` finds neither 4.0.7 nor 3.0.0), so the broker validates the tokens
with AuthenticationProviderToken and the server's public key (taken from its JWKS), checking the
audience claim (tokenAudienceClaim/tokenAudience). The broker's own client authenticates with
Pulsar's Java AuthenticationOAuth2 against the same server.
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
import urllib.request
from pathlib import Path

import harness

MODULE_DIR = Path(__file__).resolve().parent / "oauth2server"
CLASSPATH_FILE = MODULE_DIR / "target" / "classpath.txt"
MAIN = "no.nav.security.mock.oauth2.StandaloneMockOAuth2ServerKt"
ISSUER_ID = "pulsar"
AUDIENCE = "urn:pulsar:txn-tests"
ADMIN_CLIENT, BROKER_CLIENT = "txn-admin", "broker"
TOKEN_LIFETIME = 20  # seconds: short, so that one run of pulsar-txn outlives a token
OAUTH2_PLUGIN = "org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2"


def classpath(log=print) -> str:
    """mock-oauth2-server's runtime classpath, resolved by Maven on first use (then from ~/.m2)."""
    if not CLASSPATH_FILE.exists() or not all(
        Path(p).exists() for p in CLASSPATH_FILE.read_text().strip().split(os.pathsep)
    ):
        cmd = [
            "mvn",
            "-B",
            "-q",
            "-s",
            str(MODULE_DIR.parent / "harness" / "settings.xml"),
            "-f",
            str(MODULE_DIR / "pom.xml"),
            "generate-resources",
        ]
        log("oauth2: " + " ".join(cmd))
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
        if done.returncode != 0:
            raise RuntimeError(
                "resolving mock-oauth2-server from Maven Central failed:\n" + (done.stdout + done.stderr)[-3000:]
            )
    return CLASSPATH_FILE.read_text().strip()


class OAuth2Server:
    """mock-oauth2-server on a free port of 127.0.0.1, with one secret per client."""

    def __init__(self, directory: Path):
        self.dir = directory
        self.dir.mkdir(parents=True, exist_ok=True)
        self.port = harness.free_port()
        self.issuer = f"http://127.0.0.1:{self.port}/{ISSUER_ID}"
        self.secrets = {client: "cs-" + secrets.token_urlsafe(18) for client in (ADMIN_CLIENT, BROKER_CLIENT)}
        self.proc: subprocess.Popen | None = None
        self.log_path = directory / "oauth2-server.log"

    def config(self) -> dict:
        mappings = [
            {"requestParam": "client_secret", "match": secret, "claims": {"sub": client, "aud": [AUDIENCE]}}
            for client, secret in self.secrets.items()
        ]
        return {
            "interactiveLogin": False,
            "tokenCallbacks": [{"issuerId": ISSUER_ID, "tokenExpiry": TOKEN_LIFETIME, "requestMappings": mappings}],
        }

    def start(self, timeout: float = 90) -> None:
        env = {
            **os.environ,
            "SERVER_HOSTNAME": "127.0.0.1",
            "SERVER_PORT": str(self.port),
            "JSON_CONFIG": json.dumps(self.config()),
        }
        cmd = ["java", "-Xmx192m", "-XX:TieredStopAtLevel=1", "-cp", classpath(), MAIN]
        with self.log_path.open("wb") as log:
            self.proc = subprocess.Popen(cmd, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                raise RuntimeError(
                    f"mock-oauth2-server exited with {self.proc.returncode}:\n{self.log_path.read_text()[-3000:]}"
                )
            try:
                self.discovery()
                return
            except OSError:
                time.sleep(0.5)
        self.stop()
        raise RuntimeError(f"mock-oauth2-server not ready after {timeout}s:\n{self.log_path.read_text()[-3000:]}")

    def discovery(self) -> dict:
        with urllib.request.urlopen(f"{self.issuer}/.well-known/openid-configuration", timeout=5) as answer:
            return json.load(answer)

    def public_key_der(self) -> Path:
        """The server's signing key (its JWKS) as the DER file the broker's tokenPublicKey takes."""
        from cryptography.hazmat.primitives import serialization
        from jwt.algorithms import RSAAlgorithm

        with urllib.request.urlopen(self.discovery()["jwks_uri"], timeout=5) as answer:
            keys = json.load(answer)["keys"]
        key = RSAAlgorithm.from_jwk(json.dumps(keys[0]))
        path = self.dir / "issuer-public.der"
        path.write_bytes(key.public_bytes(serialization.Encoding.DER, serialization.PublicFormat.SubjectPublicKeyInfo))
        return path

    def key_file(self, client: str, secret: str | None = None) -> Path:
        """A key file as Pulsar's and pulsarctl's OAuth2 clients read it (client_id, client_secret)."""
        path = self.dir / f"{client}-{'wrong' if secret else 'key'}.json"
        path.write_text(
            json.dumps(
                {"type": "client_credentials", "client_id": client, "client_secret": secret or self.secrets[client]}
            )
        )
        return path

    def token(self, client: str = ADMIN_CLIENT) -> str:
        form = {
            "grant_type": "client_credentials",
            "client_id": client,
            "client_secret": self.secrets[client],
            "audience": AUDIENCE,
        }
        body = "&".join(f"{k}={v}" for k, v in form.items()).encode()
        with urllib.request.urlopen(self.discovery()["token_endpoint"], data=body, timeout=10) as answer:
            return json.load(answer)["access_token"]

    def auth_params(self, client: str = ADMIN_CLIENT, **more) -> str:
        return json.dumps(
            {
                "type": "client_credentials",
                "issuerUrl": self.issuer,
                "privateKey": f"file://{self.key_file(client)}",
                "audience": AUDIENCE,
                **more,
            }
        )

    def stop(self) -> None:
        proc, self.proc = self.proc, None
        if proc and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()


class OAuth2Broker(harness.PulsarBroker):
    """A broker whose harness calls (readiness, the ping workload) carry a fresh token from the server."""

    def __init__(self, server: OAuth2Server, extra_conf: dict, name: str):
        self.server = server
        self._token, self._fetched = None, 0.0
        super().__init__(extra_conf, name=name)

    @property
    def token(self) -> str:
        if self._token is None or time.monotonic() - self._fetched > TOKEN_LIFETIME / 2:
            self._token, self._fetched = self.server.token(), time.monotonic()
        return self._token

    @token.setter
    def token(self, _value) -> None:  # PulsarBroker.__init__ sets None: the server is the source
        pass

    def workload_auth(self) -> dict[str, str]:
        # Pulsar's own OAuth2 plugin, which fetches a token when it needs one: a fixed token, up to half its
        # 20 s old when passed, expired in CI before a JVM started under load had created its topics (401).
        return {"auth-plugin": OAUTH2_PLUGIN, "auth-params": self.server.auth_params(ADMIN_CLIENT)}


def broker_conf(server: OAuth2Server) -> dict:
    return {
        "authenticationEnabled": "true",
        "authenticationProviders": "org.apache.pulsar.broker.authentication.AuthenticationProviderToken",
        "tokenPublicKey": f"file://{server.public_key_der()}",
        "tokenPublicAlg": "RS256",
        "tokenAudienceClaim": "aud",
        "tokenAudience": AUDIENCE,
        "authorizationEnabled": "true",
        "superUserRoles": f"{ADMIN_CLIENT},{BROKER_CLIENT}",
        "brokerClientAuthenticationPlugin": OAUTH2_PLUGIN,
        "brokerClientAuthenticationParameters": server.auth_params(BROKER_CLIENT),
    }


def start_oauth2_broker(server: OAuth2Server) -> OAuth2Broker:
    broker = OAuth2Broker(server, {"managedLedgerMaxEntriesPerLedger": 50, **broker_conf(server)}, name="oauth2")
    try:
        broker.start()
    except BaseException:
        broker.cleanup()
        raise
    harness.SESSION_BROKERS.append(broker)
    return broker
