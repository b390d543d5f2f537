"""PIP-160's batch-log switches: set them, reload the stores, and judge where batching is effective.

Pulsar has no API that says whether a coordinator or a pending-ack store batches (facts §5): a
store reads the dynamic setting only when it is opened. So the judgement combines
- the configured value: the dynamic override, else each broker's runtime configuration;
- the moment of the change, recorded when this tool sets it (admin/remembered.py, keyed by the
  cluster's identity, not by the URL), with every store's recoverStartTime at that moment
  (clock-independent: a store whose recover time moved was reopened after the change; otherwise
  its time is compared with the change's), or declared by an operator for a change made elsewhere;
- the brokers' buffered-writer metrics, as evidence that some store on a broker batches.
When the answer cannot be known, `effective` is None and `reason` says why.
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.admin import features, remembered
from pulsar_txn_cli.errors import ConnectionFailed, UsageError
from pulsar_txn_cli.names import parse_bool
from pulsar_txn_cli.protocol import (
    PENDING_ACK_BATCH_KEY,
    TC_BATCH_KEY,
    pending_ack_store_key,
    tc_assign_partition,
    tc_store_key,
    timestamp_text,
)


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


TC = Log("tc", TC_BATCH_KEY, "txnTcBatchLogEnabled", "coodinatorArray", "pulsar_txn_tc", "coordinator")
PENDING_ACK = Log(
    "pending-ack",
    PENDING_ACK_BATCH_KEY,
    "txnPendingAckBatchLogEnabled",
    "subscriptionArray",
    "pulsar_txn_pending_ack_store",
    "subscription",
)


# --- what is configured ---------------------------------------------------------------------------


def configured_setting(admin, log: Log) -> dict:
    """{"dynamic": bool|None, "brokers": [{"broker", "version", "runtime"}], "configured": bool|None, "mixed": bool}.

    A broker older than PIP-160 has no batch setting at all: its runtime value is False (it cannot batch)."""
    dynamic = parse_bool((admin.dynamic_config_values() or {}).get(log.key))
    brokers = []
    urls = admin.broker_web_urls()
    for url in urls:
        # With one broker, ask through the admin URL: a served engine or a proxy may advertise an address we cannot reach.
        at = None if len(urls) == 1 else url
        config = admin.runtime_config(at)
        version = _version(admin, at)
        brokers.append(
            {"broker": _short(url), "version": version, "runtime": features.batch_flag(config, log.key, version)}
        )
    values = {b["runtime"] for b in brokers if b["runtime"] is not None}
    configured = dynamic if dynamic is not None else (values.pop() if len(values) == 1 else None)
    return {
        "dynamic": dynamic,
        "brokers": brokers,
        "configured": configured,
        "mixed": len({b["runtime"] for b in brokers}) > 1,
    }


def _version(admin, broker_url: str | None) -> str | None:
    try:
        return admin.version(broker_url) or None
    except ConnectionFailed:
        return None


def without_batched_logs(setting: dict) -> list[dict]:
    """The brokers whose release predates PIP-160 (they cannot read or write batched entries)."""
    return [b for b in setting["brokers"] if features.lacks_batched_logs(b.get("version"))]


def cannot_batch(setting: dict) -> str | None:
    """The release when every broker predates PIP-160 (then no store batches), else None."""
    return features.all_predate_batched_logs([b.get("version") for b in setting["brokers"]])


# --- the stores and their open times ----------------------------------------------------------------


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
                "broker": owner.get("brokerServiceUrl"),
                "webServiceUrl": owner.get("webServiceUrl"),
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


def store_key(log: Log, store: dict) -> str:
    """The PIP's key: the coordinator id, or `<topic>-<subscription>` like the pending-ack topic name."""
    if log.kind == "tc":
        return tc_store_key(store["coordinatorId"])
    return pending_ack_store_key(store["topic"], store["subscription"])


def stores_of(admin, log: Log, concurrency: int = 8) -> list[dict]:
    return coordinator_stores(admin) if log is TC else subscription_stores(admin, concurrency)


# --- setting and reloading ---------------------------------------------------------------------------


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
    # earlier change keeps that change's value, not the setting's previous value (#13.6).
    running = {
        store_key(log, s): judge(s, _configured_for(s, before), before["dynamic"], change, store_key(log, s))[0]
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
            f"--changed-at {iso(at_ms)} is in the future of {admin.target.describe()} ({iso(admin.now_ms())})"
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
        "note": f"recorded, not changed: each {log.store} opened after {iso(at_ms)} runs with {_word(enabled)}",
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
# A store's states while it is loaded but replaying its log (Pulsar's state enums; "None" is the enum
# value before initialisation starts). "Close" and "Error" are not transient.
OPENING_STATES = ("None", "Initializing")


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


def opening(store: dict) -> bool:
    """A loaded store that is not Ready yet (replaying its log); None means not loaded or unknown."""
    return store.get("discovery") != "orphan" and store.get("state") in OPENING_STATES


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


# --- the judgement -------------------------------------------------------------------------------------


def judge(
    store: dict, configured: bool | None, dynamic: bool | None, change: dict | None, key: str
) -> tuple[bool | None, str]:
    """(effective, reason) for one store. Pure: no I/O."""
    start = store.get("recoverStartTime") or 0
    state = store.get("state")
    if store.get("discovery") == "orphan":
        return None, "the subscription no longer exists; only its pending-ack ledger remains"
    if state != "Ready" or not start:
        shown = "not loaded" if state is None else f"in state {state}"
        return None, f"the store is {shown}; when it opens it will use the configured value"
    if change is None:
        if dynamic is None:
            if configured is None:
                return None, "the brokers disagree on the setting and nothing says which broker opened this store"
            return configured, "set in the brokers' configuration files; no dynamic change on record"
        return None, (
            "the dynamic setting was changed outside pulsar-txn, so the moment of the change is unknown; "
            "set it with this tool or reload the store (--reload) to know"
        )
    at = change.get("at") or 0
    if configured is not None and change.get("value") != configured:
        return (
            None,
            f"the setting was changed again outside pulsar-txn after {iso(at)}; the moment of that change is unknown",
        )
    snapshot = change.get("recoverStartTimes")
    if snapshot is not None:  # the store's open time at the change: moved (or new store) = reopened since
        reopened = key not in snapshot or start != snapshot[key]
    else:
        reopened = start >= at
    if reopened:
        return change.get("value"), f"the store was reopened (at {iso(start)}) after the change at {iso(at)}"
    previous = (change.get("runningBefore") or {}).get(key, change.get("previous"))
    if previous is None:
        return (
            None,
            f"the store was not reopened since the change at {iso(at)}, and the value before the change is unknown",
        )
    return (
        previous,
        f"the store was not reopened since the change at {iso(at)} (opened at {iso(start)}); reload it for the change to take effect",
    )


def batch_log_stat(admin, log: Log, *, concurrency: int = 8, with_metrics: bool = True) -> dict:
    """The PIP's answer ({flag, array}) plus per-store detail, broker evidence and the recorded change."""
    setting = configured_setting(admin, log)
    identity = admin.identity()
    change = remembered.load_changes(identity)["changes"].get(log.key)
    release = cannot_batch(setting)
    detail = []
    for store in stores_of(admin, log, concurrency):
        key = store_key(log, store)
        configured = _configured_for(store, setting)
        effective, reason = (
            (False, features.no_batched_logs(release, log.key))
            if release
            else judge(store, configured, setting["dynamic"], change, key)
        )
        detail.append({**store, "configured": configured, "effective": effective, "reason": reason})
    brokers = setting["brokers"]
    if with_metrics:
        _add_metrics(admin, log, brokers)
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


def _configured_for(store: dict, setting: dict) -> bool | None:
    """The value this store's broker runs with: without a dynamic override, brokers may differ
    (each reads its own broker.conf), and a coordinator runs with its owner's."""
    if setting["dynamic"] is not None or not setting["mixed"] or not store.get("webServiceUrl"):
        return setting["configured"]
    owner = _short(str(store["webServiceUrl"]).rstrip("/"))
    return next((b["runtime"] for b in setting["brokers"] if b["broker"] == owner), None)


def _add_metrics(admin, log: Log, brokers: list[dict]) -> None:
    from pulsar_txn_cli.admin.writer_metrics import summarize

    for broker in brokers:
        url = None if len(brokers) == 1 else _long(admin, broker["broker"])
        try:
            summary = summarize(admin.metrics_text(url))
        except ConnectionFailed:
            broker["batches"] = None
            continue
        part = next((s for s in summary if s["log"] == log.kind), None)
        broker["batches"] = part["batches"] if part else 0


def iso(ms: int | None) -> str:
    return timestamp_text(ms) if ms else "-"


def _short(url: str) -> str:
    return url.split("://", 1)[-1]


def _long(admin, address: str) -> str:
    scheme = "https" if str(admin.target.url or "").startswith("https") else "http"
    return f"{scheme}://{address}"
