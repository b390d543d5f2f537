"""PIP-160's four promised commands, made real over the dynamic broker settings (PIP-160 proposed
them; Pulsar never shipped them, its admin/v3/Transactions.java has no such endpoint).

set-txn-tc-batch-log / set-txn-pending-ack-batch-log update the dynamic setting and, with
--reload, reopen the stores; get-txn-tc-batch-log-stat / get-txn-pending-ack-batch-log-stat judge
per coordinator / subscription whether batching is configured and effective.
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command, confirm
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ConnectionFailed, UsageError
from pulsar_txn_cli.names import parse_bool
from pulsar_txn_cli.output.units import counted, iso_millis, parse_time_ms


def register(app: typer.Typer) -> None:
    command(app, "set-txn-tc-batch-log", target=True)(set_txn_tc_batch_log)
    command(app, "set-txn-pending-ack-batch-log", target=True)(set_txn_pending_ack_batch_log)
    command(app, "get-txn-tc-batch-log-stat", target=True)(get_txn_tc_batch_log_stat)
    command(app, "get-txn-pending-ack-batch-log-stat", target=True)(get_txn_pending_ack_batch_log_stat)


Value = Annotated[
    Optional[str],
    typer.Argument(metavar="[true|false]", help="With --enable: the value (default true).", show_default=False),
]
Enable = Annotated[bool, typer.Option("--enable", help="Turn batching on (or --enable true|false).")]
Disable = Annotated[bool, typer.Option("--disable", help="Turn batching off.")]
Reload = Annotated[
    bool, typer.Option("--reload", help="Reopen the stores now so the change takes effect (unloads topics).")
]
Yes = Annotated[bool, typer.Option("-y", "--yes", help="Do not ask before unloading.")]
Force = Annotated[
    bool,
    typer.Option(
        "--force",
        help="Turn batching off even when it would pin a log for good (open transactions while "
        "acknowledgmentAtBatchIndexLevelEnabled is off), or on while a downgrade is under way (a `downgrade check` "
        "checkpoint exists); without it such a switch is refused under --yes (exit 6).",
    ),
]
ChangedAt = Annotated[
    Optional[str],
    typer.Option(
        "--changed-at",
        metavar="TIME",
        show_default=False,
        help="Record a change made with another tool at TIME (ISO 8601, e.g. 2026-05-01T10:00:00Z, or epoch ms, "
        "in the target's clock) instead of changing the setting.",
    ),
]
Concurrency = Annotated[int, typer.Option("--concurrency", help="Admin calls in flight at once.", min=1, max=256)]


def set_txn_tc_batch_log(
    value: Value = None,
    enable: Enable = False,
    disable: Disable = False,
    reload: Reload = False,
    yes: Yes = False,
    force: Force = False,
    changed_at: ChangedAt = None,
) -> None:
    """Turn batching of the transaction coordinators' log on or off (transactionLogBatchedWriteEnabled).

    A coordinator picks the setting up only when its store is reopened; --reload unloads the
    coordinator-assign partitions so that every coordinator reopens now. With --changed-at, record
    a change made with another tool (pulsar-admin, a config file) so the stat and downgrade check
    can judge the stores against its moment.
    """
    from pulsar_txn_cli.batchlog import TC

    _set_or_declare(TC, _enabled(value, enable, disable), reload, yes, changed_at, concurrency=8, force=force)


def set_txn_pending_ack_batch_log(
    value: Value = None,
    enable: Enable = False,
    disable: Disable = False,
    reload: Reload = False,
    yes: Yes = False,
    force: Force = False,
    changed_at: ChangedAt = None,
    concurrency: Concurrency = 8,
) -> None:
    """Turn batching of the pending-ack logs on or off (transactionPendingAckBatchedWriteEnabled).

    A subscription picks the setting up only when its pending-ack store is reopened; --reload
    unloads every topic with a transactional subscription so that they reopen now. With
    --changed-at, record a change made with another tool instead.
    """
    from pulsar_txn_cli.batchlog import PENDING_ACK

    _set_or_declare(
        PENDING_ACK, _enabled(value, enable, disable), reload, yes, changed_at, concurrency=concurrency, force=force
    )


def get_txn_tc_batch_log_stat() -> None:
    """Per coordinator: is log batching configured, and is it effective in the open store?"""
    from pulsar_txn_cli.batchlog import TC

    _stat(TC, concurrency=8)


def get_txn_pending_ack_batch_log_stat(concurrency: Concurrency = 8) -> None:
    """Per transactional subscription: is pending-ack batching configured, and is it effective?"""
    from pulsar_txn_cli.batchlog import PENDING_ACK

    _stat(PENDING_ACK, concurrency=concurrency)


# --- the work -------------------------------------------------------------------------------------------


def _enabled(value: str | None, enable: bool, disable: bool) -> bool:
    if enable and disable:
        raise UsageError("give --enable or --disable, not both")
    if value is not None:
        flag = parse_bool(value)
        if flag is None:
            raise UsageError(f"the value must be true or false, not {value!r}")
        if disable:
            raise UsageError("--disable takes no value; use --enable false or --disable")
        return flag
    if not (enable or disable):
        raise UsageError("say what to do: --enable, --disable or --enable true|false")
    return enable


def _set_or_declare(
    log, enabled: bool, reload: bool, yes: bool, changed_at: str | None, *, concurrency: int, force: bool = False
) -> None:
    if changed_at is None:
        _set(log, enabled, reload, yes, concurrency=concurrency, force=force)
        return
    if reload:
        raise UsageError("--changed-at records a change made elsewhere; it does not go with --reload")
    from pulsar_txn_cli import batchlog
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    admin = env.admin()
    result = batchlog.declare_change(admin, log, enabled, parse_time_ms(changed_at, "--changed-at"))
    result["clock"] = clock = admin.clock()[1]  # TIME is compared with the stores' open times, on that clock
    env.info(
        f"recorded: {log.key} became {str(enabled).lower()} on {result['identity']} at {iso_millis(result['at'])} "
        f"({clock}; nothing was changed on the target)"
    )
    emit(
        Result(
            data=result,
            records=[result],
            tables=[
                Table(
                    [
                        ("setting", "setting"),
                        ("value", "value"),
                        ("at", f"changed at ({clock})"),
                        ("identity", "identity"),
                    ],
                    [{**result, "at": iso_millis(result["at"])}],
                )
            ],
        ),
        env,
    )


def _set(log, enabled: bool, reload: bool, yes: bool, *, concurrency: int, force: bool = False) -> None:
    from pulsar_txn_cli import batchlog
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    admin = env.admin()
    target = admin.target.describe()
    before = batchlog.configured_setting(admin, log)
    old = batchlog.without_batched_logs(before)
    if enabled and old and len(old) < len(before["brokers"]):
        # PIP-160's upgrade order: a broker that cannot read batched entries must not meet them.
        names = ", ".join(f"{b['broker']} ({b['version']})" for b in old)
        env.warn(
            f"{len(old)} of {counted(len(before['brokers']), 'broker')} of {target} "
            f"{'predates' if len(old) == 1 else 'predate'} PIP-160 and cannot read "
            f"batched logs: {names}; finish the rolling upgrade first (pulsar-txn upgrade check)"
        )
        if not yes:
            confirm(f"Enable {log.key} on {target} while those brokers still run?")
    if enabled:
        _guard_downgrade_under_way(env, admin, log, yes=yes, force=force)
    stores = batchlog.stores_of(admin, log, concurrency)
    risk = None if enabled else batchlog.switch_off_risk(admin, before, reload, log, stores)
    if risk and risk["uncountedCoordinators"]:
        _warn_uncounted(env, log, risk)
    if risk and risk["openTransactions"]:
        _guard_switch_off(env, log, risk, yes=yes, force=force)
    topics = batchlog.reload_targets(log, stores) if reload else []
    if reload and topics and not yes:
        confirm(f"Unload {counted(len(topics), 'topic')} on {target} so that every {log.store} store reopens?")
    result = batchlog.set_batch_log(admin, log, enabled, concurrency=concurrency, stores=stores, before=before)
    word = "enabled" if enabled else "disabled"
    env.info(f"{log.key} is now {str(enabled).lower()} on {target} (was {_shown(result['previous'])}).")
    reloaded = None
    if reload:
        now = f"{log.key} is now {str(enabled).lower()} on {target}"
        try:
            stores = batchlog.settle(admin, log, stores)
        except ConnectionFailed as exc:  # the setting changed; no store was reopened: say both, in one sentence
            raise ConnectionFailed(
                f"{now}, but the reload stopped before it unloaded anything (0 of {counted(len(topics), 'topic')} unloaded, "
                f"every {log.store} store still runs with its previous value): {exc}; rerun the same command "
                "once the broker answers",
                status=exc.status,
            ) from exc
        opening = batchlog.still_opening(log, stores)
        if opening:
            env.warn(
                f"{counted(len(opening), 'topic')} still {'has' if len(opening) == 1 else 'have'} a pending-ack store "
                f"that is not Ready after "
                f"{batchlog.SETTLE_SECONDS:g} s; they are not "
                "unloaded (an unload during its replay can leave it stuck); rerun with --reload later"
            )
        reloaded = batchlog.reload_stores(admin, [t for t in topics if t not in opening])
        reloaded += [
            {"topic": t, "unloaded": False, "error": "its pending-ack store is not Ready yet"} for t in sorted(opening)
        ]
        ok = sum(1 for r in reloaded if r["unloaded"])
        env.info(
            f"reloaded {ok} of {counted(len(reloaded), 'topic')}; batching is {word} for every {log.store} whose store reopened."
        )
    elif result["staleStores"]:
        env.info(
            f"It takes effect for each {log.store} only when its store is reopened: {result['staleStores']} of the "
            f"{counted(result['openStores'], f'open {log.store} store')} do not run with it yet. Rerun with --reload to reopen "
            f"them now, then check with get-txn-{'tc' if log.kind == 'tc' else 'pending-ack'}-batch-log-stat."
        )
    else:
        env.info(f"Every open {log.store} store already runs with batching {word}; nothing needs reopening.")
    data = {**result, "reload": reloaded, "stallRisk": risk}
    tables = [
        Table([("setting", "setting"), ("value", "value"), ("previous", "previous"), ("target", "target")], [result])
    ]
    if reloaded is not None:
        tables.append(
            Table([("topic", "topic"), ("unloaded", "unloaded"), ("error", "error")], reloaded, title="reload")
        )
    emit(Result(data=data, records=[data], tables=tables), env)
    failed = [r for r in reloaded or [] if not r["unloaded"]]
    if failed:
        raise ConnectionFailed(
            f"{log.key} is now {str(enabled).lower()} on {target}; {len(reloaded) - len(failed)} of "
            f"{counted(len(reloaded), 'topic')} were unloaded and {len(failed)} could not be (their {log.store} stores still run with the "
            f"previous value until reopened; the first: {failed[0]['error']}); rerun the same command to reload them"
        )


def _guard_downgrade_under_way(env, admin, log, *, yes: bool, force: bool) -> None:
    """Batching on again while `downgrade check` keeps a checkpoint for this target: batched entries written
    now must be gone before the downgrade, so it starts over. Say so, name the checkpoint, ask on a
    terminal; refuse (exit 6) under --yes or without a terminal unless --force."""
    from pulsar_txn_cli.cli.advice import command
    from pulsar_txn_cli.downgrade import checkpoint as cp_store

    path = cp_store.default_path(admin.identity())
    if not path.exists():
        return
    target = admin.target.describe()
    env.warn(
        f"a downgrade is under way on {target} (its checkpoint: {path}): turning {log.key} on again writes batched "
        "entries that a broker older than PIP-160 cannot read, so the downgrade starts over once batching is off "
        f"again; to give the downgrade up, `{command('pulsar-txn downgrade reset', env)}` first"
    )
    _go_ahead_or_refuse(
        env,
        f"Turn {log.key} on on {target} during the downgrade?",
        f"nothing was changed: a downgrade is under way on {target} (checkpoint {path}); reset it first, "
        "or add --force to turn batching on anyway",
        yes=yes,
        force=force,
    )


def _guard_switch_off(env, log, risk: dict, *, yes: bool, force: bool) -> None:
    """Say what a switch off would pin and how to avoid it; ask on a terminal; refuse (exit 6)
    under --yes or without a terminal unless --force."""

    target = env.admin().target.describe()
    n = risk["openTransactions"]
    flag = _batch_index_flag(risk)
    env.warn(
        f"turning {log.key} off on {target} now would pin its {log.store} logs for good: {counted(n, 'transaction')} "
        f"{'is' if n == 1 else 'are'} open and acknowledgmentAtBatchIndexLevelEnabled is {flag}, so once the stores reopen "
        "unbatched, the records of these transactions inside batched entries can never be deleted and "
        "`downgrade check` can never say SAFE (the batch-index deletion stall, seen on a real Pulsar 4.0.7 "
        "broker: docs/real-broker-findings.md)"
    )
    for line in switch_off_avoidance(env, risk):
        print(line, file=env.stderr)
    _go_ahead_or_refuse(
        env,
        f"Turn {log.key} off on {target} anyway?",
        f"nothing was changed: turning {log.key} off now would pin the {log.store} logs of {target} for good; "
        "avoid it as shown above and run this command again, or add --force to turn it off anyway",
        yes=yes,
        force=force,
    )


def _go_ahead_or_refuse(env, question: str, refusal: str, *, yes: bool, force: bool) -> None:
    """After a guard's warning: on with --force; ask on a terminal; refuse (exit 6) under --yes or without one."""
    import sys

    from pulsar_txn_cli.errors import Refused

    if force:
        env.warn("going ahead anyway (--force)")
        return
    if not yes and sys.stdin.isatty():
        confirm(question)
        return
    raise Refused(refusal)


def _batch_index_flag(risk: dict) -> str:
    return "unknown" if risk["batchIndexDeletion"] is None else "false"


def _warn_uncounted(env, log, risk: dict) -> None:
    """Coordinators that cannot say how many transactions they hold open: a warning, not a refusal (an idle
    cluster's coordinators are not loaded until a client connects), with how to be sure."""
    from pulsar_txn_cli.cli.advice import command

    ids = risk["uncountedCoordinators"]
    flag = _batch_index_flag(risk)
    env.warn(
        f"the open transactions of {'coordinator' if len(ids) == 1 else 'coordinators'} {', '.join(map(str, ids))} could not be counted (not loaded or "
        "not Ready; a broker loads a coordinator when a transactional client connects to it): if their logs hold "
        f"open transactions, turning {log.key} off now pins its {log.store} logs for good once they end, as "
        f"acknowledgmentAtBatchIndexLevelEnabled is {flag}; to be sure, run this command again once "
        f"`{command('pulsar-txn coordinator-stats', env)}` shows them Ready"
    )


def switch_off_avoidance(env, risk: dict) -> list[str]:
    """The commands that avoid the stall, each runnable as printed on this target."""
    from pulsar_txn_cli.cli.advice import command

    lines = ["avoid it: end or abort the open transactions first (or let them end), then run this command again:"]
    lines.append(f"  {command('pulsar-txn slow-transactions --time 0', env)}")
    for most, least in risk["transactions"]:
        lines.append(f"  {command(f'pulsar-txn abort-transaction -m {most} -l {least} --yes', env)}")
    left = risk["openTransactions"] - len(risk["transactions"])
    if left > 0:
        lines.append(f"  ... and {left} more (the first command lists them)")
    lines.append("or turn batch-index acknowledgements on first (the key is not dynamic):")
    if env.chosen_target is not None and env.chosen_target.kind == "engine":
        lines.append(f"  {command('pulsar-txn engine config set acknowledgmentAtBatchIndexLevelEnabled true', env)}")
        lines.append(f"  {command('pulsar-txn engine reload', env)}")
    else:
        lines.append("  set acknowledgmentAtBatchIndexLevelEnabled=true in every broker.conf and restart the brokers")
    return lines


def _stat(log, *, concurrency: int) -> None:
    from pulsar_txn_cli import batchlog
    from pulsar_txn_cli.output import Result, Table, emit

    env = current()
    admin = env.admin()
    data = batchlog.batch_log_stat(admin, log, concurrency=concurrency)
    detail = data[log.detail_key]
    rows = [{**d, "opened": iso_millis(d.get("recoverStartTime"))} for d in detail]
    key_columns = (
        [("coordinatorId", "coordinator"), ("broker", "broker")]
        if log.kind == "tc"
        else [("topic", "topic"), ("subscription", "subscription")]
    )
    columns = key_columns + [
        ("state", "state"),
        ("configured", "configured"),
        ("effective", "effective"),
        ("opened", "opened"),
        ("reason", "reason"),
    ]
    brokers = Table(
        [("broker", "broker"), ("version", "version"), ("runtime", "runtime value"), ("batches", "batches written")],
        data["brokers"],
        title="brokers",
    )
    effective = [d["effective"] for d in detail]
    verdict = (
        f"{log.key} on {data['target']}: configured {_shown(data[log.pip_flag])}"
        f"{' (dynamic override)' if data['dynamic'] is not None else ''}; effective in "
        f"{effective.count(True)} of {counted(len(detail), log.store)}, off in {effective.count(False)}, unknown in {effective.count(None)}."
    )
    if data["withoutBatchedLogs"]:
        verdict += f" Every broker runs {data['withoutBatchedLogs']}, which predates PIP-160: no store can batch."
    elif data[log.pip_flag] is not None and (effective.count(None) or effective.count(not data[log.pip_flag])):
        from pulsar_txn_cli.downgrade.advice import set_command

        # A command to paste (env.info carries the target): set the value already configured, and reload.
        env.info(f"hint: reopen the stores with `{set_command(log.key, data[log.pip_flag])}`")
    # -o jsonl: a line per store, each with what the JSON document says about all of them
    shared = {"target": data["target"], "setting": data["setting"], log.pip_flag: data[log.pip_flag]}
    emit(
        Result(
            data=data,
            records=[{**shared, **d} for d in detail],
            tables=[Table(columns, rows, title=f"{log.store}s"), brokers],
            lines=["", verdict],
        ),
        env,
    )


def _shown(value) -> str:
    return "unknown" if value is None else str(value).lower()
