"""HTTP exchanges through libcurl (pycurl), kept alive per origin, and the failure classes the admin layer sorts
them into.

Why libcurl: it is the most deployed HTTP client there is, maintained with a security process, and it reads the
wire (framing, chunks, TLS, HTTP/2 where the server offers it, proxies) so that no HTTP message is parsed here.
What this module adds is policy, on what libcurl hands over:

- A pool of easy handles per transport (the CLI calls it from a thread pool, --concurrency); a thread takes an idle
  handle or makes one, performs, and gives it back. Each handle keeps its own connections (libcurl's cache, alive
  between exchanges); a handle whose exchange failed in any way is closed with its connections, never reused.
- Framing as strict as it must be: libcurl refuses a conflicting or malformed Content-Length and an unknown
  transfer coding itself; an answer that carries Transfer-Encoding and Content-Length together (which libcurl reads
  as chunked, where a proxy in between may have framed it by its length) is refused here. Either way the handle
  goes, and its connection with it: the rest of an ambiguous answer never becomes the next request's.
- Bounds: the whole exchange (connect, send, receive) ends at the timeout; an answer's body is capped at MAX_BODY,
  its headers (informational answers and trailers included) at MAX_HEAD.
- Proxies from the environment, as Python's urllib (and so httpx, for the OAuth2 requests) reads them
  (http_proxy/HTTP_PROXY, https_proxy/HTTPS_PROXY, no_proxy/NO_PROXY; HTTPS goes through CONNECT).
- A server that does not answer in HTTP is named from its first bytes (another protocol's port, TLS on a plain one).

pycurl is imported on the first exchange, never by `--help` (its import loads libcurl and OpenSSL).
"""

from __future__ import annotations

import functools
import http
import re
import threading
from collections.abc import Mapping
from urllib.parse import quote, urlsplit

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_IDLE = 64  # idle handles kept; more than any --concurrency the CLI allows by default
MAX_ORIGINS = 32  # connections a handle keeps alive, one per origin (libcurl's default is 5)
PATH_SAFE = "/:@!$&'()*+,;=%~"  # what a path may hold unescaped (an escape stays as it is)
MAX_HEAD = 300 * 1024  # libcurl's bound on every header line of one exchange (informational answers, trailers)
MAX_BODY = 256 * 1024 * 1024  # an answer's body; the largest real ones at fleet scale are a few megabytes
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})  # an empty one is still announced (Content-Length: 0)


class TransportError(Exception):
    """The exchange failed below HTTP; str() is the underlying reason."""


class ConnectError(TransportError):
    """No connection: refused, unreachable, DNS, a proxy's refusal, or the TLS handshake (tls=True)."""

    def __init__(self, message: str, *, tls: bool = False):
        super().__init__(message)
        self.tls = tls


class ConnectTimeout(TransportError):
    """The connection (or its TLS handshake) did not complete within the timeout."""


class ReadTimeout(TransportError):
    """Connected, but the whole exchange did not complete within the timeout."""


class WriteError(TransportError):
    """The connection broke while the request was being sent."""


class ReadError(TransportError):
    """The connection broke, or the answer was not well-formed HTTP, while it was being read."""


class NotHttp(ReadError):
    """The other end answered, but not in HTTP: the port of another protocol, most likely."""


class Malformed(ReadError):
    """The answer's framing is ambiguous or broken (its length, its transfer coding): refused, never guessed."""


class TooLarge(ReadError):
    """The answer (its headers or its body) passed the size this client accepts."""


class Headers(Mapping):
    """The final answer's headers, names lower-cased, read from libcurl's lines when first looked at (most answers
    are only decoded: their headers never are). get() ignores case; a repeated header keeps its first value."""

    __slots__ = ("_lines", "_map")

    def __init__(self, lines: list[bytes]):
        self._lines, self._map = lines, None

    def _read(self) -> dict[str, str]:
        if self._map is None:
            self._map = {}
            for line in final_head(self._lines):
                name, colon, value = line.decode("latin-1").partition(":")
                if colon:
                    self._map.setdefault(name.strip().lower(), value.strip())
        return self._map

    def get(self, name: str, default=None):
        return self._read().get(name.lower(), default)

    def __getitem__(self, name: str) -> str:
        return self._read()[name.lower()]

    def __iter__(self):
        return iter(self._read())

    def __len__(self) -> int:
        return len(self._read())


class Response:
    __slots__ = ("status", "content", "headers")

    def __init__(self, status: int, lines: list[bytes], content: bytes):
        self.status = status
        self.content = content
        self.headers = Headers(lines)

    @property
    def reason(self) -> str:
        try:
            return http.HTTPStatus(self.status).phrase
        except ValueError:
            return ""


def final_head(lines: list[bytes]) -> list[bytes]:
    """The header lines of the final answer, from every line libcurl read (informational answers' heads first,
    trailers after): those after the last status line, up to the empty line."""
    start = max((i for i, line in enumerate(lines) if line.startswith(b"HTTP/")), default=-1) + 1
    head = []
    for line in lines[start:]:
        if line in (b"\r\n", b"\n"):
            break
        head.append(line)
    return head


class Tls:
    """What the broker's TLS needs from us: the CA bundle, whether to check the peer and its name, a client
    certificate."""

    __slots__ = ("ca_file", "verify", "check_hostname", "cert_file", "key_file")

    def __init__(self, ca_file=None, verify=True, check_hostname=True, cert_file=None, key_file=None):
        self.ca_file, self.verify, self.check_hostname = ca_file, verify, check_hostname
        self.cert_file, self.key_file = cert_file, key_file


pycurl = None  # the module, once the first pool is made


def _load():
    global pycurl
    if pycurl is None:
        import pycurl as module

        pycurl = module
    return pycurl


class ConnectionPool:
    def __init__(self, *, timeout: float, tls: Tls | None = None, max_body: int = MAX_BODY):
        _load()
        self.timeout = timeout
        self.tls = tls or Tls()
        self.max_body = max_body
        self.proxies = proxies_from()
        self._idle: list[_Handle] = []
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for handle in idle:
            handle.curl.close()

    def request(self, method: str, url: str, body: bytes | None, headers: dict) -> Response:
        """One exchange, the whole body read. libcurl checks that a kept-alive connection is still alive before it
        reuses it, and opens a new one when the server had closed it."""
        lines = _header_lines(headers, body is not None or method in WITH_BODY)
        target, scheme = _quoted_url(url)
        with self._lock:
            handle = self._idle.pop() if self._idle else None
        if handle is None:
            handle = _Handle(self)
        try:
            response = handle.perform(method, target, body, lines, scheme)
        except BaseException:
            handle.curl.close()  # its connection may hold the rest of a broken answer
            raise
        with self._lock:
            if len(self._idle) < MAX_IDLE:
                self._idle.append(handle)
                return response
        handle.curl.close()
        return response


class _Handle:
    """One libcurl easy handle, its connections, and the answer being read into it."""

    __slots__ = ("curl", "pool", "proxy", "lines", "parts", "size", "failure", "sent_lines", "method", "tls_ready")

    def __init__(self, pool: ConnectionPool):
        c = self.curl = pycurl.Curl()
        self.pool, self.lines, self.parts = pool, [], []
        self.sent_lines, self.method, self.tls_ready = None, None, False
        c.setopt(pycurl.NOSIGNAL, 1)  # timeouts without SIGALRM: the CLI performs from threads
        c.setopt(pycurl.PROTOCOLS, pycurl.PROTO_HTTP | pycurl.PROTO_HTTPS)
        c.setopt(pycurl.FOLLOWLOCATION, 0)  # redirects are the admin layer's (Authorization rules)
        c.setopt(pycurl.TIMEOUT_MS, max(1, int(pool.timeout * 1000)))  # connect + send + receive, together
        c.setopt(pycurl.CONNECTTIMEOUT_MS, max(1, int(pool.timeout * 1000)))
        c.setopt(pycurl.HTTP09_ALLOWED, 1)  # so that the first bytes of a non-HTTP answer reach _body, named there
        c.setopt(pycurl.MAXFILESIZE_LARGE, pool.max_body)  # libcurl ends a transfer that passes it, announced or not
        c.setopt(pycurl.TCP_NODELAY, 1)
        c.setopt(pycurl.MAXCONNECTS, MAX_ORIGINS)  # one kept-alive connection to each broker a fan-out reaches
        c.setopt(pycurl.TCP_KEEPALIVE, 1)
        c.setopt(pycurl.WRITEFUNCTION, self._body)
        # Every header line libcurl read, kept as it is (no Python call a line); libcurl bounds them, informational
        # answers and trailers included, at MAX_HEAD.
        c.setopt(pycurl.HEADERFUNCTION, self.lines.append)
        c.setopt(pycurl.USERAGENT, "pulsar-txn")
        # The proxy is set per request from the environment as Python reads it (proxies_from), never by libcurl's
        # own reading, so that the admin calls and the OAuth2 client (httpx) follow the same rules.
        c.setopt(pycurl.NOPROXY, pool.proxies.get("no", ""))
        c.setopt(pycurl.PROXY, "")
        self.proxy = ""

    def perform(self, method: str, url: str, body: bytes | None, lines: list[str], scheme: str) -> Response:
        c = self.curl
        if scheme == "https" and not self.tls_ready:  # on the first https request: an http target never needs it
            _tls_options(c, self.pool.tls)
            self.tls_ready = True
        proxy = self.pool.proxies.get(scheme, "")
        if proxy != self.proxy:
            c.setopt(pycurl.PROXY, proxy)
            self.proxy = proxy
        self.lines.clear()
        self.size, self.failure = 0, None
        c.setopt(pycurl.URL, url)
        if lines is not self.sent_lines:  # the same list again (_lines_of's cache): libcurl has it already
            c.setopt(pycurl.HTTPHEADER, lines)
            self.sent_lines = lines
        if body is not None or method in WITH_BODY:
            c.setopt(pycurl.POSTFIELDSIZE, len(body or b""))
            c.setopt(pycurl.COPYPOSTFIELDS, body or b"")
            c.setopt(pycurl.CUSTOMREQUEST, None if method == "POST" else method)
            self.method = None
        elif method != self.method:  # a run of GETs sets it once
            if method == "HEAD":
                c.setopt(pycurl.NOBODY, 1)
                c.setopt(pycurl.CUSTOMREQUEST, None)
            else:
                c.setopt(pycurl.HTTPGET, 1)
                c.setopt(pycurl.CUSTOMREQUEST, None if method == "GET" else method)
            self.method = method
        try:
            c.perform()
        except pycurl.error as exc:
            raise self.failure or _failure(c, exc, url, self.pool.max_body) from None
        finally:
            if method == "HEAD":
                c.setopt(pycurl.NOBODY, 0)
                self.method = None
            content, self.parts = b"".join(self.parts), []
        if self.failure:
            raise self.failure
        head = list(self.lines)
        # libcurl refuses a broken or conflicting Content-Length and an unknown coding itself; it reads
        # Transfer-Encoding: chunked with a Content-Length too (the length ignored), which a server or a proxy in
        # between may have framed the other way: refused, and the connection closed with this handle.
        if b"ransfer-" in b"".join(head).lower() and (problem := _framing_problem(final_head(head))):
            raise Malformed(problem)
        return Response(c.getinfo(pycurl.RESPONSE_CODE), head, content)

    def _body(self, data: bytes):
        if not self.lines:  # no status line came first (HTTP/0.9 to libcurl): not an HTTP server
            return self._refuse(NotHttp(_not_http(data)))
        self.size += len(data)
        if self.size > self.pool.max_body:  # libcurl's own cap comes first; this one whatever its version
            return self._refuse(TooLarge(f"its body passed {self.pool.max_body // (1024 * 1024)} MiB"))
        self.parts.append(data)
        return None

    def _refuse(self, failure: TransportError) -> int:
        self.failure = failure
        return 0  # not the length given: libcurl ends the transfer (and its connection goes with this handle)


def _framing_problem(head: list[bytes]) -> str | None:
    """Why a final answer's framing cannot be trusted, or None."""
    lengths, codings = [], []
    for line in head:
        name, _, value = line.decode("latin-1").partition(":")
        name = name.strip().lower()
        if name == "content-length":
            lengths.append(value.strip())
        elif name == "transfer-encoding":
            codings.append(value.strip())
    if not codings:
        return None
    given = [c.strip().lower() for value in codings for c in value.split(",")]
    if given != ["chunked"]:
        return f"its Transfer-Encoding is {', '.join(codings)!r}, and only 'chunked' is accepted"
    if lengths:
        return "it has both Transfer-Encoding and Content-Length"
    return None


def _not_http(data: bytes) -> str:
    if data[:1] in (b"\x15", b"\x16") and data[1:2] == b"\x03":  # a TLS record: alert or handshake
        return "it answered in TLS: the URL wants https://"
    return f"it began {bytes(data[:24])!r}"


_CONNECT = {"E_COULDNT_CONNECT", "E_COULDNT_RESOLVE_HOST", "E_COULDNT_RESOLVE_PROXY", "E_INTERFACE_FAILED"}
_TLS = {
    "E_SSL_CONNECT_ERROR",
    "E_PEER_FAILED_VERIFICATION",
    "E_SSL_CERTPROBLEM",
    "E_SSL_CACERT",
    "E_SSL_CACERT_BADFILE",
    "E_SSL_CIPHER",
    "E_SSL_ISSUER_ERROR",
    "E_SSL_PINNEDPUBKEYNOTMATCH",
    "E_SSL_INVALIDCERTSTATUS",
    "E_SSL_CRL_BADFILE",
    "E_SSL_ENGINE_INITFAILED",
    "E_USE_SSL_FAILED",
    "E_SSL_SHUTDOWN_FAILED",
    "E_SSL_CLIENTCERT",
}
_WRITE = {"E_SEND_ERROR"}
_READ = {"E_RECV_ERROR", "E_GOT_NOTHING", "E_PARTIAL_FILE", "E_HTTP2", "E_HTTP2_STREAM", "E_HTTP3"}
_MALFORMED = {"E_WEIRD_SERVER_REPLY", "E_FTP_WEIRD_SERVER_REPLY", "E_BAD_CONTENT_ENCODING", "E_UNSUPPORTED_PROTOCOL"}
_kinds: dict[int, str] = {}  # libcurl's error code -> its kind, made on the first failure (aliases share a code)


def _kind(code: int) -> str:
    if not _kinds:
        groups = {"timeout": {"E_OPERATION_TIMEDOUT"}, "tls": _TLS, "connect": _CONNECT, "write": _WRITE}
        groups |= {"read": _READ, "malformed": _MALFORMED, "size": {"E_FILESIZE_EXCEEDED"}, "url": {"E_URL_MALFORMAT"}}
        groups["head-size"] = {"E_TOO_LARGE"}
        _kinds[100] = "head-size"  # CURLE_TOO_LARGE (libcurl 8.6), which pycurl may not name
        for kind, names in groups.items():
            _kinds.update({getattr(pycurl, name): kind for name in names if hasattr(pycurl, name)})
    return _kinds.get(code, "")


def _failure(c, exc, url: str, max_body: int) -> TransportError:
    """A libcurl error as one of the classes above; str() is libcurl's own message."""
    code, message = exc.args[0], (exc.args[1] if len(exc.args) > 1 else "") or "failed"
    kind = _kind(code)
    if kind == "timeout":
        # Sent (a reused connection has no connect time of its own): the server has the request, and a read
        # timeout is final; nothing sent: the connection or its TLS handshake did not complete, safe to retry.
        sent = c.getinfo(pycurl.REQUEST_SIZE) > 0
        return ReadTimeout(message) if sent else ConnectTimeout(message)
    if kind == "tls":
        return ConnectError(message, tls=True)
    if kind == "connect":
        return ConnectError(message)
    if kind == "size":
        return TooLarge(f"its body passed {max_body // (1024 * 1024)} MiB")
    if "too large response headers" in message.lower() or kind == "head-size":
        return TooLarge(f"its headers passed {MAX_HEAD // 1024} KiB")
    if kind == "write":
        return WriteError(message)
    if kind == "malformed":
        return Malformed(message)
    if kind == "read":
        return ReadError(message)
    if kind == "url":
        return TransportError(f"invalid URL: {url} ({message})")
    return TransportError(message)


def _tls_options(c, tls: Tls) -> None:
    ca_file = tls.ca_file or _system_cas()
    if ca_file:
        c.setopt(pycurl.CAINFO, ca_file)
    c.setopt(pycurl.SSL_VERIFYPEER, 1 if tls.verify else 0)
    c.setopt(pycurl.SSL_VERIFYHOST, 2 if tls.verify and tls.check_hostname else 0)
    if tls.cert_file:
        c.setopt(pycurl.SSLCERT, tls.cert_file)
        c.setopt(pycurl.SSLKEY, tls.key_file)


def _system_cas() -> str | None:
    """The system's CA bundle as Python's OpenSSL finds it (SSL_CERT_FILE too); libcurl's wheel would look where the
    distribution it was built on keeps it."""
    import ssl

    paths = ssl.get_default_verify_paths()
    return paths.cafile or None


def proxies_from(environ=None) -> dict:
    """The proxies the environment names, read as Python's urllib.request.getproxies_environment reads them (and so
    httpx, for the OAuth2 requests): `<scheme>_proxy` in either case, a lower-case name winning, HTTP_PROXY ignored
    inside a CGI request (REQUEST_METHOD set: a client's `Proxy:` header arrives as HTTP_PROXY there).
    {"http": URL, "https": URL, "no": hosts}, those given. (urllib.request itself costs 12 ms of start-up.)"""
    import os

    environ = os.environ if environ is None else environ
    found: dict[str, str] = {}
    for name, value in environ.items():  # any case first; then the lower-case suffixes overwrite
        if value and name.lower().endswith("_proxy"):
            found[name[:-6].lower()] = value
    if "REQUEST_METHOD" in environ:
        found.pop("http", None)
    for name, value in environ.items():
        if name.endswith("_proxy"):
            if value:
                found[name[:-6].lower()] = value
            else:
                found.pop(name[:-6].lower(), None)
    return {k: v for k, v in found.items() if k in ("http", "https", "no")}


_LINE_BREAK = re.compile("[\r\n\0]")


def _header_lines(headers: dict, with_body: bool) -> list[str]:
    """The request's headers for libcurl; a value that would split the message is refused. The same few sets of
    headers recur for a command's every request: made once each."""
    return _lines_of(tuple(headers.items()), with_body)


@functools.lru_cache(maxsize=16)
def _lines_of(headers: tuple, with_body: bool) -> list[str]:
    lines = []
    for name, value in headers:
        value = str(value)
        if _LINE_BREAK.search(value):
            raise TransportError(f"the {name} header holds a line break")
        try:
            value.encode("latin-1")
        except UnicodeEncodeError:
            raise TransportError("a header holds characters HTTP cannot carry (not Latin-1)") from None
        lines.append(f"{name}: {value}")
    lines.append("Expect:")  # no 100-continue round trip before a body
    if with_body and not any(name.lower() == "content-type" for name, _ in headers):
        lines.append("Content-Type:")  # libcurl's form default would be wrong; an empty body has no type
    return lines


_PLAIN = re.compile("[A-Za-z0-9_.~" + re.escape("-" + PATH_SAFE + "?") + "]*")  # unreserved, PATH_SAFE, the query's "?"


# A URL as the tool makes it: http(s), a host and port without credentials, a path and query already escaped.
_PLAIN_URL = re.compile(r"https?://[A-Za-z0-9.\-_~:\[\]]+(?:[/?]" + _PLAIN.pattern + ")?")


def _quoted_url(url: str) -> tuple[str, str]:
    """`url` with what a request line may not hold escaped in its path and query (the tool's own paths are escaped
    already), and its scheme. Only http and https are accepted; libcurl judges the rest (a port that is not a
    number: E_URL_MALFORMAT)."""
    if _PLAIN_URL.fullmatch(url):
        return url, "https" if url[4] == "s" else "http"
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise TransportError(f"invalid URL: {url}")
    path, query = parts.path or "/", parts.query
    if not _PLAIN.fullmatch(path):
        path = quote(path, safe=PATH_SAFE)
    if query and not _PLAIN.fullmatch(query):
        query = quote(query, safe=PATH_SAFE + "?")
    return f"{parts.scheme}://{parts.netloc}{path}" + (f"?{query}" if query else ""), parts.scheme
