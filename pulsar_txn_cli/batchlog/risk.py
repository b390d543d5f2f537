"""Before a switch off: would it pin a log for good (the batch-index deletion stall)?"""

from __future__ import annotations

from pulsar_txn_cli.target import remembered
from pulsar_txn_cli.batchlog.config import cannot_batch, configured_for
from pulsar_txn_cli.batchlog.judgement import judge
from pulsar_txn_cli.batchlog.logs import PENDING_ACK, Log, store_key
from pulsar_txn_cli.admin.client import broker_at
from pulsar_txn_cli.admin.open_transactions import open_transactions
from pulsar_txn_cli.errors import ConnectionFailed
from pulsar_txn_cli.names import TxnID, across_brokers, parse_bool
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY

SHOWN_TRANSACTIONS = 5


def switch_off_risk(admin, setting: dict, reload: bool, log: Log | None = None, stores=None) -> dict | None:
    """The batch-index deletion stall a switch off would create, or None when it would not.

    Seen on a real Pulsar 4.0.7 broker (docs/real-broker-findings.md): with
    acknowledgmentAtBatchIndexLevelEnabled false, a transaction open across the switch leaves
    records in batched entries that can no longer be deleted once the store reopens unbatched, so
    the log's cursor stays pinned for good. Nothing to fear when no store can batch, when nothing
    changes now or at a later reopen (already off, no --reload), with no open transaction, or with
    batch-index acknowledgements on in every broker, or when it is already off and every store of LOG
    (given its STORES) runs unbatched: the switch is then a no-op for batching.
    A coordinator that is not loaded, or not Ready, cannot say how many transactions its log holds
    open: it is named in "uncountedCoordinators" (and the caller warns; it refuses only on a count).
    Returns {"openTransactions": n, "uncountedCoordinators": [id, ...], "transactions": [[most, least], ...]
    (the first few), "batchIndexDeletion": False|None (unknown), "brokers": [{"broker", "batchIndexDeletion"}]}."""
    if log is PENDING_ACK:
        # A pending-ack store trims its log by marking its cursor deleted up to a position of its sparse
        # index, whole entries, never records inside a batched entry: on a real Pulsar 4.0.7 broker with
        # batch-index acknowledgements off, transactions open across this switch did not pin any pending-ack
        # log (docs/real-broker-findings.md). Only the TC log's switch can.
        return None
    if cannot_batch(setting) or (setting["configured"] is False and setting["dynamic"] is False and not reload):
        return None
    if log is not None and stores is not None and _already_unbatched(admin, log, setting, stores):
        return None
    stats, errors = admin.coordinator_stats_each()
    ready = {k: s for k, s in stats.items() if (s or {}).get("state") == "Ready"}
    count = sum(int(s.get("ongoingTxnSize") or 0) for s in ready.values())
    uncounted = sorted({int(k) for k in errors} | {int(k) for k in stats if k not in ready})
    if not count and not uncounted:
        return None
    brokers = _batch_index_flags(admin)
    deletion = across_brokers([b["batchIndexDeletion"] for b in brokers])
    if deletion is True:
        return None
    return {
        "openTransactions": count,
        "uncountedCoordinators": uncounted,
        "transactions": _open_ids(admin)[:SHOWN_TRANSACTIONS] if count else [],
        "batchIndexDeletion": deletion,
        "brokers": brokers,
    }


def _already_unbatched(admin, log: Log, setting: dict, stores: list[dict]) -> bool:
    """Configured off, and every store judged to run unbatched now: reopening them changes nothing, so
    nothing can be pinned by this switch (a store that could still batch, or is unknown, does not count)."""
    if setting["configured"] is not False:
        return False
    change = remembered.load_changes(admin.identity())["changes"].get(log.key)
    return all(
        judge(s, configured_for(s, setting), setting["dynamic"], change, store_key(log, s))[0] is False for s in stores
    )


def _batch_index_flags(admin) -> list[dict]:
    urls = admin.broker_web_urls()
    rows = []
    for url in urls:
        try:
            value = parse_bool((admin.runtime_config(broker_at(url, len(urls))) or {}).get(BATCH_INDEX_KEY))
        except ConnectionFailed:
            value = None  # unknown: as risky as off
        rows.append({"broker": url, "batchIndexDeletion": value})
    return rows


def _open_ids(admin) -> list[list[int]]:
    """The open transactions' ids, oldest first (those listed: they are shown, the count comes from stats)."""
    try:
        listed = open_transactions(admin).transactions
    except ConnectionFailed:
        return []
    ids = []
    for key, meta in listed.items():
        try:
            ids.append((int((meta or {}).get("openTimestamp") or 0), *TxnID.parse(str(meta.get("txnId") or key))))
        except (ValueError, TypeError, AttributeError):
            continue
    return [[most, least] for _, most, least in sorted(ids)]
