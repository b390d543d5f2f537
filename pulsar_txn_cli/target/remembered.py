"""What pulsar-txn remembers about each target, on this machine, keyed by the target's identity.

Three kinds of record live in the user state directory, one file per identity (admin/identity.py):
- `targets/<hash>.json`: the batch-log changes this tool made or an operator declared
  (batchlog.py), with the moment and the stores' open times;
- `downgrade/<slug>-<hash>.json`: the downgrade checkpoint (downgrade/checkpoint.py);
- `aborts/<slug>-<hash>.jsonl`: the audit of `abort-hanging`, one JSON line per transaction it
  aborted or tried to (when, by whom, why, the result), only ever appended to; readable by its owner
  only, as the others (written by atomic_write.py, mode 600), and forgotten only when asked for by name
  (`state prune --include-audit`), never by `engine reset` or `state prune --all` alone.
All name their identity inside, so listing and pruning need no connection to the target.
Why on this machine and not in the cluster: see docs/identity.md.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from pathlib import Path

from pulsar_txn_cli.atomic_write import write_atomically
from pulsar_txn_cli.output.units import counted

CHANGES = "batch-log changes"
CHECKPOINT = "downgrade checkpoint"
ABORTS = "abort audit"


def state_dir() -> Path:
    import platformdirs

    return Path(platformdirs.user_state_dir("pulsar-txn"))


def changes_path(identity: str) -> Path:
    digest = hashlib.sha256(identity.encode()).hexdigest()[:16]
    return state_dir() / "targets" / f"{digest}.json"


def checkpoint_path(identity: str) -> Path:
    """<state dir>/downgrade/<readable slug>-<hash>.json."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return state_dir() / "downgrade" / f"{_slug(identity)}-{digest}.json"


def _slug(identity: str) -> str:
    return re.sub(r"[^A-Za-z0-9.-]+", "_", identity).strip("_")[-60:] or "target"


def aborts_path(identity: str) -> Path:
    """<state dir>/aborts/<readable slug>-<hash>.jsonl."""
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return state_dir() / "aborts" / f"{_slug(identity)}-{digest}.jsonl"


def append_aborts(identity: str, records: list[dict]) -> Path:
    """Append one line per record (flushed and fsynced): an audit is never rewritten, only extended. Mode 600,
    whatever the umask, and an older audit made readable to others is made private again."""
    import os

    path = aborts_path(identity)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o600)
    os.fchmod(fd, 0o600)
    with open(fd, "a", encoding="utf-8") as out:
        for record in records:
            out.write(json.dumps({**record, "target": identity}, sort_keys=True) + "\n")
        out.flush()
        os.fsync(out.fileno())
    return path


def load_aborts(identity: str) -> list[dict]:
    try:
        lines = aborts_path(identity).read_text(encoding="utf-8").splitlines()
    except OSError:
        return []
    return [json.loads(line) for line in lines if line.strip()]


def load_changes(identity: str) -> dict:
    """{"target": identity, "changes": {setting: record}, "seenAs": [...]}; empty when none or unreadable."""
    empty = {"target": identity, "changes": {}}
    try:
        doc = json.loads(changes_path(identity).read_text())
    except (OSError, ValueError):
        return empty
    ok = isinstance(doc, dict) and doc.get("target") == identity and isinstance(doc.get("changes"), dict)
    return doc if ok else empty


def save_changes(identity: str, doc: dict, seen_as: str | None = None) -> None:
    """Atomically (atomic_write.py), so a crash never leaves half a file; merged under a lock with what is
    on disk now, so two runs sharing a state directory (one switching each log) never lose each other's record."""
    path = changes_path(identity)
    with _locked(path):
        on_disk = load_changes(identity)
        seen = set(on_disk.get("seenAs") or ()) | set(doc.get("seenAs") or ()) | ({seen_as} if seen_as else set())
        merged = {**doc, "changes": {**on_disk["changes"], **doc["changes"]}, "target": identity}
        if seen:
            merged["seenAs"] = sorted(seen)
        write_atomically(path, json.dumps(merged, indent=2, sort_keys=True))


def lock_path(path: Path) -> Path:
    """Where earlier versions kept a record's lock: an empty file, removed when the record is forgotten."""
    return path.parent / f".{path.name}.lock"


class _locked:
    """An exclusive lock on the record's directory itself (fcntl.flock on its descriptor; released when it
    closes): no lock file is left beside the records."""

    def __init__(self, path: Path):
        self.directory = path.parent

    def __enter__(self):
        import fcntl
        import os

        self.directory.mkdir(parents=True, exist_ok=True)
        self.fd = os.open(self.directory, os.O_RDONLY)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        import os

        os.close(self.fd)


def listing() -> list[dict]:
    """Every record file: {identity, kind, detail, updatedAt, file}, oldest identity first."""
    rows = []
    for kind, folder in ((CHANGES, "targets"), (CHECKPOINT, "downgrade"), (ABORTS, "aborts")):
        for path in sorted((state_dir() / folder).glob("*.jsonl" if kind == ABORTS else "*.json")):
            try:
                doc = _audit_doc(path) if kind == ABORTS else json.loads(path.read_text())
                mtime = path.stat().st_mtime
            except (OSError, ValueError):
                continue  # not ours, or half gone: nothing to list
            if not isinstance(doc, dict) or not isinstance(doc.get("target"), str):
                continue
            rows.append(
                {
                    "identity": doc["target"],
                    "kind": kind,
                    "detail": _detail(kind, doc),
                    "seenAs": doc.get("seenAs") or [],
                    "updatedAt": int(mtime) * 1000,  # epoch ms, as every moment in JSON
                    "file": str(path),
                    "_mtime": mtime,
                }
            )
    return sorted(rows, key=lambda r: (r["identity"], r["kind"]))


def prune(
    identities: list[str] | None = None,
    older_than_s: float | None = None,
    everything: bool = False,
    audits: bool = False,
) -> tuple[list[dict], list[dict]]:
    """Delete the record files that match; an abort audit only with `audits`. Returns (the rows deleted, the
    audits that matched and were kept)."""
    now = time.time()
    gone, kept = [], []
    for row in listing():
        chosen = (
            everything
            or (identities and row["identity"] in identities)
            or (older_than_s is not None and now - row["_mtime"] > older_than_s)
        )
        if chosen and row["kind"] == ABORTS and not audits:
            kept.append(row)
        elif chosen:
            Path(row["file"]).unlink(missing_ok=True)
            lock_path(Path(row["file"])).unlink(missing_ok=True)  # forgotten whole: no empty lock file left
            gone.append(row)
    return gone, kept


def _audit_doc(path: Path) -> dict:
    lines = [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    return {"target": lines[0].get("target") if lines else None, "records": lines}


def public(row: dict) -> dict:
    return {k: v for k, v in row.items() if not k.startswith("_")}


def _detail(kind: str, doc: dict) -> str:
    if kind == CHANGES:
        changes = doc.get("changes") or {}
        return (
            ", ".join(
                f"{k}={str(c.get('value')).lower()}{' (declared)' if c.get('declared') else ''}"
                for k, c in sorted(changes.items())
                if isinstance(c, dict)
            )
            or "none"
        )
    if kind == ABORTS:
        records = doc.get("records") or []
        done = sum(1 for r in records if r.get("aborted"))
        return f"{counted(done, 'transaction')} aborted by abort-hanging, {len(records) - done} failed"
    count = len(doc.get("coordinators") or []) + len(doc.get("subscriptions") or [])
    return f"{counted(count, 'last-batched ledger record')}"
