"""The harness's retries are logged with their cause and counted in the run's summary (fast: no broker)."""

from __future__ import annotations

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
