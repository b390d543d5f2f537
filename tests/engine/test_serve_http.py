"""`engine serve` on a production HTTP server: clients that leave, Ctrl-C and SIGTERM.

Real parts: the real `pulsar-txn engine serve` in its own process (SIGINT at its default, as a shell
gives it), real sockets on loopback, a real engine directory. A client that leaves mid-answer is not
an error; Ctrl-C exits 130 and says what was kept; 64 concurrent clients get every answer.
"""

from __future__ import annotations

import asyncio
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pulsar_txn_cli.engine.broker import Engine
from tests import sigint
from tests.conftest import assert_no_crash, isolate

BIN = Path(sys.executable).parent
STATS = "/admin/v3/transactions/coordinatorStats"


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


class Served:
    """`pulsar-txn engine serve --port 0` in its own process, its stderr collected in a file."""

    def __init__(self, directory: Path, tmp_path: Path, *extra: str):
        if not (BIN / "pulsar-txn").exists():
            pytest.fail("the pulsar-txn console script is not installed next to this Python: ./dev setup installs it")
        self.log = tmp_path / "serve.stderr"
        self.err = self.log.open("w")
        self.proc = sigint.popen(  # SIGINT at its default: a test run may inherit it ignored
            [str(BIN / "pulsar-txn"), "engine", "serve", "--port", "0", "--engine-dir", str(directory), *extra],
            stdout=subprocess.DEVNULL,
            stderr=self.err,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"on http://127\.0\.0\.1:(\d+) \(Ctrl-C to stop\)", self.stderr())
            if found:
                self.port = int(found.group(1))
                return
            assert self.proc.poll() is None, self.stderr()
            time.sleep(0.05)
        self.proc.kill()
        pytest.fail(f"engine serve did not say where it listens: {self.stderr()}")

    def stderr(self) -> str:
        return self.log.read_text()

    def get(self, path: str = STATS) -> tuple[int, bytes]:
        with socket.create_connection(("127.0.0.1", self.port), timeout=10) as sock:
            sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
            data = b""
            while chunk := sock.recv(65536):
                data += chunk
        head, _, body = data.partition(b"\r\n\r\n")
        return int(head[9:12]), body

    def stop(self, sig=signal.SIGINT) -> int:
        self.proc.send_signal(sig)
        try:
            return self.proc.wait(timeout=30)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
            self.err.close()


def _engine(tmp_path: Path, coordinators: int = 2) -> Path:
    directory = tmp_path / "engine"
    Engine.init(directory, coordinators=coordinators).close()
    return directory


def _leave_mid_answer(port: int, requests: int = 300) -> None:
    """Ask for many answers at once (pipelined), read a little, then reset the connection (RST):
    the server is still writing answers when the client is gone."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    one = f"GET {STATS} HTTP/1.1\r\nHost: x\r\n\r\n".encode()
    sock.sendall(one * requests)
    sock.recv(100)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


def _leave_before_reading(port: int) -> None:
    """Send a whole request and close at once, without reading the answer."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(f"GET {STATS} HTTP/1.1\r\nHost: x\r\n\r\n".encode())


def _leave_mid_request(port: int) -> None:
    """Send half a request, then reset."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    sock.sendall(b"POST /pulsar-txn/v1/engine/simulate HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{")
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    sock.close()


@pytest.mark.timeout(180)
def test_clients_that_leave_are_not_errors(tmp_path):
    """The old server printed a traceback (BrokenPipeError, ConnectionResetError) each time."""
    served = Served(_engine(tmp_path, coordinators=16), tmp_path)
    try:
        for _ in range(10):
            _leave_mid_answer(served.port)
            _leave_before_reading(served.port)
            _leave_mid_request(served.port)
        status, body = served.get()  # still serving, and answering in full
        assert status == 200 and len(json.loads(body)) == 16
    finally:
        code = served.stop()
    err = served.stderr()
    assert_no_crash(code, err)
    assert "Error" not in err and "Exception" not in err, err
    assert "disconnected" not in err  # without --debug a client that leaves is not worth a line
    assert code == 130, err


@pytest.mark.timeout(180)
def test_under_debug_a_client_that_leaves_is_one_line_at_most(tmp_path):
    served = Served(_engine(tmp_path, coordinators=16), tmp_path, "--debug")
    try:
        for _ in range(5):
            _leave_mid_answer(served.port)
        assert served.get()[0] == 200
    finally:
        code = served.stop()
    err = served.stderr()
    assert_no_crash(code, err, debug=True)
    assert "Traceback" not in err and "Error" not in err, err  # a client that leaves is not an error, even with --debug
    said = [line for line in err.splitlines() if "disconnected" in line]
    assert len(said) <= 5, err  # one line per client that left, at most
    assert all(line.startswith("debug: ") and "the answer was dropped" in line for line in said), said


@pytest.mark.timeout(180)
def test_ctrl_c_exits_130_and_says_what_was_kept(tmp_path, cli):
    """`engine serve` exited 0 on Ctrl-C and said nothing."""
    directory = _engine(tmp_path)
    served = Served(directory, tmp_path)
    try:
        url = f"http://127.0.0.1:{served.port}"
        added = cli(["engine", "simulate", "--admin-url", url, "-n", "7", "-o", "json"])
        assert added.exit_code == 0, added.stderr
    finally:
        code = served.stop(signal.SIGINT)
    err = served.stderr()
    assert code == 130, err
    last = err.strip().splitlines()[-1]
    assert re.fullmatch(
        rf"interrupted \(Ctrl-C\): stopped serving http://127\.0\.0\.1:{served.port} after \d+ requests?; "
        rf"the engine in {re.escape(str(directory))} keeps every change it answered and was closed cleanly",
        last,
    ), err
    assert err.count("interrupted") == 1, err
    assert_no_crash(code, err)
    with Engine.open(directory) as engine:  # what it said was kept is there
        assert engine.tc(0).sequence + engine.tc(1).sequence == 7 - 2  # 7 transactions over 2 coordinators


@pytest.mark.timeout(120)
def test_sigterm_stops_it_cleanly(tmp_path):
    directory = _engine(tmp_path)
    served = Served(directory, tmp_path)
    assert served.get()[0] == 200
    code = served.stop(signal.SIGTERM)
    err = served.stderr()
    assert code == 0, err
    assert f"stopped serving http://127.0.0.1:{served.port} (SIGTERM) after 1 request;" in err, err
    Engine.open(directory).close()  # the lock was let go


@pytest.mark.timeout(60)
def test_a_port_in_use_is_one_sentence(tmp_path, cli):
    directory = _engine(tmp_path)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        result = cli(["engine", "serve", "--port", str(port), "--engine-dir", directory])
    assert result.exit_code == 2, result.stderr
    assert f"error: cannot listen on 127.0.0.1:{port}: Address already in use" in result.stderr
    Engine.open(directory).close()  # and the engine directory was let go


@pytest.mark.timeout(180)
def test_64_concurrent_clients_get_every_answer(tmp_path):
    """Bounded: 64 keep-alive connections, 40 requests each, 120 s at most; no error, every answer whole."""
    from bench.bench_serve import load
    from pulsar_txn_cli.engine import server

    directory = _engine(tmp_path, coordinators=4)
    with server.start(str(directory)) as served:
        got = asyncio.run(load(served.port, 64, 64 * 40, 120))
        assert served.app.served >= 64 * 40
    assert got["errors"] == []
    assert got["answered"] == 64 * 40


@pytest.mark.timeout(60)
def test_a_body_over_the_limit_is_413_and_the_server_goes_on(tmp_path, monkeypatch):
    from bench.bench_serve import load
    from pulsar_txn_cli.engine import server

    monkeypatch.setattr(server, "MAX_BODY", 64)
    directory = _engine(tmp_path)
    with server.start(str(directory)) as served:
        with socket.create_connection(("127.0.0.1", served.port), timeout=10) as sock:
            body = b"{" + b" " * 200 + b"}"
            sock.sendall(
                b"POST /pulsar-txn/v1/engine/simulate HTTP/1.1\r\nHost: x\r\nConnection: close\r\n"
                + f"Content-Length: {len(body)}\r\n\r\n".encode()
                + body
            )
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        assert answer.startswith(b"HTTP/1.1 413 "), answer[:200]
        assert json.loads(answer.partition(b"\r\n\r\n")[2]) == {"reason": "the request body is over 64 bytes"}
        status = asyncio.run(load(served.port, 1, 1, 30))
        assert status["answered"] == 1 and status["errors"] == []


@pytest.mark.timeout(120)
def test_each_line_of_its_log_says_when(tmp_path):
    """An access log without times cannot be matched with a client's failure or a broker's log."""
    import datetime as dt

    served = Served(_engine(tmp_path), tmp_path)
    before = dt.datetime.now(dt.timezone.utc) - dt.timedelta(seconds=1)
    assert served.get()[0] == 200
    assert served.stop(signal.SIGTERM) == 0
    after = dt.datetime.now(dt.timezone.utc) + dt.timedelta(seconds=1)
    lines = [line for line in served.stderr().splitlines() if not line.startswith(("engine:", "target:"))]
    stamp = r"(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z) "
    assert re.fullmatch(stamp + r"serving the engine in .*", lines[0]), lines
    access = re.fullmatch(stamp + rf'127\.0\.0\.1 "GET {STATS} HTTP/1\.1" 200 \d+', lines[1])
    assert access, lines
    assert re.fullmatch(stamp + r"stopped serving .* after 1 request; .*", lines[2]), lines
    when = dt.datetime.strptime(access.group(1), "%Y-%m-%dT%H:%M:%S.%fZ").replace(tzinfo=dt.timezone.utc)
    assert before <= when <= after
