"""What the doctor reports: findings (one problem, its evidence and its fix) and which checks ran.

`warning`: may settle by itself; `error`: needs an operator. Every number in `evidence` names the
admin endpoint it was read from, so an operator can read it again.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ERROR, WARNING = "error", "warning"
_RANK = {ERROR: 0, WARNING: 1}

# The stable check names, in the order they are listed (docs/doctor.md documents each).
CHECKS = (
    "coordinator-not-ready",
    "hanging-transaction",
    "held-readers",
    "held-replicators",
    "phantom-fence",
    "buffer-not-ready",
    "pending-ack-not-ready",
    "leaked-pending-ack",
    "config",
    "second-coordinator",
    "downgrade",
)


@dataclass
class Finding:
    check: str
    severity: str
    subject: str
    summary: str
    evidence: list[dict] = field(default_factory=list)  # [{"endpoint": ..., "values": {...}}]
    fix: list[str] = field(default_factory=list)  # commands, runnable as printed once the CLI adds the target
    advice: str | None = None  # what the commands cannot say
    txn_ids: list[str] = field(default_factory=list)

    def to_json(self) -> dict:
        out = {
            "check": self.check,
            "severity": self.severity,
            "subject": self.subject,
            "summary": self.summary,
            "evidence": self.evidence,
            "fix": self.fix,
        }
        if self.advice:
            out["advice"] = self.advice
        if self.txn_ids:
            out["txnIds"] = self.txn_ids
        return out


@dataclass
class CheckRun:
    check: str
    ran: bool = True
    why: str | None = None
    failed: bool = False  # not run because something could not be read (not because it does not apply)

    def to_json(self) -> dict:
        return {"check": self.check, "ran": self.ran, "why": self.why}


def evidence(endpoint: str, **values) -> dict:
    return {"endpoint": endpoint, "values": {k: v for k, v in values.items() if v is not None}}


def worst_first(findings: list[Finding]) -> list[Finding]:
    return sorted(findings, key=lambda f: (_RANK.get(f.severity, 2), CHECKS.index(f.check), f.subject))


def exit_severity(findings: list[Finding]) -> str | None:
    """ERROR when any error, WARNING when only warnings, None when nothing was found."""
    if any(f.severity == ERROR for f in findings):
        return ERROR
    return WARNING if findings else None
