"""Registers the transaction buffer's REST routes on the engine's router (engine/rest.py).

engine/rest.py imports this module once (`from pulsar_txn_cli.engine.buffer import routes`);
registration happens at import, once per process. Besides the three transaction-buffer
endpoints it serves a topic's `internalStats` and partitioned metadata, which stuck-readers
reads on a cluster too.
"""
from __future__ import annotations

from pulsar_txn_cli.engine import rest as router
from pulsar_txn_cli.engine.buffer import rest as buffer_rest
from pulsar_txn_cli.engine.buffer.ledgers import managed_ledger_name

TXN = "/admin/v3/transactions"
TOPIC = "{tenant}/{ns}/{topic}"


def _known(engine):
    return lambda topic: router._topic_exists(engine, topic)  # the router's own notion of a topic


@router.route("GET", f"{TXN}/transactionBufferStats/{TOPIC}", txn=True)
def transaction_buffer_stats(engine, query, body, tenant, ns, topic):
    return buffer_rest.answer(engine, "transactionBufferStats", [tenant, ns, topic], query, _known(engine))


@router.route("GET", f"{TXN}/transactionBufferInternalStats/{TOPIC}", txn=True)
def transaction_buffer_internal_stats(engine, query, body, tenant, ns, topic):
    return buffer_rest.answer(engine, "transactionBufferInternalStats", [tenant, ns, topic], query, _known(engine))


@router.route("GET", f"{TXN}/transactionInBufferStats/{TOPIC}/{{most}}/{{least}}", txn=True)
def transaction_in_buffer_stats(engine, query, body, tenant, ns, topic, most, least):
    return buffer_rest.answer(engine, "transactionInBufferStats", [tenant, ns, topic, most, least], query, _known(engine))


@router.route("GET", f"/admin/v2/persistent/{TOPIC}/internalStats")
def topic_internal_stats(engine, query, body, tenant, ns, topic):
    """PersistentTopicInternalStats: the topic's managed-ledger stats plus schema and compaction."""
    from pulsar_txn_cli.engine.ledger import ManagedLedger

    ml = ManagedLedger(engine.store, engine.clock, managed_ledger_name(f"persistent://{tenant}/{ns}/{topic}"))
    if not ml.exists:
        return 404, {"reason": "Topic not found"}
    stats = ml.internal_stats(router._bool(query, "metadata"))
    stats["schemaLedgers"] = []
    stats["compactedLedger"] = {"ledgerId": -1, "entries": -1, "size": -1, "offloaded": False, "underReplicated": False}
    return 200, stats


@router.route("GET", f"/admin/v2/persistent/{TOPIC}/partitions")
def partitioned_metadata(engine, query, body, tenant, ns, topic):
    row = engine.store.db.execute("SELECT partitions FROM topics WHERE name=?", (f"persistent://{tenant}/{ns}/{topic}",)).fetchone()
    return 200, {"partitions": int(row[0]) if row else 0, "properties": None}
