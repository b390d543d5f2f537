"""The downgrade and upgrade verdicts: pure functions of the observations and the checkpoint.

Both fail closed. SAFE (or COMPLETE) is returned only when every fact it rests on was observed
and checked; an error, a missing answer, an unknown state or an inconsistent checkpoint turns it
into WAIT (something may settle by itself: retry) or BLOCKED (an operator must act).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from pulsar_txn_cli.natural import natural_key
from pulsar_txn_cli.admin.features import batch_flag, lacks_batched_logs, no_batched_logs
from pulsar_txn_cli.downgrade.checkpoint import Checkpoint, Record
from pulsar_txn_cli.downgrade.observations import (
    BATCH_INDEX_KEY, BATCH_KEYS, COORDINATOR, TC_ASSIGN_TOPIC, LogObservation, Observations,
    config_flag, parse_position,
)

SAFE, WAIT, BLOCKED = "SAFE", "WAIT", "BLOCKED"
COMPLETE, INCOMPLETE = "COMPLETE", "INCOMPLETE"

# Likely causes of an item that holds the downgrade back (the "cause" field of the JSON).
CAUSE_ERROR = "observation-failed"
CAUSE_NOT_RECORDED = "not-recorded"
CAUSE_NOT_ROLLED = "ledger-not-rolled"
CAUSE_TRIM_PENDING = "trim-pending"
CAUSE_OPEN_TXN = "open-transaction"
CAUSE_BATCH_INDEX = "batch-index-deletion"
CAUSE_CURSOR_STUCK = "cursor-not-moving"
CAUSE_MISSING = "not-found"
CAUSE_INCONSISTENT = "inconsistent-checkpoint"


@dataclass
class ItemVerdict:
    observation: LogObservation
    oldest_ledger_id: int | None
    last_batched_ledger_id: int | None
    clear: bool
    reason: str
    cause: str | None = None
    advice: str | None = None

    def to_json(self) -> dict:
        obs = self.observation
        head = ({"coordinatorId": obs.coordinator_id} if obs.kind == COORDINATOR
                else {"topic": obs.topic, "subscription": obs.subscription})
        return {
            **head,
            "oldestLedgerId": self.oldest_ledger_id,
            "lastBatchedLedgerId": self.last_batched_ledger_id,
            "clear": self.clear,
            "reason": self.reason,
            "cause": self.cause,
            "advice": self.advice,
            "markDeletePosition": obs.mark_delete,
            "lastConfirmedEntry": obs.last_confirmed,
        }


@dataclass
class DowngradeVerdict:
    verdict: str
    target: str
    coordinators: list[ItemVerdict]
    subscriptions: list[ItemVerdict]
    problems: list[str]  # every reason the verdict is not SAFE beyond the items' own
    fixes: list[str]  # commands that remove a BLOCKED
    checkpoint: Checkpoint | None  # what to save; None: leave the file alone
    newly_recorded: int = 0
    identity: str = ""

    @property
    def items(self) -> list[ItemVerdict]:
        return self.coordinators + self.subscriptions

    def to_json(self) -> dict:
        return {
            "verdict": self.verdict,
            "target": self.target,
            "identity": self.identity or self.target,
            "coordinators": [i.to_json() for i in self.coordinators],
            "subscriptions": [i.to_json() for i in self.subscriptions],
            "problems": list(self.problems),
            "fixes": list(self.fixes),
            "newlyRecorded": self.newly_recorded,
        }


@dataclass
class _Findings:
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


def disable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value false"


def enable_command(key: str) -> str:
    return f"pulsar-admin brokers update-dynamic-config --config {key} --value true"


def set_command(key: str, want: bool) -> str:
    """pulsar-txn's own switch: it records the moment of the change, which is what lets the
    admin layer tell where the change is effective (admin/batchlog.py), and reloads the stores."""
    name = "set-txn-tc-batch-log" if key == BATCH_KEYS[0] else "set-txn-pending-ack-batch-log"
    return f"pulsar-txn {name} --{'enable' if want else 'disable'} --reload --yes"


def reload_command(obs: LogObservation) -> str:
    """Reopening the store is what makes a configuration change effective (facts §4)."""
    if obs.kind == COORDINATOR:
        return f"pulsar-admin topics unload {TC_ASSIGN_TOPIC}-partition-{obs.coordinator_id}"
    return f"pulsar-admin topics unload {obs.topic}"


# ---------------------------------------------------------------------------------------------
# Downgrade


def downgrade_verdict(obs: Observations, checkpoint: Checkpoint | None, *,
                      checkpoint_error: str | None = None) -> DowngradeVerdict:
    """PIP-160's downgrade steps 1 and 2-1..2-7 over one set of observations.

    Returns the verdict and the checkpoint to save (records added for items seen for the first
    time once batching is confirmed off; all records dropped when batching is seen on again).
    """
    findings = _Findings()
    usable, writable = _check_checkpoint(obs, checkpoint, checkpoint_error, findings)
    _step1_config(obs, findings, want=False)
    _step1_effective(obs, findings, want=False)
    if not obs.coordinators:
        findings.blocked.append("no transaction coordinator was found on the target "
                                "(is transactionCoordinatorEnabled=true?)")

    if findings.batching_seen_on and usable is not None and usable.size:
        findings.blocked.append(
            "batching is on again, so the ledgers recorded earlier no longer mark the last batched "
            "ledgers: the records were dropped and are taken again once batching is effectively off")
        usable = usable.without_records()

    new_records = {}
    if findings.step1_clean and usable is not None:
        for log in obs.logs:
            if usable.record_for(log.key) is None and not log.error and log.ledgers:
                new_records[log.key] = Record(max(log.ledgers), obs.taken_at)
        usable = usable.with_records(new_records)

    batch_index = _batch_index_deletion(obs)
    coordinators = [_item(log, usable, findings, batch_index) for log in obs.coordinators]
    subscriptions = [_item(log, usable, findings, batch_index) for log in obs.subscriptions]
    missing = _missing(obs, usable)
    for item in missing:
        (coordinators if item.observation.kind == COORDINATOR else subscriptions).append(item)
        findings.waiting.append(f"{item.observation.label}: {item.reason}")

    problems = findings.blocked + findings.waiting + list(obs.problems)
    if findings.blocked:
        verdict = BLOCKED
    elif problems or not all(i.clear for i in coordinators + subscriptions):
        verdict = WAIT
    else:
        verdict = SAFE
    return DowngradeVerdict(verdict, obs.target, coordinators, subscriptions, problems, findings.fixes,
                            usable if writable else None, len(new_records), obs.key)


def _check_checkpoint(obs, checkpoint, error, findings) -> tuple[Checkpoint | None, bool]:
    """(checkpoint to use, whether it may be written). A bad or foreign file is never overwritten."""
    if error:
        findings.blocked.append(error)
        return None, False
    if checkpoint is None:
        return Checkpoint(obs.key, obs.taken_at), True
    if checkpoint.target != obs.key:
        findings.blocked.append(
            f"the checkpoint belongs to {checkpoint.target!r}, not to {obs.key!r}: "
            "use its own --checkpoint file, or `pulsar-txn downgrade reset` to start over")
        return None, False
    return checkpoint, True


def _step1_config(obs: Observations, findings: _Findings, *, want: bool) -> None:
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
            flag = config_flag(raw)
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
            findings.waiting.append(f"could not read the runtime configuration of broker {broker.broker}: "
                                    f"{broker.error or 'no answer'}")
            continue
        for key in BATCH_KEYS:
            raw = broker.runtime.get(key)
            flag = batch_flag(broker.runtime, key, broker.version)  # False on a broker older than PIP-160
            if raw is None and flag is False and want:
                findings.waiting.append(f"broker {broker.broker}: {no_batched_logs(broker.version, key)}; "
                                        "upgrade it before enabling batching")
                continue
            if flag is None:
                findings.blocked.append(f"broker {broker.broker} reports {key}={raw!r}; "
                                        f"it must be {state} and the state is unknown")
                findings.fix(command(key))
            elif flag != want:
                findings.blocked.append(f"broker {broker.broker} runs with {key}={raw} (must be {str(want).lower()}; "
                                        f"also set it in that broker's broker.conf so a restart keeps it)")
                findings.fix(command(key))
                findings.batching_seen_on |= flag


SHOWN = 5  # per-item lines shown before "and N more" (a cluster may have thousands of subscriptions)


def _step1_effective(obs: Observations, findings: _Findings, *, want: bool) -> None:
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
    findings.waiting += _summarized(opening, "the store is still opening (replaying its log), so whether "
                                             "batching is effective is not known yet")
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
    lines = [f"{log.label}: {what}" + (f" ({log.effective_reason})" if log.effective_reason else "")
             for log in logs[:SHOWN]]
    if len(logs) > SHOWN:
        lines.append(f"... and {len(logs) - SHOWN} more logs: {what}")
    return lines


def _batch_index_deletion(obs: Observations) -> bool | None:
    """acknowledgmentAtBatchIndexLevelEnabled across the brokers: False if any broker has it off."""
    flags = [config_flag((b.runtime or {}).get(BATCH_INDEX_KEY)) for b in obs.brokers]
    if any(f is False for f in flags):
        return False
    if flags and all(f is True for f in flags):
        return True
    return None


def _item(log: LogObservation, checkpoint: Checkpoint | None, findings: _Findings,
          batch_index: bool | None) -> ItemVerdict:
    record = checkpoint.record_for(log.key) if checkpoint is not None else None
    recorded = record.last_batched_ledger_id if record else None
    if log.error:
        advice = "retry; if it persists, check that the broker that owns it is healthy"
        if log.kind == COORDINATOR and "not found" in log.error.lower():
            # A real broker loads a coordinator only when a transactional client connects to it
            # (docs/real-broker-findings.md); until then its stats answer 404 or 500.
            advice = ("the coordinator is not loaded: it loads when a transactional client connects; "
                      "check again once clients are running (or start one)")
        return ItemVerdict(log, None, recorded, False, f"could not read its ledgers: {log.error}", CAUSE_ERROR,
                           advice)
    if not log.ledgers:
        return ItemVerdict(log, None, recorded, False, "the target reported no ledgers for it", CAUSE_ERROR,
                           "retry once the log is loaded (a managed ledger always has a current ledger)")
    oldest, newest = min(log.ledgers), max(log.ledgers)
    if record is None:
        return ItemVerdict(log, oldest, None, False,
                           "its last batched ledger is not recorded yet: batching is not confirmed off everywhere",
                           CAUSE_NOT_RECORDED, "fix what blocks step 1, then check again")
    if recorded > newest:
        findings.blocked.append(f"{log.label}: the checkpoint records ledger {recorded}, newer than any of its "
                                f"ledgers (newest {newest}); the checkpoint does not match this target")
        return ItemVerdict(log, oldest, recorded, False, "the checkpoint is inconsistent with its ledgers",
                           CAUSE_INCONSISTENT, "`pulsar-txn downgrade reset`, then check again")
    if oldest > recorded:
        return ItemVerdict(log, oldest, recorded, True, f"oldest ledger {oldest} > last batched ledger {recorded}")
    cause, advice = diagnose(log, recorded, batch_index)
    return ItemVerdict(log, oldest, recorded, False,
                       f"oldest ledger {oldest} <= last batched ledger {recorded}: {cause_text(cause, log, recorded)}",
                       cause, advice)


def diagnose(log: LogObservation, recorded: int, batch_index: bool | None) -> tuple[str, str]:
    """The likely reason the ledgers up to `recorded` still exist, and what the operator can do."""
    newest = max(log.ledgers)
    mark = parse_position(log.mark_delete)
    lac = parse_position(log.last_confirmed)
    if newest <= recorded:
        return CAUSE_NOT_ROLLED, (
            "wait for the ledger to roll over (managedLedgerMaxLedgerRolloverTimeMinutes, "
            f"managedLedgerMaxEntriesPerLedger), or roll it now: {reload_command(log)}")
    if mark is not None and lac is not None and mark >= lac:
        return CAUSE_TRIM_PENDING, (
            "nothing to do: the cursor has consumed everything and the old ledgers are deleted at the next "
            "trim (after a rollover); check again in a few minutes")
    if mark is not None and mark[0] > recorded:
        return CAUSE_TRIM_PENDING, "nothing to do: the cursor has passed the batched ledgers; check again shortly"
    if log.ongoing_txns:
        advice = ("let the open transactions commit, abort or time out; list them with "
                  "`pulsar-txn slow-transactions -t 1m` and abort a stuck one with "
                  "`pulsar-txn abort-transaction -m MOST -l LEAST`")
        if log.kind == COORDINATOR and batch_index is not True:
            advice += ("; but beware: " + OPEN_ACROSS_SWITCH)
        return CAUSE_OPEN_TXN, advice
    if log.kind == COORDINATOR and batch_index is not False:
        return CAUSE_CURSOR_STUCK, (
            "look for slow transactions (`pulsar-txn slow-transactions -t 1m`) and abort the "
            "stuck ones; the cursor moves once their records are deleted")
    if log.kind == COORDINATOR:
        return CAUSE_BATCH_INDEX, BATCH_INDEX_ADVICE
    return CAUSE_CURSOR_STUCK, (
        f"the pending-ack log is trimmed only up to its sparse index, which gains a point every "
        f"transactionPendingAckLogIndexMinLag records (default 500) and moves once the subscription's "
        f"mark-delete position passes it: a subscription with few transactional acknowledgements keeps its "
        f"old ledgers until then; check its consumers and backlog (`pulsar-admin topics stats {log.topic}`) "
        f"and slow transactions that hold acknowledgements")


# facts §3.3, confirmed on a real Pulsar 4.0.7 broker (docs/real-broker-findings.md): with
# acknowledgmentAtBatchIndexLevelEnabled=false, once TC batching is off and the coordinator reloaded,
# deletes of records inside batched entries are no-ops, so a transaction open across the switch pins
# the TC log's cursor for good; with it true, the same sequence trims every batched ledger.
OPEN_ACROSS_SWITCH = (
    "with acknowledgmentAtBatchIndexLevelEnabled=false (or unknown), records of these transactions that sit "
    "in batched entries cannot be deleted once batching is off, so when they end the cursor stays pinned for "
    "good (seen on a real Pulsar 4.0.7 broker); set acknowledgmentAtBatchIndexLevelEnabled=true in every "
    "broker.conf and restart the brokers while they are still open (with it true the real broker trimmed "
    "every batched ledger)")
BATCH_INDEX_ADVICE = (
    "this is the batch-index deletion stall of facts §3.3, confirmed on a real Pulsar 4.0.7 broker: with "
    "acknowledgmentAtBatchIndexLevelEnabled=false, deletes of records inside batched TC-log entries are "
    "no-ops once batching is off, so the cursor stays in the batched ledger while its individually deleted "
    "ranges grow, and it never ends by itself. Set acknowledgmentAtBatchIndexLevelEnabled=true in every "
    "broker.conf and restart the brokers (it is not dynamic): the coordinator reopens its log with "
    "batch-index deletion and replays the pinned records, and the transactions they belonged to come back "
    "as OPEN; abort those (`pulsar-txn slow-transactions -t 1s`, then `pulsar-txn abort-transaction -m M "
    "-l L`) and the cursor moves on (verified on a real broker, docs/real-broker-findings.md). Next time, "
    "set it before disabling batching, or end every open transaction before the switch")


def cause_text(cause: str, log: LogObservation, recorded: int) -> str:
    return {
        CAUSE_NOT_ROLLED: f"ledger {recorded} is still the current ledger; it has not rolled over yet",
        CAUSE_TRIM_PENDING: "the cursor is past the batched entries; the old ledgers are not trimmed yet",
        CAUSE_OPEN_TXN: f"{log.ongoing_txns} open transaction(s) keep the cursor "
                        f"at {log.mark_delete} (last confirmed {log.last_confirmed})",
        CAUSE_BATCH_INDEX: f"the cursor is pinned at {log.mark_delete} (last confirmed {log.last_confirmed}"
                           f"{_ranges(log)}), likely the batch-index deletion stall",
        CAUSE_CURSOR_STUCK: f"the cursor does not move ({log.mark_delete}, last confirmed {log.last_confirmed})",
    }.get(cause, cause)


def _ranges(log: LogObservation) -> str:
    ranges = (log.individually_deleted or "").strip()
    if not ranges or ranges == "[]":
        return ""
    count = ranges.count("..")
    return f"; {count} individually deleted range(s) after it" if count else ""


def _missing(obs: Observations, checkpoint: Checkpoint | None) -> list[ItemVerdict]:
    """Recorded items the check did not see: they may have been missed, so they are not clear."""
    if checkpoint is None:
        return []
    seen = {log.key for log in obs.logs}
    items = []
    for cid, record in sorted(checkpoint.coordinators.items()):
        log = LogObservation(COORDINATOR, coordinator_id=cid)
        if log.key not in seen:
            items.append(_missing_item(log, record, "the coordinator was recorded but not found now"))
    for (topic, sub), record in sorted(checkpoint.subscriptions.items(), key=lambda kv: tuple(map(natural_key, kv[0]))):
        log = LogObservation("subscription", topic=topic, subscription=sub)
        if log.key not in seen:
            items.append(_missing_item(log, record, "the subscription was recorded but not found now"))
    return items


def _missing_item(log: LogObservation, record: Record, why: str) -> ItemVerdict:
    return ItemVerdict(log, None, record.last_batched_ledger_id, False, why, CAUSE_MISSING,
                       "if it was deleted on purpose, `pulsar-txn downgrade reset` and check again "
                       "(a new record is taken; that only delays SAFE, it never hastens it)")


def verdict_line(verdict) -> str:
    items = verdict.items
    held = sum(not i.clear for i in items)
    counts = f"{len(verdict.coordinators)} coordinator(s), {len(verdict.subscriptions)} subscription(s)"
    if verdict.verdict == "SAFE":
        return (f"SAFE: {verdict.target} can be downgraded: every ledger that may hold batched entries is gone "
                f"({counts})")
    if verdict.verdict == "WAIT":
        why = f"{held} of {len(items)} logs still hold ledgers that may contain batched entries" if held else \
            f"{len(verdict.problems)} problem(s) above"
        return f"WAIT: {verdict.target} cannot be downgraded yet: {why}; check again later (--wait polls)"
    return (f"BLOCKED: {verdict.target} cannot be downgraded until an operator acts: "
            f"{verdict.problems[0] if verdict.problems else 'see above'}")


# ---------------------------------------------------------------------------------------------
# Upgrade


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
        return {"verdict": self.verdict, "target": self.target, "brokers": self.brokers,
                "coordinators": self.coordinators, "subscriptions": self.subscriptions,
                "problems": list(self.problems), "fixes": list(self.fixes)}


def upgrade_verdict(obs: Observations) -> UpgradeVerdict:
    """PIP-160's upgrade order: one broker version everywhere, then batching on in every broker's
    runtime configuration, then effective on every coordinator and transactional subscription."""
    findings = _Findings()
    versions = _versions(obs, findings)
    _step1_config(obs, findings, want=True)
    if not any(lacks_batched_logs(b.version) for b in obs.brokers):  # else: upgrade first, reloads cannot help
        _step1_effective(obs, findings, want=True)
    for log in obs.logs:
        if log.error:
            findings.waiting.append(f"{log.label}: {log.error}")
    if not obs.coordinators:
        findings.waiting.append("no transaction coordinator was found on the target")
    # Not-yet-enabled settings are the normal state of an upgrade in progress: INCOMPLETE.
    incomplete = findings.blocked + findings.waiting + list(obs.problems)
    blocked = []
    if len(versions) > 1 and _batching_anywhere(obs):
        blocked.append(f"batching is on while the brokers run {len(versions)} versions ({', '.join(sorted(versions))}): "
                       "brokers of the old version cannot read batched logs; turn it off until every broker is upgraded")
        for key in BATCH_KEYS:
            findings.fix(disable_command(key))
    problems = blocked + incomplete
    verdict = BLOCKED if blocked else INCOMPLETE if problems else COMPLETE
    brokers = [{"broker": b.broker, "version": b.version,
                **{key: (b.runtime or {}).get(key) for key in BATCH_KEYS}, "error": b.error} for b in obs.brokers]
    return UpgradeVerdict(verdict, obs.target, brokers, [_effective_json(log) for log in obs.coordinators],
                          [_effective_json(log) for log in obs.subscriptions], problems, findings.fixes)


def _versions(obs: Observations, findings: _Findings) -> set[str]:
    versions = {b.version for b in obs.brokers if b.version}
    for broker in obs.brokers:
        if not broker.version and not broker.error:
            findings.waiting.append(f"broker {broker.broker} did not report its version")
    if len(versions) > 1:
        findings.waiting.append(f"the brokers run {len(versions)} versions ({', '.join(sorted(versions))}): "
                                "finish the rolling upgrade before enabling batching")
    return versions


def _batching_anywhere(obs: Observations) -> bool:
    configs = [obs.dynamic_config or {}] + [b.runtime or {} for b in obs.brokers]
    on_in_config = any(config_flag(c.get(key)) for c in configs for key in BATCH_KEYS)
    return on_in_config or any(log.effective_batching for log in obs.logs)


def _effective_json(log: LogObservation) -> dict:
    head = ({"coordinatorId": log.coordinator_id} if log.kind == COORDINATOR
            else {"topic": log.topic, "subscription": log.subscription})
    return {**head, "effectiveBatching": log.effective_batching, "reason": log.error or log.effective_reason}


# ---------------------------------------------------------------------------------------------
# --verify-entries


@dataclass(frozen=True)
class EntryScan:
    """What decoding the given dumps found: batched entries per ledger, and decode failures."""

    batched: dict  # ledgerId -> (managed ledger name or None, number of batched entries)
    entries: int
    decode_errors: int
    error: str | None = None  # the dumps could not be read at all


def apply_entry_scan(result: DowngradeVerdict, scan: EntryScan) -> DowngradeVerdict:
    """Fail the verdict when a batched entry sits in a ledger the ledger ids said was past the
    last batched one (batching was on after the record), or when the dumps could not be read."""
    from dataclasses import replace

    blocked, waiting = [], []
    if scan.error:
        waiting.append(f"--verify-entries: {scan.error}")
    if scan.decode_errors:
        waiting.append(f"--verify-entries: {scan.decode_errors} of {scan.entries} entries could not be decoded, "
                       "so they may be batched")
    owner = {ledger: item for item in result.items for ledger in (item.observation.ledgers or ())}
    items = {id(i): i for i in result.items}
    for ledger, (_managed_ledger, count) in sorted(scan.batched.items()):
        item = owner.get(ledger)
        if item is None or item.last_batched_ledger_id is None:
            continue  # a ledger already deleted, or not recorded yet (already not clear)
        if ledger > item.last_batched_ledger_id:
            blocked.append(
                f"--verify-entries: {count} batched entr{'y' if count == 1 else 'ies'} in ledger {ledger} of "
                f"{item.observation.label}, after its recorded last batched ledger {item.last_batched_ledger_id}: "
                "batching was on after the record, so the record cannot be trusted; make sure batching is off, "
                "then `pulsar-txn downgrade reset` and check again")
            items[id(item)] = replace(item, clear=False, cause=CAUSE_INCONSISTENT,
                                      reason=f"batched entries found in ledger {ledger}")
    if not blocked and not waiting:
        return result
    fixed = lambda group: [items[id(i)] for i in group]  # noqa: E731
    verdict = BLOCKED if blocked or result.verdict == BLOCKED else WAIT
    return replace(result, verdict=verdict, coordinators=fixed(result.coordinators),
                   subscriptions=fixed(result.subscriptions), problems=result.problems + blocked + waiting)
