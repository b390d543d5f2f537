"""`pulsar-txn exporter`: what it exports for a downgrade in progress, what it refuses to export
when the target cannot be observed, and the Grafana dashboard's queries."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.exporter import scenario

DASHBOARD = Path(__file__).resolve().parents[2] / "pulsar_txn_cli" / "exporter" / "grafana-dashboard.json"


@pytest.fixture
def engine_dir(cli, monkeypatch, tmp_path):
    scenario.isolate(monkeypatch, tmp_path)
    return scenario.downgrade_in_progress(cli, tmp_path / "engine")


def samples(text: str) -> dict[str, list]:
    return {family.name: family.samples for family in text_string_to_metric_families(text)}


def value(found, name, **labels):
    matches = [s.value for s in found[name] if all(s.labels.get(k) == v for k, v in labels.items())]
    assert len(matches) == 1, (name, labels, found.get(name))
    return matches[0]


def test_once_exports_what_downgrade_check_sees(cli, engine_dir):
    result = cli(["exporter", "--once", "--engine-dir", engine_dir])
    assert result.exit_code == 0, result.stderr
    found = samples(result.stdout)
    assert value(found, "pulsar_txn_exporter_up") == 1
    assert [value(found, "pulsar_txn_downgrade_verdict", verdict=v) for v in ("SAFE", "WAIT", "BLOCKED")] == [0, 1, 0]

    # The same checkpoint as `downgrade check`, so the two agree log by log.
    check = cli(["downgrade", "check", "--engine-dir", engine_dir, "-o", "json"])
    assert check.exit_code == 5, check.stderr
    verdict = check.json()
    assert value(found, "pulsar_txn_downgrade_logs", log="tc", state="held") == len(verdict["coordinators"]) == 2
    assert (
        value(found, "pulsar_txn_downgrade_logs", log="pending-ack", state="held") == len(verdict["subscriptions"]) > 0
    )
    for item in verdict["coordinators"]:
        labels = {"log": "tc", "coordinator": str(item["coordinatorId"])}
        assert value(found, "pulsar_txn_log_oldest_ledger_id", **labels) == item["oldestLedgerId"]
        assert value(found, "pulsar_txn_log_last_batched_ledger_id", **labels) == item["lastBatchedLedgerId"]
        assert value(found, "pulsar_txn_log_held", cause=item["cause"], **labels) == 1
    for item in verdict["subscriptions"]:
        labels = {"log": "pending-ack", "topic": item["topic"], "subscription": item["subscription"]}
        assert value(found, "pulsar_txn_log_clear", **labels) == 0
        assert value(found, "pulsar_txn_log_batching", effective="false", **labels) == 1

    assert value(found, "pulsar_txn_buffer_partitions", namespace="public/default", state="held") == 1
    assert value(found, "pulsar_txn_buffer_held_seconds", topic=scenario.HELD) == pytest.approx(90, abs=1)
    assert value(found, "pulsar_txn_buffer_entries_behind", topic=scenario.HELD) == 3
    assert value(found, "pulsar_txn_buffer_holders", topic=scenario.HELD) == 1


def test_watching_a_target_that_batches_on_purpose_never_starts_a_downgrade(cli, monkeypatch, tmp_path):
    """`downgrade check` BLOCKED with batching on starts a downgrade; the exporter, which only watches, does not:
    the batching switches go on without asking, and `doctor` says no downgrade is under way."""
    scenario.isolate(monkeypatch, tmp_path)
    engine = ["--engine-dir", str(tmp_path / "engine")]
    assert cli(["engine", "init", *engine]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *engine]).exit_code == 0
    exported = samples(cli(["exporter", "--once", *engine]).stdout)
    assert value(exported, "pulsar_txn_downgrade_verdict", verdict="BLOCKED") == 1
    doctor = cli(["doctor", *engine, "-o", "json"]).json()
    assert [c["ran"] for c in doctor["checks"] if c["check"] == "downgrade"] == [False]
    assert cli(["set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes", *engine]).exit_code == 0
    assert cli(["downgrade", "check", *engine, "-o", "json"]).exit_code == 6
    doctor = cli(["doctor", *engine, "-o", "json"]).json()
    assert ("downgrade", "error") in [(f["check"], f["severity"]) for f in doctor["findings"]]
    again = cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *engine])
    assert again.exit_code == 6 and "a downgrade is under way" in again.stderr, again.stderr


def test_an_unobservable_target_exports_no_verdict(cli, monkeypatch, tmp_path):
    scenario.isolate(monkeypatch, tmp_path)
    result = cli(["exporter", "--once", "--admin-url", "http://127.0.0.1:9", "--request-timeout", "2"])
    assert result.exit_code == 4
    found = samples(result.stdout)
    assert value(found, "pulsar_txn_exporter_up") == 0
    assert value(found, "pulsar_txn_exporter_observation_failures") == 1
    assert not any(name.startswith(("pulsar_txn_downgrade", "pulsar_txn_log", "pulsar_txn_buffer")) for name in found)
    assert "pulsar_txn_exporter_last_success_timestamp_seconds" not in found
    [line] = [l for l in result.stderr.splitlines() if l.startswith("error:")]
    assert "127.0.0.1:9" in line


def test_the_dashboard_queries_only_exported_metrics(cli, engine_dir):
    exported = set(samples(cli(["exporter", "--once", "--engine-dir", engine_dir]).stdout))
    exported |= {f"{name}_total" for name in exported}
    dashboard = json.loads(cli(["exporter", "--dashboard"]).stdout)
    assert dashboard == json.loads(DASHBOARD.read_text())
    used = {name for expr in dashboard_queries(dashboard) for name in re.findall(r"pulsar_txn_\w+", expr)}
    assert used and used <= exported, used - exported


def dashboard_queries(dashboard: dict) -> list[str]:
    return [target["expr"] for panel in dashboard["panels"] for target in panel["targets"]]


def test_a_bad_namespace_is_a_usage_error(cli, monkeypatch, tmp_path):
    scenario.isolate(monkeypatch, tmp_path)
    result = cli(["exporter", "--once", "-n", "public", "--engine-dir", tmp_path / "engine"])
    assert result.exit_code == 2
    assert "'public' is not tenant/namespace" in result.stderr


def test_the_doctor_findings_and_the_oldest_hanging_transaction(cli, engine_dir):
    """The doctor's findings by check and severity, which checks ran, the oldest hanging transaction's age."""
    found = samples(cli(["exporter", "--once", "--engine-dir", engine_dir]).stdout)
    report = cli(["doctor", "--engine-dir", engine_dir, "-o", "json"]).json()
    for finding in report["findings"]:
        if finding["check"] == "downgrade":
            continue  # the exporter leaves it to its own downgrade series
        matching = [
            f for f in report["findings"] if (f["check"], f["severity"]) == (finding["check"], finding["severity"])
        ]
        assert value(found, "pulsar_txn_doctor_findings", check=finding["check"], severity=finding["severity"]) == len(
            matching
        )
    # the held partition's transaction (open 90 s, timeout 1 h) is not hanging yet: no finding, age 0
    assert value(found, "pulsar_txn_hanging_transaction_oldest_seconds") == 0
    assert value(found, "pulsar_txn_doctor_findings", check="hanging-transaction", severity="error") == 0
    assert value(found, "pulsar_txn_doctor_check_ran", check="held-readers") == 1
    assert value(found, "pulsar_txn_doctor_check_ran", check="downgrade") == 0
    advanced = cli(["engine", "advance", "40m", "--engine-dir", engine_dir])
    assert advanced.exit_code == 0, advanced.stderr
    found = samples(cli(["exporter", "--once", "--engine-dir", engine_dir]).stdout)
    assert value(found, "pulsar_txn_doctor_findings", check="hanging-transaction", severity="error") == 1
    assert value(found, "pulsar_txn_doctor_findings", check="held-readers", severity="error") == 1
    assert value(found, "pulsar_txn_hanging_transaction_oldest_seconds") == pytest.approx(90 + 40 * 60, abs=1)
