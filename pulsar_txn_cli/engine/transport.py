"""The in-process transport: the embedded engine's REST router, without a socket.

Answers go through JSON bytes exactly like the HTTP server's, so both backends hand PulsarAdmin
identical data. Calls addressed to one broker (an absolute URL) reach the engine's only broker.
"""

from __future__ import annotations

import threading
from contextlib import contextmanager
from urllib.parse import parse_qsl, urlsplit

import orjson


def open_engine(engine_dir: str, source: str = "default"):
    """The engine of this directory. The default engine is created on first use (the default target
    must just work); a directory someone named must hold an engine: a mistyped --engine-dir would
    otherwise answer as a brand-new engine with every coordinator Ready."""
    from pulsar_txn_cli.engine.broker import Engine

    require_engine(engine_dir, source)
    return Engine.open(engine_dir)


def require_engine(engine_dir: str, source: str = "default") -> None:
    """UsageError, naming the directory and the command that creates an engine there, when a named
    engine directory (not the default one) holds no engine. Nothing is created."""
    import shlex
    from pathlib import Path

    from pulsar_txn_cli.engine.broker import exists
    from pulsar_txn_cli.errors import UsageError

    if source != "default" and not exists(Path(engine_dir)):
        where = "--engine-dir" if source == "flags" else source
        quoted = shlex.quote(str(engine_dir))
        raise UsageError(
            f"no engine in {engine_dir} ({where}); `pulsar-txn engine init --engine-dir {quoted}` "
            f"creates one, or `pulsar-txn engine simulate --engine-dir {quoted}` makes one with a workload"
        )


def encode_answer(answer) -> tuple[int, dict, bytes]:
    """(status, headers, body bytes) for a router answer (status, JSON value or text)."""
    status, value = answer
    if value is None:
        return status, {}, b""
    if isinstance(value, (bytes, bytearray)):
        return status, {"content-type": "application/octet-stream"}, bytes(value)
    if isinstance(value, str):
        return status, {"content-type": "text/plain; charset=utf-8"}, value.encode()
    return status, {"content-type": "application/json"}, orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)


def split_path(path: str) -> tuple[str, dict[str, str]]:
    """(path, query dict) from a path or absolute URL with a query string."""
    parts = urlsplit(path)
    return parts.path or "/", dict(parse_qsl(parts.query, keep_blank_values=True))


class EngineTransport:
    def __init__(self, target, engine=None, *, log=None):
        self.target = target
        self.log = log
        self._engine = engine
        self._owned = engine is None
        self._lock = threading.Lock()  # the engine is single-threaded; discovery may call from a pool

    def __repr__(self) -> str:
        return f"EngineTransport({self.target.engine_dir!r})"

    @property
    def engine(self):
        if self._engine is None:
            self._engine = open_engine(self.target.engine_dir, self.target.source)
        return self._engine

    def request(self, method: str, path: str, params: dict | None = None, body=None):
        from pulsar_txn_cli.engine import router

        route, query = split_path(path)
        for key, value in (params or {}).items():
            if value is not None:
                query[key] = ("true" if value else "false") if isinstance(value, bool) else str(value)
        if body is not None:
            body = orjson.loads(orjson.dumps(body))
        with self._lock:
            answer = router.handle(self.engine, method, route, query, body)
        status, headers, raw = encode_answer(answer)
        if self.log:
            self.log(f"engine {method} {route} {query or ''} -> {status} ({len(raw)} bytes)")
        return status, headers, raw

    @contextmanager
    def holding(self):
        """The engine itself, for what no REST path serves (its stored entries), one caller at a time."""
        with self._lock:
            yield self.engine

    def now_ms(self) -> int:
        """The engine's own (virtual) time, which its stores' recoverStartTime uses."""
        with self._lock:
            return self.engine.clock.now_ms

    def close(self) -> None:
        if self._owned and self._engine is not None:
            close = getattr(self._engine, "close", None)
            if close:
                close()
            self._engine = None
