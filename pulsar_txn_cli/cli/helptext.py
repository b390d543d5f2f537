"""How `--help` looks: click's plain layout, with the options in sections by panel.

Typer's rich help puts an option's names, its negative form, a type and the help text in six
columns of one boxed table: at 80 columns it cuts long option names short
(`--tls-trust-cert-pa…`), squeezes the help into a narrow column and shows `<bool>` on every
flag. Click's layout wraps the help text under the names and never cuts a name; the sections
keep the panels (Options, Output options, Target options). tests/cli/test_help_texts.py checks every
command's help at 80 columns.
"""

from __future__ import annotations

import re

from typer.core import TyperCommand, TyperGroup

OPTIONS = "Options"


def _format_options(command, ctx, formatter) -> None:
    arguments: list = []
    sections: dict[str, list] = {OPTIONS: []}
    for param in command.get_params(ctx):
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, text = record
        if param.param_type_name == "argument":
            # An argument with a metavar is shown as it (Typer appends the Python type too).
            arguments.append((param.metavar or names, text))
        else:
            # A repeatable option takes one value each time (its help says "repeatable").
            names = re.sub(r"<list\[(\w+)\]>", r"<\1>", names)
            sections.setdefault(getattr(param, "rich_help_panel", None) or OPTIONS, []).append((names, text))
    if arguments:
        with formatter.section("Arguments"):
            formatter.write_dl(arguments)
    for title, records in sections.items():
        if records:
            with formatter.section(title):
                formatter.write_dl(records)


class Command(TyperCommand):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None  # click's layout (see the module's docstring)

    def format_options(self, ctx, formatter) -> None:
        _format_options(self, ctx, formatter)


class Group(TyperGroup):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None

    def format_options(self, ctx, formatter) -> None:
        _format_options(self, ctx, formatter)
        self.format_commands(ctx, formatter)

    def list_commands(self, ctx) -> list[str]:
        return list(self.commands)  # names only: a lazy tree (cli/lazy.py) builds nothing for them

    def format_commands(self, ctx, formatter) -> None:
        """Each command with its first sentence, wrapped (click would cut it at about 40 characters)."""
        summary = getattr(self.commands, "summary", None)  # cli/lazy.py: a list needs no built command
        rows = [
            (name, command.get_short_help_str(limit=300))
            for name in self.list_commands(ctx)
            if (command := summary(name) if summary else self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
