"""The engine's real parts (SQLite store, clock, config, managed ledgers) under the buffer.

engine/__init__.py is another engineer's; until it has an Engine class these tests assemble
the same real parts themselves (nothing here is mocked).
"""

from __future__ import annotations

from pulsar_txn_cli.engine.buffer.service import BufferService
from pulsar_txn_cli.engine.clock import Clock
from pulsar_txn_cli.engine.broker_config import Config
from pulsar_txn_cli.engine.store import Store

TOPIC = "persistent://public/default/orders"


class EngineParts:
    def __init__(self, directory, **settings):
        self.directory = directory
        self.settings = {
            "managedLedgerMaxEntriesPerLedger": 4,
            "managedLedgerMinLedgerRolloverTimeMinutes": 0,
            **settings,
        }
        self.open()

    def open(self):
        self.store = Store(self.directory, create=True, wait=1)
        self.clock = Clock(self.store)
        self.config = Config(self.store)
        self.service = BufferService(self.store, self.clock, lambda name, default: self.settings.get(name, default))
        return self

    def restart(self):
        """A broker restart: everything in memory is gone, only the store remains."""
        self.store.close()
        return self.open()

    def close(self):
        self.store.close()
