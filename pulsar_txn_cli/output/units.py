"""Times and durations, the one place they are written and read: as operators read them in tables,
messages and records (JSON keeps Pulsar's raw epoch milliseconds), and as they type them.

A leaf (docs/architecture.md's layers): the library below the CLI formats times through it too.
Every time is UTC. Each format keeps the text its callers have always shown:
- iso_millis:     2026-05-01T10:00:00.123Z  Pulsar's own text (protocol.timestamp_text); "-" when unknown
- iso_seconds:    2026-05-01T10:00:00Z      a record's moment (a check's taken_at, a state file's mtime)
- spaced_seconds: 2026-05-01 10:00:00Z      a table cell next to a duration (stuck-readers)
- spaced_utc:     2026-05-01 10:00:00 UTC   a report's generation time (analyze --html)
- stamp_now:      2026-05-01T10:00:00.123Z  now, at the start of a log line (engine serve)
And counts in sentences: counted(1, "entry", "entries") is "1 entry", never "1 entries".
"""

from __future__ import annotations

import re
from datetime import datetime, timezone

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.protocol import timestamp_text

_DURATION = re.compile(r"^(\d+(?:\.\d+)?)\s*(ms|s|m|h|d|w|y)?$")
_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000, "y": 31_536_000_000}


# ---------------------------------------------------------------- durations


def duration(ms: int | float | None) -> str:
    """A duration in milliseconds as its two largest units: 500ms, 45s, 10m, 2m5s, 1h30m, 3d4h."""
    if ms is None:
        return "?"
    ms = int(ms)
    if ms < 1000:
        return f"{ms}ms"
    s = ms // 1000
    for size, unit, sub_size, sub_unit in ((86400, "d", 3600, "h"), (3600, "h", 60, "m"), (60, "m", 1, "s")):
        if s >= size:
            rest = s % size // sub_size
            return f"{s // size}{unit}{rest}{sub_unit}" if rest else f"{s // size}{unit}"
    return f"{s}s"


def parse_duration_ms(text: str, option: str = "--time") -> int:
    """Pulsar's relative times (1s, 10s, 1m, 5h, 3d; a bare number is seconds), in milliseconds."""
    match = _DURATION.match(text.strip().lower())
    if not match and _DURATION.match(text.strip().lower().removeprefix("-")):
        raise UsageError(f"{option} {text!r} is negative: a duration is 0 or more, like 500ms, 1s, 10s, 1m, 5h or 3d")
    if not match:
        raise UsageError(f"{option} {text!r} is not a duration like 500ms, 1s, 10s, 1m, 5h or 3d")
    return int(float(match.group(1)) * _UNIT_MS[match.group(2) or "s"])


# ---------------------------------------------------------------- moments


def parse_time_ms(text: str, option: str) -> int:
    """Epoch milliseconds from epoch ms digits or an ISO 8601 time (UTC unless it says otherwise)."""
    value = text.strip()
    if value.isdigit():
        return int(value)
    moment = iso_ms(value)
    if moment is None:
        raise UsageError(f"{option} {text!r} is not a time: give ISO 8601 (2026-05-01T10:00:00Z) or epoch milliseconds")
    return moment


def iso_ms(text) -> int | None:
    """ISO 8601 text (Pulsar's internal-stats timestamps; UTC unless it says otherwise) in epoch ms, or
    None when absent or not a time."""
    if not isinstance(text, str) or not text.strip():
        return None
    try:
        moment = datetime.fromisoformat(text.strip().replace("Z", "+00:00").replace("z", "+00:00"))
    except ValueError:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=timezone.utc)
    return round(moment.timestamp() * 1000)


def iso_millis(ms: int | None) -> str:
    """2026-05-01T10:00:00.123Z (Pulsar's text), or "-" for no time (None or 0)."""
    return timestamp_text(ms) if ms else "-"


def iso_seconds(ms: int) -> str:
    """2026-05-01T10:00:00Z."""
    return _utc(ms).strftime("%Y-%m-%dT%H:%M:%SZ")


def spaced_seconds(ms: int) -> str:
    """2026-05-01 10:00:00Z."""
    return _utc(ms).strftime("%Y-%m-%d %H:%M:%SZ")


def counted(n: int, singular: str, plural: str | None = None) -> str:
    """A count and its noun, agreed: 1 entry, 2 entries, 0 entries (plural: when not singular + s)."""
    return f"{n} {singular if n == 1 else plural or singular + 's'}"


def stamp_now() -> str:
    """Now, as a log line starts: 2026-05-01T10:00:00.123Z (UTC, milliseconds)."""
    now = datetime.now(timezone.utc)
    return now.strftime("%Y-%m-%dT%H:%M:%S.") + f"{now.microsecond // 1000:03d}Z"


def spaced_utc(moment: datetime | None = None) -> str:
    """2026-05-01 10:00:00 UTC, of MOMENT (an aware datetime) or now."""
    return (moment or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M:%S UTC")


def _utc(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, timezone.utc)
