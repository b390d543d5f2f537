"""`collect` against the real broker of the integration suite, with BookKeeper's real BookieShell
(the harness's classpath) and the metadata service URI the broker's configuration gives.

A workload runs with batching on; then `collect` reads every TC and pending-ack log, and `analyze`
of what it wrote agrees with the broker's internal stats: the same ledgers, each closed ledger
with the broker's entry count, the open one up to its last confirmed entry (BookieShell reads up
to the bookies' LAC, which may lag by one). Prints the per-ledger time (docs/collect.md's figure).
"""
from __future__ import annotations

import json
import os
import statistics

import pytest

from tool import Tool, position

pytestmark = pytest.mark.integration


def _internal_stats(tool: Tool) -> dict:
    """{managedLedger: managedLedgerInternalStats} of every coordinator and transactional subscription."""
    out = {}
    for c in range(len(tool.json("coordinators-list"))):
        stats = tool.json("coordinator-internal-stats", "-c", c)["transactionLogStats"]
        out[stats["managedLedgerName"]] = stats["managedLedgerInternalStats"]
    for s in tool.json("subscriptions"):
        if s.get("status") == "orphan":
            continue
        stats = tool.json("pending-ack-internal-stats", "-t", s["topic"], "-s", s["subscription"])["pendingAckLogStats"]
        out[stats["managedLedgerName"]] = stats["managedLedgerInternalStats"]
    return out


def test_collect_then_analyze_agrees_with_the_brokers_internal_stats(pulsar_broker, tmp_path):
    b = pulsar_broker
    tool = Tool(b.admin_url, tmp_path / "state")
    tool.run("set-txn-tc-batch-log", "--enable", "--reload", "--yes")
    tool.run("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes")
    try:
        b.wait_coordinators_ready()
        b.run_workload(seed=61, txns=24, aborts=3, ops=3, parallel=4, prefix="collect-x")
        out = tmp_path / "collected"
        result = tool.run("collect", "--out", out, "--bookkeeper-classpath", b.tools_classpath, "--concurrency", "2",
                          "-o", "json", expect=(0, 3))
        summary = result.json()
        stats = _internal_stats(tool)
    finally:
        tool.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes")
        tool.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes")
        b.wait_coordinators_ready()
    assert summary["failed"] == [], summary["failed"]
    assert all("belongs to no existing subscription" in p for p in summary["problems"]), summary["problems"]
    assert summary["metadataServiceUri"] == f"zk+null://localhost:{b.zk_port}/ledgers" or \
        summary["metadataServiceUri"].endswith(f":{b.zk_port}/ledgers"), summary["metadataServiceUri"]
    done = [json.loads(line) for line in (out / "_collect" / "done.jsonl").read_text().splitlines()]
    seconds = sorted(r["seconds"] for r in done)
    print(f"\ncollect on the real broker: {summary['read']} ledgers of {min(r['entries'] for r in done)} to "
          f"{max(r['entries'] for r in done)} entries ({summary['entries']} in all); per ledger (one BookieShell "
          f"run each): mean {summary['secondsPerLedger']} s, median {statistics.median(seconds):.2f} s, "
          f"fastest {seconds[0]:.2f} s; {summary['seconds']} s wall with --concurrency {summary['concurrency']}; "
          f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores")

    report = tool.run("analyze", out, "--engine", "local", "-o", "json", target=False).json()
    analyzed = {m["name"]: {l["ledgerId"]: l["entries"] for l in m["ledgers"]} for m in report["managedLedgers"]}
    assert report["totals"]["decodeErrors"] == 0
    assert any(m["batchedEntries"] for m in report["managedLedgers"] if m["log"] == "tc"), "no batched TC entry collected"
    assert any(m["batchedEntries"] for m in report["managedLedgers"] if m["log"] == "pending-ack")
    for name, ml in stats.items():
        ledgers = ml["ledgers"]
        got = analyzed.get(name, {})
        for info in ledgers[:-1]:  # closed ledgers: exactly the broker's count
            if info["entries"]:
                assert got.get(info["ledgerId"]) == info["entries"], (name, info, got)
        last = ledgers[-1]["ledgerId"] if ledgers else None
        lce_ledger, lce_entry = position(ml["lastConfirmedEntry"])
        if last is not None and lce_ledger == last and lce_entry >= 0:
            assert got.get(last, 0) in (lce_entry, lce_entry + 1), (name, ml["lastConfirmedEntry"], got)
