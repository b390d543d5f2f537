"""The transaction buffer of one topic partition (Pulsar's TopicTransactionBuffer).

Messages of open transactions are appended to the topic at once but stay invisible: readers
may only go up to `maxReadPosition`, the position just before the first message of the oldest
ongoing transaction (or the last written position when none is ongoing). Commit and abort
append a marker; aborted ids are kept (in marker order) so dispatch can skip their messages,
until the ledger holding the abort marker is trimmed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Callable, Iterator

from pulsar_txn_cli.engine.buffer import messages
from pulsar_txn_cli.engine.buffer.aborts import Recovered, SegmentedAbortedTxns, SingleAbortedTxns
from pulsar_txn_cli.engine.buffer.settings import BufferConfig
from pulsar_txn_cli.names import EARLIEST, Position, TxnID
from pulsar_txn_cli.engine.buffer.snapshots import SystemTopicStore
from pulsar_txn_cli.errors import EngineError
from pulsar_txn_cli.protocol import DEFAULT_REPLICATOR_PREFIX

# TopicTransactionBufferState.State values the engine goes through
INITIALIZING, READY, NO_SNAPSHOT = "Initializing", "Ready", "NoSnapshot"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class Ongoing:
    first_position: Position
    first_publish_time: int  # engine clock, ms: when the transaction first wrote to this partition


@dataclass
class SnapshotTopics:
    """The namespace's three snapshot system topics (logs with append/read/read_after)."""

    single: object
    segments: object
    indexes: object


class TransactionBuffer:
    def __init__(
        self,
        topic: str,
        log,
        snapshot_topics: SnapshotTopics,
        config: BufferConfig | None = None,
        clock: Callable[[], int] = now_ms,
        writable: bool = True,
    ):
        """writable=False: a read-only view (a read-only engine); loading it writes nothing."""
        self.topic = topic
        self.writable = writable
        self.log = log
        self.config = config or BufferConfig()
        self.clock = clock
        self.snapshot_topics = snapshot_topics
        if self.config.segmented:
            self.aborts = SegmentedAbortedTxns(
                topic,
                SystemTopicStore(snapshot_topics.segments, clock),
                SystemTopicStore(snapshot_topics.indexes, clock),
                self.config.segment_size,
                SystemTopicStore(snapshot_topics.single, clock),
            )
        else:
            self.aborts = SingleAbortedTxns(topic, SystemTopicStore(snapshot_topics.single, clock))
        self.state = INITIALIZING
        self.ongoing: dict[TxnID, Ongoing] = {}  # oldest first
        self.max_read_position = log.last_confirmed()
        self.low_water_marks: dict[int, int] = {}
        # coordinator -> the mark its ongoing transactions were last checked against: after a check,
        # none at or below it is ongoing, and publish refuses such a transaction, so the same mark
        # needs no second look.
        self._checked_marks: dict[int, int] = {}
        self.changes = 0  # maxReadPosition moves and aborts since the last snapshot
        self.last_snapshot_timestamp = 0  # taken by this load; 0 until then, as on a broker
        self.timer_origin = 0  # the snapshot timer runs every min_time_ms from here
        self.recover_start_time = 0
        self.recover_end_time = 0
        self.recovery_note: str | None = None
        self.first_snapshot_fails = False  # engine/faults.py's buffer-no-snapshot (Pulsar 4.0.7's race)

    # -- recovery -----------------------------------------------------------------------------

    def recover(self) -> "TransactionBuffer":
        """Load the last snapshot, then replay the topic after its maxReadPosition.

        No snapshot at all means transactions never wrote here: the buffer is NoSnapshot and takes
        its first snapshot before the first transactional write, as a broker does. (The engine
        still replays the topic then, which finds nothing unless a snapshot topic was lost.)
        """
        self.recover_start_time = self.clock()
        recovered: Recovered = self.aborts.recover(self.log.ledger_exists)
        self.recovery_note = recovered.note
        start = (
            EARLIEST if recovered.full_replay or recovered.max_read_position is None else recovered.max_read_position
        )
        if recovered.max_read_position is not None and not recovered.full_replay:
            self.max_read_position = recovered.max_read_position
        for position, data in self.log.read_after(start):
            if data is not None:
                self._replay(position, messages.decode(data, f"{self.topic} {position}"))
        self._update_max_read_position()
        self.aborts.trim(self.log.ledger_exists)
        self.recover_end_time = self.timer_origin = self.clock()
        self.state = NO_SNAPSHOT if recovered.max_read_position is None and not recovered.full_replay else READY
        if recovered.full_replay and self.writable:
            self.take_snapshot()
        return self

    def _replay(self, position: Position, entry: messages.TopicEntry) -> None:
        if entry.txn is None:
            return
        if entry.marker is None:
            if entry.txn not in self.ongoing and not self.aborts.contains(entry.txn):
                self.ongoing[entry.txn] = Ongoing(position, entry.publish_time)
            return
        self.ongoing.pop(entry.txn, None)
        if entry.marker == messages.ABORT:
            self.aborts.put(entry.txn, position)

    # -- writes -------------------------------------------------------------------------------

    def publish(self, payload: bytes, txn: TxnID | None = None) -> Position:
        """Append one message; with a transaction it stays invisible until the transaction ends."""
        self._require_ready()
        if txn is not None:
            self._check_not_ended(txn)
            self._first_snapshot()
        now = self.clock()
        position = self.log.append(messages.encode_fields(txn, None, payload, now))
        if txn is None:
            if not self.ongoing:
                self._set_max_read(position)
        elif txn not in self.ongoing:
            self.ongoing[txn] = Ongoing(position, now)
            self._update_max_read_position()
        self._maybe_snapshot()
        return position

    def commit(self, txn: TxnID, low_water_mark: int | None = None) -> Position:
        return self._end(txn, messages.COMMIT, low_water_mark)

    def abort(self, txn: TxnID, low_water_mark: int | None = None) -> Position:
        return self._end(txn, messages.ABORT, low_water_mark)

    def _end(self, txn: TxnID, marker: str, low_water_mark: int | None) -> Position:
        self._require_ready()
        self._first_snapshot()
        position = self.log.append(messages.encode_fields(txn, marker, b"", self.clock()))
        if marker == messages.ABORT:
            self.aborts.trim(self.log.ledger_exists)  # cheap: stops at the first id still readable
            self.aborts.put(txn, position)
            self.changes += 1
        self.ongoing.pop(txn, None)
        self._update_max_read_position()
        if low_water_mark is not None:
            self.apply_low_water_mark(txn.most, low_water_mark)
        self._maybe_snapshot()
        return position

    def apply_low_water_mark(self, coordinator: int, low_water_mark: int) -> list[TxnID]:
        """Abort what the buffer still believes open though its coordinator has ended it.

        Every transaction of that coordinator up to the low-water mark has ended; a buffer that
        missed the end (a lost notification) would otherwise hold readers back forever.
        """
        if low_water_mark > self.low_water_marks.get(coordinator, -1):
            self.low_water_marks[coordinator] = low_water_mark
        mark = self.low_water_marks.get(coordinator, -1)  # -1: the coordinator's first txn is still open
        if self._checked_marks.get(coordinator) == mark:
            return []
        stale = [t for t in self.ongoing if t.most == coordinator and t.least <= mark]
        self._checked_marks[coordinator] = mark
        for txn in stale:
            self._end(txn, messages.ABORT, None)
        return stale

    def _check_not_ended(self, txn: TxnID) -> None:
        if txn in self.ongoing:
            return
        mark = self.low_water_marks.get(txn.most)
        if self.aborts.contains(txn) or (mark is not None and txn.least <= mark):
            raise EngineError(f"transaction {txn} has already ended; topic {self.topic} refuses its message")

    # -- maxReadPosition ----------------------------------------------------------------------

    def _update_max_read_position(self) -> None:
        if self.ongoing:
            first = next(iter(self.ongoing.values())).first_position
            self._set_max_read(self.log.previous_position(first))
        else:
            self._set_max_read(self.log.last_confirmed())

    def _set_max_read(self, position: Position) -> None:
        if position != self.max_read_position:
            forward = position > self.max_read_position
            self.max_read_position = position
            if forward and self.state == READY:  # updateMaxReadPosition counts forward moves only
                self.changes += 1
            if forward:
                self._replicate(position)

    def _replicate(self, position: Position) -> None:
        """The engine's geo-replicators (engine/faults.py's replication-held): a replicator reads only up to
        maxReadPosition, and the engine's sends at once what it may read and its remote cluster acknowledges
        it, so each `<prefix>.<cluster>` cursor of the topic follows maxReadPosition forward."""
        ml = getattr(self.log, "ml", None)
        if ml is None or not self.writable:
            return
        for name, cursor in list(ml.cursors.items()):
            if name.startswith(DEFAULT_REPLICATOR_PREFIX + "."):
                cursor.mark_delete_to(position)

    # -- reads --------------------------------------------------------------------------------

    def is_aborted(self, txn: TxnID) -> bool:
        return self.aborts.contains(txn)

    def dispatch(self, after: Position = EARLIEST) -> Iterator[tuple[Position, messages.TopicEntry]]:
        """What a consumer may receive after `after`: up to maxReadPosition, no markers, nothing aborted."""
        limit = self.max_read_position
        for position, data in self.log.read_after(after):
            if position > limit:
                return
            if data is None:
                continue
            entry = messages.decode(data, f"{self.topic} {position}")
            if entry.is_marker or (entry.txn is not None and self.aborts.contains(entry.txn)):
                continue
            yield position, entry

    def trim_aborts(self) -> int:
        """After the topic's ledgers were trimmed: forget aborted ids whose marker's ledger is gone."""
        return self.aborts.trim(self.log.ledger_exists)

    # -- snapshots ----------------------------------------------------------------------------

    def _maybe_snapshot(self) -> None:
        if self.changes >= self.config.max_transaction_count:
            self.take_snapshot()
        else:
            self.tick()

    def tick(self) -> bool:
        """The broker's snapshot timer (every min_time_ms after recovery): snapshot if anything changed."""
        now = self.clock()
        if self.state != READY or now - self.timer_origin < self.config.min_time_ms:
            return False
        periods = (now - self.timer_origin) // self.config.min_time_ms
        self.timer_origin += periods * self.config.min_time_ms
        if self.changes:
            self.take_snapshot()
            return True
        return False

    def take_snapshot(self) -> None:
        self.aborts.trim(self.log.ledger_exists)  # never persist ids whose messages are gone
        self.changes = 0
        self.aborts.take_snapshot(self.max_read_position)
        self.last_snapshot_timestamp = self.clock()

    def _first_snapshot(self) -> None:
        """NoSnapshot -> Ready: the first transactional write waits for a first snapshot."""
        if self.state == NO_SNAPSHOT:
            if self.first_snapshot_fails:
                raise EngineError(
                    f"the transaction buffer of {self.topic} could not take its first snapshot; "
                    "it refuses transactional messages"
                )
            if self.writable:
                self.take_snapshot()
            self.state = READY

    def _require_ready(self) -> None:
        if self.state not in (READY, NO_SNAPSHOT):
            raise EngineError(f"the transaction buffer of {self.topic} is still {self.state}")

    # -- views --------------------------------------------------------------------------------

    def in_buffer_stats(self, txn: TxnID) -> dict:
        """TransactionInBufferStats: whether it aborted, and its start here while it is ongoing.

        (A broker leaves a null startPosition out of the JSON.)
        """
        stats = {"aborted": self.aborts.contains(txn)}
        ongoing = self.ongoing.get(txn)
        if ongoing is not None:
            stats["startPosition"] = str(ongoing.first_position)
        return stats
