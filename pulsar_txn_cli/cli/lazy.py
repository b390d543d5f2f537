"""The command tree, each subcommand built when it is first asked for.

Typer turns every command of the app into a click command before running any (reading each
function's signature and type hints): about a third of `pulsar-txn --help`'s start-up, for commands
it does not run. `root_command(app)` builds the root group alone and gives it a `commands` mapping
that builds an entry (a command, or a group, itself lazy) on first access; the help's list of
commands reads only names and docstrings. What is built is exactly what `typer.main.get_command`
builds (tests/test_startup.py compares every command's help both ways).
"""

from __future__ import annotations

import copy
import inspect
from collections.abc import MutableMapping


class LazyCommands(MutableMapping):
    """name -> click command, built by its builder on first access, in registration order;
    `summary(name)` gives what a list of commands shows, without building."""

    def __init__(self):
        self._names: list[str] = []
        self._built: dict = {}
        self._pending: dict = {}  # name -> (builder, a stand-in with the name, help, hidden, deprecated)

    def add_lazy(self, name: str, builder, summary) -> None:
        if name not in self:
            self._names.append(name)
        self._built.pop(name, None)
        self._pending[name] = (builder, summary)

    def summary(self, name: str):
        return self._built[name] if name in self._built else self._pending[name][1]

    def __getitem__(self, name: str):
        if name not in self._built:
            builder, _summary = self._pending.pop(name)  # KeyError for an unknown name, as a dict
            self._built[name] = builder()
        return self._built[name]

    def __setitem__(self, name: str, command) -> None:
        if name not in self:
            self._names.append(name)
        self._pending.pop(name, None)
        self._built[name] = command

    def __delitem__(self, name: str) -> None:
        if name not in self:
            raise KeyError(name)
        self._names.remove(name)
        self._pending.pop(name, None)
        self._built.pop(name, None)

    def __contains__(self, name) -> bool:
        return name in self._built or name in self._pending

    def __iter__(self):
        return iter(list(self._names))

    def __len__(self) -> int:
        return len(self._names)


def root_command(app):
    """The click group of a Typer app with a callback, its subcommands (and theirs) built lazily."""
    from typer import main as typer_main

    return _group(typer_main.TyperInfo(app), app)


def _group(group_info, app):
    from typer import main as typer_main

    shell = copy.copy(app)  # the group itself: callback, options, help; no subcommands yet
    shell.registered_commands, shell.registered_groups = [], []
    group = typer_main.get_group_from_info(
        _with_instance(group_info, shell),
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
        suggest_commands=app.suggest_commands,
    )
    commands = LazyCommands()
    for info in app.registered_commands:
        name = info.name or typer_main.get_command_name(info.callback.__name__)
        commands.add_lazy(name, _command_builder(info, app), _command_summary(info, name))
    for sub_info in app.registered_groups:
        solved = typer_main.solve_typer_info_defaults(sub_info)
        if not solved.name:  # `add_typer` without a name merges the commands: build it as typer does
            built = _build_group(sub_info, app)
            for name, command in built.commands.items():
                commands[name] = command
            continue
        commands.add_lazy(solved.name, lambda s=sub_info: _group(s, s.typer_instance), _group_summary(solved))
    group.commands = commands
    return group


def _with_instance(group_info, instance):
    info = copy.copy(group_info)
    info.typer_instance = instance
    return info


def _build_group(sub_info, app):
    from typer import main as typer_main

    return typer_main.get_group_from_info(
        sub_info,
        pretty_exceptions_short=app.pretty_exceptions_short,
        rich_markup_mode=app.rich_markup_mode,
        suggest_commands=app.suggest_commands,
    )


def _command_builder(info, app):
    from typer import main as typer_main

    return lambda: typer_main.get_command_from_info(
        info, pretty_exceptions_short=app.pretty_exceptions_short, rich_markup_mode=app.rich_markup_mode
    )


def _command_summary(info, name: str):
    from typer.core import TyperCommand

    text = inspect.getdoc(info.callback) if info.help is None else inspect.cleandoc(info.help)
    cls = info.cls or TyperCommand
    return cls(
        name=name, help=text, short_help=info.short_help, hidden=info.hidden, deprecated=info.deprecated, params=[]
    )


def _group_summary(solved):
    from typer.core import TyperGroup

    cls = solved.cls or TyperGroup
    return cls(
        name=solved.name,
        help=solved.help,
        short_help=solved.short_help,
        hidden=solved.hidden,
        deprecated=solved.deprecated,
        params=[],
    )
