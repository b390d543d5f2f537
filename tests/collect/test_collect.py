"""`collect` end to end over real HTTP (the embedded engine served by engine/server.py) with a
STAND-IN BookKeeper shell (standin_bookkeeper.py: real bookies cannot run in the fast suite; the
real shell against a real broker is tests/integration/test_collect_real_broker.py). Covers the
plan from internal stats, the dumps `analyze` reads, resumption, Ctrl-C, and the error paths."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import sigint
from tests.collect.fleet import URI, args, calls, ledgers_of
from tests.conftest import assert_no_crash, simulate_into


def test_collect_writes_every_ledger_and_analyze_agrees_with_the_dump(cli, fleet):
    out = fleet["tmp"] / "out"
    result = cli(args(fleet, out, "-o", "json"))
    assert result.exit_code == 0, result.stdout + result.stderr
    summary = result.json()
    expected = ledgers_of(fleet["dump"])
    assert (
        summary["ledgers"] == summary["read"] == len(expected) and summary["failed"] == [] and summary["problems"] == []
    )
    assert summary["metadataServiceUri"] == URI and summary["secondsPerLedger"] > 0
    collected = [json.loads(l) for f in sorted(out.rglob("ledger-*.jsonl")) for l in f.read_text().splitlines()]
    original = [json.loads(l) for l in fleet["dump"].read_text().splitlines()]
    key = lambda o: (o["managedLedger"], o["ledgerId"], o["entryId"])  # noqa: E731
    assert sorted(collected, key=key) == sorted(original, key=key)  # byte for byte, entry for entry
    report = cli(["analyze", str(out), "--engine", "local", "-o", "json"]).json()
    direct = cli(["analyze", str(fleet["dump"]), "--engine", "local", "-o", "json"]).json()
    assert report["totals"] == direct["totals"] and report["totals"]["batchedEntries"] > 0


def test_a_second_run_reads_only_what_is_missing(cli, fleet, monkeypatch):
    out = fleet["tmp"] / "out"
    victim = sorted(lid for _, lid in ledgers_of(fleet["dump"]))[0]
    monkeypatch.setenv("STANDIN_FAIL", str(victim))
    first = cli(args(fleet, out, "-o", "json"))
    assert first.exit_code == 3, first.stderr
    failed = first.json()["failed"]
    assert [f["ledgerId"] for f in failed] == [victim] and "No such ledger" in failed[0]["error"]
    assert "run the same command again" in first.stderr
    monkeypatch.delenv("STANDIN_FAIL")
    fleet["calls"].unlink()
    second = cli(args(fleet, out, "-o", "json"))
    assert second.exit_code == 0, second.stderr
    summary = second.json()
    open_ledgers = {
        r["ledgerId"] for r in map(json.loads, (out / "_collect" / "done.jsonl").read_text().splitlines()) if r["open"]
    }
    assert set(calls(fleet)) == {victim} | open_ledgers  # the failed ledger, and the open ones (they may grow)
    assert summary["alreadyCollected"] == summary["ledgers"] - len({victim} | open_ledgers)


# The second listing, taken after the failure: the victim ledger trimmed from its log while another log cannot
# be listed (an orphaned pending-ack log, as on a real broker whose topics were deleted), or its own log that
# cannot be listed again, which leaves nothing to tell a trim from a failure.
SECOND_LOOKS = {  # which tasks the second listing keeps, given the victim (log, ledger); the exit code; gone
    "trimmed, another log unlisted": (lambda task, victim: task.ledger_id != victim[1], 0, 1),
    "its own log unlisted": (lambda task, victim: task.managed_ledger != victim[0], 3, 0),
}


@pytest.mark.parametrize("second_look", SECOND_LOOKS, ids=list(SECOND_LOOKS))
def test_a_ledger_trimmed_while_collecting_is_gone_not_failed(cli, fleet, monkeypatch, second_look):
    """The trim is made by hand: the listing taken after the failure leaves the ledger out, as a log that trimmed
    it meanwhile would (a busy pending-ack log trims its consumed ledgers, so one listed at the start may be gone
    by the time its shell runs)."""
    from pulsar_txn_cli.collect import plan

    keep, exit_code, gone = SECOND_LOOKS[second_look]
    log, victim = min(ledgers_of(fleet["dump"]), key=lambda key: key[1])
    real_plan, listings = plan.plan, []

    def second_look_differs(admin, concurrency):
        tasks, problems = real_plan(admin, concurrency)
        listings.append(len(tasks))
        if len(listings) == 1:
            return tasks, problems
        return [t for t in tasks if keep(t, (log, victim))], [*problems, "a log that cannot be listed"]

    monkeypatch.setattr(plan, "plan", second_look_differs)
    monkeypatch.setenv("STANDIN_FAIL", str(victim))
    result = cli(args(fleet, fleet["tmp"] / "out", "-o", "json"))
    assert result.exit_code == exit_code, result.stderr
    summary = result.json()
    failed = [f["ledgerId"] for f in summary["failed"]]
    assert (len(listings), failed, summary["goneBeforeRead"]) == (2, [victim] * (1 - gone), gone)
    assert summary["read"] == summary["ledgers"] - 1


def test_ctrl_c_keeps_the_completed_ledgers_and_the_next_run_finishes(fleet):
    out = fleet["tmp"] / "out"
    env = dict(os.environ, STANDIN_SLEEP="0.4")
    cmd = [sys.executable, "-m", "pulsar_txn_cli", *args(fleet, out, "--concurrency", "1")]
    proc = sigint.popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    done = out / "_collect" / "done.jsonl"
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and (not done.exists() or len(done.read_text().splitlines()) < 2):
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    kept = len(done.read_text().splitlines())
    total = len(ledgers_of(fleet["dump"]))
    assert 2 <= kept < total
    assert f"{kept} of {total} ledgers are complete" in err and "run the same command again" in err
    assert not list(out.rglob(".*.tmp"))  # no half-written dump left behind
    assert len(list(out.rglob("ledger-*.jsonl"))) == kept
    finish = subprocess.run(
        cmd[:-2] + ["-o", "json"], env=dict(os.environ), capture_output=True, text=True, timeout=120
    )
    assert finish.returncode == 0, finish.stderr
    assert len(list(out.rglob("ledger-*.jsonl"))) == total


def test_entries_without_headers_are_refused_not_guessed(cli, fleet, monkeypatch):
    monkeypatch.setenv("STANDIN_NO_HEADERS", "1")
    result = cli(args(fleet, fleet["tmp"] / "out", "-o", "json"))
    assert result.exit_code == 3
    errors = {f["error"] for f in result.json()["failed"]}
    assert errors and all("headers" in e and "INFO" in e for e in errors), errors


def test_the_embedded_engine_is_refused_with_a_pointer(cli, tmp_path):
    simulate_into(tmp_path / "engine", transactions=2, seed=1)
    result = cli(
        [
            "collect",
            "--engine-dir",
            str(tmp_path / "engine"),
            "--out",
            str(tmp_path / "out"),
            "--bookkeeper-shell",
            "/bin/true",
        ]
    )
    assert result.exit_code == 2
    assert "engine dump --log all" in result.stderr
    assert_no_crash(result)


@pytest.mark.parametrize(
    "extra, message",
    [
        ([], "give --bookkeeper-shell PATH"),
        (["--bookkeeper-shell", "/nonexistent/bookkeeper"], "no such executable file"),
        (["--bookkeeper-shell", "/bin/true", "--concurrency", "0"], "--concurrency must be at least 1"),
    ],
)
def test_bad_options_are_one_sentence_and_exit_2(cli, fleet, extra, message):
    result = cli(
        [
            "collect",
            "--admin-url",
            fleet["url"],
            "--out",
            str(fleet["tmp"] / "out"),
            "--metadata-service-uri",
            URI,
            *extra,
        ]
    )
    assert result.exit_code == 2, result.stdout + result.stderr
    assert message in result.stderr
    assert_no_crash(result)


def test_a_directory_of_another_cluster_is_refused(cli, fleet):
    out = fleet["tmp"] / "out"
    (out / "_collect").mkdir(parents=True)
    (out / "_collect" / "collect.json").write_text('{"identity": "cluster other http://elsewhere:8080"}')
    result = cli(args(fleet, out))
    assert result.exit_code == 2 and "another cluster" in result.stderr


def test_the_metadata_service_uri_comes_from_the_brokers_configuration():
    from pulsar_txn_cli.collect.metadata import from_store_url, service_uri
    from pulsar_txn_cli.errors import UsageError

    real = json.loads(
        (Path(__file__).parents[1] / "fixtures/real/rest/brokers_configuration_runtime.json").read_text()
    )["body"]
    assert service_uri(real) == "zk+null://localhost:50559/ledgers"  # a real 4.0.7 broker's answer
    assert service_uri({"bookkeeperMetadataServiceUri": "zk://zk1:2181/ledgers"}) == "zk://zk1:2181/ledgers"
    assert from_store_url("zk:a:2181,b:2181/pulsar") == "zk+null://a:2181;b:2181/pulsar/ledgers"
    assert from_store_url("a:2181") == "zk+null://a:2181/ledgers"
    for bad in ({"metadataStoreUrl": "etcd:http://e:2379"}, {}):
        with pytest.raises(UsageError, match="--metadata-service-uri"):
            service_uri(bad)


def test_a_shell_that_hangs_is_stopped_at_the_ledger_timeout(cli, fleet, monkeypatch):
    monkeypatch.setenv("STANDIN_SLEEP", "30")
    t0 = time.monotonic()
    result = cli(args(fleet, fleet["tmp"] / "out", "--ledger-timeout", "1", "--concurrency", "8", "-o", "json"))
    assert result.exit_code == 3 and time.monotonic() - t0 < 20
    failed = result.json()["failed"]
    assert failed and all("did not finish within 1 s" in f["error"] for f in failed)
    assert list((fleet["tmp"] / "out").rglob("*.jsonl*")) == []  # no dump, no temporary file, nothing recorded


def test_a_dump_that_cannot_be_written_is_a_failed_ledger_not_a_traceback(cli, fleet):
    from urllib.parse import quote

    out = fleet["tmp"] / "out"
    out.mkdir()
    blocked = "pulsar/system/persistent/__transaction_log_0"
    (out / quote(blocked, safe="")).write_text("a file where the ledgers' directory would go")
    result = cli(args(fleet, out, "-o", "json"))
    assert result.exit_code == 3
    assert_no_crash(result)
    failed = result.json()["failed"]
    assert failed and {f["managedLedger"] for f in failed} == {blocked}
    assert all("cannot write its dump" in f["error"] for f in failed)


def test_parquet_dumps_analyze_like_the_jsonl_ones_and_resume(cli, fleet):
    out = fleet["tmp"] / "out"
    result = cli(args(fleet, out, "--format", "parquet", "-o", "json"))
    assert result.exit_code == 0, result.stderr
    summary = result.json()
    assert summary["format"] == "parquet" and summary["read"] == len(ledgers_of(fleet["dump"]))
    files = sorted(out.rglob("ledger-*"))
    assert len(files) == summary["read"] and all(
        f.suffix == ".parquet" and f.read_bytes()[:4] == b"PAR1" for f in files
    )
    assert not [f for f in out.rglob("*") if f.name.startswith(".")]  # no temporary file left behind
    report = cli(["analyze", str(out), "--engine", "local", "-o", "json"]).json()
    direct = cli(["analyze", str(fleet["dump"]), "--engine", "local", "-o", "json"]).json()
    assert report["totals"] == direct["totals"] and report["totals"]["batchedEntries"] > 0
    fleet["calls"].unlink()
    again = cli(args(fleet, out, "--format", "parquet", "-o", "json")).json()
    open_ledgers = {
        r["ledgerId"] for r in map(json.loads, (out / "_collect" / "done.jsonl").read_text().splitlines()) if r["open"]
    }
    assert set(calls(fleet)) == open_ledgers and again["alreadyCollected"] == again["ledgers"] - len(open_ledgers)
    # the other format into the same directory would mix two collections: refused, nothing read
    fleet["calls"].unlink()
    mixed = cli(args(fleet, out, "--format", "jsonl"))
    assert mixed.exit_code == 2 and "holds a parquet collection; give --format parquet" in mixed.stderr
    assert calls(fleet) == []


def test_a_spark_that_cannot_start_for_an_s3a_destination_is_one_sentence(cli, fleet):
    result = cli(args(fleet, "s3a://bucket/fleet", "--spark-conf", "spark.driver.memory=plenty"))
    assert result.exit_code == 2, result.stdout + result.stderr
    assert "cannot start Spark (local[1]): " in result.stderr and "Spark's own log" in result.stderr
    assert_no_crash(result)
    assert calls(fleet) == []
