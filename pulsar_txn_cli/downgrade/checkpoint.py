"""The downgrade checkpoint: per target, the last ledger of each log that may hold batched entries.

The PIP asks the operator to "remember" these ledger ids across hours; this file remembers them.
It is JSON, written atomically (temp file, fsync, rename) so a crash or Ctrl-C never leaves half a
file, and it names its target's identity (admin/identity.py: what the cluster says it is, not
the URL) so a check against another cluster refuses to use it.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path

from pulsar_txn_cli.atomic_write import write_atomically
from pulsar_txn_cli.errors import DataError, UsageError

FORMAT = 1


@dataclass(frozen=True)
class Record:
    last_batched_ledger_id: int
    recorded_at: str
    # The log's cursor as last seen, and since when it has not moved (the check's time on the target's
    # clock): a cursor that stayed put while every transaction open at that time ended is pinned.
    mark_delete: str | None = None
    mark_since: str | None = None


@dataclass(frozen=True)
class Checkpoint:
    target: str
    created_at: str
    coordinators: dict = field(default_factory=dict)  # coordinator id -> Record
    subscriptions: dict = field(default_factory=dict)  # (topic, subscription) -> Record
    # The brokers' buffered-writer counters at the last check (downgrade/batched_since.py), to tell whether
    # batching ran in between; None: not kept (a file from before them), so that cannot be told.
    writers: tuple | None = None
    writers_at: str | None = None  # when the check that read them ran (the target's clock)

    def record_for(self, key: tuple) -> Record | None:
        if key[0] == "coordinator":
            return self.coordinators.get(key[1])
        return self.subscriptions.get((key[1], key[2]))

    def with_records(self, new: dict) -> "Checkpoint":
        """A copy with more records ({item key: Record}); existing records are never replaced."""
        coordinators = dict(self.coordinators)
        subscriptions = dict(self.subscriptions)
        for key, record in new.items():
            if key[0] == "coordinator":
                coordinators.setdefault(key[1], record)
            else:
                subscriptions.setdefault((key[1], key[2]), record)
        return replace(self, coordinators=coordinators, subscriptions=subscriptions)

    def with_raised(self, newest: dict, at: str) -> "Checkpoint":
        """A copy whose records name at least `newest[key]` ({item key: ledger id}): batching may have
        written up to that ledger since the record was taken. Only raises a record."""
        coordinators = dict(self.coordinators)
        subscriptions = dict(self.subscriptions)
        for key, ledger in newest.items():
            table, k = _slot(coordinators, subscriptions, key)
            record = table.get(k)
            if record is not None and ledger > record.last_batched_ledger_id:
                table[k] = replace(record, last_batched_ledger_id=ledger, recorded_at=at)
        return replace(self, coordinators=coordinators, subscriptions=subscriptions)

    def with_writers(self, writers: tuple | None, at: str | None) -> "Checkpoint":
        return replace(self, writers=writers, writers_at=at)

    def with_nothing_batched_before(self, oldest: dict) -> "Checkpoint":
        """A copy whose records say no ledger from `oldest[key]` on is batched ({item key: ledger id}).

        Only lowers a record, and only on evidence that the log's one ledger holds no batched entry
        (the brokers' metrics): the record then names the ledger before it, so the log stays clear
        when that ledger rolls over and is no longer its only one."""
        coordinators = dict(self.coordinators)
        subscriptions = dict(self.subscriptions)
        for key, ledger in oldest.items():
            table, k = _slot(coordinators, subscriptions, key)
            record = table.get(k)
            if record is not None and record.last_batched_ledger_id >= ledger:
                table[k] = replace(record, last_batched_ledger_id=ledger - 1)
        return replace(self, coordinators=coordinators, subscriptions=subscriptions)

    def with_marks(self, logs, taken_at: str) -> "Checkpoint":
        """A copy whose records know each log's cursor, and since when it stands where it is."""
        coordinators = dict(self.coordinators)
        subscriptions = dict(self.subscriptions)
        for log in logs:
            table, key = _slot(coordinators, subscriptions, log.key)
            record = table.get(key)
            if record is not None and log.mark_delete and record.mark_delete != log.mark_delete:
                table[key] = replace(record, mark_delete=log.mark_delete, mark_since=taken_at)
        return replace(self, coordinators=coordinators, subscriptions=subscriptions)

    def without_records(self) -> "Checkpoint":
        return replace(self, coordinators={}, subscriptions={})

    @property
    def size(self) -> int:
        return len(self.coordinators) + len(self.subscriptions)


def _slot(coordinators: dict, subscriptions: dict, key: tuple) -> tuple[dict, object]:
    """The table an item key's record lives in, and its key there."""
    return (coordinators, key[1]) if key[0] == "coordinator" else (subscriptions, key[1:])


class CheckpointError(DataError):
    """The checkpoint file exists but cannot be used."""


def default_path(identity: str) -> Path:
    """One file per target identity in the user state directory (target/remembered.py)."""
    from pulsar_txn_cli.target import remembered

    return remembered.checkpoint_path(identity)


def to_json(checkpoint: Checkpoint) -> dict:
    return {
        "format": FORMAT,
        "target": checkpoint.target,
        "createdAt": checkpoint.created_at,
        "coordinators": [
            {"coordinatorId": cid, **_record_json(r)} for cid, r in sorted(checkpoint.coordinators.items())
        ],
        "subscriptions": [
            {"topic": t, "subscription": s, **_record_json(r)} for (t, s), r in sorted(checkpoint.subscriptions.items())
        ],
        **({} if checkpoint.writers is None else {"writerCounters": [dict(row) for row in checkpoint.writers]}),
        **({} if checkpoint.writers_at is None else {"writerCountersAt": checkpoint.writers_at}),
    }


def _record_json(record: Record) -> dict:
    row = {"lastBatchedLedgerId": record.last_batched_ledger_id, "recordedAt": record.recorded_at}
    if record.mark_delete is not None:
        row.update(markDeletePosition=record.mark_delete, markSince=record.mark_since)
    return row


def _fix_or_remove(path) -> str:
    # Not `downgrade reset`: without this file's --checkpoint it would forget the target's default
    # checkpoint, another file, and it refuses to delete a file that is not a checkpoint.
    return f"fix it, or remove it to start over: rm {shlex.quote(str(path))}"


def from_json(data, where: str) -> Checkpoint:
    """Parse and validate; every defect is a CheckpointError naming the file."""

    def bad(why: str) -> CheckpointError:
        return CheckpointError(f"checkpoint {where} is not usable: {why}", hint=_fix_or_remove(where))

    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise bad(f'expected a JSON object with "format": {FORMAT}')
    target, created = data.get("target"), data.get("createdAt")
    if not isinstance(target, str) or not isinstance(created, str):
        raise bad('"target" and "createdAt" must be strings')
    coordinators, subscriptions = {}, {}
    for row in _rows(data, "coordinators", bad):
        cid = row.get("coordinatorId")
        if not isinstance(cid, int) or isinstance(cid, bool) or cid in coordinators:
            raise bad(f"bad or repeated coordinatorId {cid!r}")
        coordinators[cid] = _record(row, bad)
    for row in _rows(data, "subscriptions", bad):
        key = (row.get("topic"), row.get("subscription"))
        if not all(isinstance(k, str) and k for k in key) or key in subscriptions:
            raise bad(f"bad or repeated subscription {key!r}")
        subscriptions[key] = _record(row, bad)
    at = data.get("writerCountersAt")
    if at is not None and not isinstance(at, str):
        raise bad('"writerCountersAt" must be a string')
    return Checkpoint(target, created, coordinators, subscriptions, _writers(data, bad), at)


def _writers(data: dict, bad) -> tuple | None:
    if "writerCounters" not in data:
        return None
    rows = _rows(data, "writerCounters", bad)
    for row in rows:
        numbers = (row.get("createdMs"), row.get("batches"))
        if not isinstance(row.get("broker"), str) or row.get("log") not in ("tc", "pendingAck"):
            raise bad(f"bad writer counters {row!r}")
        if not all(isinstance(n, int) and not isinstance(n, bool) and n >= 0 for n in numbers):
            raise bad(f"bad writer counters {row!r}")
    return tuple(
        {"broker": r["broker"], "log": r["log"], "createdMs": r["createdMs"], "batches": r["batches"]} for r in rows
    )


def _rows(data: dict, name: str, bad):
    rows = data.get(name, [])
    if not isinstance(rows, list) or not all(isinstance(r, dict) for r in rows):
        raise bad(f'"{name}" must be a list of objects')
    return rows


def _record(row: dict, bad) -> Record:
    ledger, at = row.get("lastBatchedLedgerId"), row.get("recordedAt")
    mark, since = row.get("markDeletePosition"), row.get("markSince")  # absent in files before them
    if not isinstance(ledger, int) or isinstance(ledger, bool) or ledger < -1 or not isinstance(at, str):
        raise bad(f"bad record {row!r}")
    if (mark, since) != (None, None) and not (isinstance(mark, str) and isinstance(since, str)):
        raise bad(f"bad record {row!r}")
    return Record(ledger, at, mark, since)


def load(path: Path) -> Checkpoint | None:
    """The checkpoint at path, or None when there is none yet."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise CheckpointError(f"cannot read checkpoint {path}: {exc.strerror or exc}") from None
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise CheckpointError(f"checkpoint {path} is not valid JSON: {exc}", hint=_fix_or_remove(path)) from None
    return from_json(data, str(path))


def save(path: Path, checkpoint: Checkpoint) -> None:
    """Write atomically: a reader sees the old file or the new one, never a mix."""
    try:
        _write(path, checkpoint)
    except OSError as exc:
        raise CheckpointError(
            f"cannot write checkpoint {path}: {exc.strerror or exc}", hint="choose a writable file with --checkpoint"
        ) from None


def _write(path: Path, checkpoint: Checkpoint) -> None:
    write_atomically(path, json.dumps(to_json(checkpoint), indent=2) + "\n")


def remove(path: Path, *, ours: bool = False) -> bool:
    """Forget the checkpoint; True when there was one.

    A file named by the operator is deleted only when it is a downgrade checkpoint (a JSON object
    with this tool's "format"), so a mistyped --checkpoint never deletes someone's file; ours=True
    (the tool's own file in its state directory) removes even a damaged one.
    """
    if not ours:
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            return False
        except (OSError, ValueError):
            data = None
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise UsageError(
                f'{path} is not a downgrade checkpoint (no "format": {FORMAT}); '
                "pulsar-txn deletes only the checkpoints it wrote"
            )
    try:
        path.unlink()
        return True
    except FileNotFoundError:
        return False
    except OSError as exc:
        raise CheckpointError(f"cannot remove checkpoint {path}: {exc.strerror or exc}") from None
