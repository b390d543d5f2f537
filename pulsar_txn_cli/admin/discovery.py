"""Find every subscription that uses transactions, from the pending-ack topics.

A subscription that ever acknowledged inside a transaction has a pending-ack managed ledger,
listed among the namespace's topics as `<topic>-<sub>__transaction_pending_ack` — but only with
`includeSystemTopic=true`. Splitting that name is ambiguous when the topic or the subscription
contains `-`, so each candidate split is checked against the topics that exist and against
the topic's real subscriptions.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pulsar_txn_cli.protocol import PENDING_ACK_SUFFIX
from pulsar_txn_cli.natural import natural_key

DEFAULT_CONCURRENCY = 8


def transactional_subscriptions(
    admin, *, namespaces: list[str] | None = None, concurrency: int = DEFAULT_CONCURRENCY
) -> list[dict]:
    """One dict per pending-ack store, sorted by topic then subscription.

    Keys: topic, subscription, pendingAckTopic, status ("ok"; "ambiguous" when several splits
    match; "orphan" when no existing topic has that subscription any more), candidates (the
    (topic, subscription) splits that were considered when the status is not "ok").
    """
    workers = max(1, int(concurrency))
    with ThreadPoolExecutor(max_workers=workers, thread_name_prefix="discover") as pool:
        if namespaces is None:
            tenants = admin.tenants()
            namespaces = [ns for group in pool.map(admin.namespaces, tenants) for ns in group]
        topic_lists = list(pool.map(lambda ns: admin.namespace_topics(ns, include_system=True), namespaces))
        pending = []
        for topics in topic_lists:
            existing = {t for t in topics if not t.endswith(PENDING_ACK_SUFFIX)}
            for name in topics:
                if name.endswith(PENDING_ACK_SUFFIX):
                    pending.append((name, _candidates(name, existing)))
        wanted = sorted({topic for _, cands in pending for topic, _ in cands})
        subs_of = dict(zip(wanted, pool.map(lambda t: _subscriptions(admin, t), wanted)))
    found = [_resolve(name, cands, subs_of) for name, cands in pending]
    return sorted(
        found,
        key=lambda d: (natural_key(d["topic"]), natural_key(d["subscription"]), natural_key(d["pendingAckTopic"])),
    )


def split_candidates(pending_ack_topic: str) -> list[tuple[str, str]]:
    """Every (topic, subscription) split of a pending-ack topic name, longest topic first."""
    base = pending_ack_topic[: -len(PENDING_ACK_SUFFIX)]
    prefix, _, local = base.rpartition("/")
    splits = []
    for index in range(len(local) - 1, 0, -1):
        if local[index] == "-" and local[index + 1 :]:
            splits.append((f"{prefix}/{local[:index]}", local[index + 1 :]))
    return splits


def _candidates(name: str, existing: set[str]) -> list[tuple[str, str]]:
    splits = split_candidates(name)
    known = [(t, s) for t, s in splits if t in existing]
    return known or splits[-1:]  # no existing topic: keep the first-dash split for reporting


def _resolve(name: str, candidates: list[tuple[str, str]], subs_of: dict) -> dict:
    matches = [(t, s) for t, s in candidates if s in (subs_of.get(t) or ())]
    entry = {"topic": None, "subscription": None, "pendingAckTopic": name, "status": "ok"}
    if len(matches) == 1:
        entry["topic"], entry["subscription"] = matches[0]
        return entry
    chosen = matches[0] if matches else candidates[0] if candidates else (None, None)
    entry["topic"], entry["subscription"] = chosen
    entry["status"] = "ambiguous" if len(matches) > 1 else "orphan"
    entry["candidates"] = [{"topic": t, "subscription": s} for t, s in (matches or candidates)]
    return entry


def _subscriptions(admin, topic: str) -> list[str]:
    from pulsar_txn_cli.errors import ConnectionFailed

    try:
        return admin.topic_subscriptions(topic)
    except ConnectionFailed as exc:
        if exc.status == 404:  # the topic is gone; its pending-ack ledger stays an orphan
            return []
        raise
