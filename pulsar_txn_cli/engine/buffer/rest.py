"""The buffer's routes of Pulsar's admin REST API, for the engine's router (engine/rest.py).

`handle(engine, method, path, query, body)` answers (status, JSON value) for the paths below,
or None for any other path so the router can go on:

  GET /admin/v3/transactions/transactionBufferStats/{tenant}/{ns}/{topic}?lowWaterMarks=&segmentStats=
  GET /admin/v3/transactions/transactionBufferInternalStats/{tenant}/{ns}/{topic}?metadata=
  GET /admin/v3/transactions/transactionInBufferStats/{tenant}/{ns}/{topic}/{most}/{least}
"""
from __future__ import annotations

from urllib.parse import unquote

from pulsar_txn_cli.engine.buffer import stats as stats_module
from pulsar_txn_cli.engine.buffer.positions import TxnID
from pulsar_txn_cli.errors import EngineError

PREFIX = "/admin/v3/transactions/"
ROUTES = ("transactionBufferStats", "transactionBufferInternalStats", "transactionInBufferStats")


def _flag(query: dict, name: str) -> bool:
    return str(query.get(name, "false")).lower() == "true"


def handle(engine, method: str, path: str, query: dict | None = None, body=None):
    if not path.startswith(PREFIX):
        return None
    parts = [unquote(p) for p in path[len(PREFIX):].strip("/").split("/")]
    if parts[0] not in ROUTES:
        return None
    if method != "GET":
        return 405, {"reason": "Method Not Allowed"}
    route, args = parts[0], parts[1:]
    expected = 5 if route == "transactionInBufferStats" else 3
    if len(args) != expected:
        return 404, {"reason": "Not Found"}
    return answer(engine, route, args, query or {})


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
