"""Natural order of names: runs of digits compare as numbers, so `sub-2` comes before `sub-10`
and `partition-9` before `partition-10`. Every list of names the tool shows is in this order."""

from __future__ import annotations

import re

_DIGITS = re.compile(r"(\d+)")


def natural_key(name: str | None) -> tuple:
    """A sort key; None sorts last. re.split with a group alternates text and digits, so the
    parts of two keys always line up as str with str and int with int."""
    if name is None:
        return (True, ())
    parts = _DIGITS.split(name)
    return (False, tuple(int(p) if i % 2 else p for i, p in enumerate(parts)))
