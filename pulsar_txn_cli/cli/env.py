"""The environment every command runs in (after httpie's Environment).

It carries the streams, the global options (output format, colour, verbosity) and the target
flags, and hands out the admin client. Tests build their own Env to swap streams and tty-ness.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import TextIO

from pulsar_txn_cli.target.settings import TargetFlags


@dataclass
class Env:
    stdout: TextIO = field(default_factory=lambda: sys.stdout)
    stderr: TextIO = field(default_factory=lambda: sys.stderr)
    output: str = "table"
    no_color: bool = False
    quiet: bool = False
    debug: bool = False
    target: TargetFlags = field(default_factory=TargetFlags)
    announce_target: bool = False  # a command that changes state names its target even under --quiet
    _admin: object = None

    @property
    def stdout_isatty(self) -> bool:
        return _isatty(self.stdout)

    @property
    def stderr_isatty(self) -> bool:
        return _isatty(self.stderr)

    @property
    def color(self) -> bool:
        """Colour only on a terminal, never with NO_COLOR, --no-color or TERM=dumb."""
        if self.no_color or os.environ.get("NO_COLOR") or os.environ.get("TERM") == "dumb":
            return False
        return self.stdout_isatty

    def info(self, message: str) -> None:
        """A message for the human (stderr), silenced by --quiet."""
        if not self.quiet:
            print(self.pasteable(message), file=self.stderr)

    def warn(self, message: str) -> None:
        print(f"warning: {self.pasteable(message)}", file=self.stderr)

    def pasteable(self, message: str) -> str:
        """The message with every command it suggests carrying this command's target (cli/advice.py)."""
        if "pulsar-txn " not in message and "pulsar-admin " not in message:
            return message
        from pulsar_txn_cli.cli.advice import carry_target

        return carry_target(message, self)

    def progress(self, total: int | None, label: str, unit: str = "items"):
        from pulsar_txn_cli.output.progress import Progress

        return Progress(self, total, label, unit)

    def admin(self):
        """The admin client for the chosen target (a real cluster or the embedded engine)."""
        if self._admin is None:
            from pulsar_txn_cli.admin import connect

            admin = connect(self.target, log=self.debug_log if self.debug else None)
            if admin.target.kind == "engine":  # a mistyped --engine-dir: one error, before any target line
                from pulsar_txn_cli.engine.transport import require_engine

                require_engine(admin.target.engine_dir, admin.target.source)
            self._admin = admin
            line = f"target: {self._admin.target.describe()}{_new_engine_note(self._admin.target)}"
            if self.announce_target:
                print(line, file=self.stderr)
            else:
                self.info(line)
        return self._admin

    @property
    def chosen_target(self):
        """The resolved target once a command has connected (None before), for messages and advice."""
        return None if self._admin is None else self._admin.target

    def debug_log(self, message: str) -> None:
        if self.debug:
            print(f"debug: {message}", file=self.stderr)

    def close(self) -> None:
        if self._admin is not None:
            close = getattr(self._admin, "close", None)
            if close:
                close()
            self._admin = None


def _new_engine_note(target) -> str:
    """Say so when the first command on an engine directory is about to create the engine."""
    if getattr(target, "kind", None) != "engine":
        return ""
    from pathlib import Path

    from pulsar_txn_cli.engine.broker import exists

    return "" if exists(Path(target.engine_dir)) else " (new: created with the defaults, see `engine init`)"


def _isatty(stream) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


ENV = Env()


def current() -> Env:
    return ENV


def reset(env: Env | None = None) -> Env:
    """Install a fresh Env (each main() call and each test gets its own)."""
    global ENV
    ENV = env or Env()
    return ENV
