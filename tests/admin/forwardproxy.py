"""A small forward HTTP proxy for the tests, a real one on a local socket: plain HTTP requests in absolute form
(one a connection, forwarded in origin form, the answer marked Connection: close) and CONNECT tunnels for HTTPS. It records what it was asked, and
can demand Proxy-Authorization. Debian's tinyproxy would do the same; this one starts in a millisecond and says
what it saw."""

from __future__ import annotations

import base64
import socket
import threading
from urllib.parse import urlsplit


class ForwardProxy:
    def __init__(self, *, credentials: tuple[str, str] | None = None):
        self.seen: list[str] = []  # each request line, as the client sent it
        self.credentials = credentials
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        with client:
            head = b""
            while b"\r\n\r\n" not in head:
                data = client.recv(65536)
                if not data:
                    return
                head += data
            head, _, rest = head.partition(b"\r\n\r\n")
            lines = head.decode("latin-1").split("\r\n")
            method, target, version = lines[0].split(" ")
            self.seen.append(f"{method} {target}")
            if self.credentials and not self._authorized(lines[1:]):
                client.sendall(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                return
            if method == "CONNECT":
                host, port = target.rsplit(":", 1)
                with socket.create_connection((host, int(port))) as upstream:
                    client.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    if rest:
                        upstream.sendall(rest)
                    _pipe(client, upstream)
                return
            length = next(
                (int(line.partition(":")[2]) for line in lines if line.lower().startswith("content-length:")), 0
            )
            while len(rest) < length:  # the body may come after the head
                rest += client.recv(65536)
            parts = urlsplit(target)
            path = parts.path + (f"?{parts.query}" if parts.query else "")
            kept = [line for line in lines[1:] if not line.lower().startswith(("proxy-", "connection:"))]
            message = "\r\n".join([f"{method} {path} {version}", *kept, "Connection: close", "", ""])
            with socket.create_connection((parts.hostname, parts.port or 80)) as upstream:
                upstream.sendall(message.encode("latin-1") + rest)
                answer = b""
                while data := upstream.recv(65536):
                    answer += data
            # One request a connection, and the client told so: it must not send another on this one.
            head, _, body = answer.partition(b"\r\n\r\n")
            kept = [line for line in head.split(b"\r\n") if not line.lower().startswith(b"connection:")]
            client.sendall(b"\r\n".join([*kept, b"Connection: close", b"", b""]) + body)

    def _authorized(self, headers: list[str]) -> bool:
        expected = "Basic " + base64.b64encode(":".join(self.credentials).encode()).decode()
        return any(
            name.strip().lower() == "proxy-authorization" and value.strip() == expected
            for name, _, value in (line.partition(":") for line in headers)
        )

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.sock.close()


def _pipe(a: socket.socket, b: socket.socket) -> None:
    """Copy both ways until either side closes."""

    def copy(source, sink):
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        for s in (source, sink):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    other = threading.Thread(target=copy, args=(b, a), daemon=True)
    other.start()
    copy(a, b)
    other.join(timeout=30)
