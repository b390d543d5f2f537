"""Every topic partition's transaction buffer in one engine, on the engine's managed ledgers.

A buffer is loaded (snapshot + replay, as on a broker's topic load) on first use in a process
and kept for the life of the engine object. Snapshot system topics are shared by the
namespace, as on a broker. Time-based snapshots follow the engine's clock.
"""

from __future__ import annotations

from dataclasses import asdict

from pulsar_txn_cli.engine.buffer.buffer import SnapshotTopics, TransactionBuffer
from pulsar_txn_cli.engine.buffer.settings import BufferConfig
from pulsar_txn_cli.engine.buffer.ledgers import ManagedLedgerLog
from pulsar_txn_cli.engine.buffer.snapshots import INDEXES_TOPIC, SEGMENTS_TOPIC, SNAPSHOT_TOPIC
from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.errors import EngineError
from pulsar_txn_cli.names import Position, TxnID, full_topic, managed_ledger_name, namespace_of

# engine config key -> ManagedLedger setting (engine/ledger.py), for the topics' own ledgers
_LEDGER_SETTINGS = {
    "managedLedgerMaxEntriesPerLedger": ("maxEntries", 50000),
    "managedLedgerMaxSizePerLedgerMbytes": ("maxSizeMb", 2048),
    "managedLedgerMinLedgerRolloverTimeMinutes": ("minRolloverMinutes", 10),
    "managedLedgerMaxLedgerRolloverTimeMinutes": ("maxRolloverMinutes", 240),
}


class TopicNotFound(EngineError):
    """The topic has no managed ledger in this engine (a broker answers 404)."""


class BufferService:
    def __init__(self, store, clock, settings=None, *, writable: bool = True, boot: int | None = None, on_load=None):
        """settings(name, default) -> value: the engine's broker configuration.

        writable=False (a read-only engine): loading a buffer writes nothing.
        boot: the engine's broker-restart epoch; a buffer keeps the settings it was loaded with
        until the next restart (`engine reload`), as a broker reads them on topic load only.
        """
        self.writable = writable
        self.boot = boot
        self.on_load = on_load  # called with each buffer after its recovery (the engine's faults)
        self._unrecorded: dict[str, BufferConfig] = {}  # loaded before their ledger existed
        self.store = store
        self.clock = clock
        self.settings = settings or (lambda name, default: default)
        self.buffers: dict[str, TransactionBuffer] = {}
        self._logs: dict[str, ManagedLedgerLog] = {}

    @property
    def config(self) -> BufferConfig:
        return BufferConfig.from_settings(self.settings)

    def _ledger_settings(self) -> dict:
        return {key: int(self.settings(name, default)) for name, (key, default) in _LEDGER_SETTINGS.items()}

    def log(self, managed_ledger: str) -> ManagedLedgerLog:
        log = self._logs.get(managed_ledger)
        if log is None or not log.ml.exists:  # not yet created: another part of the engine may create it
            log = ManagedLedgerLog(ManagedLedger.get(self.store, self.clock, managed_ledger), self._ledger_settings())
            self._logs[managed_ledger] = log
        return log

    def snapshot_topics(self, namespace: str) -> SnapshotTopics:
        tenant, ns = namespace.split("/")
        name = f"{tenant}/{ns}/persistent/"
        return SnapshotTopics(
            self.log(name + SNAPSHOT_TOPIC), self.log(name + SEGMENTS_TOPIC), self.log(name + INDEXES_TOPIC)
        )

    def exists(self, topic: str) -> bool:
        return self.log(managed_ledger_name(topic)).ml.exists

    def buffer(self, topic: str, *, create: bool = False) -> TransactionBuffer:
        """The topic's buffer, recovered on first use; TopicNotFound unless it exists or create."""
        buffer = self.buffers.get(topic)  # keyed by full names: a full name needs no parsing
        if buffer is not None:
            return buffer
        topic = full_topic(topic)
        buffer = self.buffers.get(topic)
        if buffer is not None:
            return buffer
        log = self.log(managed_ledger_name(topic))
        if not log.ml.exists and not create:
            raise TopicNotFound(f"topic {topic} does not exist in the engine")
        buffer = TransactionBuffer(
            topic,
            log,
            self.snapshot_topics(namespace_of(topic)),
            self._config_for(log),
            lambda: self.clock.now_ms,
            writable=self.writable,
        )
        buffer.recover()
        if self.on_load is not None:
            self.on_load(buffer)
        self.buffers[topic] = buffer
        return buffer

    def _config_for(self, log: ManagedLedgerLog) -> BufferConfig:
        """The settings of the topic's last load in this boot, else the current ones (recorded)."""
        current = self.config
        if self.boot is None:
            return current
        owner = log.ml.owner or {}
        saved = owner.get("transactionBuffer")
        if saved and owner.get("transactionBufferBoot") == self.boot:
            return BufferConfig(**saved)
        self._remember(log, current)
        return current

    def _remember(self, log: ManagedLedgerLog, config: BufferConfig) -> None:
        """Record the settings on the topic's ledger (once it exists: the first write creates it)."""
        if self.boot is None or not self.writable:
            return
        if log.ml.exists:
            log.ml.set_owner_state(transactionBufferBoot=self.boot, transactionBuffer=asdict(config))
            self._unrecorded.pop(log.name, None)
        else:
            self._unrecorded[log.name] = config

    # -- what producers and the coordinator do ------------------------------------------------

    def publish(self, topic: str, payload: bytes = b"", txn=None) -> Position:
        """A producer's message, in a transaction (a TxnID, "(most,least)" or a pair) or not."""
        buffer = self.buffer(topic, create=True)
        return self._run(buffer, buffer.publish, payload, None if txn is None else TxnID.of(txn))

    def produce(self, topic: str, txn, count: int = 1, payload: bytes = b"simulated") -> list[str]:
        """`engine simulate`: the messages a transaction writes after registering the partition."""
        return [str(self.publish(topic, payload, txn)) for _ in range(count)]

    def end(self, topic: str, txn, committed: bool, low_water_mark: int | None = None) -> Position:
        """The coordinator's end-transaction command reaching one partition."""
        buffer = self.buffer(topic, create=True)
        return self._run(buffer, buffer.commit if committed else buffer.abort, TxnID.of(txn), low_water_mark)

    def end_transaction(self, txn, partitions, committed: bool, low_water_mark: int | None = None) -> dict:
        """The commit or abort marker on every produced partition; returns {topic: marker position}."""
        return {topic: str(self.end(topic, txn, committed, low_water_mark)) for topic in partitions}

    def in_buffer_stats(self, topic: str, txn) -> dict:
        """TransactionInBufferStats; a partition never written has no start position yet."""
        if not self.exists(topic):
            return {"aborted": False}
        return self.buffer(topic).in_buffer_stats(TxnID.of(txn))

    def trim(self, topic: str) -> int:
        """After the topic's ledgers were trimmed: prune aborted ids whose markers are gone."""
        buffer = self.buffer(topic)
        return self._run(buffer, buffer.trim_aborts)

    def _run(self, buffer: TransactionBuffer, operation, *args):
        try:
            result = operation(*args)
        except BaseException:
            # The in-memory state may be ahead of what was stored: reload on next use.
            self.buffers.pop(buffer.topic, None)
            raise
        if buffer.log.name in self._unrecorded:
            self._remember(buffer.log, self._unrecorded[buffer.log.name])
        return result

    # -- the snapshot timer -------------------------------------------------------------------

    def tick_all(self) -> int:
        """The broker's snapshot timer for every loaded buffer; call it after engine time moved.

        (Not a clock timer: those would make the engine's clock run ahead by themselves.)
        Every buffer operation also checks the timer, so this only matters for idle topics.
        """
        taken = 0
        for buffer in list(self.buffers.values()):
            if self.writable:
                taken += self._run(buffer, buffer.tick)
        return taken
