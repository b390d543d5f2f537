"""Entry point: runs the app and maps every failure to one line on stderr and an exit code."""

from __future__ import annotations

import os
import sys
import traceback

from pulsar_txn_cli import notices
from pulsar_txn_cli.errors import ExitCode, Interrupted, InterruptedWork, PulsarTxnError, UsageError
from pulsar_txn_cli.names import InvalidName


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


def run(argv: list[str]) -> int:
    from pulsar_txn_cli.cli import env as env_module
    from pulsar_txn_cli.cli.app import app
    from pulsar_txn_cli.cli.lazy import root_command

    if "_PULSAR_TXN_COMPLETE" in os.environ:  # a shell asks for completions (scripts in completions/)
        os.environ.setdefault("TERMINAL_WIDTH", "10000")  # help texts on one line each (fish reads lines)
        from typer._completion_classes import completion_init

        completion_init()
    env = env_module.reset(env_module.Env(stdout=sys.stdout, stderr=sys.stderr))
    notices.listen(env.info)  # what the library says while it waits (e.g. for the engine's lock)
    debug = "--debug" in argv
    try:
        code = root_command(app).main(args=argv, prog_name="pulsar-txn", standalone_mode=False)
        code = code if isinstance(code, int) else ExitCode.OK
        if code == ExitCode.INTERRUPTED:  # Ctrl-C outside a command (typer exits 130 silently)
            _say(env, "interrupted (Ctrl-C)")
    except BaseException as exc:  # noqa: BLE001 - every failure becomes a message and an exit code
        code = _report(exc, env, debug)
    try:
        env.close()  # closing the engine commits its last state: a failure here is a failure too
    except BaseException as exc:  # noqa: BLE001
        failed = _report(exc, env, debug)
        code = code or failed
    finally:
        notices.listen(None)  # this run's streams end here
    return code


def _report(exc: BaseException, env, debug: bool) -> int:
    """One line on stderr (plus a hint) and the exit code for any exception."""
    import typer
    from typer._click import exceptions as click_exc  # typer vendors click (>= 0.26)

    if isinstance(exc, click_exc.UsageError):
        _say(env, f"error: {exc.format_message()}")
        if exc.ctx is not None:
            _say(env, f"Try '{exc.ctx.command_path} --help' for help.")
        return ExitCode.USAGE
    if isinstance(exc, (typer.Abort, KeyboardInterrupt)):
        _say(env, str(exc) if isinstance(exc, InterruptedWork) else "interrupted (Ctrl-C)")
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
            from pulsar_txn_cli.cli.advice import carry_target

            _say(env, f"hint: {carry_target(exc.hint, env)}")
        return int(exc.exit_code)
    if not debug:
        _say(env, f"error: unexpected {type(exc).__name__}; rerun with --debug for the details")
    return ExitCode.UNEXPECTED


def _say(env, message: str) -> None:
    print(message, file=env.stderr)
