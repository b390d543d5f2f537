"""downgrade: the batch-log and downgrade state the tool already knows, as findings.

Only while a downgrade is under way on this target (a checkpoint from `downgrade check` exists):
then the logs that hold it back are findings, with `downgrade check`'s own causes and advice
(downgrade/verdict.py judges; nothing is judged again here, and the checkpoint is not written).
"""

from __future__ import annotations

from pulsar_txn_cli import calls
from pulsar_txn_cli.doctor.findings import ERROR, WARNING, CheckRun, Finding, evidence
from pulsar_txn_cli.downgrade.causes import CAUSE_MISSING

CHECK = "downgrade"


def downgrade(admin, concurrency: int) -> tuple[CheckRun, list[Finding]]:
    from pulsar_txn_cli.downgrade import checkpoint as cp_store
    from pulsar_txn_cli.downgrade import gather
    from pulsar_txn_cli.downgrade.verdict import downgrade_verdict

    path = cp_store.default_path(admin.identity())
    if not path.exists():
        why = "no downgrade under way on this target (no checkpoint; `pulsar-txn downgrade check` starts one)"
        return CheckRun(CHECK, False, why), []
    try:
        before, error = cp_store.load(path), None
    except cp_store.CheckpointError as exc:
        before, error = None, str(exc)
    observations = gather.gather(admin, concurrency=concurrency, versions=True)
    verdict = downgrade_verdict(observations, before, checkpoint_error=error)
    return CheckRun(CHECK), findings_of(verdict, str(path))


def findings_of(verdict, checkpoint: str) -> list[Finding]:
    """One finding per log that holds the downgrade back: an error when the verdict blocks on it (a problem
    opens with its label), else a warning (a WAIT cause clears as ledgers roll and are trimmed, or as
    transactions end, even while another log blocks the verdict); each carries the fixes of its own cause
    only. The verdict's problems about one of those logs are folded into its finding; the others (step 1,
    the checkpoint) follow, with the verdict's fixes when it is BLOCKED."""
    if verdict.verdict == "SAFE":
        return []
    out = []
    told: set[str] = set()
    for item in verdict.items:
        if item.clear:
            continue
        obs = item.observation
        own = [p for p in verdict.problems if p.startswith(f"{obs.label}: ")]
        told.update(own)
        blocked = verdict.verdict == "BLOCKED" and bool(own) and item.cause != CAUSE_MISSING
        more = [p.removeprefix(f"{obs.label}: ") for p in own if p != f"{obs.label}: {item.reason}"]
        where = (  # the request downgrade/gather.py made of this log
            calls.COORDINATOR_INTERNAL_STATS.request_line(coordinator_id=obs.coordinator_id)
            if obs.coordinator_id is not None
            else calls.PENDING_ACK_INTERNAL_STATS.request_line(topic=obs.topic, subscription=obs.subscription)
        )
        data = item.to_json()
        out.append(
            Finding(
                CHECK,
                ERROR if blocked else WARNING,
                obs.label,
                f"downgrade {'BLOCKED' if blocked else 'WAIT'}: {item.reason}"
                + (f" (cause {item.cause})" if item.cause else "")
                + "".join(f"; {m}" for m in more),
                [
                    evidence(
                        where,
                        oldestLedgerId=data["oldestLedgerId"],
                        lastBatchedLedgerId=data["lastBatchedLedgerId"],
                        markDeletePosition=data["markDeletePosition"],
                        lastConfirmedEntry=data["lastConfirmedEntry"],
                    ),
                    evidence(checkpoint, cause=item.cause),
                ],
                item_fixes(item, verdict.fixes) or (list(verdict.fixes) if blocked else []),
                item.advice,
            )
        )
    severity = ERROR if verdict.verdict == "BLOCKED" else WARNING
    for problem in verdict.problems:
        if problem in told:
            continue  # the log's own finding says it
        fixes = list(verdict.fixes) if severity == ERROR else []
        advice = None if fixes else "it may settle by itself: `pulsar-txn downgrade check` tells when"
        out.append(Finding(CHECK, severity, "downgrade", problem, [], fixes, advice))
    return out


def item_fixes(item, fixes: list[str]) -> list[str]:
    """The verdict's fixes that address this log's cause (the others belong to other logs)."""
    from pulsar_txn_cli.downgrade import advice, causes

    cause, obs = item.cause, item.observation
    if cause in (causes.CAUSE_OPEN_ACROSS, causes.CAUSE_BATCH_INDEX):
        stall = [f for f in fixes if f in advice.stall_fixes(True) + advice.stall_fixes(False)]
        return stall or advice.stall_fixes(False)
    if cause == causes.CAUSE_OVERDUE:
        mine = {f"-m {most} -l {least} " for most, least in map(_txn, obs.overdue_txns)}
        return [f for f in fixes if any(m in f + " " for m in mine) or "abort-hanging" in f or _reloads(f, obs)]
    if cause == causes.CAUSE_NOT_ROLLED:
        return [advice.reload_command(obs)]
    return []


def _txn(text: str) -> tuple[int, int]:
    from pulsar_txn_cli.names import TxnID

    return TxnID.parse(text)


def _reloads(fix: str, obs) -> bool:
    from pulsar_txn_cli.downgrade.advice import reload_command

    return fix == reload_command(obs)
