"""What a broker's Pulsar release can do, where the tool must know: PIP-160's batched logs came in 2.11.

A 2.10 broker has neither batch-log setting (not even as an unknown key), so a missing value there
means "cannot batch", while on 2.11 or newer it means the answer is unknown. Imports nothing of
the project but its names (names.py).
"""

from __future__ import annotations

import re

from pulsar_txn_cli.names import parse_bool

BATCHED_LOGS_SINCE = (2, 11)


def release(version: str | None) -> tuple[int, ...] | None:
    """(2, 10, 5) from '2.10.5' (or '4.0.7-SNAPSHOT'); None when it is not a version."""
    match = re.match(r"\s*(\d+)\.(\d+)(?:\.(\d+))?", version or "")
    return tuple(int(part) for part in match.groups() if part is not None) if match else None


def lacks_batched_logs(version: str | None) -> bool:
    """True only when the broker's release is known to predate PIP-160."""
    parsed = release(version)
    return parsed is not None and parsed[:2] < BATCHED_LOGS_SINCE


def all_predate_batched_logs(versions: list[str | None]) -> str | None:
    """The release when every broker is known to predate PIP-160 (then no store can batch), else None."""
    old = [v for v in versions if lacks_batched_logs(v)]
    return old[0] if old and len(old) == len(versions) else None


def no_batched_logs(version: str, key: str) -> str:
    return f"this broker ({version}) has no {key}; batched logs need Pulsar 2.11 or newer"


def batch_flag(runtime: dict | None, key: str, version: str | None) -> bool | None:
    """A broker's runtime batch setting: its value, False when the release cannot batch, else None."""
    raw = (runtime or {}).get(key)
    flag = parse_bool(raw)
    if flag is not None:
        return flag
    return False if raw is None and lacks_batched_logs(version) else None
