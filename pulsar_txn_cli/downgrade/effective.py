"""Where batching is effective, per store, through the admin layer's own judgement (batchlog/).

Pulsar reports no per-store batching state (PIP-160's stat commands never
shipped); batchlog/judgement.py combines the
configured value, the change recorded when pulsar-txn set it, and each store's open time. This
module only feeds it what the check already observed, so no extra admin call is made.
"""

from __future__ import annotations

from dataclasses import replace

from pulsar_txn_cli.admin import features
from pulsar_txn_cli.downgrade.observations import LogObservation
from pulsar_txn_cli.protocol import (
    BATCH_KEYS,
    PENDING_ACK_BATCH_KEY,
    TC_BATCH_KEY,
    pending_ack_store_key,
    tc_store_key,
)


class Judge:
    def __init__(self, identity: str, dynamic_config, brokers):
        from pulsar_txn_cli.target import remembered
        from pulsar_txn_cli.batchlog.config import configured_value, dynamic_value

        changes = remembered.load_changes(identity)["changes"]
        self._settings = {}
        for key in BATCH_KEYS:
            dynamic = dynamic_value(dynamic_config, key)
            runtimes = [features.batch_flag(b.runtime, key, b.version) for b in brokers if b.runtime is not None]
            self._settings[key] = (configured_value(dynamic, runtimes), dynamic, changes.get(key))
        # Every broker predates PIP-160: no store can batch, whatever was recorded before.
        self._release = features.all_predate_batched_logs([b.version for b in brokers])

    def _judge(self, log: LogObservation, key: str, store: dict, store_key: str) -> LogObservation:
        from pulsar_txn_cli.batchlog.judgement import effective

        configured, dynamic, change = self._settings[key]
        state, reason = effective(store, key, configured, dynamic, change, store_key, self._release)
        ongoing = store.get("ongoingTxnSize")
        opened = store.get("state")
        recovered = store.get("recoverStartTime")
        return replace(
            log,
            effective_batching=state,
            effective_reason=reason,
            ongoing_txns=ongoing if isinstance(ongoing, int) else None,
            store_state=opened if isinstance(opened, str) else None,
            opened_ms=recovered if isinstance(recovered, int) and not isinstance(recovered, bool) else None,
        )

    def coordinator(self, log: LogObservation, stats: dict) -> LogObservation:
        return self._judge(log, TC_BATCH_KEY, stats, tc_store_key(log.coordinator_id))

    def subscription(self, log: LogObservation, stats: dict) -> LogObservation:
        return self._judge(log, PENDING_ACK_BATCH_KEY, stats, pending_ack_store_key(log.topic, log.subscription))
