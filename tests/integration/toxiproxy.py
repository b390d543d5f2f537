"""Toxiproxy (github.com/Shopify/toxiproxy, v2.9.0, built by setup.sh) for the `faults` tests: a real
TCP proxy between the tool and a broker, or between the brokers and ZooKeeper or the bookie, whose
faults (latency, resets, a peer that never answers, a trickle, a cut link) are switched on and off
through its REST API.

Every listener is on 127.0.0.1 (the API and each proxy); the server runs in its own process group with a
watchdog, like the brokers (cluster.py). A missing binary FAILS the test that wants it (run setup.sh).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from harness import _kill_group, free_port

HERE = Path(__file__).resolve().parent
VERSION = "v2.9.0"
BINARY = Path(os.environ.get("PULSAR_TXN_TOXIPROXY", HERE / "toxiproxy" / "bin" / "toxiproxy-server"))
MAX_LIFETIME = float(os.environ.get("PULSAR_TXN_TOXIPROXY_MAX_LIFETIME", "5400"))


class Toxiproxy:
    def __init__(self, log: Path):
        if not BINARY.exists():
            pytest.fail(
                f"no Toxiproxy at {BINARY}: run `bash tests/integration/setup.sh` (it builds {VERSION} with go install)",
                pytrace=False,
            )
        self.port = free_port()
        self.api = f"http://127.0.0.1:{self.port}"
        self.log = log
        with open(log, "a") as out:
            self.proc = subprocess.Popen(
                [str(BINARY), "-host", "127.0.0.1", "-port", str(self.port)],
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        proc = self.proc
        self._watchdog = threading.Timer(
            MAX_LIFETIME, lambda: proc.poll() is None and _kill_group(proc, signal.SIGKILL)
        )
        self._watchdog.daemon = True
        self._watchdog.start()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            try:
                self._call("GET", "/version")
                return
            except OSError:
                if self.proc.poll() is not None:
                    break
                time.sleep(0.2)
        self.stop()
        raise RuntimeError(f"Toxiproxy did not answer on {self.api}:\n{log.read_text()[-3000:]}")

    def _call(self, method: str, path: str, body: dict | None = None):
        data = json.dumps(body).encode() if body is not None else None
        req = urllib.request.Request(self.api + path, data=data, method=method)
        req.add_header("Content-Type", "application/json")
        try:
            with urllib.request.urlopen(req, timeout=10) as resp:
                text = resp.read().decode()
        except urllib.error.HTTPError as e:
            raise RuntimeError(f"toxiproxy {method} {path}: HTTP {e.code} {e.read().decode()[:500]}") from e
        return json.loads(text) if text.strip() else None

    def proxy(self, name: str, upstream_port: int) -> "Proxy":
        """A proxy listening on a free 127.0.0.1 port to 127.0.0.1:upstream_port."""
        listen = free_port()
        self._call(
            "POST",
            "/proxies",
            {"name": name, "listen": f"127.0.0.1:{listen}", "upstream": f"127.0.0.1:{upstream_port}", "enabled": True},
        )
        return Proxy(self, name, listen)

    def stop(self) -> None:
        self._watchdog.cancel()
        if self.proc.poll() is None:
            _kill_group(self.proc, signal.SIGKILL)
            self.proc.wait(10)


class Proxy:
    def __init__(self, server: Toxiproxy, name: str, port: int):
        self.server, self.name, self.port = server, name, port

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def toxic(self, kind: str, stream: str = "downstream", **attributes) -> str:
        """Add a toxic (latency, reset_peer, timeout, bandwidth, slicer, limit_data); returns its name."""
        name = f"{kind}-{stream}"
        self.server._call(
            "POST",
            f"/proxies/{self.name}/toxics",
            {"name": name, "type": kind, "stream": stream, "toxicity": 1.0, "attributes": attributes},
        )
        return name

    def clear(self) -> None:
        for toxic in self.server._call("GET", f"/proxies/{self.name}/toxics") or []:
            self.server._call("DELETE", f"/proxies/{self.name}/toxics/{toxic['name']}")

    def cut(self) -> None:
        """The link goes down: open connections are closed and new ones refused."""
        self.server._call("POST", f"/proxies/{self.name}", {"enabled": False})

    def restore(self) -> None:
        self.clear()
        self.server._call("POST", f"/proxies/{self.name}", {"enabled": True})
