"""Keep-alive HTTP/1.1 connections over the standard library's http.client, and one raw exchange.

Why not httpx: a GET cost 0.59 ms of CPU through httpx against 0.15 ms through http.client
(`python -m bench fleet`, issue #24 §1), and a fleet-wide command is bound by its own CPU.

- One pool per transport, idle connections kept per origin (scheme, host, port); the CLI calls
  it from a thread pool (--concurrency), so each exchange takes an idle connection or opens one
  and gives it back only after the whole body was read.
- An idle connection the server closed (or that has unread bytes) is dropped before use; one that
  fails anyway is replaced once, transparently, when resending is safe: the request broke while
  being sent (the server had closed the connection), or it is idempotent.
- Failures are one of the classes below, so the caller can choose retries and sentences by kind.
"""

from __future__ import annotations

import contextlib
import http.client
import select
import ssl
import threading
from urllib.parse import quote, urlsplit

IDEMPOTENT = frozenset({"GET", "HEAD", "PUT", "DELETE", "OPTIONS"})
MAX_IDLE = 64  # per origin; more than any --concurrency the CLI allows by default
PATH_SAFE = "/:@!$&'()*+,;=%~"  # what a path may hold unescaped (an escape stays as it is)


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


class Response:
    __slots__ = ("status", "reason", "headers", "content")

    def __init__(self, status: int, reason: str, headers, content: bytes):
        self.status = status
        self.reason = reason
        self.headers = headers  # http.client.HTTPMessage: get() ignores case
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
        try:
            origin = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
        except ValueError as exc:  # a port that is not a number, as a redirect may carry
            raise TransportError(f"invalid URL: {exc}") from None
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise TransportError(f"invalid URL: {url}")
        target = quote(parts.path or "/", safe=PATH_SAFE)
        if parts.query:
            target += "?" + quote(parts.query, safe=PATH_SAFE + "?")
        connection, reused = self._take(origin)
        try:
            return self._exchange(origin, connection, method, target, body, headers)
        except (WriteError, ReadError) as exc:
            if not reused or not (isinstance(exc, WriteError) or method in IDEMPOTENT):
                raise
        # The kept-alive connection had been closed by the server: once more on a fresh one.
        return self._exchange(origin, self._open(origin), method, target, body, headers)

    def _take(self, origin) -> tuple[http.client.HTTPConnection, bool]:
        while True:
            with self._lock:
                idle = self._idle.get(origin)
                connection = idle.pop() if idle else None
            if connection is None:
                return self._open(origin), False
            if _usable(connection):
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

    def _open(self, origin) -> http.client.HTTPConnection:
        scheme, host, port = origin
        if scheme == "https":
            context = self.ssl_context or ssl.create_default_context()
            connection = http.client.HTTPSConnection(host, port, timeout=self.timeout, context=context)
        else:
            connection = http.client.HTTPConnection(host, port, timeout=self.timeout)
        try:
            connection.connect()
        except (ssl.SSLError, ssl.CertificateError) as exc:
            connection.close()
            raise ConnectError(str(exc), tls=True) from None
        except TimeoutError as exc:
            connection.close()
            raise ConnectTimeout(str(exc) or "timed out") from None
        except OSError as exc:
            connection.close()
            raise ConnectError(str(exc)) from None
        return connection

    def _exchange(self, origin, connection, method, target, body, headers) -> Response:
        with _closed_on_failure(connection, WriteError):
            connection.request(method, target, body=body, headers=headers)
        with _closed_on_failure(connection, ReadError):
            answer = connection.getresponse()
            content = answer.read()
        self._give_back(origin, connection)
        return Response(answer.status, answer.reason, answer.headers, content)


@contextlib.contextmanager
def _closed_on_failure(connection, failure: type[TransportError]):
    """Sending or reading: a timeout is a ReadTimeout, any other failure `failure`; the connection is closed."""
    try:
        yield
    except TimeoutError as exc:
        connection.close()
        raise ReadTimeout(str(exc) or "timed out") from None
    except (OSError, http.client.HTTPException) as exc:
        connection.close()
        raise failure(str(exc) or type(exc).__name__) from None


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
