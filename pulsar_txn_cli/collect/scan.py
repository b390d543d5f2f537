"""Every remaining ledger of every transaction log read, and its batched entries found, without
writing dumps: what `downgrade check --confirm-from-bookies` rests on (downgrade/confirm.py judges).

The ledgers are the ones `collect` plans (plan.py: every coordinator's and transactional
subscription's log, from their internal stats, listed now, after the check). A cluster's are read
with BookKeeper's own shell as collect reads them (shell.py, metadata.py), a few shells at a time.
The embedded engine has no bookies: its store stands in for them (what `engine dump` reads). A
ledger that could not be read and that its log no longer lists was trimmed meanwhile: gone, which
is what the downgrade waits for, not a failure.

Library only: nothing here prints or exits.
"""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from pulsar_txn_cli.collect.plan import LedgerTask, plan, trimmed_meanwhile
from pulsar_txn_cli.collect.run import DEFAULT_CONCURRENCY
from pulsar_txn_cli.downgrade.confirm import LedgerRead, Reading

ENGINE_SOURCE = "the engine's store"


def read_remaining(
    admin, *, shell_options: dict | None = None, metadata_uri: str | None = None, concurrency: int = 16
) -> Reading:
    """Read every remaining ledger of every transaction log of the target. `shell_options` go to
    BookieShell (script=, classpath=, timeout=); `concurrency` bounds the admin calls, and the
    shells run at most collect's default at once (each is a JVM)."""
    tasks, problems = plan(admin, concurrency)
    if admin.target.kind == "engine":
        reads, gone, source = _from_engine(admin, tasks), 0, ENGINE_SOURCE
    else:
        from pulsar_txn_cli.collect import metadata

        uri = metadata_uri or metadata.service_uri(admin.runtime_config())
        reads = _from_bookies(tasks, uri, shell_options or {}, min(concurrency, DEFAULT_CONCURRENCY))
        reads, gone = _without_trimmed(admin, reads, concurrency)
        source = f"the bookies (metadata service {uri})"
    logs = len({t.managed_ledger for t in tasks})
    return Reading(source, tuple(reads), logs, tuple(problems), gone)


def _from_engine(admin, tasks: list[LedgerTask]) -> list[LedgerRead]:
    from pulsar_txn_cli.codec import is_batched

    holding = getattr(admin.transport, "holding", None)
    if holding is None:  # an engine target is always served in process (target/settings.py)
        raise TypeError(f"{admin.target.describe()} is not an engine in this process")
    reads = []
    with holding() as engine:
        for task in tasks:
            ml = engine.managed_ledger(task.managed_ledger)
            read, batched = 0, []
            for ledger_id, entry_id, data in ml.read_after((task.ledger_id, -1)):
                if ledger_id != task.ledger_id:
                    break
                read += 1
                if is_batched(bytes(data)):
                    batched.append(entry_id)
            reads.append(LedgerRead(task.managed_ledger, task.ledger_id, task.entries, task.open, read, tuple(batched)))
    return reads


def _from_bookies(tasks: list[LedgerTask], uri: str, shell_options: dict, shells: int) -> list[LedgerRead]:
    from pulsar_txn_cli.collect.shell import BookieShell

    shell = BookieShell(uri, **shell_options)
    pool = ThreadPoolExecutor(max_workers=max(1, shells), thread_name_prefix="confirm")
    try:
        return list(pool.map(lambda task: _read_one(shell, task), tasks))
    except KeyboardInterrupt:
        shell.close()  # the running shells end at once
        pool.shutdown(wait=True, cancel_futures=True)
        raise
    finally:
        pool.shutdown()
        shell.close()


def _read_one(shell, task: LedgerTask) -> LedgerRead:
    from pulsar_txn_cli.codec import is_batched
    from pulsar_txn_cli.collect.shell import ShellFailed, entries

    read, batched = 0, []
    lines = shell.read(task.ledger_id)
    try:
        for entry_id, data in entries(lines, task.ledger_id, task.entries, task.open):
            read += 1
            if is_batched(data):
                batched.append(entry_id)
    except ShellFailed as exc:
        return LedgerRead(task.managed_ledger, task.ledger_id, task.entries, task.open, read, tuple(batched), str(exc))
    finally:
        lines.close()  # a failed check stops the shell now
    return LedgerRead(task.managed_ledger, task.ledger_id, task.entries, task.open, read, tuple(batched))


def _without_trimmed(admin, reads: list[LedgerRead], concurrency: int) -> tuple[list[LedgerRead], int]:
    """(the reads less the failed ledgers their logs no longer list, how many those were)."""
    gone = trimmed_meanwhile(admin, {(r.managed_ledger, r.ledger_id) for r in reads if r.error}, concurrency)
    kept = [r for r in reads if (r.managed_ledger, r.ledger_id) not in gone]
    return kept, len(reads) - len(kept)
