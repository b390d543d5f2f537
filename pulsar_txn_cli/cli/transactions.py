"""Transaction stats with `pulsar-admin transactions` option names, on a cluster or the engine.

Every command is declared in calls.py (its request, options, help and columns); this module
registers them all in one loop. A plain call is invoked and its answer shown as its declaration says;
a command that does more (a fan-out, a fallback, a confirmation) has its body below, in BODIES.
Pulsar's JSON is rendered unchanged for -o json/jsonl; tables pick the fields an operator reads first.
"""

from __future__ import annotations

import typer

from pulsar_txn_cli.calls import BY_NAME, COMMANDS, TXN_COLUMNS, AdminCall
from pulsar_txn_cli.cli.common import command, confirm, declared
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ConnectionFailed, PulsarTxnError, UsageError
from pulsar_txn_cli.names import TxnID
from pulsar_txn_cli.output.units import parse_duration_ms


def register(app: typer.Typer) -> None:
    for call in COMMANDS:
        body = BODIES.get(call.name) or plain(call)
        command(app, call.name, target=True)(declared(call, body))


def plain(call: AdminCall):
    """The body of a call that is one request: invoke it and show the answer as declared."""

    def body(**values) -> None:
        admin = current().admin()
        data = _for_coordinator(admin, values.get("coordinator_id"), lambda: admin.invoke(call, **values))
        if call.log_stats:
            _emit_log_stats(data, call.log_stats)
            return
        row = {**{key: ECHO[key](values) for key in call.echo}, **(data or {})}
        _emit(data, shown_columns(call, values), rows=_timed([row], call.times))

    return body


def shown_columns(call: AdminCall, values: dict) -> list[tuple[str, str]]:
    """The declared columns; one that names a flag only when that flag was given."""
    return [(c[0], c[1]) for c in call.columns if len(c) == 2 or values.get(c[2])]


def _position(values: dict) -> str:
    batch = values.get("batch_index")
    return f"{values['ledger_id']}:{values['entry_id']}" + (f":{batch}" if batch is not None else "")


# The inputs a row can show before the answer's fields (AdminCall.echo).
ECHO = {
    "txnId": lambda v: f"({v['most']},{v['least']})",
    "topic": lambda v: v["topic"],
    "subscription": lambda v: v["subscription"],
    "position": _position,
}


# --- the bodies of the commands that are more than one request ------------------------------------


def coordinators_list() -> None:
    env = current()
    admin = env.admin()
    data = admin.coordinators()
    _emit(data, shown_columns(BY_NAME["coordinators-list"], {}))
    _second_coordinator(env, admin, "this list")


def _second_coordinator(env, admin, what: str, classic: dict | None = None) -> None:
    """One warning where Pulsar 5.0's scalable-topics coordinator is on: what the answer above leaves out and
    how many transactions the buffers count beyond the classic coordinators' (scalable_coordinator.py)."""
    from pulsar_txn_cli.scalable_coordinator import detect

    view = detect(admin, classic)
    if view is not None:
        env.warn(view.sentence(what))


def coordinator_stats(coordinator_id: int | None) -> None:
    env = current()
    if coordinator_id is None:
        data, missing = env.admin().coordinator_stats_each()
        for tc_id, reason in missing.items():
            env.warn(f"coordinator {tc_id} is left out: {reason}")
    else:
        admin = env.admin()
        data = _for_coordinator(admin, coordinator_id, lambda: admin.coordinator_stats(coordinator_id))
    rows = (
        [{"coordinatorId": coordinator_id, **data}]
        if coordinator_id is not None
        else [{"coordinatorId": int(k), **v} for k, v in sorted((data or {}).items(), key=lambda kv: int(kv[0]))]
    )
    call = BY_NAME["coordinator-stats"]
    _emit(
        data,
        shown_columns(call, {}),
        rows=_timed(rows, call.times),
        records=rows if coordinator_id is None else None,
    )
    _second_coordinator(env, env.admin(), "these stats")


def _for_coordinator(admin, coordinator_id: int | None, request):
    """request(); its 404 for a coordinator id the target does not have names the ids it has."""
    try:
        return request()
    except ConnectionFailed as exc:
        if exc.status != 404 or coordinator_id is None:
            raise
        try:
            count = admin.tc_partitions()
        except PulsarTxnError:
            raise exc from None
        if count < 1 or 0 <= coordinator_id < count:
            raise
        ids = "its only coordinator is 0" if count == 1 else f"its {count} coordinators are 0 to {count - 1}"
        raise ConnectionFailed(
            f"{admin.target.describe()} has no coordinator {coordinator_id}: {ids} "
            "(`pulsar-txn coordinators-list` shows them)",
            status=404,
        ) from None


def transaction_metadata(txn_id: str | None, most: int | None, least: int | None) -> None:
    env = current()
    most, least = parse_txn_id(txn_id, most, least)
    admin = env.admin()
    data = _classic_only(admin, most, least, lambda: admin.transaction_metadata(most, least), "look up")
    _emit(data, list(TXN_COLUMNS), rows=[_txn_row(data or {})])


def _classic_only(admin, most: int, least: int, request, verb: str):
    """request(); its 404 for an id no classic coordinator has, where Pulsar 5.0's scalable-topics coordinator
    is on, says the id may be that coordinator's, which the admin API cannot {verb}."""
    try:
        return request()
    except ConnectionFailed as exc:
        if exc.status != 404:
            raise
        from pulsar_txn_cli.scalable_coordinator import SETTING, detect

        try:
            classic = admin.tc_partitions()
        except PulsarTxnError:
            raise exc from None
        if 0 <= most < classic or detect(admin, {}) is None:
            raise
        raise ConnectionFailed(
            f"no classic transaction coordinator has ({most},{least}) (their ids are 0 to {classic - 1}): it may be "
            f"a transaction of Pulsar 5.0's scalable-topics coordinator ({SETTING} is on), which the admin API "
            f"cannot {verb}; it ends when its client ends it or at its timeout",
            status=404,
        ) from None


def abort_transaction(txn_id: str | None, most: int | None, least: int | None, yes: bool) -> None:
    env = current()
    most, least = parse_txn_id(txn_id, most, least)
    admin = env.admin()
    if not yes:
        confirm(f"Abort transaction ({most},{least}) on {admin.target.describe()}?")
    _classic_only(admin, most, least, lambda: admin.abort_transaction(most, least), "abort")
    data = {"txnId": f"({most},{least})", "aborted": True, "target": admin.target.describe()}
    env.info(f"transaction ({most},{least}) aborted on {admin.target.describe()}")
    _emit(data, shown_columns(BY_NAME["abort-transaction"], {}), rows=[data])


def slow_transactions(time: str, coordinator_id: int | None) -> None:
    admin = current().admin()
    timeout_ms = parse_duration_ms(time)
    data = _for_coordinator(admin, coordinator_id, lambda: admin.slow_transactions(timeout_ms, coordinator_id)) or {}
    from pulsar_txn_cli.natural import natural_key

    rows = [_txn_row(v) for _, v in sorted(data.items(), key=lambda kv: natural_key(kv[0]))]
    _emit(data, list(TXN_COLUMNS), rows=rows, records=list(data.values()))
    _second_coordinator(current(), admin, "this list")


def buffer_snapshot_internal_stats(topic: str, metadata: bool) -> None:
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


def scale_coordinators(replicas: int, yes: bool) -> None:
    from pulsar_txn_cli.protocol import MAX_COORDINATORS

    if replicas > MAX_COORDINATORS:
        raise UsageError(
            f"--replicas {replicas} is more than {MAX_COORDINATORS}, pulsar-txn's bound: the number of transaction "
            "coordinators can never shrink again, and each one is a partition with its own transaction log "
            "(Pulsar itself only checks that the number grows)"
        )
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
    _emit(data, shown_columns(BY_NAME["scale-transactionCoordinators"], {}), rows=[data])


def subscriptions(namespace: list[str] | None, concurrency: int) -> None:
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions

    env = current()
    data = transactional_subscriptions(env.admin(), namespaces=namespace, concurrency=concurrency)
    for entry in data:
        if entry["status"] != "ok":
            choices = ", ".join(f"{c['topic']} / {c['subscription']}" for c in entry.get("candidates", []))
            env.warn(f"{entry['pendingAckTopic']}: {entry['status']} ({choices})")
    _emit(data, shown_columns(BY_NAME["subscriptions"], {}))


BODIES = {
    "coordinators-list": coordinators_list,
    "coordinator-stats": coordinator_stats,
    "transaction-metadata": transaction_metadata,
    "abort-transaction": abort_transaction,
    "slow-transactions": slow_transactions,
    "buffer-snapshot-internal-stats": buffer_snapshot_internal_stats,
    "scale-transactionCoordinators": scale_coordinators,
    "subscriptions": subscriptions,
}


# --- parsing ---------------------------------------------------------------------------------------


def parse_txn_id(text: str | None, most: int | None, least: int | None) -> tuple[int, int]:
    """(most, least) from `(most,least)` or from -m/-l (exactly one of the two forms)."""
    if text is not None:
        if most is not None or least is not None:
            raise UsageError("give the transaction id either as (most,least) or with -m/-l, not both")
        most, least = TxnID.parse(text)
    elif most is None or least is None:
        raise UsageError("give the transaction id as (most,least), or both -m/--most-sig-bits and -l/--least-sig-bits")
    for value, what in ((most, "most significant bits"), (least, "least significant bits")):
        if not 0 <= value < 2**63:  # each half is a Java long, never negative in an id a coordinator gives
            raise UsageError(f"the transaction id's {what} must be from 0 to 2^63-1 (a Java long), not {value}")
    return most, least


# --- rendering ----------------------------------------------------------------------------------------

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


def _timed(rows, keys):
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
