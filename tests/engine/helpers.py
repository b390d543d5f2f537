"""Real SQLite stores for the engine tests (tmp_path directories)."""

from __future__ import annotations

from pulsar_txn_cli.codec import decode_entry
from pulsar_txn_cli.engine.clock import Clock
from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.engine.writer_stats import Metrics
from pulsar_txn_cli.engine.store import Store
from pulsar_txn_cli.engine.writer import BufferedWriter


class Rig:
    """A store, a clock, metrics and one open managed ledger: what a writer needs."""

    def __init__(self, directory, name="pulsar/system/persistent/__transaction_log_0"):
        self.store = Store(directory, create=True)
        self.clock = Clock(self.store)
        self.metrics = Metrics(self.store, "test", "localhost")
        self.ml = ManagedLedger.get(self.store, self.clock, name)
        self.ml.open_new_ledger({})
        self.store.save_all()
        self.done: list = []
        self.failed: list = []

    def writer(self, **kw) -> BufferedWriter:
        kw.setdefault("batch_enabled", True)
        return BufferedWriter(self.ml, self.clock, self.metrics.tc, **kw)

    def add(self, writer, data: bytes, tag=None):
        tag = data if tag is None else tag
        writer.add(data, lambda pos: self.done.append((tag, pos)), lambda exc: self.failed.append((tag, exc)))

    def entries(self):
        return list(self.ml.read_all())

    def tick(self, ms: float = 1.0):
        self.clock.run_until(self.clock.now_us + int(ms * 1000))

    def close(self):
        self.store.close()


def records_of(data: bytes, log="tc"):
    return decode_entry(data, log)
