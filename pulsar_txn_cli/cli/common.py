"""Global options, declared once and accepted both before and after the subcommand.

`command(app, ...)` registers a function as a subcommand and appends the output options
(and, with target=True, the connection options) to its signature, so `pulsar-txn -o json X`
and `pulsar-txn X -o json` both work without every command redeclaring them.
"""

from __future__ import annotations

import dataclasses
import functools
import inspect
import re
import typing
from enum import Enum
from typing import Annotated, Optional

import typer

from pulsar_txn_cli.calls import REQUIRED
from pulsar_txn_cli.target.settings import TargetFlags
from pulsar_txn_cli.cli import env as env_module

OUTPUT_PANEL = "Output options"
TARGET_PANEL = "Target options"


class OutputFormat(str, Enum):
    table = "table"
    json = "json"
    jsonl = "jsonl"


def _opt(*names, help, panel, **kw):
    return typer.Option(*names, help=help, rich_help_panel=panel, show_default=False, **kw)


OUTPUT_OPTIONS = [
    (
        "output",
        Optional[OutputFormat],
        _opt("-o", "--output", help="Output format: table (default), json or jsonl.", panel=OUTPUT_PANEL),
    ),
    ("no_color", Optional[bool], _opt("--no-color", help="No colour (also NO_COLOR=1).", panel=OUTPUT_PANEL)),
    (
        "quiet",
        Optional[bool],
        _opt("-q", "--quiet", help="Only data on stdout; no messages on stderr.", panel=OUTPUT_PANEL),
    ),
    (
        "debug",
        Optional[bool],
        _opt("--debug", help="Show tracebacks and HTTP requests (Authorization redacted).", panel=OUTPUT_PANEL),
    ),
]


def _declared_target_options() -> list:
    """The target options, made of TargetFlags (target/settings.py), where they are declared."""
    hints = typing.get_type_hints(TargetFlags)
    return [
        (
            f.name,
            Optional[next(t for t in typing.get_args(hints[f.name]) if t is not type(None))],
            _opt(f.metadata["option"], help=f.metadata["help"], panel=TARGET_PANEL),
        )
        for f in dataclasses.fields(TargetFlags)
    ]


TARGET_OPTIONS = _declared_target_options()

OUTPUT_NAMES = [name for name, _, _ in OUTPUT_OPTIONS]
TARGET_NAMES = [name for name, _, _ in TARGET_OPTIONS]
# What engine commands accept (they refuse a cluster, so they do not list its options), and what
# `engine simulate` accepts (it can send its workload to an `engine serve`).
ENGINE_TARGET = ("engine_dir",)
SERVED_ENGINE_TARGET = ("admin_url", "engine_dir", "request_timeout")


def apply(values: dict) -> None:
    """Fold explicitly given option values into the current Env (later calls win)."""
    env = env_module.current()
    for name, value in values.items():
        if value is None:
            continue
        if name == "output":
            env.output = value.value if isinstance(value, OutputFormat) else str(value)
        elif name in OUTPUT_NAMES:
            setattr(env, name, bool(value) or getattr(env, name))
        else:
            setattr(env.target, name, value)


def _parameters(options):
    return [
        inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=None, annotation=Annotated[kind, info])
        for name, kind, info in options
    ]


def _chosen_target_options(target: bool | tuple[str, ...]) -> list:
    """The target options a command takes: all of them (True), or those named."""
    if target is True:
        return TARGET_OPTIONS
    return [option for option in TARGET_OPTIONS if option[0] in (target or ())]


class _WithGlobalOptions:
    """fn, also accepting the global options, which are applied to the Env first. Its signature (fn's
    parameters and the options) is worked out when typer first reads it, so commands that are not
    run cost nothing at start-up (resolving `from __future__` annotations is the expensive part)."""

    def __init__(self, fn, options, changes_state: bool = False):
        functools.update_wrapper(self, fn, assigned=("__module__", "__name__", "__qualname__", "__doc__"))
        self._fn, self._options, self._changes_state = fn, options, changes_state
        self._names = [name for name, _, _ in options]
        self._signature = None

    def __call__(self, *args, **kwargs):
        apply({name: kwargs.pop(name, None) for name in self._names})
        if self._changes_state:
            env_module.current().announce_target = True
        try:
            return self._fn(*args, **kwargs)
        except KeyboardInterrupt as exc:  # typer would make it a silent exit 130
            from pulsar_txn_cli.errors import Interrupted

            raise Interrupted(str(exc) or "interrupted (Ctrl-C)") from None

    @property
    def __signature__(self) -> inspect.Signature:
        if self._signature is None:
            hints = typing.get_type_hints(self._fn, include_extras=True)  # resolve `from __future__` strings
            signature = inspect.signature(self._fn)
            own = [p.replace(annotation=hints.get(p.name, p.annotation)) for p in signature.parameters.values()]
            parameters = [*own, *_parameters(self._options)]
            self._signature = signature.replace(parameters=parameters, return_annotation=inspect.Signature.empty)
        return self._signature

    @property
    def __annotations__(self) -> dict:
        return {p.name: p.annotation for p in self.__signature__.parameters.values()}


def with_global_options(fn, *, target: bool | tuple[str, ...], changes_state: bool = False):
    """Wrap fn so it also accepts the global options, which are applied to the Env first.
    target: True for every target option, or the names of the ones the command takes; changes_state: the
    command changes its target, which it then names even under --quiet."""
    return _WithGlobalOptions(fn, OUTPUT_OPTIONS + _chosen_target_options(target), changes_state)


# The commands that change their target's state: each prints its target even under -q, so that an operator
# (or a script's log) always sees where a change went.
STATE_CHANGING = re.compile(r"(abort-|set-|scale-).*|unload|clean-pending-ack")


def changes_state(name: str | None) -> bool:
    return bool(name and STATE_CHANGING.fullmatch(name))


def command(app: typer.Typer, name: str | None = None, *, target: bool | tuple[str, ...] = False, **kwargs):
    """Register fn as a subcommand of app with the global options appended."""
    from pulsar_txn_cli.cli.helptext import Command

    def decorate(fn):
        named = name or fn.__name__.replace("_", "-")
        wrapped = with_global_options(fn, target=target, changes_state=bool(target) and changes_state(named))
        app.command(name, cls=Command, **kwargs)(wrapped)
        return fn

    return decorate


def declared(call, body):
    """A command function for a declared call (calls.py): its options, argument and help are the
    declaration's; body(**values) does the work. Register it with `command` as any other."""

    def run(**values):
        return body(**values)

    run.__name__ = run.__qualname__ = call.name.replace("-", "_")
    run.__module__, run.__doc__ = body.__module__, call.help
    parameters = [
        inspect.Parameter(
            p.name,
            inspect.Parameter.KEYWORD_ONLY,
            default=inspect.Parameter.empty if p.default is REQUIRED else p.default,
            annotation=_declared_annotation(p),
        )
        for p in call.params
    ]
    run.__signature__ = inspect.Signature(parameters)
    run.__annotations__ = {p.name: p.annotation for p in parameters}
    return run


def _declared_annotation(p):
    from pulsar_txn_cli.names import TopicName

    kind = str if p.type is TopicName else p.type  # a topic is typed as text
    if p.default is None:
        kind = Optional[kind]
    settings = {"help": p.help}
    for key in ("show_default", "metavar", "min", "max"):
        if getattr(p, key) is not None:
            settings[key] = getattr(p, key)
    return Annotated[kind, typer.Option(*p.flags, **settings) if p.flags else typer.Argument(**settings)]


def root_callback(app: typer.Typer, fn):
    """Register the root callback so the global options also work before the subcommand."""
    app.callback()(with_global_options(fn, target=True))
    return fn


def group_callback(group: typer.Typer, target: tuple[str, ...]) -> None:
    """A command group's own callback: its target options (and the output options) also work between the group
    and its subcommand, as users type them (`engine config --engine-dir D list`)."""

    def options() -> None:
        """Options given here apply to the subcommand."""

    group.callback()(with_global_options(options, target=target))


MIN_INTERVAL = 1.0  # seconds between checks: 0 would check in a busy loop, each check asking every store


def interval_for(
    interval: float | None,
    default: float,
    *,
    applies: bool = True,
    only: str = "with --wait: without it there is one check",
) -> float:
    """--interval as every command takes it: only where it applies (with --wait; not with the exporter's --once),
    never under MIN_INTERVAL, each refusal in the same sentence; `default` when it is not given."""
    from pulsar_txn_cli.errors import UsageError

    if interval is None:
        return default
    if not applies:
        raise UsageError(f"--interval only applies {only}")
    if interval < MIN_INTERVAL:
        raise UsageError(
            f"--interval {interval:g} is too short: checks are at least {MIN_INTERVAL:g} s apart "
            "(each asks every coordinator and subscription)"
        )
    return interval


def gave_up(timeout: float | None, still: str) -> str:
    """The last line of a --wait whose --timeout ran out before the answer it waited for."""
    return f"gave up waiting: --timeout {timeout:g} s ran out, and the answer is still {still}"


def confirm(question: str) -> None:
    """Ask before a change (the caller skips this with --yes); never prompt when stdin is not a terminal."""
    import sys

    from pulsar_txn_cli.errors import Declined, UsageError

    if not sys.stdin.isatty():
        raise UsageError(f"{question.rstrip('?')}: stdin is not a terminal, so confirm with --yes")
    if not typer.confirm(question, default=False, err=True):
        raise Declined("nothing was changed (not confirmed)")


SparkConfOption = Annotated[
    Optional[list[str]],
    typer.Option(
        "--spark-conf",
        metavar="KEY=VALUE",
        help="A Spark setting (repeatable), e.g. spark.hadoop.fs.s3a.endpoint=URL.",
        show_default=False,
    ),
]


def spark_conf(pairs: list[str] | None) -> dict:
    """--spark-conf KEY=VALUE pairs as a dict."""
    from pulsar_txn_cli.errors import UsageError

    conf = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise UsageError(f"--spark-conf takes KEY=VALUE, not {pair!r}")
        conf[key.strip()] = value
    return conf
