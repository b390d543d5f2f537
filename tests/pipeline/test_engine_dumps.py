"""analyze on dumps written by the embedded engine's `engine dump` (a workload with known totals)."""

from __future__ import annotations

from pulsar_txn_cli import pipeline

TC_LOGS = {"pulsar/system/persistent/__transaction_log_0", "pulsar/system/persistent/__transaction_log_1"}


def test_engine_dump_before_and_after_enabling_batching(cli, tmp_path):
    engine = ["--engine-dir", str(tmp_path / "engine"), "-q"]
    assert cli(["engine", "init", "--coordinators", "2", *engine]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "60", "--seed", "3", *engine]).exit_code == 0
    before = tmp_path / "before.jsonl"
    before.write_text(cli(["engine", "dump", *engine]).stdout)

    report = cli(["analyze", str(before), "--engine", "local", "-o", "json"]).json()
    tc = [m for m in report["managedLedgers"] if m["name"] in TC_LOGS]
    assert len(tc) == 2 and all(m["batchedEntries"] == 0 and m["lastBatchedLedgerId"] is None for m in tc)
    assert sum(m["transactions"] for m in tc) == 60 and report["totals"]["entriesSaved"] == 0
    assert all(m["ops"]["NEW"] == m["transactions"] for m in tc)
    assert report["totals"]["decodeErrors"] == 0

    for key in ("transactionLogBatchedWriteEnabled", "transactionPendingAckBatchedWriteEnabled"):
        assert cli(["engine", "config", "set", key, "true", *engine]).exit_code == 0
    assert cli(["engine", "reload", *engine]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "60", "--seed", "4", *engine]).exit_code == 0
    after = tmp_path / "after.jsonl"
    after.write_text(cli(["engine", "dump", *engine]).stdout)
    listing = {row["managedLedger"]: row for row in cli(["engine", "dump", "--list", *engine, "-o", "json"]).json()}

    report = cli(["analyze", str(after), "--engine", "local", "-o", "json"]).json()
    by_name = {m["name"]: m for m in report["managedLedgers"]}
    for name, m in by_name.items():  # the analysis sees exactly what the engine stored
        assert (m["entries"], m["bytes"]) == (listing[name]["entries"], listing[name]["size"])
        assert [l["ledgerId"] for l in m["ledgers"]] == listing[name]["ledgers"]
    # The reload rolled the TC logs' ledgers and the finished transactions trimmed the old ones:
    # only the second workload's batched entries remain there.
    tc = [by_name[name] for name in TC_LOGS]
    assert sum(m["transactions"] for m in tc) == 60
    assert all(m["unbatchedEntries"] == 0 and m["entriesSaved"] > 0 for m in tc)
    # The pending-ack logs keep their old unbatched ledger next to the new batched one.
    acks = [m for m in report["managedLedgers"] if m["log"] == "pending-ack"]
    assert acks and all(m["batchedEntries"] > 0 and m["unbatchedEntries"] > 0 for m in acks)
    for m in acks:
        old, new = m["ledgers"][0], m["ledgers"][-1]
        assert old["batchedEntries"] == 0 and new["batchedEntries"] == new["entries"]
        assert m["lastBatchedLedgerId"] == new["ledgerId"]
    assert all(m["records"] == sum(m["ops"].values()) for m in report["managedLedgers"])
    batched = pipeline.batched_ledgers([after])
    assert set(TC_LOGS) <= set(batched)
    assert all(max(ledgers) == by_name[name]["lastBatchedLedgerId"] for name, ledgers in batched.items())
