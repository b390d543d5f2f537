"""One observation of the target for the exporter: a downgrade check, the held readers and the doctor.

It is `downgrade check` (same checkpoint, same records) plus `stuck-readers` over the chosen
namespaces, taken with a fresh admin connection each time so an engine's lock is held only
while it is observed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

SYSTEM_NAMESPACE = "pulsar/system"


@dataclass
class Snapshot:
    target: str
    started: float  # Unix seconds
    duration: float
    verdict: object | None = None  # downgrade.verdict.DowngradeVerdict
    held_readers: dict[str, dict] = field(default_factory=dict)  # namespace -> find_stuck_readers()
    doctor: object | None = None  # doctor.run.Report of the whole cluster
    error: str | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def take(
    connect, *, checkpoint: Path | None, concurrency: int, namespaces: list[str] | None, clock=time.time
) -> Snapshot:
    """Observe once. Any failure makes the whole snapshot failed: a partial one could show a
    verdict without the logs behind it."""
    from pulsar_txn_cli.transport.redact import redact
    from pulsar_txn_cli.doctor import run as doctor_run
    from pulsar_txn_cli.doctor.read import Scope
    from pulsar_txn_cli.downgrade import runner
    from pulsar_txn_cli.errors import PulsarTxnError
    from pulsar_txn_cli.stuck_readers import find_stuck_readers

    started = clock()
    admin = None
    try:
        admin = connect()
        path = runner.checkpoint_path(admin, str(checkpoint) if checkpoint else None)
        result = runner.check(admin, path, concurrency=concurrency, may_start=False)
        now_ms = admin.now_ms()
        held = {
            ns: find_stuck_readers(admin, namespace=ns, now_ms=now_ms)
            for ns in (namespaces if namespaces is not None else user_namespaces(admin))
        }
        report = doctor_run.run(admin, Scope(), concurrency=concurrency, downgrade_state=False)
        return Snapshot(admin.target.describe(), started, clock() - started, result.verdict, held, report)
    except Exception as exc:  # noqa: BLE001 - a long-running exporter reports any failure as up=0 and goes on
        target = admin.target.describe() if admin is not None else "?"
        error = str(exc) if isinstance(exc, PulsarTxnError) else redact(f"unexpected {type(exc).__name__}: {exc}")
        return Snapshot(target, started, clock() - started, error=error)
    finally:
        if admin is not None:
            admin.close()


def user_namespaces(admin) -> list[str]:
    """Every namespace but Pulsar's own system namespace, whose buffers are not the readers' concern."""
    return sorted(ns for tenant in admin.tenants() for ns in admin.namespaces(tenant) if ns != SYSTEM_NAMESPACE)
