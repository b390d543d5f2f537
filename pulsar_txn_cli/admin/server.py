"""`engine serve`: the engine's REST router on Pulsar's admin paths, over HTTP.

So the REST backend, pulsar-admin and curl can talk to the engine. Requests are served one at a
time (the engine is single-threaded); `latency_ms` delays every answer, outside the lock, to
model a remote broker in benchmarks. Nothing here prints: the caller learns the bound address
through `on_ready` (serve) or the returned handle (start).
"""

from __future__ import annotations

import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import orjson

from pulsar_txn_cli.admin.engine_transport import encode_answer, split_path
from pulsar_txn_cli.errors import UsageError


class EngineServer:
    """A running server: `.url`, `.host`, `.port`, `.close()`."""

    def __init__(self, httpd: ThreadingHTTPServer, thread: threading.Thread | None, owned_engine):
        self.httpd = httpd
        self.thread = thread
        self.owned_engine = owned_engine
        host, port = httpd.server_address[:2]
        self.host, self.port = host, port
        self.url = f"http://{host}:{port}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        if self.thread is not None:
            self.thread.join(timeout=5)
        if self.owned_engine is not None:
            close = getattr(self.owned_engine, "close", None)
            if close:
                close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def make_server(engine, host: str = "127.0.0.1", port: int = 0, latency_ms: float = 0, log=None) -> ThreadingHTTPServer:
    from pulsar_txn_cli.engine import router

    lock = threading.Lock()
    delay = max(0.0, float(latency_ms)) / 1000.0

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"
        disable_nagle_algorithm = True  # headers and body are two writes: no delayed-ACK stall
        server_version = "pulsar-txn-engine"

        def _serve(self) -> None:
            route, query = split_path(self.path)
            length = int(self.headers.get("Content-Length") or 0)
            raw = self.rfile.read(length) if length else b""
            body = None
            if raw:
                try:
                    body = orjson.loads(raw)
                except orjson.JSONDecodeError:
                    body = raw.decode("utf-8", "replace")
            with lock:
                try:
                    answer = router.handle(engine, self.command, route, query, body)
                except Exception as exc:  # noqa: BLE001 - the client gets a 500, like a broker's
                    answer = (500, {"reason": f"{type(exc).__name__}: {exc}"})
            if delay:
                time.sleep(delay)
            status, headers, data = encode_answer(answer)
            self.send_response(status)
            for key, value in headers.items():
                self.send_header(key, value)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(data)

        do_GET = do_POST = do_PUT = do_DELETE = do_HEAD = _serve

        def log_message(self, fmt, *args) -> None:
            if log:
                log(f"{self.address_string()} {fmt % args}")

    try:
        httpd = ThreadingHTTPServer((host, port), Handler)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    httpd.daemon_threads = True
    return httpd


def start(
    engine_dir: str | None = None,
    *,
    engine=None,
    host: str = "127.0.0.1",
    port: int = 0,
    latency_ms: float = 0,
    log=None,
) -> EngineServer:
    """Serve in a background thread (tests, benchmarks, the demo); close() the handle to stop."""
    owned = None
    if engine is None:
        from pulsar_txn_cli.admin.engine_transport import open_engine

        engine = owned = open_engine(engine_dir)
    httpd = make_server(engine, host, port, latency_ms, log)
    thread = threading.Thread(
        target=httpd.serve_forever, kwargs={"poll_interval": 0.05}, name="engine-serve", daemon=True
    )
    thread.start()
    handle = EngineServer(httpd, thread, owned)
    if owned is not None:
        _announce(owned, handle.url)
    return handle


def serve(
    engine_dir: str, host: str = "127.0.0.1", port: int = 0, latency_ms: float = 0, log=None, on_ready=None
) -> None:
    """Serve in the foreground until interrupted; on_ready(url) is called once listening (else log gets it)."""
    from pulsar_txn_cli.admin.engine_transport import open_engine

    engine = open_engine(engine_dir)
    httpd = make_server(engine, host, port, latency_ms, log)
    handle = EngineServer(httpd, None, engine)
    _announce(engine, handle.url)
    try:
        if on_ready:
            on_ready(handle.url)
        elif log:
            log(
                f"serving the engine in {engine_dir} on {handle.url} (Ctrl-C to stop); "
                f"`pulsar-txn engine simulate --admin-url {handle.url}` adds a workload"
            )
        httpd.serve_forever()
    except KeyboardInterrupt:
        pass  # Ctrl-C is the normal way to stop
    finally:
        httpd.server_close()
        close = getattr(engine, "close", None)
        if close:
            close()


def _announce(engine, url: str) -> None:
    """Name the URL in the engine's lock file: a command that finds the engine locked points to it."""
    announce = getattr(getattr(engine, "store", None), "announce_url", None)
    if announce:
        announce(url)
