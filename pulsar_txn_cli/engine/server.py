"""`engine serve`: the engine's REST router on Pulsar's admin paths, over HTTP.

So the REST backend, pulsar-admin and curl can talk to the engine. The server is uvicorn with its
httptools parser (a production HTTP/1.1 server: keep-alive, pipelining, request limits, graceful
shutdown) running a small raw ASGI app. The app calls the router inline on the event loop's only
thread: the engine stays single-writer with no thread hop per request, and requests are answered
one at a time, as before. `latency_ms` delays every answer after the router ran, on the event loop
(`asyncio.sleep`), so the delays of concurrent requests overlap as a remote broker's round trips do.

A client that disconnects before its answer is written is not an error: the answer is dropped,
with one debug line at most. Nothing here prints: the caller learns the bound address through
`on_ready` (serve) or the returned handle (start), and passes `log` (one line per request) and
`debug` callables. `serve` raises `errors.InterruptedWork` when Ctrl-C stopped it, saying what was kept.
"""

from __future__ import annotations

import asyncio
import signal
import socket
import threading

import orjson

from pulsar_txn_cli.engine.transport import encode_answer, split_path
from pulsar_txn_cli.errors import UsageError

SERVER_NAME = b"pulsar-txn-engine"
MAX_BODY = 64 * 1024 * 1024  # a workload's options or a config value: far below this
TOO_LARGE = object()


class EngineApp:
    """The raw ASGI app: one HTTP request in, the router's answer out. `served` counts answers sent."""

    def __init__(self, engine, latency_ms: float = 0, log=None):
        self.engine = engine
        self.delay = max(0.0, float(latency_ms)) / 1000.0
        self.log = log
        self.served = 0
        # Uncontended in `engine serve` (one thread); with start(engine=...) a test may drive the
        # same engine from its own thread between requests.
        self.lock = threading.Lock()

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http":  # lifespan is off; websockets are not served
            return
        body = await _read_body(receive)
        if body is None:
            return  # the client left before its request was complete: nothing to answer
        method = scope["method"]
        raw_path = (scope.get("raw_path") or scope["path"].encode()).decode("latin-1")
        query = scope.get("query_string") or b""
        target = f"{raw_path}?{query.decode('latin-1')}" if query else raw_path
        if body is TOO_LARGE:
            status, headers, data = encode_answer((413, {"reason": f"the request body is over {MAX_BODY:,} bytes"}))
        else:
            status, headers, data = self._answer(method, target, body)
        if self.delay:
            await asyncio.sleep(self.delay)
        head = [(b"server", SERVER_NAME), (b"content-length", str(len(data)).encode())]
        head.extend((key.encode(), value.encode()) for key, value in headers.items())
        await send({"type": "http.response.start", "status": status, "headers": head})
        await send({"type": "http.response.body", "body": b"" if method == "HEAD" else data})
        if getattr(getattr(send, "__self__", None), "disconnected", False):
            return  # the client left mid-answer: not an error, not an answer (the protocol says so under --debug)
        self.served += 1
        if self.log:
            client = scope.get("client") or ("-", 0)
            self.log(f'{client[0]} "{method} {target} HTTP/{scope.get("http_version", "1.1")}" {status} {len(data)}')

    def _answer(self, method: str, target: str, raw: bytes) -> tuple[int, dict, bytes]:
        from pulsar_txn_cli.engine import router

        route, query = split_path(target)
        body = None
        if raw:
            try:
                body = orjson.loads(raw)
            except orjson.JSONDecodeError:
                body = raw.decode("utf-8", "replace")
        with self.lock:
            try:
                answer = router.handle(self.engine, method, route, query, body)
            except Exception as exc:  # noqa: BLE001 - the client gets a 500, like a broker's
                answer = (500, {"reason": f"{type(exc).__name__}: {exc}"})
        return encode_answer(answer)


async def _read_body(receive):
    """The request's body; None if the client left first; TOO_LARGE past MAX_BODY."""
    chunks, size = [], 0
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return None
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > MAX_BODY:
            return TOO_LARGE
        chunks.append(chunk)
        if not message.get("more_body", False):
            return b"".join(chunks)


def _run(coroutine) -> None:
    """Run on uvloop (libuv's event loop: about half the per-request cost of asyncio's own)."""
    import uvloop

    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        runner.run(coroutine)


def _listen(host: str, port: int) -> socket.socket:
    """Bind before serving: a taken port is one clear sentence, and port 0's choice is known at once."""
    try:
        family = socket.AF_INET6 if ":" in host else socket.AF_INET
        # IPPROTO_TCP named: asyncio sets TCP_NODELAY only on such sockets (else each answer waits for a delayed ACK)
        sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind((host, port))
        sock.listen(2048)
    except OSError as exc:
        raise UsageError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    return sock


def _protocol_class(debug):
    """uvicorn's httptools protocol, saying under --debug (one line) when a client left mid-answer."""
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

    class Protocol(HttpToolsProtocol):
        def connection_lost(self, exc) -> None:
            cycle = getattr(self, "cycle", None)
            if debug and cycle is not None and not getattr(cycle, "response_complete", True):
                where = "%s:%d" % self.client if getattr(self, "client", None) else "a client"
                debug(f"{where} disconnected before its answer was complete; the answer was dropped")
            super().connection_lost(exc)

    return Protocol


def _uvicorn_server(app: EngineApp, *, debug=None, warn=None, main_thread: bool):
    import logging

    import uvicorn

    # uvicorn logs through `logging`: its warnings (a malformed request) go to `warn`, nothing else.
    logger = logging.getLogger("uvicorn")
    logger.propagate = False
    logger.handlers[:] = [_forwarding_handler(warn)] if warn else [logging.NullHandler()]
    logger.setLevel(logging.WARNING)
    config = uvicorn.Config(
        app,
        http=_protocol_class(debug),
        loop="none",  # _run chooses it: uvloop
        lifespan="off",
        log_config=None,
        access_log=False,
        proxy_headers=False,  # no proxy in front: the client is the socket's peer
        server_header=False,
        date_header=True,
        timeout_keep_alive=30,
        timeout_graceful_shutdown=None,  # a running workload is finished, not cut
    )
    server_class = _server_class()
    return server_class(config, handle_signals=main_thread)


def _forwarding_handler(sink):
    import logging

    class Forward(logging.Handler):
        def emit(self, record) -> None:
            sink(record.getMessage())

    return Forward(logging.WARNING)


def _server_class():
    """uvicorn.Server with our signal handling: Ctrl-C (SIGINT) and SIGTERM stop it gracefully, a
    second Ctrl-C at once, and (unlike uvicorn's own) the signal is not raised again after the
    stop: `serve` closes the engine, then says what was kept. Off the main thread, no signals."""
    from contextlib import contextmanager

    import uvicorn

    class Server(uvicorn.Server):
        def __init__(self, config, *, handle_signals: bool):
            super().__init__(config)
            self.handle_signals = handle_signals
            self.received: list[int] = []

        @contextmanager
        def capture_signals(self):
            if not self.handle_signals:
                yield
                return
            previous = {sig: signal.signal(sig, self.on_signal) for sig in (signal.SIGINT, signal.SIGTERM)}
            try:
                yield
            finally:
                for sig, handler in previous.items():
                    signal.signal(sig, handler)

        def on_signal(self, sig: int, _frame) -> None:
            self.received.append(sig)
            if self.should_exit and sig == signal.SIGINT:
                self.force_exit = True
            self.should_exit = True

    return Server


class EngineServer:
    """A server running on a background thread: `.url`, `.host`, `.port`, `.app`, `.close()`."""

    def __init__(self, server, sock: socket.socket, thread: threading.Thread, app: EngineApp, owned_engine):
        self.server, self.thread, self.app, self.owned_engine = server, thread, app, owned_engine
        self.host, self.port = sock.getsockname()[:2]
        self.url = _url(self.host, self.port)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)
        if self.owned_engine is not None:
            close = getattr(self.owned_engine, "close", None)
            if close:
                close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def _url(host: str, port: int) -> str:
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


def start(
    engine_dir: str | None = None,
    *,
    engine=None,
    host: str = "127.0.0.1",
    port: int = 0,
    latency_ms: float = 0,
    log=None,
) -> EngineServer:
    """Serve on a background thread (tests, benchmarks, the demo); close() the handle to stop."""
    owned = None
    if engine is None:
        from pulsar_txn_cli.engine.transport import open_engine

        engine = owned = open_engine(engine_dir)
    sock = _listen(host, port)
    app = EngineApp(engine, latency_ms, log)
    server = _uvicorn_server(app, main_thread=False)
    thread = threading.Thread(target=lambda: _run(server.serve(sockets=[sock])), name="engine-serve", daemon=True)
    thread.start()
    handle = EngineServer(server, sock, thread, app, owned)
    _wait_started(server, thread)
    if owned is not None:
        _announce(owned, handle.url)
    return handle


def _wait_started(server, thread: threading.Thread) -> None:
    import time

    deadline = time.monotonic() + 10
    while not server.started and thread.is_alive() and time.monotonic() < deadline:
        time.sleep(0.005)


def serve(
    engine_dir: str,
    host: str = "127.0.0.1",
    port: int = 0,
    latency_ms: float = 0,
    log=None,
    on_ready=None,
    *,
    debug=None,
    warn=None,
) -> tuple[str, int]:
    """Serve in the foreground until Ctrl-C or SIGTERM; on_ready(url) is called once listening (else
    log gets it). After SIGTERM returns (url, requests answered); after Ctrl-C raises InterruptedWork,
    which says what was kept."""
    from pulsar_txn_cli.engine.transport import open_engine
    from pulsar_txn_cli.errors import InterruptedWork
    from pulsar_txn_cli.output.units import counted

    engine = open_engine(engine_dir)
    try:
        sock = _listen(host, port)
        url = _url(*sock.getsockname()[:2])
        _announce(engine, url)
        app = EngineApp(engine, latency_ms, log)
        server = _uvicorn_server(app, debug=debug, warn=warn, main_thread=True)
        if on_ready:
            on_ready(url)
        elif log:
            log(
                f"serving the engine in {engine_dir} on {url} (Ctrl-C to stop); "
                f"`pulsar-txn engine simulate --admin-url {url}` adds a workload"
            )
        _run(server.serve(sockets=[sock]))
    finally:
        close = getattr(engine, "close", None)
        if close:
            close()
    received = server.received
    if received and received[0] == signal.SIGINT:
        raise InterruptedWork(
            f"interrupted (Ctrl-C): stopped serving {url} after {counted(app.served, 'request')}; the engine in "
            f"{engine_dir} keeps every change it answered and was closed cleanly"
        )
    return url, app.served


def _announce(engine, url: str) -> None:
    """Name the URL in the engine's lock file: a command that finds the engine locked points to it."""
    announce = getattr(getattr(engine, "store", None), "announce_url", None)
    if announce:
        announce(url)
