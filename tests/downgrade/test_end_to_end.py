"""`downgrade check` and `upgrade check` end to end on the embedded engine, through both backends:
in process (--engine-dir) and over HTTP (engine/server.py, --admin-url)."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests import sigint
from tests.conftest import assert_no_crash, isolate

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.simulate import SimOptions, simulate

SMALL_LEDGERS = {
    "managedLedgerMaxEntriesPerLedger": "20",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "transactionPendingAckLogIndexMinLag": "20",
}
SWITCHES = ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log")
MAX_ROUNDS = 8


@pytest.fixture(autouse=True)
def isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


class Backend:
    """An engine with small ledgers, reached in process or over HTTP."""

    def __init__(self, kind: str, tmp_path: Path, coordinators: int = 2):
        self.kind = kind
        self.dir = tmp_path / "engine"
        self.checkpoint = tmp_path / "checkpoint.json"
        engine = Engine.init(self.dir, coordinators=coordinators)
        for key, value in SMALL_LEDGERS.items():
            engine.config.set(key, value)
        # A cluster in use before the upgrade (this also moves the engine's virtual clock, so the
        # stores reopened by the switches below get open times of their own).
        simulate(engine, SimOptions(transactions=50, subscriptions=4, topics=2, seed=100))
        engine.close()
        self.engine = self.server = None
        if kind == "http":
            from pulsar_txn_cli.engine import server

            self.engine = Engine.open(self.dir)
            self.server = server.start(engine=self.engine)
        self.seed = 0

    @property
    def target(self) -> list[str]:
        return ["--admin-url", self.server.url] if self.server else ["--engine-dir", str(self.dir)]

    def workload(self, transactions: int = 150, subscriptions: int = 4) -> None:
        self.seed += 1
        opts = SimOptions(transactions=transactions, subscriptions=subscriptions, topics=2, seed=self.seed)
        if self.engine is not None:
            simulate(self.engine, opts)
        else:
            with Engine.open(self.dir) as engine:
                simulate(engine, opts)

    def close(self) -> None:
        if self.server:
            self.server.close()
        if self.engine:
            self.engine.close()


@pytest.fixture(params=["engine", "http"])
def backend(request, tmp_path):
    b = Backend(request.param, tmp_path)
    yield b
    b.close()


def switch(cli, b: Backend, on: bool, reload: bool = True, force: bool = False) -> None:
    for name in SWITCHES:
        args = [name, "--enable" if on else "--disable", *(["--reload", "--yes"] if reload else []), *b.target]
        args += ["--force"] if force else []
        result = cli(args)
        assert result.exit_code == 0, result.stderr


def check(cli, b: Backend, *extra):
    result = cli(["downgrade", "check", *b.target, "--checkpoint", b.checkpoint, "-o", "json", *extra])
    assert_no_crash(result)
    return result


def drained(cli, b: Backend):
    """Batching used, then disabled and reloaded; returns the first check (WAIT)."""
    switch(cli, b, True)
    b.workload()
    switch(cli, b, False)
    first = check(cli, b)
    assert first.exit_code == 5, first.stdout + first.stderr
    return first


def until_safe(cli, b: Backend, **workload):
    checks = []
    for _ in range(MAX_ROUNDS):
        b.workload(**workload)
        result = check(cli, b)
        checks.append(result)
        if result.exit_code != 5:
            break
    return checks


def recorded(doc: dict) -> dict:
    return {
        **{("tc", c["coordinatorId"]): c["lastBatchedLedgerId"] for c in doc["coordinators"]},
        **{(s["topic"], s["subscription"]): s["lastBatchedLedgerId"] for s in doc["subscriptions"]},
    }


# -- verdicts ------------------------------------------------------------------------------------


def test_blocked_while_batching_is_on(cli, backend):
    switch(cli, backend, True)
    backend.workload()
    result = check(cli, backend)
    assert result.exit_code == 6
    doc = result.json()
    assert doc["verdict"] == "BLOCKED" and doc["target"].endswith((str(backend.dir), backend.target[1]))
    # the fix carries the target, so pasting it acts here and not on the default engine
    target = " ".join(str(a) for a in backend.target)
    assert f"pulsar-txn set-txn-tc-batch-log --disable --reload --yes {target}" in doc["fixes"]
    # That check started the downgrade: no ledger is recorded while batching is on, but `doctor` and the
    # switches now know a downgrade is under way on this target.
    saved = json.loads(backend.checkpoint.read_text())
    assert (saved["coordinators"], saved["subscriptions"]) == ([], [])


def test_blocked_when_disabled_but_not_reloaded(cli, backend):
    switch(cli, backend, True)
    backend.workload()
    switch(cli, backend, False, reload=False)
    result = check(cli, backend)
    assert result.exit_code == 6
    doc = result.json()
    assert any("still batching" in p for p in doc["problems"]), doc["problems"]
    # the tool's own unload, with the target it was printed for: it works as printed on every kind of target
    target = " ".join(str(a) for a in backend.target)
    assert any(f.startswith("pulsar-txn unload ") and f.endswith(target) for f in doc["fixes"]), doc["fixes"]
    assert not any("pulsar-admin" in f for f in doc["fixes"]), doc["fixes"]


def test_wait_then_safe_with_ledgers_trimmed_between_checks(cli, backend):
    first = drained(cli, backend).json()
    assert first["newlyRecorded"] == len(first["coordinators"]) + len(first["subscriptions"]) > 2
    assert not any(item["clear"] for item in first["coordinators"] + first["subscriptions"])
    checks = until_safe(cli, backend)
    last = checks[-1]
    assert last.exit_code == 0, last.stdout
    doc = last.json()
    assert doc["verdict"] == "SAFE" and doc["problems"] == []
    assert recorded(doc) == recorded(first)  # the records were kept, not retaken
    for before, after in zip(first["coordinators"], doc["coordinators"]):
        assert after["oldestLedgerId"] > before["oldestLedgerId"]  # trimmed between the checks
        assert after["oldestLedgerId"] > after["lastBatchedLedgerId"] and after["clear"]
    status = cli(["downgrade", "status", *backend.target, "--checkpoint", backend.checkpoint, "-o", "json"])
    assert status.exit_code == 0 and len(status.json()["coordinators"]) == len(doc["coordinators"])


def test_table_output_names_the_target(cli, backend):
    drained(cli, backend)
    result = cli(["downgrade", "check", *backend.target, "--checkpoint", backend.checkpoint])
    assert result.exit_code == 5
    line = result.stdout.strip().splitlines()[-1]
    assert line.startswith("WAIT: ") and (str(backend.dir) in line or backend.target[1] in line)
    assert "COORDINATOR" in result.stdout


def test_subscriptions_appearing_midway_are_recorded_when_first_seen(cli, backend):
    first = drained(cli, backend).json()
    known = {(s["topic"], s["subscription"]) for s in first["subscriptions"]}
    backend.workload(subscriptions=8)
    second = check(cli, backend)
    assert second.exit_code == 5
    doc = second.json()
    new = [s for s in doc["subscriptions"] if (s["topic"], s["subscription"]) not in known]
    assert new and doc["newlyRecorded"] == len(new)
    assert all(not s["clear"] for s in new)
    saved = json.loads(backend.checkpoint.read_text())
    times = {(s["topic"], s["subscription"]): s["recordedAt"] for s in saved["subscriptions"]}
    assert min(times[(s["topic"], s["subscription"])] for s in new) >= max(times[k] for k in known)
    assert until_safe(cli, backend, subscriptions=8)[-1].exit_code == 0


def test_upgrade_check(cli, backend):
    result = cli(["upgrade", "check", *backend.target, "-o", "json"])
    assert result.exit_code == 5 and result.json()["verdict"] == "INCOMPLETE"
    switch(cli, backend, True)
    backend.workload()
    result = cli(["upgrade", "check", *backend.target, "-o", "json"])
    assert result.exit_code == 0, result.stdout
    doc = result.json()
    assert doc["verdict"] == "COMPLETE" and doc["brokers"] and all(b["version"] for b in doc["brokers"])


# -- --verify-entries -----------------------------------------------------------------------------


def _dump(b: Backend, path: Path) -> None:
    from pulsar_txn_cli.engine import dump

    def write(engine):
        path.write_text(
            "".join(
                line if line.endswith("\n") else line + "\n" for line in dump.lines(engine, dump.select(engine, None))
            )
        )

    if b.engine is not None:
        write(b.engine)
    else:
        with Engine.open(b.dir) as engine:
            write(engine)


@pytest.mark.slow
def test_verify_entries_agrees_with_a_safe_verdict_and_catches_a_planted_batch(cli, backend, tmp_path):
    from pulsar_txn_cli import codec
    from pulsar_txn_cli.codec.dumps import dump_line

    drained(cli, backend)
    safe = until_safe(cli, backend)[-1]
    assert safe.exit_code == 0
    dump = tmp_path / "remaining.jsonl"
    _dump(backend, dump)
    verified = check(cli, backend, "--verify-entries", dump)
    assert verified.exit_code == 0, verified.stdout
    tc0 = safe.json()["coordinators"][0]
    planted = tmp_path / "planted.jsonl"
    batch = codec.encode_batch([codec.TcRecord(metadata_op=0, txnid_most_bits=0, txnid_least_bits=i) for i in range(2)])
    planted.write_text(
        dump_line("pulsar/system/persistent/__transaction_log_0", tc0["oldestLedgerId"], 0, batch) + "\n"
    )
    result = check(cli, backend, "--verify-entries", planted)
    assert result.exit_code == 6
    assert any(f"ledger {tc0['oldestLedgerId']} of coordinator 0" in p for p in result.json()["problems"])


# -- failures ------------------------------------------------------------------------------------


def test_unreachable_target_is_a_connection_error(cli, tmp_path):
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    result = cli(
        [
            "downgrade",
            "check",
            "--admin-url",
            f"http://127.0.0.1:{port}",
            "--checkpoint",
            tmp_path / "cp.json",
            "--request-timeout",
            "2",
        ]
    )
    assert result.exit_code == 4
    assert_no_crash(result)
    assert not (tmp_path / "cp.json").exists()


@pytest.mark.slow
def test_a_failing_endpoint_turns_safe_into_wait(cli, tmp_path):
    """A real proxy in front of the served engine answers 500 for the pending-ack ledger lists."""
    b = Backend("http", tmp_path)
    try:
        drained(cli, b)
        assert until_safe(cli, b)[-1].exit_code == 0
        with _failing_proxy(b.server.url, "/pendingAckInternalStats/") as url:
            # The proxy is another URL of the same engine: the records (the checkpoint, and the
            # moments of the batch-log changes) are the engine's, whatever the URL.
            result = cli(["downgrade", "check", "--admin-url", url, "--checkpoint", b.checkpoint, "-o", "json"])
        assert result.exit_code == 5
        doc = result.json()
        assert doc["verdict"] == "WAIT"
        assert all(not s["clear"] and "500" in s["reason"] for s in doc["subscriptions"])
    finally:
        b.close()


class _failing_proxy:
    """Forwards to the engine server, except paths containing `fail` get HTTP 500."""

    def __init__(self, upstream: str, fail: str):
        self.upstream, self.fail = upstream, fail

    def __enter__(self) -> str:
        import threading
        import urllib.request
        from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

        upstream, fail = self.upstream, self.fail

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                if fail in self.path:
                    body = b'{"reason": "deliberately broken"}'
                    self.send_response(500)
                else:
                    with urllib.request.urlopen(upstream + self.path, timeout=10) as answer:
                        body = answer.read()
                    self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        threading.Thread(target=self.httpd.serve_forever, daemon=True).start()
        return f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def __exit__(self, *exc):
        self.httpd.shutdown()
        self.httpd.server_close()


# -- other processes ------------------------------------------------------------------------------


def _subprocess(args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli", *map(str, args)],
        capture_output=True,
        text=True,
        env=os.environ.copy(),
        timeout=120,
        **kw,
    )


@pytest.mark.slow
def test_a_new_process_resumes_from_the_checkpoint(cli, tmp_path):
    b = Backend("engine", tmp_path)
    switch(cli, b, True)
    b.workload()
    switch(cli, b, False)
    first = _subprocess(["downgrade", "check", *b.target, "-o", "json"])  # default checkpoint location
    assert first.returncode == 5, first.stderr
    status = _subprocess(["downgrade", "status", *b.target, "-o", "json"])
    saved = json.loads(status.stdout)
    assert saved["exists"] and len(saved["coordinators"]) == 2
    for _ in range(MAX_ROUNDS):
        b.workload()
        last = _subprocess(["downgrade", "check", *b.target, "-o", "json"])
        if last.returncode != 5:
            break
    assert last.returncode == 0, last.stdout
    assert recorded(json.loads(last.stdout)) == recorded(json.loads(first.stdout))
    # The batched-ledger records never change (the cursor each record last saw moves with the log).
    ledger_records = lambda rows: [(r["coordinatorId"], r["lastBatchedLedgerId"], r["recordedAt"]) for r in rows]  # noqa: E731
    final = json.loads(_subprocess(["downgrade", "status", *b.target, "-o", "json"]).stdout)["coordinators"]
    assert ledger_records(final) == ledger_records(saved["coordinators"])


@pytest.mark.slow
def test_interrupted_wait_leaves_the_checkpoint_intact(cli, tmp_path):
    b = Backend("engine", tmp_path)
    switch(cli, b, True)
    b.workload()
    switch(cli, b, False)
    proc = sigint.popen(
        [
            sys.executable,
            "-m",
            "pulsar_txn_cli",
            "downgrade",
            "check",
            *b.target,
            "--checkpoint",
            str(b.checkpoint),
            "--wait",
            "--interval",
            "1",
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=os.environ.copy(),
    )
    try:
        deadline = time.monotonic() + 60
        while not b.checkpoint.exists() and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert b.checkpoint.exists(), "the first check never saved its records"
        before = b.checkpoint.read_bytes()
        time.sleep(0.5)  # let it be in a later check or asleep between checks
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, err
    assert "interrupted" in err
    assert_no_crash(proc.returncode, err)
    assert b.checkpoint.read_bytes() == before
    assert not [p for p in b.checkpoint.parent.iterdir() if p.name.endswith(".tmp")]


# -- demo ------------------------------------------------------------------------------------------


def test_demo_walks_from_wait_to_safe_and_leaves_the_engine(cli, tmp_path):
    directory = tmp_path / "demo"
    result = cli(["demo", "--dir", directory, "--transactions", "200"])
    assert result.exit_code == 0, result.stdout + result.stderr
    out = result.stdout
    assert "WAIT: " in out and "SAFE: " in out and out.index("WAIT: ") < out.index("SAFE: ")
    assert str(directory) in out
    status = cli(["downgrade", "status", "--engine-dir", directory, "-o", "json"])
    assert status.exit_code == 0 and status.json()["exists"]
    again = cli(["demo", "--dir", directory])
    assert again.exit_code == 2 and "already holds an engine" in again.stderr


@pytest.mark.parametrize("transactions,coordinators", [(10, 1), (10, 64), (100, 64)])
def test_demo_reaches_safe_at_the_edges_of_its_options(cli, tmp_path, transactions, coordinators):
    """The fewest transactions a round, the most coordinators: every log still fills a ledger, so the
    story ends at SAFE (it ended at WAIT, exit 5, when a round was too small for so many logs)."""
    result = cli(
        ["demo", "--dir", tmp_path / "d", "--transactions", transactions, "--coordinators", coordinators, "-o", "json"]
    )
    assert result.exit_code == 0, result.stderr
    summary = result.json()
    assert summary["verdict"] == "SAFE"
    checks = [s for s in summary["steps"] if s["step"] == "downgrade check"]
    assert checks[0]["verdict"] == "WAIT" and checks[-1] == {**checks[-1], "verdict": "SAFE"}
    assert checks[-1]["clear"] == checks[-1]["logs"] == coordinators + 8  # every coordinator and subscription


def test_demo_takes_engine_dir_as_its_directory_and_refuses_a_cluster(cli, tmp_path):
    directory = tmp_path / "named"
    result = cli(["--engine-dir", directory, "demo", "--transactions", "60", "--coordinators", "1"])
    assert result.exit_code == 0, result.stderr
    assert (directory / "engine.db").exists() and str(directory) in result.stdout
    both = cli(["--engine-dir", tmp_path / "a", "demo", "--dir", tmp_path / "b"])
    assert both.exit_code == 2 and "name two directories" in both.stderr
    cluster = cli(["--admin-url", "http://localhost:1", "demo"])
    assert cluster.exit_code == 2 and "--admin-url does not apply" in cluster.stderr


# -- the batch-index deletion stall on the engine ------------------------------------------------------------------


@pytest.mark.slow
@pytest.mark.parametrize("batch_index", [False, True])
def test_transactions_open_across_the_switch(cli, tmp_path, batch_index):
    """The real broker's finding, on the engine: without batch-index acknowledgements the TC log's
    cursor stays pinned for good after transactions open across the switch end; with them it drains."""
    b = Backend("engine", tmp_path, coordinators=1)
    if batch_index:
        with Engine.open(b.dir) as engine:
            engine.config.set("acknowledgmentAtBatchIndexLevelEnabled", "true")  # read when the TC reopens
    switch(cli, b, True)
    b.workload()
    opened = []
    with Engine.open(b.dir) as engine:
        tc = engine.tc(0)
        for _ in range(5):  # five NEW records flushed together: one batched entry
            tc.new_transaction(3_600_000, opened.append)
        engine.checkpoint()
    assert len(opened) == 5
    # Without batch-index acknowledgements the switch is refused (it would pin the log): forced here.
    switch(cli, b, False, force=not batch_index)
    first = check(cli, b)
    # With batch-index deletion off the stall is certain once they end: BLOCKED now, while they are
    # still open and the operator can prevent it; with it on, they only need to end.
    assert first.exit_code == (5 if batch_index else 6), first.stdout
    b.workload()
    second = check(cli, b)
    assert second.exit_code == (5 if batch_index else 6)
    tc0 = second.json()["coordinators"][0]
    if batch_index:
        assert tc0["cause"] == "open-transaction" and "5 open transaction(s)" in tc0["reason"]
    else:
        assert tc0["cause"] == "open-across-switch" and "5 transaction(s) open since before" in tc0["reason"]
        assert second.json()["fixes"][:2] == [
            f"pulsar-txn engine config set acknowledgmentAtBatchIndexLevelEnabled true --engine-dir {b.dir}",
            f"pulsar-txn engine reload --engine-dir {b.dir}",
        ]
        assert "pinned for good" in tc0["advice"]
    with Engine.open(b.dir) as engine:
        for least in opened:
            engine.abort_transaction(0, least)
    last = until_safe(cli, b)[-1]
    if batch_index:
        assert last.exit_code == 0, last.stdout
    else:
        assert last.exit_code == 6, last.stdout  # BLOCKED: --wait stops here, an operator must act
        tc0 = last.json()["coordinators"][0]
        # The cursor stays pinned for good. (The engine rebuilds a coordinator's transactions from its
        # log when it reopens, so the undeletable NEW records may bring the aborted transactions back as
        # open: the cause shows as open-across-switch there, as after a TC reload on a broker.)
        assert tc0["cause"] in ("batch-index-deletion", "open-across-switch"), tc0["reason"]
        assert "acknowledgmentAtBatchIndexLevelEnabled=true" in tc0["advice"]
        assert int(tc0["markDeletePosition"].split(":")[0]) <= tc0["lastBatchedLedgerId"]


def test_the_stalls_remedy_as_printed_ends_the_transactions_it_brings_back(cli, tmp_path):
    """The stall's fixes (batch-index acks on, a restart) bring its transactions back open, two hours old with a
    one-hour timeout; the reloaded coordinator aborts them at once, as a broker since 2.11.1 does (its timeout
    tracker starts once the replay is done), so the check after the fixes is a WAIT, not overdue aborts."""
    d = tmp_path / "engine"
    assert cli(["engine", "init", "--coordinators", "1", "--engine-dir", d]).exit_code == 0
    assert cli(["engine", "simulate", "-n", "40", "--engine-dir", d]).exit_code == 0
    for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert cli([command, "--enable", "--reload", "--yes", "--engine-dir", d]).exit_code == 0
    opened: list[int] = []
    with Engine.open(d) as engine:
        for _ in range(3):
            engine.tc(0).new_transaction(3_600_000, opened.append)
        engine.checkpoint()
    for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert cli([command, "--disable", "--reload", "--yes", "--force", "--engine-dir", d]).exit_code == 0
    assert cli(["engine", "advance", "2h", "--engine-dir", d]).exit_code == 0
    result = cli(["downgrade", "check", "-o", "json", "--engine-dir", d])
    doc = result.json()
    assert [i["cause"] for i in doc["coordinators"]] == ["batch-index-deletion"] and result.exit_code == 6, doc
    for fix in doc["fixes"]:
        argv = shlex.split(fix)
        assert argv[0] == "pulsar-txn" and cli(argv[1:]).exit_code == 0, fix
    with Engine.open(d) as engine:  # the fixes' restart replayed them and aborted them
        assert not set(opened) & set(engine.tc(0).txns), engine.tc(0).txns
    result = cli(["downgrade", "check", "-o", "json", "--engine-dir", d])
    doc = result.json()
    assert (result.exit_code, doc["verdict"], [i["cause"] for i in doc["coordinators"]]) == (5, "WAIT", [None]), doc


# -- --wait ----------------------------------------------------------------------------------------


def test_wait_gives_up_at_the_timeout_with_wait(cli, tmp_path):
    b = Backend("engine", tmp_path)
    drained(cli, b)
    result = cli(
        [
            "downgrade",
            "check",
            *b.target,
            "--checkpoint",
            b.checkpoint,
            "--wait",
            "--interval",
            "1",
            "--timeout",
            "0.2",
            "-o",
            "json",
        ]
    )
    assert result.exit_code == 5 and result.json()["verdict"] == "WAIT"
    assert "check 1: WAIT" in result.stderr


def test_wait_polls_until_safe(cli, tmp_path):
    """runner.wait with a real engine: between polls (instead of sleeping) the workload goes on."""
    from pulsar_txn_cli.admin import connect
    from pulsar_txn_cli.target.settings import TargetFlags
    from pulsar_txn_cli.downgrade import runner

    b = Backend("engine", tmp_path)
    drained(cli, b)
    admin = connect(TargetFlags(engine_dir=str(b.dir)))
    seen = []
    try:
        engine = admin.transport.engine

        def workload_instead_of_sleep(seconds):
            b.seed += 1
            simulate(engine, SimOptions(transactions=150, subscriptions=4, topics=2, seed=b.seed))

        result = runner.wait(
            admin,
            b.checkpoint,
            interval=30,
            timeout=None,
            sleep=workload_instead_of_sleep,
            on_check=lambda r, n, failure: seen.append(r.verdict.verdict),
        )
    finally:
        admin.close()
    assert result.verdict.verdict == "SAFE"
    assert seen[-1] == "SAFE" and set(seen[:-1]) == {"WAIT"} and len(seen) <= MAX_ROUNDS + 1
