"""PIP-160's batch-log switches: set them, reload the stores, and judge where batching is effective.

Pulsar has no API that says whether a coordinator or a pending-ack store batches (PIP-160's stat
commands never shipped: Pulsar's admin/v3/Transactions.java has no such endpoint): a store reads the dynamic setting only when it is opened. So the judgement combines
- the configured value: the dynamic override, else each broker's runtime configuration;
- the moment of the change, recorded when this tool sets it (target/remembered.py, keyed by the
  cluster's identity, not by the URL), with every store's recoverStartTime at that moment
  (clock-independent: a store whose recover time moved was reopened after the change; otherwise
  its time is compared with the change's), or declared by an operator for a change made elsewhere;
- the brokers' buffered-writer metrics, as evidence that some store on a broker batches.
When the answer cannot be known, `effective` is None and `reason` says why.

One module per job; this file only re-exports (as codec/__init__.py does): `logs.py` (the two logs and
PIP-160's store key), `config.py` (what is configured), `stores.py` (the stores and their open times),
`changes.py` (set, declare, reload, settle), `risk.py` (would a switch off pin a log for good?), `judgement.py` (the pure judgement), `metrics.py` (the
brokers' buffered-writer evidence) and `stat.py` (the PIP's answer, of all of them).
"""

from pulsar_txn_cli.batchlog.changes import (
    SETTLE_SECONDS,
    declare_change,
    reload_stores,
    reload_targets,
    set_batch_log,
    settle,
    still_opening,
)
from pulsar_txn_cli.batchlog.config import cannot_batch, configured_setting, without_batched_logs
from pulsar_txn_cli.batchlog.judgement import judge
from pulsar_txn_cli.batchlog.logs import PENDING_ACK, TC, Log, store_key
from pulsar_txn_cli.batchlog.risk import SHOWN_TRANSACTIONS, switch_off_risk
from pulsar_txn_cli.batchlog.stat import batch_log_stat
from pulsar_txn_cli.batchlog.stores import (
    OPENING_STATES,
    coordinator_stores,
    opening,
    stores_of,
    subscription_stores,
)

__all__ = [
    "OPENING_STATES",
    "PENDING_ACK",
    "SETTLE_SECONDS",
    "SHOWN_TRANSACTIONS",
    "TC",
    "Log",
    "batch_log_stat",
    "cannot_batch",
    "configured_setting",
    "coordinator_stores",
    "declare_change",
    "judge",
    "opening",
    "reload_stores",
    "reload_targets",
    "set_batch_log",
    "settle",
    "still_opening",
    "store_key",
    "stores_of",
    "subscription_stores",
    "switch_off_risk",
    "without_batched_logs",
]
