#!/usr/bin/env python3
"""Regenerate tests/fixtures/real/ from a real harness broker.

    .venv/bin/python tests/integration/capture_fixtures.py [--out tests/fixtures/real]

Starts its own harness broker (retention -1 so no ledger is trimmed, large ledgers so each
phase is one ledger), runs the transactional workload with batching off, then on, then off
again (each phase starts with a coordinator reload and a topic unload, which closes the
previous ledgers), dumps one TC-log ledger and one pending-ack ledger of each kind with
BookieShell, writes MANIFEST.json, and saves the broker's JSON answers for the admin
endpoints under rest/.  `capture(broker, out)` works on any running harness broker.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import harness  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
MAGIC2 = b"\x0e\x01"
PREFIX = "fx"
TOPICS = [f"{PREFIX}-orders", f"{PREFIX}plain", f"{PREFIX}-part"]
SUBS = ["sub-a", "subb"]
CAPTURE_CONF = {
    "defaultRetentionTimeInMinutes": -1,
    "defaultRetentionSizeInMB": -1,
    "managedLedgerMaxEntriesPerLedger": 5000,
    "managedLedgerMaxLedgerRolloverTimeMinutes": 240,
}


def log(msg: str) -> None:
    print(f"capture: {msg}", flush=True)


def ml(stats: dict) -> dict:
    inner = stats.get("transactionLogStats") or stats.get("pendingAckLogStats")
    return inner


def pending_ack_stores(b: harness.PulsarBroker):
    """(topic path, sub) for every partition/topic and subscription of the workload."""
    for t in TOPICS:
        parts = [t]
        if t.endswith("-part"):
            st, meta = b.rest("GET", f"/admin/v2/persistent/public/default/{t}/partitions")
            parts = [f"{t}-partition-{i}" for i in range(meta["partitions"])]
        for p in parts:
            for s in SUBS:
                yield f"public/default/{p}", s


def reload_everything(b: harness.PulsarBroker) -> list[dict]:
    """Unload TC-assign partitions and workload topics (closing their ledgers); reload the TCs."""
    for tc in b.coordinator_ids():
        b.rest("PUT", f"/admin/v2/persistent/pulsar/system/transaction_coordinator_assign-partition-{tc}/unload")
    for t in TOPICS:
        b.unload_topic(f"public/default/{t}")
    time.sleep(1)
    return b.run_workload(ping=2)


def ledgers_of(stats: dict) -> list[int]:
    return [lg["ledgerId"] for lg in ml(stats)["managedLedgerInternalStats"]["ledgers"]]


def _unused_snapshot_ledgers(b):
    snap = {"tc": set(ledgers_of(b.tc_internal_stats(0)))}
    for topic, sub in pending_ack_stores(b):
        st, body = b.rest("GET", f"/admin/v3/transactions/pendingAckInternalStats/{topic}/{sub}")
        if st == 200:
            snap[(topic, sub)] = set(ledgers_of(body))
    return snap


def run_phase(b, name: str, batched: bool, seed: int) -> dict:
    """Reload with the given batch setting, run the workload, dump the ledgers written.

    Verified on 4.0.7: consumed TC-log ledgers are trimmed as soon as the cursor moves to a newer
    ledger even with broker default retention -1, so the dumps are taken from the *current*
    (open) ledgers right after the phase; a ping transaction afterwards moves the
    last-add-confirmed past the workload's last TC-log entry (BookieShell reads without
    recovery, so it sees entries up to LAC only).
    """
    b.set_dynamic_config("transactionLogBatchedWriteEnabled", batched)
    b.set_dynamic_config("transactionPendingAckBatchedWriteEnabled", batched)
    ping = reload_everything(b)
    lines = b.run_workload(seed=seed, txns=14, aborts=4, ops=4, parallel=8 if batched else 2, prefix=PREFIX)
    ping2 = b.run_workload(ping=1)
    log(f"phase {name}: {sum(1 for r in lines if r.get('event') == 'txn')} txns")
    kind = "batched" if batched else "unbatched"
    txns = [txn_record(r) for r in ping + lines + ping2 if r.get("event") == "txn"]
    tc_ledger = ledgers_of(b.tc_internal_stats(0))[-1]
    text, entries = dump_ledger(b, tc_ledger)
    dumps = {"tc": (tc_ledger, text, entries)}
    best = None
    for topic, sub in pending_ack_stores(b):
        st, body = b.rest("GET", f"/admin/v3/transactions/pendingAckInternalStats/{topic}/{sub}")
        if st != 200 or not ledgers_of(body):
            continue
        plid = ledgers_of(body)[-1]
        ptext, pentries = dump_ledger(b, plid)
        if not pentries:
            continue
        score = (max(harness.batch_size(p) for _, _, p in pentries) > 1, len(pentries))
        if best is None or score > best[0]:
            best = (score, (topic, sub), plid, ptext, pentries)
    dumps["pa"] = best
    return {"name": name, "kind": kind, "batched": batched, "txns": txns, "dumps": dumps}


def dump_ledger(b, lid: int):
    text = b.readledger(lid)
    entries = harness.parse_readledger(text)
    return text, entries


def txn_record(r: dict) -> dict:
    return {"most": r["most"], "least": r["least"], "outcome": r["outcome"], "ops": r["ops"]}


def capture_ledgers(b, out: Path, phases: list[dict], manifest: dict) -> None:
    for ph in phases:
        kind, txns = ph["kind"], ph["txns"]
        lid, text, entries = ph["dumps"]["tc"]
        fname = f"tc_log_{kind}.txt"
        (out / fname).write_text(text)
        manifest["files"][fname] = {
            "kind": "transaction_log",
            "managedLedgerName": "pulsar/system/persistent/__transaction_log_0",
            "ledgerId": lid,
            "entries": len(entries),
            "batchedEntries": sum(1 for _, _, p in entries if p.startswith(MAGIC2)),
            "records": sum(harness.batch_size(p) for _, _, p in entries),
            "maxRecordsPerEntry": max(harness.batch_size(p) for _, _, p in entries),
            "txns": txns,
            "note": (
                "txns = every transaction of this phase, in completion order (the first and last "
                "are 'ping' transactions without ops, opened and aborted by the harness); the "
                "ledger was still open when dumped, so its last entry (the final ping's ABORTED "
                "record) may be missing"
            ),
        }
        log(f"{fname}: ledger {lid}, {len(entries)} entries, {len(text)} chars")
        _, (topic, sub), plid, ptext, pentries = ph["dumps"]["pa"]
        fname = f"pending_ack_{kind}.txt"
        (out / fname).write_text(ptext)
        local = topic.split("/")[-1]
        acked = [
            t
            for t in txns
            if any(o["op"] == "ack" and o["topic"].endswith("/" + local) and o["sub"] == sub for o in t["ops"])
        ]
        manifest["files"][fname] = {
            "kind": "pending_ack",
            "managedLedgerName": f"public/default/persistent/{local}-{sub}__transaction_pending_ack",
            "topic": f"persistent://{topic}",
            "subscription": sub,
            "ledgerId": plid,
            "entries": len(pentries),
            "batchedEntries": sum(1 for _, _, p in pentries if p.startswith(MAGIC2)),
            "records": sum(harness.batch_size(p) for _, _, p in pentries),
            "maxRecordsPerEntry": max(harness.batch_size(p) for _, _, p in pentries),
            "txns": acked,
            "note": (
                "txns = transactions of this phase that acked on this topic+subscription (each gives "
                "an ACK record and then a COMMIT or ABORT record); the ledger was open when dumped, "
                "so the newest entry may be missing"
            ),
        }
        log(f"{fname}: {topic} {sub} ledger {plid}, {len(pentries)} entries")


def save(out: Path, name: str, method: str, path: str, status: int, body) -> None:
    (out / f"{name}.json").write_text(
        json.dumps(
            {"request": {"method": method, "path": path}, "status": status, "body": body}, indent=1, sort_keys=False
        )
        + "\n"
    )


def capture_rest(b: harness.PulsarBroker, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    # an open transaction so transactionMetadata / slowTransactions have something to show
    run = b.start_workload(seed=909, txns=0, aborts=0, ops=4, hold=2, parallel=1, prefix=PREFIX)
    held = [r for r in run.wait_holding() if r.get("outcome") == "open"]
    time.sleep(1.5)
    h = held[0]
    most, least = h["most"], h["least"]
    ack_op = next((o for r in held for o in r["ops"] if o["op"] == "ack"), None)
    prod_op = next((o for r in held for o in r["ops"] if o["op"] == "produce"), None)
    t_enc = f"public/default/{PREFIX}-orders"
    gets = [
        ("coordinators", "/admin/v3/transactions/coordinators"),
        ("coordinatorStats", "/admin/v3/transactions/coordinatorStats"),
        ("coordinatorStats_id_0", "/admin/v3/transactions/coordinatorStats?coordinatorId=0"),
        ("coordinatorInternalStats_0_metadata_true", "/admin/v3/transactions/coordinatorInternalStats/0?metadata=true"),
        (
            "coordinatorInternalStats_0_metadata_false",
            "/admin/v3/transactions/coordinatorInternalStats/0?metadata=false",
        ),
        ("pendingAckStats", f"/admin/v3/transactions/pendingAckStats/{t_enc}/sub-a"),
        ("pendingAckStats_lowWaterMarks", f"/admin/v3/transactions/pendingAckStats/{t_enc}/sub-a?lowWaterMarks=true"),
        (
            "pendingAckInternalStats_metadata_true",
            f"/admin/v3/transactions/pendingAckInternalStats/{t_enc}/sub-a?metadata=true",
        ),
        (
            "pendingAckInternalStats_metadata_false",
            f"/admin/v3/transactions/pendingAckInternalStats/{t_enc}/sub-a?metadata=false",
        ),
        (
            "pendingAckInternalStats_partition",
            f"/admin/v3/transactions/pendingAckInternalStats/public/default/{PREFIX}-part-partition-0/subb",
        ),
        ("transactionMetadata_open", f"/admin/v3/transactions/transactionMetadata/{most}/{least}"),
        ("slowTransactions_1000ms", "/admin/v3/transactions/slowTransactions/1000"),
        ("slowTransactions_1000ms_coordinator_0", "/admin/v3/transactions/slowTransactions/1000?coordinatorId=0"),
        ("transactionBufferStats", f"/admin/v3/transactions/transactionBufferStats/{t_enc}"),
        (
            "transactionBufferStats_lowWaterMarks_segmentStats",
            f"/admin/v3/transactions/transactionBufferStats/{t_enc}?lowWaterMarks=true&segmentStats=true",
        ),
        ("transactionBufferInternalStats", f"/admin/v3/transactions/transactionBufferInternalStats/{t_enc}"),
        (
            "transactionBufferInternalStats_metadata_true",
            f"/admin/v3/transactions/transactionBufferInternalStats/{t_enc}?metadata=true",
        ),
        ("tc_assign_partitions", "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign/partitions"),
        (
            "lookup_tc_assign_partition_0",
            "/lookup/v2/topic/persistent/pulsar/system/transaction_coordinator_assign-partition-0",
        ),
        ("tenants", "/admin/v2/tenants"),
        ("namespaces_public", "/admin/v2/namespaces/public"),
        ("namespaces_pulsar", "/admin/v2/namespaces/pulsar"),
        (
            "topics_public_default_includeSystemTopic",
            "/admin/v2/namespaces/public/default/topics?includeSystemTopic=true",
        ),
        ("topics_public_default", "/admin/v2/namespaces/public/default/topics"),
        (
            "topics_pulsar_system_includeSystemTopic",
            "/admin/v2/namespaces/pulsar/system/topics?includeSystemTopic=true",
        ),
        ("subscriptions_topic", f"/admin/v2/persistent/{t_enc}/subscriptions"),
        ("subscriptions_partitioned_topic", f"/admin/v2/persistent/public/default/{PREFIX}-part/subscriptions"),
        ("brokers_configuration", "/admin/v2/brokers/configuration"),
        ("brokers_configuration_values", "/admin/v2/brokers/configuration/values"),
        ("brokers_configuration_runtime", "/admin/v2/brokers/configuration/runtime"),
        ("clusters", "/admin/v2/clusters"),
        ("clusters_standalone", "/admin/v2/clusters/standalone"),
        ("brokers_standalone", "/admin/v2/brokers/standalone"),
        ("brokers_version", "/admin/v2/brokers/version"),
        ("brokers_leaderBroker", "/admin/v2/brokers/leaderBroker"),
        ("partitioned_topic_metadata", f"/admin/v2/persistent/public/default/{PREFIX}-part/partitions"),
        # error answers
        (
            "error_404_pendingAckInternalStats_missing_subscription",
            f"/admin/v3/transactions/pendingAckInternalStats/{t_enc}/no-such-sub",
        ),
        (
            "error_500_pendingAckStats_missing_subscription",
            f"/admin/v3/transactions/pendingAckStats/{t_enc}/no-such-sub",
        ),
        ("error_404_transactionMetadata_unknown_txn", "/admin/v3/transactions/transactionMetadata/0/999999"),
        ("error_404_coordinatorStats_unknown_id", "/admin/v3/transactions/coordinatorStats?coordinatorId=7"),
        ("error_404_coordinatorInternalStats_unknown_id", "/admin/v3/transactions/coordinatorInternalStats/7"),
        (
            "error_404_transactionBufferStats_missing_topic",
            "/admin/v3/transactions/transactionBufferStats/public/default/no-such-topic",
        ),
        ("error_404_unknown_path", "/admin/v3/transactions/noSuchEndpoint"),
    ]
    if ack_op:
        topic = ack_op["topic"].split("://", 1)[1]
        gets.append(
            (
                "transactionInPendingAckStats",
                f"/admin/v3/transactions/transactionInPendingAckStats/{topic}/{ack_op['sub']}/{most}/{least}",
            )
        )
    if prod_op:
        topic = prod_op["topic"].split("://", 1)[1]
        gets.append(
            ("transactionInBufferStats", f"/admin/v3/transactions/transactionInBufferStats/{topic}/{most}/{least}")
        )
    for name, path in gets:
        st, body = b.rest("GET", path)
        save(out, name, "GET", path, st, body)
        log(f"GET {path} -> {st}")
    for name, method, path in [
        ("error_405_wrong_method_coordinatorStats", "DELETE", "/admin/v3/transactions/coordinatorStats"),
        (
            "error_412_update_non_dynamic_config",
            "POST",
            "/admin/v2/brokers/configuration/transactionLogBatchedWriteMaxRecords/20",
        ),
        ("error_412_update_unknown_config", "POST", "/admin/v2/brokers/configuration/noSuchConfigName/1"),
        (
            "error_412_invalid_dynamic_config_value",
            "POST",
            "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/notaboolean",
        ),
        ("error_412_delete_unknown_config", "DELETE", "/admin/v2/brokers/configuration/noSuchConfigName"),
    ]:
        st, body = b.rest(method, path)
        save(out, name, method, path, st, body)
        log(f"{method} {path} -> {st}")
    # success answers of the updates the tool makes (value restored right after)
    for name, method, path in [
        ("update_dynamic_config", "POST", "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled/false"),
        ("delete_dynamic_config", "DELETE", "/admin/v2/brokers/configuration/transactionLogBatchedWriteEnabled"),
        (
            "unload_tc_assign_partition_0",
            "PUT",
            "/admin/v2/persistent/pulsar/system/transaction_coordinator_assign-partition-0/unload",
        ),
    ]:
        st, body = b.rest(method, path)
        save(out, name, method, path, st, body)
        log(f"{method} {path} -> {st}")
    # right after the unload the coordinator is gone until a transactional client reconnects
    for name, path in [
        ("error_500_coordinatorStats_tc_not_loaded", "/admin/v3/transactions/coordinatorStats"),
        ("error_404_coordinatorStats_id_0_tc_not_loaded", "/admin/v3/transactions/coordinatorStats?coordinatorId=0"),
    ]:
        st, body = b.rest("GET", path)
        if isinstance(body, dict) and isinstance(body.get("reason"), str) and len(body["reason"]) > 600:
            body = dict(body, reason=body["reason"][:600] + "...(stack trace truncated by capture_fixtures.py)")
        save(out, name, "GET", path, st, body)
        log(f"GET {path} -> {st}")
    run.finish("commit")
    b.wait_coordinators_ready()
    # metrics: only the transaction lines
    st, text = b.rest("GET", "/metrics/", raw=True)
    lines = [ln for ln in text.splitlines() if "pulsar_txn_" in ln]
    (out / "metrics_pulsar_txn.txt").write_text(
        f"# GET /metrics/ -> {st}; only lines containing 'pulsar_txn_' kept\n" + "\n".join(lines) + "\n"
    )
    log(f"metrics: {len(lines)} pulsar_txn_ lines")


def capture(b: harness.PulsarBroker, out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    manifest = {
        "pulsarVersion": b.rest("GET", "/admin/v2/brokers/version", raw=True)[1].strip().strip('"'),
        "generatedBy": "tests/integration/capture_fixtures.py",
        "readledgerCommand": "BookieShell -conf bk.conf -entryformat hex readledger -m -l <ledgerId>",
        "readledgerNotes": [
            "Header lines come from the ReadLedgerCommand logger at INFO; hex lines from stdout.",
            "EntrySize in the header is the ledger's cumulative length up to and including that entry, "
            "not the entry's own size; the payload size is the number of hex bytes that follow.",
            "Hex lines: 8-digit offset, up to 16 two-digit bytes, then the ASCII column.",
            "ZooKeeper client loggers were set to WARN to keep the files small.",
        ],
        "workload": {"topics": [f"persistent://public/default/{t}" for t in TOPICS], "subscriptions": SUBS},
        "files": {},
    }
    phases = []
    phases.append(run_phase(b, "unbatched", False, seed=101))
    phases.append(run_phase(b, "batched", True, seed=102))
    b.set_dynamic_config("transactionLogBatchedWriteEnabled", False)
    b.set_dynamic_config("transactionPendingAckBatchedWriteEnabled", False)
    reload_everything(b)  # closes the batched-phase ledgers
    capture_ledgers(b, out, phases, manifest)
    # the metrics after a batched phase show the buffered-writer histograms
    st, text = b.rest("GET", "/metrics/", raw=True)
    (out / "rest").mkdir(exist_ok=True)
    (out / "rest" / "metrics_pulsar_txn_after_batched_phase.txt").write_text(
        f"# GET /metrics/ -> {st}; only lines containing 'pulsar_txn_' kept\n"
        + "\n".join(ln for ln in text.splitlines() if "pulsar_txn_" in ln)
        + "\n"
    )
    (out / "MANIFEST.json").write_text(json.dumps(manifest, indent=1) + "\n")
    capture_rest(b, out / "rest")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=str(ROOT / "tests" / "fixtures" / "real"))
    args = ap.parse_args()
    t0 = time.monotonic()
    b = harness.start_broker(CAPTURE_CONF, name="capture", log=log)
    try:
        capture(b, Path(args.out))
    finally:
        b.cleanup()
    log(f"done in {time.monotonic() - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
