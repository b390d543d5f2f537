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
    monkeypatch.setattr(harness, "STARTED", ["session"])
    harness.note_retry("session's workload run once more", "BKException: Bookie operation timeout\n  at x")
    assert "harness retry #1: session's workload run once more (cause: BKException: Bookie operation timeout at x)" in (
        capsys.readouterr().err
    )
    reporter = _Reporter()
    integration_conftest.pytest_terminal_summary(reporter)
    assert reporter.lines[:2] == [
        "harness retries: 1",
        "1. session's workload run once more (cause: BKException: Bookie operation timeout at x)",
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
