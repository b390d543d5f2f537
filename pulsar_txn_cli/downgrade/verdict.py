"""The downgrade verdict: a pure function of the observations and the checkpoint.

In order: step 1 (batching configured and effective off: step1.py); the records (taken once step 1 is
clean, raised when batching may have run since the last check: batched_since.py); each log's state, clear
or held with a cause, from its observation and record alone (causes.py, where the argument for SAFE is
written); the verdict, from those states and step 1's findings only; the reasons and advice an operator
reads, rendered last (advice.py).

It fails closed. SAFE is returned only when every fact it rests on was observed
and checked; an error, a missing answer, an unknown state or an inconsistent checkpoint turns it
into WAIT (something may settle by itself: retry) or BLOCKED (an operator must act).
"""

from __future__ import annotations

from dataclasses import dataclass

from pulsar_txn_cli.downgrade import advice
from pulsar_txn_cli.downgrade.batched_since import LABEL, baseline, newest_possibly_batched, since_last_check
from pulsar_txn_cli.downgrade.causes import (
    CAUSE_BATCH_INDEX,
    CAUSE_INCONSISTENT,
    CAUSE_MISSING,
    CAUSE_OPEN_ACROSS,
    CAUSE_OVERDUE,
    STALL_ACROSS,
    STALL_PINNED,
    Fleet,
    LogState,
    holds_no_batch,
    log_state,
    missing_state,
)
from pulsar_txn_cli.downgrade.checkpoint import Checkpoint, Record
from pulsar_txn_cli.downgrade.observations import (
    COORDINATOR,
    PENDING_ACK_WRITER,
    TC_WRITER,
    LogObservation,
    Observations,
)
from pulsar_txn_cli.downgrade.second_coordinator import rollback_blockers
from pulsar_txn_cli.downgrade.step1 import Findings, check_configuration, check_effective
from pulsar_txn_cli.names import across_brokers, parse_bool
from pulsar_txn_cli.natural import natural_key
from pulsar_txn_cli.output.units import iso_ms
from pulsar_txn_cli.protocol import BATCH_INDEX_KEY, BATCH_KEYS

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
    # Batching is off and effective everywhere and nothing but stored entries keeps it from SAFE: a reading
    # of every remaining ledger that finds no batched entry settles it (downgrade/confirm.py).
    reading_decides: bool = False

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
    batching_off = findings.step1_clean  # both settings off and effective on every broker: nothing batches now
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
            {log.key: min(log.ledgers) for log in obs.logs if holds_no_batch(log, since)}
        )
    if usable is not None:
        usable = usable.with_marks(obs.logs, obs.taken_at)

    # Each log's state from its observation and record alone; the verdict follows from the states.
    fleet = Fleet(_batch_index_deletion(obs), since)
    states = [log_state(log, usable.record_for(log.key) if usable else None, fleet) for log in obs.logs]
    states += _missing(obs, usable)
    engine = obs.target.startswith("engine ")  # an engine directory; a served engine is a cluster by URL
    _stalls(states, findings, [b.version for b in obs.brokers if b.version], engine=engine)
    _switch_would_stall(obs, findings, fleet.batch_index, engine=engine)
    findings.waiting += [f"{s.log.label}: {advice.reason(s)}" for s in states if s.cause == CAUSE_MISSING]
    # Beside PIP-160's logs, after the records are taken (it has nothing to do with batching): Pulsar 5.0's
    # scalable-topics coordinator's open transactions, which a rollback to 4.x keeps open for good.
    blocked, waiting = rollback_blockers(obs.second_coordinator)
    findings.blocked += blocked
    findings.waiting += waiting

    items = [_render(s, fleet) for s in states]
    coordinators = [i for i in items if i.observation.kind == COORDINATOR]
    subscriptions = [i for i in items if i.observation.kind != COORDINATOR]
    problems = findings.blocked + findings.waiting + list(obs.problems)
    if findings.blocked:
        verdict = BLOCKED
    elif problems or not all(s.clear for s in states):
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
        reading_decides=verdict == WAIT and batching_off and not findings.blocked and not waiting and not obs.problems,
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


# The order stalls are told in: an inconsistent record, the batch-index deletion stall as a log's cause,
# then as the cursor of a log held otherwise shows it, then transactions long past their own timeout.
TURNS = (
    (CAUSE_INCONSISTENT,),
    (CAUSE_OPEN_ACROSS, CAUSE_BATCH_INDEX),
    (STALL_PINNED, STALL_ACROSS),
    (CAUSE_OVERDUE,),
)
BATCH_INDEX_STALLS = TURNS[1] + TURNS[2]


def _stalls(states: list[LogState], findings: Findings, versions: list[str], *, engine: bool) -> None:
    """What only an operator removes makes the verdict BLOCKED: each stall, with its fixes (what removes
    the batch-index deletion stall goes before every other fix)."""
    for turn in TURNS:
        for state in states:
            for stall in (s for s in state.stalls if s in turn):
                findings.blocked.append(advice.stall_problem(state, stall))
                for command in advice.overdue_fixes(state, versions) if stall == CAUSE_OVERDUE else ():
                    findings.fix(command)
    more = advice.unlisted_overdue(states, versions)
    if more:
        findings.blocked.append(more[0])
        findings.fix(more[1])
    if any(stall in BATCH_INDEX_STALLS for state in states for stall in state.stalls):
        _stall_fixes_first(findings, engine)


def _switch_would_stall(obs: Observations, findings: Findings, batch_index: bool | None, *, engine: bool) -> None:
    """The fixes turn batching off: with transactions open and batch-index deletion off, that would pin
    the TC log once they end, and the switch refuses it (batchlog/risk.py), so the fixes turn
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
    findings.fixes[:0] = [f for f in advice.stall_fixes(engine) if f not in findings.fixes]


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
    """acknowledgmentAtBatchIndexLevelEnabled across the brokers."""
    return across_brokers([parse_bool((b.runtime or {}).get(BATCH_INDEX_KEY)) for b in obs.brokers])


def _render(state: LogState, fleet: Fleet) -> ItemVerdict:
    """A log's state as the operator reads it: its reason and advice."""
    return ItemVerdict(
        state.log,
        state.oldest,
        state.recorded,
        state.clear,
        advice.reason(state),
        state.cause,
        advice.advice_for(state, fleet.batch_index),
    )


def _missing(obs: Observations, checkpoint: Checkpoint | None) -> list[LogState]:
    """Recorded logs the check did not see: they may have been missed, so they are not clear."""
    if checkpoint is None:
        return []
    seen = {log.key for log in obs.logs}
    recorded = [
        (LogObservation(COORDINATOR, coordinator_id=cid), r) for cid, r in sorted(checkpoint.coordinators.items())
    ]
    recorded += [
        (LogObservation("subscription", topic=topic, subscription=sub), r)
        for (topic, sub), r in sorted(checkpoint.subscriptions.items(), key=lambda kv: tuple(map(natural_key, kv[0])))
    ]
    return [missing_state(log, record) for log, record in recorded if log.key not in seen]


def verdict_line(verdict) -> str:
    items = verdict.items
    held = sum(not i.clear for i in items)
    counts = f"{len(verdict.coordinators)} coordinator(s), {len(verdict.subscriptions)} subscription(s)"
    if verdict.verdict == "SAFE" and verdict.reading_decides:  # a WAIT the stored entries settled
        return (
            f"SAFE: {verdict.target} can be downgraded: no remaining ledger holds a batched entry, as read ({counts})"
        )
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
