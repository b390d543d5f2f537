"""The upgrade verdict (PIP-160's upgrade order): a pure function of the observations; it fails closed."""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.admin.features import lacks_batched_logs
from pulsar_txn_cli.downgrade import second_coordinator as second
from pulsar_txn_cli.downgrade.advice import disable_command
from pulsar_txn_cli.downgrade.observations import COORDINATOR, LogObservation, Observations
from pulsar_txn_cli.protocol import BATCH_KEYS
from pulsar_txn_cli.downgrade.step1 import Findings, check_configuration, check_effective
from pulsar_txn_cli.names import parse_bool

BLOCKED, COMPLETE, INCOMPLETE = "BLOCKED", "COMPLETE", "INCOMPLETE"


@dataclass
class UpgradeVerdict:
    verdict: str
    target: str
    brokers: list[dict]
    coordinators: list[dict]
    subscriptions: list[dict]
    problems: list[str]
    fixes: list[str]

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "target": self.target,
            "brokers": self.brokers,
            "coordinators": self.coordinators,
            "subscriptions": self.subscriptions,
            "problems": list(self.problems),
            "fixes": list(self.fixes),
        }


def upgrade_verdict(obs: Observations) -> UpgradeVerdict:
    """PIP-160's upgrade order: one broker version everywhere, then batching on in every broker's
    runtime configuration, then effective on every coordinator and transactional subscription."""
    findings = Findings()
    versions = _versions(obs, findings)
    check_configuration(obs, findings, want=True)
    if not any(lacks_batched_logs(b.version) for b in obs.brokers):  # else: upgrade first, reloads cannot help
        check_effective(obs, findings, want=True)
    for log in obs.logs:
        if log.error:
            findings.waiting.append(f"{log.label}: {log.error}")
    if not obs.coordinators:
        findings.waiting.append("no transaction coordinator was found on the target")
    # Pulsar 5.0's scalable-topics coordinator: what must hold where a broker has it on.
    second_blocked, second_incomplete, second_fixes = second.upgrade_problems(obs.brokers)
    for fix in second_fixes:
        findings.fix(fix)
    # Not-yet-enabled settings are the normal state of an upgrade in progress: INCOMPLETE.
    incomplete = findings.blocked + findings.waiting + list(obs.problems) + second_incomplete
    blocked = list(second_blocked)
    if len(versions) > 1 and _batching_anywhere(obs):
        blocked.append(
            f"batching is on while the brokers run {len(versions)} versions ({', '.join(sorted(versions))}): "
            "brokers of the old version cannot read batched logs; turn it off until every broker is upgraded"
        )
        for key in BATCH_KEYS:
            findings.fix(disable_command(key))
    problems = blocked + incomplete
    verdict = BLOCKED if blocked else INCOMPLETE if problems else COMPLETE
    brokers = [
        {
            "broker": b.broker,
            "version": b.version,
            # JSON booleans (null when the broker did not say), as every command's JSON: the runtime
            # configuration answers strings
            **{key: parse_bool((b.runtime or {}).get(key)) for key in BATCH_KEYS},
            second.SETTING: second.flag(b),
            "error": b.error,
        }
        for b in obs.brokers
    ]
    return UpgradeVerdict(
        verdict,
        obs.target,
        brokers,
        [_effective_json(log) for log in obs.coordinators],
        [_effective_json(log) for log in obs.subscriptions],
        problems,
        findings.fixes,
    )


def _versions(obs: Observations, findings: Findings) -> set[str]:
    versions = {b.version for b in obs.brokers if b.version}
    for broker in obs.brokers:
        if not broker.version and not broker.error:
            findings.waiting.append(f"broker {broker.broker} did not report its version")
    if len(versions) > 1:
        findings.waiting.append(
            f"the brokers run {len(versions)} versions ({', '.join(sorted(versions))}): "
            "finish the rolling upgrade before enabling batching"
        )
    return versions


def _batching_anywhere(obs: Observations) -> bool:
    configs = [obs.dynamic_config or {}] + [b.runtime or {} for b in obs.brokers]
    on_in_config = any(parse_bool(c.get(key)) for c in configs for key in BATCH_KEYS)
    return on_in_config or any(log.effective_batching for log in obs.logs)


def _effective_json(log: LogObservation) -> dict:
    head = (
        {"coordinatorId": log.coordinator_id}
        if log.kind == COORDINATOR
        else {"topic": log.topic, "subscription": log.subscription}
    )
    return {**head, "effectiveBatching": log.effective_batching, "reason": log.error or log.effective_reason}
