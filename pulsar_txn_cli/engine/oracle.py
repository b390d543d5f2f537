"""The downgrade oracle: what the engine's own storage says about a downgrade below PIP-160.

A property of the model, not of a real cluster: it reads the engine's entries, not what the admin
API shows, and shares no code with the downgrade verdict (downgrade/), so it can judge it.

- batchedReachable: an entry with the batch magic (0x0E01) is still stored in a ledger of a
  transaction-coordinator or pending-ack managed ledger (not trimmed). A broker older than PIP-160
  cannot read such an entry; `toReplay` counts those after the log's cursor, which it would replay.
- progressWithoutOperator / clearsWithoutOperator: on a copy of the engine, time passes beyond every
  transaction timeout, ledger rollover time, trim interval and snapshot interval, in rounds, with the
  broker's background work (engine advance) and ordinary client traffic (transactions producing,
  acknowledging on the existing subscriptions, committing, aborting, some left to time out) but no
  operator action: no reload, unload, configuration change or abort by hand, ending with traffic.
  progress: some ledger holding batched entries went away; clears: none is left.
"""

from __future__ import annotations

import shutil
import sqlite3
import tempfile
from pathlib import Path

from pulsar_txn_cli.codec import MAGIC
from pulsar_txn_cli.engine.store import DB_NAME
from pulsar_txn_cli.protocol import PENDING_ACK_CURSOR, PENDING_ACK_SUFFIX, TC_CURSOR, TC_LOG_PREFIX

MAGIC_BYTES = MAGIC.to_bytes(2, "big")
ROUNDS = 3  # traffic then time, three times: a ledger rolls in one round and is trimmed in the next
MAX_ROUND_TRANSACTIONS = 3000


def batched_ledgers(engine) -> list[dict]:
    """Every transaction log's ledgers, which hold batched entries, and how many a replay would read."""
    out = []
    engine.store.flush_rows()
    db = engine.store.db
    for name in engine.managed_ledger_names():
        if name.startswith(TC_LOG_PREFIX):
            kind = "coordinator"
        elif name.endswith(PENDING_ACK_SUFFIX):
            kind = "pendingAck"
        else:
            continue
        ledger_ids = [r[0] for r in db.execute("SELECT ledger_id FROM ledgers WHERE ml=? ORDER BY ledger_id", (name,))]
        cursor = _mark_delete(db, name)
        batched, replay, count = [], 0, 0
        for lid, eid in db.execute(
            "SELECT e.ledger_id, e.entry_id FROM entries e JOIN ledgers l ON l.ledger_id = e.ledger_id "
            "WHERE l.ml=? AND substr(e.data, 1, 2) = ? ORDER BY e.ledger_id, e.entry_id",
            (name, MAGIC_BYTES),
        ):
            count += 1
            if not batched or batched[-1] != lid:
                batched.append(lid)
            if cursor is None or (lid, eid) > cursor:
                replay += 1
        out.append(
            {
                "managedLedger": name,
                "kind": kind,
                "ledgerIds": ledger_ids,
                "batchedLedgerIds": batched,
                "batchedEntries": count,
                "toReplay": replay,
                "reachable": bool(batched),
            }
        )
    return out


def _mark_delete(db, name: str) -> tuple[int, int] | None:
    import orjson

    cursor = TC_CURSOR if name.startswith(TC_LOG_PREFIX) else PENDING_ACK_CURSOR
    row = db.execute("SELECT state FROM cursors WHERE ml=? AND name=?", (name, cursor)).fetchone()
    return tuple(orjson.loads(row[0]).get("md", (-1, -1))) if row else None


def downgrade_oracle(engine, *, rounds: int = ROUNDS, seed: int = 1, traffic_minimum: int = 100) -> dict:
    """The oracle's answer for this engine (which it does not change: the future runs on a copy)."""
    ledgers = batched_ledgers(engine)
    before = {lid for log in ledgers for lid in log["batchedLedgerIds"]}
    reachable = bool(before)
    future = {"horizonMs": 0, "transactions": 0, "ledgers": ledgers}
    if reachable:
        future = run_future(engine, rounds=rounds, seed=seed, traffic_minimum=traffic_minimum)
    after = {lid for log in future["ledgers"] for lid in log["batchedLedgerIds"]}
    return {
        "batchedReachable": reachable,
        "progressWithoutOperator": not reachable or bool(before - after),
        "clearsWithoutOperator": not after,
        "ledgers": ledgers,
        "future": {
            "horizonMs": future["horizonMs"],
            "rounds": rounds if reachable else 0,
            "transactions": future["transactions"],
            "batchedLedgerIds": sorted(after),
        },
        "model": "the engine's own storage (a property of the model, not of a real cluster)",
    }


def copy_engine(engine, into: Path) -> Path:
    """A consistent copy of the engine's database (SQLite's backup), marked as cleanly stopped,
    so opening it attaches to the same running broker instead of restarting it, and as living where it is,
    so it stays the same engine (a copy made otherwise gets an identity of its own: engine/broker.py)."""
    engine.store.save_all() if not engine.readonly else None
    into.mkdir(parents=True, exist_ok=True)
    target = sqlite3.connect(into / DB_NAME)
    try:
        engine.store.db.backup(target)
        target.execute("UPDATE meta SET value='0' WHERE key='running'")
        target.execute("UPDATE meta SET value=? WHERE key='home'", (str(into.resolve()),))
        target.commit()
    finally:
        target.close()
    return into


def run_future(
    engine, *, rounds: int = ROUNDS, seed: int = 1, directory: Path | None = None, traffic_minimum: int = 100
) -> dict:
    """Let the copy live on: rounds of ordinary traffic, then time beyond every timer."""
    from pulsar_txn_cli.engine.broker import Engine

    scratch = Path(tempfile.mkdtemp(prefix="pulsar-txn-oracle-")) if directory is None else directory
    try:
        copy_engine(engine, scratch)
        with Engine.open(scratch, auto_init=False) as future:
            return drive(future, rounds=rounds, seed=seed, traffic_minimum=traffic_minimum)
    finally:
        if directory is None:
            shutil.rmtree(scratch, ignore_errors=True)


def drive(engine, *, rounds: int = ROUNDS, seed: int = 1, traffic_minimum: int = 100) -> dict:
    """Traffic and time on this engine, with no operator action; returns what is left batched."""
    from pulsar_txn_cli.engine.advance import advance

    horizon = horizon_ms(engine)
    transactions = 0
    for r in range(rounds):
        transactions += traffic(engine, seed=seed * 1000 + r, minimum=traffic_minimum)
        advance(engine, horizon)
    # Clients keep going: what is judged is a cluster in use, not one left idle after its last trim.
    transactions += traffic(engine, seed=seed * 1000 + rounds, minimum=traffic_minimum)
    return {"horizonMs": horizon, "transactions": transactions, "ledgers": batched_ledgers(engine)}


def horizon_ms(engine) -> int:
    """Beyond every timer a broker runs on its own: the open transactions' timeouts, ledger rollover
    (max, and min, of every log's settings and of the configuration), the trim check, snapshots."""
    cfg = engine.config.values()
    rollover = [cfg["managedLedgerMaxLedgerRolloverTimeMinutes"], cfg["managedLedgerMinLedgerRolloverTimeMinutes"]]
    timeouts = [0]
    now = engine.clock.now_ms
    for tc in engine.all_tcs() if engine.enabled else []:
        rollover += [tc.ml.settings.get("maxRolloverMinutes", 0), tc.ml.settings.get("minRolloverMinutes", 0)]
        timeouts += [meta.timeout_at - now for meta in tc.txns.values()]
    for topic, sub in engine.subscriptions():
        store = engine.pending_ack_if_exists(topic, sub)
        if store is not None:
            rollover += [store.ml.settings.get("maxRolloverMinutes", 0), store.ml.settings.get("minRolloverMinutes", 0)]
    snapshot = int(engine.config.setting("transactionBufferSnapshotMinTimeInMillis", 5000))
    return max(max(rollover) * 60_000 + 60_000, max(timeouts) + 60_000, snapshot + 1, 121_000)


def traffic(engine, *, seed: int, minimum: int = 100) -> int:
    """One round of ordinary clients: transactions on the engine's existing subscriptions (else the
    workload's own), enough records for each pending-ack log's index to move. Returns how many."""
    if not engine.enabled:
        return 0
    from pulsar_txn_cli.engine.simulate import SimOptions, Workload

    subs = engine.subscriptions()
    lag = int(engine.config.values()["transactionPendingAckLogIndexMinLag"])
    count = min(MAX_ROUND_TRANSACTIONS, max(minimum, 2 * lag * max(1, len(subs))))
    opts = SimOptions(transactions=count, concurrency=20, abort_ratio=0.1, timeout_ratio=0.05, seed=seed)
    workload = Workload(engine, opts)
    if subs:
        workload.subscriptions = list(subs)
    workload.run()
    return count
