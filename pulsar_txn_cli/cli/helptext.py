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

from typer._click.types import IntRange  # typer vendors click (>= 0.26)
from typer.core import TyperCommand, TyperGroup

OPTIONS = "Options"

# What an option's value is, where the type alone would say `<str>` or `<int range>`.
METAVARS = {
    "--admin-url": "URL",
    "--broker": "URL",
    "--engine-dir": "DIR",
    "--token-file": "FILE",
    "--tls-trust-cert-path": "FILE",
    "--tls-key-file": "FILE",
    "--tls-cert-file": "FILE",
    "--ack-log": "FILE",
    "--token": "TOKEN",
    "--context": "NAME",
    "--cluster": "NAME",
    "--managed-ledger": "NAME",
    "--subscription-name": "NAME",
    "--sub-name": "NAME",
    "--auth-plugin": "CLASS",
    "--auth-params": "PARAMS",
    "--topic": "TOPIC",
    "--namespace": "TENANT/NS",
    "--time": "DURATION",
    "--memory-budget": "SIZE",
    "--host": "HOST",
    "--bind": "HOST",
    "--hex": "HEX",
    "--base64": "BASE64",
    "--port": "PORT",
}


def _name_metavar(param) -> None:
    if param.param_type_name != "option" or param.metavar is not None or param.is_flag:
        return
    for name in param.opts:
        if name in METAVARS:
            param.metavar = METAVARS[name]
            return
    if getattr(param.type, "min", None) is not None or getattr(param.type, "max", None) is not None:
        # click's IntRange or FloatRange: the range is shown with the default
        param.metavar = "N" if isinstance(param.type, IntRange) else "NUMBER"


def first_sentence(text: str, limit: int = 300) -> str:
    """The first sentence of a docstring ("e.g." and "i.e." do not end one), for command lists."""
    import re

    flat = " ".join((text or "").split())
    match = re.search(r"(?<!\be\.g)(?<!\bi\.e)\.(\s|$)", flat)
    sentence = flat[: match.start() + 1] if match else flat
    return sentence if len(sentence) <= limit else sentence[: limit - 3].rstrip() + "..."


def _format_options(command, ctx, formatter) -> None:
    arguments: list = []
    sections: dict[str, list] = {OPTIONS: []}
    for param in command.get_params(ctx):
        _name_metavar(param)
        record = param.get_help_record(ctx)
        if record is None:
            continue
        names, text = record
        if param.param_type_name == "argument":
            # An argument with a metavar is shown as it (Typer appends the Python type too),
            # one without as `shell <bash|zsh|fish>`, where Typer writes `shell:<bash|zsh|fish>`.
            arguments.append((param.metavar or names.replace(":<", " <", 1), text))
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


def usage_pieces(command, ctx) -> list[str]:
    """The usage line as click writes it (`KEY VALUE`, `[FILE]...`), not Typer's `{KEY}`."""
    pieces = [command.options_metavar] if command.options_metavar else []
    for param in command.get_params(ctx):
        if param.param_type_name != "argument":
            continue
        name = param.metavar or (param.name or "").upper()
        if not param.required and not name.startswith("["):
            name = f"[{name}]"
        pieces.append(name + ("..." if param.nargs != 1 else ""))
    return pieces


class Command(TyperCommand):
    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.rich_markup_mode = None  # click's layout (see the module's docstring)

    def collect_usage_pieces(self, ctx) -> list[str]:
        return usage_pieces(self, ctx)

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
            (name, command.short_help or first_sentence(command.help or ""))
            for name in self.list_commands(ctx)
            if (command := summary(name) if summary else self.get_command(ctx, name)) is not None and not command.hidden
        ]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)
