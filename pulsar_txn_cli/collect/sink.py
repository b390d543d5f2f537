"""Where collected ledgers go, and the manifest that lets a second run resume.

A destination stores one JSONL dump per ledger (`<managed ledger, quoted>/ledger-<id>.jsonl`) and
a manifest under `_collect/` (analyze skips names starting with `_` or `.`):
- `_collect/collect.json`: the cluster's identity; a directory of another cluster is refused;
- `_collect/done.jsonl`: one line per completed ledger, appended and synced after its dump is in
  place, so an interrupted run loses at most the ledgers it was reading.
A dump is written to a temporary name, synced, then renamed (atomic_write.py): a reader never sees half of one.
`open_destination` picks the destination from --out; only local directories exist today.
"""
from __future__ import annotations

import json
import os
import threading
from pathlib import Path
from urllib.parse import quote

from pulsar_txn_cli.atomic_write import write_atomically
from pulsar_txn_cli.errors import UsageError

MANIFEST_DIR = "_collect"


def open_destination(out: str) -> "LocalDir":
    scheme = out.split("://", 1)[0] if "://" in out else None
    if scheme == "file":
        out = out[len("file://"):]
    elif scheme is not None:
        raise UsageError(f"--out {out}: collect writes to a local directory (file:// or a path), not {scheme}://")
    return LocalDir(Path(out))


class LocalDir:
    def __init__(self, root: Path):
        if root.exists() and not root.is_dir():
            raise UsageError(f"--out {root} is a file; give a directory")
        self.root = root
        self._lock = threading.Lock()

    def __str__(self) -> str:
        return str(self.root)

    def begin(self, identity: str, target: str) -> dict[str, dict]:
        """Claim the directory for this cluster; the ledgers a previous run completed, by key."""
        meta_dir = self.root / MANIFEST_DIR
        try:
            meta_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise UsageError(f"--out {self.root}: cannot create it ({exc.strerror or exc})") from None
        header = meta_dir / "collect.json"
        if header.exists():
            try:
                known = json.loads(header.read_text(encoding="utf-8")).get("identity")
            except (OSError, ValueError, AttributeError):
                known = None
            if known != identity:
                raise UsageError(f"--out {self.root} holds a collection of another cluster ({known or 'unreadable'}); "
                                 "choose another directory")
        else:
            write_atomically(header, [json.dumps({"identity": identity, "target": target}, indent=2) + "\n"])
        return self._completed()

    def _completed(self) -> dict[str, dict]:
        done = {}
        path = self.root / MANIFEST_DIR / "done.jsonl"
        if path.exists():
            for line in path.read_text(encoding="utf-8").splitlines():
                try:
                    record = json.loads(line)
                    done[record["key"]] = record
                except (ValueError, KeyError, TypeError):
                    continue  # a line torn by a crash: that ledger is read again
        return {k: r for k, r in done.items() if (self.root / r.get("file", "")).is_file()}

    def write_ledger(self, task, lines) -> str:
        """Write one ledger's dump (an iterable of lines, streamed) atomically; its path relative to the root."""
        name = quote(task.managed_ledger, safe="")
        if name[:1] in "._":
            name = f"%{ord(name[0]):02X}{name[1:]}"
        relative = f"{name}/ledger-{task.ledger_id}.jsonl"
        write_atomically(self.root / relative, (line + "\n" for line in lines))
        return relative

    def record(self, record: dict) -> None:
        """Mark a ledger completed (after its dump is in place)."""
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock, open(self.root / MANIFEST_DIR / "done.jsonl", "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
