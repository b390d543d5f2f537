"""`pulsar-txn doctor`: what blocks this cluster's transactions, worst first, with the fix; and the two
commands its fixes need that pulsar-admin has but pulsar-txn lacked: `unload` and `clean-pending-ack`.

Exit codes: 0 nothing found, 5 only warnings (may settle by themselves), 6 any error (needs an operator).
"""

from __future__ import annotations

from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command, confirm, gave_up, interval_for
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import ExitCode, UsageError, Verdict
from pulsar_txn_cli.output.units import counted

TopicOpt = Annotated[
    Optional[str],
    typer.Option("-t", "--topic", help="Only this topic (all its partitions when partitioned).", show_default=False),
]
NamespaceOpt = Annotated[
    Optional[str], typer.Option("-n", "--namespace", help="Only this namespace, tenant/namespace.", show_default=False)
]
OlderThanOpt = Annotated[
    Optional[str],
    typer.Option(
        "--older-than",
        metavar="DURATION",
        show_default=False,
        help="A transaction open longer than this is hanging (500ms, 30s, 5m, 2h); default: half its own timeout.",
    ),
]


def register(app: typer.Typer) -> None:
    command(app, "doctor", target=True)(doctor)
    command(app, "unload", target=True)(unload)
    command(app, "clean-pending-ack", target=True)(clean_pending_ack)


def parse_older_than(text: str | None) -> int | None:
    from pulsar_txn_cli.output.units import parse_duration_ms

    return None if text is None else parse_duration_ms(text, "--older-than")


def check_scope(topic: str | None, namespace: str | None) -> None:
    if topic and namespace:
        raise UsageError("give at most one of -t/--topic and -n/--namespace (neither: the whole cluster)")
    if namespace is not None and (namespace.count("/") != 1 or not all(namespace.split("/"))):
        raise UsageError(f"namespace {namespace!r} is not tenant/namespace")


def doctor(
    topic: TopicOpt = None,
    namespace: NamespaceOpt = None,
    older_than: OlderThanOpt = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, max=256, help="Admin calls in flight.")] = 16,
    wait: Annotated[
        bool, typer.Option("--wait", help="Check again every --interval seconds until nothing is found (or an error).")
    ] = False,
    interval: Annotated[
        Optional[float],
        typer.Option("--interval", metavar="S", show_default="30", help="Seconds between checks with --wait."),
    ] = None,
    timeout: Annotated[
        Optional[float],
        typer.Option("--timeout", min=0.0, metavar="S", show_default=False, help="Give up waiting after S seconds."),
    ] = None,
) -> None:
    """Find what blocks transactions: coordinators, hanging transactions, held readers and geo-replicators, buffers, pending-ack stores, configuration.

    Every check runs at once over what is read through the admin API; findings come worst first, each
    with its evidence (the numbers read and their endpoint) and the commands that fix it. A check that
    cannot run here is listed with why. Exit codes: 0 nothing found, 5 only warnings (may settle by
    themselves), 6 an error (needs an operator), 4 connection or HTTP error.
    """
    from pulsar_txn_cli.doctor import run as doctor_run
    from pulsar_txn_cli.doctor.read import Scope

    check_scope(topic, namespace)
    if timeout is not None and not wait:
        raise UsageError("--timeout only applies with --wait")
    interval = interval_for(interval, 30.0, applies=wait)
    bound = parse_older_than(older_than)
    env = current()
    admin = env.admin()
    scope = Scope(topic, namespace)
    options = dict(older_than_ms=bound, concurrency=concurrency)
    if wait:
        report = doctor_run.wait(
            admin,
            scope,
            interval=interval,
            timeout=timeout,
            on_check=lambda r, n, failure: _on_check(env, r, n, failure, interval),
            **options,
        )
    else:
        with env.progress(None, "reading coordinators, transactions, buffers and subscriptions"):
            report = doctor_run.run(admin, scope, **options)
    waited_out = wait and report.severity != "error" and (report.severity is not None or report.incomplete)
    _emit(env, report, gave_up(timeout, _summary(report)) if waited_out else None)


def _on_check(env, report, n: int, failure, interval: float) -> None:
    if failure is not None:
        env.warn(f"check {n} failed: {failure}; retrying in {interval:g}s")
        return
    env.info(f"check {n}: {_summary(report)}")


def _summary(report) -> str:
    errors = sum(f.severity == "error" for f in report.findings)
    warnings = len(report.findings) - errors
    if not report.findings:
        missed = len(report.incomplete)
        return f"nothing found, but {counted(missed, 'check')} could not run" if missed else "nothing found"
    return f"{counted(errors, 'error')}, {counted(warnings, 'warning')}"


def _emit(env, report, last: str | None = None) -> None:
    from pulsar_txn_cli.cli.advice import carry_target, command as with_target
    from pulsar_txn_cli.output import Result, Table, emit

    data = report.to_json()
    for finding in data["findings"]:
        finding["fix"] = [with_target(c, env) for c in finding["fix"]]
        if finding.get("advice"):
            finding["advice"] = carry_target(finding["advice"], env)
    # Every fix once, worst finding first: what to run, in order (several findings can share one).
    data["fixes"] = list(dict.fromkeys(c for f in data["findings"] for c in f["fix"]))
    counts = report.counts
    checked = (
        f"{counted(counts['coordinators'], 'coordinator')}, {counted(counts['openTransactions'], 'open transaction')}, "
        f"{counted(counts['partitions'], 'partition')}, "
        f"{counted(counts['subscriptions'], 'transactional subscription')}, {counted(counts['brokers'], 'broker')}"
    )
    lines = [""]
    for finding in data["findings"]:
        lines.append(f"{finding['severity']} {finding['check']} {finding['subject']}: {finding['summary']}")
        lines += [f"  fix: {c}" for c in finding["fix"]]
        if finding.get("advice"):
            lines.append(f"  advice: {finding['advice']}")
    lines += [f"not run: {c['check']}: {c['why']}" for c in data["checks"] if not c["ran"]]
    # A check that ran and still names what it cannot see (5.0's second coordinator): never a silent all-clear.
    lines += [f"not covered: {c['why']}" for c in data["checks"] if c["ran"] and c["why"]]
    lines.append(
        f"{_summary(report)} on {report.target} ({report.scope.describe()}); checked {checked}; "
        f"{counted(report.requests, 'request')} in {report.seconds:.2f} s"
    )
    lines += [last] if last else []
    columns = [("severity", "SEVERITY"), ("check", "CHECK"), ("subject", "SUBJECT")]
    tables = [Table(columns, data["findings"], "Findings (worst first)")] if data["findings"] else []
    emit(Result(data=data, records=data["findings"], tables=tables, lines=lines), env)
    severity = report.severity
    if severity == "error":
        raise Verdict("", ExitCode.BLOCKED)
    if severity == "warning" or report.incomplete:  # a check that could not read is never an all-clear
        raise Verdict("", ExitCode.NOT_YET)


def unload(
    topic: Annotated[
        Optional[str],
        typer.Option("-t", "--topic", help="The topic (a partitioned one: every partition).", show_default=False),
    ] = None,
    coordinator: Annotated[
        Optional[int],
        typer.Option(
            "--coordinator",
            metavar="N",
            min=0,
            show_default=False,
            help="Reload coordinator N: unload its transaction_coordinator_assign partition.",
        ),
    ] = None,
    all_coordinators: Annotated[
        bool, typer.Option("--all-coordinators", help="Reload every coordinator (each assign partition).")
    ] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Unload a topic, as `pulsar-admin topics unload` does: its transaction buffer and pending-ack stores load again.

    --coordinator N (or --all-coordinators) reloads transaction coordinators: the coordinator replays its
    log and ends what it had begun to end (a transaction stuck in COMMITTING or ABORTING). Producers and
    consumers reconnect. Give exactly one of -t, --coordinator and --all-coordinators.
    """
    from pulsar_txn_cli.names import TopicName
    from pulsar_txn_cli.output import Result, emit

    if sum((topic is not None, coordinator is not None, all_coordinators)) != 1:
        raise UsageError("say what to unload: exactly one of -t/--topic, --coordinator N and --all-coordinators")
    env = current()
    admin = env.admin()
    target = admin.target.describe()
    names = [TopicName(topic).full] if topic is not None else _assign_partitions(admin, coordinator, target)
    what = names[0] if len(names) == 1 else f"{len(names)} coordinator-assign partitions"
    if not yes:
        confirm(f"Unload {what} on {target} (its clients reconnect)?")
    for name in names:
        admin.unload_topic(name)
    env.info(f"{what} unloaded on {target}")
    rows = [{"topic": name, "unloaded": True, "target": target} for name in names]
    emit(Result(data=rows if all_coordinators else rows[0], records=rows), env)


def _assign_partitions(admin, coordinator: int | None, target: str) -> list[str]:
    """The assign partitions of coordinator N (which must exist), or of every coordinator. Counted from the
    assign topic's partitions, not from the coordinators listed: one that failed to load is not listed,
    and reloading it is what the doctor suggests then."""
    from pulsar_txn_cli.protocol import tc_assign_partition

    ids = list(range(admin.tc_partitions()))
    if coordinator is None:
        if not ids:
            raise UsageError(f"{target} has no transaction coordinator (is transactionCoordinatorEnabled=true?)")
        return [tc_assign_partition(i) for i in ids]
    if coordinator not in ids:
        raise UsageError(
            f"coordinator {coordinator} does not exist on {target} (its coordinators: "
            f"{', '.join(map(str, ids)) or 'none'}; `pulsar-txn coordinators-list` shows them)"
        )
    return [tc_assign_partition(coordinator)]


def clean_pending_ack(
    pending_ack_topic: Annotated[
        str,
        typer.Argument(
            metavar="PENDING_ACK_TOPIC", help="The leaked log, e.g. persistent://t/ns/x-sub__transaction_pending_ack."
        ),
    ],
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do not ask for confirmation.")] = False,
) -> None:
    """Delete a pending-ack log whose subscription is gone (apache/pulsar#11000, #19719); refuses any other."""
    from pulsar_txn_cli.admin.discovery import transactional_subscriptions
    from pulsar_txn_cli.names import PENDING_ACK_SUFFIX, TopicName, namespace_of
    from pulsar_txn_cli.output import Result, emit

    env = current()
    name = TopicName(pending_ack_topic).full
    if not name.endswith(PENDING_ACK_SUFFIX):
        raise UsageError(f"{name} is not a pending-ack log (its name ends with {PENDING_ACK_SUFFIX})")
    admin = env.admin()
    found = [
        e for e in transactional_subscriptions(admin, namespaces=[namespace_of(name)]) if e["pendingAckTopic"] == name
    ]
    if not found:
        raise UsageError(f"{name} does not exist on {admin.target.describe()}")
    if found[0]["status"] != "orphan":
        raise UsageError(
            f"{name} belongs to subscription {found[0]['subscription']!r} on {found[0]['topic']}, which still "
            "exists: deleting its log would lose its pending acknowledgements"
        )
    if not yes:
        confirm(f"Delete the leaked pending-ack log {name} on {admin.target.describe()}?")
    admin.delete_topic(name, force=True)
    env.info(f"{name} deleted on {admin.target.describe()}")
    data = {"topic": name, "deleted": True, "target": admin.target.describe()}
    emit(Result(data=data, records=[data]), env)
