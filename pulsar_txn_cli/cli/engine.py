"""`pulsar-txn engine ...`: the embedded engine (a local model of a broker's transaction logs)."""

from __future__ import annotations

import os
from typing import Annotated, Literal, Optional

import typer

from pulsar_txn_cli.cli import helptext
from pulsar_txn_cli.cli.common import ENGINE_TARGET, SERVED_ENGINE_TARGET, command, group_callback
from pulsar_txn_cli.fault_names import FAULTS
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import UsageError, Verdict, ExitCode
from pulsar_txn_cli.output.units import counted


def register(root: typer.Typer) -> None:
    engine = typer.Typer(
        cls=helptext.Group,
        name="engine",
        help="The embedded engine: a durable local model of a Pulsar broker's transaction logs (SQLite).",
        no_args_is_help=True,
    )
    config = typer.Typer(
        cls=helptext.Group,
        name="config",
        help="The engine broker's configuration (Pulsar key names).",
        no_args_is_help=True,
    )
    command(engine, "init", target=ENGINE_TARGET)(init)
    command(engine, "reset", target=ENGINE_TARGET)(reset)
    command(config, "list", target=ENGINE_TARGET)(config_list)
    command(config, "get", target=ENGINE_TARGET)(config_get)
    command(config, "set", target=ENGINE_TARGET)(config_set)
    command(engine, "reload", target=ENGINE_TARGET)(reload)
    command(engine, "simulate", target=SERVED_ENGINE_TARGET)(simulate)
    # "-5s" reaches the command as DURATION (a sentence says why not), not as an unknown option "-5"
    command(engine, "advance", target=SERVED_ENGINE_TARGET, context_settings={"ignore_unknown_options": True})(advance)
    command(engine, "verify", target=ENGINE_TARGET)(verify)
    command(engine, "dump", target=ENGINE_TARGET)(dump)
    command(engine, "metrics", target=ENGINE_TARGET)(metrics)
    command(engine, "serve", target=ENGINE_TARGET)(serve)
    group_callback(engine, SERVED_ENGINE_TARGET)
    group_callback(config, ENGINE_TARGET)
    engine.add_typer(config, name="config")
    root.add_typer(engine, name="engine")


# ---------------------------------------------------------------- helpers


def _fault_names(incomplete: str) -> list[tuple[str, str]]:
    """What a shell offers after `engine simulate --fault`: each name, with what it models."""
    return [(name, text) for name, text in FAULTS.items() if name.startswith(incomplete)]


def _dir(announce: bool = True):
    from pulsar_txn_cli.target.settings import engine_directory

    env = current()
    directory = engine_directory(env.target)
    if announce:
        env.info(f"engine: {directory}")
    return directory


def _open(*, readonly: bool = False, create: bool = False, create_default: bool = True):
    """Open the engine. The default engine is created with defaults (and says so) on first use, as
    is a named directory for `engine simulate` (create=True); any other command on a named
    directory without an engine fails with one error and creates nothing (a mistyped --engine-dir)."""
    from pulsar_txn_cli.engine.transport import require_engine
    from pulsar_txn_cli.engine.broker import DEFAULT_COORDINATORS, Engine, exists

    directory = _dir(announce=False)
    if not exists(directory) and not create:
        named = current().target.engine_dir or os.environ.get("PULSAR_TXN_ENGINE_DIR")
        require_engine(str(directory), "flags" if named else ("default" if create_default else "the default engine"))
    current().info(f"engine: {directory}")
    if not exists(directory):
        engine = Engine.init(directory)
        current().info(
            f"created a new engine in {directory} ({DEFAULT_COORDINATORS} coordinators); "
            "`engine init` chooses other settings"
        )
        if readonly:
            engine.close()
            return Engine.open(directory, readonly=True)
        return engine
    return Engine.open(directory, readonly=readonly)


def _emit(data, tables=None, lines=None) -> None:
    from pulsar_txn_cli.output import Result, emit

    emit(Result(data=data, tables=tables, lines=lines or []), current())


def _kv_table(rows: dict, title: str | None = None):
    from pulsar_txn_cli.output import Table

    return Table([("key", "KEY"), ("value", "VALUE")], [{"key": k, "value": v} for k, v in rows.items()], title)


# ---------------------------------------------------------------- init / reset


def init(
    coordinators: Annotated[
        int, typer.Option("--coordinators", help="Number of transaction coordinators (TC ids 0..N-1; at most 1024).")
    ] = 4,
    cluster: Annotated[
        str, typer.Option("--cluster", help="Cluster name (the `cluster` label of the metrics).")
    ] = "standalone",
) -> None:
    """Create an engine: a broker with transactions enabled and N coordinators."""
    from pulsar_txn_cli.engine.broker import Engine

    directory = _dir()
    with Engine.init(directory, coordinators=coordinators, cluster=cluster) as engine:
        data = {
            "engineDir": str(directory),
            "coordinators": engine.coordinator_count,
            "cluster": engine.cluster,
            "logs": engine.tc_log_names(),
        }
    _emit(
        data,
        tables=[
            _kv_table(
                {"engine dir": data["engineDir"], "coordinators": data["coordinators"], "cluster": data["cluster"]}
            )
        ],
    )


def reset(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Really delete the engine's data.")] = False,
) -> None:
    """Delete the engine (its database) and what pulsar-txn remembers about it (batch-log changes,
    downgrade checkpoint; the audit of abort-hanging is kept); the next engine command starts a fresh one."""
    from pulsar_txn_cli.cli.state import kept_audit
    from pulsar_txn_cli.target import remembered
    from pulsar_txn_cli.engine.broker import exists
    from pulsar_txn_cli.engine.store import Store

    directory = _dir()
    if not exists(directory):
        current().info(f"no engine in {directory}; nothing to reset")
        _emit({"engineDir": str(directory), "deleted": False})
        return
    if not yes:
        raise UsageError(f"`engine reset` deletes every log in {directory}; pass --yes to confirm")
    store = Store(directory, create=False)  # holds the lock while deleting
    try:
        engine_id = store.meta("engineId")
    except BaseException:
        store.close()
        raise
    store.reset()
    forgotten, kept = remembered.prune([f"engine {engine_id}"]) if engine_id else ([], [])
    current().info(
        f"deleted the engine in {directory}"
        + (f" and forgot {counted(len(forgotten), 'record')} about it" if forgotten else "")
    )
    for row in kept:
        current().info(kept_audit(row))
    _emit(
        {
            "engineDir": str(directory),
            "deleted": True,
            "engineId": engine_id,
            "forgotten": [r["file"] for r in forgotten],
            "kept": [r["file"] for r in kept],
        }
    )


# ---------------------------------------------------------------- config


def config_list() -> None:
    """Every key: runtime value, where it comes from, and whether it is dynamic."""
    from pulsar_txn_cli.engine.broker_config import KEYS, to_text
    from pulsar_txn_cli.output import Table

    with _open() as engine:
        values = engine.config.values()
        rows = [
            {
                "key": name,
                "value": to_text(values[name]),
                "default": to_text(key.default),
                "dynamic": key.dynamic,
                "source": engine.config.source(name),
            }
            for name, key in KEYS.items()
        ]
    _emit(
        rows,
        tables=[
            Table(
                [
                    ("key", "KEY"),
                    ("value", "VALUE"),
                    ("default", "DEFAULT"),
                    ("dynamic", "DYNAMIC"),
                    ("source", "SOURCE"),
                ],
                rows,
            )
        ],
        lines=["Changes reach a coordinator or pending-ack store when it is reopened: `pulsar-txn engine reload`."],
    )


def config_get(key: Annotated[str, typer.Argument(metavar="KEY", help="A broker configuration key.")]) -> None:
    """The runtime value of one key."""
    from pulsar_txn_cli.engine.broker_config import to_text

    with _open() as engine:
        value = engine.config.get(key)
        data = {"key": key, "value": to_text(value), "source": engine.config.source(key)}
    _emit(data, tables=[_kv_table(data)])


def config_set(
    key: Annotated[str, typer.Argument(metavar="KEY", help="A broker configuration key.")],
    value: Annotated[str, typer.Argument(metavar="VALUE", help="The new value.")],
) -> None:
    """Set a key (dynamic keys as an override, others in broker.conf).

    Dynamic keys are stored like `pulsar-admin brokers update-dynamic-config`, others in the engine's
    broker.conf. Either way a change reaches a store only when it is reopened (`engine reload`)."""
    from pulsar_txn_cli.engine.broker_config import to_text

    with _open() as engine:
        layer = engine.config.set(key, value)
        data = {"key": key, "value": to_text(engine.config.get(key)), "layer": layer}
    current().info(
        f"{key} set ({'dynamic override' if layer == 'dynamic' else 'broker.conf'}); "
        "`pulsar-txn engine reload` applies it to open stores"
    )
    _emit(data, tables=[_kv_table(data)])


# ---------------------------------------------------------------- reload


def reload(
    coordinator: Annotated[
        Optional[int],
        typer.Option(
            "--coordinator-id",
            "--coordinator",
            "-c",
            help="Reopen only this transaction coordinator.",
            show_default=False,
        ),
    ] = None,
    topic: Annotated[
        Optional[str],
        typer.Option(
            "--topic",
            "-t",
            help="Reopen only the pending-ack stores of this topic's subscriptions.",
            show_default=False,
        ),
    ] = None,
) -> None:
    """Reopen stores as a broker restart or unload would (new ledgers, configuration read again).

    Without options, everything (a broker restart); --coordinator or --topic for one TC or the
    pending-ack stores of one topic (every partition of a partitioned topic)."""
    with _open() as engine:
        reopened = engine.reload(coordinator=coordinator, topic=topic)
    _emit({"reopened": reopened}, tables=lambda: [_list_table(reopened, "REOPENED")])


def _list_table(items, header):
    from pulsar_txn_cli.output import Table

    return Table([("name", header)], [{"name": i} for i in items])


# ---------------------------------------------------------------- simulate


def simulate(
    transactions: Annotated[int, typer.Option("--transactions", "-n", help="Transactions to run.")] = 1000,
    concurrency: Annotated[int, typer.Option("--concurrency", help="Transactions in flight.")] = 50,
    topics: Annotated[int, typer.Option("--topics", help="Topics (persistent://public/default/sim-topic-N).")] = 4,
    partitions: Annotated[int, typer.Option("--partitions", help="Partitions per topic (1: not partitioned).")] = 1,
    subscriptions: Annotated[
        int, typer.Option("--subscriptions", help="Subscriptions acking in transactions, in total.")
    ] = 8,
    abort_ratio: Annotated[float, typer.Option("--abort-ratio", help="Share of transactions the client aborts.")] = 0.1,
    timeout_ratio: Annotated[
        float, typer.Option("--timeout-ratio", help="Share left to time out (the coordinator aborts them).")
    ] = 0.0,
    seed: Annotated[int, typer.Option("--seed", help="Seed: the same seed gives the same transactions.")] = 1,
    txn_timeout_ms: Annotated[int, typer.Option("--txn-timeout-ms", help="Transaction timeout.")] = 10_000,
    ack_log: Annotated[
        Optional[str],
        typer.Option(
            "--ack-log",
            help="Append `new TC ID` / `end TC ID` lines as transactions are acknowledged / ended (for crash tests).",
            show_default=False,
        ),
    ] = None,
    fault: Annotated[
        Optional[str],
        typer.Option(
            "--fault",
            metavar="NAME",
            show_default=False,
            autocompletion=_fault_names,
            help="After the workload, make the engine sick this way (for `pulsar-txn doctor`): "
            + "; ".join(f"{name}: {text}" for name, text in FAULTS.items())
            + ".",
        ),
    ] = None,
) -> None:
    """Run a seeded, reproducible transactional workload on the engine's clock.

    With --admin-url of an `engine serve`, the server runs it, as a broker takes load while it runs.
    With --fault, the engine is then left sick in that way (docs/doctor.md)."""
    from pulsar_txn_cli.engine.simulate import SimOptions
    from pulsar_txn_cli.engine.simulate import simulate as run

    opts = SimOptions(
        transactions=transactions,
        concurrency=concurrency,
        topics=topics,
        partitions=partitions,
        subscriptions=subscriptions,
        abort_ratio=abort_ratio,
        timeout_ratio=timeout_ratio,
        seed=seed,
        txn_timeout_ms=txn_timeout_ms,
        ack_log=ack_log,
    )
    opts.check()
    if fault is not None and fault not in FAULTS:
        raise UsageError(f"--fault {fault!r} is not one of {', '.join(FAULTS)}")
    env = current()
    if env.target.admin_url:
        if fault:
            raise UsageError(
                f"--fault {fault} with --admin-url: a fault is made inside the engine's own store, which a served "
                "engine keeps to itself (its admin API, like a broker's, has no request that makes it sick); stop "
                f"`engine serve` and run `pulsar-txn engine simulate --fault {fault} --engine-dir DIR` on its directory"
            )
        result = _simulate_served(env, opts)
    else:
        with _open(create=True) as engine:
            with env.progress(transactions, "transactions") as bar:
                result = run(engine, opts, progress=lambda done: done % 100 == 0 and bar.update(completed=done))
            if fault:
                result["fault"] = _inject(engine, fault, opts)
    rows = _simulate_rows(result)
    if fault:
        rows["fault"] = ", ".join(f"{k}={v}" for k, v in result["fault"].items())
    _emit(result, tables=[_kv_table(rows)])


def _inject(engine, fault: str, opts) -> dict:
    from pulsar_txn_cli.engine.faults import inject
    from pulsar_txn_cli.engine.simulate import partition_names

    partitions = partition_names(opts)
    subscription = (partitions[0], "sim-sub-0")
    done = inject(engine, fault, partitions[0], subscription, opts.txn_timeout_ms)
    engine.checkpoint()
    return done


def _simulate_served(env, opts) -> dict:
    """The workload, run by the `engine serve` at --admin-url (engine/router.py)."""
    from dataclasses import asdict

    from pulsar_txn_cli.protocol import REMOTE_OPTIONS, camel
    from pulsar_txn_cli.errors import Interrupted

    if opts.ack_log:
        raise UsageError("--ack-log writes a file where the engine runs: it needs --engine-dir, not --admin-url")
    if env.target.request_timeout is None:
        env.target.request_timeout = 3600.0  # the answer comes when the workload has run: not the usual 30 s
    admin = env.admin()
    body = {camel(name): value for name, value in asdict(opts).items() if name in REMOTE_OPTIONS}
    try:
        with env.progress(None, f"{opts.transactions} transactions on {admin.target.url}"):
            return admin.engine_simulate(body)
    except KeyboardInterrupt:
        raise Interrupted(
            f"interrupted (Ctrl-C) while {admin.target.url} ran the workload: the server runs it to its end; "
            f"`pulsar-txn slow-transactions --time 0 --admin-url {admin.target.url}` lists what is still open"
        ) from None


def _simulate_rows(result: dict) -> dict:
    from pulsar_txn_cli.output.table import cell

    return {
        "transactions": result["transactions"],
        "committed": result["committed"],
        "aborted": result["aborted"],
        "timed out": result["timedOut"],
        "failed": result["failed"],
        "TC-log records / entries": f"{result['records']['tc']} / {result['entries']['tc']}",
        "pending-ack records / entries": f"{result['records']['pendingAck']} / {result['entries']['pendingAck']}",
        "flush triggers (records/size/delay/large)": "/".join(str(v) for v in result["flushTriggers"].values()),
        "add latency p50 / p99 (ms, engine time)": f"{result['addLatencyMs']['p50']} / {result['addLatencyMs']['p99']}",
        "batching (TC / pending ack)": f"{cell(result['batching']['tc'])} / {cell(result['batching']['pendingAck'])}",
    }


# ---------------------------------------------------------------- advance


def advance(
    duration: Annotated[
        str,
        typer.Argument(
            metavar="DURATION", help="How long to let pass: 500ms, 90s, 10m, 1h, 2d (a bare number is seconds)."
        ),
    ],
) -> None:
    """Let time pass on the engine: timeouts, rollovers, trims and snapshots, with no client traffic.

    Moves the engine's clock forward by DURATION and runs what a broker does on its own meanwhile:
    transactions whose timeout passed are aborted, transaction-log ledgers roll over once they reach
    managedLedgerMaxLedgerRolloverTimeMinutes, ledgers wholly behind the slowest cursor are trimmed,
    and transaction buffers take their timed snapshots. With --admin-url of an `engine serve`, the
    served engine's time moves."""
    from pulsar_txn_cli.output.units import parse_duration_ms
    from pulsar_txn_cli.engine.advance import advance as run

    if duration.startswith("-"):
        _refuse_negative(duration)
    duration_ms = parse_duration_ms(duration, "DURATION")
    env = current()
    if env.target.admin_url:
        result = env.admin().engine_advance(duration_ms)
    else:
        with _open(create_default=False) as engine:  # time passing on no engine is a typo, not a new engine
            result = run(engine, duration_ms)
    _emit(result, tables=[_kv_table(_advance_rows(result))])


def _refuse_negative(text: str) -> None:
    """`engine advance -5s`: time that would go back, in one sentence; any other dash word is an unknown option."""
    from pulsar_txn_cli.output.units import duration, parse_duration_ms

    try:
        back = parse_duration_ms(text[1:], "DURATION")
    except UsageError:
        raise UsageError(f"no such option: {text} (pulsar-txn engine advance --help lists them)") from None
    raise UsageError(
        f"DURATION {text!r} is negative: the engine's clock only moves forward "
        f"(`engine advance {text[1:]}` lets {duration(back)} pass)"
    )


def _advance_rows(result: dict) -> dict:
    from pulsar_txn_cli.output.units import duration, iso_millis

    return {
        "from": iso_millis(result["fromMs"]),
        "to": iso_millis(result["toMs"]),
        "advanced": duration(result["advancedMs"]),
        "transactions timed out": result["transactionsTimedOut"],
        "ledgers rolled": result["ledgersRolled"],
        "ledgers trimmed": result["ledgersTrimmed"],
        "buffer snapshots taken": result["snapshotsTaken"],
    }


# ---------------------------------------------------------------- verify / dump / metrics


def verify(
    acked: Annotated[
        Optional[str],
        typer.Option(
            "--ack-log", help="Also check an acknowledgement log written by `simulate --ack-log`.", show_default=False
        ),
    ] = None,
    oracle: Annotated[
        bool,
        typer.Option(
            "--downgrade-oracle",
            help="Report what the engine's storage says about a downgrade below PIP-160 (a property of the "
            "model, not of a real cluster): batchedReachable, progressWithoutOperator, ledgers.",
        ),
    ] = False,
) -> None:
    """Replay every log and check the invariants; exit 0 only when all hold (else 3).

    With --downgrade-oracle, the model's own answer to a downgrade below PIP-160 instead: whether an
    entry with the batch magic is still stored in a transaction log, and whether traffic and time alone
    (on a copy of the engine, no operator action) make any of those ledgers go away."""
    from pulsar_txn_cli.engine.verify import verify as run

    if oracle:
        if acked:
            raise UsageError("--downgrade-oracle and --ack-log check different things: give one of them")
        return _oracle()
    with _open(readonly=True, create_default=False) as engine:
        report = run(engine, acked)
    env = current()
    if acked and not report["ackedChecked"]:  # legitimately empty when a workload was killed early
        env.warn(f"the acknowledgement log {acked} holds no transactions: nothing was checked against it")
    for warning in report["warnings"]:
        env.warn(warning)
    lines = [f"problem: {p}" for p in report["problems"]] + ["OK: every invariant holds" if report["ok"] else "FAILED"]
    from pulsar_txn_cli.output import Table

    _emit(
        report,
        tables=[
            Table(
                [
                    ("managedLedger", "MANAGED LEDGER"),
                    ("ledgers", "LEDGERS"),
                    ("entries", "LIVE ENTRIES"),
                    ("liveRecords", "LIVE RECORDS"),
                    ("liveTransactions", "LIVE TXNS"),
                ],
                report["logs"],
            )
        ],
        lines=lines,
    )
    if not report["ok"]:
        raise Verdict("", ExitCode.DATA)


def _oracle() -> None:
    from pulsar_txn_cli.engine.oracle import downgrade_oracle
    from pulsar_txn_cli.output import Table

    with _open(readonly=True, create_default=False) as engine:
        answer = downgrade_oracle(engine)
    rows = [
        {
            "managedLedger": log["managedLedger"],
            "kind": log["kind"],
            "ledgers": " ".join(map(str, log["ledgerIds"])),
            "batched": " ".join(map(str, log["batchedLedgerIds"])) or "-",
            "toReplay": log["toReplay"],
        }
        for log in answer["ledgers"]
    ]
    yes = lambda flag: "yes" if flag else "no"  # noqa: E731
    _emit(
        answer,
        tables=[
            Table(
                [
                    ("managedLedger", "MANAGED LEDGER"),
                    ("kind", "LOG"),
                    ("ledgers", "LEDGERS"),
                    ("batched", "WITH BATCHED ENTRIES"),
                    ("toReplay", "TO REPLAY"),
                ],
                rows,
            )
        ],
        lines=[
            f"batched entries reachable: {yes(answer['batchedReachable'])}",
            f"progress without an operator: {yes(answer['progressWithoutOperator'])} "
            f"(clears without an operator: {yes(answer['clearsWithoutOperator'])}; "
            f"{answer['future']['transactions']} transactions over {answer['future']['horizonMs'] // 1000} s "
            f"x {answer['future']['rounds']} rounds on a copy)",
            "a property of the engine's model, not of a real cluster",
        ],
    )


def dump(
    managed_ledger: Annotated[
        Optional[list[str]],
        typer.Option(
            "--managed-ledger",
            "-m",
            help="A managed ledger to dump (repeatable); default: every transaction log.",
            show_default=False,
        ),
    ] = None,
    log: Annotated[
        Literal["tc", "pending-ack", "all", "any"],
        typer.Option(
            "--log", help="Without -m: tc, pending-ack, all (both transaction logs) or any (every managed ledger)."
        ),
    ] = "all",
    list_: Annotated[bool, typer.Option("--list", help="List the managed ledgers instead of dumping.")] = False,
) -> None:
    """Write entries in the project's JSONL dump format (read by `pulsar-txn decode`).

    The dump format is JSONL whatever -o says, except -o json: one JSON array of the same objects.
    """
    from pulsar_txn_cli.engine import dump as dumping

    env = current()
    with _open(readonly=True) as engine:
        if list_:
            rows = dumping.listing(engine)
            from pulsar_txn_cli.output import Table

            _emit(
                rows,
                tables=[
                    Table(
                        [
                            ("managedLedger", "MANAGED LEDGER"),
                            ("log", "LOG"),
                            ("ledgers", "LEDGERS"),
                            ("entries", "ENTRIES"),
                            ("size", "BYTES"),
                        ],
                        rows,
                    )
                ],
            )
            return
        names = dumping.select(engine, managed_ledger, log)
        count = [0]

        def tallied(items):
            for item in items:
                count[0] += 1
                yield item

        from contextlib import closing

        if env.output == "json":
            from pulsar_txn_cli.codec.dumps import dump_object

            # closed before the engine is, even when the reader of stdout went away (`| head`)
            with closing(tallied(dumping.lines(engine, names, dump_object))) as items:
                _emit(items)
        else:
            out = env.stdout
            with closing(tallied(dumping.lines(engine, names))) as items:
                for line in items:
                    out.write(line + "\n")
            out.flush()
    written = "a JSON array" if env.output == "json" else "JSONL, the dump format"
    env.info(
        f"dumped {counted(count[0], 'entry', 'entries')} from {counted(len(names), 'managed ledger')} as {written}"
    )


def metrics() -> None:
    """The buffered-writer metrics in Prometheus text (as /metrics); -o json for a summary."""
    env = current()
    with _open(readonly=True) as engine:
        if env.output == "table":
            env.stdout.write(engine.metrics.prometheus())
            env.stdout.flush()
            return
        data = engine.metrics.summary()
    _emit(data)


# ---------------------------------------------------------------- serve


def serve(
    host: Annotated[str, typer.Option("--host", help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option("--port", min=0, max=65535, help="Port to listen on (0: any free port).")] = 8080,
    latency_ms: Annotated[
        int, typer.Option("--latency-ms", help="Added latency per request, to rehearse against a slow broker.")
    ] = 0,
) -> None:
    """Serve the engine over Pulsar's admin REST paths (for pulsar-admin, curl, or --admin-url).

    While it runs it holds the engine directory: other commands take --admin-url URL, and
    `engine simulate --admin-url URL` adds a workload to the served engine."""
    from pulsar_txn_cli.engine.server import serve as run_server
    from pulsar_txn_cli.output.units import stamp_now

    env = current()
    directory = _dir()
    debug = env.debug_log if env.debug else None

    def log(line: str) -> None:  # a server's log: when each request was answered
        env.info(f"{stamp_now()} {line}")

    url, served = run_server(directory, host, port, latency_ms, log, debug=debug, warn=env.warn)
    log(
        f"stopped serving {url} (SIGTERM) after {counted(served, 'request')}; the engine in {directory} was closed cleanly"
    )
