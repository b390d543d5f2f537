"""Pulsar's admin REST contract, the one place it is written: paths, configuration keys, system topics
and cursors, PIP-160's store key, the internal-stats timestamp text, and the engine's own endpoints.

Both transports build on it (admin/client.py asks these paths; engine/router.py answers them), and
the downgrade package and the CLI read the same names. A leaf: it imports nothing of the project, so
every layer can use it. Names parsed from text (topics, positions, transaction ids) live in names.py.
"""

from __future__ import annotations

import datetime as _dt

# ---------------------------------------------------------------- admin REST paths
# pulsar-broker's org.apache.pulsar.broker.admin.v3.Transactions (v3) and the v2 resources
# (Brokers, Clusters, Tenants, Namespaces, PersistentTopics), plus TopicLookup and the metrics servlet.

TXN = "/admin/v3/transactions"
ADMIN_V2 = "/admin/v2"
BROKERS = f"{ADMIN_V2}/brokers"
BROKER_CONFIG = f"{BROKERS}/configuration"
CLUSTERS = f"{ADMIN_V2}/clusters"
TENANTS = f"{ADMIN_V2}/tenants"
NAMESPACES = f"{ADMIN_V2}/namespaces"
PERSISTENT = f"{ADMIN_V2}/persistent"
LOOKUP = "/lookup/v2/topic/persistent"
METRICS = "/metrics"
BROKER_RUNTIME = f"{BROKER_CONFIG}/runtime"  # every setting of the broker asked, as strings
BROKER_VERSION = f"{BROKERS}/version"

# A persistent topic's resources under PERSISTENT/tenant/ns/topic (topic_path).
PARTITIONS = "partitions"  # partitioned metadata: {"partitions": N}
INTERNAL_STATS = "internalStats"
INTERNAL_INFO = "internal-info"  # the managed ledger's metadata, read without loading the topic
SUBSCRIPTIONS = "subscriptions"
UNLOAD = "unload"


def topic_path(rest: str, resource: str | None = None) -> str:
    """A persistent topic's admin path, REST being tenant/ns/topic (names.TopicName.rest, or a route's
    `{tenant}/{ns}/{topic}` pattern), and RESOURCE one of the names above, or None for the topic itself."""
    return f"{PERSISTENT}/{rest}" + (f"/{resource}" if resource else "")


# ---------------------------------------------------------------- broker configuration keys (broker.conf)

TC_BATCH_KEY = "transactionLogBatchedWriteEnabled"  # PIP-160, dynamic
PENDING_ACK_BATCH_KEY = "transactionPendingAckBatchedWriteEnabled"  # PIP-160, dynamic
BATCH_KEYS = (TC_BATCH_KEY, PENDING_ACK_BATCH_KEY)
BATCH_INDEX_KEY = "acknowledgmentAtBatchIndexLevelEnabled"
COORDINATOR_ENABLED_KEY = "transactionCoordinatorEnabled"
REPLICATOR_PREFIX_KEY = "replicatorPrefix"  # names the geo-replicators' cursors and producers

# ---------------------------------------------------------------- system topics, managed ledgers, cursors
# TopicName.TRANSACTION_COORDINATOR_ASSIGN, MLTransactionLogImpl (the TC log and its cursor) and
# MLPendingAckStore (the pending-ack topic suffix and its cursor), in pulsar-common and pulsar-broker.

SYSTEM_NAMESPACE = "pulsar/system"
TC_ASSIGN_LOCAL = "transaction_coordinator_assign"
# pulsar-txn's bound on transaction coordinators (engine init, scale-transactionCoordinators): Pulsar only checks that
# the number grows, but it never shrinks again, and each is a partition with its own log that every check reads.
MAX_COORDINATORS = 1024
TC_ASSIGN = f"persistent://{SYSTEM_NAMESPACE}/{TC_ASSIGN_LOCAL}"
TC_ASSIGN_PARTITIONS = f"{PERSISTENT}/{SYSTEM_NAMESPACE}/{TC_ASSIGN_LOCAL}/partitions"
TC_LOG_MARKER = "__transaction_log_"  # the local name of coordinator N's log: __transaction_log_N
TC_LOG_PREFIX = f"{SYSTEM_NAMESPACE}/persistent/{TC_LOG_MARKER}"  # its managed-ledger name, without N
PENDING_ACK_SUFFIX = "__transaction_pending_ack"  # <topic>-<subscription>__transaction_pending_ack
TC_CURSOR = "transaction.subscription"
PENDING_ACK_CURSOR = "__pending_ack_state"
# A geo-replicated topic keeps one durable cursor per remote cluster, `<replicatorPrefix>.<cluster>`
# (PersistentReplicator); it reads only up to the transaction buffer's maxReadPosition.
DEFAULT_REPLICATOR_PREFIX = "pulsar.repl"


def replicator_cursor(cluster: str, prefix: str = DEFAULT_REPLICATOR_PREFIX) -> str:
    """The cursor through which a topic replicates to `cluster`."""
    return f"{prefix}.{cluster}"


def tc_assign_partition(coordinator_id: int) -> str:
    """The partition of the coordinator-assign topic that coordinator N is loaded through."""
    return f"{TC_ASSIGN}-partition-{coordinator_id}"


# ---------------------------------------------------------------- PIP-160's store key


def tc_store_key(coordinator_id) -> str:
    """PIP-160's key of a coordinator's log in `coodinatorArray`: its id."""
    return str(coordinator_id)


def pending_ack_store_key(topic: str, subscription: str) -> str:
    """PIP-160's key of a pending-ack store in `subscriptionArray`: `<topic>-<subscription>`, as its topic is named."""
    return f"{topic}-{subscription}"


# ---------------------------------------------------------------- timestamp text


def timestamp_text(ms: int) -> str:
    """Pulsar's internal-stats timestamp text (lastLedgerCreatedTimestamp), e.g. 2026-01-01T00:00:00.000Z."""
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S.%f")[:-3] + "Z"


# ---------------------------------------------------------------- the engine's own endpoints
# No broker has them (a broker answers 404, which is how a client tells the two apart):
# GET {ENGINE_API}/clock, the engine's virtual time; POST {ENGINE_API}/simulate, a seeded workload run
# by a served engine, its body the REMOTE_OPTIONS of SimOptions in camelCase; POST {ENGINE_API}/advance,
# time passing on a served engine (`engine advance`), its body {"durationMs": N}.

ENGINE_API = "/pulsar-txn/v1/engine"
ENGINE_ID_FIELD = "pulsarTxnEngineId"  # the engine's extra ClusterData field (no Pulsar broker has it)
# SimOptions' fields a client may send (--ack-log writes a file where the engine runs: in process only).
REMOTE_OPTIONS = (
    "transactions",
    "concurrency",
    "topics",
    "partitions",
    "subscriptions",
    "abort_ratio",
    "timeout_ratio",
    "seed",
    "txn_timeout_ms",
)


def camel(name: str) -> str:
    """snake_case -> camelCase (max_records -> maxRecords), the case of Pulsar's JSON keys."""
    head, *rest = name.split("_")
    return head + "".join(word.capitalize() for word in rest)
