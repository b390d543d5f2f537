"""Pulsar's admin REST paths and JSON shapes, answered by the engine.

`handle(engine, method, path, query, body) -> (status, json_or_text)` is a plain router: the
admin layer wraps it in an in-process transport and in the HTTP server of `engine serve`.
Errors use Pulsar's shape {"reason": "..."} and its status codes. Every route, the transaction
buffer's included, is registered with `route(...)`.
"""

from __future__ import annotations

import re
from dataclasses import fields
from urllib.parse import unquote

from pulsar_txn_cli import __version__
from pulsar_txn_cli.engine.buffer import stats as buffer_stats
from pulsar_txn_cli.engine.buffer.service import TopicNotFound
from pulsar_txn_cli.engine.broker_config import KEYS, parse_value, to_text
from pulsar_txn_cli.engine.coordinator import (
    CoordinatorNotFound,
    TransactionNotFound,
    transaction_metadata,
)
from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.errors import EngineError, UsageError
from pulsar_txn_cli.names import TxnID, managed_ledger_name, parse_bool, partitioned_topic
from pulsar_txn_cli.protocol import (
    BROKER_CONFIG,
    BROKERS,
    CLUSTERS,
    COORDINATOR_ENABLED_KEY,
    ENGINE_API,
    ENGINE_ID_FIELD,
    LOOKUP,
    METRICS,
    NAMESPACES,
    INTERNAL_STATS,
    PARTITIONS,
    PENDING_ACK_SUFFIX,
    SUBSCRIPTIONS,
    REMOTE_OPTIONS,
    SYSTEM_NAMESPACE,
    TC_ASSIGN_LOCAL,
    TC_ASSIGN_PARTITIONS,
    TC_LOG_MARKER,
    TENANTS,
    TXN,
    UNLOAD,
    camel,
    topic_path,
)

VERSION = "4.0.0"  # the Pulsar behaviour the engine models
NOT_ENABLED = f"This Broker is not configured with {COORDINATOR_ENABLED_KEY}=true."
_TOPIC = "{tenant}/{ns}/{topic}"  # a topic route's segments, matched by route()
ASSIGN_PARTITION = re.compile(rf"^{TC_ASSIGN_LOCAL}-partition-(\d+)$")

_ROUTES: list[tuple[str, re.Pattern, object, bool]] = []


class HttpError(Exception):
    def __init__(self, status: int, reason: str):
        super().__init__(reason)
        self.status = status
        self.reason = reason


def route(method: str, pattern: str, *, txn: bool = False):
    """Register fn(engine, query, body, *groups) for METHOD and a path pattern ({x} = one segment)."""
    regex = re.compile("^" + re.sub(r"\{(\w+)\}", r"(?P<\1>[^/]+)", pattern) + "/?$")

    def decorate(fn):
        _ROUTES.append((method, regex, fn, txn))
        return fn

    return decorate


def handle(engine, method: str, path: str, query: dict[str, str] | None = None, body: bytes | None = None):
    """Answer one request: (status, JSON value or text). Never raises for a request error."""
    query = query or {}
    path = path.split("?", 1)[0]
    method = method.upper()
    matched_path = False
    for m, regex, fn, txn in _ROUTES:
        match = regex.match(path)
        if not match:
            continue
        matched_path = True
        if m != method:
            continue
        args = {k: unquote(v) for k, v in match.groupdict().items()}
        try:
            if txn and not engine.enabled:
                raise HttpError(503, NOT_ENABLED)
            status, value = fn(engine, query, body, **args)
            return status, _without_nulls(value)  # Pulsar's Jackson mapper omits null fields
        except HttpError as exc:
            return exc.status, {"reason": exc.reason}
        except CoordinatorNotFound as exc:
            return 404, {"reason": f"Transaction coordinator not found! coordinator id : {exc.tc_id}"}
        except TransactionNotFound as exc:
            return 404, {"reason": str(exc)}
        except TopicNotFound:
            return 404, {"reason": "Topic not found"}
        except EngineError as exc:
            return 500, {"reason": str(exc)}
    if matched_path:
        return 405, None
    return 404, {
        "servlet": "org.glassfish.jersey.servlet.ServletContainer",
        "message": "Not Found",
        "url": path,
        "status": "404",
    }


_NESTED = (dict, list)


def _without_nulls(value):
    # Scalars are kept without a call: this runs on every answer (a stats map has hundreds of fields).
    if isinstance(value, dict):
        return {k: _without_nulls(v) if isinstance(v, _NESTED) else v for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [_without_nulls(v) if isinstance(v, _NESTED) else v for v in value]
    return value


def _bool(query, name: str) -> bool:
    return parse_bool(query.get(name)) is True


def _int(value: str, what: str) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        raise HttpError(400, f"{what} must be an integer, not {value!r}") from None


def _topic(tenant: str, ns: str, topic: str) -> str:
    return f"persistent://{tenant}/{ns}/{topic}"


def _pending_ack(engine, tenant, ns, topic, sub, *, missing_sub_status: int = 404):
    full = _topic(tenant, ns, topic)
    if (full, sub) not in set(engine.subscriptions(full)):
        if not _topic_exists(engine, full):
            raise HttpError(404, f"Topic {full} not found")
        if missing_sub_status == 500:
            # A real broker answers pendingAckStats for a missing subscription with a NullPointerException.
            raise HttpError(
                500,
                "\n --- An unexpected error occurred in the server ---\n\nMessage: Cannot invoke "
                '"org.apache.pulsar.broker.service.persistent.PersistentSubscription.'
                'getTransactionPendingAckStats(boolean)" because the return value of '
                '"java.util.Map.get(Object)" is null\n',
            )
        raise HttpError(404, f"{full} not found subscription : {sub}")
    store = engine.pending_ack_if_exists(full, sub)
    if store is None:
        raise HttpError(503, "Pending ack handle not ready")
    return store


# ---------------------------------------------------------------- transactions (protocol.TXN)


@route("GET", TXN + "/coordinators", txn=True)
def list_coordinators(engine, query, body):
    """TransactionCoordinatorInfo of each coordinator: its id and its owner's broker service URL."""
    owner = _lookup_data(engine)["brokerUrl"]
    return 200, [{"id": tc_id, "brokerServiceUrl": owner} for tc_id in range(engine.coordinator_count)]


@route("GET", TXN + "/coordinatorStats", txn=True)
def coordinator_stats(engine, query, body):
    if "coordinatorId" in query and query["coordinatorId"] != "":
        tc_id = _int(query["coordinatorId"], "coordinatorId")
        return 200, engine.tc(tc_id).stats()
    return 200, {str(tc.tc_id): tc.stats() for tc in engine.all_tcs()}


@route("GET", TXN + "/coordinatorInternalStats/{tc_id}", txn=True)
def coordinator_internal_stats(engine, query, body, tc_id):
    return 200, engine.tc(_int(tc_id, "coordinatorId")).internal_stats(_bool(query, "metadata"))


@route("GET", TXN + "/pendingAckStats/{tenant}/{ns}/{topic}/{sub}", txn=True)
def pending_ack_stats(engine, query, body, tenant, ns, topic, sub):
    store = _pending_ack(engine, tenant, ns, topic, sub, missing_sub_status=500)
    return 200, store.stats(_bool(query, "lowWaterMarks"))


@route("GET", TXN + "/pendingAckInternalStats/{tenant}/{ns}/{topic}/{sub}", txn=True)
def pending_ack_internal_stats(engine, query, body, tenant, ns, topic, sub):
    return 200, _pending_ack(engine, tenant, ns, topic, sub).internal_stats(_bool(query, "metadata"))


@route("GET", TXN + "/transactionMetadata/{most}/{least}", txn=True)
def txn_metadata(engine, query, body, most, least):
    tc = engine.tc(_int(most, "mostSigBits"))
    meta = tc.txns.get(_int(least, "leastSigBits"))
    if meta is None:
        raise HttpError(404, f"The transaction with this txdID `({most},{least})`not found ")
    return 200, transaction_metadata(engine, meta)


@route("GET", TXN + "/slowTransactions/{timeout}", txn=True)
def slow_transactions(engine, query, body, timeout):
    timeout_ms = _int(timeout, "timeout")
    tcs = [engine.tc(_int(query["coordinatorId"], "coordinatorId"))] if query.get("coordinatorId") else engine.all_tcs()
    now = engine.clock.now_ms
    out = {}
    for tc in tcs:
        for meta in tc.txns.values():
            if meta.start + timeout_ms < now:
                out[meta.txn_id] = transaction_metadata(engine, meta)
    return 200, out


@route("GET", TXN + "/transactionInPendingAckStats/{tenant}/{ns}/{topic}/{sub}/{most}/{least}", txn=True)
def txn_in_pending_ack(engine, query, body, tenant, ns, topic, sub, most, least):
    store = _pending_ack(engine, tenant, ns, topic, sub)
    return 200, {
        "cumulativeAckPosition": store.cumulative_ack_position(_int(most, "mostSigBits"), _int(least, "leastSigBits"))
    }


@route("GET", TXN + "/positionStatsInPendingAck/{tenant}/{ns}/{topic}/{sub}/{ledger}/{entry}", txn=True)
def position_stats(engine, query, body, tenant, ns, topic, sub, ledger, entry):
    store = _pending_ack(engine, tenant, ns, topic, sub)
    # the key is "state" on a real 4.0.7 broker (docs/real-broker-findings.md), not "State"
    return 200, {"state": store.position_state(_int(ledger, "ledgerId"), _int(entry, "entryId"))}


def _buffer(engine, tenant, ns, topic):
    """The topic's transaction buffer; a topic the engine knows but never wrote to gets an empty
    one (a broker loads such a topic), others raise TopicNotFound, a partitioned topic's name 404."""
    full = _topic(tenant, ns, topic)
    if engine.partition_count(full):
        # a partitioned topic's own name has no buffer (only its partitions do): a real 4.0.7 broker
        # answers 404 to Pulsar's Java client (tests/integration/test_java_admin.py)
        raise HttpError(404, f"Topic not found {full}")
    known = _topic_exists(engine, full)
    return engine.buffers.buffer(full, create=known and engine.buffers.writable)


@route("GET", TXN + "/transactionBufferStats/{tenant}/{ns}/{topic}", txn=True)
def transaction_buffer_stats(engine, query, body, tenant, ns, topic):
    buffer = _buffer(engine, tenant, ns, topic)
    return 200, buffer_stats.transaction_buffer_stats(
        buffer, _bool(query, "lowWaterMarks"), _bool(query, "segmentStats")
    )


@route("GET", TXN + "/transactionBufferInternalStats/{tenant}/{ns}/{topic}", txn=True)
def transaction_buffer_internal_stats(engine, query, body, tenant, ns, topic):
    return 200, buffer_stats.transaction_buffer_internal_stats(
        _buffer(engine, tenant, ns, topic), _bool(query, "metadata")
    )


@route("GET", TXN + "/transactionInBufferStats/{tenant}/{ns}/{topic}/{most}/{least}", txn=True)
def transaction_in_buffer_stats(engine, query, body, tenant, ns, topic, most, least):
    buffer = _buffer(engine, tenant, ns, topic)
    try:
        txn = TxnID(int(most), int(least))
    except ValueError:
        raise HttpError(400, f"{most}/{least} is not a transaction id") from None
    return 200, buffer.in_buffer_stats(txn)


@route("POST", TXN + "/transactionCoordinator/replicas", txn=True)
def scale_coordinators(engine, query, body):
    if not isinstance(body, int) or isinstance(body, bool):
        raise HttpError(400, "The number of replicas must be an integer")
    if body <= engine.coordinator_count:
        raise HttpError(
            406, f"Number of transaction coordinators must be more than the current number ({engine.coordinator_count})"
        )
    engine.scale_coordinators(body)
    return 204, None


@route("POST", TXN + "/abortTransaction/{most}/{least}", txn=True)
def abort_transaction(engine, query, body, most, least):
    engine.abort_transaction(_int(most, "mostSigBits"), _int(least, "leastSigBits"))
    return 204, None


# ---------------------------------------------------------------- topics, tenants, namespaces


@route("GET", TC_ASSIGN_PARTITIONS)
def tc_assign_partitions(engine, query, body):
    return 200, {"partitions": engine.coordinator_count, "deleted": False}


@route("GET", LOOKUP + f"/{SYSTEM_NAMESPACE}/{{name}}")
def lookup(engine, query, body, name):
    match = ASSIGN_PARTITION.match(name)
    if match and int(match.group(1)) >= engine.coordinator_count:
        raise HttpError(404, f"Topic persistent://pulsar/system/{name} not found")
    return 200, _lookup_data(engine)


@route("GET", LOOKUP + "/{tenant}/{ns}/{topic}")
def lookup_any(engine, query, body, tenant, ns, topic):
    return 200, _lookup_data(engine)


def _lookup_data(engine) -> dict:
    cfg = engine.config.values()
    host = cfg["advertisedAddress"]
    return {
        "brokerUrl": f"pulsar://{host}:{cfg['brokerServicePort']}",
        "httpUrl": f"http://{host}:{cfg['webServicePort']}",
        "nativeUrl": f"pulsar://{host}:{cfg['brokerServicePort']}",
        "brokerUrlSsl": "",
    }


def _is_system(topic: str) -> bool:
    local = topic.rsplit("/", 1)[-1]
    return (
        local.startswith(TC_LOG_MARKER)
        or local.endswith(PENDING_ACK_SUFFIX)
        or local.startswith(TC_ASSIGN_LOCAL)
        or local.startswith("__")
    )


def _topic_exists(engine, full: str) -> bool:
    known = engine.topics()
    return full in known or partitioned_topic(full) in known


@route("GET", TENANTS)
def tenants(engine, query, body):
    found = {"public", "pulsar"} | {t.split("://", 1)[1].split("/")[0] for t in engine.topics()}
    return 200, sorted(found)


@route("GET", NAMESPACES + "/{tenant}")
def namespaces(engine, query, body, tenant):
    known = {"public": {"public/default"}, "pulsar": {"pulsar/system"}}
    found = set(known.get(tenant, set()))
    for t in engine.topics():
        tn, ns = t.split("://", 1)[1].split("/")[:2]
        if tn == tenant:
            found.add(f"{tn}/{ns}")
    if not found:
        raise HttpError(404, "Tenant does not exist")
    return 200, sorted(found)


@route("GET", NAMESPACES + "/{tenant}/{ns}/topics")
def namespace_topics(engine, query, body, tenant, ns):
    mode = query.get("mode", "PERSISTENT").upper()
    if mode == "NON_PERSISTENT":
        return 200, []
    include_system = _bool(query, "includeSystemTopic")
    prefix = f"persistent://{tenant}/{ns}/"
    topics = [t for t in engine.topics() if t.startswith(prefix)]
    if not topics and f"{tenant}/{ns}" not in ("public/default", "pulsar/system"):
        raise HttpError(404, "Namespace does not exist")  # as a broker answers for a namespace never created
    return 200, [t for t in topics if include_system or not _is_system(t)]


@route("GET", topic_path(_TOPIC, PARTITIONS))
def partitioned_metadata(engine, query, body, tenant, ns, topic):
    return 200, {"partitions": engine.partition_count(_topic(tenant, ns, topic)), "deleted": False}


@route("GET", topic_path(_TOPIC, INTERNAL_STATS))
def topic_internal_stats(engine, query, body, tenant, ns, topic):
    """PersistentTopicInternalStats: the topic's managed-ledger stats plus schema and compaction."""
    ml = ManagedLedger.get(engine.store, engine.clock, managed_ledger_name(_topic(tenant, ns, topic)))
    if not ml.exists:
        raise HttpError(404, "Topic not found")
    stats = ml.internal_stats(_bool(query, "metadata"))
    stats["schemaLedgers"] = []
    stats["compactedLedger"] = dict(buffer_stats.NO_COMPACTED_LEDGER)
    return 200, stats


@route("DELETE", topic_path(_TOPIC))
def delete_topic(engine, query, body, tenant, ns, topic):
    """Only a pending-ack log can be deleted on the engine (what `clean-pending-ack` does)."""
    full = _topic(tenant, ns, topic)
    if not full.endswith(PENDING_ACK_SUFFIX):
        raise HttpError(412, f"the engine deletes only pending-ack topics, not {full}")
    ml = ManagedLedger.get(engine.store, engine.clock, managed_ledger_name(full))
    if not ml.exists:
        raise HttpError(404, "Topic not found")
    ml.delete()
    return 204, None


@route("GET", topic_path(_TOPIC, SUBSCRIPTIONS))
def subscriptions(engine, query, body, tenant, ns, topic):
    full = _topic(tenant, ns, topic)
    subs = sorted({s for name in engine.topic_and_partitions(full) for _, s in engine.subscriptions(name)})
    if not subs and not _topic_exists(engine, full):
        raise HttpError(404, "Topic not found")
    return 200, subs


@route("PUT", topic_path(_TOPIC, UNLOAD))
def unload(engine, query, body, tenant, ns, topic):
    """Reopen the topic's stores: a TC for a transaction_coordinator_assign partition, else the
    pending-ack stores of the topic's subscriptions."""
    match = ASSIGN_PARTITION.match(topic)
    if tenant == "pulsar" and ns == "system" and match:
        engine.reload(coordinator=int(match.group(1)))
        return 204, None
    full = _topic(tenant, ns, topic)
    if not _topic_exists(engine, full) and not engine.subscriptions(full):
        raise HttpError(404, "Topic not found")
    engine.reload(topic=full)
    return 204, None


# ---------------------------------------------------------------- brokers and clusters


@route("GET", BROKER_CONFIG)
def dynamic_names(engine, query, body):
    return 200, sorted(name for name, key in KEYS.items() if key.dynamic)


@route("GET", BROKER_CONFIG + "/values")
def dynamic_values(engine, query, body):
    return 200, engine.config.overrides()


@route("GET", BROKER_CONFIG + "/runtime")
def runtime_config(engine, query, body):
    return 200, engine.config.runtime()


@route("POST", BROKER_CONFIG + "/{name}/{value}")
def update_dynamic(engine, query, body, name, value):
    key = KEYS.get(name)
    if key is None or not key.dynamic:
        raise HttpError(412, "Can't update non-dynamic configuration")  # unknown keys too, as a broker does
    if key.type is bool:
        typed = parse_bool(value) is True  # Boolean.parseBoolean: anything else is false
    else:
        try:
            typed = parse_value(name, value)
        except ValueError:
            raise HttpError(412, "Invalid dynamic-config value") from None
    engine.config.store_override(name, to_text(typed))
    return 200, None


@route("DELETE", BROKER_CONFIG + "/{name}")
def delete_dynamic(engine, query, body, name):
    key = KEYS.get(name)
    if key is None or not key.dynamic:
        raise HttpError(412, "Can't delete non-dynamic configuration")
    engine.config.delete_override(name)
    return 200, None


@route("GET", CLUSTERS)
def clusters(engine, query, body):
    return 200, [engine.cluster]


@route("GET", CLUSTERS + "/{cluster}")
def cluster_data(engine, query, body, cluster):
    if cluster != engine.cluster:
        raise HttpError(404, "Cluster does not exist")
    port = engine.config.values()["brokerServicePort"]
    return 200, {
        "serviceUrl": f"http://{engine.web_service}",
        "brokerServiceUrl": f"pulsar://{engine.broker}:{port}",
        "brokerClientTlsEnabled": False,
        "tlsAllowInsecureConnection": False,
        "brokerClientTlsEnabledWithKeyStore": False,
        "brokerClientTlsTrustStoreType": "JKS",
        "brokerClientTlsKeyStoreType": "JKS",
        "brokerClientSslFactoryPlugin": "org.apache.pulsar.common.util.DefaultPulsarSslFactory",
        ENGINE_ID_FIELD: engine.engine_id,
    }  # the one field a broker does not have


@route("GET", BROKERS + "/version")
def version(engine, query, body):
    return 200, VERSION


@route("GET", BROKERS + "/health")
def health(engine, query, body):
    return 200, "ok"


@route("GET", BROKERS + "/ready")
def ready(engine, query, body):
    return 200, "ok"


@route("GET", BROKERS + "/leaderBroker")
def leader(engine, query, body):
    return 200, {"serviceUrl": f"http://{engine.web_service}", "brokerId": engine.web_service}


@route("GET", BROKERS + "/{cluster}")
def brokers(engine, query, body, cluster):
    if cluster != engine.cluster:
        raise HttpError(404, "Cluster does not exist")
    return 200, [engine.web_service]


@route("GET", METRICS)
def metrics(engine, query, body):
    # Without transactions the broker registers the disabled (no-op) writer metrics: no families.
    return 200, engine.metrics.prometheus() if engine.enabled else ""


@route("GET", METRICS + "/get")
def metrics_get(engine, query, body):
    return metrics(engine, query, body)


ENGINE_VERSION = __version__


# ---------------------------------------------------------------- the engine's own endpoints
# (protocol.py): GET .../clock, the engine's virtual time, so a client of `engine serve` shows times on
# the engine's clock; POST .../simulate, a seeded workload run by the served engine, as a broker takes
# load while it runs (`engine simulate --admin-url`; the body holds SimOptions in camelCase);
# POST .../advance, time passing on the served engine with its background work (`engine advance
# --admin-url`; the body is {"durationMs": N}).


@route("GET", ENGINE_API + "/clock")
def clock(engine, query, body):
    return 200, {"nowMs": engine.clock.now_ms, "clock": "engine"}


@route("POST", ENGINE_API + "/simulate")
def simulate(engine, query, body):
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate as run

    if not isinstance(body, dict):
        raise HttpError(400, "the body must be a JSON object of workload options")
    known = {camel(f.name): f for f in fields(SimOptions) if f.name in REMOTE_OPTIONS}
    unknown = sorted(set(body) - set(known))
    if unknown:
        raise HttpError(400, f"unknown workload option(s): {', '.join(unknown)}; known: {', '.join(sorted(known))}")
    values = {}
    for key, value in body.items():
        kind = float if known[key].type in (float, "float") else int
        if (
            isinstance(value, bool)
            or not isinstance(value, (int, float))
            or (kind is int and not isinstance(value, int))
        ):
            raise HttpError(
                400, f"workload option {key} must be {'a number' if kind is float else 'an integer'}, not {value!r}"
            )
        values[known[key].name] = kind(value)
    options = SimOptions(**values)
    try:
        options.check()
    except UsageError as exc:
        raise HttpError(400, str(exc)) from None
    return 200, run(engine, options)


@route("POST", ENGINE_API + "/advance")
def advance(engine, query, body):
    from pulsar_txn_cli.engine.advance import advance as run

    if not isinstance(body, dict) or set(body) != {"durationMs"}:
        raise HttpError(400, 'the body must be {"durationMs": N}, the time to let pass in milliseconds')
    try:
        return 200, run(engine, body["durationMs"])
    except UsageError as exc:
        raise HttpError(400, str(exc)) from None
