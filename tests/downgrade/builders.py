"""Small builders of observations for the verdict tests (no I/O)."""

from __future__ import annotations

from pulsar_txn_cli.downgrade.batched_since import baseline
from pulsar_txn_cli.downgrade.checkpoint import Checkpoint, Record
from pulsar_txn_cli.downgrade.observations import (
    COORDINATOR,
    SUBSCRIPTION,
    BrokerObservation,
    LogObservation,
    Observations,
    WriterCounters,
)
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS

TARGET = "http://broker:8080"
T0 = "2026-01-01T00:00:00Z"
T1 = "2026-01-01T01:00:00Z"
# A broker whose buffered writers have not moved between the checks (the baseline every checkpoint below keeps).
QUIET = (WriterCounters("http://b1:8080", {"tc": 1_000, "pendingAck": 1_000}, {"tc": 7, "pendingAck": 9}),)


def runtime(batching: bool = False, batch_index: bool = False) -> dict:
    values = {key: str(batching).lower() for key in BATCH_KEYS}
    values[BATCH_INDEX_KEY] = str(batch_index).lower()
    return values


def broker(name="b1:8080", batching=False, batch_index=False, version="4.0.4", **kw) -> BrokerObservation:
    return BrokerObservation(name, runtime(batching, batch_index), version, **kw)


def tc(cid, ledgers=(1, 2), effective=False, mark="2:5", lac="2:9", **kw) -> LogObservation:
    return LogObservation(
        COORDINATOR,
        coordinator_id=cid,
        ledgers=tuple(ledgers) if ledgers is not None else None,
        effective_batching=effective,
        mark_delete=mark,
        last_confirmed=lac,
        **kw,
    )


def sub(
    topic="persistent://public/default/t", name="s", ledgers=(10, 11), effective=False, mark="11:0", lac="11:3", **kw
) -> LogObservation:
    return LogObservation(
        SUBSCRIPTION,
        topic=topic,
        subscription=name,
        ledgers=tuple(ledgers) if ledgers is not None else None,
        effective_batching=effective,
        mark_delete=mark,
        last_confirmed=lac,
        **kw,
    )


def obs(coordinators=(), subscriptions=(), brokers=None, dynamic=None, taken_at=T1, **kw) -> Observations:
    kw.setdefault("writers", QUIET)
    return Observations(
        target=kw.pop("target", TARGET),
        taken_at=taken_at,
        dynamic_config={} if dynamic is None else dynamic,
        brokers=tuple(brokers if brokers is not None else [broker()]),
        coordinators=tuple(coordinators),
        subscriptions=tuple(subscriptions),
        **kw,
    )


def checkpoint(coordinators=None, subscriptions=None, target=TARGET, writers=QUIET) -> Checkpoint:
    return Checkpoint(
        target,
        T0,
        {cid: Record(ledger, T0) for cid, ledger in (coordinators or {}).items()},
        {key: Record(ledger, T0) for key, ledger in (subscriptions or {}).items()},
        baseline(writers, None),
    )
