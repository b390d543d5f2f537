"""Every error the library raises, each carrying its documented exit code.

This is the one place where failures meet exit codes; cli/main.py turns any of these into one
line on stderr and that code (and names.InvalidName, a topic name, position or transaction id that
does not parse, into a usage error: exit code 2). Messages are full sentences naming what is wrong and where, and
never contain credentials (transport/redact.py scrubs anything that came from a server).
"""

from __future__ import annotations

from enum import IntEnum


class ExitCode(IntEnum):
    OK = 0
    UNEXPECTED = 1
    USAGE = 2
    DATA = 3
    CONNECTION = 4
    NOT_YET = 5  # WAIT / INCOMPLETE verdicts
    BLOCKED = 6
    BUSY = 7  # the engine directory stayed locked by another process (engine serve, a long simulate)
    INTERRUPTED = 130


class PulsarTxnError(Exception):
    """Base class: `str(err)` is the message shown to the user."""

    exit_code = ExitCode.UNEXPECTED

    def __init__(self, message: str, *, hint: str | None = None):
        super().__init__(message)
        self.hint = hint


class Interrupted(PulsarTxnError):
    """Ctrl-C, reported with what was kept (cli/common.py turns every KeyboardInterrupt into one)."""

    exit_code = ExitCode.INTERRUPTED


class InterruptedWork(KeyboardInterrupt):
    """A Ctrl-C that the library met in the middle of some work, with what was kept. Still a
    KeyboardInterrupt, so every `with` unwinds as on a plain Ctrl-C (an engine stops as a crashed
    broker would, without a last checkpoint)."""


class UsageError(PulsarTxnError):
    """Bad flags or arguments, contradictory settings, unknown names."""

    exit_code = ExitCode.USAGE


class DataError(PulsarTxnError):
    """Input that cannot be read or decoded."""

    exit_code = ExitCode.DATA


class EmptyInput(DataError):
    """An input (file, stdin, --hex) that holds no entries: never shown as an empty result."""

    def __init__(self, label: str, why: str | None = None):
        super().__init__(f"{label} holds no entries" + (f" ({why})" if why else ""))


class DecodeError(DataError):
    """One entry that cannot be decoded. `where` names it (ledger:entry or input index)."""

    def __init__(self, message: str, *, where: str | None = None, offset: int | None = None):
        super().__init__(message)
        self.reason = message
        self.where = where
        self.offset = offset

    def located(self, where: str) -> "DecodeError":
        return DecodeError(self.reason, where=where, offset=self.offset)

    def __str__(self) -> str:
        text = self.reason
        if self.offset is not None:
            text = f"{text} (at byte {self.offset})"
        return f"entry {self.where}: {text}" if self.where else text


class ConnectionFailed(PulsarTxnError):
    """The target could not be reached or answered with an HTTP error."""

    exit_code = ExitCode.CONNECTION

    def __init__(self, message: str, *, status: int | None = None, hint: str | None = None, no_answer: bool = False):
        super().__init__(message, hint=hint)
        self.status = status
        self.no_answer = no_answer  # the request was sent, and no answer came within the request timeout


class EngineError(PulsarTxnError):
    """The embedded engine refused an operation (bad state, locked directory...)."""

    exit_code = ExitCode.DATA


class EngineBusy(EngineError):
    """Another process held the engine directory for longer than the lock timeout: nothing is wrong
    with the data, so not the data-error code; trying again later (or through the server) works."""

    exit_code = ExitCode.BUSY


class Refused(PulsarTxnError):
    """A change not made because it would leave a state that only an operator can clear (a stall
    that never ends by itself): the BLOCKED code; `--force` makes it anyway."""

    exit_code = ExitCode.BLOCKED


class Declined(Refused):
    """A question before a change answered no: nothing changed, by the operator's choice, which is neither a
    usage error nor a failure; the same code as a guard's refusal (the change waits for an operator)."""


class Verdict(PulsarTxnError):
    """Raised by the CLI after printing a WAIT/INCOMPLETE or BLOCKED verdict, to set the exit code."""

    def __init__(self, message: str, exit_code: ExitCode):
        super().__init__(message)
        self.exit_code = exit_code


# ---------------------------------------------------------------- a failure kept as something read


def describe(exc: BaseException) -> str:
    """A failure as one sentence: the library's own message, else what kind of failure it was."""
    return str(exc) if isinstance(exc, PulsarTxnError) else f"unexpected {type(exc).__name__}: {exc}"


def attempt(fn, *args):
    """(fn(*args), None), or (None, the sentence of its failure): for a reading that keeps a failed call as
    an error on what it was about, and leaves judging it to its caller (doctor's checks, downgrade's verdict)."""
    try:
        return fn(*args), None
    except Exception as exc:  # noqa: BLE001 - a failure is something read; the caller judges it
        return None, describe(exc)
