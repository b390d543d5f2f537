"""The output layer: table (plain or rich), json, jsonl; colour rules (NO_COLOR, --no-color)."""

from __future__ import annotations

import io
import json

import pytest

from pulsar_txn_cli.cli.env import Env
from pulsar_txn_cli.output import Result, Table, auto_table, dumps, emit

ROWS = [
    {"name": "tc-0", "batched": True, "lag": None, "topics": ["a", "b"], "ratio": 0.5},
    {"name": "tc-1", "batched": False, "lag": 12, "topics": [], "ratio": 12345.6},
]
TABLE = Table(
    [("name", "name"), ("batched", "batched"), ("lag", "lag"), ("topics", "topics"), ("ratio", "ratio")],
    ROWS,
    title="Coordinators",
)


class Terminal(io.StringIO):
    """A StringIO that says it is a terminal (the only stand-in here: tests have no real tty)."""

    def isatty(self) -> bool:
        return True


class BinaryBacked(io.TextIOWrapper):
    """A text stream over a bytes buffer, like sys.stdout."""

    def __init__(self):
        super().__init__(io.BytesIO(), encoding="utf-8", write_through=False)

    def text(self) -> str:
        self.flush()
        return self.buffer.getvalue().decode()


@pytest.fixture(autouse=True)
def clean_env(monkeypatch):
    for name in ("NO_COLOR", "TERM", "FORCE_COLOR"):
        monkeypatch.delenv(name, raising=False)


def render(result: Result, output: str, stdout=None, **env_kw) -> str:
    stdout = stdout if stdout is not None else io.StringIO()
    env = Env(stdout=stdout, stderr=io.StringIO(), output=output, **env_kw)
    emit(result, env)
    return stdout.text() if isinstance(stdout, BinaryBacked) else stdout.getvalue()


# ---------------------------------------------------------------- table


def test_plain_table_when_piped():
    text = render(Result(ROWS, tables=[TABLE]), "table")
    lines = text.splitlines()
    assert lines[0] == "Coordinators"
    assert lines[1].split() == ["NAME", "BATCHED", "LAG", "TOPICS", "RATIO"]
    assert lines[3].split() == ["tc-0", "yes", "-", "a,", "b", "0.5"]
    assert lines[4].split() == ["tc-1", "no", "12", "12,346"]
    assert "\x1b[" not in text


def test_rich_table_on_a_terminal():
    text = render(Result(ROWS, tables=[TABLE]), "table", stdout=Terminal())
    assert "\x1b[" in text
    assert any(box in text for box in "┃│┏━")
    assert "tc-0" in text and "Coordinators" in text


@pytest.mark.parametrize("how", ["NO_COLOR", "--no-color", "TERM=dumb"])
def test_no_colour_on_a_terminal_when_asked(monkeypatch, how):
    kw = {}
    if how == "NO_COLOR":
        monkeypatch.setenv("NO_COLOR", "1")
    elif how == "TERM=dumb":
        monkeypatch.setenv("TERM", "dumb")
    else:
        kw["no_color"] = True
    text = render(Result(ROWS, tables=[TABLE]), "table", stdout=Terminal(), **kw)
    assert "\x1b[" not in text
    assert text.splitlines()[1].split() == ["NAME", "BATCHED", "LAG", "TOPICS", "RATIO"]


def test_empty_table_says_none():
    assert render(Result([], tables=[Table([("a", "a")], [])]), "table") == "(none)\n"


def test_lazy_tables_only_built_in_table_mode():
    calls = []

    def tables():
        calls.append(1)
        return [TABLE]

    render(Result(ROWS, tables=tables), "json")
    assert calls == []
    render(Result(ROWS, tables=tables), "table")
    assert calls == [1]


def test_lines_follow_the_tables():
    text = render(Result(ROWS, tables=[TABLE], lines=["verdict: SAFE"]), "table")
    assert text.rstrip().endswith("verdict: SAFE")


def test_auto_table_of_plain_data():
    assert [c for c, _ in auto_table([{"a": 1}, {"b": 2}]).columns] == ["a", "b"]
    kv = auto_table({"x": 1, "y": 2})
    assert list(kv.rows) == [{"key": "x", "value": 1}, {"key": "y", "value": 2}]
    assert render(Result({"x": 1}), "table").split() == ["KEY", "VALUE", "-----", "-------", "x", "1"]


# ---------------------------------------------------------------- json and jsonl


def test_json_pretty_list_and_streamed_iterator_are_identical():
    as_list = render(Result(ROWS), "json")
    streamed = render(Result(iter(ROWS)), "json")
    assert as_list == streamed
    assert json.loads(streamed) == ROWS
    assert render(Result(iter([])), "json") == "[]\n"
    assert json.loads(render(Result({"a": {"b": [1, 2**64 - 1]}}), "json")) == {"a": {"b": [1, 2**64 - 1]}}


def test_jsonl_one_compact_document_per_line():
    text = render(Result(ROWS), "jsonl")
    assert text.splitlines() == [dumps(row) for row in ROWS]
    assert render(Result({"a": 1}), "jsonl") == '{"a":1}\n'
    assert render(Result(None, records=iter([{"x": 1}, {"x": 2}])), "jsonl") == '{"x":1}\n{"x":2}\n'


def test_jsonl_through_a_binary_buffer_keeps_order_and_bytes():
    stdout = BinaryBacked()
    stdout.write("before\n")  # still in the text layer when emit starts
    text = render(Result(ROWS + [{"name": "ünïcode"}]), "jsonl", stdout=stdout)
    assert text.splitlines() == ["before"] + [dumps(row) for row in ROWS] + ['{"name":"ünïcode"}']


def test_dumps_handles_non_string_keys_and_big_integers():
    assert dumps({1: 2**63}) == '{"1":9223372036854775808}'
    assert dumps([1], indent=True) == "[\n  1\n]"


def test_colour_only_on_a_terminal():
    assert Env(stdout=Terminal()).color is True
    assert Env(stdout=io.StringIO()).color is False
    assert Env(stdout=Terminal(), no_color=True).color is False
