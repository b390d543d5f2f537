"""Which target to talk to and how, first match wins setting by setting:

  flags > environment > named pulsarctl context (--context, PULSAR_TXN_CONTEXT) > client.conf
  (PULSAR_CLIENT_CONF, else $PULSAR_HOME/conf/client.conf, as pulsar-admin reads it) > pulsarctl's
  current-context > the default engine.

Layers are merged setting by setting, so a token from the environment applies to a URL from
client.conf. The first layer that names a target (a URL or an engine directory) decides whether
it is a cluster or the engine; naming both in one layer is a usage error.

Environment variables (the tool's own, kept few):
  PULSAR_TXN_ADMIN_URL, PULSAR_TXN_ENGINE_DIR, PULSAR_TXN_CONTEXT, PULSAR_TXN_TOKEN, PULSAR_TXN_TOKEN_FILE
and Pulsar's own PULSAR_CLIENT_CONF and PULSAR_HOME, and pulsarctl's PULSARCONFIG (its config file).
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field, fields
from pathlib import Path
from urllib.parse import unquote, urlsplit, urlunsplit

from pulsar_txn_cli.transport import oauth2, redact
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.names import parse_bool

ENV_ADMIN_URL = "PULSAR_TXN_ADMIN_URL"
ENV_ENGINE_DIR = "PULSAR_TXN_ENGINE_DIR"
ENV_CONTEXT = "PULSAR_TXN_CONTEXT"
ENV_TOKEN = "PULSAR_TXN_TOKEN"
ENV_TOKEN_FILE = "PULSAR_TXN_TOKEN_FILE"
ENV_CLIENT_CONF = "PULSAR_CLIENT_CONF"
ENV_PULSAR_HOME = "PULSAR_HOME"
ENV_PULSARCTL_CONFIG = "PULSARCONFIG"

TOKEN_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationToken", "AuthenticationToken", "token")
TLS_PLUGINS = (
    "org.apache.pulsar.client.impl.auth.AuthenticationTls",
    "AuthenticationTls",
    "tls",
    "org.apache.pulsar.client.impl.auth.AuthenticationTLS",
    "AuthenticationTLS",
)
BASIC_PLUGINS = ("org.apache.pulsar.client.impl.auth.AuthenticationBasic", "AuthenticationBasic", "basic")


def _flag(option: str, help: str):
    return field(default=None, metadata={"option": option, "help": help})


@dataclass
class TargetFlags:
    """The target flags, declared once: each field is one command-line option exactly as given (None =
    not given), with its option name and help text, from which cli/common.py makes the options."""

    admin_url: str | None = _flag("--admin-url", "Pulsar admin URL (webServiceUrl), e.g. http://broker:8080.")
    engine_dir: str | None = _flag("--engine-dir", "Embedded engine directory (default: the user data directory).")
    context: str | None = _flag("--context", "A pulsarctl context from ~/.config/pulsar/config.")
    auth_plugin: str | None = _flag(
        "--auth-plugin",
        "Authentication plugin class, as in client.conf (token, basic, TLS, OAuth2 client credentials).",
    )
    auth_params: str | None = _flag(
        "--auth-params",
        "Authentication parameters, e.g. token:XXX, file:///path or OAuth2's JSON (issuerUrl, privateKey, audience).",
    )
    token: str | None = _flag("--token", "Bearer token (prefer --token-file).")
    token_file: str | None = _flag("--token-file", "File that holds the bearer token.")
    tls_trust_cert_path: str | None = _flag("--tls-trust-cert-path", "CA bundle that signs the broker's certificate.")
    tls_allow_insecure: bool | None = _flag("--tls-allow-insecure", "Accept any broker certificate (unsafe).")
    tls_enable_hostname_verification: bool | None = _flag(
        "--tls-enable-hostname-verification/--no-tls-enable-hostname-verification",
        "Check the certificate's host name (default on).",
    )
    tls_cert_file: str | None = _flag("--tls-cert-file", "Client certificate for mutual TLS.")
    tls_key_file: str | None = _flag("--tls-key-file", "Client key for mutual TLS.")
    request_timeout: float | None = _flag("--request-timeout", "Seconds to wait for each HTTP request (default 30).")


# What a layer (flags, environment, context, client.conf) may set: every flag but the context's name.
SETTINGS = tuple(f.name for f in fields(TargetFlags) if f.name != "context")


@dataclass
class Target:
    """A resolved target. The token is never part of repr() or describe()."""

    kind: str  # "cluster" or "engine"
    url: str | None = None
    engine_dir: str | None = None
    token: str | None = field(default=None, repr=False)
    basic: tuple[str, str] | None = field(default=None, repr=False)  # (userId, password)
    oauth2: oauth2.OAuth2Params | None = field(default=None, repr=False)  # client credentials
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
    _refuse_empty(flags, environ)
    layers: list[tuple[str, dict]] = [("flags", {k: getattr(flags, k, None) for k in SETTINGS})]
    layers.append(("environment", _from_env(environ)))
    pulsarctl = pulsarctl_config_path(environ, home)
    context = getattr(flags, "context", None) or environ.get(ENV_CONTEXT)
    if context:
        layers.append((f"context {context}", read_context(context, pulsarctl)))
    conf = client_conf_path(environ)
    if conf:
        layers.append((f"client.conf {conf}", read_client_conf(conf)))
    current = None if context else current_context(pulsarctl)
    if current:
        layers.append((f"pulsarctl current-context {current} ({pulsarctl})", read_context(current, pulsarctl)))
    merged: dict = {}
    source = "default"
    for name, values in layers:
        if values.get("admin_url") and values.get("engine_dir"):
            raise UsageError(f"{name} names both an admin URL and an engine directory; give only one target")
        if (
            "admin_url" not in merged
            and "engine_dir" not in merged
            and (values.get("admin_url") or values.get("engine_dir"))
        ):
            source = name
        for key, value in values.items():
            if value is not None and value != "" and key not in merged:
                if key in ("admin_url", "engine_dir") and ("admin_url" in merged or "engine_dir" in merged):
                    continue  # a higher layer already chose the target
                merged[key] = value
    return _build(merged, source)


def _refuse_empty(flags, environ, keys=("admin_url", "engine_dir")) -> None:
    """A target given as empty (a script's unset $URL) is an error, never a fall through to the next layer: the
    command would act on whatever client.conf, a pulsarctl context or the default engine names."""
    for key, variable in (("admin_url", ENV_ADMIN_URL), ("engine_dir", ENV_ENGINE_DIR)):
        if key not in keys:
            continue
        value = getattr(flags, key, None)
        if value is not None and not str(value).strip():
            raise UsageError(f"{_option(key)} is empty; {_WANTED[key]} (an unset shell variable?)")
        if variable in environ and not environ[variable].strip():
            raise UsageError(f"{variable} is set but empty; {_WANTED[key]}, or unset it")


_WANTED = {
    "admin_url": "give the broker's web service URL, e.g. http://broker:8080",
    "engine_dir": "give the engine's directory",
}


def _option(key: str) -> str:
    return next(f.metadata["option"] for f in fields(TargetFlags) if f.name == key)


def _setting(source: str, key: str) -> str:
    """What a message calls the setting that gave a value: the flag or variable, else its layer."""
    if source == "flags":
        return _option(key)
    if source == "environment":
        return {"admin_url": ENV_ADMIN_URL, "engine_dir": ENV_ENGINE_DIR}[key]
    return source


def _build(s: dict, source: str) -> Target:
    timeout = _number(s.get("request_timeout", 30.0), "--request-timeout")
    if s.get("admin_url"):
        given = str(s["admin_url"])
        shown = redact.without_credentials(given)  # a message about the URL never prints its password
        if not given.startswith(("http://", "https://")):
            raise UsageError(f"admin URL {shown!r} ({source}) must start with http:// or https://")
        if any(c.isspace() or ord(c) < 32 or ord(c) == 127 for c in given):
            raise UsageError(
                f"admin URL {shown!r} ({_setting(source, 'admin_url')}) holds a space or control character"
            )
        try:
            parts = urlsplit(given)
            _ = parts.hostname
        except ValueError as exc:  # an unclosed IPv6 bracket, as `http://[::1`
            raise UsageError(f"admin URL {shown!r} ({_setting(source, 'admin_url')}) is malformed: {exc}") from None
        if not parts.hostname:
            raise UsageError(
                f"admin URL {shown!r} ({source}) names no host; give the broker's web service, e.g. http://broker:8080"
            )
        if "," in parts.netloc:  # client.conf's multi-host form, which pulsar-txn does not fail over between
            raise UsageError(
                f"admin URL {shown!r} ({source}) names several hosts; give one broker's web service (any broker "
                "answers for the whole cluster) or the load balancer in front of them"
            )
        try:
            _ = parts.port  # urllib checks the port only when it is read
        except ValueError:
            raise UsageError(
                f"admin URL {shown!r} ({source}) has a port that is not a number from 1 to 65535"
            ) from None
        cert, key = s.get("tls_cert_file"), s.get("tls_key_file")
        token, cert, key, basic, oauth = _auth(s, cert, key)
        url, from_url = _credentials_of(given, parts)
        if from_url and (token or basic or oauth):
            raise UsageError(
                f"the admin URL ({_setting(source, 'admin_url')}) carries a user and password, and other "
                "credentials are given too (--token, --auth-params, ...); give one of them"
            )
        basic = from_url or basic
        if bool(cert) != bool(key):
            raise UsageError("--tls-cert-file and --tls-key-file go together; give both or neither")
        redact.register(token)
        return Target(
            kind="cluster",
            url=url,
            token=token,
            basic=basic,
            oauth2=oauth,
            tls_trust_cert_path=s.get("tls_trust_cert_path"),
            tls_allow_insecure=_bool(s.get("tls_allow_insecure", False)),
            tls_enable_hostname_verification=_bool(s.get("tls_enable_hostname_verification", True)),
            tls_cert_file=cert,
            tls_key_file=key,
            request_timeout=timeout,
            source=source,
        )
    engine_dir = s.get("engine_dir") or default_engine_dir()
    if Path(engine_dir).expanduser().is_file():
        raise UsageError(f"engine directory {engine_dir} ({source}) is a file; give a directory")
    return Target(kind="engine", engine_dir=str(Path(engine_dir).expanduser()), request_timeout=timeout, source=source)


def _credentials_of(given: str, parts) -> tuple[str, tuple[str, str] | None]:
    """The URL without the user and password it may carry (the URL is what every message prints), and those as
    HTTP basic credentials, their password redacted from then on."""
    url = given.rstrip("/")
    if parts.username is None and parts.password is None:
        return url, None
    user, password = unquote(parts.username or ""), unquote(parts.password or "")
    redact.register(password)
    redact.register(parts.password)
    bare = urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
    return bare.rstrip("/"), (user, password)


def default_engine_dir() -> str:
    import platformdirs

    return str(Path(platformdirs.user_data_dir("pulsar-txn")) / "engine")


def engine_directory(flags, environ: dict | None = None) -> Path:
    """The engine an `engine` command acts on: --engine-dir, else $PULSAR_TXN_ENGINE_DIR, else the user
    data directory. Never a context's or client.conf's target: those name clusters."""
    environ = os.environ if environ is None else environ
    _refuse_empty(flags, environ, keys=("engine_dir",))
    if getattr(flags, "admin_url", None):
        raise UsageError(
            "engine commands act on the embedded engine; --admin-url does not apply to them "
            "(only `engine simulate` and `engine advance` take the URL of an `engine serve`)"
        )
    flag = getattr(flags, "engine_dir", None)
    if not flag:
        # The environment points the other commands at a cluster: acting on the default engine
        # instead, silently, is the surprise an operator does not expect.
        for name in (ENV_ADMIN_URL, ENV_CONTEXT):
            if environ.get(name):
                raise UsageError(
                    f"engine commands act on an embedded engine, but {name} names a cluster "
                    f"({environ[name]}); pass --engine-dir DIR to choose the engine, or unset {name}"
                )
    value = flag or environ.get(ENV_ENGINE_DIR)
    directory = Path(value).expanduser() if value else Path(default_engine_dir())
    if directory.is_file():
        raise UsageError(f"engine directory {directory} is a file; give a directory")
    return directory


def _auth(s: dict, cert, key):
    """(token, client cert, client key, basic credentials, OAuth2 parameters) from --token/--token-file/
    --auth-plugin/--auth-params."""
    token, basic, oauth = s.get("token"), None, None
    if token is None and s.get("token_file"):
        token = _read_secret(s["token_file"], "--token-file")
    plugin, params = s.get("auth_plugin"), s.get("auth_params")
    if token is None and params:
        if plugin and plugin in TLS_PLUGINS:
            values = _kv_params(params)
            cert = cert or values.get("tlsCertFile")
            key = key or values.get("tlsKeyFile")
        elif plugin and plugin in BASIC_PLUGINS:
            basic = _basic_from_params(params)
        elif plugin and plugin in oauth2.PLUGINS:
            oauth = oauth2.from_auth_params(_kv_params(params))
        elif plugin and plugin not in TOKEN_PLUGINS:
            raise UsageError(
                f"auth plugin {plugin} is not supported; use token, basic, OAuth2 (client credentials) "
                "or TLS client-certificate authentication"
            )
        else:
            redact.register(params)  # token parameters are secret as a whole (token:XXX, JSON)
            token = _token_from_params(params)
    if token is not None:
        token = token.strip()
        if not token:
            raise UsageError("the token is empty; check --token, --token-file or --auth-params")
    return token, cert, key, basic, oauth


def _basic_from_params(params: str) -> tuple[str, str]:
    """AuthenticationBasic's parameters: {"userId": ..., "password": ...} or userId:...,password:..."""
    values = _kv_params(params)
    user, password = values.get("userId"), values.get("password")
    if not user or password is None:
        raise UsageError(
            "--auth-params for AuthenticationBasic needs userId and password "
            '({"userId": "...", "password": "..."} or userId:...,password:...)'
        )
    redact.register(password)
    return user, password


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
        raise UsageError('--auth-params JSON needs a "token" or "file" key')
    if params.startswith("token:"):
        return params[len("token:") :]
    if params.startswith("file:"):
        path = params[len("file:") :]
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
    # an environment or context switch: Pulsar's true/false, and the usual 1/yes/on as true
    return parse_bool(value) is True or str(value).strip().lower() in ("1", "yes", "on")


def _number(value, what: str) -> float:
    try:
        number = float(value)
    except (TypeError, ValueError):
        raise UsageError(f"{what} must be a number of seconds, not {value!r}") from None
    if number <= 0:
        raise UsageError(f"{what} must be positive, not {value!r}")
    return number


# --- Pulsar's client.conf (Java properties) -------------------------------------------------


def client_conf_path(environ) -> Path | None:
    """PULSAR_CLIENT_CONF, else $PULSAR_HOME/conf/client.conf when it exists (pulsar-admin's rule)."""
    if environ.get(ENV_CLIENT_CONF):
        return Path(environ[ENV_CLIENT_CONF])
    if environ.get(ENV_PULSAR_HOME):
        path = Path(environ[ENV_PULSAR_HOME]) / "conf" / "client.conf"
        return path if path.is_file() else None
    return None


def read_client_conf(path: Path) -> dict:
    try:
        text = path.read_text(encoding="latin-1")  # java.util.Properties' own encoding (\uXXXX for the rest)
    except OSError as exc:
        raise UsageError(f"cannot read the client.conf {path}: {exc.strerror or exc}") from None
    props = parse_properties(text)
    return {
        "admin_url": props.get("webServiceUrl") or None,
        "auth_plugin": props.get("authPlugin") or None,
        "auth_params": props.get("authParams") or None,
        "tls_trust_cert_path": props.get("tlsTrustCertsFilePath") or None,
        "tls_allow_insecure": props.get("tlsAllowInsecureConnection") or None,
        "tls_enable_hostname_verification": props.get("tlsEnableHostnameVerification") or None,
        "tls_cert_file": props.get("tlsCertificateFilePath") or None,
        "tls_key_file": props.get("tlsKeyFilePath") or None,
    }


def parse_properties(text: str) -> dict[str, str]:
    """A Java properties file as java.util.Properties reads it (escapes, continuations, = : or space)."""
    import javaproperties

    return javaproperties.loads(text)


# --- pulsarctl's config file (~/.config/pulsar/config, or PULSARCONFIG) ---------------------


def pulsarctl_config_path(environ=None, home: Path | None = None) -> Path:
    if environ and environ.get(ENV_PULSARCTL_CONFIG):
        return Path(environ[ENV_PULSARCTL_CONFIG]).expanduser()
    return (home or Path.home()) / ".config" / "pulsar" / "config"


def _pulsarctl_doc(path: Path) -> dict | None:
    """The parsed file, None when there is none; a file that is not pulsarctl's YAML is an error."""
    try:
        text = path.read_text()
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise UsageError(f"cannot read pulsarctl's config {path}: {exc.strerror or exc}") from None
    import yaml  # only when there is a file: its import is 10-25 ms of every command's start

    try:
        doc = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        where = f" (line {mark.line + 1})" if mark is not None else ""
        raise UsageError(f"pulsarctl's config {path} is not valid YAML{where}") from None
    if not isinstance(doc, dict):
        raise UsageError(f"pulsarctl's config {path} is not a mapping of contexts")
    return doc


def current_context(path: Path) -> str | None:
    doc = _pulsarctl_doc(path)
    return str(doc["current-context"]) if doc and doc.get("current-context") else None


def read_context(name: str, path: Path) -> dict:
    doc = _pulsarctl_doc(path)
    if doc is None:
        raise UsageError(f"context {name!r} needs pulsarctl's config file, but {path} cannot be read")
    contexts = doc.get("contexts") or {}
    if name not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise UsageError(f"no context {name!r} in {path} (known: {known})")
    ctx = contexts[name] or {}
    auth = (doc.get("auth-info") or {}).get(name) or {}
    values = {
        "admin_url": ctx.get("admin-service-url") or None,
        "token": auth.get("token") or None,
        "token_file": auth.get("tokenFile") or None,
        "tls_trust_cert_path": auth.get("tls_trust_certs_file_path") or None,
        "tls_allow_insecure": auth.get("tls_allow_insecure_connection") or None,
        "tls_enable_hostname_verification": auth.get("tls_enable_hostname_verification"),
    }
    if auth.get("issuer_endpoint") or auth.get("key_file"):
        values["auth_plugin"], values["auth_params"] = oauth2.PLUGINS[0], _oauth2_params(auth, name, path)
    return values


def _oauth2_params(auth: dict, name: str, path: Path) -> str:
    """A pulsarctl context's OAuth2 settings as AuthenticationOAuth2's JSON parameters."""
    if not auth.get("issuer_endpoint") or not auth.get("key_file"):
        raise UsageError(
            f"context {name!r} in {path} needs both issuer_endpoint and key_file for OAuth2; pulsar-txn "
            "supports the client-credentials flow (pulsarctl context set --issuer-endpoint --key-file)"
        )
    params = {
        "type": "client_credentials",
        "issuerUrl": auth["issuer_endpoint"],
        "privateKey": auth["key_file"],
        "audience": auth.get("audience"),
        "scope": auth.get("scope"),
        "clientId": auth.get("client_id"),
    }
    return json.dumps({k: v for k, v in params.items() if v})
