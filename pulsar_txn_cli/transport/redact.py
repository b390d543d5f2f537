"""Keep credentials out of every message, log line and repr.

Secrets are registered once when the target is resolved; `redact()` then scrubs them from any
text (server answers echo headers or URLs back sometimes), and `redact_headers()` masks the
headers that carry credentials whatever their value.
"""

from __future__ import annotations

import re
import threading

MASK = "***"
_SECRET_HEADERS = {"authorization", "proxy-authorization", "cookie", "set-cookie", "x-pulsar-auth-method-name"}
_BEARER = re.compile(r"(?i)(bearer\s+)[A-Za-z0-9._~+/=-]+")
_TOKEN_PARAM = re.compile(r"(?i)\b(token:)(?!//)[^\s,\"']+")
# OAuth2: a client secret or token in a form body, a query or JSON (client_secret=..., "access_token": "...")
_OAUTH2_FIELD = re.compile(
    r"(?i)\b((?:client_secret|access_token|refresh_token|id_token)[\"']?\s*[:=]\s*[\"']?)[^\s&,\"'}]+"
)

_lock = threading.Lock()
_secrets: set[str] = set()


def register(secret: str | None) -> None:
    """Remember a secret so that redact() removes it everywhere from now on."""
    if secret and len(secret) >= 4:
        with _lock:
            _secrets.add(secret)


def redact(text: object) -> str:
    """text with every registered secret, bearer credential, `token:...` parameter and OAuth2 secret field masked."""
    value = str(text)
    with _lock:
        secrets = sorted(_secrets, key=len, reverse=True)
    for secret in secrets:
        value = value.replace(secret, MASK)
    value = _BEARER.sub(lambda m: m.group(1) + MASK, value)
    value = _OAUTH2_FIELD.sub(lambda m: m.group(1) + MASK, value)
    return _TOKEN_PARAM.sub(lambda m: m.group(1) + MASK, value)


def redact_headers(headers) -> dict[str, str]:
    """Headers as a dict with credential-bearing values masked."""
    return {k: (MASK if k.lower() in _SECRET_HEADERS else redact(v)) for k, v in dict(headers).items()}


def without_credentials(url: str) -> str:
    """A URL without the user and password it may carry (`http://user:pw@host` -> `http://host`), for a command
    printed to be pasted: the operator supplies credentials, as with a token."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        return url
    authority, slash, path = rest.partition("/")
    return f"{scheme}://{authority.rpartition('@')[2]}{slash}{path}"
