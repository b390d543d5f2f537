"""The two batched logs PIP-160 switches (the TC log, the pending-ack log) and PIP-160's store key."""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.protocol import PENDING_ACK_BATCH_KEY, TC_BATCH_KEY, pending_ack_store_key, tc_store_key


@dataclass(frozen=True)
class Log:
    kind: str  # "tc" or "pending-ack"
    key: str  # the dynamic broker setting
    pip_flag: str  # the PIP's JSON keys
    pip_array: str
    metric_prefix: str
    store: str  # words for messages

    @property
    def detail_key(self) -> str:
        return "coordinators" if self.kind == "tc" else "subscriptions"


# "coodinatorArray" (sic) is how PIP-160 spells the key in its proposed answer; kept, so the JSON is the PIP's.
TC = Log("tc", TC_BATCH_KEY, "txnTcBatchLogEnabled", "coodinatorArray", "pulsar_txn_tc", "coordinator")
PENDING_ACK = Log(
    "pending-ack",
    PENDING_ACK_BATCH_KEY,
    "txnPendingAckBatchLogEnabled",
    "subscriptionArray",
    "pulsar_txn_pending_ack_store",
    "subscription",
)


def store_key(log: Log, store: dict) -> str:
    """The PIP's key: the coordinator id, or `<topic>-<subscription>` like the pending-ack topic name."""
    if log.kind == "tc":
        return tc_store_key(store["coordinatorId"])
    return pending_ack_store_key(store["topic"], store["subscription"])
