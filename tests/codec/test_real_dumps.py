"""Real `readledger` dumps of a real broker (tests/fixtures/real, captured by
tests/integration/capture_fixtures.py) decoded and checked against their MANIFEST.json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

REAL = Path(__file__).resolve().parent.parent / "fixtures" / "real"
MANIFEST = REAL / "MANIFEST.json"
LOGS = {"transaction_log": "tc", "pending_ack": "pending-ack"}


def _files() -> list[tuple[str, dict]]:
    if not MANIFEST.exists():
        return []
    files = json.loads(MANIFEST.read_text()).get("files", {})
    return sorted((name, info) for name, info in files.items() if info.get("kind") in LOGS)


FILES = _files()


def test_the_real_dumps_are_committed():
    assert FILES, f"no real readledger dumps listed in {MANIFEST}: the committed fixtures are missing"


@pytest.fixture(scope="module")
def decoded():
    """name -> (CliResult, entries) for every dump, decoded once through the real entry point."""
    from tests.conftest import run_cli

    out = {}
    for name, info in FILES:
        result = run_cli(["decode", REAL / name, "--log", LOGS[info["kind"]], "-o", "json"])
        out[name] = (result, result.json() if result.stdout.strip() else [])
    return out


@pytest.mark.parametrize("name, info", FILES, ids=[n for n, _ in FILES])
def test_real_dump_decodes_completely(decoded, name, info):
    result, entries = decoded[name]
    assert result.exit_code == 0, result.stderr
    assert "error" not in result.stderr and "warning" not in result.stderr
    assert {e["ledgerId"] for e in entries} == {info["ledgerId"]}
    assert len(entries) == info["entries"]
    assert sum(e["batched"] for e in entries) == info["batchedEntries"]
    assert sum(len(e["records"]) for e in entries) == info["records"]
    assert max(len(e["records"]) for e in entries) == info["maxRecordsPerEntry"]
    assert all(e["version"] == 1 for e in entries if e["batched"])
    assert [e["entryId"] for e in entries] == sorted(e["entryId"] for e in entries)


@pytest.mark.parametrize("name, info", FILES, ids=[n for n, _ in FILES])
def test_real_dump_holds_the_manifest_transactions(decoded, name, info):
    _, entries = decoded[name]
    records = [r for e in entries for r in e["records"]]
    by_txn: dict[str, list[dict]] = {}
    for record in records:
        by_txn.setdefault(record["txnId"], []).append(record)
    txns = info["txns"]
    assert txns, "the manifest names no transactions"
    unfinished = []
    for txn in txns:
        key = f"({txn['most']},{txn['least']})"
        assert key in by_txn, f"{key} ({txn['outcome']}) is not in {name}"
        if info["kind"] == "transaction_log":
            ops = [r.get("metadataOp", "NEW") for r in by_txn[key]]
            assert ops[0] == "NEW"
            last = [r.get("newStatus") for r in by_txn[key] if r.get("metadataOp") == "UPDATE"][-1:]
            final = {"committed": "COMMITTED", "aborted": "ABORTED"}.get(txn["outcome"])
        else:
            ops = [r.get("pendingAckOp", "ACK") for r in by_txn[key]]
            assert ops[0] == "ACK"
            last = [op for op in ops if op != "ACK"][-1:]
            final = {"committed": "COMMIT", "aborted": "ABORT"}.get(txn["outcome"])
        if final is None:
            continue
        if last == [final]:
            continue
        if last and last[0] not in ("COMMITTING", "ABORTING"):
            pytest.fail(f"{key} ended {last[0]} in {name}, the workload saw it {txn['outcome']}")
        unfinished.append(key)
    # The ledger was open when dumped: its newest entry (up to one batch of records) may be missing.
    assert len(unfinished) <= info["maxRecordsPerEntry"], unfinished


def test_real_dumps_round_trip_through_the_jsonl_format(decoded, tmp_path):
    """readledger text -> the project's JSONL dump -> decode with --log auto: the same records."""
    from pulsar_txn_cli.codec import dumps
    from tests.conftest import run_cli

    lines = []
    expected = []
    for name, info in FILES:
        with (REAL / name).open("rb") as stream:
            for raw in dumps.read_entries(stream, "readledger"):
                lines.append(dumps.dump_line(info["managedLedgerName"], raw.ledger_id, raw.entry_id, raw.data))
        expected += decoded[name][1]
    path = tmp_path / "all.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = run_cli(["decode", path, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    got = result.json()
    assert [e["records"] for e in got] == [e["records"] for e in expected]
    assert {e["log"] for e in got} == {LOGS[info["kind"]] for _, info in FILES}
