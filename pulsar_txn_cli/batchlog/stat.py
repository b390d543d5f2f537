"""The PIP's answer to get-…-batch-log-stat ({flag, array}), with per-store detail, broker evidence and
the recorded change."""

from __future__ import annotations

from pulsar_txn_cli.target import remembered
from pulsar_txn_cli.batchlog.config import cannot_batch, configured_for, configured_setting
from pulsar_txn_cli.batchlog.judgement import effective
from pulsar_txn_cli.batchlog.logs import Log, store_key
from pulsar_txn_cli.batchlog.metrics import add_metrics
from pulsar_txn_cli.batchlog.stores import stores_of


def batch_log_stat(admin, log: Log, *, concurrency: int = 8, with_metrics: bool = True) -> dict:
    """The PIP's answer ({flag, array}) plus per-store detail, broker evidence and the recorded change."""
    setting = configured_setting(admin, log)
    identity = admin.identity()
    change = remembered.load_changes(identity)["changes"].get(log.key)
    release = cannot_batch(setting)
    detail = []
    for store in stores_of(admin, log, concurrency):
        key = store_key(log, store)
        configured = configured_for(store, setting)
        batching, reason = effective(store, log.key, configured, setting["dynamic"], change, key, release)
        detail.append({**store, "configured": configured, "effective": batching, "reason": reason})
    brokers = setting["brokers"]
    if with_metrics:
        add_metrics(admin, log, brokers)
    return {
        "target": admin.target.describe(),
        "identity": identity,
        "setting": log.key,
        log.pip_flag: setting["configured"],
        log.pip_array: [{store_key(log, d): d["effective"]} for d in detail],
        log.detail_key: detail,
        "dynamic": setting["dynamic"],
        "brokers": brokers,
        "withoutBatchedLogs": release,
        "change": None
        if change is None
        else {k: change[k] for k in ("value", "previous", "at", "declared") if k in change},
    }
