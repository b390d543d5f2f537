"""Tables: rich on a colour terminal, tabulate's plain aligned text everywhere else."""

from __future__ import annotations

from pulsar_txn_cli.output import Table, dumps


def cell(value) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3g}" if abs(value) < 1000 else f"{value:,.0f}"
    if isinstance(value, (list, tuple)):
        return ", ".join(cell(v) for v in value)
    if isinstance(value, dict):
        return dumps(value)
    return str(value)


def percent(share: float | None) -> str | None:
    """A share (0..1) as a percentage for tables: 0.25 -> '25%', 0.123 -> '12.3%'."""
    if share is None:
        return None
    text = f"{share * 100:.1f}".removesuffix(".0")
    return f"{text}%"


def render_tables(tables: list[Table], env) -> None:
    if env.color:
        _render_rich(tables, env)
    else:
        _render_plain(tables, env)


def _render_plain(tables: list[Table], env) -> None:
    from tabulate import tabulate

    out = env.stdout
    for index, table in enumerate(tables):
        if index:
            out.write("\n")
        if table.title:
            out.write(f"{table.title}\n")
        rows = [[cell(row.get(key)) for key, _ in table.columns] for row in table.rows]
        headers = [header.upper() for _, header in table.columns]
        if not rows:
            out.write("(none)\n")
            continue
        out.write(tabulate(rows, headers=headers, tablefmt="simple", disable_numparse=True))
        out.write("\n")


def _render_rich(tables: list[Table], env) -> None:
    from rich.console import Console
    from rich.table import Table as RichTable

    console = Console(file=env.stdout, force_terminal=True, highlight=False)
    for table in tables:
        rich_table = RichTable(title=table.title, title_justify="left", header_style="bold")
        for _, header in table.columns:
            rich_table.add_column(header.upper())
        rows = 0
        for row in table.rows:
            rich_table.add_row(*(cell(row.get(key)) for key, _ in table.columns))
            rows += 1
        if rows:
            console.print(rich_table)
        else:
            console.print(f"{table.title + ': ' if table.title else ''}(none)")
