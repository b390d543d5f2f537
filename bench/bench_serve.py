"""`engine serve` under load: requests/s and latency of coordinator-stats from concurrent clients.

    python -m bench serve [--requests=N] [--seconds=S] [--concurrency=C,C,...] [--coordinators=N]

Builds an engine (a small workload), starts the real `pulsar-txn engine serve --port P` in its own
process (as an operator runs it; its per-request log lines go to a file), then, for each
concurrency C (default 1, 8 and 64), opens C keep-alive connections and sends
`GET /admin/v3/transactions/coordinatorStats` until N requests (default 20,000) are answered or S
seconds (default 60) have passed. The client is a bare asyncio HTTP/1.1 client (prebuilt request
bytes, Content-Length framing), cheap next to the server, so the figure is the server's.
Printed per concurrency: requests answered, requests/s, p50 and p99 latency, errors (a connection
error, a status other than 200, or an answer that is not the coordinators' JSON), and the server
process's CPU time per request (from /proc) with the rate one core would give it at that cost: on a
shared machine the wall-clock rate says as much about the other processes as about the server. Target:
>= 2,500 req/s, and no errors at 64 concurrent clients.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

PATH = "/admin/v3/transactions/coordinatorStats"


def build(directory: Path, coordinators: int) -> None:
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    with Engine.init(directory, coordinators=coordinators) as engine:
        simulate(engine, SimOptions(transactions=200, concurrency=16, topics=8, subscriptions=32, seed=3))


class ServedEngine:
    """The real CLI, `pulsar-txn engine serve`, in its own process; stopped with Ctrl-C (SIGINT)."""

    def __init__(self, directory: Path, log: Path):
        self.directory, self.log = directory, log

    def __enter__(self):
        exe = Path(sys.executable).parent / "pulsar-txn"
        command = [str(exe)] if exe.exists() else [sys.executable, "-m", "pulsar_txn_cli"]
        with socket.socket() as probe:  # a free port (the server binds it again at once)
            probe.bind(("127.0.0.1", 0))
            port = probe.getsockname()[1]
        self.err = self.log.open("w")
        self.proc = subprocess.Popen(
            [*command, "engine", "serve", "--port", str(port), "--engine-dir", str(self.directory)],
            stdout=subprocess.DEVNULL,
            stderr=self.err,
        )
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            found = re.search(r"on (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", self.log.read_text())
            if found:
                self.url, self.port = found.group(1), port
                return self
            if self.proc.poll() is not None:
                break
            time.sleep(0.05)
        self.proc.kill()
        raise SystemExit(f"engine serve did not start: {self.log.read_text()[-500:]}")

    def __exit__(self, *exc):
        import signal

        self.proc.send_signal(signal.SIGINT)
        try:
            self.code = self.proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.code = None
        self.err.close()


async def _client(port: int, request: bytes, state: dict, latencies: list, deadline: float) -> None:
    try:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
    except OSError as exc:
        state["errors"].append(f"connect: {exc}")
        return
    try:
        while state["left"] > 0 and time.perf_counter() < deadline:
            state["left"] -= 1
            started = time.perf_counter()
            try:
                writer.write(request)
                head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 10)
                status = int(head[9:12])
                length = int(re.search(rb"(?i)content-length: *(\d+)", head).group(1))
                body = await asyncio.wait_for(reader.readexactly(length), 10)
            except (OSError, asyncio.TimeoutError, asyncio.IncompleteReadError, ValueError, AttributeError) as exc:
                state["errors"].append(f"{type(exc).__name__}: {exc}")
                return
            latencies.append(time.perf_counter() - started)
            if status != 200 or not body.startswith(b'{"0":'):
                state["errors"].append(f"status {status}: {body[:80]!r}")
            elif len(latencies) % 997 == 0:  # parse one answer in a thousand in full
                import json

                json.loads(body)
    finally:
        writer.close()


async def load(port: int, concurrency: int, requests: int, seconds: float) -> dict:
    request = f"GET {PATH} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nAccept: application/json\r\n\r\n".encode()
    state = {"left": requests, "errors": []}
    latencies: list[float] = []
    started = time.perf_counter()
    deadline = started + seconds
    await asyncio.gather(*(_client(port, request, state, latencies, deadline) for _ in range(concurrency)))
    elapsed = time.perf_counter() - started
    return {"answered": len(latencies), "elapsed": elapsed, "latencies": latencies, "errors": state["errors"]}


def _cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (/proc/PID/stat), in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _ms(latencies: list[float], q: float) -> float:
    ordered = sorted(latencies)
    return 1000 * ordered[min(len(ordered) - 1, int(q * len(ordered)))] if ordered else float("nan")


def main(argv: list[str]) -> None:
    parser = argparse.ArgumentParser(prog="bench serve")
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--seconds", type=float, default=60.0)
    parser.add_argument("--concurrency", default="1,8,64")
    parser.add_argument("--coordinators", type=int, default=4)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="bench-serve-") as tmp:
        os.environ["XDG_STATE_HOME"] = str(Path(tmp) / "state")  # no trace in the user's state dir
        directory = Path(tmp) / "engine"
        build(directory, args.coordinators)
        with ServedEngine(directory, Path(tmp) / "serve.log") as served:
            print(f"engine serve at {served.url} ({args.coordinators} coordinators), GET {PATH}")
            asyncio.run(load(served.port, 4, 400, 30))  # warm-up, untimed
            print(
                f"  {'clients':>7} {'answered':>9} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} "
                f"{'server CPU/req':>14} {'req/s per server core':>21}"
            )
            for concurrency in (int(c) for c in args.concurrency.split(",")):
                cpu = _cpu_seconds(served.proc.pid)
                got = asyncio.run(load(served.port, concurrency, args.requests, args.seconds))
                cpu = _cpu_seconds(served.proc.pid) - cpu
                rate = got["answered"] / got["elapsed"]
                per = cpu / max(1, got["answered"])
                print(
                    f"  {concurrency:>7} {got['answered']:>9,} {rate:>8,.0f} {_ms(got['latencies'], 0.5):>7.2f} "
                    f"{_ms(got['latencies'], 0.99):>7.2f} {len(got['errors']):>6} {per * 1e6:>11.0f} us "
                    f"{1 / per if per else float('nan'):>21,.0f}",
                    flush=True,
                )
                for error in got["errors"][:3]:
                    print(f"    error: {error}")
        tail = Path(tmp, "serve.log").read_text().strip().splitlines()[-1:]
        print(f"engine serve exited {served.code} on Ctrl-C: {tail[0] if tail else '(nothing said)'}")
