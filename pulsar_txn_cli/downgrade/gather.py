"""Gather the observations of one check through the admin client, concurrently and bounded.

Only PulsarAdmin's typed calls (Pulsar's REST paths) are used, so a cluster and the embedded engine
are observed the same way. A failed call becomes an `error` on what it was about, never an
exception: the verdict decides what a failure means. Only the first call, which proves the
target answers at all, lets its ConnectionFailed through (exit code 4).
"""

from __future__ import annotations

from dataclasses import replace
from concurrent.futures import ThreadPoolExecutor

from pulsar_txn_cli.admin import writer_metrics
from pulsar_txn_cli.admin.client import broker_at
from pulsar_txn_cli.admin.open_transactions import EVERY_OPEN
from pulsar_txn_cli.transaction_ends import age_ms, past_timeout
from pulsar_txn_cli.downgrade import effective
from pulsar_txn_cli.downgrade.observations import (
    COORDINATOR,
    SUBSCRIPTION,
    BrokerObservation,
    PENDING_ACK_WRITER,
    TC_WRITER,
    LogObservation,
    Observations,
    WriterCounters,
)
from pulsar_txn_cli.output.units import iso_ms, iso_seconds
from pulsar_txn_cli.errors import attempt, describe
from pulsar_txn_cli.protocol import PENDING_ACK_CURSOR, TC_CURSOR

DEFAULT_CONCURRENCY = 16


def gather(
    admin,
    *,
    concurrency: int = DEFAULT_CONCURRENCY,
    progress=None,
    versions: bool = True,
) -> Observations:
    """Observe the target: configuration, brokers, every coordinator and transactional subscription
    (ledger list, cursor, store state), and where batching is effective. `progress` has
    advance()/update(). Count its requests by giving it a counted PulsarAdmin (admin/counting.py)."""
    tc_count = admin.tc_partitions()  # proves the target answers; ConnectionFailed propagates
    now_ms = admin.now_ms()
    taken_at = iso_seconds(now_ms)  # on the target's clock, as the times its stores report
    identity = admin.identity()  # what the records are keyed by; without it nothing can be compared
    problems: list[str] = []
    pool = ThreadPoolExecutor(max_workers=max(1, int(concurrency)), thread_name_prefix="downgrade")
    try:
        dynamic = pool.submit(attempt, admin.dynamic_config_values)
        broker_urls = pool.submit(attempt, admin.broker_web_urls)
        tc_stats = pool.submit(attempt, admin.coordinator_stats)
        subs = pool.submit(_discover, admin, concurrency)
        (urls, brokers_error) = broker_urls.result()
        count = len(urls or ())
        # The counters before any ledger list: a batch counted after them lands in a ledger this check lists,
        # or is counted by the next check; read the other way round, a batch in a ledger created in between
        # would be in the counters this check keeps and in no ledger it raised a record to.
        metric_futures = [pool.submit(_writer_counters, admin, u, broker_at(u, count)) for u in urls or ()]
        (dynamic_config, dynamic_error) = dynamic.result()
        (stats, stats_error) = tc_stats.result()
        (found, discovery_problems) = subs.result()
        problems += discovery_problems
        if dynamic_config is not None and not isinstance(dynamic_config, dict):
            dynamic_config, dynamic_error = None, "the dynamic configuration is not a JSON object"
        if progress is not None:
            progress.update(total=count + tc_count + len(found), completed=0, description="reading ledger lists")

        def tick(value):
            if progress is not None:
                progress.advance()
            return value

        broker_futures = [
            pool.submit(lambda u: tick(_broker(admin, u, broker_at(u, count), versions)), u) for u in urls or ()
        ]
        counters = [f.result() for f in metric_futures]
        # A real broker answers 500 to the all-coordinators stats while one coordinator is not
        # loaded (docs/real-broker-findings.md): then ask each coordinator on its own.
        all_stats = stats if isinstance(stats, dict) and not stats_error else None
        tc_futures = [
            pool.submit(lambda i: tick(_coordinator(admin, i, all_stats, now_ms)), i) for i in range(tc_count)
        ]
        sub_futures = [pool.submit(lambda d: tick(_subscription(admin, d)), d) for d in found]
        brokers = tuple(f.result() for f in broker_futures)
        coordinators = [f.result() for f in tc_futures]
        subscriptions = [f.result() for f in sub_futures]
    except BaseException:
        # Ctrl-C or a failure: drop the queued calls instead of finishing hundreds of them.
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown()
    judged = effective.Judge(identity, dynamic_config, brokers)
    writers = None if urls is None else tuple(_release_checked(w, b) for w, b in zip(counters, brokers))
    coordinators = [judged.coordinator(log, tc_stats) for log, tc_stats in coordinators]
    subscriptions = [judged.subscription(log, pa_stats) for log, pa_stats in subscriptions]
    return Observations(
        target=admin.target.describe(),
        identity=identity,
        taken_at=taken_at,
        dynamic_config=dynamic_config,
        dynamic_error=dynamic_error,
        brokers=brokers,
        brokers_error=brokers_error,
        coordinators=tuple(coordinators),
        subscriptions=tuple(subscriptions),
        problems=tuple(problems),
        unbatched_since_ms=_unbatched_since(writers),
        writers=writers,
        second_coordinator=_second_coordinator(admin, brokers),
    )


def _second_coordinator(admin, brokers):
    """Pulsar 5.0's scalable-topics coordinator, read only where a broker's runtime configuration has it on:
    a rollback to 4.x keeps its open transactions open for good (downgrade/second_coordinator.py)."""
    from pulsar_txn_cli.downgrade.second_coordinator import flag
    from pulsar_txn_cli.scalable_coordinator import detect

    return detect(admin, None) if any(flag(b) for b in brokers) else None


def _release_checked(writer: WriterCounters, broker: BrokerObservation) -> WriterCounters:
    """A broker whose release predates PIP-160 has no buffered writer: it cannot batch."""
    from pulsar_txn_cli.admin.features import lacks_batched_logs

    return replace(writer, cannot_batch=True) if lacks_batched_logs(broker.version) else writer


def _writer_counters(admin, url: str, at: str | None) -> WriterCounters:
    """One broker's buffered-writer counters, asked at AT: per writer, when its counters started (their
    `_created` samples, the broker's start) and the batches it wrote since (PIP-160's bufferedwriter metrics)."""
    text, error = attempt(admin.metrics_text, at)
    if error or not isinstance(text, str):
        return WriterCounters(url, error=error or "the metrics are not text")
    created: dict[str, int] = {}
    batches: dict[str, int] = {}
    for name, _labels, value in writer_metrics.parse(text, only=writer_metrics.WRITER):
        log = next((log for log, prefix in _WRITER_PREFIXES.items() if name.startswith(prefix)), None)
        if log is None:
            continue
        if name.endswith("_created"):
            created[log] = max(created.get(log, 0), int(round(value * 1000)))
        elif name.endswith("batch_records_count"):
            batches[log] = batches.get(log, 0) + int(value)
    return WriterCounters(url, created, batches)


_WRITER_PREFIXES = {
    TC_WRITER: writer_metrics.PREFIXES["tc"] + writer_metrics.WRITER,
    PENDING_ACK_WRITER: writer_metrics.PREFIXES["pending-ack"] + writer_metrics.WRITER,
}


def _unbatched_since(writers: tuple[WriterCounters, ...] | None) -> int | None:
    """Since when no broker has written a batch: the latest start of their counters, when every broker's
    counters were read and none counted a batch (else None). No ledger created after it holds a batched
    entry: a ledger is written only by its creator."""
    if not writers:
        return None
    starts = []
    for w in writers:
        if w.cannot_batch:
            continue
        if w.error or not w.created_ms or any(w.batches.values()):
            return None
        starts += w.created_ms.values()
    return max(starts) if starts else None


def _discover(admin, concurrency: int) -> tuple[list[dict], list[str]]:
    """Every transactional subscription (steps 2-4), from the admin layer's discovery."""
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions

    try:
        found = transactional_subscriptions(admin, concurrency=concurrency)
    except Exception as exc:  # noqa: BLE001
        return [], [f"could not discover the transactional subscriptions: {describe(exc)}"]
    problems, usable = [], []
    for entry in found:
        if entry.get("status") == "orphan":
            problems.append(
                f"pending-ack log {entry['pendingAckTopic']} belongs to no existing subscription, so its ledgers "
                f"cannot be read; if the subscription is gone for good, delete it: "
                f"pulsar-admin topics delete -f {entry['pendingAckTopic']}"
            )
        elif entry.get("topic") and entry.get("subscription"):
            usable.append(entry)  # an ambiguous split names the same managed ledger either way
        else:
            problems.append(f"pending-ack log {entry.get('pendingAckTopic')} could not be attributed")
    return usable, problems


def _broker(admin, url: str, at: str | None, versions: bool) -> BrokerObservation:
    """One broker, asked at AT (admin/client.broker_at: None is through the admin URL)."""
    runtime, error = attempt(admin.runtime_config, at)
    version = None
    if versions:
        text, version_error = attempt(admin.version, at)
        version = text or None
        error = error or version_error
    if runtime is not None and not isinstance(runtime, dict):
        runtime, error = None, "the runtime configuration is not a JSON object"
    return BrokerObservation(url, runtime, version, error)


def _coordinator(admin, tc_id: int, all_stats: dict | None, now_ms: int) -> tuple[LogObservation, dict]:
    """The TC log and the coordinator's stats (state, open time, open transactions)."""
    data, error = attempt(admin.coordinator_internal_stats, tc_id)
    log = _log(COORDINATOR, data, error, "transactionLogStats", TC_CURSOR, coordinator_id=tc_id)
    if all_stats is not None:
        stats = all_stats.get(str(tc_id)) or all_stats.get(tc_id) or {}
    else:
        stats, stats_error = attempt(admin.coordinator_stats, tc_id)
        if stats_error and not log.error:
            log = replace(log, error=f"coordinator stats: {stats_error}")
    stats = stats if isinstance(stats, dict) else {}
    ongoing = stats.get("ongoingTxnSize")
    if isinstance(ongoing, int) and ongoing > 0 and not log.error:
        oldest, overdue = _open_transactions(admin, tc_id, now_ms)
        log = replace(log, oldest_open_ms=oldest, overdue_txns=overdue)
    return log, stats


# An open transaction this long past its own timeout was not ended by its coordinator's timeout, and may never
# be (apache/pulsar#19200; seen on a real 2.11.0 cluster, docs/real-broker-findings.md). The margin covers the
# skew between this machine's clock and the broker's, and a timeout abort still in flight.
OVERDUE_MARGIN_MS = 120_000


def _open_transactions(admin, tc_id: int, now_ms: int) -> tuple[int | None, tuple[str, ...]]:
    """The openTimestamp of the coordinator's oldest open transaction (its slow transactions over EVERY_OPEN),
    and the ids of those long past their own timeout; (None, ()) when it cannot be told: the verdict then does
    not rest on them."""
    data, error = attempt(admin.slow_transactions, EVERY_OPEN, tc_id)
    if error or not isinstance(data, dict):
        return None, ()
    metas = [m for m in data.values() if isinstance(m, dict) and age_ms(m, now_ms) is not None]
    overdue = tuple(str(m.get("txnId")) for m in metas if past_timeout(m, now_ms - OVERDUE_MARGIN_MS))
    return (min(m["openTimestamp"] for m in metas) if metas else None), overdue


def _subscription(admin, entry: dict) -> tuple[LogObservation, dict]:
    """The pending-ack log and the store's stats (state, open time, open transactions)."""
    topic, sub = entry["topic"], entry["subscription"]
    data, error = attempt(admin.pending_ack_internal_stats, topic, sub)
    log = _log(SUBSCRIPTION, data, error, "pendingAckLogStats", PENDING_ACK_CURSOR, topic=topic, subscription=sub)
    stats, stats_error = attempt(admin.pending_ack_stats, topic, sub)
    if stats_error and not log.error:
        log = replace(log, error=f"pending-ack stats: {stats_error}")
    return log, stats if isinstance(stats, dict) else {}


def _log(kind: str, data, error: str | None, stats_key: str, cursor: str, **ident) -> LogObservation:
    if error:
        return LogObservation(kind, error=error, **ident)
    ml = ((data or {}).get(stats_key) or {}).get("managedLedgerInternalStats") if isinstance(data, dict) else None
    if not isinstance(ml, dict) or not isinstance(ml.get("ledgers"), list):
        return LogObservation(kind, error=f"the answer has no {stats_key}.managedLedgerInternalStats.ledgers", **ident)
    try:
        ledgers = tuple(int(info["ledgerId"]) for info in ml["ledgers"])
    except (KeyError, TypeError, ValueError):
        return LogObservation(kind, error="a ledger in the answer has no numeric ledgerId", **ident)
    cursor_stats = (ml.get("cursors") or {}).get(cursor) or {}
    created = iso_ms(ml.get("lastLedgerCreatedTimestamp"))
    return LogObservation(
        kind,
        ledgers=ledgers,
        last_confirmed=ml.get("lastConfirmedEntry"),
        mark_delete=cursor_stats.get("markDeletePosition"),
        individually_deleted=cursor_stats.get("individuallyDeletedMessages"),
        current_created_ms=created,
        **ident,
    )
