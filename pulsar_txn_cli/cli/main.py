"""Entry point: runs the app and maps every failure to one line on stderr and an exit code."""
from __future__ import annotations

import os
import sys
import traceback

from pulsar_txn_cli.errors import ExitCode, PulsarTxnError


def main(argv: list[str] | None = None) -> None:
    sys.exit(run(sys.argv[1:] if argv is None else argv))


def run(argv: list[str]) -> int:
    import typer
    from typer._click import exceptions as click_exc  # typer vendors click (>= 0.26)
    from typer.main import get_command

    from pulsar_txn_cli.cli import env as env_module
    from pulsar_txn_cli.cli.app import app

    if "_PULSAR_TXN_COMPLETE" in os.environ:  # a shell asks for completions (scripts in completions/)
        os.environ.setdefault("TERMINAL_WIDTH", "10000")  # help texts on one line each (fish reads lines)
        from typer._completion_classes import completion_init

        completion_init()
    env = env_module.reset(env_module.Env(stdout=sys.stdout, stderr=sys.stderr))
    debug = "--debug" in argv
    try:
        code = get_command(app).main(args=argv, prog_name="pulsar-txn", standalone_mode=False)
        return code if isinstance(code, int) else ExitCode.OK
    except click_exc.UsageError as exc:
        _say(env, f"error: {exc.format_message()}")
        if exc.ctx is not None:
            _say(env, f"Try '{exc.ctx.command_path} --help' for help.")
        return ExitCode.USAGE
    except (typer.Abort, KeyboardInterrupt):
        _say(env, "interrupted")
        return ExitCode.INTERRUPTED
    except click_exc.ClickException as exc:
        _say(env, f"error: {exc.format_message()}")
        return exc.exit_code
    except PulsarTxnError as exc:
        if debug:
            traceback.print_exc(file=env.stderr)
        if str(exc):
            _say(env, f"error: {exc}")
        if exc.hint:
            _say(env, f"hint: {exc.hint}")
        return int(exc.exit_code)
    except SystemExit as exc:  # typer exits by itself only on a broken pipe (`... | head`)
        return exc.code if isinstance(exc.code, int) else ExitCode.UNEXPECTED
    except Exception as exc:  # noqa: BLE001 - the last line of defence
        if debug:
            traceback.print_exc(file=env.stderr)
        else:
            _say(env, f"error: unexpected {type(exc).__name__}; rerun with --debug for the details")
        return ExitCode.UNEXPECTED
    finally:
        env.close()


def _say(env, message: str) -> None:
    print(message, file=env.stderr)
