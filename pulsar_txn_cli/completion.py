"""Shell completion scripts for bash, zsh and fish (Typer's completion classes).

At each TAB the shell asks `pulsar-txn` itself (with _PULSAR_TXN_COMPLETE set) for the candidates,
so a script follows the installed commands, options and choices. `pulsar-txn completion SHELL`
prints one (pulsarctl's convention); scripts/gen_completions.py writes them all to completions/.
"""

from __future__ import annotations

PROG = "pulsar-txn"
COMPLETE_VAR = "_PULSAR_TXN_COMPLETE"
PATH_COMMANDS = ("decode", "analyze", "collect")  # fish completes file paths for these
# shell -> (file name in completions/, how to install it)
SHELLS = {
    "bash": ("pulsar-txn.bash", "source it from ~/.bashrc, or copy it to /etc/bash_completion.d/pulsar-txn"),
    "zsh": ("_pulsar-txn", "put it in a directory on $fpath (before compinit runs), or source it from ~/.zshrc"),
    "fish": ("pulsar-txn.fish", "copy it to ~/.config/fish/completions/pulsar-txn.fish"),
}


def script(shell: str) -> str:
    from typer._completion_shared import get_completion_script

    _, install = SHELLS[shell]
    body = get_completion_script(prog_name=PROG, complete_var=COMPLETE_VAR, shell=shell).rstrip("\n")
    header = (
        f"# {shell} completion for {PROG}; printed by `{PROG} completion {shell}` (scripts/gen_completions.py "
        f"writes completions/), do not edit.\n# Install: {install}.\n"
    )
    if body.startswith("#compdef"):  # zsh's autoloader reads only the first line
        first, _, rest = body.partition("\n")
        body, header = rest, first + "\n" + header
    if shell == "fish":  # Typer's script never completes files (--no-files); these commands take paths
        body += (
            f'\ncomplete --command {PROG} --force-files --condition "__fish_seen_subcommand_from '
            f'{" ".join(PATH_COMMANDS)}"'
        )
    return header + body + "\n"
