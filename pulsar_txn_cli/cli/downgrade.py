"""`pulsar-txn downgrade check|status|reset` and `pulsar-txn upgrade check`: PIP-160's procedures.

The verdict line names the target; exit codes: SAFE/COMPLETE 0, WAIT/INCOMPLETE 5, BLOCKED 6,
connection or HTTP error 4 (errors.Verdict is raised after the verdict is printed).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli import helptext
from pulsar_txn_cli.cli.collect import (
    BookkeeperClasspathOpt,
    BookkeeperShellOpt,
    LedgerTimeoutOpt,
    MetadataServiceUriOpt,
)
from pulsar_txn_cli.cli.common import command, gave_up, interval_for
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ExitCode, UsageError, Verdict
from pulsar_txn_cli.output.units import counted

CheckpointOpt = Annotated[
    Optional[str],
    typer.Option(
        "--checkpoint",
        metavar="FILE",
        show_default=False,
        help="Checkpoint file (default: one per target in the user state directory).",
    ),
]
ConcurrencyOpt = Annotated[int, typer.Option("--concurrency", min=1, max=256, help="Admin calls in flight at once.")]

DEFAULT_INTERVAL = 30.0  # seconds between checks with --wait

EXIT = {
    "SAFE": ExitCode.OK,
    "COMPLETE": ExitCode.OK,
    "WAIT": ExitCode.NOT_YET,
    "INCOMPLETE": ExitCode.NOT_YET,
    "BLOCKED": ExitCode.BLOCKED,
}


def register(app: typer.Typer) -> None:
    downgrade = typer.Typer(
        cls=helptext.Group,
        help="PIP-160's downgrade procedure, checked: is it safe to go back to a broker "
        "version that cannot read batched transaction logs?",
        no_args_is_help=True,
    )
    command(downgrade, "check", target=True)(check)
    command(downgrade, "status", target=True)(status)
    command(downgrade, "reset", target=True)(reset)
    app.add_typer(downgrade, name="downgrade")
    upgrade = typer.Typer(cls=helptext.Group, help="PIP-160's upgrade order, checked.", no_args_is_help=True)
    command(upgrade, "check", target=True)(upgrade_check)
    app.add_typer(upgrade, name="upgrade")


def check(
    checkpoint: CheckpointOpt = None,
    concurrency: ConcurrencyOpt = 16,
    wait: Annotated[
        bool, typer.Option("--wait", help="Check again every --interval seconds until SAFE (or BLOCKED).")
    ] = False,
    interval: Annotated[
        Optional[float],
        typer.Option(
            "--interval",
            metavar="S",
            show_default="30",
            help="Seconds between checks with --wait (at least 1, as the exporter's).",
        ),
    ] = None,
    timeout: Annotated[
        Optional[float],
        typer.Option(
            "--timeout",
            min=0.0,
            metavar="S",
            show_default=False,
            help="Give up waiting after S seconds (verdict WAIT).",
        ),
    ] = None,
    verify_entries: Annotated[
        Optional[list[str]],
        typer.Option(
            "--verify-entries",
            metavar="DUMP",
            show_default=False,
            help="Also decode this dump of the remaining ledgers (repeatable; files, directories, globs; any dump "
            "format) and fail if a batched entry remains in a ledger the ids said was clear.",
        ),
    ] = None,
    confirm_from_bookies: Annotated[
        bool,
        typer.Option(
            "--confirm-from-bookies",
            help="Before saying SAFE, read every remaining ledger of every transaction log with BookKeeper's shell "
            "(as `collect` does; the engine's own store on an engine) and say BLOCKED if one holds a batched entry.",
        ),
    ] = False,
    bookkeeper_shell: BookkeeperShellOpt = None,
    bookkeeper_classpath: BookkeeperClasspathOpt = None,
    metadata_service_uri: MetadataServiceUriOpt = None,
    ledger_timeout: LedgerTimeoutOpt = 600.0,
) -> None:
    """Is it safe to downgrade? PIP-160's step 1 and steps 2-1..2-7, checked.

    Step 1: batching off everywhere, effectively. The first check after batching is effectively off records, per coordinator and subscription,
    the last ledger that may hold batched entries, in a checkpoint file kept per target; later
    checks (hours later, from any shell) compare each log's oldest ledger with that record.
    With --confirm-from-bookies a SAFE is confirmed by decoding what the bookies store.
    Exit codes: SAFE 0, WAIT 5, BLOCKED 6, connection or HTTP error 4.
    """
    path = None
    try:  # from the first line: a Ctrl-C while the modules load says what was kept too
        from pulsar_txn_cli.downgrade import runner

        interval = _check_options(wait, interval, timeout, verify_entries)
        bookies = dict(
            script=bookkeeper_shell, classpath=bookkeeper_classpath, uri=metadata_service_uri, timeout=ledger_timeout
        )
        env = current()
        admin = env.admin()
        confirm = _confirmation(admin, confirm_from_bookies, bookies, concurrency)
        path = runner.checkpoint_path(admin, checkpoint)
        options = dict(concurrency=concurrency, verify=verify_entries or None, confirm=confirm)
        result = _run_checks(env, admin, path, options, wait=wait, interval=interval, timeout=timeout)
        still = result.verdict.verdict
        last = gave_up(timeout, still) if wait and still not in ("SAFE", "BLOCKED") else None
        second = _second_coordinator(result)
        _emit_downgrade(env, result, named_checkpoint=checkpoint is not None, last=last, second=second)
    except KeyboardInterrupt:
        from pulsar_txn_cli.errors import InterruptedWork

        raise InterruptedWork(_interrupted_check(path)) from None


def _check_options(wait: bool, interval: float | None, timeout, verify_entries) -> float:
    """Refuse what cannot apply before any check; the interval to wait between checks."""
    if timeout is not None and not wait:
        raise UsageError("--timeout only applies with --wait")
    interval = interval_for(interval, DEFAULT_INTERVAL, applies=wait)
    if verify_entries:
        from pulsar_txn_cli.pipeline.inputs import expand

        # Before any check: a missing, empty or unreadable dump is an error now, not a WAIT that
        # --wait would poll forever.
        expand(verify_entries, format_option=None)
    return interval


def _confirmation(admin, wanted: bool, bookies: dict, concurrency: int):
    """What reads the remaining ledgers for --confirm-from-bookies (collect/scan.py), or None."""
    given = [flag for flag, key in BOOKIE_FLAGS if bookies[key] is not None]
    if not wanted:
        if given:
            raise UsageError(f"{given[0]} only applies with --confirm-from-bookies")
        return None
    if admin.target.kind == "engine":
        if given:
            raise UsageError(
                f"{given[0]}: the embedded engine has no bookies; --confirm-from-bookies reads its own store"
            )
    elif bool(bookies["script"]) == bool(bookies["classpath"]):
        raise UsageError(
            "--confirm-from-bookies reads the ledgers with BookKeeper's shell: give --bookkeeper-shell PATH "
            f"(a distribution's bin/bookkeeper) or --bookkeeper-classpath CLASSPATH{', not both' if given else ''}"
        )
    from pulsar_txn_cli.collect.scan import read_remaining

    shell = {"script": bookies["script"], "classpath": bookies["classpath"], "timeout": bookies["timeout"]}
    return lambda: read_remaining(admin, shell_options=shell, metadata_uri=bookies["uri"], concurrency=concurrency)


BOOKIE_FLAGS = (
    ("--bookkeeper-shell", "script"),
    ("--bookkeeper-classpath", "classpath"),
    ("--metadata-service-uri", "uri"),
)


def _interrupted_check(path) -> str:
    """What a Ctrl-C in the middle of a check kept: a check writes its checkpoint only once it is
    whole (atomically, downgrade/checkpoint.py), so the file is as the last whole check left it."""
    if path is None:
        return "interrupted (Ctrl-C) while connecting to the target: no check ran, no checkpoint was touched"
    kept = (
        f"the checkpoint {path} is as the last whole check left it"
        if path.exists()
        else f"no checkpoint was written yet ({path})"
    )
    return f"interrupted (Ctrl-C): {kept}; a check that was cut short records nothing"


def _run_checks(env, admin, path, options: dict, *, wait: bool, interval: float, timeout):
    from pulsar_txn_cli.downgrade import runner

    if wait:
        from pulsar_txn_cli.output.live import LiveView

        with LiveView(env) as view:
            result = runner.wait(
                admin,
                path,
                interval=interval,
                timeout=timeout,
                on_check=lambda r, n, failure: _on_check(env, view, r, n, failure, interval),
                **options,
                progress=None,
            )
    else:
        with env.progress(None, "discovering coordinators and subscriptions") as bar:
            result = runner.check(admin, path, progress=bar, **options)
    return result


def _on_check(env, view, result, n: int, failure, interval: float) -> None:
    """After each check of --wait: a live table of the held logs on a terminal, else one line."""
    line = _progress_line(result, n, failure, interval)
    if not view.active or result is None:
        (env.warn if failure is not None else env.info)(line)
        return
    from pulsar_txn_cli.output import Table

    held = [{"log": i.observation.label, **i.to_json()} for i in result.verdict.items if not i.clear]
    columns = [
        ("log", "log"),
        ("oldestLedgerId", "oldest"),
        ("lastBatchedLedgerId", "last batched"),
        ("cause", "cause"),
    ]
    view.show(Table(columns, held, f"Logs holding the downgrade back ({len(held)})"), line)


def _progress_line(result, n: int, failure, interval: float) -> str:
    if failure is not None:
        return f"check {n} failed: {failure}; retrying in {interval:g}s"
    verdict = result.verdict
    if verdict.verdict in ("SAFE", "BLOCKED"):
        return f"check {n}: {verdict.verdict}"
    items = verdict.items
    held = sum(not i.clear for i in items)
    return (
        f"check {n}: WAIT, {len(items) - held} of {len(items)} logs clear"
        + (f", {counted(len(verdict.problems), 'problem')}" if verdict.problems else "")
        + f"; next check in {interval:g}s"
    )


def _second_coordinator(result) -> dict | None:
    """Pulsar 5.0's scalable-topics coordinator, where a broker has it on: what a rollback to 4.x leaves behind
    (downgrade/second_coordinator.py), beside the verdict on PIP-160's batched logs."""
    from pulsar_txn_cli.downgrade import second_coordinator as second

    view = getattr(result.observations, "second_coordinator", None)
    if view is None:
        return None
    return {**view.to_json(), "rollback": second.rollback_problems(view)}


def _emit_downgrade(
    env, result, named_checkpoint: bool = False, last: str | None = None, second: dict | None = None
) -> None:
    from pulsar_txn_cli.cli.advice import carry_target, command, with_checkpoint
    from pulsar_txn_cli.output import Result, emit

    verdict = result.verdict
    data = {**verdict.to_json(), "checkpoint": str(result.checkpoint_path)}
    if second is not None:
        data["secondCoordinator"] = second
    if result.confirmation is not None:
        data["confirmation"] = result.confirmation.to_json()
    # A check on a --checkpoint file suggests `downgrade reset` and checks of that file, not of the default one.
    named = str(result.checkpoint_path) if named_checkpoint else None

    def pasteable(text: str) -> str:
        return carry_target(with_checkpoint(text, named), env)

    data["fixes"] = [command(with_checkpoint(f, named, quoted=False), env) for f in data["fixes"]]
    for item in data.get("coordinators", []) + data.get("subscriptions", []):
        if item.get("advice"):
            item["advice"] = pasteable(item["advice"])  # the JSON's advice is pasted too
    data["problems"] = [pasteable(p) for p in data.get("problems", [])]
    lines = [pasteable(line) for line in _downgrade_lines(verdict, result, data["fixes"])]
    lines += [f"rollback to 4.x: {sentence}" for sentence in (second or {}).get("rollback", [])]
    lines += [last] if last else []
    emit(Result(data=data, records=[data], tables=lambda: _downgrade_tables(verdict), lines=lines), env)
    if verdict.verdict != "SAFE":
        raise Verdict("", EXIT[verdict.verdict])


def _downgrade_tables(verdict):
    from pulsar_txn_cli.output import Table

    coordinators = [i.to_json() for i in verdict.coordinators]
    held_subs = [i.to_json() for i in verdict.subscriptions if not i.clear]
    columns = [
        ("oldestLedgerId", "oldest"),
        ("lastBatchedLedgerId", "last batched"),
        ("clear", "clear"),
        ("reason", "reason"),
    ]
    tables = [Table([("coordinatorId", "coordinator"), *columns], coordinators, "Coordinators (TC logs)")]
    clear_subs = len(verdict.subscriptions) - len(held_subs)
    title = f"Subscriptions (pending-ack logs) that hold the downgrade back; {clear_subs} more are clear"
    if verdict.subscriptions:
        tables.append(Table([("topic", "topic"), ("subscription", "subscription"), *columns], held_subs, title))
    return tables


def _downgrade_lines(verdict, result, fixes: list[str]) -> list[str]:
    lines = [""]
    advice = {}
    for item in verdict.items:
        if not item.clear and item.advice:
            advice.setdefault(item.advice, []).append(item.observation.label)
    for text, labels in advice.items():
        shown = ", ".join(labels[:3]) + (f" and {len(labels) - 3} more" if len(labels) > 3 else "")
        lines.append(f"advice ({shown}): {text}")
    lines += [f"problem: {p}" for p in verdict.problems]
    lines += [f"fix: {f}" for f in fixes]
    if result.confirmation is not None:
        lines.append(_confirmation_line(result.confirmation))
    recorded = (
        f"; recorded {counted(verdict.newly_recorded, 'new last-batched ledger')} in {result.checkpoint_path}"
        if verdict.newly_recorded
        else ""
    )
    from pulsar_txn_cli.downgrade.verdict import verdict_line

    lines.append(verdict_line(verdict) + recorded)
    return lines


def _confirmation_line(reading) -> str:
    summary = reading.to_json()
    count = summary["batchedEntries"]
    found = (
        f"{counted(count, 'batched entry', 'batched entries')} in {counted(len(summary['batchedLedgers']), 'ledger')}"
        if count
        else "no batched entry"
    )
    unread = f", {counted(len(summary['unread']), 'ledger')} not read" if summary["unread"] else ""
    return (
        f"confirmation: read {counted(summary['ledgers'], 'remaining ledger')} of "
        f"{counted(summary['logs'], 'transaction log')} ({counted(summary['entries'], 'entry', 'entries')}) from {summary['source']}: {found}{unread}"
    )


def status(checkpoint: CheckpointOpt = None) -> None:
    """Show the downgrade checkpoint of the target: the recorded last batched ledgers."""
    from pulsar_txn_cli.downgrade import checkpoint as store
    from pulsar_txn_cli.output import Result, Table, emit
    from pulsar_txn_cli.output.units import iso_seconds

    env = current()
    path, identity = _checkpoint_location(env, checkpoint)
    saved = store.load(path)
    if saved is None:
        data = {"target": identity, "checkpoint": str(path), "exists": False}
        emit(
            Result(
                data=data,
                tables=[],
                lines=[f"no downgrade checkpoint for {identity} ({path}); `pulsar-txn downgrade check` takes one"],
            ),
            env,
        )
        return
    clock = env.admin().clock()[1]  # checks record times on the target's clock (downgrade/gather.py)
    data = {**_in_vocabulary(store.to_json(saved)), "checkpoint": str(path), "exists": True, "clock": clock}
    rows = [{"store": f"coordinator {r['coordinatorId']}", **r} for r in data["coordinators"]] + [
        {"store": f"{r['topic']} / {r['subscription']}", **r} for r in data["subscriptions"]
    ]
    lines = [
        f"checkpoint {path}: target {saved.target}, created {saved.created_at} ({clock}), {counted(saved.size, 'record')}"
    ]
    if saved.target != identity:
        lines.append(f"warning: it belongs to {saved.target!r}, not to the selected target {identity!r}")
    table = Table(
        [("store", "store"), ("lastBatchedLedgerId", "last batched ledger"), ("recordedAt", f"recorded at ({clock})")],
        [{**r, "recordedAt": iso_seconds(r["recordedAt"]) if r["recordedAt"] is not None else "-"} for r in rows],
        "Recorded last batched ledgers",
    )
    emit(Result(data=data, records=rows, tables=[table], lines=lines), env)


# The checkpoint file keeps its moments as ISO text and names the pending-ack log `pendingAck`; the JSON
# shows every moment in epoch ms and every log kind as `tc` or `pending-ack` (docs/output.md).
_MOMENTS = ("createdAt", "recordedAt", "markSince", "writerCountersAt")
_LOGS = {"pendingAck": "pending-ack"}


def _in_vocabulary(value):
    """The checkpoint's document in the JSON vocabulary."""
    from pulsar_txn_cli.output.units import iso_ms

    if isinstance(value, dict):
        return {
            k: iso_ms(v) if k in _MOMENTS else _LOGS.get(v, v) if k == "log" else _in_vocabulary(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_in_vocabulary(v) for v in value]
    return value


def reset(checkpoint: CheckpointOpt = None) -> None:
    """Forget the downgrade checkpoint of the target.

    The next check records again, which can only delay SAFE (newer ledgers get recorded), never
    hasten it.
    """
    from pulsar_txn_cli.downgrade import checkpoint as store
    from pulsar_txn_cli.output import Result, emit

    env = current()
    path, identity = _checkpoint_location(env, checkpoint)
    removed = store.remove(path, ours=checkpoint is None)
    line = (
        f"forgot the downgrade checkpoint of {identity} ({path})"
        if removed
        else f"no downgrade checkpoint for {identity} ({path})"
    )
    emit(Result(data={"target": identity, "checkpoint": str(path), "removed": removed}, tables=[], lines=[line]), env)


def _checkpoint_location(env, override: str | None):
    """The file and the target's identity (asked of the target: admin/identity.py)."""
    from pathlib import Path

    from pulsar_txn_cli.downgrade import checkpoint as store

    identity = env.admin().identity()
    return (Path(override).expanduser() if override else store.default_path(identity)), identity


def upgrade_check(concurrency: ConcurrencyOpt = 16) -> None:
    """Is the upgrade complete? PIP-160's upgrade order, checked.

    Every broker on one version, then batching enabled in every broker's runtime configuration and
    effective on every coordinator and subscription. Exit codes: COMPLETE 0, INCOMPLETE 5, BLOCKED 6, connection or HTTP error 4."""
    from pulsar_txn_cli.downgrade import gather
    from pulsar_txn_cli.downgrade.upgrade import upgrade_verdict
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    admin = env.admin()
    with env.progress(None, "discovering coordinators and subscriptions") as bar:
        observations = gather.gather(admin, concurrency=concurrency, progress=bar, versions=True)
    verdict = upgrade_verdict(observations)
    data = verdict.to_json()
    from pulsar_txn_cli.cli.advice import carry_target, command

    data["fixes"] = [command(f, env) for f in data["fixes"]]

    def tables():
        from pulsar_txn_cli.protocol import PENDING_ACK_BATCH_KEY, TC_BATCH_KEY

        off = [r for r in data["coordinators"] + data["subscriptions"] if r["effectiveBatching"] is not True]
        return [
            Table(
                [
                    ("broker", "broker"),
                    ("version", "version"),
                    (TC_BATCH_KEY, "tc batching"),
                    (PENDING_ACK_BATCH_KEY, "pending-ack batching"),
                    ("error", "error"),
                ],
                data["brokers"],
                "Brokers",
            ),
            Table(
                [
                    ("coordinatorId", "coordinator"),
                    ("topic", "topic"),
                    ("subscription", "subscription"),
                    ("effectiveBatching", "batching"),
                    ("reason", "reason"),
                ],
                off,
                f"Logs where batching is not effective ({len(off)} of "
                f"{len(data['coordinators']) + len(data['subscriptions'])})",
            ),
        ]

    lines = [""] + [f"problem: {carry_target(p, env)}" for p in verdict.problems] + [f"fix: {f}" for f in data["fixes"]]
    what = {
        "COMPLETE": "the upgrade is complete: one broker version, batching on and effective everywhere",
        "INCOMPLETE": "the upgrade is not complete yet (see the problems above)",
        "BLOCKED": "batching is on while brokers run different versions; turn it off first",
    }[verdict.verdict]
    lines.append(f"{verdict.verdict}: {verdict.target}: {what}")
    emit(Result(data=data, records=[data], tables=tables, lines=lines), env)
    if verdict.verdict != "COMPLETE":
        raise Verdict("", EXIT[verdict.verdict])
