"""The downgrade verdict: a pure function of the observations and the checkpoint.

It fails closed. SAFE is returned only when every fact it rests on was observed
and checked; an error, a missing answer, an unknown state or an inconsistent checkpoint turns it
into WAIT (something may settle by itself: retry) or BLOCKED (an operator must act).
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.downgrade.advice import (
    CAUSE_BATCH_INDEX,
    CAUSE_ERROR,
    CAUSE_OPEN_ACROSS,
    CAUSE_OVERDUE,
    CAUSE_INCONSISTENT,
    CAUSE_MISSING,
    CAUSE_NOT_RECORDED,
    cause_text,
    diagnose,
    open_across_switch,
    pinned_without_open_transactions,
    stall_fixes,
)
from pulsar_txn_cli.downgrade.batched_since import LABEL, baseline, newest_possibly_batched, since_last_check
from pulsar_txn_cli.downgrade.checkpoint import Checkpoint, Record
from pulsar_txn_cli.downgrade.observations import (
    COORDINATOR,
    PENDING_ACK_WRITER,
    TC_WRITER,
    LogObservation,
    Observations,
)
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS
from pulsar_txn_cli.downgrade.step1 import Findings, check_configuration, check_effective
from pulsar_txn_cli.doctor.transactions import abort_fix, abort_supported
from pulsar_txn_cli.names import parse_bool
from pulsar_txn_cli.natural import natural_key
from pulsar_txn_cli.output.units import iso_ms

SAFE, WAIT, BLOCKED = "SAFE", "WAIT", "BLOCKED"


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
        head = (
            {"coordinatorId": obs.coordinator_id}
            if obs.kind == COORDINATOR
            else {"topic": obs.topic, "subscription": obs.subscription}
        )
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


def downgrade_verdict(
    obs: Observations, checkpoint: Checkpoint | None, *, checkpoint_error: str | None = None
) -> DowngradeVerdict:
    """PIP-160's downgrade steps 1 and 2-1..2-7 over one set of observations.

    Returns the verdict and the checkpoint to save (records added for items seen for the first
    time once batching is confirmed off; all records dropped when batching is seen on again).
    """
    findings = Findings()
    usable, writable = _check_checkpoint(obs, checkpoint, checkpoint_error, findings)
    check_configuration(obs, findings, want=False)
    check_effective(obs, findings, want=False)
    if not obs.coordinators:
        findings.blocked.append(
            "no transaction coordinator was found on the target (is transactionCoordinatorEnabled=true?)"
        )

    if findings.batching_seen_on and usable is not None and usable.size:
        findings.blocked.append(
            "batching is on again, so the ledgers recorded earlier no longer mark the last batched "
            "ledgers: the records were dropped and are taken again once batching is effectively off"
        )
        usable = usable.without_records()

    if usable is not None:
        usable = _batching_since_last_check(obs, usable, findings)

    since = obs.unbatched_since_ms if findings.step1_clean else None
    new_records = {}
    if findings.step1_clean and usable is not None:
        for log in obs.logs:
            if usable.record_for(log.key) is None and not log.error and log.ledgers:
                new_records[log.key] = Record(max(log.ledgers), obs.taken_at)
        usable = usable.with_records(new_records)
        # A log whose only ledger holds no batched entry has no batched ledger at all: recorded as
        # such, it stays clear once that ledger rolls over, as an idle ledger does on its own after
        # managedLedgerMaxLedgerRolloverTimeMinutes, and the metrics rule no longer applies.
        usable = usable.with_nothing_batched_before(
            {log.key: min(log.ledgers) for log in obs.logs if _holds_no_batch(log, since)}
        )
    if usable is not None:
        usable = usable.with_marks(obs.logs, obs.taken_at)

    batch_index = _batch_index_deletion(obs)
    coordinators = [_item(log, usable, findings, batch_index, since) for log in obs.coordinators]
    subscriptions = [_item(log, usable, findings, batch_index, since) for log in obs.subscriptions]
    engine = obs.target.startswith("engine ")  # an engine directory; a served engine is a cluster by URL
    _stalls(coordinators, findings, batch_index, engine=engine, unbatched_since=since)
    _overdue(coordinators, findings, [b.version for b in obs.brokers if b.version])
    _switch_would_stall(obs, findings, batch_index, engine=engine)
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
    return DowngradeVerdict(
        verdict,
        obs.target,
        coordinators,
        subscriptions,
        problems,
        findings.fixes,
        usable if writable else None,
        len(new_records),
        obs.key,
    )


def _batching_since_last_check(obs: Observations, checkpoint: Checkpoint, findings: Findings) -> Checkpoint:
    """Records taken by an earlier check, raised to the newest ledger a batch written since then may be in
    (downgrade/batched_since.py), and the counters kept for the next check. Counters that cannot be read
    now are told by a later check; until then the verdict waits."""
    held_back = set()  # writers with a record the evidence could not be applied to: their old counters are kept
    for writer, logs, recorded in (
        (TC_WRITER, obs.coordinators, checkpoint.coordinators),
        (PENDING_ACK_WRITER, obs.subscriptions, checkpoint.subscriptions),
    ):
        if not recorded:
            continue
        evidence = since_last_check(checkpoint.writers, obs.writers, writer)
        if evidence.unknown:
            findings.waiting.append(
                f"whether the {LABEL[writer]} logs were batched since the last check cannot be told yet "
                f"({'; '.join(evidence.unknown)}): a check that reads every broker's buffered-writer metrics tells"
            )
        if evidence.end is None:
            continue
        last_check_ms = iso_ms(checkpoint.writers_at)
        raised = {
            log.key: newest_possibly_batched(log, evidence.end, last_check_ms)
            for log in logs
            if not log.error and log.ledgers and checkpoint.record_for(log.key) is not None
        }
        if len(raised) < len(recorded):
            held_back.add(writer)  # a log not seen now is raised once it is seen: the evidence must survive till then
        # The logs this holds back again: a record that rises but still lies below every ledger changes nothing.
        again = sum(
            checkpoint.record_for(log.key).last_batched_ledger_id < raised[log.key] >= min(log.ledgers)
            for log in logs
            if log.key in raised
        )
        checkpoint = checkpoint.with_raised(raised, obs.taken_at)
        if again:
            findings.waiting.append(
                f"batching may have run since the last check ({'; '.join(evidence.why)}): the last batched ledger "
                f"of {again} {LABEL[writer]} log(s) was recorded again, so the downgrade starts over for them"
            )
    kept = baseline(obs.writers, checkpoint.writers, keep=held_back)
    carried = held_back or any(w.error for w in obs.writers or ())  # some rows are the last check's: keep its time
    return checkpoint.with_writers(kept, checkpoint.writers_at if carried else obs.taken_at)


def _stalls(
    items: list[ItemVerdict],
    findings: Findings,
    batch_index: bool | None,
    *,
    engine: bool,
    unbatched_since: int | None = None,
) -> None:
    """A stall that time and traffic never clear needs an operator: BLOCKED, with what removes it.
    Transactions open across the switch count even before the log is recorded (step 1 may still block
    on the other log): its fixes alone would not lead anywhere."""
    # With transactions open, the batch-index cause is diagnosed only where the cursor provably outlived
    # every transaction open when it stopped (advice.diagnose); with their number unknown it stays WAIT.
    stalled = [
        i
        for i in items
        if i.cause == CAUSE_OPEN_ACROSS or (i.cause == CAUSE_BATCH_INDEX and i.observation.ongoing_txns is not None)
    ]
    for item in stalled:
        findings.blocked.append(f"{item.observation.label}: {item.reason}")
    for item in items:
        log = item.observation
        if item not in stalled and not item.clear and pinned_without_open_transactions(log, batch_index):
            stalled.append(item)
            findings.blocked.append(
                f"{log.label}: the cursor is pinned at {log.mark_delete} (last confirmed {log.last_confirmed}) with "
                "no transaction open and acknowledgmentAtBatchIndexLevelEnabled=false: the batch-index deletion stall"
            )
        elif item not in stalled and not item.clear and open_across_switch(log, batch_index, unbatched_since):
            stalled.append(item)
            findings.blocked.append(
                f"{item.observation.label}: {item.observation.ongoing_txns} transaction(s) open since before the "
                "coordinator reopened without batching, with acknowledgmentAtBatchIndexLevelEnabled=false: when "
                "they end, the cursor stays pinned for good (the batch-index deletion stall)"
            )
    if stalled:
        _stall_fixes_first(findings, engine)


SHOWN_OVERDUE = 5  # abort fixes listed per coordinator; the reason counts them all
LIST_HANGING = "pulsar-txn abort-hanging --state OPEN"  # a dry run: what the next one aborts
ABORT_ALL_HANGING = f"{LIST_HANGING} --execute --yes"


def _overdue(items: list[ItemVerdict], findings: Findings, versions: list[str]) -> None:
    """Transactions long past their own timeout never end by themselves: BLOCKED, with their aborts.
    Beyond the few listed one by one, the count of the others and the one command that aborts them all."""
    unlisted = 0
    for item in items:
        if item.cause != CAUSE_OVERDUE:
            continue
        findings.blocked.append(f"{item.observation.label}: {item.reason}")
        overdue = item.observation.overdue_txns
        for txn_id in overdue[:SHOWN_OVERDUE]:
            for command in abort_fix(txn_id, versions):
                findings.fix(command)
        unlisted += max(len(overdue) - SHOWN_OVERDUE, 0)
    if unlisted and abort_supported(versions):
        # Every overdue transaction is past its own timeout, so abort-hanging's default bound (half of it)
        # selects each of them (and any other transaction open that long).
        findings.blocked.append(
            f"{unlisted} more overdue transaction(s) than the aborts listed one by one: "
            f"`{ABORT_ALL_HANGING}` aborts every one of them (`{LIST_HANGING}` lists them first)"
        )
        findings.fix(ABORT_ALL_HANGING)


def _switch_would_stall(obs: Observations, findings: Findings, batch_index: bool | None, *, engine: bool) -> None:
    """The fixes turn batching off: with transactions open and batch-index deletion off, that would pin
    the TC log once they end, and the switch refuses it (admin/batchlog/risk.py), so the fixes turn
    batch-index deletion on first."""
    turning_off = any(
        ("--disable" in f and "batch-log" in f) or any(k in f for k in BATCH_KEYS) for f in findings.fixes
    )
    open_now = [log for log in obs.coordinators if log.ongoing_txns]
    if not turning_off or batch_index is True or not open_now:
        return
    labels = ", ".join(log.label for log in open_now[:3]) + (
        f" and {len(open_now) - 3} more" if len(open_now) > 3 else ""
    )
    findings.blocked.append(
        f"{labels}: transactions are open while acknowledgmentAtBatchIndexLevelEnabled is "
        f"{'false' if batch_index is False else 'unknown'}; turning batching off now would pin the TC log for "
        "good once they end (the batch-index deletion stall): turn batch-index deletion on first"
    )
    _stall_fixes_first(findings, engine)


def _stall_fixes_first(findings: Findings, engine: bool) -> None:
    """What removes a stall goes before every other fix: the switch refuses to turn batching off until then."""
    findings.fixes[:0] = [f for f in stall_fixes(engine) if f not in findings.fixes]


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
            "use its own --checkpoint file, or `pulsar-txn downgrade reset` to start over"
        )
        return None, False
    return checkpoint, True


def _batch_index_deletion(obs: Observations) -> bool | None:
    """acknowledgmentAtBatchIndexLevelEnabled across the brokers: False if any broker has it off."""
    flags = [parse_bool((b.runtime or {}).get(BATCH_INDEX_KEY)) for b in obs.brokers]
    if any(f is False for f in flags):
        return False
    if flags and all(f is True for f in flags):
        return True
    return None


def _item(
    log: LogObservation,
    checkpoint: Checkpoint | None,
    findings: Findings,
    batch_index: bool | None,
    unbatched_since: int | None = None,
) -> ItemVerdict:
    record = checkpoint.record_for(log.key) if checkpoint is not None else None
    recorded = record.last_batched_ledger_id if record else None
    if log.error:
        advice = "retry; if it persists, check that the broker that owns it is healthy"
        if log.kind == COORDINATOR and "not found" in log.error.lower():
            # A real broker loads a coordinator only when a transactional client connects to it
            # (docs/real-broker-findings.md); until then its stats answer 404 or 500.
            advice = (
                "the coordinator is not loaded: it loads when a transactional client connects; "
                "check again once clients are running (or start one)"
            )
        return ItemVerdict(log, None, recorded, False, f"could not read its ledgers: {log.error}", CAUSE_ERROR, advice)
    if not log.ledgers:
        return ItemVerdict(
            log,
            None,
            recorded,
            False,
            "the target reported no ledgers for it",
            CAUSE_ERROR,
            "retry once the log is loaded (a managed ledger always has a current ledger)",
        )
    oldest, newest = min(log.ledgers), max(log.ledgers)
    if _holds_no_batch(log, unbatched_since):
        return ItemVerdict(
            log,
            oldest,
            recorded,
            True,
            f"its only ledger {oldest} was created after the brokers' buffered-writer metrics started, "
            "and they have counted no batch: it holds no batched entry",
        )
    if record is None:
        return ItemVerdict(
            log,
            oldest,
            None,
            False,
            "its last batched ledger is not recorded yet: batching is not confirmed off everywhere",
            CAUSE_NOT_RECORDED,
            "fix what blocks step 1, then check again",
        )
    if recorded > newest:
        findings.blocked.append(
            f"{log.label}: the checkpoint records ledger {recorded}, newer than any of its "
            f"ledgers (newest {newest}); the checkpoint does not match this target"
        )
        return ItemVerdict(
            log,
            oldest,
            recorded,
            False,
            "the checkpoint is inconsistent with its ledgers",
            CAUSE_INCONSISTENT,
            "`pulsar-txn downgrade reset`, then check again",
        )
    if oldest > recorded:
        return ItemVerdict(log, oldest, recorded, True, f"oldest ledger {oldest} > last batched ledger {recorded}")
    held_since = iso_ms(record.mark_since) if record.mark_delete == log.mark_delete else None
    cause, advice = diagnose(log, recorded, batch_index, held_since, unbatched_since)
    return ItemVerdict(
        log,
        oldest,
        recorded,
        False,
        f"oldest ledger {oldest} <= last batched ledger {recorded}: {cause_text(cause, log, recorded)}",
        cause,
        advice,
    )


def _holds_no_batch(log: LogObservation, unbatched_since: int | None) -> bool:
    """Its only ledger was created after every broker's buffered-writer metrics started, and they
    counted no batch: it cannot hold a batched entry (a ledger is written by its creator only)."""
    return (
        unbatched_since is not None
        and not log.error
        and len(log.ledgers) == 1
        and (log.current_created_ms or -1) >= unbatched_since
    )


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
    return ItemVerdict(
        log,
        None,
        record.last_batched_ledger_id,
        False,
        why,
        CAUSE_MISSING,
        "if it was deleted on purpose, `pulsar-txn downgrade reset` and check again "
        "(a new record is taken; that only delays SAFE, it never hastens it)",
    )


def verdict_line(verdict) -> str:
    items = verdict.items
    held = sum(not i.clear for i in items)
    counts = f"{len(verdict.coordinators)} coordinator(s), {len(verdict.subscriptions)} subscription(s)"
    if verdict.verdict == "SAFE":
        return (
            f"SAFE: {verdict.target} can be downgraded: every ledger that may hold batched entries is gone ({counts})"
        )
    if verdict.verdict == "WAIT":
        why = (
            f"{held} of {len(items)} logs still hold ledgers that may contain batched entries"
            if held
            else f"{len(verdict.problems)} problem(s) above"
        )
        return f"WAIT: {verdict.target} cannot be downgraded yet: {why}; check again later (--wait polls)"
    return (
        f"BLOCKED: {verdict.target} cannot be downgraded until an operator acts: "
        f"{verdict.problems[0] if verdict.problems else 'see above'}"
    )
