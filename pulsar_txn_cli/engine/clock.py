"""The engine's clock: persisted virtual time plus the timers that fire on it.

Time only moves when the engine is told to move it (simulate, or running pending timers), so
a seeded workload is reproducible and a max-delay flush happens at a deterministic instant.
Internally microseconds; Pulsar-facing values are epoch milliseconds.
"""

from __future__ import annotations

import heapq
import itertools

# The virtual epoch of a new engine: 2026-01-01T00:00:00Z (fixed, so dumps are reproducible).
EPOCH_MS = 1_767_225_600_000


class Clock:
    def __init__(self, store):
        self.store = store
        self.now_us = int(store.meta("clock_us") or EPOCH_MS * 1000)
        self._saved = self.now_us
        self._timers: list = []
        self._seq = itertools.count()

    @property
    def now_ms(self) -> int:
        return self.now_us // 1000

    def call_at(self, at_us: int, fn) -> None:
        """Run fn() when the clock reaches at_us (timers are not persisted: a broker's are not either)."""
        now = self.now_us
        heapq.heappush(self._timers, (at_us if at_us > now else now, next(self._seq), fn))

    def next_timer(self) -> int | None:
        return self._timers[0][0] if self._timers else None

    def run_until(self, until_us: int) -> None:
        """Fire every timer due up to until_us in time order, then set the clock to until_us."""
        self._run(until_us, 1 << 62)
        if until_us > self.now_us:
            self.now_us = until_us
        self._dirty()

    def run_until_idle(self, limit: int = 10_000_000) -> None:
        """Fire timers (and what they schedule) until none are left."""
        self._run(1 << 62, limit)

    def _run(self, until_us: int, instants: int) -> None:
        """Fire the timers due up to until_us, at most `instants` distinct instants of them."""
        timers = self._timers
        pop = heapq.heappop
        scope = self.store.tx()
        while timers and instants > 0:
            at = timers[0][0]
            if at > until_us:
                break
            instants -= 1
            if at > self.now_us:
                self.now_us = at
            # Everything due at one instant shares one database commit (group commit); the
            # callbacks of the adds run after it.
            with scope:
                while timers and timers[0][0] == at:
                    pop(timers)[2]()
            if self.now_us != self._saved:  # _dirty(), inline: once per instant
                self.store.dirty(self)
        self._dirty()

    def advance_ms(self, ms: int) -> None:
        self.run_until(self.now_us + ms * 1000)

    def _dirty(self) -> None:
        if self.now_us != self._saved:
            self.store.dirty(self)

    def save(self) -> None:
        self.store.set_meta("clock_us", str(self.now_us))
        self._saved = self.now_us
