"""The calls the rest of the engine makes into the transaction buffer (one line each on their side).

- `service(engine)`: the engine's BufferService (created on first use, kept on the engine object).
- `publish(engine, topic, payload, txn=None)`: a producer's message, in a transaction or not.
- `on_transaction_end(engine, txn, partitions, committed, low_water_mark=None)`: the coordinator's
  end-transaction reaching the produced partitions (with its low-water mark, as Pulsar sends it).
- `produce(engine, topic, txn, count=1)`: simulate's transactional messages on a registered partition.
- `in_buffer_stats(engine, topic, txn)`: {aborted[, startPosition]} for TransactionMetadata.producedPartitions.
- `on_time_passed(engine)`: after the engine's clock moved, the snapshot timer of loaded buffers.
- `rest_handle(engine, method, path, query, body)`: the buffer's REST routes, or None.
- `config_keys()`: the four broker settings, as (name, type, default, dynamic, doc) for the engine's config table.
"""
from __future__ import annotations

from pulsar_txn_cli.engine.buffer.positions import Position, TxnID

_ATTRIBUTE = "_transaction_buffers"


def service(engine):
    found = getattr(engine, _ATTRIBUTE, None)
    if found is None:
        from pulsar_txn_cli.engine.buffer.service import BufferService

        found = BufferService(engine.store, engine.clock, _settings(getattr(engine, "config", None)),
                              writable=not getattr(engine, "readonly", False), boot=getattr(engine, "boot", None))
        setattr(engine, _ATTRIBUTE, found)
    return found


def _settings(config):
    """settings(name, default) over the engine's Config: typed values, else raw broker.conf text."""
    if config is None:
        return lambda name, default: default

    def lookup(name, default):
        values = config.values() if hasattr(config, "values") else {}
        if name in values:
            return values[name]
        for layer in ("overrides", "static"):
            raw = getattr(config, layer, lambda: {})()
            if name in raw:
                return raw[name]
        return default

    return lookup


def _txn(txn) -> TxnID:
    if isinstance(txn, TxnID):
        return txn
    if isinstance(txn, str):
        return TxnID.parse(txn)
    most, least = txn
    return TxnID(int(most), int(least))


def publish(engine, topic: str, payload: bytes = b"", txn=None) -> Position:
    return service(engine).publish(topic, payload, None if txn is None else _txn(txn))


def on_transaction_end(engine, txn, partitions, committed: bool, low_water_mark: int | None = None) -> dict:
    """Append the commit or abort marker on every produced partition; returns {topic: marker position}."""
    txn = _txn(txn)
    svc = service(engine)
    return {topic: str(svc.end(topic, txn, committed, low_water_mark)) for topic in partitions}


def in_buffer_stats(engine, topic: str, txn) -> dict:
    """TransactionInBufferStats; a partition never written has no start position yet."""
    svc = service(engine)
    if not svc.exists(topic):
        return {"aborted": False}
    return svc.buffer(topic).in_buffer_stats(_txn(txn))


def produce(engine, topic: str, txn, count: int = 1, payload: bytes = b"simulated") -> list[str]:
    """`engine simulate`: the messages a transaction writes after registering the partition."""
    return [str(publish(engine, topic, payload, txn)) for _ in range(count)]


def on_time_passed(engine) -> int:
    """After the engine's clock moved (simulate, timers): timed snapshots of idle buffers."""
    found = getattr(engine, _ATTRIBUTE, None)
    return found.tick_all() if found is not None else 0


def rest_handle(engine, method: str, path: str, query=None, body=None):
    from pulsar_txn_cli.engine.buffer.rest import handle

    return handle(engine, method, path, query, body)


def config_keys() -> list[tuple]:
    from pulsar_txn_cli.engine.buffer.config import DEFAULTS, DOCS

    return [(name, type(default), default, False, DOCS[name]) for name, default in DEFAULTS.items()]
