"""The one output layer: every command returns a Result and this renders it.

- json: the Result's data, pretty-printed (streams arrays given as iterators).
- jsonl: one compact JSON document per line (the Result's records).
- table: rich on a terminal with colour, plain aligned text (tabulate) otherwise.
Data goes to stdout only; messages and progress go to stderr through the Env.
"""

from __future__ import annotations

import signal
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable

import orjson

from pulsar_txn_cli.errors import InterruptedWork

_JSON_OPTS = orjson.OPT_NON_STR_KEYS


@dataclass
class Table:
    columns: list[tuple[str, str]]  # (key in the row dict, header)
    rows: Iterable[dict]
    title: str | None = None


@dataclass
class Result:
    """What a command produced.

    data:    the JSON form (-o json); may be an iterator, rendered as a streamed array.
    records: the -o jsonl lines; default: data's items when it is a list/iterator, else [data].
    tables:  the -o table form; a callable is called lazily (only in table mode).
    lines:   extra human lines printed after the tables in table mode (a verdict, a hint).
    """

    data: Any
    records: Iterable[dict] | None = None
    tables: list[Table] | Callable[[], list[Table]] | None = None
    lines: list[str] = field(default_factory=list)


def dumps(value: Any, indent: bool = False) -> str:
    return orjson.dumps(value, option=_JSON_OPTS | (orjson.OPT_INDENT_2 if indent else 0)).decode()


def emit(result: Result, env) -> None:
    out = env.stdout
    if env.output == "json":
        _write_json(result.data, out)
    elif env.output == "jsonl":
        records = result.records
        if records is None:
            records = result.data if _is_sequence(result.data) else [result.data]
        _write_jsonl(records, out, per_line_flush=env.stdout_isatty)
    else:
        tables = result.tables() if callable(result.tables) else result.tables
        if tables is None:
            tables = [auto_table(result.data)]
        from pulsar_txn_cli.output.table import render_tables

        render_tables(tables, env)
        pasteable = getattr(env, "pasteable", lambda line: line)  # suggested commands carry the target
        for line in result.lines:
            print(pasteable(line), file=out)
    out.flush()


def _write_jsonl(records, out, per_line_flush: bool) -> None:
    """One compact document a line. Bytes go straight to the binary buffer when there is one
    (no str round trip per record); on a terminal each line is flushed as it comes."""
    option = _JSON_OPTS | orjson.OPT_APPEND_NEWLINE
    buffer = getattr(out, "buffer", None)
    if buffer is None:
        write = out.write
        for record in records:
            write(orjson.dumps(record, option=option).decode())
        return
    out.flush()  # keep anything already written through the text layer first
    written = _Counted(buffer.write)
    try:
        with written:
            for record in records:
                written(orjson.dumps(record, option=option))
                if per_line_flush:
                    buffer.flush()
    except KeyboardInterrupt:
        buffer.flush()
        count = written.count
        raise InterruptedWork(
            f"interrupted (Ctrl-C): stdout holds the first {count} line{'' if count == 1 else 's'}, each a whole JSON document"
        ) from None
    buffer.flush()


class _Counted:
    """A write that counts what it wrote, for the Ctrl-C message that says how much stdout holds. Python
    raises a Ctrl-C as soon as a call returns, so one landing just after a write would leave the count one
    short of what was written: while a write and its count happen, a Ctrl-C waits, and is raised right after."""

    def __init__(self, write):
        self.write, self.count = write, 0
        self._busy = self._pending = False
        self._previous = None

    def __enter__(self):
        try:
            previous = signal.getsignal(signal.SIGINT)
            if callable(previous):  # Ctrl-C raises (an ignored one stays ignored)
                signal.signal(signal.SIGINT, self._on_sigint)
                self._previous = previous
        except ValueError:  # not the main thread: no Ctrl-C reaches this one
            pass
        return self

    def __exit__(self, *exc):
        if self._previous is not None:
            signal.signal(signal.SIGINT, self._previous)
        return False

    def __call__(self, data) -> None:
        self._busy = True
        try:
            self.write(data)
            self.count += 1
        finally:
            self._busy = False
        if self._pending:
            self._pending = False
            raise KeyboardInterrupt

    def _on_sigint(self, signum, frame):
        if self._busy:
            self._pending = True
            return None
        return self._previous(signum, frame)


def _items(count: int) -> str:
    return f"{count} item" if count == 1 else f"{count} items"


def _is_sequence(value) -> bool:
    return not isinstance(value, (dict, str, bytes)) and isinstance(value, Iterable)


def _write_json(data, out) -> None:
    if isinstance(data, (list, tuple)) or not _is_sequence(data):
        out.write(dumps(data, indent=True))
        out.write("\n")
        return
    # A streamed array: the same text as the list form, without holding every item.
    out.write("[")
    written = _Counted(out.write)
    try:
        with written:
            for item in data:
                text = dumps(item, indent=True).replace("\n", "\n  ")
                written(("\n  " if not written.count else ",\n  ") + text)
    except KeyboardInterrupt:
        count = written.count
        out.write("\n]\n" if count else "]\n")  # still valid JSON: what was written, closed
        out.flush()
        raise InterruptedWork(
            f"interrupted (Ctrl-C): the JSON array on stdout is closed and holds the first {_items(count)}"
        ) from None
    out.write("\n]\n" if written.count else "]\n")


def auto_table(data) -> Table:
    """A reasonable table for plain data: a list of dicts, or a dict as key/value rows."""
    if isinstance(data, dict):
        if data and all(isinstance(v, dict) for v in data.values()):
            rows = [{"key": k, **v} for k, v in data.items()]
            keys = ["key"] + sorted({k for v in data.values() for k in v})
            return Table([(k, k) for k in keys], rows)
        return Table([("key", "KEY"), ("value", "VALUE")], [{"key": k, "value": v} for k, v in data.items()])
    rows = list(data) if _is_sequence(data) else [{"value": data}]
    keys: list[str] = []
    for row in rows:
        for key in row if isinstance(row, dict) else ["value"]:
            if key not in keys:
                keys.append(key)
    rows = [row if isinstance(row, dict) else {"value": row} for row in rows]
    return Table([(k, k) for k in keys], rows)
