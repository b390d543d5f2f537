"""PIP-160's step 1, shared by both verdicts: batching configured, then effective, as wanted.

Each check adds to Findings: `blocked` needs an operator, `waiting` may pass by itself.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from pulsar_txn_cli.admin.features import batch_flag, no_batched_logs
from pulsar_txn_cli.downgrade.advice import disable_command, enable_command, reload_command, set_command
from pulsar_txn_cli.downgrade.observations import COORDINATOR, LogObservation, Observations
from pulsar_txn_cli.protocol import BATCH_KEYS
from pulsar_txn_cli.names import parse_bool


@dataclass
class Findings:
    """Step-1 and consistency findings: `blocked` needs an operator, `waiting` may pass by itself."""

    blocked: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)
    fixes: list[str] = field(default_factory=list)
    batching_seen_on: bool = False

    def fix(self, command: str) -> None:
        if command not in self.fixes:
            self.fixes.append(command)

    @property
    def step1_clean(self) -> bool:
        return not self.blocked and not self.waiting


def check_configuration(obs: Observations, findings: Findings, *, want: bool) -> None:
    """Both batch settings in the dynamic configuration and in every broker's runtime configuration."""
    state = "enabled" if want else "disabled"

    def command(key: str) -> str:
        findings.fix(set_command(key, want))
        return (enable_command if want else disable_command)(key)

    if obs.dynamic_error:
        findings.waiting.append(f"could not read the dynamic configuration: {obs.dynamic_error}")
    elif obs.dynamic_config is None:
        findings.waiting.append("the dynamic configuration was not read")
    else:
        for key in BATCH_KEYS:
            raw = obs.dynamic_config.get(key)
            if raw is None:
                continue  # no override: every broker's runtime value below decides
            flag = parse_bool(raw)
            if flag is None:
                findings.blocked.append(f"dynamic configuration {key}={raw!r} is not a boolean")
                findings.fix(command(key))
            elif flag != want:
                findings.blocked.append(f"dynamic configuration {key}={raw} (must be {str(want).lower()})")
                findings.fix(command(key))
                findings.batching_seen_on |= flag
    if obs.brokers_error:
        findings.waiting.append(f"could not list the brokers: {obs.brokers_error}")
    elif not obs.brokers:
        findings.waiting.append("no broker was listed, so no runtime configuration could be checked")
    for broker in obs.brokers:
        if broker.error or broker.runtime is None:
            findings.waiting.append(
                f"could not read the runtime configuration of broker {broker.broker}: {broker.error or 'no answer'}"
            )
            continue
        for key in BATCH_KEYS:
            raw = broker.runtime.get(key)
            flag = batch_flag(broker.runtime, key, broker.version)  # False on a broker older than PIP-160
            if raw is None and flag is False and want:
                findings.waiting.append(
                    f"broker {broker.broker}: {no_batched_logs(broker.version, key)}; "
                    "upgrade it before enabling batching"
                )
                continue
            if flag is None:
                findings.blocked.append(
                    f"broker {broker.broker} reports {key}={raw!r}; it must be {state} and the state is unknown"
                )
                findings.fix(command(key))
            elif flag != want:
                findings.blocked.append(
                    f"broker {broker.broker} runs with {key}={raw} (must be {str(want).lower()}; "
                    f"also set it in that broker's broker.conf so a restart keeps it)"
                )
                findings.fix(command(key))
                findings.batching_seen_on |= flag


SHOWN = 5  # per-item lines shown before "and N more" (a cluster may have thousands of subscriptions)


def check_effective(obs: Observations, findings: Findings, *, want: bool) -> None:
    """The setting counts only once each store was reopened with it (facts §4)."""
    unknown, wrong, opening = [], [], []
    for log in obs.logs:
        if log.error and log.effective_batching is None:
            continue  # reported with the item itself
        if log.effective_batching is None and log.opening:
            opening.append(log)  # it opens with the configured value: passes by itself
        elif log.effective_batching is None:
            unknown.append(log)
        elif log.effective_batching != want:
            wrong.append(log)
            findings.batching_seen_on |= log.effective_batching
    for log in unknown:
        findings.fix(set_command(_key_of(log), want))
    findings.blocked += _summarized(unknown, "whether batching is effective is unknown")
    findings.waiting += _summarized(
        opening, "the store is still opening (replaying its log), so whether batching is effective is not known yet"
    )
    state = "still batching" if not want else "not batching yet"
    findings.blocked += _summarized(wrong, state)
    for key in BATCH_KEYS:
        mine = [log for log in wrong if _key_of(log) == key]
        if not mine or set_command(key, want) in findings.fixes:
            continue  # the configuration is wrong too: its fix reloads every store
        if len(mine) > SHOWN:
            findings.fix(set_command(key, want))  # reloads them all
        else:
            for log in mine:
                findings.fix(reload_command(log))


def _key_of(log: LogObservation) -> str:
    return BATCH_KEYS[0] if log.kind == COORDINATOR else BATCH_KEYS[1]


def _summarized(logs: list[LogObservation], what: str) -> list[str]:
    """One line per log (its reason), at most SHOWN, then one line for the rest."""
    lines = [
        f"{log.label}: {what}" + (f" ({log.effective_reason})" if log.effective_reason else "") for log in logs[:SHOWN]
    ]
    if len(logs) > SHOWN:
        lines.append(f"... and {len(logs) - SHOWN} more logs: {what}")
    return lines
