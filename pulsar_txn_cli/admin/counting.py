"""The requests a PulsarAdmin sends to its target, counted: the figure `doctor` publishes and the
downgrade benchmark compares with the manual procedure. One request is one call of the transport (one
REST request; a retry or a redirect of it is the same request), whichever method or composition made it."""

from __future__ import annotations

import copy
import threading


class CountingTransport:
    """A transport that counts the requests passing through it, from any thread."""

    def __init__(self, transport):
        self._transport = transport
        self.count = 0
        self._lock = threading.Lock()

    def request(self, *args, **kwargs):
        with self._lock:
            self.count += 1
        return self._transport.request(*args, **kwargs)

    def __getattr__(self, name):
        return getattr(self._transport, name)


def counted(admin):
    """The same PulsarAdmin (target, and what it already knows: its identity, cluster and clock) whose
    requests from now on are counted (requests_sent); one already counted is returned as it is."""
    if isinstance(admin.transport, CountingTransport):
        return admin
    out = copy.copy(admin)
    out.transport = CountingTransport(admin.transport)
    return out


def requests_sent(admin) -> int:
    """How many requests a counted() PulsarAdmin has sent; 0 for one that is not counted."""
    return getattr(admin.transport, "count", 0) if isinstance(admin.transport, CountingTransport) else 0
