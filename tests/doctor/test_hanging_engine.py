"""find-hanging and abort-hanging on the engine: ages, filters, dry run, confirmation, audit, Ctrl-C."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from pulsar_txn_cli.engine.broker import Engine
from tests import sigint
from tests.conftest import isolate
from tests.doctor.helpers import TOPIC0, advance, doctor

pytestmark = pytest.mark.timeout(300)
TOPIC1 = "persistent://public/default/sim-topic-1"


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


def _open(engine, tc_id: int, topic: str, timeout_ms: int = 3_600_000) -> str:
    tc = engine.tc(tc_id)
    got = []
    tc.new_transaction(timeout_ms, got.append)
    engine.checkpoint()
    tc.add_partitions(got[0], [topic], lambda pos: None)
    engine.checkpoint()
    engine.buffers.produce(topic, (tc_id, got[0]))
    engine.checkpoint()
    return f"({tc_id},{got[0]})"


@pytest.fixture
def aged(tmp_path):
    """24 open transactions, one opened every minute, over two coordinators and two topics."""
    directory = tmp_path / "engine"
    engine = Engine.init(directory, coordinators=2)
    engine.register_topic(TOPIC0, 0)
    engine.register_topic(TOPIC1, 0)
    opened = []
    for i in range(24):
        opened.append((_open(engine, i % 2, TOPIC0 if i % 3 else TOPIC1), 24 - i))  # (id, minutes old at the end)
        with engine.store.tx():
            engine.clock.advance_ms(60_000)
    engine.close()
    return directory, opened


def test_find_hanging_lists_exactly_those_past_the_bound(cli, aged):
    directory, opened = aged
    result = cli(["find-hanging", "--older-than", "10m", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    found = result.json()["transactions"]
    expected = {txn for txn, minutes in opened if minutes * 60_000 > 10 * 60_000}
    assert {t["txnId"] for t in found} == expected and len(expected) == 14
    assert [t["ageMs"] for t in found] == sorted((t["ageMs"] for t in found), reverse=True)  # oldest first
    first = found[0]
    assert first["ownerBroker"] == "http://localhost:8080" and first["timeoutMs"] == 3_600_000
    assert first["producedPartitions"] and first["pastTimeout"] is False
    assert any(t["readersHeld"] for t in found)


def test_find_hanging_filters(cli, aged):
    directory, opened = aged
    base = ["find-hanging", "--older-than", "1s", "--engine-dir", directory, "-o", "json"]
    by_tc = cli(base + ["--coordinator-id", "1"]).json()["transactions"]
    assert by_tc and {t["coordinatorId"] for t in by_tc} == {1}
    by_topic = cli(base + ["-t", "sim-topic-1"]).json()["transactions"]
    assert by_topic and all(t["producedPartitions"] == [TOPIC1] for t in by_topic)
    assert cli(base + ["--state", "COMMITTING"]).json()["transactions"] == []
    bad = cli(base + ["--state", "LIMBO"])
    assert bad.exit_code == 2 and "LIMBO" in bad.stderr
    bad = cli(["find-hanging", "--older-than", "soon", "--engine-dir", directory])
    assert bad.exit_code == 2 and "--older-than" in bad.stderr


def test_abort_hanging_dry_run_then_execute_with_audit(cli, aged, tmp_path):
    directory, opened = aged
    base = ["abort-hanging", "--older-than", "20m", "--engine-dir", directory]
    dry = cli(base + ["-o", "json"])
    assert dry.exit_code == 0, dry.stderr
    would = [t["txnId"] for t in dry.json()["transactions"]]
    assert dry.json()["dryRun"] is True and len(would) == 4
    table = cli(base)
    assert "dry run: would abort 4 transactions" in table.stdout
    assert all(txn in table.stdout for txn in would)
    # nothing was aborted by the dry run
    assert {
        t["txnId"]
        for t in cli(["find-hanging", "--older-than", "20m", "--engine-dir", directory, "-o", "json"]).json()[
            "transactions"
        ]
    } == set(would)
    no_tty = cli(base + ["--execute"])
    assert no_tty.exit_code == 2 and "--yes" in no_tty.stderr
    assert cli(base + ["--yes"]).exit_code == 2
    done = cli(base + ["--execute", "--yes", "--reason", "INC-42 readers stuck", "-o", "json"])
    assert done.exit_code == 0, done.stderr
    results = done.json()["results"]
    assert sorted(r["txnId"] for r in results) == sorted(would) and all(r["aborted"] for r in results)
    assert all(f"aborted {txn}" in done.stderr for txn in would)
    left = cli(["find-hanging", "--older-than", "1s", "--engine-dir", directory, "-o", "json"]).json()["transactions"]
    assert not set(would) & {t["txnId"] for t in left} and len(left) == 20
    # the audit: one line per transaction, who and why, listed by `state list`
    audit = Path(done.json()["audit"])
    lines = [json.loads(line) for line in audit.read_text().splitlines()]
    assert sorted(r["txnId"] for r in lines) == sorted(would)
    assert all(r["why"] == "INC-42 readers stuck" and "@" in r["by"] and r["aborted"] for r in lines)
    assert str(tmp_path / "state") in str(audit)
    listed = cli(["state", "list", "-o", "json"]).json()
    [row] = [r for r in listed if r["kind"] == "abort audit"]
    assert row["file"] == str(audit) and row["detail"].startswith("4 transactions aborted")
    # appended to, never rewritten
    cli(["abort-hanging", "--older-than", "15m", "--execute", "--yes", "--engine-dir", directory])
    assert len(audit.read_text().splitlines()) == 4 + 5


def test_abort_hanging_nothing_to_do(cli, aged):
    directory, _ = aged
    result = cli(["abort-hanging", "--older-than", "2h", "--execute", "--yes", "--engine-dir", directory, "-o", "json"])
    assert result.exit_code == 0 and result.json()["results"] == [] and "nothing to abort" in result.stderr


def test_pre_3_2_brokers_have_no_abort_endpoint():
    from pulsar_txn_cli.doctor.hanging import AbortUnsupported, check_abort_supported
    from pulsar_txn_cli.transaction_ends import abort_fix

    check_abort_supported(["3.2.0", "4.0.7"])
    with pytest.raises(AbortUnsupported) as raised:
        check_abort_supported(["3.0.5", "4.0.7"])
    assert "3.2" in str(raised.value) and "unload" in str(raised.value) and raised.value.exit_code == 2
    assert abort_fix("(3,9)", ["2.10.5"]) == ["pulsar-txn unload --coordinator 3 --yes"]
    assert abort_fix("(3,9)", ["4.0.7"]) == ["pulsar-txn abort-transaction -m 3 -l 9 --yes"]


def test_interrupted_simulate_leaves_a_hanging_transaction(cli, tmp_path):
    """Ctrl-C in the middle of `engine simulate` leaves transactions open: find-hanging and doctor name them."""
    directory = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", directory]).exit_code == 0
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    proc = sigint.popen(
        [sys.executable, "-m", "pulsar_txn_cli", "engine", "simulate", "--engine-dir", str(directory),
         "-n", "2000000", "--txn-timeout-ms", "3600000", "--ack-log", str(tmp_path / "acks")],
        env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        deadline = time.monotonic() + 120
        while (
            time.monotonic() < deadline
            and len((tmp_path / "acks").read_text().splitlines() if (tmp_path / "acks").exists() else []) < 200
        ):
            time.sleep(0.2)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=120)
    finally:
        proc.kill()  # a run that failed never leaves a two-million-transaction workload behind
    assert proc.returncode == 130, err.decode()
    acked = (tmp_path / "acks").read_text().splitlines()
    new = {tuple(line.split()[1:]) for line in acked if line.startswith("new ")}
    ended = {tuple(line.split()[1:]) for line in acked if line.startswith("end ")}
    assert new - ended, "the workload ended every transaction before Ctrl-C; nothing to find"
    advance(cli, directory, "10m")
    found = cli(["find-hanging", "--older-than", "5m", "--engine-dir", directory, "-o", "json"])
    assert found.exit_code == 0, found.stderr
    ids = {t["txnId"] for t in found.json()["transactions"]}
    open_now = {f"({tc},{least})" for tc, least in new - ended}
    # A NEW whose commit finished just before Ctrl-C, but whose acknowledgement never ran, is durable and
    # open too (a broker that crashes between its bookie write and its answer keeps it as well): it is the
    # coordinator's request in flight, newer than every NEW it acknowledged.
    last_acked = {}
    for tc, least in new:
        last_acked[tc] = max(last_acked.get(tc, -1), int(least))
    in_flight = {
        t for t in ids - {f"({tc},{least})" for tc, least in new}
        if int(t.strip("()").split(",")[1]) > last_acked.get(t.strip("()").split(",")[0], -1)
    }  # fmt: skip
    assert ids and ids <= open_now | {f"({tc},{least})" for tc, least in new} | in_flight
    code, report = doctor(cli, directory, "--older-than", "5m")
    named = {t for f in report["findings"] if f["check"] == "hanging-transaction" for t in f["txnIds"]}
    assert named == ids and code in (5, 6)


def test_abort_hanging_jsonl_marks_every_line_dry_run_or_not(cli, aged):
    directory, _ = aged
    base = ["abort-hanging", "--older-than", "20m", "--engine-dir", directory, "-o", "jsonl"]
    dry = cli(base)
    assert dry.exit_code == 0, dry.stderr
    lines = [json.loads(line) for line in dry.stdout.splitlines()]
    assert len(lines) == 4 and all(line["dryRun"] is True for line in lines)
    done = cli([*base, "--execute", "--yes"])
    lines = [json.loads(line) for line in done.stdout.splitlines()]
    assert len(lines) == 4 and all(line["dryRun"] is False and line["aborted"] for line in lines)


def test_the_audit_is_private_and_outlives_reset_and_prune_all(cli, aged, tmp_path):
    directory, _ = aged
    os.umask(0o022)  # the usual umask: a plain open() would make the audit readable by everyone
    done = cli(["abort-hanging", "--older-than", "20m", "--execute", "--yes", "--engine-dir", directory, "-o", "json"])
    audit = Path(done.json()["audit"])
    assert oct(audit.stat().st_mode & 0o777) == oct(0o600)
    audit.chmod(0o644)  # written by an older version: made private again by the next append
    cli(["abort-hanging", "--older-than", "15m", "--execute", "--yes", "--engine-dir", directory])
    assert oct(audit.stat().st_mode & 0o777) == oct(0o600)
    before = audit.read_text()
    identity = cli(["state", "list", "-o", "json"]).json()[0]["identity"]

    reset = cli(["engine", "reset", "--yes", "--engine-dir", directory, "-o", "json"])
    assert reset.exit_code == 0, reset.stderr
    assert reset.json()["kept"] == [str(audit)] and audit.read_text() == before
    assert f"kept the abort audit {audit}" in reset.stderr and "--include-audit" in reset.stderr
    pruned = cli(["state", "prune", "--all", "-o", "json"])
    assert pruned.exit_code == 0 and pruned.json() == [] and audit.read_text() == before
    assert "forgot 0 records" in pruned.stderr and f"kept the abort audit {audit}" in pruned.stderr
    assert cli(["state", "prune", identity, "-o", "json"]).json() == [] and audit.exists()

    gone = cli(["state", "prune", identity, "--include-audit", "-o", "json"])
    assert [r["file"] for r in gone.json()] == [str(audit)] and not audit.exists()
    assert not list((tmp_path / "state").rglob("*.lock"))  # no empty lock file left beside the records
