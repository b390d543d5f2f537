"""Collect every transaction log of a cluster: plan, then read the ledgers in parallel (bounded).

Each ledger is read by one BookieShell run, checked against the broker's entry count, written
atomically and then recorded in the manifest. A ledger that fails is reported and left out of
the manifest, so running the same command again reads exactly the ledgers still missing (and the
open ledgers again, which may have grown). Ctrl-C stops the running shells and keeps every
completed ledger.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor, as_completed

from pulsar_txn_cli.errors import DataError, InterruptedWork, UsageError

DEFAULT_CONCURRENCY = 4


def collect(
    admin,
    out: str,
    *,
    shell_options: dict,
    concurrency: int = DEFAULT_CONCURRENCY,
    fmt: str = "jsonl",
    spark_conf: dict | None = None,
    metadata_uri: str | None = None,
    progress=None,
    note=None,
) -> dict:
    """Collect into `out` (a directory or a Hadoop file-system URL, sink.py) as `fmt` (jsonl or
    parquet); the summary (what `collect -o json` prints). `shell_options` go to BookieShell
    (script=, classpath=, timeout=); `spark_conf` to the Spark that writes to a URL;
    `note(message)` gets what the user should know."""
    from pulsar_txn_cli.collect import metadata
    from pulsar_txn_cli.collect.plan import plan, trimmed_meanwhile
    from pulsar_txn_cli.collect.sink import open_destination

    if concurrency < 1:
        raise UsageError(f"--concurrency must be at least 1, not {concurrency}")
    note = note or (lambda message: None)
    target = admin.target
    if target.kind == "engine":
        raise UsageError(
            "collect reads a cluster's bookies, and the embedded engine has none: its logs are already at hand "
            "with `pulsar-txn engine dump --log all > DIR/engine.jsonl` (or give --admin-url)"
        )
    destination = open_destination(out, fmt, spark_conf, note)  # checked now, opened once the plan stands
    identity = admin.identity()
    uri = metadata_uri or metadata.service_uri(admin.runtime_config())
    started = time.monotonic()
    tasks, problems = plan(admin, concurrency)
    if not tasks and not problems:
        raise DataError(f"{target.describe()} has no transaction-log ledgers (are transactions enabled?)")
    with destination:
        done = destination.begin(identity, target.describe())
        todo = [t for t in tasks if t.key not in done or done[t.key].get("open")]
        note(
            f"collect: {len(tasks)} ledgers of {len({t.managed_ledger for t in tasks})} logs, "
            f"{len(tasks) - len(todo)} already in {destination}, reading {len(todo)} with {concurrency} shells "
            f"(metadata service {uri})"
        )
        read, failed = _read_all(destination, tasks, todo, uri, shell_options, concurrency, progress)
    gone = trimmed_meanwhile(admin, {(f["managedLedger"], f["ledgerId"]) for f in failed}, concurrency)
    failed = [f for f in failed if (f["managedLedger"], f["ledgerId"]) not in gone]
    shell_seconds = sum(r["seconds"] for r in read)
    return {
        "out": str(destination),
        "format": fmt,
        "target": target.describe(),
        "identity": identity,
        "metadataServiceUri": uri,
        "logs": len({t.managed_ledger for t in tasks}),
        "ledgers": len(tasks),
        "alreadyCollected": len(tasks) - len(todo),
        "read": len(read),
        "entries": sum(r["entries"] for r in read),
        "bytes": sum(r["bytes"] for r in read),
        "failed": sorted(failed, key=lambda f: (f["managedLedger"], f["ledgerId"])),
        "goneBeforeRead": len(gone),  # trimmed by their logs between the listing and the read
        "problems": problems,
        "concurrency": concurrency,
        "seconds": round(time.monotonic() - started, 2),
        "secondsPerLedger": round(shell_seconds / len(read), 3) if read else None,
    }


def _read_all(destination, tasks, todo, uri, shell_options, concurrency, progress) -> tuple[list, list]:
    """(records of the ledgers read, the ledgers that failed); Ctrl-C keeps what is complete."""
    from pulsar_txn_cli.collect.shell import BookieShell

    shell = BookieShell(uri, **shell_options)
    read, failed = [], []
    if progress is not None:
        progress.update(total=len(todo), completed=0, description="collect")
    pool = ThreadPoolExecutor(max_workers=concurrency, thread_name_prefix="collect")
    futures: dict = {}
    try:
        futures.update({pool.submit(_one, shell, destination, task): task for task in todo})
        for future in as_completed(futures):
            task = futures[future]
            try:
                record = future.result()
            except (DataError, OSError) as exc:  # a bad ledger, or a dump that could not be written (disk full)
                error = str(exc) if isinstance(exc, DataError) else f"cannot write its dump: {exc.strerror or exc}"
                failed.append({"managedLedger": task.managed_ledger, "ledgerId": task.ledger_id, "error": error})
            else:
                read.append(record)
            if progress is not None:
                progress.advance()
    except KeyboardInterrupt:
        shell.close()  # the running shells fail at once; a ledger already being written still completes
        pool.shutdown(wait=True, cancel_futures=True)
        kept = (
            len(tasks) - len(todo) + sum(1 for f in futures if f.done() and not f.cancelled() and f.exception() is None)
        )
        raise InterruptedWork(
            f"interrupted: {kept} of {len(tasks)} ledgers are complete in {destination}; "
            "run the same command again to read the rest"
        ) from None
    finally:
        pool.shutdown()
        shell.close()
    return read, failed


def _one(shell, destination, task) -> dict:
    from pulsar_txn_cli.collect.shell import entries

    t0 = time.monotonic()
    counted = {"entries": 0, "bytes": 0}
    lines = shell.read(task.ledger_id)
    try:
        relative = destination.write_ledger(
            task, _counted(entries(lines, task.ledger_id, task.entries, task.open), counted)
        )
    finally:
        lines.close()  # a failed check or write stops the shell now, not when the generator is collected
    record = {
        "key": task.key,
        "managedLedger": task.managed_ledger,
        "log": task.log,
        "ledgerId": task.ledger_id,
        "open": task.open,
        **counted,
        "seconds": round(time.monotonic() - t0, 3),
        "file": relative,
    }
    destination.record(record)
    return record


def _counted(found, counted: dict):
    """The (entry id, bytes) pairs, counting them and their bytes into `counted`."""
    for entry_id, data in found:
        counted["entries"] += 1
        counted["bytes"] += len(data)
        yield entry_id, data
