"""A real local HTTP server that answers from a script, to misbehave on purpose.

`ScriptedServer(handler)` calls handler(request) for every request; the handler returns
(status, headers, body) or one of the actions DROP (close the socket without answering),
("sleep", seconds, answer) and ("close", answer) (answer, then close the kept-alive connection
without saying so, as a server's idle timeout does). Every request is recorded with its headers;
`wait_closed(n)` waits until the server has closed n connections.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

DROP = "drop"


@dataclass
class Request:
    method: str
    path: str
    headers: dict
    body: bytes
    peer: tuple = ()  # the client's (host, port): one per connection


class ScriptedServer:
    def __init__(self, handler, *, ssl_context=None, host: str = "127.0.0.1", port: int = 0):
        self.handler = handler
        self.requests: list[Request] = []
        self.closed = 0  # connections the server has shut down and closed
        self._closing = threading.Condition()
        owner = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # one small answer in two writes would wait for a delayed ACK

            def _any(self):
                length = int(self.headers.get("Content-Length") or 0)
                request = Request(
                    self.command,
                    self.path,
                    dict(self.headers),
                    self.rfile.read(length) if length else b"",
                    self.client_address,
                )
                owner.requests.append(request)
                answer = owner.handler(request)
                if isinstance(answer, tuple) and answer and answer[0] == "sleep":
                    time.sleep(answer[1])
                    answer = answer[2]
                close = isinstance(answer, tuple) and answer and answer[0] == "close"
                if close:
                    answer = answer[1]
                if answer == DROP:
                    self.close_connection = True
                    self.connection.shutdown(socket.SHUT_RDWR)
                    return
                status, headers, body = answer
                if not isinstance(body, (bytes, str)):
                    body = json.dumps(body)
                    headers = {"Content-Type": "application/json", **headers}
                data = body.encode() if isinstance(body, str) else body
                try:
                    self.send_response(status)
                    for key, value in headers.items():
                        self.send_header(key, value)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                    if close:
                        self.close_connection = True
                except (BrokenPipeError, ConnectionResetError):
                    pass

            do_GET = do_POST = do_PUT = do_DELETE = _any

            def log_message(self, *args):
                pass

        class Server(ThreadingHTTPServer):
            def shutdown_request(self, request):
                super().shutdown_request(request)
                with owner._closing:
                    owner.closed += 1
                    owner._closing.notify_all()

        self.httpd = Server((host, port), Handler)
        self.httpd.daemon_threads = True
        scheme = "http"
        if ssl_context is not None:
            self.httpd.socket = ssl_context.wrap_socket(self.httpd.socket, server_side=True)
            scheme = "https"
        self.url = f"{scheme}://{host}:{self.httpd.server_address[1]}"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def wait_closed(self, count: int, timeout: float = 10.0) -> None:
        """Until the server has closed COUNT connections (its side of each: shut down, then closed)."""
        with self._closing:
            if not self._closing.wait_for(lambda: self.closed >= count, timeout):
                raise AssertionError(f"the server closed {self.closed} connections in {timeout} s, not {count}")

    def close(self):
        self.httpd.shutdown()
        self.httpd.server_close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def json_answer(value, status=200, headers=None):
    return status, dict(headers or {}), value
