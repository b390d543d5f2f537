"""Admin layer: request overhead per backend, and discovery/stat with bounded concurrency over a slow link.

Builds a small engine (simulate), then measures
- requests per second for coordinator-stats: in process vs over HTTP (engine/server.py);
- `subscriptions` discovery and get-txn-pending-ack-batch-log-stat at concurrency 1 vs 8 against
  `engine serve --latency-ms N` (a remote broker's round trip);
- the transport's CPU per request (stdlib http.client, httpx.Client, pulsar-txn's RestTransport) against a
  small keep-alive server in another process (so the figure is the client's CPU alone).
Options: --latency-ms N (default 5), --subscriptions N (default 32), --requests N (default 300).
"""

from __future__ import annotations

import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _opts(argv):
    values = {"--latency-ms": 5, "--subscriptions": 32, "--requests": 300}
    for arg in argv:
        key, _, value = arg.partition("=")
        if key in values and value:
            values[key] = int(value)
    return values


def _admin_for(url=None, engine_dir=None):
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags

    return connect(TargetFlags(admin_url=url, engine_dir=engine_dir), environ={})


def _rate(label, n, fn):
    started = time.perf_counter()
    for _ in range(n):
        fn()
    elapsed = time.perf_counter() - started
    print(f"  {label:<44} {n / elapsed:9.0f} req/s   ({elapsed * 1000 / n:.2f} ms each)")


def _timed(label, fn):
    started = time.perf_counter()
    result = fn()
    print(f"  {label:<44} {(time.perf_counter() - started) * 1000:9.0f} ms")
    return result


# A fixed small JSON answer over keep-alive HTTP/1.1: the server costs the measuring process nothing.
SERVER = """
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
BODY = b'{"ongoingTxnSize": 0, "recoverStartTime": 0, "state": "Ready"}'
class H(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    disable_nagle_algorithm = True
    def do_GET(self):
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(BODY)))
        self.end_headers()
        self.wfile.write(BODY)
    def log_message(self, *args):
        pass
server = ThreadingHTTPServer(("127.0.0.1", 0), H)
print(server.server_address[1], flush=True)
server.serve_forever()
"""


def transport_cpu(n: int) -> None:
    """CPU ms per GET, one at a time, through each client (the server is another process)."""
    import http.client
    import json

    import httpx

    from pulsar_txn_cli.transport.http_client import RestTransport
    from pulsar_txn_cli.target.settings import Target

    server = subprocess.Popen([sys.executable, "-c", SERVER], stdout=subprocess.PIPE, text=True)
    try:
        port = int(server.stdout.readline())
        url, path = f"http://127.0.0.1:{port}", "/admin/v3/transactions/coordinatorStats?coordinatorId=0"
        stdlib = http.client.HTTPConnection("127.0.0.1", port)
        client = httpx.Client(headers={"Accept": "application/json"})
        transport = RestTransport(Target(kind="cluster", url=url, request_timeout=10.0))

        def plain():
            stdlib.request("GET", path, headers={"Accept": "application/json"})
            return json.loads(stdlib.getresponse().read())

        ways = {
            "http.client (bare)": plain,
            "httpx.Client": lambda: client.get(url + path).json(),
            "RestTransport (pulsar-txn)": lambda: json.loads(transport.request("GET", path)[2]),
        }
        print(f"transport CPU per request ({n} GETs one at a time, a local keep-alive server in another process):")
        for name, call in ways.items():
            call()  # the connection opened, untimed
            wall, cpu = time.perf_counter(), time.process_time()
            for _ in range(n):
                call()
            cpu_ms, wall_ms = 1000 * (time.process_time() - cpu) / n, 1000 * (time.perf_counter() - wall) / n
            print(f"  {name:<44} {cpu_ms:9.3f} ms CPU   ({wall_ms:.3f} ms wall)")
        stdlib.close()
        client.close()
        transport.close()
    finally:
        server.kill()
        server.wait()


def main(argv):
    from pulsar_txn_cli import batchlog
    from pulsar_txn_cli.engine import server
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    opts = _opts(argv)
    transport_cpu(max(opts["--requests"], 1000))
    with tempfile.TemporaryDirectory() as tmp:
        directory = str(Path(tmp) / "engine")
        engine = Engine.init(directory, coordinators=4)
        simulate(
            engine,
            SimOptions(transactions=200, concurrency=16, topics=8, subscriptions=opts["--subscriptions"], seed=3),
        )
        engine.close()
        print(f"engine with 4 coordinators, {opts['--subscriptions']} transactional subscriptions")

        local = _admin_for(engine_dir=directory)
        _rate("coordinator-stats, in process", opts["--requests"], local.coordinator_stats)
        local.close()
        with server.start(directory) as served:
            remote = _admin_for(url=served.url)
            _rate("coordinator-stats, HTTP on loopback", opts["--requests"], remote.coordinator_stats)
            remote.close()

        latency = opts["--latency-ms"]
        with server.start(directory, latency_ms=latency) as served:
            remote = _admin_for(url=served.url)
            print(f"over HTTP with {latency} ms added per request:")
            for concurrency in (1, 8):
                found = _timed(
                    f"subscriptions, concurrency {concurrency}",
                    lambda c=concurrency: transactional_subscriptions(remote, concurrency=c),
                )
            for concurrency in (1, 8):
                _timed(
                    f"get-txn-pending-ack-batch-log-stat, concurrency {concurrency}",
                    lambda c=concurrency: batchlog.batch_log_stat(remote, batchlog.PENDING_ACK, concurrency=c),
                )
            print(f"  ({len(found)} subscriptions found)")
            remote.close()
