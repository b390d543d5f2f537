"""Messages the library has for the person waiting while it works (e.g. for the engine's lock).

The library never prints: it calls `notify(text)`, and the CLI (cli/main.py) installs the
listener that shows the text on stderr. Without a listener (a library user, a test) nothing is shown.
"""

from __future__ import annotations

from typing import Callable

_listener: Callable[[str], None] | None = None


def listen(fn: Callable[[str], None] | None) -> None:
    global _listener
    _listener = fn


def notify(text: str) -> None:
    if _listener is not None:
        _listener(text)
