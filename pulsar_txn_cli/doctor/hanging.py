"""find-hanging and abort-hanging (Kafka's kafka-transactions.sh names, KIP-664), over PulsarAdmin.

A transaction is hanging when it is open (or stuck COMMITTING/ABORTING) past its timeout, or longer
than --older-than (default: half its own timeout). Aborting goes through PIP-325's endpoint (3.2+),
a bounded number at a time, one result per transaction; the CLI keeps the audit record.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pulsar_txn_cli.admin.open_transactions import open_transactions
from pulsar_txn_cli import transaction_ends as t
from pulsar_txn_cli.doctor.transactions import partition_state
from pulsar_txn_cli.errors import UsageError, attempt
from pulsar_txn_cli.names import TopicName, TxnID
from pulsar_txn_cli.protocol import tc_assign_partition

STATES = ("OPEN", "COMMITTING", "ABORTING")


def find(
    admin,
    *,
    older_than_ms: int | None = None,
    topic: str | None = None,
    coordinator_id: int | None = None,
    states: list[str] | None = None,
    concurrency: int = 8,
) -> dict:
    """{"nowMs", "clock", "versions", "transactions": [...]} oldest first; each with the readers it holds."""
    wanted = _states(states)
    now, clock = admin.clock()
    versions, _ = attempt(_versions, admin)
    listing = open_transactions(admin, coordinator_id, concurrency)
    owners = {}
    picked = []
    topics = _topic_filter(admin, topic)
    for txn_id, meta in listing.transactions.items():
        if (meta.get("status") or "OPEN") not in wanted or not t.is_hanging(meta, now, older_than_ms):
            continue
        touched = set(meta.get("producedPartitions") or {}) | set(meta.get("ackedPartitions") or {})
        if topics is not None and not touched & topics:
            continue
        picked.append((txn_id, meta))
    partitions = sorted({p for _, meta in picked for p in meta.get("producedPartitions") or {}})
    with ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="find-hanging") as pool:
        read = dict(zip(partitions, pool.map(lambda p: _partition(admin, p), partitions)))
        for most in sorted({TxnID.parse(i)[0] for i, _ in picked}):
            owners[most] = pool.submit(attempt, admin.lookup, tc_assign_partition(most))
    owner_url = {
        m: ((f.result()[0] or {}).get("httpUrl") or (f.result()[0] or {}).get("httpUrlTls")) for m, f in owners.items()
    }
    out = []
    for txn_id, meta in picked:
        most = TxnID.parse(txn_id)[0]
        held = []
        for partition, in_buffer in (meta.get("producedPartitions") or {}).items():
            view = partition_state(read.get(partition) or {})
            if view["entriesBehind"] > 0 and not (in_buffer or {}).get("aborted"):
                held.append(
                    {
                        "topic": partition,
                        "entriesBehind": view["entriesBehind"],
                        "startPosition": (in_buffer or {}).get("startPosition"),
                    }
                )
        out.append(
            {
                "txnId": meta.get("txnId", txn_id),
                "coordinatorId": most,
                "status": meta.get("status"),
                "ownerBroker": owner_url.get(most),
                "openTimestamp": meta.get("openTimestamp"),
                "ageMs": t.age_ms(meta, now),
                "timeoutMs": t.timeout_ms(meta),
                "pastTimeout": t.past_timeout(meta, now),
                "producedPartitions": sorted(meta.get("producedPartitions") or {}),
                "ackedSubscriptions": sorted(
                    f"{tp} / {s}" for tp, by in (meta.get("ackedPartitions") or {}).items() for s in by
                ),
                "readersHeld": held,
            }
        )
    out.sort(key=lambda r: (-(r["ageMs"] or 0), r["txnId"]))
    return {
        "nowMs": now,
        "clock": clock,
        "versions": versions or [],
        "transactions": out,
        "unlistedCoordinators": listing.unlisted_rows(),
        "secondCoordinator": _second(admin, listing, topics),
    }


def _second(admin, listing, topics: set[str] | None) -> dict | None:
    """Pulsar 5.0's scalable-topics coordinator, where it is on: its transactions are not in the list above
    (the admin API cannot list or abort them), and what the buffers count of them (on --topic's partitions)."""
    from pulsar_txn_cli.scalable_coordinator import detect

    view = detect(admin, listing.transactions if not listing.unlisted else None)
    if view is None:
        return None
    if topics is not None:
        view.counted = {p: n for p, n in view.counted.items() if p in topics}
    return {**view.to_json(), "notCovered": view.sentence("this list")}


def _states(states: list[str] | None) -> tuple[str, ...]:
    if not states:
        return STATES
    chosen = tuple(s.upper() for s in states)
    bad = [s for s in chosen if s not in STATES]
    if bad:
        raise UsageError(f"--state {bad[0]} is not one of {', '.join(STATES)}")
    return chosen


def _topic_filter(admin, topic: str | None) -> set[str] | None:
    if not topic:
        return None
    return {TopicName(topic).full, *admin.topic_partitions(topic)}


def _partition(admin, partition: str) -> dict:
    both, error = attempt(admin.partition_stats, partition)
    internal, stats = both or ({}, {})
    return {"stats": stats, "internal": internal, "error": error}


def _versions(admin) -> list[str]:
    urls = admin.broker_web_urls()
    only = len(urls) == 1
    return sorted({admin.version(None if only else u) for u in urls})


class AbortUnsupported(UsageError):
    """The brokers predate PIP-325's abort endpoint (3.2)."""


def check_abort_supported(versions: list[str]) -> None:
    if not t.abort_supported(versions):
        raise AbortUnsupported(
            f"the brokers ({', '.join(versions)}) have no abort endpoint (it came with Pulsar 3.2, PIP-325); "
            + t.abort_advice(versions).split(": ", 1)[1]
            + "; `pulsar-txn find-hanging` lists each one with its coordinator"
        )


def abort(admin, txn_ids: list[str], *, concurrency: int = 4, on_result=None, statuses=None) -> list[dict]:
    """Abort each transaction, at most `concurrency` at once; one result per transaction, in order.
    One already COMMITTING or ABORTING (`statuses`: txnId -> status) is not sent: the broker refuses its
    abort (500 "expected OPEN"); its result names the reload of its coordinator, which ends it."""

    def one(txn_id: str) -> dict:
        most, least = TxnID.parse(txn_id)
        status = (statuses or {}).get(txn_id)
        if status in t.ENDING:
            error = (
                f"it is {status}: an abort cannot end it; reload its coordinator, which finishes it: "
                f"`{t.reload_coordinator(most)}`"
            )
        else:
            _, error = attempt(admin.abort_transaction, most, least)
        result = {"txnId": txn_id, "aborted": error is None, "error": error}
        if on_result is not None:
            on_result(result)
        return result

    pool = ThreadPoolExecutor(max_workers=max(1, concurrency), thread_name_prefix="abort-hanging")
    try:
        results = list(pool.map(one, txn_ids))
    except BaseException:
        # Ctrl-C: the aborts in flight finish (and are audited); none that was queued starts.
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    pool.shutdown()
    return results
