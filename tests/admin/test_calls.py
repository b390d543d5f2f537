"""calls.py: each pulsar-admin command declared once, and everything that follows from it.

A declared call is a CLI command with exactly its options and help, has its section in
docs/reference.md, is answered by the engine's router, and builds Pulsar's own request.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.main import get_command

from pulsar_txn_cli.calls import BY_NAME, COMMANDS, REQUIRED
from pulsar_txn_cli.cli import transactions
from pulsar_txn_cli.cli.app import app
from pulsar_txn_cli.engine import router

REFERENCE = Path(__file__).resolve().parents[2] / "docs" / "reference.md"
NAMES = [call.name for call in COMMANDS]


@pytest.fixture(scope="module")
def root():
    return get_command(app)


def test_names_are_unique():
    assert len(NAMES) == len(set(NAMES)) == len(BY_NAME)


@pytest.mark.parametrize("name", NAMES)
def test_a_declared_call_is_a_command_with_its_options_and_help(root, name):
    call, command = BY_NAME[name], root.commands.get(name)
    assert command is not None, f"{name} is declared in calls.py but is no command of pulsar-txn"
    assert command.help == call.help
    own = [p for p in command.params if p.name in {q.name for q in call.params}]
    assert [p.name for p in own] == [p.name for p in call.params]  # in the declared order, first
    assert [p.name for p in command.params[: len(own)]] == [p.name for p in call.params]
    for param, declared in zip(own, call.params):
        assert tuple(param.opts) == (declared.flags or (param.opts[0],)), name
        assert param.required == (declared.default is REQUIRED), name


def test_the_transaction_commands_are_the_declared_ones_in_order(root):
    """The help lists them where cli/transactions.py registers them: the declared order, unbroken."""
    names = list(root.commands)
    first = names.index(NAMES[0])
    assert names[first : first + len(NAMES)] == NAMES


@pytest.mark.parametrize("name", NAMES)
def test_a_declared_call_has_its_reference_section(name):
    text = REFERENCE.read_text()
    assert f"\n## pulsar-txn {name}\n" in text, (
        f"docs/reference.md has no section for {name}: run scripts/gen_reference.py"
    )
    assert f"(#pulsar-txn-{name.lower()})" in text


@pytest.mark.parametrize("call", [c for c in COMMANDS if c.path], ids=lambda c: c.name)
def test_the_engine_answers_every_declared_request(call):
    """engine/router.py has a route of the same method for the declared path (its behaviour is hand-written)."""
    example = re.sub(r"\{(\w+)\}", lambda m: "a/b/c" if m.group(1) == "topic" else "1", call.path)
    methods = {method for method, regex, _fn, _txn in router._ROUTES if regex.match(example)}
    assert call.method in methods, f"{call.method} {call.path}: no route in engine/router.py (routes: {methods})"


@pytest.mark.parametrize("call", COMMANDS, ids=lambda c: c.name)
def test_a_declaration_is_whole(call):
    names = [p.name for p in call.params]
    assert len(names) == len(set(names))
    assert set(re.findall(r"\{(\w+)\}", call.path or "")) <= set(names)
    assert call.body is None or call.body in names
    assert all(len(c) == 2 or c[2] in names for c in call.columns)
    assert all(p.flags or p.metavar for p in call.params)  # an argument names itself
    assert call.help and call.help == call.help.strip()
    assert set(call.echo) <= set(transactions.ECHO)  # the CLI knows how to show each echoed input
    assert call.path or call.name in transactions.BODIES  # a composition has its body


def test_every_body_is_of_a_declared_call():
    assert set(transactions.BODIES) <= set(BY_NAME)


@pytest.mark.parametrize(
    "name, args, expected",
    [
        (
            "transaction-in-buffer-stats",
            {"topic": "t", "most": 1, "least": "18"},
            ("/admin/v3/transactions/transactionInBufferStats/public/default/t/1/18", None, None),
        ),
        (
            "position-stats-in-pending-ack",
            {"topic": "persistent://a/b/c", "subscription": "s 1/x", "ledger_id": 7, "entry_id": 0},
            (
                "/admin/v3/transactions/positionStatsInPendingAck/a/b/c/s%201%2Fx/7/0",
                {"batchIndex": None},
                None,
            ),
        ),
        (
            "transaction-buffer-stats",
            {"topic": "t", "low_water_mark": False, "segment_stats": False},
            (
                "/admin/v3/transactions/transactionBufferStats/public/default/t",
                {"lowWaterMarks": False, "segmentStats": None},
                None,
            ),
        ),
        (
            "coordinator-stats",
            {},
            ("/admin/v3/transactions/coordinatorStats", {"coordinatorId": None}, None),
        ),
        (
            "scale-transactionCoordinators",
            {"replicas": "5"},
            ("/admin/v3/transactions/transactionCoordinator/replicas", None, 5),
        ),
        (
            "abort-transaction",
            {"most": 0, "least": 3, "yes": True},  # a command's own option is not sent
            ("/admin/v3/transactions/abortTransaction/0/3", None, None),
        ),
    ],
)
def test_the_request_is_pulsars(name, args, expected):
    assert BY_NAME[name].request(args) == expected


def test_an_unknown_argument_or_a_composition_is_refused():
    with pytest.raises(TypeError, match="no parameter"):
        BY_NAME["transaction-metadata"].request({"most": 0, "least": 1, "topic": "t"})
    with pytest.raises(TypeError, match="composition"):
        BY_NAME["subscriptions"].request({})
