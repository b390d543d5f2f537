"""The REST transport: Pulsar's admin API over http_pool (libcurl, connections kept alive).

- Redirects are followed by hand: Pulsar answers 307 to the broker that owns a topic, and
  generic clients drop `Authorization` when the host changes. The header follows where the
  cluster's brokers can be (_credentials_may_not_follow); the hop count is bounded, loops detected.
- Retries with exponential backoff and jitter: connection failures (the request never left) for
  every method; dropped connections, 429 (Retry-After honoured) and 502/503/504 only for
  idempotent methods. A read timeout is final (--request-timeout is the user's choice).
- OAuth2 (client credentials): the bearer token comes from an oauth2.TokenSource per request
  (cached until shortly before it expires); a 401 drops it and the request is sent once more
  with a fresh one.
- Transport failures become one ConnectionFailed sentence; HTTP error statuses are returned to
  the caller (PulsarAdmin), which turns them into sentences for both backends alike.
"""

from __future__ import annotations

import email.utils
import random
import time
from urllib.parse import urlencode, urljoin, urlsplit, urlunsplit

from pulsar_txn_cli.transport import http_pool
from pulsar_txn_cli.transport.http_errors import no_answer_hint
from pulsar_txn_cli.transport.http_pool import IDEMPOTENT, Response
from pulsar_txn_cli.transport.redact import redact, redact_headers
from pulsar_txn_cli.errors import ConnectionFailed, UsageError

RETRY_STATUSES = frozenset({429, 502, 503, 504})
REDIRECTS = frozenset({301, 302, 303, 307, 308})
MAX_RETRY_AFTER = 60.0


class RestTransport:
    def __init__(
        self,
        target,
        *,
        log=None,
        retries: int = 3,
        backoff: float = 0.2,
        max_backoff: float = 5.0,
        max_hops: int = 5,
        sleep=time.sleep,
    ):
        self.target = target
        self.base = target.url.rstrip("/")
        self.log = log
        self.retries = retries
        self.backoff = backoff
        self.max_backoff = max_backoff
        self.max_hops = max_hops
        self.sleep = sleep
        self.headers = {"Accept": "application/json", "User-Agent": "pulsar-txn"}
        if target.token:
            self.headers["Authorization"] = f"Bearer {target.token}"
        elif target.basic:
            import base64

            from pulsar_txn_cli.transport.redact import register

            credential = base64.b64encode(":".join(target.basic).encode()).decode()
            register(credential)
            self.headers["Authorization"] = f"Basic {credential}"
        tls = _tls(target)
        self.oauth = None
        if target.oauth2:
            from pulsar_txn_cli.transport.oauth2 import TokenSource

            # The issuer: the system's CAs plus --tls-trust-cert-path; --tls-allow-insecure applies to it too.
            self.oauth = TokenSource(
                target.oauth2, verify=_issuer_ssl_context(target), timeout=target.request_timeout, log=self._log
            )
        self.pool = http_pool.ConnectionPool(timeout=target.request_timeout, tls=tls)
        for proxy in (self.pool.proxies.get("http"), self.pool.proxies.get("https")):
            _register_url_password(proxy)

    def __repr__(self) -> str:
        return f"RestTransport({self.base!r})"

    def close(self) -> None:
        self.pool.close()

    def url_for(self, path: str) -> str:
        return path if path.startswith(("http://", "https://")) else self.base + path

    def request(self, method: str, path: str, params: dict | None = None, body=None):
        """(status, headers, body bytes) after redirects and retries."""
        url = self.url_for(path)
        if params:
            query = urlencode({k: _param(v) for k, v in params.items() if v is not None})
            url = urlunsplit(urlsplit(url)._replace(query=query))
        content, headers = None, dict(self.headers)
        if body is not None:
            import orjson

            content = orjson.dumps(body)
            headers["Content-Type"] = "application/json"
        seen = {url}
        for _hop in range(self.max_hops + 1):
            response = self._authorized(method, url, content, headers)
            if response.status not in REDIRECTS:
                return response.status, response.headers, response.content
            location = response.headers.get("location")
            if not location:
                return response.status, response.headers, response.content
            next_url = urljoin(url, location)
            if "Authorization" in headers and (refusal := self._credentials_may_not_follow(url, next_url)):
                raise ConnectionFailed(
                    f"{method} {path} on {self.target.describe()} was redirected {refusal}; check the brokers' "
                    "advertised web addresses (docs/authentication.md says where credentials follow a redirect)",
                    status=response.status,
                )
            if next_url in seen:
                raise ConnectionFailed(
                    f"{method} {path} on {self.target.describe()} ran into a redirect loop at {_origin(next_url)}; "
                    "check the brokers' advertised addresses and topic ownership",
                    status=response.status,
                )
            seen.add(next_url)
            if response.status == 303:
                method, content = "GET", None
            self._log(f"redirect {response.status} -> {redact(next_url)} (Authorization kept)")
            url = next_url
        raise ConnectionFailed(
            f"{method} {path} on {self.target.describe()} was redirected more than {self.max_hops} times; "
            "check the brokers' advertised addresses and topic ownership",
            status=307,
        )

    def _credentials_may_not_follow(self, url: str, next_url: str) -> str | None:
        """Why Authorization may not follow a redirect from `url` to `next_url`, or None when it may.

        Pulsar's brokers redirect to the owner broker's advertised web service URL: another host of the cluster,
        on the web service port they share (or another port of the same host, in a one-machine cluster). So the
        credentials follow: never from https to http; to https, any host the cluster's own CA
        (--tls-trust-cert-path) vouches for; otherwise the same host on any port, or the same port on another
        host: both compared with --admin-url, the address the operator chose, so that a chain of hops cannot walk
        away from it."""
        start, to, chosen = urlsplit(url), urlsplit(next_url), urlsplit(self.base)
        if start.scheme == "https" and to.scheme == "http":
            return f"from https to plain http ({_origin(next_url)}); refusing to send the credentials unencrypted"
        if to.scheme == "https" and self.target.tls_trust_cert_path and not self.target.tls_allow_insecure:
            return None  # the cluster's CA checks the host it names
        if _same_host(chosen.hostname, to.hostname) or _port(chosen) == _port(to):
            return None
        return (
            f"to {_origin(next_url)}, another host on another port; refusing to send the credentials there "
            "(they follow a redirect to the same host, or to the same port of another host)"
        )

    def _authorized(self, method: str, url: str, content, headers) -> Response:
        """The request with an OAuth2 bearer token when configured; a 401 gets one fresh token and one retry."""
        if not self.oauth:
            return self._with_retries(method, url, content, headers)
        token = self.oauth.bearer()
        headers["Authorization"] = f"Bearer {token}"
        response = self._with_retries(method, url, content, headers)
        if response.status == 401:
            self._log("HTTP 401 with the cached OAuth2 token; fetching a new one and retrying once")
            self.oauth.invalidate(token)
            headers["Authorization"] = f"Bearer {self.oauth.bearer()}"
            response = self._with_retries(method, url, content, headers)
        return response

    def _with_retries(self, method: str, url: str, content, headers) -> Response:
        attempt = 0
        while True:
            try:
                response = self._send(method, url, content, headers)
            except http_pool.TransportError as exc:
                if attempt < self.retries and _retriable_error(exc, method):
                    delay = self._delay(attempt)
                    self._log(f"{type(exc).__name__}; retry {attempt + 1}/{self.retries} in {delay:.2f}s")
                    self.sleep(delay)
                    attempt += 1
                    continue
                raise self._transport_failure(exc, method, url) from None
            if response.status in RETRY_STATUSES and method in IDEMPOTENT and attempt < self.retries:
                delay = self._retry_after(response) if response.status in (429, 503) else None
                if delay is None:
                    delay = self._delay(attempt)
                if delay > MAX_RETRY_AFTER:
                    return response
                self._log(f"HTTP {response.status}; retry {attempt + 1}/{self.retries} in {delay:.2f}s")
                self.sleep(delay)
                attempt += 1
                continue
            return response

    def _send(self, method: str, url: str, content, headers) -> Response:
        if self.log:
            self._log(f"> {method} {redact(url)}")
            for key, value in redact_headers(headers).items():
                self._log(f"> {key}: {value}")
        started = time.monotonic()
        response = self.pool.request(method, url, content, headers)
        if self.log:
            self._log(
                f"< {response.status} {response.reason} ({(time.monotonic() - started) * 1000:.0f} ms, {len(response.content)} bytes)"
            )
        return response

    def _delay(self, attempt: int) -> float:
        """Exponential backoff with full jitter around the nominal delay."""
        nominal = min(self.max_backoff, self.backoff * (2**attempt))
        return nominal * random.uniform(0.5, 1.5)

    @staticmethod
    def _retry_after(response) -> float | None:
        value = response.headers.get("retry-after")
        if not value:
            return None
        try:
            return max(0.0, float(value))
        except ValueError:
            pass
        try:
            when = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):  # neither seconds nor a date: back off as usual
            return None
        return max(0.0, when.timestamp() - time.time())

    def _transport_failure(self, exc: http_pool.TransportError, method: str, url: str) -> ConnectionFailed:
        where, origin = self.target.describe(), _origin(url)
        if origin != _origin(self.target.url or ""):  # another broker of the cluster, or one a redirect named
            where = f"{where} ({origin})"
        text = redact(str(exc)) or type(exc).__name__
        if isinstance(exc, http_pool.ConnectError) and exc.tls:
            msg = (
                f"TLS handshake with {where} failed ({text}); check --tls-trust-cert-path, the certificate's host name "
                "(--no-tls-enable-hostname-verification) or, only for testing, --tls-allow-insecure"
            )
        elif isinstance(exc, http_pool.ConnectTimeout):
            msg = f"connecting to {where} timed out; check the URL, the port and the network"
        elif isinstance(exc, http_pool.ConnectError):
            msg = f"cannot connect to {where} ({text}); check the URL and that the broker's web service is up"
        elif isinstance(exc, http_pool.ReadTimeout):
            path = urlsplit(url).path
            hint = no_answer_hint(path)
            return ConnectionFailed(
                f"{method} {path} on {where} got no answer within {self.target.request_timeout:g}s; {hint}",
                no_answer=True,
            )
        elif isinstance(exc, http_pool.NotHttp):
            msg = (
                f"{where} answered {method} {urlsplit(url).path} in something that is not HTTP ({text}); check that "
                "the URL names the broker's web service port (e.g. http://broker:8080), not another protocol's"
            )
        elif isinstance(exc, http_pool.Malformed):
            msg = (
                f"{where} answered {method} {urlsplit(url).path} with malformed HTTP ({text}); the answer was "
                "refused and its connection closed; check the broker and any proxy or load balancer in between"
            )
        elif isinstance(exc, http_pool.TooLarge):
            msg = (
                f"{where}'s answer to {method} {urlsplit(url).path} was refused as too large ({text}); an admin API "
                "answer is never that big: check that the URL names a broker's web service"
            )
        elif isinstance(exc, (http_pool.ReadError, http_pool.WriteError)):
            msg = f"{where} dropped the connection during {method} {urlsplit(url).path}; check the broker's logs and any proxy in between"
        else:
            msg = f"{method} {urlsplit(url).path} on {where} failed ({text})"
        return ConnectionFailed(msg)

    def _log(self, message: str) -> None:
        if self.log:
            self.log(redact(message))


def _retriable_error(exc: http_pool.TransportError, method: str) -> bool:
    if isinstance(exc, http_pool.ConnectError):
        return not exc.tls  # a TLS error does not heal
    if isinstance(exc, http_pool.ConnectTimeout):
        return True
    # A read timeout is not retried: the broker got the request and is slow; the user chose the timeout.
    if isinstance(exc, (http_pool.NotHttp, http_pool.Malformed, http_pool.TooLarge)):
        return False  # another protocol's port, a broken or endless answer: the same every time
    return method in IDEMPOTENT and isinstance(exc, http_pool.ReadError)


def _issuer_ssl_context(target):
    """The system's CAs plus --tls-trust-cert-path (an issuer often has a public certificate)."""
    import ssl

    if target.tls_allow_insecure:
        return False
    if not target.oauth2.issuer_url.startswith("https://"):
        return True
    context = ssl.create_default_context()
    if target.tls_trust_cert_path:
        try:
            context.load_verify_locations(cafile=target.tls_trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise UsageError(
                f"cannot load the CA bundle {target.tls_trust_cert_path} (--tls-trust-cert-path): {exc}"
            ) from None
    return context


def _tls(target) -> http_pool.Tls:
    """The TLS options for libcurl; a CA bundle or client certificate that cannot be loaded is a usage error now,
    before any request (Python's ssl reads them as OpenSSL will)."""
    if target.tls_trust_cert_path and not target.tls_allow_insecure:
        _loadable(
            lambda ssl: ssl.create_default_context(cafile=target.tls_trust_cert_path),
            f"cannot load the CA bundle {target.tls_trust_cert_path} (--tls-trust-cert-path)",
        )
    if target.tls_cert_file:
        _loadable(
            lambda ssl: ssl.create_default_context().load_cert_chain(target.tls_cert_file, target.tls_key_file),
            f"cannot load the client certificate {target.tls_cert_file} / key {target.tls_key_file}",
        )
    return http_pool.Tls(
        ca_file=target.tls_trust_cert_path,
        verify=not target.tls_allow_insecure,
        check_hostname=bool(target.tls_enable_hostname_verification),
        cert_file=target.tls_cert_file,
        key_file=target.tls_key_file,
    )


def _loadable(load, failure: str) -> None:
    import ssl  # only for a target with TLS files: 9 ms of start-up otherwise

    try:
        load(ssl)
    except (OSError, ssl.SSLError) as exc:
        raise UsageError(f"{failure}: {exc}") from None


def _register_url_password(url: str | None) -> None:
    """A password in a URL (a proxy's) is redacted from everything printed."""
    from urllib.parse import unquote

    from pulsar_txn_cli.transport.redact import register

    password = urlsplit(url).password if url else None
    if password:
        register(password)
        register(unquote(password))


_LOOPBACK = frozenset({"localhost", "127.0.0.1", "::1"})


def _same_host(a: str | None, b: str | None) -> bool:
    a, b = (a or "").lower(), (b or "").lower()
    return a == b or (a in _LOOPBACK and b in _LOOPBACK)


def _port(parts) -> int | None:
    try:
        return parts.port or {"http": 80, "https": 443}.get(parts.scheme)
    except ValueError:
        return None


def _param(value) -> str:
    return ("true" if value else "false") if isinstance(value, bool) else str(value)


def _origin(url: str) -> str:
    parts = urlsplit(url)
    try:
        port = parts.port
    except ValueError:  # not a number: show it as given
        return f"{parts.scheme}://{parts.netloc.rpartition('@')[2]}"
    return f"{parts.scheme}://{parts.hostname}:{port}" if port else f"{parts.scheme}://{parts.hostname}"
