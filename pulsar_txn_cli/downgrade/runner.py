"""One downgrade check end to end, and the polling of `--wait`: load the checkpoint, observe,
judge, verify, confirm, save. Never prints; the CLI renders what it returns."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from pulsar_txn_cli.admin.counting import counted, requests_sent
from pulsar_txn_cli.downgrade import checkpoint as cp_store
from pulsar_txn_cli.downgrade import gather, verdict as v
from pulsar_txn_cli.downgrade.entry_scan import apply_entry_scan


@dataclass
class CheckResult:
    verdict: v.DowngradeVerdict
    observations: object
    checkpoint_path: Path
    saved: bool
    requests: int  # sent to the target by this check (admin/counting.py)
    confirmation: object = None  # confirm.Reading when a SAFE was confirmed by reading the ledgers


def checkpoint_path(admin, override: str | None) -> Path:
    return Path(override).expanduser() if override else cp_store.default_path(admin.identity())


def check(
    admin,
    path: Path,
    *,
    concurrency: int = gather.DEFAULT_CONCURRENCY,
    progress=None,
    verify: list[str] | None = None,
    confirm=None,
    may_start: bool = True,
) -> CheckResult:
    """Steps 1 and 2-1..2-7 once. The checkpoint is saved only when it changed, and
    atomically, so an interrupted check leaves the previous file intact. `confirm()`, when given,
    reads every remaining ledger (collect/scan.py, passed in from above) once the verdict is SAFE, or a
    WAIT that only stored entries keep from SAFE; what it read decides (downgrade/confirm.py). `verify`'s dumps
    come last: they can only fail the verdict, whatever the reading made of it."""
    try:
        before, error = cp_store.load(path), None
    except cp_store.CheckpointError as exc:
        before, error = None, f"{exc}; {exc.hint}" if exc.hint else str(exc)  # the verdict says how to fix it
    admin = counted(admin)
    observations = gather.gather(admin, concurrency=concurrency, progress=progress)
    result = v.downgrade_verdict(observations, before, checkpoint_error=error)
    reading = None
    if confirm is not None:
        from pulsar_txn_cli.downgrade.confirm import apply_confirmation, read_for

        if read_for(result):
            reading = confirm()
            result = apply_confirmation(result, reading)
    if verify:  # after the reading, which may settle a WAIT: what the dumps show can only fail what it left
        from pulsar_txn_cli.downgrade.verify import scan

        result = apply_entry_scan(result, scan(verify))
    saved = False
    after = result.checkpoint
    # The first check that holds the downgrade back starts it even with no ledger recorded (batching still on,
    # or no log readable yet), so `doctor` and the batching switches know it is under way; the exporter, which
    # only watches (may_start=False), never starts one on a cluster that batches on purpose.
    holds_back = may_start and result.verdict != v.SAFE
    if after is not None and after != before and (before is not None or after.size or holds_back):
        cp_store.save(path, after)
        saved = True
    return CheckResult(result, observations, path, saved, requests_sent(admin), reading)


def wait(
    admin,
    path: Path,
    *,
    interval: float,
    timeout: float | None,
    on_check,
    sleep=time.sleep,
    clock=time.monotonic,
    **options,
) -> CheckResult:
    """Check until SAFE or BLOCKED (an operator must act) or the timeout; on_check(result, n) after
    each check. A connection failure while waiting is reported through on_check's caller and retried."""
    return poll(
        lambda: check(admin, path, **options),
        lambda result: result.verdict.verdict in (v.SAFE, v.BLOCKED),
        interval=interval,
        timeout=timeout,
        on_check=on_check,
        sleep=sleep,
        clock=clock,
    )


def poll(attempt, done, *, interval: float, timeout: float | None, on_check, sleep, clock):
    """The `--wait` loop of `downgrade check` and `doctor`: attempt() until done(result) or the timeout;
    on_check(result, n, failure) after each attempt. A connection failure is retried; at the timeout the
    last result is returned, or the failure raised when there is none."""
    from pulsar_txn_cli.errors import ConnectionFailed

    deadline = None if timeout is None else clock() + timeout
    n = 0
    while True:
        n += 1
        try:
            result, failure = attempt(), None
        except ConnectionFailed as exc:
            result, failure = None, exc
        on_check(result, n, failure)
        if result is not None and done(result):
            return result
        remaining = None if deadline is None else deadline - clock()
        if remaining is not None and remaining <= 0:
            if result is None:
                raise failure
            return result
        sleep(interval if remaining is None else min(interval, remaining))
