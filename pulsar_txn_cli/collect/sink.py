"""Where collected ledgers go, and the manifest that lets a second run resume.

A destination stores one dump per ledger (`<managed ledger, quoted>/ledger-<id>.jsonl`, or
`.parquet` with --format parquet) and a manifest under `_collect/` (analyze skips names starting
with `_` or `.`):
- `_collect/collect.json`: the cluster's identity and the format; a destination of another
  cluster, or in the other format, is refused;
- the completed ledgers, one record each, written after the ledger's dump is in place, so an
  interrupted run loses at most the ledgers it was reading. A local directory appends them to
  `_collect/done.jsonl` (synced); a Hadoop file system (hadoop_sink.py) keeps one small file per
  ledger under `_collect/done/`, since object stores cannot append.
A local dump is written to a hidden temporary name, synced, then renamed: a reader never sees half of one.
`open_destination` picks the destination from --out.
"""

from __future__ import annotations

import json
import os
import threading
from pathlib import Path

from pulsar_txn_cli.atomic_write import write_atomically
from pulsar_txn_cli.collect.layout import (
    FORMATS,
    MANIFEST_DIR,
    check_header,
    header_text,
    parse_header,
    relative_name,
    write_dump,
)
from pulsar_txn_cli.errors import UsageError


def open_destination(out: str, fmt: str = "jsonl", spark_conf: dict | None = None, note=None):
    """The destination for --out: a local directory (a path or file://), or a Hadoop file system
    URL (s3a://, hdfs://...) written through a local Spark's JVM. Use it as a context manager."""
    from pulsar_txn_cli.pipeline import remote

    if fmt not in FORMATS:
        raise UsageError(f"--format {fmt}: collect writes {' or '.join(FORMATS)}")
    if fmt == "parquet":
        from pulsar_txn_cli.pipeline import inputs

        inputs.pyarrow_parquet(needs="--format parquet needs")
    if remote.is_url(out):
        from pulsar_txn_cli.collect.hadoop_sink import HadoopDir

        return HadoopDir(out, fmt, spark_conf or {}, note or (lambda message: None))
    return LocalDir(Path(remote.local_path(out)), fmt)


class LocalDir:
    def __init__(self, root: Path, fmt: str = "jsonl"):
        if root.exists() and not root.is_dir():
            raise UsageError(f"--out {root} is a file; give a directory")
        self.root, self.fmt = root, fmt
        self._lock = threading.Lock()

    def __enter__(self) -> "LocalDir":
        return self

    def __exit__(self, *exc) -> None:
        return None

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
                text = header.read_text(encoding="utf-8")
            except OSError:
                text = None
            check_header(str(self.root), parse_header(text), identity, self.fmt)
        else:
            write_atomically(header, header_text(identity, target, self.fmt))
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

    def write_ledger(self, task, entries) -> str:
        """Write one ledger's dump ((entry id, bytes) pairs, streamed) atomically; its path relative to the root."""
        relative = relative_name(task, self.fmt)
        write_dump(self.root / relative, task, entries, self.fmt)
        return relative

    def record(self, record: dict) -> None:
        """Mark a ledger completed (after its dump is in place)."""
        line = json.dumps(record, separators=(",", ":")) + "\n"
        with self._lock, open(self.root / MANIFEST_DIR / "done.jsonl", "a", encoding="utf-8") as out:
            out.write(line)
            out.flush()
            os.fsync(out.fileno())
