"""coordinator-not-ready: every coordinator Ready, owned by a broker, one per partition of
transaction_coordinator_assign (apache/pulsar#20851, #23039, #15272). A pure judgement."""

from __future__ import annotations

from pulsar_txn_cli import calls
from pulsar_txn_cli.admin.features import lacks_batched_logs
from pulsar_txn_cli.doctor.findings import ERROR, Finding, evidence
from pulsar_txn_cli.doctor.stores import recovering_for, severity, since_phrase
from pulsar_txn_cli.protocol import LOOKUP as LOOKUP_PATH
from pulsar_txn_cli.protocol import TC_ASSIGN as ASSIGN
from pulsar_txn_cli.protocol import TC_ASSIGN_LOCAL, TC_ASSIGN_PARTITIONS

LOOKUP = f"GET {LOOKUP_PATH}/pulsar/system/{TC_ASSIGN_LOCAL}-partition-{{}}"
PARTITIONS = f"GET {TC_ASSIGN_PARTITIONS}"


def coordinator_not_ready(reading) -> list[Finding]:
    if reading.tc_count == 0:
        return [
            Finding(
                "coordinator-not-ready",
                ERROR,
                ASSIGN,
                "transaction_coordinator_assign has no partitions: no coordinator can load, every transaction fails",
                [evidence(PARTITIONS, partitions=0)],
                [f"pulsar-admin topics create-partitioned-topic {ASSIGN} -p 16"],
                "on a cluster, `pulsar initialize-transaction-coordinator-metadata` creates it; on a standalone, "
                "creating the partitioned topic is the workaround of apache/pulsar#15272",
            )
        ]
    old = [v for v in reading.versions if lacks_batched_logs(v)]
    out = []
    for tc_id in range(reading.tc_count):
        key = str(tc_id)
        stats, error, owner = reading.tc_stats.get(key), reading.tc_errors.get(key), reading.owners.get(key)
        state = (stats or {}).get("state")
        if state == "Ready" and owner:
            continue
        unload = f"pulsar-txn unload --coordinator {tc_id} --yes"
        took = recovering_for(stats or {}, reading.now_ms)
        summary = (
            f"coordinator {tc_id} is "
            + (f"{state}" if state else "not loaded")
            + since_phrase(stats or {}, took)
            + ("" if owner else ", and no broker owns its partition")
            + ": transactions assigned to it fail, and clients stall (apache/pulsar#23039)"
        )
        advice = "an unload of its transaction_coordinator_assign partition makes a broker load it again"
        if old:
            advice += (
                f"; on {', '.join(old)}, which predates PIP-160, a coordinator whose log holds batched entries "
                "(written by 2.11+ with transactionLogBatchedWriteEnabled) can never load: go back to the newer "
                "release, `pulsar-txn set-txn-tc-batch-log --disable --reload --yes`, wait for "
                "`pulsar-txn downgrade check --wait` to say SAFE, then downgrade"
            )
        out.append(
            Finding(
                "coordinator-not-ready",
                severity(stats or {}, reading.now_ms) if stats else ERROR,
                f"coordinator {tc_id}",
                summary,
                [
                    evidence(
                        calls.COORDINATOR_STATS.request_line(coordinator_id=tc_id),
                        state=state,
                        error=error,
                        recoverStartTime=(stats or {}).get("recoverStartTime"),
                        recoverEndTime=(stats or {}).get("recoverEndTime"),
                        ongoingTxnSize=(stats or {}).get("ongoingTxnSize"),
                    ),
                    evidence(LOOKUP.format(tc_id), httpUrl=owner),
                ],
                [unload],
                advice,
            )
        )
    return out
