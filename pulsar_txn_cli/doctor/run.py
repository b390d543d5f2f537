"""One doctor run: read once (read.py), run every check over the reading, list which ran and why not.

`wait()` repeats until nothing is found, or only what needs an operator is left, like `downgrade check --wait`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from pulsar_txn_cli.admin.counting import counted, requests_sent
from pulsar_txn_cli.doctor import config as config_check
from pulsar_txn_cli.doctor import coordinators, replication, stores, transactions
from pulsar_txn_cli.doctor.findings import CHECKS, ERROR, CheckRun, Finding, exit_severity, worst_first
from pulsar_txn_cli.doctor.read import DEFAULT_CONCURRENCY, Scope, read

NOT_ENABLED = "transactionCoordinatorEnabled"
SECOND = "second-coordinator"


@dataclass
class Report:
    target: str
    scope: Scope
    now_ms: int
    clock: str
    checks: list[CheckRun]
    findings: list[Finding]
    counts: dict = field(default_factory=dict)
    requests: int = 0
    seconds: float = 0.0

    @property
    def severity(self) -> str | None:
        return exit_severity(self.findings)

    @property
    def incomplete(self) -> list[CheckRun]:
        """Checks that could not run because something could not be read: never an all-clear."""
        return [c for c in self.checks if c.failed]

    def oldest_hanging_ms(self) -> int:
        """The age of the oldest hanging transaction found (0: none)."""
        ages = [f.evidence[0]["values"].get("ageMs") or 0 for f in self.findings if f.check == "hanging-transaction"]
        return max(ages, default=0)

    def to_json(self) -> dict:
        return {
            "target": self.target,
            "scope": self.scope.describe(),
            "nowMs": self.now_ms,
            "clock": self.clock,
            "checked": self.counts,
            "checks": [c.to_json() for c in self.checks],
            "findings": [f.to_json() for f in self.findings],
            "requests": self.requests,
            "seconds": round(self.seconds, 3),
        }


def run(
    admin,
    scope: Scope,
    *,
    older_than_ms: int | None = None,
    concurrency: int = DEFAULT_CONCURRENCY,
    clock=time.monotonic,
    downgrade_state: bool = True,
) -> Report:
    """downgrade_state=False leaves the downgrade check out (the exporter exports that verdict itself)."""
    started = clock()
    admin = counted(admin)
    reading = read(admin, scope, concurrency=concurrency)
    runs: dict[str, CheckRun] = {name: CheckRun(name) for name in CHECKS}
    found: list[Finding] = []

    def skip(names, why, failed=True):
        for name in names:
            runs[name] = CheckRun(name, False, why, failed)

    disabled = next((e for e in reading.tc_errors.values() if NOT_ENABLED in e), None)
    if disabled:
        skip(CHECKS[: CHECKS.index("config")], f"transactions are disabled on this target: {disabled}", failed=False)
    else:
        found += coordinators.coordinator_not_ready(reading)
        if reading.open_error:
            skip(("hanging-transaction", "held-readers", "held-replicators", "phantom-fence"), reading.open_error)
        else:
            found += transactions.hanging(reading, older_than_ms)
            found += transactions.held_readers(reading, older_than_ms)
            if why := replication.not_held_here(reading):
                skip(("held-replicators",), why, failed=False)
            else:
                found += replication.held_replicators(reading, older_than_ms)
            if reading.unlisted:  # a partition held by an unlisted coordinator's transaction is no phantom
                first = min(reading.unlisted)
                skip(("phantom-fence",), f"coordinator {first} could not be listed: {reading.unlisted[first]}")
            else:
                found += transactions.phantom_fence(reading)
        found += _partition_checks(reading, skip)
        found += _subscription_checks(reading, skip)
    found += _config(reading, skip)
    if not disabled:
        runs[SECOND], found = _second_coordinator(reading, found)
    from pulsar_txn_cli.doctor.downgrade_state import downgrade

    if downgrade_state:
        runs["downgrade"], more = downgrade(admin, concurrency)
        found += more
    else:
        runs["downgrade"] = CheckRun("downgrade", False, "left out: the downgrade verdict is exported on its own")
    counts = {
        "coordinators": reading.tc_count,
        "openTransactions": len(reading.open_txns),
        "partitions": len(reading.partitions),
        "subscriptions": len(reading.subscriptions),
        "brokers": len(reading.brokers),
    }
    return Report(
        reading.target,
        scope,
        reading.now_ms,
        reading.clock,
        [runs[name] for name in CHECKS],
        transactions.causes_first(worst_first(found)),
        counts,
        requests_sent(admin),
        clock() - started,
    )


def _second_coordinator(reading, found: list[Finding]) -> tuple[CheckRun, list[Finding]]:
    """Pulsar 5.0's scalable-topics coordinator: its transactions are out of the admin API's reach, so the
    check says so even when it finds nothing; a partition whose buffer counts them is its finding, not a
    phantom fence."""
    from pulsar_txn_cli.doctor import second_coordinator as second

    view = second.from_reading(reading)
    if view is None:
        return CheckRun(SECOND), found  # no broker has it on (before 5.0: none has the setting)
    sentence = view.sentence("this doctor")
    if view.error:
        return CheckRun(SECOND, False, sentence, True), found
    kept = [f for f in found if not (f.check == "phantom-fence" and f.subject in view.counted)]
    held = {p: transactions.partition_state(e) for p, e in reading.partitions.items() if p in view.counted}
    return CheckRun(SECOND, True, sentence), kept + second.check(reading, view, held)


def _partition_checks(reading, skip) -> list[Finding]:
    names = ("held-readers", "held-replicators", "phantom-fence", "buffer-not-ready")
    listing = [p for p in reading.problems if "topics" in p]
    if listing:
        skip(names, listing[0])
        return []
    answered = [e["stats"] for e in reading.partitions.values() if e.get("stats")]
    if answered and not any("state" in s for s in answered):
        skip(("buffer-not-ready",), "this broker's transactionBufferStats has no state (Pulsar before 2.10)", False)
        return []
    out = stores.buffer_not_ready(reading)
    for partition, entry in sorted(reading.partitions.items()):
        if entry.get("error"):
            out.append(
                Finding(
                    "buffer-not-ready",
                    "warning",
                    partition,
                    f"could not read the partition's transaction buffer: {entry['error']}",
                    [],
                    [f"pulsar-txn transaction-buffer-stats -t {partition}"],
                )
            )
    return out


def _subscription_checks(reading, skip) -> list[Finding]:
    discovery = [p for p in reading.problems if "subscriptions" in p]
    if discovery:
        skip(("pending-ack-not-ready", "leaked-pending-ack"), discovery[0])
        return []
    return stores.pending_ack_not_ready(reading) + stores.leaked_pending_ack(reading)


def _config(reading, skip) -> list[Finding]:
    if not any(b.get("runtime") for b in reading.brokers.values()):
        why = reading.brokers_error or next((b["error"] for b in reading.brokers.values() if b.get("error")), None)
        skip(("config",), f"no broker's runtime configuration could be read: {why or 'no broker listed'}")
        return []

    def engine_fix(key, value):
        return f"pulsar-txn engine config set {key} {value}" if reading.target_kind == "engine" else None

    return config_check.config(reading, engine_fix)


def wait(
    admin,
    scope: Scope,
    *,
    interval: float,
    timeout: float | None,
    on_check,
    sleep=time.sleep,
    clock=time.monotonic,
    **options,
) -> Report:
    """Check until nothing is found or an error (an operator must act) remains, or the timeout."""
    from pulsar_txn_cli.downgrade.runner import poll

    return poll(
        lambda: run(admin, scope, **options),
        lambda report: report.severity == ERROR or (report.severity is None and not report.incomplete),
        interval=interval,
        timeout=timeout,
        on_check=on_check,
        sleep=sleep,
        clock=clock,
    )
