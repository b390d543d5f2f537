"""Keep-alive HTTP/1.1 connections over plain sockets, and one raw exchange.

Why not http.client: at fleet scale a command is bound by its own CPU a request. One GET to a real broker cost
0.073 ms of CPU through http.client (with json.loads; it parses headers through the email package) and 0.053 ms
through the tool's whole admin layer on this module (`python -m bench fleet`, issue #24 §1; httpx: 0.31 ms). The
answers it reads are the admin API's: a status line, headers, and a body framed by Content-Length, chunks, or the
close.

- One pool per transport, idle connections kept per origin (scheme, host, port); the CLI calls it from a thread
  pool (--concurrency), so each exchange takes an idle connection or opens one and gives it back only after the
  whole body was read.
- An idle connection with unread bytes is dropped. One the server closed is found before a request that is not
  safe to send twice (a probe costs each thread a turn at the GIL); otherwise, and whenever a kept-alive connection
  fails anyway, the request is sent once more on a fresh one if that is safe: it broke while being sent (the server
  had closed the connection), or it is idempotent.
- Failures are one of the classes below, so the caller can choose retries and sentences by kind.
"""

from __future__ import annotations

import functools
import re
import select
import socket
import ssl
import threading
from urllib.parse import quote, urlsplit

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_IDLE = 64  # per origin; more than any --concurrency the CLI allows by default
PATH_SAFE = "/:@!$&'()*+,;=%~"  # what a path may hold unescaped (an escape stays as it is)
MAX_HEAD = 64 * 1024  # a status line and headers longer than this are not an admin API's answer
CHUNK = 64 * 1024
WITH_BODY = frozenset({"POST", "PUT", "PATCH"})  # an empty one is still announced (Content-Length: 0)


class TransportError(Exception):
    """The exchange failed below HTTP; str() is the underlying reason."""


class ConnectError(TransportError):
    """No connection: refused, unreachable, DNS, or the TLS handshake (tls=True)."""

    def __init__(self, message: str, *, tls: bool = False):
        super().__init__(message)
        self.tls = tls


class ConnectTimeout(TransportError):
    """The connection (or its TLS handshake) did not complete within the timeout."""


class ReadTimeout(TransportError):
    """Connected, but the request or its answer did not move within the timeout."""


class WriteError(TransportError):
    """The connection broke while the request was being sent."""


class ReadError(TransportError):
    """The connection broke or the answer was not HTTP while it was being read."""


class NotHttp(ReadError):
    """The other end answered, but not in HTTP: the port of another protocol, most likely."""


class Headers(dict):
    """An answer's headers, names lower-cased; get() ignores case. A repeated header keeps its first value."""

    def get(self, name: str, default=None):
        return super().get(name.lower(), default)


class Response:
    __slots__ = ("status", "reason", "headers", "content")

    def __init__(self, status: int, reason: str, headers: Headers, content: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers
        self.content = content


class ConnectionPool:
    def __init__(self, *, timeout: float, ssl_context: ssl.SSLContext | None = None):
        self.timeout = timeout
        self.ssl_context = ssl_context
        self._idle: dict[tuple, list] = {}
        self._lock = threading.Lock()

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, {}
        for connections in idle.values():
            for connection in connections:
                connection.close()

    def request(self, method: str, url: str, body: bytes | None, headers: dict) -> Response:
        """One exchange, the whole body read; a stale kept-alive connection is replaced when that is safe."""
        parts = urlsplit(url)
        origin, host = _origin(parts.scheme, parts.netloc)
        target = _quoted(parts.path or "/", PATH_SAFE)
        if parts.query:
            target += "?" + _quoted(parts.query, PATH_SAFE + "?")
        message = _message(method, target, host, headers, body)
        connection, reused = self._take(origin, probe=method not in IDEMPOTENT)
        try:
            return self._exchange(origin, connection, method, message)
        except (WriteError, ReadError) as exc:
            if not reused or not (isinstance(exc, WriteError) or method in IDEMPOTENT):
                raise
        # The kept-alive connection had been closed by the server: once more on a fresh one.
        return self._exchange(origin, self._open(origin), method, message)

    def _take(self, origin, probe: bool) -> tuple[Connection, bool]:
        """An idle connection (reused=True) or a new one; with `probe`, an idle one the server closed is skipped."""
        while True:
            with self._lock:
                idle = self._idle.get(origin)
                connection = idle.pop() if idle else None
            if connection is None:
                return self._open(origin), False
            if not connection.buffered and (not probe or _usable(connection)):
                return connection, True
            connection.close()

    def _give_back(self, origin, connection) -> None:
        if connection.sock is None:  # the server said Connection: close
            return
        with self._lock:
            idle = self._idle.setdefault(origin, [])
            if len(idle) < MAX_IDLE:
                idle.append(connection)
                return
        connection.close()

    def _open(self, origin) -> Connection:
        scheme, host, port = origin
        try:
            sock = socket.create_connection((host, port), timeout=self.timeout)
        except TimeoutError as exc:
            raise ConnectTimeout(str(exc) or "timed out") from None
        except OSError as exc:
            raise ConnectError(str(exc)) from None
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)  # a request is one write; never wait for an ACK
        if scheme == "https":
            context = self.ssl_context or ssl.create_default_context()
            try:
                sock = context.wrap_socket(sock, server_hostname=host)
            except (ssl.SSLError, ssl.CertificateError) as exc:
                sock.close()
                raise ConnectError(str(exc), tls=True) from None
            except TimeoutError as exc:
                sock.close()
                raise ConnectTimeout(str(exc) or "timed out") from None
            except OSError as exc:
                sock.close()
                raise ConnectError(str(exc)) from None
        return Connection(sock)

    def _exchange(self, origin, connection: Connection, method: str, message: bytes) -> Response:
        with _closed_on_failure(connection, WriteError):
            connection.sock.sendall(message)
        with _closed_on_failure(connection, ReadError):
            response = connection.read_response(method)
        self._give_back(origin, connection)
        return response


class Connection:
    """One socket, and the bytes read past the end of the last answer (none, on a well-behaved server)."""

    __slots__ = ("sock", "_buffer")

    def __init__(self, sock: socket.socket):
        self.sock = sock
        self._buffer = bytearray()

    def close(self) -> None:
        if self.sock is not None:
            self.sock.close()
            self.sock = None

    @property
    def buffered(self) -> bool:
        return bool(self._buffer) or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending() > 0)

    def read_response(self, method: str) -> Response:
        """The next whole answer; an informational one (1xx) is skipped. Closes the socket when the answer says so."""
        while True:
            version, status, reason, headers = self._head()
            if not 100 <= status < 200:
                break
        keep = version == "HTTP/1.1" and "close" not in headers.get("connection", "").lower()
        if method == "HEAD" or status in (204, 304):
            content = b""
        elif "chunked" in headers.get("transfer-encoding", "").lower():
            content = self._chunked()
        elif (length := headers.get("content-length")) is not None:
            content = self._exactly(_length(length))
        else:  # framed by the close
            content, keep = self._until_close(), False
        if not keep:
            self.close()
        return Response(status, reason, headers, content)

    def _head(self) -> tuple[str, int, str, Headers]:
        while len(self._buffer) < 5:  # enough to tell another protocol at once, before it waits or closes
            self._receive("the server closed the connection before it answered")
        if not self._buffer.startswith(b"HTTP/"):
            if self._buffer[0] in (0x15, 0x16) and self._buffer[1] == 0x03:  # a TLS record: alert or handshake
                raise NotHttp("it answered in TLS: the URL wants https://")
            raise NotHttp(f"it began {bytes(self._buffer[:24])!r}")
        end = self._fill_to(b"\r\n\r\n", MAX_HEAD)
        lines = bytes(self._buffer[:end]).decode("latin-1").split("\r\n")
        del self._buffer[: end + 4]
        version, _, rest = lines[0].partition(" ")
        code, _, reason = rest.partition(" ")
        if len(code) != 3 or not code.isdigit():
            raise ReadError(f"a status line without a status: {lines[0][:80]!r}")
        headers = Headers()
        for line in lines[1:]:
            name, colon, value = line.partition(":")
            if not colon:
                raise ReadError(f"a header line is not 'name: value': {line[:80]!r}")
            headers.setdefault(name.strip().lower(), value.strip())
        return version, int(code), reason, headers

    def _fill_to(self, mark: bytes, limit: int) -> int:
        """Read until `mark` is in the buffer; its index."""
        start = 0
        while (index := self._buffer.find(mark, start)) < 0 and len(self._buffer) <= limit:
            start = max(0, len(self._buffer) - len(mark) + 1)
            self._receive("the server closed the connection before it answered")
        if not 0 <= index <= limit:
            raise ReadError(f"no end of line within {limit} bytes")
        return index

    def _receive(self, eof_message: str) -> None:
        data = self.sock.recv(CHUNK)
        if not data:
            raise ReadError(eof_message)
        self._buffer += data

    def _exactly(self, length: int) -> bytes:
        while len(self._buffer) < length:
            self._receive(f"the answer ended after {len(self._buffer)} of its {length} bytes")
        content = bytes(self._buffer[:length])
        del self._buffer[:length]
        return content

    def _chunked(self) -> bytes:
        parts = []
        while True:
            end = self._fill_to(b"\r\n", MAX_HEAD)
            size = _length(bytes(self._buffer[:end]).split(b";")[0].strip(), base=16)
            del self._buffer[: end + 2]
            if size == 0:
                break
            parts.append(self._exactly(size))
            if self._exactly(2) != b"\r\n":
                raise ReadError("a chunk of the answer did not end with CRLF")
        while (end := self._fill_to(b"\r\n", MAX_HEAD)) > 0:  # trailers, up to the empty line
            del self._buffer[: end + 2]
        del self._buffer[:2]
        return b"".join(parts)

    def _until_close(self) -> bytes:
        while data := self.sock.recv(CHUNK):
            self._buffer += data
        content = bytes(self._buffer)
        self._buffer.clear()
        return content


class _closed_on_failure:
    """Sending or reading: a timeout is a ReadTimeout, a socket's failure `failure`, a broken answer the class it was
    raised as; the connection is closed."""

    __slots__ = ("connection", "failure")

    def __init__(self, connection: Connection, failure: type[TransportError]):
        self.connection, self.failure = connection, failure

    def __enter__(self):
        return self

    def __exit__(self, kind, exc, tb) -> bool:
        if kind is None:
            return False
        if issubclass(kind, TimeoutError):
            self.connection.close()
            raise ReadTimeout(str(exc) or "timed out") from None
        if issubclass(kind, TransportError):
            self.connection.close()
            return False  # already the class it is
        if issubclass(kind, OSError):
            self.connection.close()
            raise self.failure(str(exc) or kind.__name__) from None
        return False


def _message(method: str, target: str, host: str, headers: dict, body: bytes | None) -> bytes:
    """The request's bytes: one write. A header value that would split the message is refused."""
    lines = [f"{method} {target} HTTP/1.1", f"Host: {host}"]
    for name, value in headers.items():
        value = str(value)
        if "\r" in value or "\n" in value:
            raise TransportError(f"the {name} header holds a line break")
        lines.append(f"{name}: {value}")
    if body is not None or method in WITH_BODY:
        lines.append(f"Content-Length: {len(body or b'')}")
    try:
        head = ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")
    except UnicodeEncodeError:
        raise TransportError("a header holds characters HTTP cannot carry (not Latin-1)") from None
    return head + body if body else head


@functools.lru_cache(maxsize=64)
def _origin(scheme: str, netloc: str) -> tuple[tuple, str]:
    """(scheme, host, port) and the Host header of a URL's origin; a command talks to a handful, parsed once."""
    parts = urlsplit(f"{scheme}://{netloc}")
    try:
        default = 443 if scheme == "https" else 80
        origin = (scheme, parts.hostname, parts.port or default)
    except ValueError as exc:  # a port that is not a number, as a redirect may carry
        raise TransportError(f"invalid URL: {exc}") from None
    if scheme not in ("http", "https") or not parts.hostname:
        raise TransportError(f"invalid URL: {scheme}://{netloc}")
    host = f"[{parts.hostname}]" if ":" in parts.hostname else parts.hostname  # an IPv6 literal
    return origin, host if origin[2] == default else f"{host}:{origin[2]}"


_PLAIN = re.compile("[A-Za-z0-9_.~" + re.escape("-" + PATH_SAFE + "?") + "]*")  # unreserved, PATH_SAFE, the query's "?"


def _quoted(text: str, safe: str) -> str:
    """`text` with what a request line may not hold escaped; the tool's own paths are escaped already. (A path
    holds no "?": urlsplit ends it there.)"""
    return text if _PLAIN.fullmatch(text) else quote(text, safe=safe)


def _length(text, base: int = 10) -> int:
    try:
        value = int(text, base)
    except ValueError:
        raise ReadError(f"the answer's length is not a number: {text[:40]!r}") from None
    if value < 0:
        raise ReadError(f"the answer's length is negative: {value}")
    return value


def _usable(connection) -> bool:
    """An idle connection is usable when nothing is waiting on it: readable means closed or garbage."""
    sock = connection.sock
    if sock is None:
        return False
    try:
        readable, _, _ = select.select([sock], [], [], 0)
    except (OSError, ValueError):
        return False
    return not readable
