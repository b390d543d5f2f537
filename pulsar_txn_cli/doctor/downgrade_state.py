"""downgrade: the batch-log and downgrade state the tool already knows, as findings.

Only while a downgrade is under way on this target (a checkpoint from `downgrade check` exists):
then the logs that hold it back are findings, with `downgrade check`'s own causes and advice
(downgrade/verdict.py judges; nothing is judged again here, and the checkpoint is not written).
"""

from __future__ import annotations

from pulsar_txn_cli.doctor.findings import ERROR, WARNING, CheckRun, Finding, evidence

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
    """A WAIT log is a warning (it clears as ledgers roll and are trimmed); BLOCKED needs an operator."""
    if verdict.verdict == "SAFE":
        return []
    severity = ERROR if verdict.verdict == "BLOCKED" else WARNING
    endpoint = "GET /admin/v3/transactions/{}".format
    out = []
    for item in verdict.items:
        if item.clear:
            continue
        obs = item.observation
        where = (
            endpoint(f"coordinatorInternalStats/{obs.coordinator_id}")
            if obs.coordinator_id is not None
            else endpoint(f"pendingAckInternalStats/{obs.topic}/{obs.subscription}")
        )
        data = item.to_json()
        out.append(
            Finding(
                CHECK,
                severity,
                obs.label,
                f"downgrade {verdict.verdict}: {item.reason}" + (f" (cause {item.cause})" if item.cause else ""),
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
                list(verdict.fixes) or ["pulsar-txn downgrade check"],
                item.advice,
            )
        )
    for problem in verdict.problems:
        out.append(Finding(CHECK, severity, "downgrade", problem, [], ["pulsar-txn downgrade check"]))
    return out
