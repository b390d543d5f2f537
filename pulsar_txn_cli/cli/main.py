"""Entry point: runs the app and maps every failure to one line on stderr and an exit code."""

from __future__ import annotations

import os
import signal
import sys
import threading
import traceback

from pulsar_txn_cli import notices
from pulsar_txn_cli.errors import ExitCode, Interrupted, InterruptedWork, PulsarTxnError, UsageError
from pulsar_txn_cli.names import InvalidName


BEFORE_COMMAND = "interrupted (Ctrl-C) before the command began: nothing was done"


def main(argv: list[str] | None = None) -> None:
    sys.unraisablehook = _redeliver_swallowed_ctrl_c
    try:
        code = run(sys.argv[1:] if argv is None else argv)
    except KeyboardInterrupt:  # before the command began (while Python loaded the modules)
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print(BEFORE_COMMAND, file=sys.stderr)
        code = ExitCode.INTERRUPTED
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # done: a Ctrl-C while Python exits changes nothing
    if code == ExitCode.INTERRUPTED:
        # Leave now: worker threads still waiting on a request (a check's admin calls) would be
        # joined at exit, and a second Ctrl-C there prints Python's own traceback. What the
        # command keeps is already written (atomically); the message said what it is.
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    sys.exit(code)


def run(argv: list[str]) -> int:
    from pulsar_txn_cli.cli import env as env_module
    from pulsar_txn_cli.cli.app import app
    from pulsar_txn_cli.cli.lazy import root_command

    if "_PULSAR_TXN_COMPLETE" in os.environ:  # a shell asks for completions (scripts in completions/)
        os.environ.setdefault("TERMINAL_WIDTH", "10000")  # help texts on one line each (fish reads lines)
        from typer._completion_classes import completion_init

        completion_init()
    env = env_module.reset(env_module.Env(stdout=sys.stdout, stderr=sys.stderr))
    previous = None
    notices.listen(env.info)  # what the library says while it waits (e.g. for the engine's lock)
    debug = "--debug" in argv
    try:
        code = root_command(app).main(args=argv, prog_name="pulsar-txn", standalone_mode=False)
        code = code if isinstance(code, int) else ExitCode.OK
        if code == ExitCode.INTERRUPTED:  # Ctrl-C outside a command (typer exits 130 silently)
            _say(env, BEFORE_COMMAND)
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a message and an exit code
        if isinstance(exc, (KeyboardInterrupt, Interrupted)):
            previous = _hold_sigint()  # one Ctrl-C, one message: a second one waits until we are done
        if _broken_pipe(exc):
            exc.__context__ = exc.__cause__ = None  # let go of the frames (and their open iterators) now
            code = _closed_stdout()
        else:
            code = _report(exc, env, debug)
    if previous is None:
        previous = _hold_sigint()  # the command is over: a Ctrl-C now must not cut the engine's commit short
    try:
        env.close()  # closing the engine commits its last state: a failure here is a failure too
    except BaseException as exc:  # noqa: BLE001
        failed = _report(exc, env, debug)
        code = code or failed
    finally:
        notices.listen(None)  # this run's streams end here
        if previous is not None:
            _release_sigint(previous)
    return code


def _redeliver_swallowed_ctrl_c(unraisable) -> None:
    """A Ctrl-C that lands while Python runs a finalizer or a weakref callback is "ignored" by Python:
    printed as a traceback and lost, so `--wait` would poll on. Send it to the main thread again, a
    moment later from a timer thread: raised in this hook, or before it returns, it would be ignored too."""
    if not issubclass(unraisable.exc_type, KeyboardInterrupt):
        return sys.__unraisablehook__(unraisable)
    again = threading.Timer(0.05, signal.pthread_kill, args=(threading.main_thread().ident, signal.SIGINT))
    again.daemon = True
    again.start()
    return None


def _hold_sigint():
    """Ignore Ctrl-C while an interruption is reported and the target closed; the previous handler."""
    try:
        return signal.signal(signal.SIGINT, signal.SIG_IGN)
    except ValueError:  # not the main thread (run() called from a test's thread)
        return None


def _release_sigint(previous) -> None:
    try:
        signal.signal(signal.SIGINT, previous)
    except (ValueError, TypeError):
        pass


def _broken_pipe(exc: BaseException | None) -> bool:
    """The reader of stdout went away (`... | head -1`), directly or under click's exit."""
    import errno

    while exc is not None:
        if isinstance(exc, BrokenPipeError) or (isinstance(exc, OSError) and exc.errno == errno.EPIPE):
            return True
        exc = exc.__context__
    return False


def _closed_stdout() -> int:
    """A reader that stopped early is not an error (docs/output.md): no message, exit 0, so that
    `set -o pipefail` scripts that pipe into `head` stay correct. Stdout goes to /dev/null from
    here, so nothing is written (or fails) at exit."""
    import gc

    gc.collect()  # close the abandoned iterators while the engine is still open
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
    return ExitCode.OK


def _report(exc: BaseException, env, debug: bool) -> int:
    """One line on stderr (plus a hint) and the exit code for any exception."""
    import typer
    from typer._click import exceptions as click_exc  # typer vendors click (>= 0.26)

    if isinstance(exc, click_exc.UsageError):
        # one plain sentence: pydantic-style "Value error, " prefixes say nothing to an operator
        _say(env, f"error: {exc.format_message().replace('Value error, ', '')}")
        if exc.ctx is not None:
            _say(env, f"Try '{exc.ctx.command_path} --help' for help.")
        return ExitCode.USAGE
    if isinstance(exc, (typer.Abort, KeyboardInterrupt)):
        # A command turns its own Ctrl-C into Interrupted (cli/common.py): this one came first.
        _say(env, str(exc) if isinstance(exc, InterruptedWork) else BEFORE_COMMAND)
        return ExitCode.INTERRUPTED
    if isinstance(exc, Interrupted):
        _say(env, str(exc))  # says what was kept; no "error:" prefix
        return ExitCode.INTERRUPTED
    if isinstance(exc, click_exc.ClickException):
        _say(env, f"error: {exc.format_message()}")
        return exc.exit_code
    if isinstance(exc, SystemExit):  # typer exits by itself only on a broken pipe (`... | head`)
        return exc.code if isinstance(exc.code, int) else ExitCode.UNEXPECTED
    if debug:
        traceback.print_exception(exc, file=env.stderr)
    if isinstance(exc, InvalidName):  # names.py is a leaf below the error table: a bad name is a usage error
        exc = UsageError(str(exc))
    if isinstance(exc, PulsarTxnError):
        if str(exc):
            _say(env, f"error: {exc}")
        if exc.hint:
            _say(env, f"hint: {exc.hint}")
        return int(exc.exit_code)
    if not debug:
        _say(env, f"error: unexpected {type(exc).__name__}; rerun with --debug for the details")
    return ExitCode.UNEXPECTED


def _say(env, message: str) -> None:
    print(env.pasteable(message), file=env.stderr)  # an error's, hint's or Ctrl-C's command carries the target
