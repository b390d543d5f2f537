"""One JSON vocabulary across commands (docs/output.md): the tool's own JSON names
a coordinator `coordinatorId` (Pulsar's own answers passed through keep Pulsar's keys: coordinators-list's
`id`), booleans are JSON booleans, cause values are kebab-case ids shared by every command, and -o jsonl
lines carry what the JSON document says about all of them."""

from __future__ import annotations

import re
from pathlib import Path

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


# ---------------------------------------------------------------- every command against docs/output.md

DOC = Path(__file__).resolve().parent.parent / "docs" / "output.md"
SIM = "persistent://public/default/sim-topic-0"
# The commands that pass Pulsar's answer through: its keys and values are Pulsar's (docs/output.md).
PULSARS = {
    "coordinators-list",
    "coordinator-stats",
    "coordinator-internal-stats",
    "pending-ack-stats",
    "pending-ack-internal-stats",
    "transaction-metadata",
    "slow-transactions",
    "transaction-buffer-stats",
    "buffer-snapshot-internal-stats",
    "transaction-in-buffer-stats",
    "transaction-in-pending-ack-stats",
    "position-stats-in-pending-ack",
}
# Inside the tool's own documents: Pulsar's answers and log records shown as they are (docs/output.md).
PULSARS_INSIDE = {("stuck-readers", "metadata"), ("decode", "records"), ("metrics", "broker")}
MOMENT_TEXT = re.compile(r"\d{4}-\d\d-\d\d[T ]\d\d:\d\d(:\d\d)?(\.\d+)?(Z|[+-]\d\d:?\d\d| UTC)?")
WEB_URL = re.compile(r"https?://[^/\s]+")
OTHER_BROKER = re.compile(r"pulsar(\+ssl)?://[^/\s]+|[A-Za-z][\w.-]*:\d{2,5}")
MOMENT_KEY = re.compile(r"(.*(Timestamp|Time|At|Since)|at|nowMs|fromMs|toMs|createdMs)")


def _vocabulary() -> tuple[dict[str, str], set[str]]:
    """docs/output.md's JSON vocabulary: {key: concept} and the keys it says never to use."""
    section = DOC.read_text().split("## JSON vocabulary", 1)[1]
    keys, never = {}, set()
    for line in section.splitlines():
        cells = [c.strip() for c in line.strip().strip("|").split("|")]
        if len(cells) != 5 or cells[0] in ("concept", "---"):
            continue
        for key in re.findall(r"`([A-Za-z]+)`", cells[1]):
            keys[key] = cells[0]
        never |= {k for k in re.findall(r"`([a-z][A-Za-z]*)`", cells[4]) if k not in keys}
    return keys, never


@pytest.fixture(scope="module")
def place(tmp_path_factory):
    """One engine state on which every command has something to say: 500 transactions, an open one
    (a client that crashed) holding readers, a checkpoint, recorded changes and an abort audit."""
    from tests.conftest import run_cli

    d = tmp_path_factory.mktemp("vocabulary") / "engine"
    for args in (
        ["engine", "init", "--coordinators", "2"],
        ["engine", "simulate", "-n", "500", "--timeout-ratio", "0.05"],
        ["engine", "simulate", "-n", "5", "--seed", "9", "--fault", "client-crash"],
        ["engine", "advance", "2s"],
    ):
        result = run_cli([*args, "--engine-dir", d])
        assert result.exit_code == 0, (args, result.stderr)
    hanging = run_cli(["find-hanging", "--older-than", "0s", "--engine-dir", d, "-o", "json"]).json()["transactions"]
    assert len(hanging) == 1, hanging
    dump = d.parent / "tc0.jsonl"
    listed = run_cli(["engine", "dump", "-m", "pulsar/system/persistent/__transaction_log_0", "--engine-dir", d])
    dump.write_text(listed.stdout)
    got: list[int] = []
    with Engine.open(d) as e:  # one more open transaction, for abort-transaction
        e.tc(1).new_transaction(3_600_000, got.append)
        e.checkpoint()
    return d, hanging[0]["txnId"], dump, f"(1,{got[0]})"


def _commands(engine, txn: str, dump, other: str) -> list[tuple[str, list]]:
    most, least = txn.strip("()").split(",")
    t = ["--engine-dir", engine]
    on_sub = ["-t", SIM, "-s", "sim-sub-0"]
    return [
        ("get-txn-tc-batch-log-stat", ["get-txn-tc-batch-log-stat", *t]),
        ("get-txn-pending-ack-batch-log-stat", ["get-txn-pending-ack-batch-log-stat", *t]),
        ("coordinators-list", ["coordinators-list", *t]),
        ("coordinator-stats", ["coordinator-stats", *t]),
        ("coordinator-internal-stats", ["coordinator-internal-stats", "-c", "0", *t]),
        ("pending-ack-stats", ["pending-ack-stats", *on_sub, *t]),
        ("pending-ack-internal-stats", ["pending-ack-internal-stats", *on_sub, *t]),
        ("transaction-metadata", ["transaction-metadata", txn, *t]),
        ("slow-transactions", ["slow-transactions", "--time", "0", *t]),
        ("transaction-buffer-stats", ["transaction-buffer-stats", "-t", SIM, *t]),
        ("buffer-snapshot-internal-stats", ["buffer-snapshot-internal-stats", "-t", SIM, *t]),
        ("subscriptions", ["subscriptions", *t]),
        ("transaction-in-buffer-stats", ["transaction-in-buffer-stats", "-t", SIM, "-m", most, "-l", least, *t]),
        (
            "transaction-in-pending-ack-stats",
            ["transaction-in-pending-ack-stats", *on_sub, "-m", most, "-l", least, *t],
        ),
        ("position-stats-in-pending-ack", ["position-stats-in-pending-ack", *on_sub, "-l", "1", "-e", "0", *t]),
        ("stuck-readers", ["stuck-readers", "-n", "public/default", "--all", *t]),
        ("doctor", ["doctor", "--older-than", "0s", *t]),
        ("find-hanging", ["find-hanging", "--older-than", "0s", *t]),
        ("abort-hanging", ["abort-hanging", "--older-than", "0s", *t]),
        ("metrics", ["metrics", *t]),
        ("decode", ["decode", dump]),
        ("analyze", ["analyze", dump]),
        ("downgrade check", ["downgrade", "check", *t]),
        ("downgrade status", ["downgrade", "status", *t]),
        ("upgrade check", ["upgrade", "check", *t]),
        ("engine verify", ["engine", "verify", *t]),
        ("engine dump", ["engine", "dump", "--list", *t]),
        ("engine metrics", ["engine", "metrics", *t]),
        ("engine config list", ["engine", "config", "list", *t]),
        ("engine config get", ["engine", "config", "get", "transactionCoordinatorEnabled", *t]),
        ("nack plan", ["nack", "plan", "--rate", "1000", "--delay", "60"]),
        ("nack simulate", ["nack", "simulate", "--duration", "5"]),
        ("state list", ["state", "list"]),
        # the commands that change their target, last
        ("abort-transaction", ["abort-transaction", other, "--yes", *t]),
        ("set-txn-tc-batch-log", ["set-txn-tc-batch-log", "--enable", "--yes", "--force", *t]),
        ("set-txn-pending-ack-batch-log", ["set-txn-pending-ack-batch-log", "--enable", "--yes", "--force", *t]),
        ("unload", ["unload", "-t", SIM, "--yes", *t]),
        ("engine reload", ["engine", "reload", *t]),
        ("engine advance", ["engine", "advance", "1m", *t]),
        ("engine simulate", ["engine", "simulate", "-n", "20", "--seed", "4", *t]),
        ("engine config set", ["engine", "config", "set", "transactionLogBatchedWriteMaxRecords", "100", *t]),
        ("scale-transactionCoordinators", ["scale-transactionCoordinators", "-r", "3", "--yes", *t]),
        ("abort-hanging --execute", ["abort-hanging", "--older-than", "0s", "--execute", "--yes", *t]),
        ("state list after", ["state", "list"]),
        ("downgrade reset", ["downgrade", "reset", *t]),
        ("engine reset", ["engine", "reset", "--yes", *t]),
        ("engine init", ["engine", "init", "--engine-dir", engine.parent / "another"]),
    ]


def _speaks(command: str, value, keys: dict, never: set, path: str = "") -> list[str]:
    """Where VALUE (a command's JSON) departs from the vocabulary: one line each."""
    wrong = []
    if isinstance(value, list):
        for item in value:
            wrong += _speaks(command, item, keys, never, path + "[]")
    elif isinstance(value, dict):
        for key, item in value.items():
            at = f"{path}.{key}"
            if re.fullmatch(r"-?\d+|persistent://.*|\(.*\)", str(key)) or (command.split()[0], key) in PULSARS_INSIDE:
                continue  # a map keyed by data (coordinator ids, topics), or Pulsar's own inside ours
            if key in never:
                wrong.append(f"{command} {at}: `{key}` is not the vocabulary's key")
            if key in ("broker", "ownerBroker") and item is not None and not WEB_URL.fullmatch(str(item)):
                wrong.append(f"{command} {at}: a broker is its web URL, not {item!r}")
            if key == "log" and item not in ("tc", "pending-ack", "topic"):
                wrong.append(f"{command} {at}: a log is `tc`, `pending-ack` or `topic`, not {item!r}")
            if key in ("ageMs", "timeoutMs") and item is not None and type(item) is not int:
                wrong.append(f"{command} {at}: {key} is whole milliseconds, not {item!r}")
            if MOMENT_KEY.fullmatch(key) and item is not None and type(item) is not int:
                wrong.append(f"{command} {at}: a moment is epoch milliseconds, not {item!r}")
            wrong += _speaks(command, item, keys, never, at)
    elif isinstance(value, str):
        if MOMENT_TEXT.fullmatch(value):
            wrong.append(f"{command} {path}: a moment is epoch milliseconds, not the text {value!r}")
        if OTHER_BROKER.fullmatch(value) and not path.endswith(("target", "scraped")):
            wrong.append(f"{command} {path}: a broker is its web URL, not {value!r}")
    return wrong


def test_every_command_speaks_the_documented_vocabulary(cli, place, monkeypatch):
    from pulsar_txn_cli import output

    keys, never = _vocabulary()
    assert {"ageMs", "timeoutMs", "state", "status", "broker", "ownerBroker", "txnId", "coordinatorId"} <= set(keys)
    assert {"openForMs", "bufferState", "timeoutAt"} <= never, never
    headers: list[tuple[str, str, str]] = []  # (command, key, header) of every table built
    running = [""]
    init = output.Table.__init__

    def recording(self, *args, **kwargs):
        init(self, *args, **kwargs)
        headers.extend((running[0], key, header) for key, header in self.columns)

    monkeypatch.setattr(output.Table, "__init__", recording)
    engine, txn, dump, other = place
    wrong, ran = [], []
    commands = _commands(engine, txn, dump, other)
    changing = [name for name, _ in commands][[name for name, _ in commands].index("abort-transaction") :]
    for name, args in commands:
        running[0] = name
        # a command that changes its target runs once; the others in every form (tables: for their headers)
        for form in ("json",) if name in changing else ("json", "jsonl", "table"):
            result = cli([*map(str, args), "-o", form], env={"COLUMNS": "250"})
            assert result.exit_code in (0, 5, 6), (name, form, result.stderr)
            assert result.stdout.strip(), (name, form, result.stderr)
            if name in PULSARS or form == "table":
                continue
            for doc in result.jsonl() if form == "jsonl" else [result.json()]:
                wrong += _speaks(name, doc, keys, never)
        ran.append(name)
    assert not wrong, "\n".join(wrong)
    assert len(ran) == len(commands)
    # a table's header names the key its column shows
    for name, key, header in headers:
        words = set(re.findall(r"[a-z]+", header.lower()))
        assert ("status" in words) == (key == "status"), (name, key, header)
        assert "state" not in words or key.lower().endswith("state"), (name, key, header)
    assert ("find-hanging", "status", "STATUS") in headers and ("stuck-readers", "state", "STATE") in headers
