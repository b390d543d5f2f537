"""OAuth2 client credentials, as Pulsar's AuthenticationOAuth2 does them.

The parameters come as Pulsar's JSON (`type`, `issuerUrl`, `privateKey`, `audience`, `scope`) from
--auth-params or client.conf; config.py turns a pulsarctl context (`issuer_endpoint`, `key_file`,
`client_id`, ...) into the same. The key file (`file://` URL, `data:` URL or path) holds `client_id`
and `client_secret` (a `clientId` parameter, pulsarctl's client_id, is used when it has none).

The flow itself is authlib's (OAuth2Client over httpx): the secret goes in the token request's
form, as Pulsar's Java client sends it (client_secret_post). The token endpoint is found through
`<issuerUrl>/.well-known/openid-configuration`. Tokens live in memory only, cached until shortly
before they expire; `invalidate()` drops one the broker refused. The secret and every token are
registered with redact() the moment they are known. The token requests go through the proxies the
environment names (HTTPS_PROXY, HTTP_PROXY, NO_PROXY), as the admin calls do.
"""

from __future__ import annotations

import base64
import json
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlsplit

from pulsar_txn_cli.transport import redact
from pulsar_txn_cli.errors import ConnectionFailed, UsageError

PLUGINS = ("org.apache.pulsar.client.impl.auth.oauth2.AuthenticationOAuth2", "AuthenticationOAuth2", "oauth2")
MAX_LEEWAY = 30.0  # refresh this long before expiry at most (a tenth of the lifetime for short tokens)


@dataclass(frozen=True)
class OAuth2Params:
    issuer_url: str
    client_id: str
    client_secret: str = field(repr=False)
    audience: str | None = None
    scope: str | None = None
    key_source: str = ""  # where the key came from, for messages (never the key itself)


def from_auth_params(values: dict) -> OAuth2Params:
    """Pulsar's AuthenticationOAuth2 parameters (already split into a dict)."""
    kind = values.get("type", "client_credentials")
    if kind != "client_credentials":
        raise UsageError(
            f"--auth-params for AuthenticationOAuth2 has type {kind!r}; only client_credentials is supported"
        )
    issuer, key = values.get("issuerUrl"), values.get("privateKey")
    if not issuer or not key:
        raise UsageError(
            "--auth-params for AuthenticationOAuth2 needs issuerUrl and privateKey "
            '({"type": "client_credentials", "issuerUrl": "...", "privateKey": "file:///..."})'
        )
    return _params(issuer, key, values.get("audience"), values.get("scope"), values.get("clientId"))


def _params(issuer: str, key: str, audience, scope, client_id) -> OAuth2Params:
    if not str(issuer).startswith(("http://", "https://")):
        raise UsageError(f"OAuth2 issuer URL {issuer!r} must start with http:// or https://")
    redact.register(key)  # a data: URL carries the secret itself
    doc, where = _read_key(str(key))
    secret = doc.get("client_secret")
    client_id = doc.get("client_id") or client_id
    if not client_id or not secret:
        raise UsageError(f"the OAuth2 key file {where} needs client_id and client_secret")
    redact.register(str(secret))
    return OAuth2Params(str(issuer).rstrip("/"), str(client_id), str(secret), audience or None, scope or None, where)


def _read_key(key: str) -> tuple[dict, str]:
    """(the key file's JSON, where it came from) for a file:// URL, a data: URL or a plain path."""
    if key.startswith("data:"):
        where = "given as a data: URL"
        meta, _, payload = key[len("data:") :].partition(",")
        try:
            text = base64.b64decode(payload).decode() if meta.endswith(";base64") else unquote(payload)
        except ValueError:
            raise UsageError("the OAuth2 key (a data: URL) is not valid base64") from None
    else:
        path = urlsplit(key).path if key.startswith("file:") else key
        where = path
        try:
            text = Path(path).expanduser().read_text()
        except OSError as exc:
            raise UsageError(f"cannot read the OAuth2 key file {path}: {exc.strerror or exc}") from None
    try:
        doc = json.loads(text)
    except ValueError:
        raise UsageError(f"the OAuth2 key file {where} is not JSON (expected client_id and client_secret)") from None
    if not isinstance(doc, dict):
        raise UsageError(f"the OAuth2 key file {where} is not a JSON object (expected client_id and client_secret)")
    return doc, where


class TokenSource:
    """Access tokens for one client, fetched when missing or about to expire."""

    def __init__(self, params: OAuth2Params, *, verify=True, timeout: float = 30.0, log=None, clock=time.time):
        self.params = params
        self.verify = verify
        self.timeout = timeout
        self.log = log
        self.clock = clock
        self.fetches = 0
        self._endpoint: str | None = None
        self._token: str | None = None
        self._expires_at = 0.0
        self._leeway = 0.0
        self._lock = threading.Lock()  # commands send requests from several threads; one fetch at a time

    def bearer(self) -> str:
        with self._lock:
            if self._token is None or self.clock() >= self._expires_at - self._leeway:
                self._fetch()
            return self._token

    def invalidate(self, refused: str) -> None:
        """Forget the refused token, unless another request already replaced it: the next bearer() fetches."""
        with self._lock:
            if self._token == refused:
                self._token = None

    def _client(self):
        import warnings

        with warnings.catch_warnings():  # authlib 1.9 announces a move to httpx2; it runs on httpx meanwhile
            warnings.simplefilter("ignore", DeprecationWarning)
            from authlib.integrations.httpx_client import OAuth2Client

        return OAuth2Client(
            self.params.client_id,
            self.params.client_secret,
            scope=self.params.scope,
            token_endpoint_auth_method="client_secret_post",
            verify=self.verify,
            timeout=self.timeout,
            trust_env=True,  # HTTP(S)_PROXY and NO_PROXY, as for the admin calls (http_pool.proxies_from)
        )

    def _fetch(self) -> None:
        import httpx
        from authlib.integrations.base_client import OAuthError

        issuer = self.params.issuer_url
        with self._client() as client:
            try:
                endpoint = self._endpoint or self._discover(client)
                extra = {"audience": self.params.audience} if self.params.audience else {}
                token = client.fetch_token(endpoint, grant_type="client_credentials", **extra)
            except OAuthError as exc:
                said = f": {exc.description}" if exc.description else ""
                raise ConnectionFailed(
                    f"the OAuth2 server {issuer} refused client {self.params.client_id!r} ({exc.error}{redact.redact(said)}); "
                    f"check client_id and client_secret in the key file {self.params.key_source}, the audience and the scope",
                    status=401,
                ) from None
            except httpx.HTTPStatusError as exc:
                raise ConnectionFailed(
                    f"the OAuth2 server {issuer} answered HTTP {exc.response.status_code} to the token request of client "
                    f"{self.params.client_id!r}; check the issuer URL and the client's credentials",
                    status=exc.response.status_code,
                ) from None
            except httpx.HTTPError as exc:
                text = redact.redact(exc) or type(exc).__name__
                check = (
                    "the issuer's certificate (--tls-trust-cert-path)"
                    if "certificate" in text.lower() or "SSL" in text
                    else "the issuer URL"
                )
                raise ConnectionFailed(f"cannot reach the OAuth2 server {issuer} ({text}); check {check}") from None
            except ValueError:
                raise ConnectionFailed(
                    f"the OAuth2 server {issuer} answered the token request with something that is "
                    "not a token response; check the issuer URL"
                ) from None
        access = token.get("access_token")
        if not access:
            raise ConnectionFailed(f"the OAuth2 server {issuer} answered without an access_token; check the issuer URL")
        redact.register(access)
        lifetime = float(token.get("expires_in") or 3600)
        self._token, self.fetches = access, self.fetches + 1
        self._expires_at = self.clock() + lifetime
        self._leeway = min(MAX_LEEWAY, lifetime / 10)
        self._log(
            f"OAuth2: token {self.fetches} for client {self.params.client_id!r} from {issuer}, valid {lifetime:g}s"
        )

    def _discover(self, client) -> str:
        url = f"{self.params.issuer_url}/.well-known/openid-configuration"
        response = client.request("GET", url, withhold_token=True)
        if response.status_code != 200:
            raise ConnectionFailed(
                f"OAuth2 discovery at {url} answered HTTP {response.status_code}; check the issuer URL "
                "(issuerUrl / issuer_endpoint)",
                status=response.status_code,
            )
        try:
            endpoint = response.json()["token_endpoint"]
        except (ValueError, KeyError, TypeError):
            raise ConnectionFailed(f"OAuth2 discovery at {url} names no token_endpoint; check the issuer URL") from None
        self._log(f"OAuth2: token endpoint {endpoint}")
        self._endpoint = endpoint
        return endpoint

    def _log(self, message: str) -> None:
        if self.log:
            self.log(redact.redact(message))
