"""What a check saw on the target: plain dataclasses, filled by the runner, read by the verdicts.

Every field that could not be observed is None and, where a call failed, `error` says why; the
verdicts treat both as "not known", never as "fine".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Mapping

from pulsar_txn_cli.scalable_coordinator import SecondCoordinator

COORDINATOR = "coordinator"
SUBSCRIPTION = "subscription"


@dataclass(frozen=True)
class BrokerObservation:
    """One broker: its runtime configuration (PulsarAdmin.runtime_config)."""

    broker: str
    runtime: Mapping[str, str] | None = None
    version: str | None = None
    error: str | None = None


TC_WRITER, PENDING_ACK_WRITER = "tc", "pendingAck"  # the two buffered writers, by the log they write


@dataclass(frozen=True)
class WriterCounters:
    """One broker's PIP-160 buffered-writer counters (its /metrics): per writer, since when it counts (its
    `_created` samples: the broker's start) and how many batches it has written since. A counter that
    moved, or restarted, between two checks is the only trace a batching spell leaves once it is off again."""

    broker: str
    created_ms: Mapping[str, int] = field(default_factory=dict)  # TC_WRITER/PENDING_ACK_WRITER -> epoch ms
    batches: Mapping[str, int] = field(default_factory=dict)
    error: str | None = None  # the metrics could not be read
    cannot_batch: bool = False  # its release predates PIP-160: no writer can batch


@dataclass(frozen=True)
class LogObservation:
    """One transaction log: a coordinator's TC log or a subscription's pending-ack log."""

    kind: str  # COORDINATOR or SUBSCRIPTION
    coordinator_id: int | None = None
    topic: str | None = None
    subscription: str | None = None
    ledgers: tuple[int, ...] | None = None  # ids of the ledgers that still exist
    last_confirmed: str | None = None  # "ledgerId:entryId"
    mark_delete: str | None = None  # the log's cursor
    individually_deleted: str | None = None  # the cursor's individuallyDeletedMessages ("[]" when none)
    effective_batching: bool | None = None  # None: not known
    effective_reason: str | None = None  # why the admin layer thinks so
    ongoing_txns: int | None = None
    error: str | None = None
    store_state: str | None = None  # the store's state ("Ready"; "Initializing" while it opens; None: not loaded)
    opened_ms: int | None = None  # when the store last (re)opened: its recoverStartTime
    oldest_open_ms: int | None = None  # a coordinator's oldest open transaction's openTimestamp (None: none or unknown)
    overdue_txns: tuple[str, ...] = ()  # a coordinator's open transactions long past their own timeout ("(1,5)")
    current_created_ms: int | None = None  # when its current ledger was created (lastLedgerCreatedTimestamp)

    @property
    def opening(self) -> bool:
        """Loaded but not Ready yet: the store replays its log (after a restart or an unload)."""
        from pulsar_txn_cli.batchlog.stores import OPENING_STATES

        return self.store_state in OPENING_STATES

    @property
    def writer(self) -> str:
        return TC_WRITER if self.kind == COORDINATOR else PENDING_ACK_WRITER

    @property
    def key(self) -> tuple:
        if self.kind == COORDINATOR:
            return (COORDINATOR, self.coordinator_id)
        return (SUBSCRIPTION, self.topic, self.subscription)

    @property
    def label(self) -> str:
        if self.kind == COORDINATOR:
            return f"coordinator {self.coordinator_id}"
        return f"subscription {self.subscription!r} on {self.topic}"


@dataclass(frozen=True)
class Observations:
    """Everything one check gathered. `problems` are failures that are not tied to one item
    (a namespace that could not be listed, say): items may be missing, so never SAFE."""

    target: str  # as the operator named it (the URL or engine directory), for messages
    taken_at: str  # ISO 8601 UTC
    dynamic_config: Mapping[str, str] | None = None
    dynamic_error: str | None = None
    brokers: tuple[BrokerObservation, ...] = ()
    brokers_error: str | None = None
    coordinators: tuple[LogObservation, ...] = ()
    subscriptions: tuple[LogObservation, ...] = ()
    problems: tuple[str, ...] = field(default_factory=tuple)
    identity: str = ""  # who the target says it is (admin/identity.py): the key of its checkpoint
    # Every broker's buffered-writer metrics counted no batch since this time (the latest of their
    # `_created` samples); None when some batch was counted or it cannot be told.
    unbatched_since_ms: int | None = None
    # Every broker's buffered-writer counters; None when they were not gathered (nothing can be told from them).
    writers: tuple[WriterCounters, ...] | None = None
    # Pulsar 5.0's scalable-topics coordinator where a broker has it on (scalable_coordinator.py), else None.
    second_coordinator: SecondCoordinator | None = None

    @property
    def key(self) -> str:
        return self.identity or self.target

    @property
    def logs(self) -> tuple[LogObservation, ...]:
        return self.coordinators + self.subscriptions
