"""TxnLogBufferedWriter, as Pulsar implements it (pulsar-transaction/coordinator,
org.apache.pulsar.transaction.coordinator.impl), on the engine's store and clock.

- Batching is effective only when enabled and maxRecords > 1.
- A record of at least maxSize bytes flushes the buffer (trigger "large data", only when the
  buffer is non-empty) and is then written alone, unbatched, with a plain position.
- Otherwise it is buffered; the buffer flushes at maxRecords records, else at maxSize bytes,
  else when the timer ticks (every maxDelay ms of engine time, on a grid shared by all writers).
- A flush writes one entry (0x0E01 prefix + the batched container) in one database commit;
  the callbacks then run in write order with (ledgerId, entryId, batchSize, batchIndex).
- close() fails what is buffered.
"""

from __future__ import annotations

from collections.abc import Callable

from pulsar_txn_cli.codec import encode_batch_serialized
from pulsar_txn_cli.engine.ledger import AddFailed, BatchedPosition
from pulsar_txn_cli.errors import EngineError


class WriterClosed(EngineError):
    """ManagedLedgerFencedException("Transaction log buffered write has closed")."""


class SerializeFailed(EngineError):
    """ManagedLedgerInterceptException: the record could not be serialized."""


def _identity(data):
    return data


class BufferedWriter:
    def __init__(
        self,
        ml,
        clock,
        metrics,
        *,
        max_records: int = 512,
        max_size: int = 4194304,
        max_delay_ms: int = 1,
        batch_enabled: bool = False,
        timer_origin_us: int | None = None,
        serialize=_identity,
    ):
        self.ml = ml
        self.store = ml.store
        self.clock = clock
        self.metrics = metrics
        self.max_records = max_records
        self.max_size = max_size
        self.delay_us = max(int(max_delay_ms), 1) * 1000
        self.batch_enabled = bool(batch_enabled) and max_records > 1
        # Pulsar's writers share the broker's HashedWheelTimer, whose ticks are global; so the
        # engine's timers tick on one grid (multiples of maxDelay on the engine clock), which also
        # lets every flush of one tick share a database commit.
        self.origin_us = 0 if timer_origin_us is None else timer_origin_us
        self.serialize = serialize
        self.state = "OPEN"
        self._datas: list[bytes] = []
        self._callbacks: list = []
        self._bytes = 0
        self._first_us = 0
        self._armed = False
        self.entries_written = 0
        self.records_written = 0

    # ---------------------------------------------------------------- writing

    def add(self, record, callback, failed=None) -> None:
        """asyncAddData: callback(BatchedPosition) after the commit, or failed(exception)."""
        if self.state != "OPEN":
            _fail(failed, WriterClosed("Transaction log buffered write has closed"))
            return
        if self.serialize is _identity:  # the engine's logs hand over serialized records
            data = record
        else:
            try:
                data = self.serialize(record)
            except Exception as exc:  # noqa: BLE001 - any serializer error fails this add only
                _fail(failed, SerializeFailed(f"the record could not be serialized: {exc}"))
                return
        if not self.batch_enabled:
            self._write_single(data, callback, failed)
            return
        size = len(data)
        if size >= self.max_size:
            if self._datas:
                self._flush("large_data")
            self._write_single(data, callback, failed)
            return
        datas = self._datas
        if not datas:
            self._first_us = self.clock.now_us
            if not self._armed:
                self._arm()
        datas.append(data)
        self._callbacks.append((callback, failed))
        self._bytes += size
        if len(datas) >= self.max_records:
            self._flush("max_records")
        elif self._bytes >= self.max_size:
            self._flush("max_size")

    def _arm(self) -> None:
        """The timer ticks at origin + k * maxDelay; arm the next tick after now."""
        now = self.clock.now_us
        ticks = (now - self.origin_us) // self.delay_us + 1
        self._armed = True
        self.clock.call_at(self.origin_us + ticks * self.delay_us, self._on_timer)

    def _on_timer(self) -> None:
        self._armed = False
        if self._datas and self.state == "OPEN":
            self._flush("max_delay")

    @property
    def buffered(self) -> int:
        return len(self._datas)

    def _write_single(self, data: bytes, callback, failed) -> None:
        try:
            with self.store.tx():
                ((lid, eid),) = self.ml.add_entries([data])
                self.store.after_commit(
                    lambda: callback(BatchedPosition(lid, eid)), lambda: _fail(failed, _rolled_back())
                )
        except AddFailed as exc:
            _fail(failed, exc)
            return
        except EngineError:
            return  # the commit was refused: the rollback hook has failed this add
        self.entries_written += 1
        self.records_written += 1

    def _flush(self, trigger: str) -> None:
        datas, callbacks = self._datas, self._callbacks
        count, size = len(datas), self._bytes
        self._datas, self._callbacks, self._bytes = [], [], 0
        if self.metrics is not None:
            self.metrics.trigger(trigger, count, size, (self.clock.now_us - self._first_us) / 1000.0)
        entry = encode_batch_serialized(datas)

        def done(lid, eid):
            position = BatchedPosition
            for i, (cb, _) in enumerate(callbacks):
                cb(position(lid, eid, count, i))

        def fail_all(exc):
            for _, failed in callbacks:
                _fail(failed, exc)

        try:
            with self.store.tx():
                ((lid, eid),) = self.ml.add_entries([entry])
                self.store.after_commit(lambda: done(lid, eid), lambda: fail_all(_rolled_back()))
        except AddFailed as exc:
            fail_all(exc)
            return
        except EngineError:
            return  # the commit was refused: the rollback hook has failed these adds
        self.entries_written += 1
        self.records_written += count

    def flush(self) -> None:
        """Flush what is buffered now (used when the engine shuts a store down cleanly)."""
        if self._datas:
            self._flush("max_delay")

    # ---------------------------------------------------------------- closing

    def close(self) -> None:
        if not self.batch_enabled:
            self.state = "CLOSED"
            return
        self.state = "CLOSING"
        callbacks, self._datas, self._callbacks, self._bytes = self._callbacks, [], [], 0
        for _, failed in callbacks:
            _fail(failed, WriterClosed("Transaction log buffered write has closed"))
        self.state = "CLOSED"


def _rolled_back() -> EngineError:
    return EngineError("the engine database refused the commit; the add was rolled back")


def _fail(failed, exc) -> None:
    if failed is not None:
        failed(exc)


def open_log(store, reopen: bool, recorded: Callable[[dict], dict], metrics) -> BufferedWriter:
    """Open the transaction log of a store (a coordinator or a pending-ack store) and its writer.

    A load on a broker (reopen, or a log never opened) starts a new ledger, records the settings it
    opens with (recorded(config): batching, the writer's bounds, ...) so that later invocations of the
    same running broker keep them, then replays, timing the recovery; attaching to an open store only
    replays into memory. The writer is built from the recorded settings, not today's configuration.
    """
    engine, ml = store.engine, store.ml
    if reopen or not ml.exists or not ml.owner:
        cfg = engine.config.values()
        with engine.store.tx():
            ml.open_new_ledger(engine.ledger_settings(cfg))
            ml.set_owner_state(**recorded(cfg), recoverStartTime=engine.clock.now_ms)
            store._open_cursor()
            store._replay()
            ml.set_owner_state(recoverEndTime=engine.clock.now_ms)
    else:
        store._open_cursor()
        store._replay()
    o = ml.owner
    return BufferedWriter(
        ml,
        engine.clock,
        metrics,
        max_records=o["maxRecords"],
        max_size=o["maxSize"],
        max_delay_ms=o["maxDelayMs"],
        batch_enabled=o["batchEnabled"],
    )
