"""One Snapshot as Prometheus metric families (names under `pulsar_txn_`; see docs/exporter.md).

A failed observation exports only the exporter's own health: no verdict and no per-log series,
so a dashboard can never read an unreachable cluster as SAFE.
"""

from __future__ import annotations

from prometheus_client.core import GaugeMetricFamily

VERDICTS = ("SAFE", "WAIT", "BLOCKED")
LOG_LABELS = ["log", "coordinator", "topic", "subscription"]


def health(snapshot, last_success: float | None) -> list:
    up = GaugeMetricFamily(
        "pulsar_txn_exporter_up", "1 when the last observation of the target succeeded.", value=1 if snapshot.ok else 0
    )
    took = GaugeMetricFamily(
        "pulsar_txn_exporter_observation_duration_seconds",
        "How long the last observation of the target took.",
        value=snapshot.duration,
    )
    families = [up, took]
    if last_success is not None:
        families.append(
            GaugeMetricFamily(
                "pulsar_txn_exporter_last_success_timestamp_seconds",
                "When the last successful observation started (Unix time).",
                value=last_success,
            )
        )
    return families


def downgrade(verdict) -> list:
    state = GaugeMetricFamily(
        "pulsar_txn_downgrade_verdict",
        "The downgrade verdict, one series per state; 1 marks the current one.",
        labels=["verdict"],
    )
    for name in VERDICTS:
        state.add_metric([name], 1 if verdict.verdict == name else 0)
    logs = GaugeMetricFamily(
        "pulsar_txn_downgrade_logs", "Transaction logs by kind and whether they are clear.", labels=["log", "state"]
    )
    for kind, items in (("tc", verdict.coordinators), ("pending-ack", verdict.subscriptions)):
        clear = sum(1 for i in items if i.clear)
        logs.add_metric([kind, "clear"], clear)
        logs.add_metric([kind, "held"], len(items) - clear)
    problems = GaugeMetricFamily(
        "pulsar_txn_downgrade_problems",
        "Reasons the verdict is not SAFE beyond the logs' own.",
        value=len(verdict.problems),
    )
    return [state, logs, problems, *per_log(verdict)]


def per_log(verdict) -> list:
    oldest = GaugeMetricFamily(
        "pulsar_txn_log_oldest_ledger_id", "The oldest ledger the log still holds.", labels=LOG_LABELS
    )
    last = GaugeMetricFamily(
        "pulsar_txn_log_last_batched_ledger_id",
        "The recorded last ledger that may hold batched entries (the checkpoint).",
        labels=LOG_LABELS,
    )
    clear = GaugeMetricFamily(
        "pulsar_txn_log_clear", "1 when no ledger of the log can hold batched entries any more.", labels=LOG_LABELS
    )
    held = GaugeMetricFamily(
        "pulsar_txn_log_held",
        "1 for each log that holds the downgrade back, by likely cause.",
        labels=[*LOG_LABELS, "cause"],
    )
    batching = GaugeMetricFamily(
        "pulsar_txn_log_batching",
        "1 per log, labelled with whether its store batches now (true, false or unknown).",
        labels=[*LOG_LABELS, "effective"],
    )
    for item in verdict.items:
        labels = log_labels(item.observation)
        if item.oldest_ledger_id is not None:
            oldest.add_metric(labels, item.oldest_ledger_id)
        if item.last_batched_ledger_id is not None:
            last.add_metric(labels, item.last_batched_ledger_id)
        clear.add_metric(labels, 1 if item.clear else 0)
        if not item.clear:
            held.add_metric([*labels, item.cause or "unknown"], 1)
        effective = item.observation.effective_batching
        batching.add_metric([*labels, "unknown" if effective is None else str(effective).lower()], 1)
    return [oldest, last, clear, held, batching]


def log_labels(observation) -> list[str]:
    if observation.coordinator_id is not None:
        return ["tc", str(observation.coordinator_id), "", ""]
    return ["pending-ack", "", observation.topic or "", observation.subscription or ""]


def held_readers(reports: dict[str, dict]) -> list:
    checked = GaugeMetricFamily(
        "pulsar_txn_buffer_partitions",
        "Partitions looked at, and those whose readers wait behind open transactions.",
        labels=["namespace", "state"],
    )
    behind = GaugeMetricFamily(
        "pulsar_txn_buffer_entries_behind",
        "Entries written after a held partition's maxReadPosition.",
        labels=["topic"],
    )
    age = GaugeMetricFamily(
        "pulsar_txn_buffer_held_seconds",
        "How long the oldest open transaction has held the partition's readers.",
        labels=["topic"],
    )
    holders = GaugeMetricFamily(
        "pulsar_txn_buffer_holders", "Open transactions holding the partition's readers.", labels=["topic"]
    )
    for namespace, report in reports.items():
        checked.add_metric([namespace, "checked"], report["checked"])
        checked.add_metric([namespace, "held"], report["held"])
        for partition in report["partitions"]:
            if not partition.get("held"):
                continue
            topic = partition["topic"]
            if isinstance(partition.get("entriesBehind"), int):
                behind.add_metric([topic], partition["entriesBehind"])
            owners = partition.get("holders", [])
            holders.add_metric([topic], len(owners))
            if owners and owners[0].get("ageMs") is not None:
                age.add_metric([topic], owners[0]["ageMs"] / 1000)
    return [checked, behind, age, holders]


def doctor(report) -> list:
    """The doctor's findings by check and severity (every pair, 0 when none), which checks ran, and the
    oldest hanging transaction's age."""
    from pulsar_txn_cli.doctor.findings import CHECKS, ERROR, WARNING

    findings = GaugeMetricFamily(
        "pulsar_txn_doctor_findings",
        "What `pulsar-txn doctor` finds, by check and severity (error: needs an operator).",
        labels=["check", "severity"],
    )
    counts = {}
    for finding in report.findings:
        counts[(finding.check, finding.severity)] = counts.get((finding.check, finding.severity), 0) + 1
    for check in CHECKS:
        for severity in (ERROR, WARNING):
            findings.add_metric([check, severity], counts.get((check, severity), 0))
    ran = GaugeMetricFamily(
        "pulsar_txn_doctor_check_ran", "1 when the check could run on this target, 0 when not.", labels=["check"]
    )
    for run in report.checks:
        ran.add_metric([run.check], 1 if run.ran else 0)
    oldest = GaugeMetricFamily(
        "pulsar_txn_hanging_transaction_oldest_seconds",
        "Age of the oldest hanging transaction (open past its timeout or half of it); 0 when none.",
        value=report.oldest_hanging_ms() / 1000,
    )
    return [findings, ran, oldest]


def of(snapshot, last_success: float | None) -> list:
    families = health(snapshot, last_success)
    if snapshot.ok:
        families += downgrade(snapshot.verdict) + held_readers(snapshot.held_readers)
        if snapshot.doctor is not None:
            families += doctor(snapshot.doctor)
    return families
