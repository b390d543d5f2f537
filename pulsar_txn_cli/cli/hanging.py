"""`pulsar-txn find-hanging` and `abort-hanging` (kafka-transactions.sh's names, KIP-664): hanging
transactions across every coordinator, and their bulk abort, filtered, dry run first, audited."""

from __future__ import annotations

import threading
from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command, confirm
from pulsar_txn_cli.cli.doctor import OlderThanOpt, parse_older_than
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ConnectionFailed, ExitCode, PulsarTxnError, UsageError
from pulsar_txn_cli.output.units import counted

TopicOpt = Annotated[
    Optional[str],
    typer.Option(
        "-t", "--topic", help="Only transactions that produced to or acknowledged on this topic.", show_default=False
    ),
]
CoordinatorOpt = Annotated[
    Optional[int],
    typer.Option("-c", "--coordinator-id", help="Only this coordinator's transactions.", show_default=False),
]
StateOpt = Annotated[
    Optional[list[str]],
    typer.Option(
        "--state",
        metavar="STATE",
        show_default=False,
        help="Only OPEN, COMMITTING or ABORTING (repeatable; default: all).",
    ),
]

COLUMNS = [
    ("txnId", "TXN ID"),
    ("status", "STATUS"),
    ("ownerBroker", "OWNER"),
    ("age", "AGE"),
    ("timeout", "TIMEOUT"),
    ("producedPartitions", "PARTITIONS"),
    ("readersHeld", "READERS HELD"),
]


class AbortFailed(PulsarTxnError):
    exit_code = ExitCode.CONNECTION


def register(app: typer.Typer) -> None:
    command(app, "find-hanging", target=True)(find_hanging)
    command(app, "abort-hanging", target=True)(abort_hanging)


def _find(env, older_than, topic, coordinator_id, state):
    from pulsar_txn_cli.doctor.hanging import find

    bound = parse_older_than(older_than)
    admin = env.admin()
    if topic:
        _require_topic(admin, topic)
    with env.progress(None, "reading open transactions"):
        found = find(admin, older_than_ms=bound, topic=topic, coordinator_id=coordinator_id, states=state)
    found.update(target=admin.target.describe(), olderThanMs=bound)
    return admin, found


def _require_topic(admin, topic: str) -> None:
    """A topic that does not exist is one sentence (404, exit 4), as stuck-readers says it, not "0 hanging
    transactions" on a typo: its (first partition's) transaction buffer is asked for."""
    from pulsar_txn_cli.stuck_readers import partitions_of

    admin.transaction_buffer_stats(partitions_of(admin, topic, None)[0])


def _rows(transactions: list[dict]) -> list[dict]:
    from pulsar_txn_cli.output.units import duration

    return [
        {
            **t,
            "age": duration(t["ageMs"]) + (" (past timeout)" if t["pastTimeout"] else ""),
            "timeout": duration(t["timeoutMs"]),
            "readersHeld": " ".join(f"{h['topic']} ({h['entriesBehind']} behind)" for h in t["readersHeld"]) or "-",
        }
        for t in transactions
    ]


def find_hanging(
    older_than: OlderThanOpt = None,
    topic: TopicOpt = None,
    coordinator_id: CoordinatorOpt = None,
    state: StateOpt = None,
) -> None:
    """List hanging transactions: open past their timeout, or longer than --older-than, across every coordinator.

    Each comes with its partitions, the broker that owns its coordinator, its age and timeout, and the
    readers it holds (partitions whose maxReadPosition stops before its first message), oldest first.
    A coordinator that cannot list its transactions (as after a broker restart) is named, and the exit code is 4.
    """
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    _, found = _find(env, older_than, topic, coordinator_id, state)
    txns = found["transactions"]
    bound = "half its timeout" if found["olderThanMs"] is None else f"{older_than}"
    lines = [
        f"{counted(len(txns), 'hanging transaction')} on {found['target']} (open longer than {bound}, or past the timeout)"
    ]
    lines += _not_covered(found)
    emit(Result(data=found, records=txns, tables=[Table(COLUMNS, _rows(txns))] if txns else [], lines=lines), env)
    _fail_if_unlisted(found)


def _not_covered(found: dict) -> list[str]:
    """The line that says what the list leaves out where Pulsar 5.0's scalable-topics coordinator is on."""
    second = found.get("secondCoordinator")
    return [f"not covered: {second['notCovered']}"] if second else []


def _fail_if_unlisted(found: dict) -> None:
    """A list with coordinators missing must not read as complete: exit 4, naming them and why."""
    rows = found["unlistedCoordinators"]
    if rows:
        ids = ", ".join(str(r["coordinatorId"]) for r in rows)
        raise ConnectionFailed(
            f"{'coordinator' if len(rows) == 1 else 'coordinators'} {ids} could not list their open transactions, so some may be missing above: "
            f"{rows[0]['error']}"
        )


def abort_hanging(
    older_than: OlderThanOpt = None,
    topic: TopicOpt = None,
    coordinator_id: CoordinatorOpt = None,
    state: StateOpt = None,
    execute: Annotated[bool, typer.Option("--execute", help="Abort them (without it: a dry run).")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="With --execute: do not ask for confirmation.")] = False,
    reason: Annotated[
        Optional[str], typer.Option("--reason", metavar="TEXT", help="Why, for the audit record.", show_default=False)
    ] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=32, help="Aborts in flight at once.")] = 4,
) -> None:
    """Abort hanging transactions in bulk (PIP-325's endpoint, Pulsar 3.2+): a dry run unless --execute.

    The dry run prints exactly the transactions --execute would abort. Each abort prints one result
    line; every attempt is appended to an audit record (when, by whom, why, the result) kept per
    cluster where `pulsar-txn state list` shows it.
    """
    from pulsar_txn_cli.doctor.hanging import abort, check_abort_supported
    from pulsar_txn_cli.output import Result, Table, emit

    if yes and not execute:
        raise UsageError("--yes only applies with --execute (without it, abort-hanging is a dry run)")
    env = current()
    admin, found = _find(env, older_than, topic, coordinator_id, state)
    txns = found["transactions"]
    table = [Table(COLUMNS, _rows(txns))] if txns else []
    for line in _not_covered(found):
        env.warn(line.removeprefix("not covered: "))
    if not txns:
        env.info(f"no hanging transaction on {found['target']} matches; nothing to abort")
        emit(Result(data={**found, "dryRun": not execute, "results": []}, records=[], tables=[]), env)
        _fail_if_unlisted(found)
        return
    check_abort_supported(found["versions"])
    if not execute:
        lines = [
            f"dry run: would abort {counted(len(txns), 'transaction')} on {found['target']}; add --execute to abort them"
        ]
        # -o jsonl: each line says it was a dry run, as -o json's document does
        records = [{**t, "dryRun": True} for t in txns]
        emit(Result(data={**found, "dryRun": True, "results": []}, records=records, tables=table, lines=lines), env)
        _fail_if_unlisted(found)
        return
    if not yes:
        listed = ", ".join(t["txnId"] for t in txns[:5]) + (f" and {len(txns) - 5} more" if len(txns) > 5 else "")
        confirm(f"Abort {counted(len(txns), 'transaction')} ({listed}) on {found['target']}?")
    results = _abort(env, admin, txns, found, older_than, reason, concurrency, abort)
    data = {**found, "dryRun": False, "results": results}
    emit(
        Result(
            data=data,
            records=[{**r, "dryRun": False} for r in results],
            tables=[Table([("txnId", "TXN ID"), ("aborted", "ABORTED"), ("error", "ERROR")], results)],
        ),
        env,
    )
    failed = [r for r in results if not r["aborted"]]
    if failed:
        raise AbortFailed(
            f"{len(failed)} of {counted(len(results), 'abort')} failed; the first: {failed[0]['txnId']}: {failed[0]['error']}"
        )
    _fail_if_unlisted(found)


def _abort(env, admin, txns, found, older_than, reason, concurrency, abort) -> list[dict]:
    """Abort, printing and auditing each result as it comes (a Ctrl-C keeps the lines already written)."""
    import getpass
    import socket
    import time

    from pulsar_txn_cli.output.units import iso_seconds
    from pulsar_txn_cli.target import remembered

    identity = admin.identity()
    by = f"{getpass.getuser()}@{socket.gethostname()}"
    why = reason or f"abort-hanging: open longer than {older_than or 'half its timeout'} or past its timeout"
    meta = {t["txnId"]: t for t in txns}
    lock = threading.Lock()

    def on_result(result):
        txn = meta[result["txnId"]]
        record = {
            **result,
            "at": iso_seconds(int(time.time() * 1000)),  # when, on this machine's clock (the audit's)
            "by": by,
            "why": why,
            "ageMs": txn["ageMs"],
            "producedPartitions": txn["producedPartitions"],
            "ackedSubscriptions": txn["ackedSubscriptions"],
            "via": found["target"],
        }
        with lock:
            path = remembered.append_aborts(identity, [record])
            env.info(
                f"{'aborted' if result['aborted'] else 'FAILED'} {result['txnId']}"
                + (f": {result['error']}" if result["error"] else "")
            )
        found["audit"] = str(path)

    statuses = {t["txnId"]: t.get("status") for t in txns}
    results = abort(admin, [t["txnId"] for t in txns], concurrency=concurrency, on_result=on_result, statuses=statuses)
    env.info(f"audit: {found.get('audit')} (`pulsar-txn state list` shows it)")
    return results
