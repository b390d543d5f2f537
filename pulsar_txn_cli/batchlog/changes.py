"""Changes: set the dynamic setting (recording the moment and every store's open time), declare a
change made elsewhere, unload the stores' topics so they reopen, and wait for them to settle."""

from __future__ import annotations

from pulsar_txn_cli.admin import features
from pulsar_txn_cli.target import remembered
from pulsar_txn_cli.batchlog.config import cannot_batch, configured_for, configured_setting
from pulsar_txn_cli.batchlog.judgement import judge
from pulsar_txn_cli.batchlog.logs import TC, Log, store_key
from pulsar_txn_cli.batchlog.stores import opening, stores_of
from pulsar_txn_cli.errors import ConnectionFailed, UsageError
from pulsar_txn_cli.output.units import iso_millis
from pulsar_txn_cli.protocol import tc_assign_partition


def set_batch_log(
    admin,
    log: Log,
    enabled: bool,
    *,
    concurrency: int = 8,
    stores: list[dict] | None = None,
    before: dict | None = None,
) -> dict:
    """Update the dynamic setting and record the moment and every store's open time.

    Refused when no broker has the setting (every one predates PIP-160): the broker would answer 412."""
    before = configured_setting(admin, log) if before is None else before
    release = cannot_batch(before)
    if release is not None:
        raise UsageError(
            features.no_batched_logs(release, log.key)
            + ("" if enabled else "; with no batching there is nothing to turn off")
        )
    stores = stores_of(admin, log, concurrency) if stores is None else stores
    snapshot = {store_key(log, s): s.get("recoverStartTime") for s in stores}
    identity = admin.identity()
    state = remembered.load_changes(identity)
    change = state["changes"].get(log.key)
    # What each store runs with right now, judged under the record in force: a store opened under an
    # earlier change keeps that change's value, not the setting's previous value.
    running = {
        store_key(log, s): judge(s, configured_for(s, before), before["dynamic"], change, store_key(log, s))[0]
        for s in stores
    }
    admin.update_dynamic_config(log.key, enabled)
    if not (change and change.get("value") == enabled and before["configured"] == enabled):
        # A repeated set keeps the first record: stores opened before it still run with the older value.
        change = {
            "value": enabled,
            "previous": before["configured"],
            "at": admin.now_ms(),
            "recoverStartTimes": snapshot,
            "runningBefore": running,
        }
        state["changes"][log.key] = change
        remembered.save_changes(identity, state, seen_as=admin.target.describe())
    open_stores = [s for s in stores if s.get("state") == "Ready"]
    return {
        "target": admin.target.describe(),
        "identity": identity,
        "setting": log.key,
        "value": enabled,
        "previous": before["configured"],
        "at": change["at"],
        log.detail_key: len(stores),
        "openStores": len(open_stores),
        "staleStores": sum(1 for s in open_stores if running.get(store_key(log, s)) is not enabled),
        "note": f"takes effect for each {log.store} only when its store is reopened "
        f"({'unload the coordinator-assign partitions' if log is TC else 'unload the topics'}, or use --reload)",
    }


def declare_change(admin, log: Log, enabled: bool, at_ms: int) -> dict:
    """Record a change made with another tool at AT_MS (the target's time), without changing anything.

    The stores' open times at that moment are unknown, so each store's open time is compared
    with AT_MS; the value before the change is unknown, so a store not reopened since is unknown."""
    setting = configured_setting(admin, log)
    if setting["configured"] is not enabled:
        raise UsageError(
            f"{admin.target.describe()} has {log.key}={_word(setting['configured'])}, not "
            f"{_word(enabled)}: declare the change that is in effect"
        )
    if at_ms > admin.now_ms() + 60_000:
        raise UsageError(
            f"--changed-at {iso_millis(at_ms)} is in the future of {admin.target.describe()} ({iso_millis(admin.now_ms())})"
        )
    identity = admin.identity()
    state = remembered.load_changes(identity)
    change = {"value": enabled, "previous": None, "at": at_ms, "recoverStartTimes": None, "declared": True}
    state["changes"][log.key] = change
    remembered.save_changes(identity, state, seen_as=admin.target.describe())
    return {
        "target": admin.target.describe(),
        "identity": identity,
        "setting": log.key,
        "value": enabled,
        "previous": None,
        "at": at_ms,
        "declared": True,
        "note": f"recorded, not changed: each {log.store} opened after {iso_millis(at_ms)} runs with {_word(enabled)}",
    }


def _word(value) -> str:
    return "unknown" if value is None else str(value).lower()


def reload_targets(log: Log, stores: list[dict]) -> list[str]:
    """The topics to unload so that these stores reopen."""
    if log is TC:
        return [tc_assign_partition(s["coordinatorId"]) for s in stores]
    from pulsar_txn_cli.natural import natural_key

    return sorted({s["topic"] for s in stores if s.get("topic") and s.get("discovery") != "orphan"}, key=natural_key)


SETTLE_SECONDS = 30.0


def settle(admin, log: Log, stores: list[dict], timeout: float | None = None, sleep=None, clock=None) -> list[dict]:
    """Wait (up to timeout seconds) until the pending-ack stores that were opening are Ready.

    Asking for a store's stats loads its topic, and the store replays its log; an unload that lands
    during that replay can leave the reopened store replaying for good, and every subscribe to it
    then times out (Pulsar's own race, apache/pulsar#16248; seen on a real 4.0.7 cluster:
    docs/real-broker-findings.md). Returns the stores, refreshed."""
    import time

    sleep, clock = sleep or time.sleep, clock or time.monotonic
    if log is TC:
        return stores
    deadline = clock() + (SETTLE_SECONDS if timeout is None else timeout)
    stores = list(stores)
    while True:
        waiting = [i for i, s in enumerate(stores) if opening(s)]
        if not waiting or clock() >= deadline:
            return stores
        sleep(0.5)
        for i in waiting:
            s = stores[i]
            try:
                fresh = admin.pending_ack_stats(s["topic"], s["subscription"]) or {}
            except ConnectionFailed:
                continue
            stores[i] = {**s, **{k: fresh.get(k) for k in ("state", "recoverStartTime", "recoverEndTime")}}


def still_opening(log: Log, stores: list[dict]) -> set[str]:
    """The topics not to unload: their pending-ack store is still replaying after `settle`. Never a
    coordinator's: one that does not finish recovering is what an unload clears (docs/doctor.md)."""
    if log is TC:
        return set()
    return {s["topic"] for s in stores if opening(s)}


def reload_stores(admin, topics: list[str]) -> list[dict]:
    """Unload each topic; failures are reported per topic, not raised."""
    results = []
    for topic in topics:
        try:
            admin.unload_topic(topic)
            results.append({"topic": topic, "unloaded": True, "error": None})
        except ConnectionFailed as exc:
            results.append({"topic": topic, "unloaded": False, "error": str(exc)})
    return results
