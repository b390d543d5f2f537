"""PulsarAdmin: typed calls on Pulsar's admin REST API, identical for a cluster and the engine.

Every method builds Pulsar's own path and returns the parsed JSON exactly as Pulsar returns it;
any HTTP error status becomes one ConnectionFailed sentence (http_errors.py).
"""

from __future__ import annotations

import time

from urllib.parse import quote, urlsplit

import orjson

from pulsar_txn_cli import calls
from pulsar_txn_cli.calls import AdminCall
from pulsar_txn_cli.transport.http_errors import http_failure
from pulsar_txn_cli.errors import ConnectionFailed, PulsarTxnError, UsageError
from pulsar_txn_cli.names import TopicName
from pulsar_txn_cli.names import expand_partitions
from pulsar_txn_cli.protocol import (
    BROKER_CONFIG,
    BROKER_RUNTIME,
    BROKER_VERSION,
    BROKERS,
    CLUSTERS,
    ENGINE_API,
    INTERNAL_INFO,
    INTERNAL_STATS,
    LOOKUP,
    METRICS,
    NAMESPACES,
    PARTITIONS,
    SUBSCRIPTIONS,
    TC_ASSIGN_PARTITIONS,
    TENANTS,
    UNLOAD,
    tc_assign_partition,
    topic_path,
)

ENGINE_CLOCK, WALL_CLOCK = "engine time", "wall clock"


def _seg(value) -> str:
    return quote(str(value), safe="")


class PulsarAdmin:
    def __init__(self, transport, target):
        self.transport = transport
        self.target = target
        self._identity: str | None = None
        self._cluster: str | None = None
        self._clock: str | None = None  # ENGINE_CLOCK or WALL_CLOCK once known

    def __repr__(self) -> str:
        return f"PulsarAdmin({self.target.describe()!r})"

    def close(self) -> None:
        close = getattr(self.transport, "close", None)
        if close:
            close()

    def identity(self) -> str:
        """Who the target is, as it says itself (admin/identity.py); the key of what the tool remembers."""
        if self._identity is None:
            from pulsar_txn_cli.admin.identity import target_identity

            self._identity = target_identity(self)
        return self._identity

    def own_cluster(self) -> str:
        """The name of the target's cluster (with geo-replication the store lists others too)."""
        if self._cluster is None:
            from pulsar_txn_cli.admin.identity import own_cluster

            self._cluster = own_cluster(self)
        return self._cluster

    def now_ms(self) -> int:
        """The target's time (see clock())."""
        return self.clock()[0]

    def clock(self) -> tuple[int, str]:
        """(now in epoch ms, which clock): the engine's virtual clock, in process or asked of
        `engine serve`; for a broker, which does not tell its time, this machine's wall clock."""
        own = getattr(self.transport, "now_ms", None)
        if own:
            self._clock = ENGINE_CLOCK
            return own(), ENGINE_CLOCK
        if self._clock != WALL_CLOCK:
            served = self._served_engine_time()
            if served is not None:
                self._clock = ENGINE_CLOCK
                return served, ENGINE_CLOCK
            self._clock = WALL_CLOCK
        return int(time.time() * 1000), WALL_CLOCK

    def _served_engine_time(self) -> int | None:
        """The clock of a served engine, or None for anything else (a broker answers 404)."""
        try:
            status, _, raw = self.transport.request("GET", f"{ENGINE_API}/clock")
            now = orjson.loads(raw).get("nowMs") if status == 200 else None
        except (ConnectionFailed, orjson.JSONDecodeError, AttributeError):
            return None
        return now if isinstance(now, int) and not isinstance(now, bool) else None

    def engine_simulate(self, options: dict) -> dict:
        """Run a workload on a served engine (engine/router.py); a broker has no such endpoint."""
        try:
            return self.call("POST", f"{ENGINE_API}/simulate", body=options)
        except ConnectionFailed as exc:
            if exc.status in (404, 405):
                raise UsageError(
                    f"{self.target.describe()} is not an engine served by `pulsar-txn engine serve` (it has no "
                    f"{ENGINE_API}/simulate): a simulated workload runs only on the embedded engine"
                ) from None
            raise

    def engine_advance(self, duration_ms: int) -> dict:
        """Let time pass on a served engine (engine/router.py); a broker has no such endpoint."""
        try:
            return self.call("POST", f"{ENGINE_API}/advance", body={"durationMs": duration_ms})
        except ConnectionFailed as exc:
            if exc.status in (404, 405):
                raise UsageError(
                    f"{self.target.describe()} is not an engine served by `pulsar-txn engine serve` (it has no "
                    f"{ENGINE_API}/advance): only the embedded engine's time can be moved"
                ) from None
            raise

    # --- plumbing ---------------------------------------------------------------------------

    def call(self, method: str, path: str, params: dict | None = None, body=None, *, text: bool = False):
        status, headers, raw = self.transport.request(method, path, params, body)
        if status >= 300:
            where = self.target.describe()
            if path.startswith(("http://", "https://")):  # a call to one given broker
                parts = urlsplit(path)
                path, where = parts.path, f"{where} (broker {parts.scheme}://{parts.netloc})"
            raise http_failure(status, method, path, where, raw)
        if text:
            return raw.decode("utf-8", "replace") if isinstance(raw, bytes) else str(raw)
        if not raw:
            if method == "GET":  # every admin GET answers a JSON document; nothing is not "none found"
                raise ConnectionFailed(
                    f"GET {path} on {self.target.describe()} answered HTTP {status} with an empty body; "
                    "check that the URL is Pulsar's admin web service and any proxy in between"
                )
            return None
        try:
            return orjson.loads(raw)
        except orjson.JSONDecodeError:
            raise ConnectionFailed(
                f"{method} {path} on {self.target.describe()} did not answer JSON; check that the URL is Pulsar's admin web service"
            ) from None

    def get(self, path: str, **params):
        return self.call("GET", path, params or None)

    def invoke(self, call: AdminCall, **args):
        """One declared call (calls.py): its path, query and body from args, Pulsar's JSON back."""
        path, params, body = call.request(args)
        return self.call(call.method, path, params, body)

    # --- transactions (protocol.TXN): the declared calls (calls.py) the library itself makes -----

    def coordinator_stats(self, coordinator_id: int | None = None):
        return self.invoke(calls.COORDINATOR_STATS, coordinator_id=coordinator_id)

    def coordinator_stats_each(self) -> tuple[dict, dict[str, str]]:
        """Every coordinator's stats, and why some are missing.

        A real broker answers 500 to the all-coordinators call while any coordinator is not loaded
        (docs/real-broker-findings.md), so then each coordinator is asked on its own.
        Returns ({id: stats}, {id: error sentence}) with ids as strings, as Pulsar keys them.
        """
        try:
            return self.coordinator_stats() or {}, {}
        except ConnectionFailed as exc:
            if exc.status != 500:
                raise
        stats, errors = {}, {}
        for tc_id in range(self.tc_partitions()):
            try:
                stats[str(tc_id)] = self.coordinator_stats(tc_id)
            except ConnectionFailed as exc:
                if exc.status is None:
                    raise
                errors[str(tc_id)] = str(exc)
        return stats, errors

    def coordinator_internal_stats(self, coordinator_id: int, metadata: bool = False):
        call = calls.COORDINATOR_INTERNAL_STATS
        return self.invoke(call, coordinator_id=coordinator_id, metadata=metadata)

    def pending_ack_stats(self, topic: str, subscription: str, low_water_marks: bool = False):
        call = calls.PENDING_ACK_STATS
        return self.invoke(call, topic=topic, subscription=subscription, low_water_mark=low_water_marks)

    def pending_ack_internal_stats(self, topic: str, subscription: str, metadata: bool = False):
        call = calls.PENDING_ACK_INTERNAL_STATS
        return self.invoke(call, topic=topic, subscription=subscription, metadata=metadata)

    def transaction_metadata(self, most: int, least: int):
        return self.invoke(calls.TRANSACTION_METADATA, most=most, least=least)

    def slow_transactions(self, timeout_ms: int, coordinator_id: int | None = None):
        call = calls.SLOW_TRANSACTIONS
        return self.invoke(call, time=int(timeout_ms), coordinator_id=coordinator_id)

    def transaction_buffer_stats(self, topic: str, low_water_marks: bool = False, segment_stats: bool = False):
        call = calls.TRANSACTION_BUFFER_STATS
        return self.invoke(call, topic=topic, low_water_mark=low_water_marks, segment_stats=segment_stats)

    def transaction_buffer_internal_stats(self, topic: str, metadata: bool = False):
        return self.invoke(calls.BUFFER_SNAPSHOT_INTERNAL_STATS, topic=topic, metadata=metadata)

    def abort_transaction(self, most: int, least: int):
        return self.invoke(calls.ABORT_TRANSACTION, most=most, least=least)

    def scale_coordinators(self, replicas: int):
        """Grow the number of transaction coordinators (a broker refuses to shrink it: 406)."""
        return self.invoke(calls.SCALE_TRANSACTION_COORDINATORS, replicas=replicas)

    # --- coordinators, lookup, topics ---------------------------------------------------------

    def tc_partitions(self) -> int:
        meta = self.get(TC_ASSIGN_PARTITIONS, checkAllowAutoCreation=False)
        return int((meta or {}).get("partitions", 0))

    def lookup(self, topic: str):
        name = TopicName(topic)
        return self.get(f"{LOOKUP}/{name.rest}")

    def tenants(self) -> list[str]:
        return self.get(TENANTS)

    def namespaces(self, tenant: str) -> list[str]:
        return self.get(f"{NAMESPACES}/{_seg(tenant)}")

    def namespace_topics(self, namespace: str, include_system: bool = True) -> list[str]:
        tenant, _, ns = namespace.partition("/")
        return self.get(f"{NAMESPACES}/{_seg(tenant)}/{_seg(ns)}/topics", includeSystemTopic=include_system)

    def topic_subscriptions(self, topic: str) -> list[str]:
        return self.get(topic_path(TopicName(topic).rest, SUBSCRIPTIONS))

    def topic_partitions(self, topic: str) -> list[str]:
        """The topic's partitions, or the topic itself when it is not partitioned; a topic whose partitioned
        metadata cannot be read (a broker's error, or a backend without it) counts as not partitioned."""
        name = TopicName(topic)
        try:
            meta = self.get(topic_path(name.rest, PARTITIONS)) or {}
        except ConnectionFailed:
            meta = {}
        return expand_partitions(name.full, int(meta.get("partitions") or 0))

    def topic_internal_stats(self, topic: str):
        """The topic's managed ledger: its ledgers, the last written position, its cursors."""
        return self.get(topic_path(TopicName(topic).rest, INTERNAL_STATS))

    def topic_internal_info(self, topic: str):
        """The topic's managed-ledger metadata (its ledgers), read without loading the topic: a real broker
        refuses to load a leaked pending-ack log for internalStats."""
        return self.get(topic_path(TopicName(topic).rest, INTERNAL_INFO))

    def partition_stats(self, partition: str, low_water_marks: bool = False) -> tuple[dict, dict]:
        """(internal stats, transaction buffer stats) of one partition, the last written position read first:
        a plain message written in between cannot then look like readers held behind maxReadPosition. Either
        failing raises; the buffer's failure when both do (the buffer is what the caller asks about)."""
        try:
            internal, internal_error = self.topic_internal_stats(partition), None
        except PulsarTxnError as exc:
            internal, internal_error = None, exc
        stats = self.transaction_buffer_stats(partition, low_water_marks)
        if internal_error is not None:
            raise internal_error
        return internal or {}, stats or {}

    def delete_topic(self, topic: str, force: bool = False):
        return self.call("DELETE", topic_path(TopicName(topic).rest), {"force": "true"} if force else None)

    def unload_topic(self, topic: str):
        return self.call("PUT", topic_path(TopicName(topic).rest, UNLOAD))

    # --- brokers, clusters, config, metrics ----------------------------------------------------

    def dynamic_config_names(self) -> list[str]:
        return self.get(BROKER_CONFIG)

    def dynamic_config_values(self) -> dict:
        return self.get(f"{BROKER_CONFIG}/values")

    def update_dynamic_config(self, name: str, value) -> None:
        text = ("true" if value else "false") if isinstance(value, bool) else str(value)
        self.call("POST", f"{BROKER_CONFIG}/{_seg(name)}/{_seg(text)}")

    def delete_dynamic_config(self, name: str) -> None:
        self.call("DELETE", f"{BROKER_CONFIG}/{_seg(name)}")

    def runtime_config(self, broker_url: str | None = None) -> dict:
        return self.get(_at(broker_url, BROKER_RUNTIME))

    def clusters(self) -> list[str]:
        return self.get(CLUSTERS)

    def cluster_data(self, cluster: str) -> dict:
        return self.get(f"{CLUSTERS}/{_seg(cluster)}")

    def brokers(self, cluster: str) -> list[str]:
        return self.get(f"{BROKERS}/{_seg(cluster)}")

    def version(self, broker_url: str | None = None) -> str:
        return self.call("GET", _at(broker_url, BROKER_VERSION), text=True).strip().strip('"')

    def metrics_text(self, broker_url: str | None = None) -> str:
        return self.call("GET", _at(broker_url, f"{METRICS}/"), text=True)

    # --- compositions used by several commands ------------------------------------------------

    def coordinators(self) -> list[dict]:
        """Pulsar's TransactionCoordinatorInfo list ({id, brokerServiceUrl}) plus the owner's web URL.

        GET .../coordinators (Pulsar 3.0 and later, what `pulsar-admin transactions coordinators-list`
        calls) and one lookup per owning broker for its web URL; a broker without it (2.10, 2.11: 404)
        is asked coordinator by coordinator through the TC-assign partitions' lookups."""
        try:
            listed = self.invoke(calls.COORDINATORS_LIST)
        except ConnectionFailed as exc:
            if exc.status not in (404, 405):
                raise
            return [self._coordinator_by_lookup(tc_id) for tc_id in range(self.tc_partitions())]
        web: dict = {}
        result = []
        for info in sorted(listed or [], key=lambda c: c.get("id", 0)):
            owner = info.get("brokerServiceUrl")
            if owner is None:  # Pulsar fills it from the lookup's plain brokerUrl: a TLS-only owner has none
                result.append(self._coordinator_by_lookup(info["id"]))
                continue
            if owner not in web:
                web[owner] = self._coordinator_by_lookup(info["id"])["webServiceUrl"]
            result.append({"id": info["id"], "brokerServiceUrl": owner, "webServiceUrl": web[owner]})
        return result

    def _coordinator_by_lookup(self, tc_id: int) -> dict:
        data = self.lookup(tc_assign_partition(tc_id)) or {}
        web = data.get("httpUrlTls") if str(self.target.url or "").startswith("https") else None
        return {
            "id": tc_id,
            "brokerServiceUrl": data.get("brokerUrl") or data.get("brokerUrlTls"),
            "webServiceUrl": web or data.get("httpUrl") or data.get("httpUrlTls"),
        }

    def broker_web_urls(self) -> list[str]:
        """Every active broker's web service URL in the target's own cluster, with the admin URL's scheme.

        Only the own cluster: with geo-replication the store lists the other clusters too, and their
        brokers hold other coordinators and other settings."""
        scheme = "https" if str(self.target.url or "").startswith("https") else "http"
        urls = [a if "://" in a else f"{scheme}://{a}" for a in self.brokers(self.own_cluster())]
        return sorted(set(urls))


def broker_at(url: str, brokers: int) -> str | None:
    """Where to ask one broker of BROKERS: its own URL, or None (through the admin URL) when it is the only
    one, since a served engine or a proxy may advertise an address this machine cannot reach."""
    return None if brokers == 1 else url


def _at(broker_url: str | None, path: str) -> str:
    return broker_url.rstrip("/") + path if broker_url else path
