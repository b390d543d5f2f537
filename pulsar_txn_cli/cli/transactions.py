"""Transaction stats with `pulsar-admin transactions` option names, on a cluster or the engine.

Each command calls one PulsarAdmin method and renders Pulsar's JSON unchanged for -o json/jsonl;
tables pick the fields an operator reads first.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command, confirm
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.names import TxnID
from pulsar_txn_cli.output.units import parse_duration_ms


def register(app: typer.Typer) -> None:
    command(app, "coordinators-list", target=True)(coordinators_list)
    command(app, "coordinator-stats", target=True)(coordinator_stats)
    command(app, "coordinator-internal-stats", target=True)(coordinator_internal_stats)
    command(app, "pending-ack-stats", target=True)(pending_ack_stats)
    command(app, "pending-ack-internal-stats", target=True)(pending_ack_internal_stats)
    command(app, "transaction-metadata", target=True)(transaction_metadata)
    command(app, "slow-transactions", target=True)(slow_transactions)
    command(app, "abort-transaction", target=True)(abort_transaction)
    command(app, "transaction-buffer-stats", target=True)(transaction_buffer_stats)
    command(app, "buffer-snapshot-internal-stats", target=True)(buffer_snapshot_internal_stats)
    command(app, "subscriptions", target=True)(subscriptions)
    command(app, "transaction-in-buffer-stats", target=True)(transaction_in_buffer_stats)
    command(app, "transaction-in-pending-ack-stats", target=True)(transaction_in_pending_ack_stats)
    command(app, "position-stats-in-pending-ack", target=True)(position_stats_in_pending_ack)
    command(app, "scale-transactionCoordinators", target=True)(scale_coordinators)


Topic = Annotated[
    str,
    typer.Option(
        "-t", "--topic", help="Topic: persistent://tenant/ns/topic, tenant/ns/topic or topic.", show_default=False
    ),
]


def coordinators_list() -> None:
    """List the transaction coordinators and the broker that owns each."""
    env = current()
    data = env.admin().coordinators()
    _emit(data, [("id", "id"), ("brokerServiceUrl", "broker"), ("webServiceUrl", "web service")])


def coordinator_stats(
    coordinator_id: Annotated[
        Optional[int],
        typer.Option("-c", "--coordinator-id", help="One coordinator (default: all).", show_default=False),
    ] = None,
) -> None:
    """Stats of the transaction coordinators (state, sequence id, low water mark, recover times)."""
    env = current()
    if coordinator_id is None:
        data, missing = env.admin().coordinator_stats_each()
        for tc_id, reason in missing.items():
            env.warn(f"coordinator {tc_id} is left out: {reason}")
    else:
        data = env.admin().coordinator_stats(coordinator_id)
    rows = (
        [{"id": coordinator_id, **data}]
        if coordinator_id is not None
        else [{"id": int(k), **v} for k, v in sorted((data or {}).items(), key=lambda kv: int(kv[0]))]
    )
    _emit(data, STATS_COLUMNS, rows=_timed(rows), records=rows if coordinator_id is None else None)


def coordinator_internal_stats(
    coordinator_id: Annotated[
        int, typer.Option("-c", "--coordinator-id", help="The coordinator id.", show_default=False)
    ],
    metadata: Annotated[bool, typer.Option("-m", "--metadata", help="Include the ledgers' metadata.")] = False,
) -> None:
    """The coordinator's transaction-log managed ledger: ledgers, entries, cursor."""
    env = current()
    data = env.admin().coordinator_internal_stats(coordinator_id, metadata)
    _emit_log_stats(data, "transactionLogStats")


def pending_ack_stats(
    topic: Topic,
    subscription: Annotated[
        str, typer.Option("-s", "--sub-name", "--subscription-name", help="The subscription.", show_default=False)
    ],
    low_water_mark: Annotated[
        bool, typer.Option("-l", "--low-water-mark", help="Include the low water marks.")
    ] = False,
) -> None:
    """Stats of a subscription's pending-ack handle."""
    env = current()
    data = env.admin().pending_ack_stats(topic, subscription, low_water_mark)
    columns = PENDING_ACK_COLUMNS + ([("lowWaterMarks", "low water marks")] if low_water_mark else [])
    _emit(data, columns, rows=_timed([{"topic": topic, "subscription": subscription, **(data or {})}]))


def pending_ack_internal_stats(
    topic: Topic,
    subscription: Annotated[
        str, typer.Option("-s", "--subscription-name", "--sub-name", help="The subscription.", show_default=False)
    ],
    metadata: Annotated[bool, typer.Option("-m", "--metadata", help="Include the ledgers' metadata.")] = False,
) -> None:
    """The subscription's pending-ack managed ledger: ledgers, entries, cursor."""
    env = current()
    data = env.admin().pending_ack_internal_stats(topic, subscription, metadata)
    _emit_log_stats(data, "pendingAckLogStats")


def transaction_metadata(
    txn_id: Annotated[
        Optional[str],
        typer.Argument(
            metavar="[TXN_ID]", help="The transaction id as (most,least), as printed everywhere.", show_default=False
        ),
    ] = None,
    most: Annotated[
        Optional[int],
        typer.Option("-m", "--most-sig-bits", help="Most significant bits (the coordinator id).", show_default=False),
    ] = None,
    least: Annotated[
        Optional[int], typer.Option("-l", "--least-sig-bits", help="Least significant bits.", show_default=False)
    ] = None,
) -> None:
    """Metadata of one transaction: status, timeout, produced and acknowledged partitions."""
    env = current()
    most, least = parse_txn_id(txn_id, most, least)
    data = env.admin().transaction_metadata(most, least)
    _emit(data, TXN_COLUMNS, rows=[_txn_row(data or {})])


def abort_transaction(
    txn_id: Annotated[
        Optional[str],
        typer.Argument(metavar="[TXN_ID]", help="The transaction id as (most,least).", show_default=False),
    ] = None,
    most: Annotated[
        Optional[int],
        typer.Option("-m", "--most-sig-bits", help="Most significant bits (the coordinator id).", show_default=False),
    ] = None,
    least: Annotated[
        Optional[int], typer.Option("-l", "--least-sig-bits", help="Least significant bits.", show_default=False)
    ] = None,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Abort an open transaction (PIP-325), e.g. one that holds readers back (see stuck-readers)."""
    env = current()
    most, least = parse_txn_id(txn_id, most, least)
    admin = env.admin()
    if not yes:
        confirm(f"Abort transaction ({most},{least}) on {admin.target.describe()}?")
    admin.abort_transaction(most, least)
    data = {"txnId": f"({most},{least})", "aborted": True, "target": admin.target.describe()}
    env.info(f"transaction ({most},{least}) aborted on {admin.target.describe()}")
    _emit(data, [("txnId", "txn id"), ("aborted", "aborted"), ("target", "target")], rows=[data])


def slow_transactions(
    time_: Annotated[str, typer.Option("-t", "--time", help="Older than this: 1s, 10s, 1m, 5h, 3d.")] = "1s",
    coordinator_id: Annotated[
        Optional[int],
        typer.Option("-c", "--coordinator-id", help="One coordinator (default: all).", show_default=False),
    ] = None,
) -> None:
    """Transactions open for longer than --time."""
    env = current()
    data = env.admin().slow_transactions(parse_duration_ms(time_), coordinator_id) or {}
    from pulsar_txn_cli.natural import natural_key

    rows = [_txn_row(v) for _, v in sorted(data.items(), key=lambda kv: natural_key(kv[0]))]
    _emit(data, TXN_COLUMNS, rows=rows, records=list(data.values()))


def transaction_buffer_stats(
    topic: Topic,
    low_water_mark: Annotated[
        bool, typer.Option("-l", "--low-water-mark", help="Include the low water marks.")
    ] = False,
    segment_stats: Annotated[
        bool, typer.Option("-s", "--segment-stats", help="Include segmented-snapshot stats.")
    ] = False,
) -> None:
    """Stats of a topic's transaction buffer."""
    env = current()
    data = env.admin().transaction_buffer_stats(topic, low_water_mark, segment_stats)
    columns = [
        ("state", "state"),
        ("maxReadPosition", "max read position"),
        ("ongoingTxnSize", "ongoing"),
        ("lastSnapshotTimestamps", "last snapshot"),
        ("recoverStartTime", "recover start"),
        ("recoverEndTime", "recover end"),
    ]
    _emit(data, columns, rows=_timed([data or {}], ("lastSnapshotTimestamps", "recoverStartTime", "recoverEndTime")))


def buffer_snapshot_internal_stats(
    topic: Topic,
    metadata: Annotated[bool, typer.Option("-m", "--metadata", help="Include the ledgers' metadata.")] = False,
) -> None:
    """Internal stats of the transaction buffer's snapshot system topics."""
    env = current()
    data = env.admin().transaction_buffer_internal_stats(topic, metadata) or {}
    rows = []
    for key in ("singleSnapshotSystemTopicInternalStats", "segmentInternalStats", "segmentIndexInternalStats"):
        stats = data.get(key)
        if stats:
            rows.append({"kind": key, **_ml_summary(stats)})
    _emit(
        data, [("kind", "snapshot topic")] + ML_COLUMNS, rows=rows, lines=[f"snapshot type: {data.get('snapshotType')}"]
    )


Most = Annotated[
    int,
    typer.Option(
        "-m",
        "--most-sig-bits",
        help="Most significant bits of the transaction id (the coordinator id).",
        show_default=False,
    ),
]
Least = Annotated[
    int,
    typer.Option("-l", "--least-sig-bits", help="Least significant bits of the transaction id.", show_default=False),
]


def transaction_in_buffer_stats(topic: Topic, most: Most, least: Least) -> None:
    """One transaction in a topic's transaction buffer: where it starts and whether it was aborted."""
    data = current().admin().transaction_in_buffer_stats(topic, most, least)
    row = {"txnId": f"({most},{least})", "topic": topic, **(data or {})}
    _emit(
        data,
        [("txnId", "txn id"), ("topic", "topic"), ("startPosition", "start position"), ("aborted", "aborted")],
        rows=[row],
    )


def transaction_in_pending_ack_stats(
    topic: Topic,
    subscription: Annotated[
        str, typer.Option("-s", "--sub-name", "--subscription-name", help="The subscription.", show_default=False)
    ],
    most: Most,
    least: Least,
) -> None:
    """One transaction in a subscription's pending-ack store: its cumulative ack position."""
    data = current().admin().transaction_in_pending_ack_stats(topic, subscription, most, least)
    row = {"txnId": f"({most},{least})", "topic": topic, "subscription": subscription, **(data or {})}
    _emit(
        data,
        [
            ("txnId", "txn id"),
            ("topic", "topic"),
            ("subscription", "subscription"),
            ("cumulativeAckPosition", "cumulative ack position"),
        ],
        rows=[row],
    )


def position_stats_in_pending_ack(
    topic: Topic,
    subscription: Annotated[
        str, typer.Option("-s", "--subscription-name", "--sub-name", help="The subscription.", show_default=False)
    ],
    ledger_id: Annotated[int, typer.Option("-l", "--ledger-id", help="The position's ledger id.", show_default=False)],
    entry_id: Annotated[int, typer.Option("-e", "--entry-id", help="The position's entry id.", show_default=False)],
    batch_index: Annotated[
        Optional[int], typer.Option("-b", "--batch-index", help="The message's index in a batch.", show_default=False)
    ] = None,
) -> None:
    """Where one position stands in a subscription's pending-ack store (PendingAck, MarkDelete, ...).

    As in pulsar-admin, -l is the ledger id here, not a transaction's least significant bits."""
    data = current().admin().position_stats_in_pending_ack(topic, subscription, ledger_id, entry_id, batch_index)
    position = f"{ledger_id}:{entry_id}" + (f":{batch_index}" if batch_index is not None else "")
    row = {"position": position, "subscription": subscription, **(data or {})}
    _emit(data, [("position", "position"), ("subscription", "subscription"), ("state", "state")], rows=[row])


def scale_coordinators(
    replicas: Annotated[
        int,
        typer.Option(
            "-r",
            "--replicas",
            min=1,
            help="The new number of transaction coordinators (more than now; they never shrink).",
            show_default=False,
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Grow the number of transaction coordinators (the partitions of transaction_coordinator_assign)."""
    env = current()
    admin = env.admin()
    before = admin.tc_partitions()
    if not yes:
        confirm(
            f"Grow the transaction coordinators of {admin.target.describe()} from {before} to {replicas}? "
            "This cannot be undone"
        )
    admin.scale_coordinators(replicas)
    data = {"target": admin.target.describe(), "previous": before, "replicas": replicas}
    env.info(f"{admin.target.describe()} now has {replicas} transaction coordinators (was {before})")
    _emit(data, [("replicas", "coordinators"), ("previous", "previous"), ("target", "target")], rows=[data])


def subscriptions(
    namespace: Annotated[
        Optional[list[str]],
        typer.Option(
            "-n", "--namespace", help="Only these namespaces (tenant/ns); repeatable. Default: all.", show_default=False
        ),
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Parallel admin requests.", min=1, max=64)] = 8,
) -> None:
    """Every subscription that uses transactions, from the pending-ack topics of all namespaces."""
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions

    env = current()
    data = transactional_subscriptions(env.admin(), namespaces=namespace, concurrency=concurrency)
    for entry in data:
        if entry["status"] != "ok":
            choices = ", ".join(f"{c['topic']} / {c['subscription']}" for c in entry.get("candidates", []))
            env.warn(f"{entry['pendingAckTopic']}: {entry['status']} ({choices})")
    _emit(data, [("topic", "topic"), ("subscription", "subscription"), ("status", "status")])


# --- parsing ---------------------------------------------------------------------------------------


def parse_txn_id(text: str | None, most: int | None, least: int | None) -> tuple[int, int]:
    """(most, least) from `(most,least)` or from -m/-l (exactly one of the two forms)."""
    if text is not None:
        if most is not None or least is not None:
            raise UsageError("give the transaction id either as (most,least) or with -m/-l, not both")
        return tuple(TxnID.parse(text))
    if most is None or least is None:
        raise UsageError("give the transaction id as (most,least), or both -m/--most-sig-bits and -l/--least-sig-bits")
    return most, least


# --- rendering ----------------------------------------------------------------------------------------

STATS_COLUMNS = [
    ("id", "id"),
    ("state", "state"),
    ("leastSigBits", "sequence id"),
    ("lowWaterMark", "low water mark"),
    ("ongoingTxnSize", "ongoing"),
    ("recoverStartTime", "recover start"),
    ("recoverEndTime", "recover end"),
]
# A pending-ack handle has no id, sequence id or low water mark of its own (those are a coordinator's).
PENDING_ACK_COLUMNS = [
    ("topic", "topic"),
    ("subscription", "subscription"),
    ("state", "state"),
    ("ongoingTxnSize", "ongoing"),
    ("recoverStartTime", "recover start"),
    ("recoverEndTime", "recover end"),
]
TXN_COLUMNS = [
    ("txnId", "txn id"),
    ("status", "status"),
    ("openTimestamp", "opened"),
    ("timeoutAt", "timeout"),
    ("producedPartitions", "produced"),
    ("ackedPartitions", "acked"),
]
ML_COLUMNS = [
    ("managedLedgerName", "managed ledger"),
    ("ledgers", "ledgers"),
    ("ledgerIds", "ledger ids"),
    ("numberOfEntries", "entries"),
    ("totalSize", "bytes"),
    ("lastConfirmedEntry", "last confirmed"),
    ("state", "state"),
]


def _emit(data, columns, *, rows=None, records=None, lines=None) -> None:
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    if rows is None:
        rows = data if isinstance(data, list) else [data or {}]
    emit(Result(data=data, records=records, tables=[Table(columns, rows)], lines=lines or []), env)


def _timed(rows, keys=("recoverStartTime", "recoverEndTime")):
    """Rows with millisecond timestamps shown as UTC times (tables only)."""
    from pulsar_txn_cli.output.units import iso_millis

    return [{**row, **{k: iso_millis(row.get(k)) for k in keys if k in row}} for row in rows]


def _txn_row(meta: dict) -> dict:
    from pulsar_txn_cli.output.units import duration, iso_millis

    # timeoutAt is the transaction's timeout, a duration in ms, despite its name (a real broker's
    # answer: docs/real-broker-findings.md); shown as one, never as a date in 1970.
    timeout = meta.get("timeoutAt")
    return {
        **meta,
        "openTimestamp": iso_millis(meta.get("openTimestamp")),
        "timeoutAt": None if timeout is None else duration(timeout),
        "producedPartitions": sorted(meta.get("producedPartitions") or {}),
        "ackedPartitions": sorted(
            f"{t} / {s}" for t, subs in (meta.get("ackedPartitions") or {}).items() for s in subs
        ),
    }


def _ml_summary(log_stats: dict) -> dict:
    ml = log_stats.get("managedLedgerInternalStats") or {}
    ledgers = ml.get("ledgers") or []
    return {
        "managedLedgerName": log_stats.get("managedLedgerName"),
        "ledgers": len(ledgers),
        "ledgerIds": [l.get("ledgerId") for l in ledgers],
        "numberOfEntries": ml.get("numberOfEntries"),
        "totalSize": ml.get("totalSize"),
        "lastConfirmedEntry": ml.get("lastConfirmedEntry"),
        "state": ml.get("state"),
    }


def _emit_log_stats(data, key: str) -> None:
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    stats = (data or {}).get(key) or {}
    ml = stats.get("managedLedgerInternalStats") or {}
    summary = Table(ML_COLUMNS, [_ml_summary(stats)], title="managed ledger")
    ledgers = Table(
        [("ledgerId", "ledger id"), ("entries", "entries"), ("size", "bytes"), ("offloaded", "offloaded")],
        ml.get("ledgers") or [],
        title="ledgers",
    )
    cursors = Table(
        [
            ("name", "cursor"),
            ("markDeletePosition", "mark delete"),
            ("readPosition", "read position"),
            ("individuallyDeletedMessages", "deleted ranges"),
        ],
        [{"name": name, **c} for name, c in (ml.get("cursors") or {}).items()],
        title="cursors",
    )
    emit(Result(data=data, tables=[summary, ledgers, cursors]), env)
