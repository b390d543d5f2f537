"""The engine: one broker's transaction logs on one engine directory.

A CLI invocation attaches to the running broker: coordinators and pending-ack stores are
loaded as they were left (same ledger, same batching mode, no recovery actions). A store is
reopened (new ledger, configuration read again, recovery) only by `engine reload`, the REST
unload, or after an unclean stop (a killed process is a crashed broker: the boot epoch moves
on and every store reopens when it is next loaded).
"""

from __future__ import annotations

import contextlib
from pathlib import Path

from pulsar_txn_cli.engine import faults
from pulsar_txn_cli.engine.buffer.service import BufferService
from pulsar_txn_cli.engine.clock import Clock
from pulsar_txn_cli.engine.broker_config import Config
from pulsar_txn_cli.engine.coordinator import (
    ABORTED,
    ABORTING,
    COMMITTED,
    COMMITTING,
    OPEN,
    Coordinator,
    CoordinatorNotFound,
    tc_log_name,
)
from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.engine.writer_stats import Metrics
from pulsar_txn_cli.engine.pending_ack import PendingAckStore
from pulsar_txn_cli.engine.store import DB_NAME, Store
from pulsar_txn_cli.errors import EngineError, UsageError
from pulsar_txn_cli.names import (
    expand_partitions,
    full_topic,
    managed_ledger_name,
    pending_ack_managed_ledger,
    topic_of_managed_ledger,
)
from pulsar_txn_cli.protocol import COORDINATOR_ENABLED_KEY, MAX_COORDINATORS, PENDING_ACK_SUFFIX, TC_ASSIGN

DEFAULT_COORDINATORS = 4
DEFAULT_CLUSTER = "standalone"


def new_engine_id() -> str:
    """Who this engine is for what pulsar-txn remembers about it (admin/identity.py): new at every init."""
    import uuid

    return str(uuid.uuid4())


def copied_from(store: Store) -> str | None:
    """The directory this engine was copied from (`cp -a`), when it was: the home it recorded is another
    directory that still holds an engine of the same id, or one that cannot be read (in doubt, a copy: a new
    identity only forgets records, which delays a SAFE and never hastens it). A moved engine keeps its id."""
    import os
    import sqlite3

    home, here = store.meta("home"), str(store.directory.resolve())
    if not home or home == here:
        return None
    original = Path(home) / DB_NAME
    if not original.exists() or os.path.samefile(home, here):
        return None
    try:
        with contextlib.closing(sqlite3.connect(f"{original.as_uri()}?mode=ro", uri=True, timeout=1)) as db:
            row = db.execute("SELECT value FROM meta WHERE key='engineId'").fetchone()
    except sqlite3.Error:
        return home
    return home if row is None or row[0] == store.meta("engineId") else None


def exists(directory: Path) -> bool:
    return (Path(directory) / DB_NAME).exists()


class Engine:
    def __init__(self, store: Store, *, readonly: bool = False):
        self.store = store
        self.directory = store.directory
        self.readonly = readonly
        self.coordinator_count = int(store.meta("coordinators") or 0)
        if self.coordinator_count <= 0:
            raise EngineError(f"the engine in {self.directory} was never initialized; run `pulsar-txn engine init`")
        self.clock = Clock(store)
        self.config = Config(store)
        cfg = self.config.values()
        self.cluster = cfg["clusterName"]
        self.broker = cfg["advertisedAddress"]
        self.web_service = f"{self.broker}:{cfg['webServicePort']}"
        self.metrics = Metrics(store, self.cluster, self.broker)
        if not self.metrics.created_ms:
            self.metrics.created_ms = self.clock.now_ms
            store.dirty(self.metrics)
        self.boot = int(store.meta("boot") or 1)
        self.on_timeout = None  # told (tc_id, least) of each transaction the timeout tracker aborts
        self.unclean = store.meta("running") == "1"
        self.engine_id = store.meta("engineId")
        if not readonly:
            with store.tx():
                origin = copied_from(store)
                if not self.engine_id or origin:  # made before engine ids, or a copy: an identity of its own
                    self.engine_id = new_engine_id()
                    store.set_meta("engineId", self.engine_id)
                if origin:
                    store.set_meta("copiedFrom", origin)
                if store.meta("home") != (home := str(store.directory.resolve())):
                    store.set_meta("home", home)
                if self.unclean:
                    self.boot += 1  # the previous process died: this is a broker restart
                    store.set_meta("boot", str(self.boot))
                    self.metrics.restart(self.clock.now_ms)
                store.set_meta("running", "1")
        self.coordinators: dict[int, Coordinator] = {}
        self.pending_acks: dict[tuple[str, str], PendingAckStore] = {}
        self._buffers: BufferService | None = None

    # ---------------------------------------------------------------- lifecycle

    @classmethod
    def open(cls, directory, *, readonly: bool = False, auto_init: bool = True, wait: float | None = None) -> "Engine":
        directory = Path(directory)
        if not exists(directory):
            if not auto_init:
                raise EngineError(f"no engine in {directory}; run `pulsar-txn engine init` first")
            return cls.init(directory)
        return cls(Store(directory, create=False, wait=wait), readonly=readonly)

    @classmethod
    def init(cls, directory, *, coordinators: int = DEFAULT_COORDINATORS, cluster: str = DEFAULT_CLUSTER) -> "Engine":
        """Create an engine: broker.conf with transactions on, N coordinators loaded."""
        if coordinators < 1:
            raise UsageError(f"--coordinators must be at least 1, not {coordinators}")
        if coordinators > MAX_COORDINATORS:
            raise UsageError(
                f"--coordinators {coordinators} is more than {MAX_COORDINATORS}, pulsar-txn's bound: each coordinator "
                "is a partition with its own transaction log that every listing and check reads"
            )
        if not cluster or "/" in cluster:
            raise UsageError(f"--cluster must be a plain name, not {cluster!r}")
        store = Store(Path(directory), create=True)
        try:
            if store.meta("coordinators"):
                raise EngineError(f"an engine already exists in {directory}; `engine reset` deletes it")
            with store.tx():
                store.set_meta("schema", "1")
                store.set_meta("coordinators", str(coordinators))
                store.set_meta("boot", "1")
                store.set_meta("engineId", new_engine_id())
                for key, value in ((COORDINATOR_ENABLED_KEY, "true"), ("clusterName", cluster)):
                    store.db.execute("INSERT OR REPLACE INTO config(key, value) VALUES(?, ?)", (key, value))
                store.db.execute(
                    "INSERT OR REPLACE INTO topics(name, partitions) VALUES(?, ?)",
                    (TC_ASSIGN, coordinators),
                )
        except BaseException:
            store.close()
            raise
        engine = cls(store)
        for tc_id in range(coordinators):
            engine.tc(tc_id)
        engine.checkpoint()
        return engine

    def checkpoint(self) -> None:
        """Run pending timers (flushes) and commit everything changed."""
        self.clock.run_until_idle()
        if self._buffers is not None:
            self._buffers.tick_all()  # timed snapshots of idle transaction buffers
        self.store.save_all()

    def close(self) -> None:
        if self.store.db is None:
            return
        try:
            if not self.readonly:
                self.checkpoint()
                with self.store.tx():
                    self.store.set_meta("running", "0")
        finally:
            self.store.close()

    def __enter__(self):
        return self

    def __exit__(self, exc_type, exc, tb):
        if exc_type is not None and not issubclass(exc_type, Exception):
            # Ctrl-C (or a kill) in the middle of a command: stop now, as a crashed broker would;
            # nothing unacknowledged is kept and the next command reopens what it loads.
            self.store.close()
            return
        self.close()

    # ---------------------------------------------------------------- stores

    @property
    def buffers(self) -> BufferService:
        """Every topic's transaction buffer; made on first use, with the boot epoch of that moment."""
        if self._buffers is None:
            self._buffers = BufferService(
                self.store,
                self.clock,
                self.config.setting,
                writable=not self.readonly,
                boot=self.boot,
                on_load=lambda buffer: faults.apply_to_buffer(self.store, buffer),
            )
        return self._buffers

    @property
    def enabled(self) -> bool:
        return bool(self.config.values()["transactionCoordinatorEnabled"])

    def ledger_settings(self, cfg: dict) -> dict:
        return {
            "maxEntries": cfg["managedLedgerMaxEntriesPerLedger"],
            "maxSizeMb": cfg["managedLedgerMaxSizePerLedgerMbytes"],
            "minRolloverMinutes": cfg["managedLedgerMinLedgerRolloverTimeMinutes"],
            "maxRolloverMinutes": cfg["managedLedgerMaxLedgerRolloverTimeMinutes"],
        }

    def _needs_reopen(self, ml: ManagedLedger) -> bool:
        return not ml.exists or not ml.owner or ml.owner.get("boot") != self.boot

    def tc(self, tc_id: int) -> Coordinator:
        """The coordinator, loaded (attached, or reopened after a restart) on first use."""
        if not isinstance(tc_id, int) or not 0 <= tc_id < self.coordinator_count:
            raise CoordinatorNotFound(
                f"transaction coordinator {tc_id} does not exist; this engine has {self.coordinator_count} (0..{self.coordinator_count - 1})",
                tc_id,
            )
        tc = self.coordinators.get(tc_id)
        if tc is None:
            tc = Coordinator(self, tc_id)
            self._open(tc, self._needs_reopen(tc.ml))
            _stuck(tc, faults.coordinator_fault(self.store, tc_id))
            self.coordinators[tc_id] = tc
        return tc

    def _open(self, store, reopen: bool) -> None:
        if self.readonly and reopen:
            raise EngineError(f"{store.name} needs a reopen, which a read-only engine cannot do")
        store.open(reopen)
        if reopen:
            store.ml.set_owner_state(boot=self.boot)
            if isinstance(store, Coordinator):
                self._recover(store)

    def scale_coordinators(self, replicas: int) -> None:
        """More coordinators (never fewer, as a broker): each new one loads on first use."""
        with self.store.tx():
            self.store.set_meta("coordinators", str(replicas))
            self.store.db.execute(
                "UPDATE topics SET partitions=? WHERE name=?",
                (replicas, TC_ASSIGN),
            )
        self.coordinator_count = replicas

    def all_tcs(self) -> list[Coordinator]:
        return [self.tc(i) for i in range(self.coordinator_count)]

    def pending_ack(self, topic: str, sub: str, *, create: bool = True) -> PendingAckStore | None:
        topic = full_topic(topic)
        key = (topic, sub)
        store = self.pending_acks.get(key)
        if store is None:
            store = PendingAckStore(self, topic, sub)
            if not store.ml.exists and not create:
                return None
            self._open(store, self._needs_reopen(store.ml))
            _stuck(store, faults.pending_ack_fault(self.store, topic, sub))
            self.pending_acks[key] = store
        return store

    def pending_ack_if_exists(self, topic: str, sub: str) -> PendingAckStore | None:
        return self.pending_ack(topic, sub, create=False)

    def pending_ack_names(self) -> list[str]:
        return [
            r[0]
            for r in self.store.db.execute(
                "SELECT name FROM managed_ledgers WHERE name LIKE ? ORDER BY name", (f"%{PENDING_ACK_SUFFIX}",)
            )
        ]

    def subscriptions(self, topic: str | None = None) -> list[tuple[str, str]]:
        if topic is None:
            return [
                tuple(r) for r in self.store.db.execute("SELECT topic, name FROM subscriptions ORDER BY topic, name")
            ]
        return [
            tuple(r)
            for r in self.store.db.execute(
                "SELECT topic, name FROM subscriptions WHERE topic=? ORDER BY name", (full_topic(topic),)
            )
        ]

    def topic_ledger(self, topic: str) -> int:
        """The ledger that holds a topic partition's messages (created with the topic)."""
        ml = ManagedLedger.get(self.store, self.clock, managed_ledger_name(topic))
        if not ml.exists:
            with self.store.tx():
                ml.open_new_ledger(self.ledger_settings(self.config.values()))
        return ml.current

    def partition_count(self, topic: str) -> int:
        """How many partitions a topic was registered with; 0 for a non-partitioned or unknown one."""
        row = self.store.db.execute("SELECT partitions FROM topics WHERE name=?", (full_topic(topic),)).fetchone()
        return int(row[0]) if row else 0

    def topic_and_partitions(self, topic: str) -> list[str]:
        """The topic and, when it is partitioned, each of its partitions (what an unload reaches)."""
        topic = full_topic(topic)
        count = self.partition_count(topic)
        return [topic] + expand_partitions(topic, count) if count else [topic]

    def topics(self) -> list[str]:
        """Every topic partition the engine knows: with a managed ledger, or registered."""
        names = {t for t in map(topic_of_managed_ledger, self.managed_ledger_names()) if t}
        for topic, count in self.store.db.execute("SELECT name, partitions FROM topics"):
            names.update(expand_partitions(topic, count))
        return sorted(names)

    def register_topic(self, topic: str, partitions: int) -> None:
        with self.store.tx():
            self.store.db.execute(
                "INSERT OR REPLACE INTO topics(name, partitions) VALUES(?, ?)", (full_topic(topic), partitions)
            )

    # ---------------------------------------------------------------- transactions

    def end_transaction(self, tc_id: int, least: int, commit: bool, callback, failed=None) -> None:
        """Commit or abort: UPDATE to COMMITTING/ABORTING, end marks in the pending-ack stores,
        UPDATE to COMMITTED/ABORTED (which deletes the transaction's records)."""
        tc = self.tc(tc_id)
        mid = COMMITTING if commit else ABORTING
        tc.update_status(least, mid, OPEN, lambda pos: self._complete(tc, least, commit, callback, failed), failed)

    def _complete(self, tc: Coordinator, least: int, commit: bool, callback, failed) -> None:
        meta = tc.txns.get(least)
        if meta is None:
            return
        subs = list(meta.subscriptions)
        if meta.partitions:
            low_water_mark = tc.low_water_mark()
            for topic in meta.partitions:  # end_transaction() without the text of each marker's position
                self.buffers.end(topic, (meta.most, least), commit, low_water_mark)
        remaining = [len(subs)]

        def finish():
            tc.update_status(
                least, COMMITTED if commit else ABORTED, COMMITTING if commit else ABORTING, callback, failed
            )

        def one(_=None):
            remaining[0] -= 1
            if remaining[0] == 0:
                finish()

        if not subs:
            finish()
            return
        for topic, sub in subs:
            self.pending_ack(topic, sub).end(meta.most, least, commit, one, one)

    def _recover(self, tc: Coordinator) -> None:
        """After a TC load, as the broker: finish what was committing or aborting, then start the timeout
        tracker, which at once aborts every open transaction whose timeout passed before the load (a replay
        can bring back as OPEN a transaction that ended long ago: docs/real-broker-findings.md). Brokers
        before 2.11.1 never did (apache/pulsar#19200); the engine models the fixed ones."""
        for least, meta in list(tc.txns.items()):
            if meta.status in (COMMITTING, ABORTING):
                self._complete(tc, least, meta.status == COMMITTING, lambda pos: None, None)
        for least in tc.due_timeouts(self.clock.now_ms):
            self._time_out(tc, least)

    def expire_transactions(self) -> int:
        """The timeout tracker: abort every open transaction whose timeout passed."""
        count = 0
        now = self.clock.now_ms
        for tc in list(self.coordinators.values()):
            for least in tc.due_timeouts(now):
                self._time_out(tc, least)
                count += 1
        return count

    def _time_out(self, tc: Coordinator, least: int) -> None:
        """The timeout tracker's abort of one transaction (end_transaction's, on a coordinator still loading)."""
        if self.on_timeout is not None:
            self.on_timeout(tc.tc_id, least)
        tc.update_status(least, ABORTING, OPEN, lambda pos: self._complete(tc, least, False, _ignored, None), None)

    def abort_transaction(self, most: int, least: int) -> None:
        """POST /abortTransaction: abort now and wait until it is done."""
        tc = self.tc(most)
        if least not in tc.txns:
            from pulsar_txn_cli.engine.coordinator import TransactionNotFound

            raise TransactionNotFound(f"transaction ({most},{least}) not found")
        errors = []
        self.end_transaction(most, least, False, lambda pos: None, errors.append)
        self.checkpoint()
        if errors:
            raise errors[0]

    # ---------------------------------------------------------------- reload

    def reload(self, coordinator: int | None = None, topic: str | None = None) -> list[str]:
        """Reopen stores as a broker restart or unload would: new ledger, config read again.

        No option: everything (a broker restart). --coordinator: that TC. --topic: the
        pending-ack stores of that topic's subscriptions."""
        self.checkpoint()
        # A reopen takes time on a broker; a new recoverStartTime is how the admin layer tells a
        # reopened store from one that kept running, even when the clock has not moved since.
        self.clock.advance_ms(1)
        targets = []
        self._clear_faults(coordinator, topic)
        if coordinator is None and topic is None:
            self.boot += 1
            with self.store.tx():
                self.store.set_meta("boot", str(self.boot))
            self.metrics.restart(self.clock.now_ms)
            targets = [("tc", i) for i in range(self.coordinator_count)]
            targets += [("pa", t, s) for t, s in self.subscriptions() if self._pa_exists(t, s)]
        if coordinator is not None:
            self.tc(coordinator)  # validates the id
            targets.append(("tc", coordinator))
        if topic is not None:
            for name in self.topic_and_partitions(topic):  # a partitioned topic: every partition, as an unload does
                targets += [("pa", t, s) for t, s in self.subscriptions(name) if self._pa_exists(t, s)]
        reopened = []
        for target in targets:
            if target[0] == "tc":
                tc = self.coordinators.pop(target[1], None) or Coordinator(self, target[1])
                tc.close()
                tc = Coordinator(self, target[1])
                self._open(tc, True)
                self.coordinators[target[1]] = tc
                reopened.append(tc.name)
            else:
                _, t, s = target
                old = self.pending_acks.pop((t, s), None)
                if old is not None:
                    old.close()
                store = PendingAckStore(self, t, s)
                self._open(store, True)
                self.pending_acks[(t, s)] = store
                reopened.append(store.name)
        self.checkpoint()
        return reopened

    def _clear_faults(self, coordinator: int | None, topic: str | None) -> None:
        """A reload loads afresh what it reaches: the faults kept in memory go (engine/faults.py)."""
        if coordinator is None and topic is None:
            if faults.load(self.store):
                with self.store.tx():
                    self.store.set_meta(faults.META_KEY, "{}")
                self._buffers = None  # a restart loads every buffer afresh
            return
        if coordinator is not None:
            faults.clear_coordinator(self.store, coordinator)
        if topic is not None:
            names = self.topic_and_partitions(topic)
            faults.clear_topic(self.store, names)
            for name in names:
                if self._buffers is not None:
                    self._buffers.buffers.pop(name, None)

    def _pa_exists(self, topic: str, sub: str) -> bool:
        return (
            self.store.db.execute(
                "SELECT 1 FROM managed_ledgers WHERE name=?", (pending_ack_managed_ledger(topic, sub),)
            ).fetchone()
            is not None
        )

    # ---------------------------------------------------------------- listing

    def managed_ledger_names(self) -> list[str]:
        return [r[0] for r in self.store.db.execute("SELECT name FROM managed_ledgers ORDER BY name")]

    def managed_ledger(self, name: str) -> ManagedLedger:
        ml = ManagedLedger.get(self.store, self.clock, name)
        if not ml.exists:
            raise unknown_managed_ledger(name)
        return ml

    def tc_log_names(self) -> list[str]:
        return [tc_log_name(i) for i in range(self.coordinator_count)]


def unknown_managed_ledger(name: str) -> UsageError:
    return UsageError(f"no managed ledger named {name!r} in the engine; `pulsar-txn engine dump --list` shows them")


def _stuck(store, fault: dict | None) -> None:
    """A store whose recovery does not finish (engine/faults.py): Initializing since the fault began."""
    if fault:
        store.state = "Initializing"
        store.recovering_since = fault["since"]


def _ignored(_position) -> None:
    """A callback for what nobody waits on."""
