"""The harness's retries are logged with their cause and counted in the run's summary (fast: no broker)."""

from __future__ import annotations

import subprocess
import sys
import time

import harness
import conftest as integration_conftest


class _Reporter:
    def __init__(self):
        self.lines: list[str] = []

    def write_sep(self, sep, title):
        self.lines.append(title)

    def write_line(self, line):
        self.lines.append(line)


def test_a_retry_is_logged_with_its_cause_and_counted_in_the_summary(monkeypatch, capsys):
    monkeypatch.setattr(harness, "RETRIES", [])
    monkeypatch.setattr(harness, "CURRENT_SET", [None])
    monkeypatch.setattr(harness, "STARTED", ["session"])
    harness.note_retry("session's workload run once more", "BKException: Bookie operation timeout\n  at x")
    assert "harness retry #1: session's workload run once more (cause: BKException: Bookie operation timeout at x)" in (
        capsys.readouterr().err
    )
    reporter = _Reporter()
    integration_conftest.pytest_terminal_summary(reporter)
    assert reporter.lines[:2] == [
        "harness retries: 1",
        "1. [session] session's workload run once more (cause: BKException: Bookie operation timeout at x)",
    ]


def test_a_run_that_started_brokers_says_it_retried_nothing(monkeypatch):
    monkeypatch.setattr(harness, "RETRIES", [])
    monkeypatch.setattr(harness, "STARTED", ["session"])
    reporter = _Reporter()
    integration_conftest.pytest_terminal_summary(reporter)
    assert reporter.lines == ["harness retries: 0"]


def test_the_first_line_with_the_cause_is_kept():
    text = "workload failed (exit 1):\nfoo\njava.util.concurrent.TimeoutException: subscribe\nbar"
    assert harness._first_line_with(text, "TimeoutException") == "java.util.concurrent.TimeoutException: subscribe"


DEADLOCKING_JAVA = """
public class Deadlock {
    static final Object dispatcher = new Object(), pendingAck = new Object();
    static void both(Object first, Object second) {
        synchronized (first) {
            try { Thread.sleep(200); } catch (InterruptedException e) { return; }
            synchronized (second) { }
        }
    }
    public static void main(String[] args) throws Exception {
        new Thread(() -> both(dispatcher, pendingAck), "dispatcher-thread").start();
        new Thread(() -> both(pendingAck, dispatcher), "bookkeeper-thread").start();
        System.out.println("started");
        Thread.sleep(60_000);
        System.exit(0);
    }
}
"""


def test_a_real_jvm_deadlock_is_found_and_named(tmp_path):
    """java_deadlock reads a real JVM's own report (jcmd), as the brokers' deadlock on 4.0.7 was found; a JVM
    without one reports None."""
    source = tmp_path / "Deadlock.java"
    source.write_text(DEADLOCKING_JAVA)
    proc = subprocess.Popen(["java", "-Xmx64m", str(source)], stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout.readline().strip() == "started"
        found = None
        for _ in range(40):  # until both threads hold their first lock
            found = harness.java_deadlock(proc.pid)
            if found:
                break
            time.sleep(0.25)
        assert found is not None and found.startswith("Java-level deadlock: "), found
        assert "dispatcher-thread waits for a Object" in found and "bookkeeper-thread waits for a Object" in found
    finally:
        proc.kill()
        proc.wait(10)
    assert harness.java_deadlock(proc.pid) is None  # gone: no report, no exception


class _StalledBroker(harness.PulsarBroker):
    """A stand-in for a standalone broker (no JVM): its log file is real, its workload is a real process
    that dies before holding, and a bookie stall is appended to the log while the first one runs."""

    def __init__(self, base, stall_during_run: bool):
        self.name, self.log_path, self.starts = "session", base / "broker.log", 0
        self.log_path.write_text("2026-11-26T17:29:00 INFO an earlier Bookie operation timeout, before the run\n")
        self.stall_during_run = stall_during_run

    def start_workload(self, **kw):
        self.starts += 1
        if self.starts == 1 and self.stall_during_run:
            with self.log_path.open("a") as log:
                log.write("2026-11-26T17:30:47 WARN Error creating ledger: Bookie operation timeout\n")
        held = '{"event":"holding"}' if self.starts == 2 else '{"event":"done"}'
        return harness.WorkloadRun([sys.executable, "-c", f"print('{held}')"], cwd=self.log_path.parent)

    def restart_deadlocked(self) -> bool:
        return False

    def wait_coordinators_ready(self, timeout: float = 120) -> dict:
        return {}


def test_a_held_workload_is_run_once_more_only_for_a_stall_logged_during_it(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setattr(harness, "RETRIES", [])
    broker = _StalledBroker(tmp_path, stall_during_run=True)
    run, lines = harness.hold_workload(broker, hold=2)
    run.proc.wait(timeout=30)
    assert broker.starts == 2 and lines == [{"event": "holding"}]
    assert len(harness.RETRIES) == 1 and "Bookie operation timeout" in harness.RETRIES[0]["cause"]
    assert "17:30:47" in harness.RETRIES[0]["cause"]  # the line logged during the run, not the earlier one
    # the only stall line predates the run: that failure is the test's, not the bookie's
    (tmp_path / "quiet").mkdir()
    quiet = _StalledBroker(tmp_path / "quiet", stall_during_run=False)
    with pytest.raises(RuntimeError, match="did not hold"):
        harness.hold_workload(quiet, hold=2)
    assert quiet.starts == 1 and len(harness.RETRIES) == 1


# --------------------------------------------------------------------------- the cap, and what proves a cause


def test_a_second_retry_in_a_set_fails_it_with_every_cause_listed(monkeypatch):
    import pytest

    monkeypatch.setattr(harness, "RETRIES", [])
    monkeypatch.setattr(harness, "CURRENT_SET", ["faults"])
    harness.note_retry("faults cluster started again on fresh ports", "broker not ready after 120s")
    monkeypatch.setattr(harness, "CURRENT_SET", ["doctor"])
    harness.note_retry("session's workload run once more", "Bookie operation timeout")  # another set's one
    monkeypatch.setattr(harness, "CURRENT_SET", ["faults"])
    with pytest.raises(pytest.fail.Exception) as failed:
        harness.note_retry("cluster workload run once more", "Incorrect number of labels")
    assert str(failed.value) == (
        "the faults set needed 2 harness retries, more than its cap of 1: "
        "1. faults cluster started again on fresh ports (cause: broker not ready after 120s); "
        "2. cluster workload run once more (cause: Incorrect number of labels)"
    )
    assert not isinstance(failed.value, Exception)  # no `except Exception` of a retry loop absorbs it


def test_every_real_test_counts_against_its_own_set(request, monkeypatch):
    import pytest

    monkeypatch.setattr(harness, "CURRENT_SET", list(harness.CURRENT_SET))
    assert harness.CURRENT_SET[0] == "fast"  # set before this very test (no real marker) began
    request.node.add_marker(pytest.mark.faults)
    integration_conftest.pytest_runtest_setup(request.node)
    assert harness.CURRENT_SET[0] == "faults"


def test_a_window_proves_only_a_line_logged_in_it_with_the_tool_idle(tmp_path):
    from tests.conftest import run_cli

    log = tmp_path / "broker.log"
    log.write_text("12:00:00 WARN Error creating ledger: Bookie operation timeout (before the window)\n")
    window = harness.Window({"broker-0": log})
    assert window.cause(harness.BOOKIE_TIMEOUT) is None  # only an earlier line: no proof
    with log.open("a") as out:
        out.write("12:00:05 WARN Error creating ledger: Bookie operation timeout\n")
    assert (
        window.cause(harness.BOOKIE_TIMEOUT)
        == "broker-0: 12:00:05 WARN Error creating ledger: Bookie operation timeout"
    )
    assert run_cli(["--version"]).exit_code == 0  # the tool ran in the window: the stall may be its doing
    assert window.tool_ran() and window.cause(harness.BOOKIE_TIMEOUT) is None


class _FailingBroker(harness.PulsarBroker):
    """A stand-in for a standalone broker (no JVM): a real log file, and a workload that is a real process
    failing as the 4.0.7 broker's commit did ("Incorrect number of labels"); the broker logs it or not."""

    def __init__(self, base, broker_logs_it: bool):
        self.name, self.log_path, self.starts = "session", base / "broker.log", 0
        self.log_path.write_text("")
        self.broker_logs_it = broker_logs_it

    def start_workload(self, **kw):
        self.starts += 1
        if self.starts == 1:
            if self.broker_logs_it:
                with self.log_path.open("a") as log:
                    log.write("ERROR handleEndTxnOnSubscription fail ! Incorrect number of labels.\n")
            fail = (
                "import sys; sys.stderr.write('Handle end txn on subscription failed: Incorrect number of labels.');"
                "sys.exit(1)"
            )
            return harness.WorkloadRun([sys.executable, "-c", fail], cwd=self.log_path.parent)
        done = 'print(\'{"event": "done"}\')'
        return harness.WorkloadRun([sys.executable, "-c", done], cwd=self.log_path.parent)

    def restart_deadlocked(self) -> bool:
        return False

    def wait_coordinators_ready(self, timeout: float = 120) -> dict:
        return {}


def test_a_workload_runs_once_more_only_for_a_failure_its_broker_logged(tmp_path, monkeypatch):
    import pytest

    monkeypatch.setattr(harness, "RETRIES", [])
    monkeypatch.setattr(harness, "CURRENT_SET", [None])
    logged = _FailingBroker(tmp_path, broker_logs_it=True)
    assert logged.run_workload() == [{"event": "done"}] and logged.starts == 2
    assert [r["cause"] for r in harness.RETRIES] == [
        "session: ERROR handleEndTxnOnSubscription fail ! Incorrect number of labels."
    ]
    # The same failure seen only by the workload (its own words) proves nothing about the broker: the test's.
    (tmp_path / "quiet").mkdir()
    quiet = _FailingBroker(tmp_path / "quiet", broker_logs_it=False)
    with pytest.raises(RuntimeError, match="Incorrect number of labels"):
        quiet.run_workload()
    assert quiet.starts == 1 and len(harness.RETRIES) == 1


class _RestartedCoordinator:
    """A local HTTP server answering aborts as a 4.0.7 broker restarted after its deadlock did: 500 "not
    found" for a transaction it no longer has, 204 for one it aborted, and any other 500 for a failure."""

    def __init__(self, answers: dict[str, tuple[int, bytes]]):
        import http.server
        import threading

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self):
                status, body = answers[self.path]
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()


class _DeadlockedBroker(harness.PulsarBroker):
    """A stand-in whose deadlock was found and restarted (restart_deadlocked, tested on a real JVM above);
    its admin API is the server given."""

    def __init__(self, port: int):
        self.name, self.web_port, self.token, self.restarts = "broker-1", port, None, 0

    def restart_deadlocked(self) -> bool:
        self.restarts += 1
        return True


def _held_run(tmp_path, *least: int) -> harness.WorkloadRun:
    """A real workload process that held transactions (0,N) open and then died (as its broker deadlocked)."""
    lines = "".join(f'print(\'{{"event":"txn","outcome":"open","most":0,"least":{n}}}\'); ' for n in least)
    run = harness.WorkloadRun([sys.executable, "-c", lines + "import sys; sys.exit(1)"], cwd=tmp_path)
    return run


def test_finish_held_accepts_the_restarted_coordinators_not_found(tmp_path):
    import pytest

    not_found = (500, b'{"reason":"The transaction with this txdID `(0,38)` not found "}')
    coordinator = _RestartedCoordinator(
        {
            "/admin/v3/transactions/abortTransaction/0/38": not_found,
            "/admin/v3/transactions/abortTransaction/0/39": (204, b""),
            # the same answer with no space before "not found", as a 4.0.7 coordinator also words it
            "/admin/v3/transactions/abortTransaction/0/41": (
                500,
                b'{"reason":"The transaction with this txdID `(0,41)`not found "}',
            ),
            "/admin/v3/transactions/abortTransaction/0/40": (500, b'{"reason":"Internal error: ledger closed"}'),
        }
    )
    try:
        broker = _DeadlockedBroker(coordinator.server.server_port)
        lines = harness.finish_held(broker, _held_run(tmp_path, 38, 39, 41))
        assert [r["least"] for r in lines] == [38, 39, 41] and broker.restarts == 1
        # any other 500 leaves the transaction's fate unknown: a failure, naming it
        with pytest.raises(RuntimeError, match=r"aborting held \(0,40\) after the restart: 500 .*ledger closed"):
            harness.finish_held(broker, _held_run(tmp_path, 38, 40))
    finally:
        coordinator.close()
