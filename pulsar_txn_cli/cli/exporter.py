"""`pulsar-txn exporter`: serve the downgrade's progress, batch-log effectiveness and held readers
to Prometheus (or print them once with --once); `--dashboard` prints the Grafana dashboard."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Optional

import typer

from pulsar_txn_cli.cli.common import command, interval_for
from pulsar_txn_cli.cli.env import current
from pulsar_txn_cli.errors import UsageError

DEFAULT_PORT = 9627
DASHBOARD = Path(__file__).resolve().parent.parent / "exporter" / "grafana-dashboard.json"


def register(app: typer.Typer) -> None:
    command(app, "exporter", target=True)(exporter)


def exporter(
    port: Annotated[
        int, typer.Option("--port", min=0, max=65535, help="Port of /metrics (0: any free port).")
    ] = DEFAULT_PORT,
    bind: Annotated[str, typer.Option("--bind", help="Address to listen on.")] = "127.0.0.1",
    interval: Annotated[
        Optional[float],
        typer.Option("--interval", metavar="S", show_default="60", help="Seconds between observations of the target."),
    ] = None,
    namespaces: Annotated[
        Optional[list[str]],
        typer.Option(
            "-n",
            "--namespace",
            metavar="TENANT/NS",
            show_default=False,
            help="Namespaces whose held readers are exported (repeatable; default: every namespace but pulsar/system).",
        ),
    ] = None,
    checkpoint: Annotated[
        Optional[str],
        typer.Option(
            "--checkpoint",
            metavar="FILE",
            show_default=False,
            help="The downgrade checkpoint (default: the one `downgrade check` uses for the target).",
        ),
    ] = None,
    concurrency: Annotated[
        int, typer.Option("--concurrency", min=1, max=256, help="Admin calls in flight at once.")
    ] = 16,
    once: Annotated[
        bool,
        typer.Option(
            "--once",
            help="Observe once, print the metrics (Prometheus text) and exit; "
            "e.g. for node_exporter's textfile collector.",
        ),
    ] = False,
    dashboard: Annotated[
        bool, typer.Option("--dashboard", help="Print the Grafana dashboard (JSON) and exit.")
    ] = False,
) -> None:
    """Prometheus metrics about the target, observed every --interval seconds.

    Each observation is a `downgrade check` (it records into the same checkpoint) plus
    `stuck-readers` over the namespaces. While the target cannot be observed only
    pulsar_txn_exporter_up=0 and the exporter's own series are served, never a stale verdict.
    Exit codes (--once): 0 observed, 4 the target could not be observed.
    """
    env = current()
    interval = interval_for(interval, 60.0, applies=not once, only="without --once: with it there is one observation")
    if dashboard:
        env.stdout.write(DASHBOARD.read_text())
        return
    for namespace in namespaces or []:
        if namespace.count("/") != 1:
            raise UsageError(f"namespace {namespace!r} is not tenant/namespace")
    service = _exporter(env, checkpoint, concurrency, namespaces)
    if once:
        _once(env, service)
        return
    _serve(env, service, bind, port, interval)


def _exporter(env, checkpoint, concurrency, namespaces):
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.exporter import snapshot
    from pulsar_txn_cli.exporter.service import Exporter

    def observe():
        return snapshot.take(
            lambda: connect(env.target, log=env.debug_log if env.debug else None),
            checkpoint=Path(checkpoint).expanduser() if checkpoint else None,
            concurrency=concurrency,
            namespaces=namespaces,
        )

    def report(shot):
        if shot.ok:
            env.debug_log(f"observed {shot.target} in {shot.duration:.2f}s: {shot.verdict.verdict}")
        else:
            env.warn(f"could not observe the target: {shot.error}")

    return Exporter(observe, on_refresh=report)


def _once(env, service) -> None:
    from pulsar_txn_cli.errors import ConnectionFailed

    shot = service.refresh()
    env.stdout.write(service.text())
    env.stdout.flush()
    if not shot.ok:
        raise ConnectionFailed(f"the target could not be observed: {shot.error}")


def _serve(env, service, bind: str, port: int, interval: float) -> None:
    import threading

    from pulsar_txn_cli.exporter.service import serve

    try:
        server = serve(service, bind=bind, port=port)
    except OSError as exc:
        raise UsageError(f"cannot listen on {bind}:{port}: {exc.strerror or exc}") from None
    host, bound = server.server_address[:2]
    env.info(
        f"serving Prometheus metrics on http://{host}:{bound}/metrics, observing every {interval:g}s (Ctrl-C stops)"
    )
    stop = threading.Event()
    try:
        service.refresh()
        service.run(interval, stop)
    finally:
        stop.set()
        server.shutdown()
        server.server_close()
