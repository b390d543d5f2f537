"""Progress on stderr: a rich bar on a terminal, nothing when piped or quiet (clig.dev)."""

from __future__ import annotations


class Progress:
    def __init__(self, env, total: int | None, label: str, unit: str = "items"):
        self._unit = unit  # "items", or "bytes" (shown as kB/MB/GB done of the total)
        self._env = env
        self._total = total
        self._label = label
        self._bar = None
        self._task = None

    def __enter__(self) -> "Progress":
        if self._env.stderr_isatty and not self._env.quiet:
            from rich.console import Console
            from rich.progress import BarColumn, DownloadColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
            from rich.progress import Progress as RichProgress

            console = Console(file=self._env.stderr, no_color=not self._env.color)
            done = DownloadColumn() if self._unit == "bytes" else MofNCompleteColumn()
            self._bar = RichProgress(
                TextColumn("{task.description}"),
                BarColumn(),
                done,
                TimeElapsedColumn(),
                console=console,
                transient=True,
            )
            self._bar.__enter__()
            self._task = self._bar.add_task(self._label, total=self._total)
        return self

    def advance(self, amount: int = 1) -> None:
        if self._bar is not None:
            self._bar.advance(self._task, amount)

    def update(self, *, total: int | None = None, completed: int | None = None, description: str | None = None) -> None:
        if self._bar is not None:
            self._bar.update(self._task, total=total, completed=completed, description=description)

    def __exit__(self, *exc) -> None:
        if self._bar is not None:
            self._bar.__exit__(*exc)
