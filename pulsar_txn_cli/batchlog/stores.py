"""The stores of a log and their open times (recoverStartTime): every coordinator, or every
transactional subscription's pending-ack store, found with a bounded thread pool."""

from __future__ import annotations

from pulsar_txn_cli.batchlog.logs import TC, Log
from pulsar_txn_cli.errors import ConnectionFailed


def coordinator_stores(admin) -> list[dict]:
    stats, _ = admin.coordinator_stats_each()  # a coordinator left out is judged unknown
    owners = {c["id"]: c for c in admin.coordinators()}
    stores = []
    for tc_id in sorted(set(owners) | {int(k) for k in stats}):
        s = stats.get(str(tc_id)) or stats.get(tc_id) or {}
        owner = owners.get(tc_id) or {}
        stores.append(
            {
                "coordinatorId": tc_id,
                "broker": owner.get("webServiceUrl"),  # a broker is its web URL (docs/output.md)
                "state": s.get("state"),
                "recoverStartTime": s.get("recoverStartTime"),
                "recoverEndTime": s.get("recoverEndTime"),
            }
        )
    return stores


def subscription_stores(admin, concurrency: int = 8, subscriptions: list[dict] | None = None) -> list[dict]:
    from concurrent.futures import ThreadPoolExecutor

    from pulsar_txn_cli.admin.discovery import transactional_subscriptions

    subs = subscriptions if subscriptions is not None else transactional_subscriptions(admin, concurrency=concurrency)

    def stats(sub):
        entry = {
            "topic": sub["topic"],
            "subscription": sub["subscription"],
            "discovery": sub["status"],
            "state": None,
            "recoverStartTime": None,
            "recoverEndTime": None,
        }
        if sub["status"] == "orphan":
            return entry
        try:
            s = admin.pending_ack_stats(sub["topic"], sub["subscription"]) or {}
        except ConnectionFailed as exc:
            if exc.status != 404:
                raise
            return entry
        entry.update(
            state=s.get("state"), recoverStartTime=s.get("recoverStartTime"), recoverEndTime=s.get("recoverEndTime")
        )
        return entry

    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="pending-ack-stats") as pool:
        return list(pool.map(stats, subs))


def stores_of(admin, log: Log, concurrency: int = 8) -> list[dict]:
    return coordinator_stores(admin) if log is TC else subscription_stores(admin, concurrency)


# A store's states while it is loaded but replaying its log (Pulsar's state enums; "None" is the enum
# value before initialisation starts). "Close" and "Error" are not transient.
OPENING_STATES = ("None", "Initializing")


def opening(store: dict) -> bool:
    """A loaded store that is not Ready yet (replaying its log); None means not loaded or unknown."""
    return store.get("discovery") != "orphan" and store.get("state") in OPENING_STATES
