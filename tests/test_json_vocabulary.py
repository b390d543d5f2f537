"""One JSON vocabulary across commands (docs/output.md): the tool's own JSON names
a coordinator `coordinatorId` (Pulsar's own answers passed through keep Pulsar's keys: coordinators-list's
`id`), booleans are JSON booleans, cause values are kebab-case ids shared by every command, and -o jsonl
lines carry what the JSON document says about all of them."""

from __future__ import annotations

import re

import pytest

from pulsar_txn_cli.engine.broker import Engine

pytestmark = pytest.mark.timeout(180)

TOPIC = "persistent://public/default/orders"
KEBAB = re.compile(r"^[a-z]+(-[a-z]+)*$")


def _keys(value, out: set[str] | None = None) -> set[str]:
    out = set() if out is None else out
    if isinstance(value, dict):
        for key, item in value.items():
            if not re.fullmatch(r"-?\d+|persistent://.*", str(key)):  # map keys that are data, not names
                out.add(str(key))
            _keys(item, out)
    elif isinstance(value, list):
        for item in value:
            _keys(item, out)
    return out


def _causes(value, out: list | None = None) -> list:
    out = [] if out is None else out
    if isinstance(value, dict):
        for key, item in value.items():
            if key == "cause" and item is not None:
                out.append(item)
            _causes(item, out)
    elif isinstance(value, list):
        for item in value:
            _causes(item, out)
    return out


@pytest.fixture
def engine(cli, tmp_path):
    d = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", d, "--coordinators", "2"]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--engine-dir", d]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "40", "--engine-dir", d]).exit_code == 0
    with Engine.open(d) as e:  # a partition held by an open transaction (stuck-readers has a cause)
        e.register_topic(TOPIC, 1)
        got: list[int] = []
        e.tc(0).new_transaction(3_600_000, got.append)
        e.checkpoint()
        e.tc(0).add_partitions(got[0], [f"{TOPIC}-partition-0"], lambda pos: None)
        e.checkpoint()
        e.buffers.produce(f"{TOPIC}-partition-0", (0, got[0]))
        e.buffers.publish(f"{TOPIC}-partition-0", b"after")
        e.checkpoint()
    assert cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--force", "--engine-dir", d]).exit_code == 0
    return d


def _json(cli, *args, codes=(0,)):
    result = cli([*map(str, args), "-o", "json"])
    assert result.exit_code in codes, result.stderr
    return result.json()


def test_the_tool_names_a_coordinator_coordinator_id_everywhere(cli, engine):
    t = ["--engine-dir", engine]
    own = {
        "coordinator-stats jsonl": cli(["coordinator-stats", *t, "-o", "jsonl"]).jsonl(),
        "get-txn-tc-batch-log-stat": _json(cli, "get-txn-tc-batch-log-stat", *t),
        "downgrade check": _json(cli, "downgrade", "check", *t, codes=(0, 5, 6)),
        "upgrade check": _json(cli, "upgrade", "check", *t, codes=(0, 5, 6)),
    }
    for name, doc in own.items():
        keys = _keys(doc)
        assert "coordinatorId" in keys and "id" not in keys, (name, sorted(keys))
    # Pulsar's own answer keeps Pulsar's key (GET /admin/v3/transactions/coordinators: [{id, brokerServiceUrl}])
    assert [c["id"] for c in _json(cli, "coordinators-list", *t)] == [0, 1]


def test_cause_values_are_one_kebab_case_vocabulary(cli, engine):
    t = ["--engine-dir", engine]
    stuck = _causes(_json(cli, "stuck-readers", "-t", TOPIC, *t))
    downgrade = _causes(_json(cli, "downgrade", "check", *t, codes=(0, 5, 6)))
    assert stuck == ["open-transaction"], stuck
    assert downgrade and all(KEBAB.match(c) for c in downgrade), downgrade


def test_booleans_are_json_booleans_and_table_words(cli, engine):
    t = ["--engine-dir", engine]
    doc = _json(cli, "upgrade", "check", *t, codes=(5, 6))
    for broker in doc["brokers"]:
        assert broker["transactionLogBatchedWriteEnabled"] is False, broker
        assert broker["transactionPendingAckBatchedWriteEnabled"] is False, broker
    table = cli(["upgrade", "check", *t]).stdout
    row = next(line for line in table.splitlines() if line.startswith("http://"))
    assert " no " in f" {row} " and "false" not in row, row  # as every table renders booleans (docs/output.md)


def test_jsonl_lines_carry_what_the_document_says_of_all(cli, engine):
    t = ["--engine-dir", engine]
    doc = _json(cli, "get-txn-tc-batch-log-stat", *t)
    lines = cli(["get-txn-tc-batch-log-stat", *t, "-o", "jsonl"]).jsonl()
    assert len(lines) == 2
    for line in lines:
        assert line["target"] == doc["target"] and line["txnTcBatchLogEnabled"] is doc["txnTcBatchLogEnabled"]
        assert line["setting"] == "transactionLogBatchedWriteEnabled"
