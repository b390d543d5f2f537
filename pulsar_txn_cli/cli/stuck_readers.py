"""`pulsar-txn stuck-readers`: partitions whose readers wait behind open transactions."""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.stuck_readers import CAUSE_OPEN_TXN, CAUSE_RECOVERING
from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.output.units import counted


def register(app: typer.Typer) -> None:
    command(app, "stuck-readers", target=True)(stuck_readers)


def stuck_readers(
    topic: Annotated[
        Optional[str],
        typer.Option("-t", "--topic", help="A topic (all its partitions when partitioned).", show_default=False),
    ] = None,
    namespace: Annotated[
        Optional[str],
        typer.Option("-n", "--namespace", help="Every topic of a namespace, tenant/namespace.", show_default=False),
    ] = None,
    show_all: Annotated[bool, typer.Option("--all", help="Also list partitions that are not held back.")] = False,
) -> None:
    """Which partitions hold readers back behind open transactions, by whom, since when, how far.

    Readers stop at a partition's maxReadPosition, just before the first message of the oldest open transaction written there. Each holder comes with its transaction metadata and the commands that abort it. A geo-replicator reads only up to maxReadPosition too: a held partition names each replicator held with it and the entries it cannot replicate.
    """
    from pulsar_txn_cli.output import Result, Table, emit
    from pulsar_txn_cli.stuck_readers import find_stuck_readers

    env = current()
    if bool(topic) == bool(namespace):
        raise UsageError("give exactly one of -t/--topic or -n/--namespace")
    if namespace and namespace.count("/") != 1:
        raise UsageError(f"namespace {namespace!r} is not tenant/namespace")
    admin = env.admin()
    now, clock = admin.clock()  # the target's: an engine's virtual time is not this machine's
    report = find_stuck_readers(admin, topic=topic, namespace=namespace, now_ms=now, include_all=show_all)
    report.update(nowMs=now, clock=clock)
    from pulsar_txn_cli.cli.advice import carry_target, command

    for partition in report["partitions"]:
        for holder in partition.get("holders", []):
            holder["fix"] = [command(c, env) for c in holder["fix"]]
    rows = [_row(p) for p in report["partitions"]]
    by_txns = report["held"] - report["recovering"]
    summary = f"{by_txns} of {counted(report['checked'], 'partition')} held back by open transactions"
    if report["recovering"]:
        summary += f", {report['recovering']} by a transaction buffer that has not finished recovering"
    lines = [summary if report["checked"] else f"nothing to check: {namespace or topic} has no topics"]
    for partition in report["partitions"]:
        for holder in partition.get("holders", []):
            lines.append(f"  {holder['txnId']} on {partition['topic']}: " + "  |  ".join(holder["fix"]))
        for replicator in partition.get("replicators", []):
            lines.append(
                f"  replication of {partition['topic']} to {replicator['cluster']} is held too: "
                f"{replicator['entriesHeld']} entries not replicated (cursor {replicator['cursor']} at "
                f"{replicator['markDeletePosition']}, backlog {replicator['replicationBacklog']})"
            )
        if partition.get("note"):
            lines.append(carry_target(f"  {partition['topic']}: {partition['note']}", env))
        if partition.get("error"):
            env.warn(f"{partition['topic']}: {partition['error']}")
    for unlisted in report["unlistedCoordinators"]:  # the holders shown may miss its transactions
        env.warn(f"coordinator {unlisted['coordinatorId']} could not be listed: {unlisted['error']}")
    columns = [
        ("topic", "TOPIC"),
        ("state", "STATE"),
        ("maxReadPosition", "MAX READ"),
        ("lastConfirmedEntry", "LAST WRITTEN"),
        ("entriesBehind", "BEHIND"),
        ("heldSince", f"HELD SINCE ({clock})"),
        ("holders", "HOLDERS (head first)"),
    ]
    emit(Result(data=report, records=report["partitions"], tables=[Table(columns, rows)], lines=lines), env)


def _row(partition: dict) -> dict:
    from pulsar_txn_cli.output.units import duration, spaced_seconds

    holders = partition.get("holders", [])
    since = partition.get("heldSince")
    age = holders[0]["ageMs"] if holders else None
    return {
        **partition,
        "heldSince": f"{spaced_seconds(since)} ({duration(age)} ago)"
        if since
        else ("-" if partition.get("cause") != CAUSE_OPEN_TXN else "unknown"),
        "holders": " ".join(h["txnId"] for h in holders)
        or {CAUSE_RECOVERING: "(buffer recovering)", CAUSE_OPEN_TXN: "?"}.get(partition.get("cause"), "-"),
        "entriesBehind": partition.get("entriesBehind", partition.get("error", "")),
    }
