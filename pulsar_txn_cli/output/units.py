"""Numbers as operators read them in tables (JSON keeps Pulsar's raw numbers)."""

from __future__ import annotations


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
