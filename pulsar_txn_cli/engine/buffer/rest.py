"""The buffer's routes of Pulsar's admin REST API, for the engine's router (engine/rest.py).

`handle(engine, method, path, query, body)` answers (status, JSON value) for the paths below,
or None for any other path so the router can go on (the router calls it for paths it has no
route of its own for, through `hooks.rest_handle`):

  GET /admin/v3/transactions/transactionBufferStats/{tenant}/{ns}/{topic}?lowWaterMarks=&segmentStats=
  GET /admin/v3/transactions/transactionBufferInternalStats/{tenant}/{ns}/{topic}?metadata=
  GET /admin/v3/transactions/transactionInBufferStats/{tenant}/{ns}/{topic}/{most}/{least}
  GET /admin/v2/persistent/{tenant}/{ns}/{topic}/internalStats   (PersistentTopicInternalStats)
  GET /admin/v2/persistent/{tenant}/{ns}/{topic}/partitions      (PartitionedTopicMetadata)
"""
from __future__ import annotations

from urllib.parse import unquote

from pulsar_txn_cli.engine.buffer import stats as stats_module
from pulsar_txn_cli.engine.buffer.positions import TxnID
from pulsar_txn_cli.errors import EngineError

PREFIX = "/admin/v3/transactions/"
TOPICS = "/admin/v2/persistent/"
ROUTES = ("transactionBufferStats", "transactionBufferInternalStats", "transactionInBufferStats")
NOT_ENABLED = "This Broker is not configured with transactionCoordinatorEnabled=true."


def _flag(query: dict, name: str) -> bool:
    return str(query.get(name, "false")).lower() == "true"


def _segments(path: str, prefix: str) -> list[str]:
    return [unquote(p) for p in path.split("?", 1)[0][len(prefix):].strip("/").split("/")]


def handle(engine, method: str, path: str, query: dict | None = None, body=None):
    query = query or {}
    if path.startswith(PREFIX):
        parts = _segments(path, PREFIX)
        if parts[0] not in ROUTES:
            return None
        if method.upper() != "GET":
            return 405, {"reason": "HTTP 405 Method Not Allowed"}
        route, args = parts[0], parts[1:]
        if len(args) != (5 if route == "transactionInBufferStats" else 3):
            return 404, {"reason": "HTTP 404 Not Found"}
        if not getattr(engine, "enabled", True):
            return 503, {"reason": NOT_ENABLED}
        return answer(engine, route, args, query, _router_knows(engine))
    if path.startswith(TOPICS):
        parts = _segments(path, TOPICS)
        if len(parts) != 4 or parts[3] not in ("internalStats", "partitions"):
            return None
        if method.upper() != "GET":
            return 405, {"reason": "HTTP 405 Method Not Allowed"}
        topic = "persistent://" + "/".join(parts[:3])
        if parts[3] == "partitions":
            return 200, {"partitions": _partitions(engine, topic), "properties": None}
        return topic_internal_stats(engine, topic, _flag(query, "metadata"))
    return None


def _router_knows(engine):
    """The engine router's own notion of an existing topic (registered, or with a ledger)."""
    def known(topic: str) -> bool:
        try:
            from pulsar_txn_cli.engine import rest as router

            return router._topic_exists(engine, topic)
        except (ImportError, AttributeError):
            return False

    return known


def _partitions(engine, topic: str) -> int:
    row = engine.store.db.execute("SELECT partitions FROM topics WHERE name=?", (topic,)).fetchone()
    return int(row[0]) if row else 0


def topic_internal_stats(engine, topic: str, metadata: bool = False):
    """PersistentTopicInternalStats: the topic's managed-ledger stats plus schema and compaction."""
    from pulsar_txn_cli.engine.buffer.ledgers import managed_ledger_name
    from pulsar_txn_cli.engine.buffer.stats import NO_COMPACTED_LEDGER
    from pulsar_txn_cli.engine.ledger import ManagedLedger

    ml = ManagedLedger(engine.store, engine.clock, managed_ledger_name(topic))
    if not ml.exists:
        return 404, {"reason": "Topic not found"}
    stats = ml.internal_stats(metadata)
    stats["schemaLedgers"] = []
    stats["compactedLedger"] = dict(NO_COMPACTED_LEDGER)
    return 200, stats


def answer(engine, route: str, args: list[str], query: dict, topic_known=None):
    """(status, JSON) for one of ROUTES; args are the decoded path segments after the route name.

    topic_known(topic) -> bool: whether the engine knows the topic though nothing was written to
    it yet (a broker loads such a topic and answers for an empty buffer).
    """
    from pulsar_txn_cli.engine.buffer.hooks import service
    from pulsar_txn_cli.engine.buffer.service import TopicNotFound

    topic = "persistent://" + "/".join(args[:3])
    svc = service(engine)
    try:
        known = topic_known is not None and topic_known(topic)
        buffer = svc.buffer(topic, create=known and svc.writable)
        if route == "transactionBufferStats":
            return 200, stats_module.transaction_buffer_stats(buffer, _flag(query, "lowWaterMarks"), _flag(query, "segmentStats"))
        if route == "transactionBufferInternalStats":
            return 200, stats_module.transaction_buffer_internal_stats(buffer, _flag(query, "metadata"))
        try:
            txn = TxnID(int(args[3]), int(args[4]))
        except ValueError:
            return 400, {"reason": f"{args[3]}/{args[4]} is not a transaction id"}
        return 200, buffer.in_buffer_stats(txn)
    except TopicNotFound:
        return 404, {"reason": "Topic not found"}
    except EngineError as exc:
        return 500, {"reason": str(exc)}
