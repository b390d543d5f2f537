"""What a collect destination holds, wherever it is (sink.py explains the layout): the names
of the dumps, the header that says whose collection it is, and how one ledger's dump is written."""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

from pulsar_txn_cli.atomic_write import write_atomically
from pulsar_txn_cli.errors import UsageError

MANIFEST_DIR = "_collect"
FORMATS = ("jsonl", "parquet")


def relative_name(task, fmt: str) -> str:
    """Where a ledger's dump goes under the destination's root."""
    name = quote(task.managed_ledger, safe="")
    if name[:1] in "._":
        name = f"%{ord(name[0]):02X}{name[1:]}"
    return f"{name}/ledger-{task.ledger_id}.{fmt}"


def write_dump(path: Path, task, entries, fmt: str) -> None:
    """Write one ledger's (entry id, bytes) pairs, streamed, to a local file atomically and durably."""
    from pulsar_txn_cli.codec.dumps import dump_line

    if fmt == "parquet":
        from pulsar_txn_cli.pipeline import inputs

        rows = ((task.managed_ledger, task.ledger_id, entry_id, data, None, None) for entry_id, data in entries)
        inputs.write_parquet(rows, str(path))
    else:
        write_atomically(
            path, (dump_line(task.managed_ledger, task.ledger_id, entry_id, data) + "\n" for entry_id, data in entries)
        )


def check_header(where: str, header: dict | None, identity: str, fmt: str) -> None:
    """Refuse a destination that holds another cluster's collection, or one in the other format."""
    known = header.get("identity") if isinstance(header, dict) else None
    if known != identity:
        raise UsageError(
            f"--out {where} holds a collection of another cluster ({known or 'unreadable'}); choose another directory"
        )
    held = header.get("format", "jsonl")
    if held != fmt:
        raise UsageError(f"--out {where} holds a {held} collection; give --format {held} or choose another directory")


def parse_header(text: str | bytes | None) -> dict | None:
    try:
        header = json.loads(text)
    except (TypeError, ValueError):
        return None
    return header if isinstance(header, dict) else None


def header_text(identity: str, target: str, fmt: str) -> str:
    return json.dumps({"identity": identity, "target": target, "format": fmt}, indent=2) + "\n"
