"""One output style everywhere: JSON keys in camelCase (as Pulsar's REST), booleans true/false in
JSON and yes/no in tables (never Python's True), names in natural order, shares as percentages,
progress in human units, and `engine dump` honouring -o json."""

from __future__ import annotations

import io
import re

import pytest

from pulsar_txn_cli.natural import natural_key

SNAKE = re.compile(r"^[A-Za-z][A-Za-z0-9]*(_[A-Za-z0-9]+)+$")


def _keys(value):
    if isinstance(value, dict):
        for key, item in value.items():
            yield key
            yield from _keys(item)
    elif isinstance(value, list):
        for item in value:
            yield from _keys(item)


@pytest.fixture(scope="module")
def engine(tmp_path_factory):
    from tests.conftest import run_cli

    directory = tmp_path_factory.mktemp("consistency") / "engine"
    for args in (
        ["engine", "init"],
        ["set-txn-tc-batch-log", "--enable", "--yes"],
        ["set-txn-pending-ack-batch-log", "--enable", "--yes"],
        ["engine", "reload"],
        ["engine", "simulate", "-n", "300", "--subscriptions", "12", "--topics", "12"],
    ):
        result = run_cli([*args, "--engine-dir", directory])
        assert result.exit_code == 0, (args, result.stderr)
    return directory


COMMANDS = [
    ["coordinators-list"],
    ["coordinator-stats"],
    ["coordinator-internal-stats", "-c", "0"],
    ["get-txn-tc-batch-log-stat"],
    ["get-txn-pending-ack-batch-log-stat"],
    ["subscriptions"],
    ["stuck-readers", "-n", "public/default"],
    ["metrics"],
    ["transaction-buffer-stats", "-t", "persistent://public/default/sim-topic-1"],
    ["pending-ack-stats", "-t", "persistent://public/default/sim-topic-1", "-s", "sim-sub-1"],
    ["slow-transactions", "--time", "0"],
    ["engine", "metrics"],
    ["engine", "verify"],
    ["engine", "dump", "--list"],
    ["downgrade", "status"],
    ["upgrade", "check"],
    ["engine", "simulate", "-n", "20"],
]


@pytest.mark.parametrize("args", COMMANDS, ids=lambda a: " ".join(a))
def test_json_keys_are_camel_case_and_tables_say_yes_no(cli, engine, args):
    result = cli([*args, "--engine-dir", engine, "-o", "json"])
    assert result.exit_code in (0, 5), result.stderr
    snake = sorted({k for k in _keys(result.json()) if SNAKE.match(k)})
    assert snake == [], f"snake_case keys in {' '.join(args)} -o json: {snake}"
    table = cli([*args, "--engine-dir", engine])
    if args != ["engine", "metrics"]:  # that one prints Prometheus text, whose names are Pulsar's
        assert not re.search(r"\b(True|False|None)\b", table.stdout), table.stdout


def test_decode_records_use_camel_case_keys(cli, engine):
    dump = cli(["engine", "dump", "--engine-dir", engine])
    result = cli(["decode", "-o", "json"], input=dump.stdout)
    assert result.exit_code == 0, result.stderr
    keys = set(_keys(result.json()))
    assert {"txnidMostBits", "txnidLeastBits", "metadataOp", "pendingAckOp", "pendingAckMetadata"} <= keys
    assert not {k for k in keys if SNAKE.match(k)}


def test_decode_json_reads_back_in_both_casings():
    from pulsar_txn_cli import codec
    from tests.codec.samples import pending_ack

    record = pending_ack(3, positions=((12, 3), (12, 4)))
    camel = codec.record_to_dict(record, "pending-ack")
    snake = {
        "pending_ack_op": camel["pendingAckOp"],
        "txnid_least_bits": 3,
        "txnid_most_bits": 1,
        "pending_ack_metadata": [
            {"ledgerId": p["ledgerId"], "entryId": p["entryId"]} for p in camel["pendingAckMetadata"]
        ],
    }
    assert codec.record_from_dict(camel, "pending-ack") == record
    back = codec.record_from_dict(snake, "pending-ack")
    assert back.pending_ack_op == record.pending_ack_op
    assert [(p.ledgerId, p.entryId) for p in back.pending_ack_metadata] == [(12, 3), (12, 4)]


def test_names_are_in_natural_order(cli, engine):
    result = cli(["subscriptions", "--engine-dir", engine, "-o", "json"])
    subs = [s["subscription"] for s in result.json() if s["topic"].endswith("sim-topic-2")]
    names = [(s["topic"], s["subscription"]) for s in result.json()]
    assert names == sorted(names, key=lambda n: (natural_key(n[0]), natural_key(n[1])))
    topics = [t for t, _ in names]
    assert topics.index("persistent://public/default/sim-topic-2") < topics.index(
        "persistent://public/default/sim-topic-10"
    )
    assert subs == sorted(subs, key=natural_key)


def test_natural_key():
    names = ["sub-10", "sub-2", None, "sub-1", "a", "sub-2b", "10", "9"]
    assert sorted(names, key=natural_key) == ["9", "10", "a", "sub-1", "sub-2", "sub-2b", "sub-10", None]


def test_metrics_table_shows_shares_as_percentages(cli, engine):
    data = cli(["metrics", "--engine-dir", engine, "-o", "json"]).json()
    shares = [v for row in data for v in row["flushTriggerShare"].values() if v is not None]
    assert shares and all(0 <= v <= 1 for v in shares)  # JSON keeps the fraction
    table = cli(["metrics", "--engine-dir", engine]).stdout
    assert re.search(r"\b\d+(\.\d)?%", table), table


def test_engine_dump_honours_json(cli, engine):
    jsonl = cli(["engine", "dump", "--engine-dir", engine])
    as_json = cli(["engine", "dump", "--engine-dir", engine, "-o", "json"])
    assert as_json.exit_code == 0, as_json.stderr
    assert as_json.json() == jsonl.jsonl() and as_json.json()
    assert "as a JSON array" in as_json.stderr and "as JSONL, the dump format" in jsonl.stderr


def test_analyze_progress_counts_megabytes():
    from pulsar_txn_cli.cli.env import Env

    class Terminal(io.StringIO):
        def isatty(self):
            return True

    env = Env(stdout=io.StringIO(), stderr=Terminal())
    with env.progress(None, "analyze", unit="bytes") as progress:
        progress.update(total=3_000_000)
        progress.advance(1_500_000)
        progress._bar.refresh()
        shown = env.stderr.getvalue()
    assert "1.5/3.0 MB" in shown, shown
