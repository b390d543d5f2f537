"""A view that redraws in place on a terminal (stderr), for commands that wait: rich's Live.

`active` is False when stderr is not a terminal or --quiet is given; the caller then prints
plain progress lines instead, so logs and pipes never get cursor movements.
"""

from __future__ import annotations

from pulsar_txn_cli.output import Table


class LiveView:
    def __init__(self, env):
        self._env = env
        self._live = None
        self.active = env.stderr_isatty and not env.quiet

    def __enter__(self) -> "LiveView":
        if self.active:
            from rich.console import Console
            from rich.live import Live

            console = Console(file=self._env.stderr, force_terminal=True, no_color=not self._env.color, highlight=False)
            self._live = Live(console=console, auto_refresh=False, transient=True)
            self._live.__enter__()
        return self

    def show(self, table: Table, caption: str, max_rows: int = 20) -> None:
        """Replace the view with `table` (its first max_rows rows) above `caption`."""
        if self._live is None:
            return
        from rich.console import Group
        from rich.table import Table as RichTable
        from rich.text import Text

        from pulsar_txn_cli.output.table import cell

        rows = list(table.rows)
        view = RichTable(title=table.title, title_justify="left", header_style="bold")
        for _, header in table.columns:
            view.add_column(header.upper())
        for row in rows[:max_rows]:
            view.add_row(*(cell(row.get(key)) for key, _ in table.columns))
        more = [Text(f"... and {len(rows) - max_rows} more")] if len(rows) > max_rows else []
        self._live.update(Group(view, *more, Text(caption)), refresh=True)

    def __exit__(self, *exc) -> None:
        if self._live is not None:
            self._live.__exit__(*exc)
