"""Which target to talk to and how: flags > environment > named context > client.conf > default.

Layers are merged setting by setting, so a token from the environment applies to a URL from
client.conf. The first layer that names a target (a URL or an engine directory) decides whether
it is a cluster or the engine; naming both in one layer is a usage error.

Environment variables (the tool's own, kept few):
  PULSAR_TXN_ADMIN_URL, PULSAR_TXN_ENGINE_DIR, PULSAR_TXN_CONTEXT, PULSAR_TXN_TOKEN, PULSAR_TXN_TOKEN_FILE
and Pulsar's own PULSAR_CLIENT_CONF (a client.conf file).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from pulsar_txn_cli.admin import redact
from pulsar_txn_cli.errors import UsageError

ENV_ADMIN_URL = "PULSAR_TXN_ADMIN_URL"
ENV_ENGINE_DIR = "PULSAR_TXN_ENGINE_DIR"
ENV_CONTEXT = "PULSAR_TXN_CONTEXT"
ENV_TOKEN = "PULSAR_TXN_TOKEN"
ENV_TOKEN_FILE = "PULSAR_TXN_TOKEN_FILE"
ENV_CLIENT_CONF = "PULSAR_CLIENT_CONF"

TOKEN_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "AuthenticationToken", "token")
TLS_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationTls", "AuthenticationTls", "tls")

SETTINGS = (
    "admin_url", "engine_dir", "auth_plugin", "auth_params", "token", "token_file",
    "tls_trust_cert_path", "tls_allow_insecure", "tls_enable_hostname_verification",
    "tls_cert_file", "tls_key_file", "request_timeout",
)


@dataclass
class Target:
    """A resolved target. The token is never part of repr() or describe()."""

    kind: str  # "cluster" or "engine"
    url: str | None = None
    engine_dir: str | None = None
    token: str | None = field(default=None, repr=False)
    tls_trust_cert_path: str | None = None
    tls_allow_insecure: bool = False
    tls_enable_hostname_verification: bool = True
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    request_timeout: float = 30.0
    source: str = "default"  # where the target itself came from, for messages

    def describe(self) -> str:
        return f"cluster {self.url}" if self.kind == "cluster" else f"engine {self.engine_dir}"


def resolve(flags, environ: dict | None = None, home: Path | None = None) -> Target:
    """The target for these flags (a TargetFlags or anything with the same attributes)."""
    environ = os.environ if environ is None else environ
    layers: list[tuple[str, dict]] = [("flags", {k: getattr(flags, k, None) for k in SETTINGS})]
    layers.append(("environment", _from_env(environ)))
    context = getattr(flags, "context", None) or environ.get(ENV_CONTEXT)
    if context:
        layers.append((f"context {context}", read_context(context, home)))
    conf = environ.get(ENV_CLIENT_CONF)
    if conf:
        layers.append((f"client.conf {conf}", read_client_conf(Path(conf))))
    merged: dict = {}
    source = "default"
    for name, values in layers:
        if values.get("admin_url") and values.get("engine_dir"):
            raise UsageError(f"{name} names both an admin URL and an engine directory; give only one target")
        if "admin_url" not in merged and "engine_dir" not in merged and (values.get("admin_url") or values.get("engine_dir")):
            source = name
        for key, value in values.items():
            if value is not None and value != "" and key not in merged:
                if key in ("admin_url", "engine_dir") and ("admin_url" in merged or "engine_dir" in merged):
                    continue  # a higher layer already chose the target
                merged[key] = value
    return _build(merged, source)


def _build(s: dict, source: str) -> Target:
    timeout = _number(s.get("request_timeout", 30.0), "--request-timeout")
    if s.get("admin_url"):
        url = str(s["admin_url"]).rstrip("/")
        if not url.startswith(("http://", "https://")):
            raise UsageError(f"admin URL {url!r} ({source}) must start with http:// or https://")
        cert, key = s.get("tls_cert_file"), s.get("tls_key_file")
        token, cert, key = _auth(s, cert, key)
        if bool(cert) != bool(key):
            raise UsageError("--tls-cert-file and --tls-key-file go together; give both or neither")
        redact.register(token)
        return Target(
            kind="cluster", url=url, token=token,
            tls_trust_cert_path=s.get("tls_trust_cert_path"),
            tls_allow_insecure=_bool(s.get("tls_allow_insecure", False)),
            tls_enable_hostname_verification=_bool(s.get("tls_enable_hostname_verification", True)),
            tls_cert_file=cert, tls_key_file=key, request_timeout=timeout, source=source,
        )
    engine_dir = s.get("engine_dir") or default_engine_dir()
    return Target(kind="engine", engine_dir=str(Path(engine_dir).expanduser()), request_timeout=timeout, source=source)


def default_engine_dir() -> str:
    import platformdirs

    return str(Path(platformdirs.user_data_dir("pulsar-txn")) / "engine")


def _auth(s: dict, cert, key):
    """(token, client cert, client key) from --token/--token-file/--auth-plugin/--auth-params."""
    token = s.get("token")
    if token is None and s.get("token_file"):
        token = _read_secret(s["token_file"], "--token-file")
    plugin, params = s.get("auth_plugin"), s.get("auth_params")
    if token is None and params:
        if plugin and plugin in TLS_PLUGINS:
            values = _kv_params(params)
            cert = cert or values.get("tlsCertFile")
            key = key or values.get("tlsKeyFile")
        elif plugin and plugin not in TOKEN_PLUGINS:
            raise UsageError(f"auth plugin {plugin} is not supported; use token authentication or TLS client certificates")
        else:
            redact.register(params)  # token parameters are secret as a whole (token:XXX, JSON)
            token = _token_from_params(params)
    if token is not None:
        token = token.strip()
        if not token:
            raise UsageError("the token is empty; check --token, --token-file or --auth-params")
    return token, cert, key


def _token_from_params(params: str) -> str:
    """Pulsar's AuthenticationToken parameters: token:XXX, file:///path, JSON, or the bare token."""
    params = params.strip()
    if params.startswith("{"):
        try:
            values = json.loads(params)
        except ValueError:
            raise UsageError("--auth-params looks like JSON but is not valid JSON") from None
        if values.get("token"):
            return str(values["token"])
        if values.get("file"):
            return _token_from_params(str(values["file"]))
        raise UsageError("--auth-params JSON needs a \"token\" or \"file\" key")
    if params.startswith("token:"):
        return params[len("token:"):]
    if params.startswith("file:"):
        path = params[len("file:"):]
        path = path[2:] if path.startswith("//") else path
        return _read_secret(path, "--auth-params file:")
    return params


def _kv_params(params: str) -> dict[str, str]:
    if params.strip().startswith("{"):
        try:
            return {k: str(v) for k, v in json.loads(params).items()}
        except ValueError:
            raise UsageError("--auth-params looks like JSON but is not valid JSON") from None
    pairs = (item.split(":", 1) for item in params.split(",") if ":" in item)
    return {k.strip(): v.strip() for k, v in pairs}


def _read_secret(path: str, what: str) -> str:
    try:
        return Path(path).expanduser().read_text().strip()
    except OSError as exc:
        raise UsageError(f"cannot read the token file {path} ({what}): {exc.strerror or exc}") from None


def _from_env(environ) -> dict:
    return {
        "admin_url": environ.get(ENV_ADMIN_URL),
        "engine_dir": environ.get(ENV_ENGINE_DIR),
        "token": environ.get(ENV_TOKEN),
        "token_file": environ.get(ENV_TOKEN_FILE),
    }


def _bool(value) -> bool:
    if isinstance(value, bool):
        return value
    return str(value).strip().lower() in ("true", "1", "yes", "on")


def _number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number of seconds, not {value!r}") from None
    if number <= 0:
        raise UsageError(f"{what} must be positive, not {value!r}")
    return number


# --- Pulsar's client.conf (Java properties) -------------------------------------------------

def read_client_conf(path: Path) -> dict:
    try:
        text = path.read_text()
    except OSError as exc:
        raise UsageError(f"cannot read {ENV_CLIENT_CONF}={path}: {exc.strerror or exc}") from None
    props = parse_properties(text)
    return {
        "admin_url": props.get("webServiceUrl") or None,
        "auth_plugin": props.get("authPlugin") or None,
        "auth_params": props.get("authParams") or None,
        "tls_trust_cert_path": props.get("tlsTrustCertsFilePath") or None,
        "tls_allow_insecure": props.get("tlsAllowInsecureConnection") or None,
        "tls_enable_hostname_verification": props.get("tlsEnableHostnameVerification") or None,
    }


def parse_properties(text: str) -> dict[str, str]:
    """The subset of java.util.Properties that client.conf files use (comments, continuations, = : or space)."""
    props: dict[str, str] = {}
    logical = ""
    for raw in text.splitlines():
        line = raw.strip() if not logical else raw.lstrip()
        if not logical and (not line or line[0] in "#!"):
            continue
        if line.endswith("\\") and not line.endswith("\\\\"):
            logical += line[:-1]
            continue
        logical += line
        key, value = _split_property(logical)
        props[key] = value
        logical = ""
    return props


def _split_property(line: str) -> tuple[str, str]:
    for index, char in enumerate(line):
        if char in "=: \t":
            rest = line[index:].lstrip(" \t")
            if rest[:1] in ("=", ":") and char in " \t":
                rest = rest[1:]
            elif char in "=:":
                rest = rest[1:]
            return line[:index], rest.strip()
    return line, ""


# --- pulsarctl's ~/.config/pulsar/config contexts ---------------------------------------------

def pulsarctl_config_path(home: Path | None = None) -> Path:
    return (home or Path.home()) / ".config" / "pulsar" / "config"


def read_context(name: str, home: Path | None = None) -> dict:
    path = pulsarctl_config_path(home)
    try:
        doc = parse_simple_yaml(path.read_text())
    except OSError:
        raise UsageError(f"context {name!r} needs pulsarctl's config file, but {path} cannot be read") from None
    contexts = doc.get("contexts") or {}
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise UsageError(f"no context {name!r} in {path} (known: {known})")
    ctx = contexts[name] or {}
    auth = (doc.get("auth-info") or {}).get(name) or {}
    return {
        "admin_url": ctx.get("admin-service-url") or None,
        "token": auth.get("token") or None,
        "token_file": auth.get("tokenFile") or None,
        "tls_trust_cert_path": auth.get("tls_trust_certs_file_path") or None,
        "tls_allow_insecure": auth.get("tls_allow_insecure_connection") or None,
        "tls_enable_hostname_verification": auth.get("tls_enable_hostname_verification"),
    }


def parse_simple_yaml(text: str) -> dict:
    """Nested mappings of scalars, the only YAML that pulsarctl writes (no lists, no anchors)."""
    root: dict = {}
    stack: list[tuple[int, dict]] = [(-1, root)]
    for number, raw in enumerate(text.splitlines(), 1):
        line = _strip_comment(raw).rstrip()
        if not line.strip() or line.strip() == "---":
            continue
        indent = len(line) - len(line.lstrip(" "))
        key, sep, value = line.strip().partition(":")
        if not sep or key.startswith("- "):
            raise UsageError(f"pulsarctl config line {number} is not a 'key: value' mapping this tool can read")
        while stack[-1][0] >= indent:
            stack.pop()
        parent = stack[-1][1]
        key = _scalar(key)
        if value.strip() == "":
            parent[key] = {}
            stack.append((indent, parent[key]))
        else:
            parent[key] = _scalar(value.strip())
    return root


def _strip_comment(line: str) -> str:
    quote = None
    for index, char in enumerate(line):
        if char in "'\"":
            quote = None if quote == char else (quote or char)
        elif char == "#" and quote is None and (index == 0 or line[index - 1] in " \t"):
            return line[:index]
    return line


def _scalar(text: str):
    if len(text) >= 2 and text[0] == text[-1] and text[0] in "'\"":
        return text[1:-1]
    lowered = text.lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("null", "~"):
        return None
    return text
