"""`engine verify`: replay every log from its cursor and check the invariants.

Read-only. For every managed ledger: the ledgers and entries agree, the cursor is inside the
log, individually deleted entries and deleted batch indexes point at real entries, nothing
that could be trimmed is left, every entry decodes. For the TC logs: every live transaction
starts with its NEW record, no record of a transaction that ended is still live (except where
a batch-index delete was ignored, see docs/real-broker-findings.md, the batch-index deletion stall: reported as a warning), max_local_txn_id covers
every id. With an acknowledgement log (simulate --ack-log): every acknowledged transaction whose
end was never requested is still live.
"""

from __future__ import annotations

from pulsar_txn_cli.engine.coordinator import FINAL, NEW, UPDATE, decode_tc_entry, tc_log_name
from pulsar_txn_cli.engine.ledger import ManagedLedger
from pulsar_txn_cli.engine.pending_ack import ACK, decode_pa_entry
from pulsar_txn_cli.protocol import PENDING_ACK_CURSOR, PENDING_ACK_SUFFIX, TC_CURSOR, TC_LOG_PREFIX
from pulsar_txn_cli.output.units import counted


def verify(engine, acked_log: str | None = None) -> dict:
    problems: list[str] = []
    warnings: list[str] = []
    logs = []
    live_by_tc: dict[int, set[int]] = {}
    db = engine.store.db
    all_ids = [r[0] for r in db.execute("SELECT ledger_id FROM ledgers ORDER BY ledger_id")]
    next_id = int(engine.store.meta("next_ledger_id") or 1)
    if all_ids and all_ids[-1] >= next_id:
        problems.append(f"ledger id {all_ids[-1]} is not below the next ledger id {next_id}")
    for name in engine.managed_ledger_names():
        ml = ManagedLedger.get(engine.store, engine.clock, name)
        summary = {"managedLedger": name, "ledgers": len(ml.ledgers), "entries": 0, "liveRecords": 0}
        _check_ledger(ml, problems)
        if name.startswith(TC_LOG_PREFIX):
            tc_id = int(name.rsplit("_", 1)[1])
            live = _check_tc(ml, tc_id, summary, problems, warnings)
            live_by_tc[tc_id] = live
            summary["liveTransactions"] = len(live)
        elif name.endswith(PENDING_ACK_SUFFIX):
            summary["liveTransactions"] = _check_pending_ack(ml, summary, problems)
        logs.append(summary)
    for tc_id in range(engine.coordinator_count):
        if tc_log_name(tc_id) not in engine.managed_ledger_names():
            problems.append(f"transaction coordinator {tc_id} has no log {tc_log_name(tc_id)}")
    checked = 0
    if acked_log:
        checked = _check_acked(acked_log, live_by_tc, problems)
    return {"ok": not problems, "problems": problems, "warnings": warnings, "logs": logs, "ackedChecked": checked}


def _check_ledger(ml: ManagedLedger, problems: list[str]) -> None:
    ml.store.flush_rows()
    db = ml.store.db
    name = ml.name
    if ml.current is not None and ml.current not in {l.ledger_id for l in ml.ledgers}:
        problems.append(f"{name}: the current ledger {ml.current} does not exist")
    for ledger in ml.ledgers:
        count, size, first, last = db.execute(
            "SELECT COUNT(*), COALESCE(SUM(LENGTH(data)), 0), MIN(entry_id), MAX(entry_id) FROM entries WHERE ledger_id=?",
            (ledger.ledger_id,),
        ).fetchone()
        if count != ledger.entries or size != ledger.size or (count and (first != 0 or last != count - 1)):
            problems.append(
                f"{name}: ledger {ledger.ledger_id} records {ledger.entries} entries / {ledger.size} bytes "
                f"but holds {count} / {size}"
            )
        if ledger.ledger_id != ml.current and not ledger.closed:
            problems.append(f"{name}: ledger {ledger.ledger_id} is neither current nor closed")
    for cursor in ml.cursors.values():
        md = cursor.mark_delete
        lce = ml.last_confirmed()
        if md > lce and md[1] != -1:
            problems.append(
                f"{name}: cursor {cursor.name} mark-delete {md[0]}:{md[1]} is past the last entry {lce[0]}:{lce[1]}"
            )
        for key in list(cursor.deleted) + list(cursor.batch_deleted):
            if key <= md:
                problems.append(f"{name}: cursor {cursor.name} keeps {key[0]}:{key[1]}, already behind its mark-delete")
            elif ml.next_position((key[0], key[1] - 1)) != key:
                problems.append(f"{name}: cursor {cursor.name} deletes {key[0]}:{key[1]}, which does not exist")
        nxt = ml.next_position(md)
        if nxt is not None and nxt in cursor.deleted:
            problems.append(
                f"{name}: cursor {cursor.name} did not move its mark-delete over deleted entry {nxt[0]}:{nxt[1]}"
            )
    if ml.cursors:
        slowest = min(c.mark_delete for c in ml.cursors.values())
        first_live = ml.next_position(slowest)
        for ledger in ml.ledgers:
            if ledger.ledger_id == ml.current:
                continue
            if first_live is None or ledger.ledger_id < first_live[0]:
                problems.append(
                    f"{name}: ledger {ledger.ledger_id} is wholly behind the slowest cursor but was not trimmed"
                )


def _live_entries(ml: ManagedLedger, cursor_name: str, decode, problems):
    cursor = ml.cursors.get(cursor_name)
    if cursor is None:
        problems.append(f"{ml.name}: the cursor {cursor_name} is missing")
        return
    for lid, eid, data in ml.read_after(cursor.mark_delete):
        try:
            records = decode(data)
        except Exception as exc:  # noqa: BLE001 - report every undecodable entry
            problems.append(f"{ml.name}: entry {lid}:{eid} does not decode ({exc})")
            continue
        if (lid, eid) in cursor.deleted:
            continue
        yield lid, eid, records, cursor


def _check_tc(ml, tc_id, summary, problems, warnings) -> set[int]:
    txns: dict[int, dict] = {}
    max_id = -1
    stuck = 0
    for lid, eid, records, cursor in _live_entries(ml, TC_CURSOR, decode_tc_entry, problems):
        summary["entries"] += 1
        bits = cursor.deleted_batch_bits((lid, eid)) if len(records) > 1 else None
        if bits is not None and bits >> len(records):
            problems.append(f"{ml.name}: entry {lid}:{eid} has deleted-index bits beyond its {len(records)} records")
        for i, r in enumerate(records):
            if bits is not None and not (bits >> i) & 1:
                continue
            summary["liveRecords"] += 1
            max_id = max(max_id, r.max_local_txn_id, r.txnid_least_bits)
            least = r.txnid_least_bits
            if r.txnid_most_bits != tc_id:
                problems.append(f"{ml.name}: entry {lid}:{eid} holds a record of coordinator {r.txnid_most_bits}")
            state = txns.get(least)
            if r.metadata_op == NEW:
                if state is not None and not state["ended"]:
                    problems.append(f"{ml.name}: transaction ({tc_id},{least}) has two NEW records")
                txns[least] = {"ended": False, "batched": len(records) > 1}
                continue
            if state is None:
                # A record whose NEW was deleted: only legitimate when its transaction ended and
                # a batch-index delete of that entry was ignored (the batch-index deletion stall), or replay will delete it.
                stuck += 1
                continue
            if r.metadata_op == UPDATE and r.new_status in FINAL:
                state["ended"] = True
    ended = [least for least, s in txns.items() if s["ended"]]
    cursor = ml.cursors.get(TC_CURSOR)
    if ended or stuck:
        warnings.append(
            f"{ml.name}: {counted(len(ended), 'ended transaction')} and {counted(stuck, 'orphan record')} are still "
            "in the log (the next replay deletes them)"
        )
    if cursor is not None and (cursor.ignored_deletes or cursor.forgotten_batch_indexes):
        warnings.append(
            f"{ml.name}: batch-index deletion is off on this log, so {counted(cursor.ignored_deletes, 'delete')} inside "
            f"batched entries were ignored and {counted(cursor.forgotten_batch_indexes, 'partly deleted entry', 'partly deleted entries')} "
            "lost their deleted "
            "indexes; records of ended transactions stay in the log (blocking trimming) and replay as open "
            "transactions (docs/real-broker-findings.md, the batch-index deletion stall). Keep acknowledgmentAtBatchIndexLevelEnabled=true while draining."
        )
    prop = int(ml.properties.get("max_local_txn_id", -1))
    if max_id > prop:
        problems.append(f"{ml.name}: max_local_txn_id {prop} is below transaction id {max_id} found in the log")
    return {least for least, s in txns.items() if not s["ended"]}


def _check_pending_ack(ml, summary, problems) -> int:
    live: set = set()
    for _lid, _eid, records, _ in _live_entries(ml, PENDING_ACK_CURSOR, decode_pa_entry, problems):
        summary["entries"] += 1
        for r in records:
            summary["liveRecords"] += 1
            txn = (r.txnid_most_bits, r.txnid_least_bits)
            if r.pending_ack_op == ACK:
                live.add(txn)
            else:
                live.discard(txn)
    return len(live)


def _check_acked(path: str, live_by_tc: dict[int, set[int]], problems: list[str]) -> int:
    acked: dict[tuple[int, int], bool] = {}
    try:
        with open(path, encoding="utf-8") as fh:
            for line in fh:
                parts = line.split()
                if len(parts) != 3 or not parts[1].isdigit() or not parts[2].isdigit():
                    continue  # a line cut short by the kill
                key = (int(parts[1]), int(parts[2]))
                if parts[0] == "new":
                    acked.setdefault(key, False)
                elif parts[0] == "end":
                    acked[key] = True
    except OSError as exc:
        problems.append(f"cannot read the acknowledgement log {path}: {exc.strerror}")
        return 0
    missing = [k for k, ending in acked.items() if not ending and k[1] not in live_by_tc.get(k[0], set())]
    for tc_id, least in missing[:20]:
        problems.append(f"acknowledged transaction ({tc_id},{least}) is missing from its coordinator log")
    if len(missing) > 20:
        problems.append(f"... and {len(missing) - 20} more acknowledged transactions are missing")
    return len(acked)
