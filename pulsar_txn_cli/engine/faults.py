"""Faults the engine can be made to have (`engine simulate --fault NAME`), so every doctor check can be
rehearsed without a cluster. Each one is a state a broker really gets into, made the way the engine
can honestly make it; docs/doctor.md says which is modelled how.

A fault that lives in a broker's memory (a store stuck recovering, a buffer that never took its first
snapshot, a stale maxReadPosition) is kept in the engine's metadata and applied every time the store
loads, until an unload of its topic (or of the coordinator's assign partition) clears it, as a fresh
load does on a broker. The others are plain data: an open transaction whose client is gone, a
pending-ack log whose subscription was deleted.
"""

from __future__ import annotations

import orjson

from pulsar_txn_cli.errors import EngineError, UsageError

META_KEY = "faults"

from pulsar_txn_cli.fault_names import FAULTS  # noqa: E402  (the names --help lists)


def load(store) -> dict:
    raw = store.meta(META_KEY)
    return orjson.loads(raw) if raw else {}


def _save(store, doc: dict) -> None:
    with store.tx():
        store.set_meta(META_KEY, orjson.dumps(doc).decode())


def _set(store, kind: str, key: str, value) -> None:
    doc = load(store)
    doc.setdefault(kind, {})[key] = value
    _save(store, doc)


def clear_topic(store, topics: list[str]) -> None:
    """A topic's unload: its buffer and pending-ack stores load afresh."""
    doc = load(store)
    changed = False
    for kind in ("buffer", "pendingAck"):
        for key in list(doc.get(kind, {})):
            if key in topics or key.split(" ", 1)[0] in topics:
                del doc[kind][key]
                changed = True
    if changed:
        _save(store, doc)


def clear_coordinator(store, tc_id: int) -> None:
    doc = load(store)
    if str(tc_id) in doc.get("coordinator", {}):
        del doc["coordinator"][str(tc_id)]
        _save(store, doc)


def coordinator_fault(store, tc_id: int) -> dict | None:
    return load(store).get("coordinator", {}).get(str(tc_id))


def pending_ack_fault(store, topic: str, sub: str) -> dict | None:
    return load(store).get("pendingAck", {}).get(f"{topic} {sub}")


def apply_to_buffer(store, buffer) -> None:
    """After a buffer's recovery: what its fault leaves it in."""
    from pulsar_txn_cli.engine.buffer.buffer import INITIALIZING, NO_SNAPSHOT
    from pulsar_txn_cli.names import Position

    fault = load(store).get("buffer", {}).get(buffer.topic)
    if not fault:
        return
    if fault["kind"] == "recovering":
        buffer.state, buffer.recover_start_time, buffer.recover_end_time = INITIALIZING, fault["since"], 0
    elif fault["kind"] == "no-snapshot":
        buffer.state, buffer.last_snapshot_timestamp = NO_SNAPSHOT, 0
        buffer.first_snapshot_fails = True
    elif fault["kind"] == "phantom" and not buffer.ongoing:
        stale = Position.find(fault["maxReadPosition"])
        if stale is not None and stale < buffer.max_read_position:
            buffer.max_read_position = Position(*stale)


def inject(engine, name: str, topic: str, subscription: tuple[str, str], txn_timeout_ms: int) -> dict:
    """Make the fault on an engine that ran a workload; returns what was done, for the summary."""
    if name not in FAULTS:
        raise UsageError(f"--fault {name!r} is not one of {', '.join(FAULTS)}")
    now = engine.clock.now_ms
    if name == "client-crash":
        return {"fault": name, "txnId": _open_transaction(engine, topic, subscription, txn_timeout_ms)}
    if name == "coordinator-not-ready":
        _set(engine.store, "coordinator", "0", {"since": now})
        engine.coordinators.pop(0, None)
        return {"fault": name, "coordinator": 0}
    if name == "buffer-recovering":
        _set(engine.store, "buffer", topic, {"kind": "recovering", "since": now})
        return {"fault": name, "topic": topic}
    if name == "buffer-no-snapshot":
        _set(engine.store, "buffer", topic, {"kind": "no-snapshot", "since": now})
        engine.buffers.buffers.pop(topic, None)
        txn = _open_transaction(engine, topic, None, txn_timeout_ms, produce_fails=True)
        return {"fault": name, "topic": topic, "txnId": txn}
    if name == "pending-ack-not-ready":
        t, s = subscription
        _set(engine.store, "pendingAck", f"{t} {s}", {"since": now})
        return {"fault": name, "topic": t, "subscription": s}
    if name == "replication-held":
        return {"fault": name, "topic": topic, **_replicated_and_held(engine, topic, txn_timeout_ms)}
    if name == "leaked-pending-ack":
        t, s = subscription
        engine.pending_ack(t, s)  # the log exists (the workload acknowledged there)
        with engine.store.tx():
            engine.store.db.execute("DELETE FROM subscriptions WHERE topic=? AND name=?", (t, s))
        engine.pending_acks.pop((t, s), None)
        return {"fault": name, "topic": t, "subscription": s}
    # phantom-fence: a plain message the buffer does not let readers reach, with no transaction open
    buffer = engine.buffers.buffer(topic, create=True)
    if buffer.ongoing:
        raise EngineError(f"{topic} has open transactions; a phantom fence needs none (run the workload to its end)")
    stale = str(buffer.max_read_position)
    engine.buffers.publish(topic, b"behind the fence")
    _set(engine.store, "buffer", topic, {"kind": "phantom", "maxReadPosition": stale})
    engine.buffers.buffers.pop(topic, None)
    return {"fault": name, "topic": topic, "maxReadPosition": stale}


REMOTE_CLUSTER = "remote"


def _replicated_and_held(engine, topic: str, timeout_ms: int) -> dict:
    """The topic gets a replicator to REMOTE_CLUSTER (its cursor, caught up: the engine's replicator sends at
    once what it may read, engine/buffer/buffer.py), then a transaction left open and plain messages after it."""
    from pulsar_txn_cli.protocol import replicator_cursor

    buffer = engine.buffers.buffer(topic, create=True)
    cursor = buffer.log.ml.open_cursor(replicator_cursor(REMOTE_CLUSTER), batch_index_deletion=False)
    cursor.mark_delete_to(buffer.max_read_position)
    txn = _open_transaction(engine, topic, None, timeout_ms)
    for n in range(3):
        engine.buffers.publish(topic, f"after the open transaction {n}".encode())
    engine.checkpoint()
    return {"cluster": REMOTE_CLUSTER, "cursor": cursor.name, "txnId": txn}


def _open_transaction(engine, topic: str, subscription, timeout_ms: int, produce_fails: bool = False) -> str:
    """NEW, ADD_PARTITION (+ a message), ADD_SUBSCRIPTION + an ack; never ended. Returns "(most,least)"."""
    tc = engine.tc(0)
    ids: list[int] = []
    errors: list = []
    tc.new_transaction(timeout_ms, ids.append, errors.append)
    engine.checkpoint()
    if errors or not ids:
        raise EngineError(f"the fault's transaction could not start: {errors[0] if errors else 'no answer'}")
    least = ids[0]
    tc.add_partitions(least, [topic], lambda pos: None, errors.append)
    engine.checkpoint()
    try:
        engine.buffers.produce(topic, (tc.tc_id, least))
    except EngineError:
        if not produce_fails:
            raise
    if subscription is not None:
        store = engine.pending_ack(*subscription)
        tc.add_subscriptions(least, [subscription], lambda pos: None, errors.append)
        engine.checkpoint()
        store.ack(tc.tc_id, least, store.take_messages(1), lambda pos: None, errors.append)
    engine.checkpoint()
    if errors:
        raise EngineError(f"the fault's transaction failed: {errors[0]}")
    return f"({tc.tc_id},{least})"
