"""Read what the checks judge, through PulsarAdmin only, concurrently and bounded.

One Reading per run: the coordinators, every open transaction, the transaction buffers of the
partitions in scope, the transactional subscriptions (and pending-ack logs that lost theirs), and
every broker's runtime configuration and version. A failed call is kept as an error on what it was
about, never raised: a check then says it could not judge. Only the first call, which proves the
target answers, lets its ConnectionFailed through (exit code 4). Every request is counted.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from pulsar_txn_cli.admin.counting import requests_sent
from pulsar_txn_cli.admin.open_transactions import open_transactions
from pulsar_txn_cli.errors import ConnectionFailed
from pulsar_txn_cli.errors import attempt
from pulsar_txn_cli.names import TopicName, namespace_of
from pulsar_txn_cli.protocol import INTERNAL_INFO, PENDING_ACK_SUFFIX, SYSTEM_NAMESPACE, tc_assign_partition, topic_path

DEFAULT_CONCURRENCY = 16


@dataclass
class Scope:
    topic: str | None = None
    namespace: str | None = None

    def describe(self) -> str:
        return f"topic {self.topic}" if self.topic else f"namespace {self.namespace}" if self.namespace else "cluster"


@dataclass
class Reading:
    target: str
    scope: Scope
    now_ms: int
    clock: str
    target_kind: str = "cluster"
    tc_count: int = 0
    tc_stats: dict = field(default_factory=dict)  # "id" -> stats
    tc_errors: dict = field(default_factory=dict)  # "id" -> sentence
    owners: dict = field(default_factory=dict)  # "id" -> its owner's web URL (the lookup's httpUrl), or None
    open_txns: dict = field(default_factory=dict)  # txnId -> TransactionMetadata (slowTransactions/-1)
    open_error: str | None = None  # no coordinator could be listed
    unlisted: dict = field(default_factory=dict)  # coordinator id -> why it could not be listed (the rest were)
    partitions: dict = field(default_factory=dict)  # partition -> {"stats", "internal", "error"}
    subscriptions: list = field(default_factory=list)  # discovery entries + "stats", "internal", "error"
    brokers: dict = field(default_factory=dict)  # web URL -> {"runtime", "version", "error"}
    brokers_error: str | None = None
    problems: list = field(default_factory=list)
    requests: int = 0

    @property
    def versions(self) -> list[str]:
        return sorted({b["version"] for b in self.brokers.values() if b.get("version")})


def user_namespaces(admin) -> list[str]:
    return sorted(ns for tenant in admin.tenants() for ns in admin.namespaces(tenant) if ns != SYSTEM_NAMESPACE)


def read(admin, scope: Scope, *, concurrency: int = DEFAULT_CONCURRENCY) -> Reading:
    """Everything the checks need, read once. `admin` should be counted (admin/counting.py)."""
    from pulsar_txn_cli.stuck_readers import partitions_of

    tc_count = admin.tc_partitions()  # proves the target answers; ConnectionFailed propagates
    now, clock = admin.clock()
    reading = Reading(admin.target.describe(), scope, now, clock, admin.target.kind, tc_count)
    pool = ThreadPoolExecutor(max_workers=max(1, int(concurrency)), thread_name_prefix="doctor")
    try:
        stats = pool.submit(attempt, admin.coordinator_stats_each)
        owners = [pool.submit(attempt, admin.lookup, tc_assign_partition(i)) for i in range(tc_count)]
        txns = pool.submit(attempt, open_transactions, admin)
        urls = pool.submit(attempt, admin.broker_web_urls)
        namespaces = [scope.namespace] if scope.namespace else None
        if scope.topic:
            namespaces = [namespace_of(scope.topic)]
        if scope.topic or scope.namespace:
            # What the operator named must be readable: a typo is an error, never an empty all-clear.
            names, names_error = partitions_of(admin, scope.topic, scope.namespace), None
        else:
            names, names_error = attempt(
                lambda: [p for ns in user_namespaces(admin) for p in partitions_of(admin, None, ns)]
            )
        if names_error:
            reading.problems.append(f"could not list the topics of the {scope.describe()}: {names_error}")
        part_futures = {p: pool.submit(_partition, admin, p) for p in names or ()}
        subs, subs_error = attempt(_subscriptions, admin, namespaces, scope, concurrency)
        if subs_error:
            reading.problems.append(f"could not discover the transactional subscriptions: {subs_error}")
        sub_futures = [pool.submit(_subscription, admin, entry) for entry in subs or ()]
        (each, stats_error) = stats.result()
        if stats_error:
            reading.tc_errors = {str(i): stats_error for i in range(tc_count)}
        else:
            reading.tc_stats, reading.tc_errors = each
        for i, future in enumerate(owners):
            data, _ = future.result()
            reading.owners[str(i)] = (data or {}).get("httpUrl") or (data or {}).get("httpUrlTls")
        listing, reading.open_error = txns.result()
        if listing is not None:
            reading.open_txns, reading.unlisted = listing.transactions, listing.unlisted
            if len(listing.unlisted) >= max(1, tc_count):
                reading.open_error = listing.unlisted_rows()[0]["error"]
        broker_urls, reading.brokers_error = urls.result()
        only = len(broker_urls or ()) == 1  # one broker: ask through the admin URL, as downgrade does
        broker_futures = {u: pool.submit(_broker, admin, None if only else u) for u in broker_urls or ()}
        reading.partitions = {p: f.result() for p, f in part_futures.items()}
        if scope.topic and all(e.get("error") for e in reading.partitions.values()):
            first = next(iter(reading.partitions.values()))["error"]
            raise ConnectionFailed(f"topic {scope.topic} could not be read: {first}")
        reading.subscriptions = [f.result() for f in sub_futures]
        reading.brokers = {u: f.result() for u, f in broker_futures.items()}
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    reading.requests = requests_sent(admin)
    return reading


def _partition(admin, partition: str) -> dict:
    both, error = attempt(admin.partition_stats, partition, True)
    internal, stats = both or ({}, {})
    return {"stats": stats, "internal": internal, "error": error}


def _subscriptions(admin, namespaces, scope: Scope, concurrency: int) -> list[dict]:
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions

    found = transactional_subscriptions(admin, namespaces=namespaces, concurrency=concurrency)
    if scope.topic:
        base = TopicName(scope.topic).full
        found = [e for e in found if (e.get("topic") or "").split("-partition-")[0] == base]
    elif namespaces is None:
        found = [e for e in found if not e["pendingAckTopic"].startswith(f"persistent://{SYSTEM_NAMESPACE}/")]
    return found


def _subscription(admin, entry: dict) -> dict:
    out = dict(entry)
    if entry.get("status") == "orphan":
        # The log's own topic: what it stores (its subscription is gone, so the pending-ack calls cannot answer).
        out["internal"], out["error"] = attempt(admin.topic_internal_stats, entry["pendingAckTopic"])
        if out["error"]:
            # A real broker will not load a pending-ack topic for the admin API (409 "Can not create transaction
            # system topic"), but its managed ledger's metadata can be read without loading it.
            info, info_error = attempt(admin.topic_internal_info, entry["pendingAckTopic"])
            if not info_error and isinstance(info, dict):
                out["internal"], out["error"] = _from_ledger_info(info), None
                out["internalEndpoint"] = "GET " + topic_path(TopicName(entry["pendingAckTopic"]).rest, INTERNAL_INFO)
        return out
    out["stats"], error = attempt(admin.pending_ack_stats, entry["topic"], entry["subscription"])
    internal, internal_error = attempt(admin.pending_ack_internal_stats, entry["topic"], entry["subscription"])
    out["internal"] = ((internal or {}).get("pendingAckLogStats") or {}).get("managedLedgerInternalStats") or {}
    out["error"] = error or internal_error
    return out


def _from_ledger_info(info: dict) -> dict:
    """internalStats' ledger list from a managed ledger's metadata (`internal-info`). Its entries and bytes are
    left out: the metadata counts a ledger's only once the log rolls over from it, so its last ledger always
    reads 0 entries there, whatever it holds."""
    ledgers = [ledger for ledger in info.get("ledgers") or [] if isinstance(ledger, dict)]
    return {"ledgers": [{"ledgerId": ledger.get("ledgerId")} for ledger in ledgers]}


def _broker(admin, url: str | None) -> dict:
    runtime, error = attempt(admin.runtime_config, url)
    version, version_error = attempt(admin.version, url)
    return {
        "runtime": runtime if isinstance(runtime, dict) else None,
        "version": version,
        "error": error or version_error,
    }


def is_pending_ack_topic(name: str) -> bool:
    return name.endswith(PENDING_ACK_SUFFIX)
