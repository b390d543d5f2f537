"""The exporter's loop: observe every interval in the background, serve the latest observation.

Scrapes never wait for the target: they read the last snapshot, whose age the
`pulsar_txn_exporter_last_success_timestamp_seconds` series gives.
"""

from __future__ import annotations

import threading

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import CollectorRegistry

from pulsar_txn_cli.exporter import families


class Exporter:
    """Holds the latest snapshot; `refresh()` takes a new one; it is its own Prometheus collector."""

    def __init__(self, observe, on_refresh=None):
        self._observe = observe  # () -> Snapshot
        self._on_refresh = on_refresh or (lambda snapshot: None)
        self._lock = threading.Lock()
        self.snapshot = None
        self.last_success: float | None = None
        self.observations = 0
        self.failures = 0
        self.registry = CollectorRegistry(auto_describe=False)
        self.registry.register(self)

    def refresh(self):
        snapshot = self._observe()
        with self._lock:
            self.snapshot = snapshot
            self.observations += 1
            if snapshot.ok:
                self.last_success = snapshot.started
            else:
                self.failures += 1
        self._on_refresh(snapshot)
        return snapshot

    def collect(self):
        with self._lock:
            snapshot, last, total, failed = self.snapshot, self.last_success, self.observations, self.failures
        yield CounterMetricFamily("pulsar_txn_exporter_observations", "Observations of the target taken.", value=total)
        yield CounterMetricFamily(
            "pulsar_txn_exporter_observation_failures", "Observations of the target that failed.", value=failed
        )
        if snapshot is not None:
            yield from families.of(snapshot, last)

    def text(self) -> str:
        from prometheus_client import generate_latest

        return generate_latest(self.registry).decode()

    def run(self, interval: float, stop: threading.Event) -> None:
        """Refresh `interval` seconds after each observation started, until `stop` is set."""
        while not stop.wait(max(0.0, interval - (self.snapshot.duration if self.snapshot else 0.0))):
            self.refresh()


def serve(exporter: Exporter, *, bind: str, port: int):
    """Start the HTTP endpoint (/metrics) in a daemon thread; returns the server."""
    from prometheus_client import start_http_server

    server, _thread = start_http_server(port, addr=bind, registry=exporter.registry)
    return server
