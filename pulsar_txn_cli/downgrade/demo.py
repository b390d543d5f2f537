"""The demo's story: PIP-160 from enabling batching to a SAFE downgrade, on a fresh engine.

Library code: it narrates through the `say` callback the CLI gives it and returns a summary.
Every step goes through the same functions the commands use (admin layer, downgrade runner), on
one in-process engine, with small ledgers so that rollover and trimming happen within seconds.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from pulsar_txn_cli.errors import UsageError
from pulsar_txn_cli.output.units import counted

# Small ledgers, no minimum age and a dense pending-ack index: logs roll and trim within a round.
DEMO_CONFIG = {
    "managedLedgerMaxEntriesPerLedger": "50",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "transactionPendingAckLogIndexMinLag": "20",
}
MAX_DRAIN_ROUNDS = 8
DEMO_CHECKPOINT = "downgrade-checkpoint.json"  # a temporary engine's, in its own directory


class DemoStory:
    def __init__(self, directory: str | None, *, coordinators: int, transactions: int, say):
        self.directory = Path(directory).expanduser() if directory else None
        self.coordinators = coordinators
        self.transactions = transactions
        self.say = say
        self.round = 0
        self.temporary = directory is None
        self.summary: dict = {"steps": []}

    # ------------------------------------------------------------------------------------------

    def run(self) -> dict:
        engine, admin = self._init()
        try:
            self._enable(engine, admin)
            self._workload(engine, "a transactional workload with batching on")
            self._stats(admin)
            self._upgrade(admin)
            self._disable(engine, admin)
            first = self._check(
                admin, "2-1..2-7", "the first check records the last ledgers that may hold batched entries"
            )
            verdict = first
            rounds = 0
            while verdict != "SAFE" and rounds < MAX_DRAIN_ROUNDS:
                rounds += 1
                self._workload(
                    engine,
                    "more workload, batching off: ledgers roll over and the old ones are trimmed",
                    transactions=self.drain_transactions,
                )
                verdict = self._check(admin, "2-7", "again: is every oldest ledger past its recorded one?")
            self.summary["verdict"] = verdict
        finally:
            identity = admin.identity()
            if self.temporary:
                self._persist_settings(engine, admin)
            admin.close()
            engine.close()
            if self.temporary:
                self._forget(identity)
        self._outro()
        return self.summary

    # ------------------------------------------------------------------------------------------

    def _step(self, title: str) -> None:
        self.say("")
        self.say(f"== {title}")

    def _init(self):
        from pulsar_txn_cli.admin.client import PulsarAdmin
        from pulsar_txn_cli.target.settings import Target
        from pulsar_txn_cli.engine.transport import EngineTransport
        from pulsar_txn_cli.engine.broker import Engine, exists

        if self.directory is None:
            self.directory = Path(tempfile.mkdtemp(prefix="pulsar-txn-demo-"))
        elif exists(self.directory):
            raise UsageError(f"{self.directory} already holds an engine; the demo needs a new directory")
        self._step(f"Initialise an embedded engine with {self.coordinators} transaction coordinators")
        self.say(f"engine directory: {self.directory}")
        engine = Engine.init(self.directory, coordinators=self.coordinators)
        for key, value in DEMO_CONFIG.items():
            engine.config.set(key, value)
        self.say("small ledgers for the demo: " + ", ".join(f"{k}={v}" for k, v in DEMO_CONFIG.items()))
        target = Target(kind="engine", engine_dir=str(self.directory))
        admin = PulsarAdmin(EngineTransport(target, engine), target)
        self.engine_dir = str(self.directory)
        self.summary["engineDir"] = self.engine_dir
        return engine, admin

    def _set(self, engine, admin, enabled: bool) -> list[str]:
        from pulsar_txn_cli import batchlog

        lines = []
        for log in (batchlog.TC, batchlog.PENDING_ACK):
            stores = batchlog.stores_of(admin, log)
            batchlog.set_batch_log(admin, log, enabled, stores=stores)
            # The engine's clock is virtual: let a second pass so the reopened stores' open times
            # differ from the ones recorded with the change (they always do on a real broker).
            engine.clock.advance_ms(1000)
            reloaded = batchlog.reload_stores(admin, batchlog.reload_targets(log, stores))
            lines.append(
                f"{log.key}={str(enabled).lower()} (dynamic), {counted(len(reloaded), 'topic')} unloaded so "
                f"every {log.store} store reopens with it"
            )
        return lines

    def _enable(self, engine, admin) -> None:
        self._step("Upgrade step 2: enable the batch log on every broker, then reload the stores")
        import shlex

        where = shlex.quote(self.engine_dir)
        for name in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
            self.say(f"pulsar-txn {name} --enable --reload --yes --engine-dir {where}")
        for line in self._set(engine, admin, True):
            self.say(line)

    @property
    def drain_transactions(self) -> int:
        """A drain round's transactions: enough for every log to fill a demo ledger (50 entries) within
        MAX_DRAIN_ROUNDS, however few --transactions or however many coordinators (a transaction writes
        about five records to its coordinator's log; the 8 subscriptions share about three a transaction)."""
        return max(self.transactions, 60, 4 * self.coordinators)

    def _workload(self, engine, title: str, *, transactions: int | None = None) -> None:
        from pulsar_txn_cli.engine.simulate import SimOptions, simulate

        self.round += 1
        self._step(f"Workload round {self.round}: {title}")
        result = simulate(engine, SimOptions(transactions=transactions or self.transactions, seed=self.round))
        records, entries = result["records"], result["entries"]
        self.say(
            f"{result['committed']} committed, {result['aborted']} aborted; TC log: {records['tc']} records in "
            f"{entries['tc']} entries; pending-ack logs: {records['pendingAck']} records in "
            f"{entries['pendingAck']} entries"
        )
        self.summary["steps"].append({"step": "workload", "round": self.round, "records": records, "entries": entries})

    def _stats(self, admin) -> None:
        from pulsar_txn_cli import batchlog

        self._step(
            "Upgrade step 4: the batch-log stats (get-txn-tc-batch-log-stat, get-txn-pending-ack-batch-log-stat)"
        )
        last = self.summary["steps"][-1]
        for log, key in ((batchlog.TC, "tc"), (batchlog.PENDING_ACK, "pendingAck")):
            stat = batchlog.batch_log_stat(admin, log, with_metrics=False)
            detail = stat[log.detail_key]
            on = sum(1 for d in detail if d["effective"] is True)
            records, entries = last["records"][key], last["entries"][key]
            saved = records - entries
            share = f" ({saved / records:.0%} fewer writes)" if records else ""
            self.say(
                f"{log.pip_flag}={str(stat[log.pip_flag]).lower()}: effective on {on} of "
                f"{counted(len(detail), log.store)}; {counted(saved, 'entry', 'entries')} saved{share}"
            )

    def _upgrade(self, admin) -> None:
        from pulsar_txn_cli.downgrade import gather
        from pulsar_txn_cli.downgrade.upgrade import upgrade_verdict

        self._step("The upgrade order, checked: pulsar-txn upgrade check")
        verdict = upgrade_verdict(gather.gather(admin, versions=True))
        for problem in verdict.problems[:3]:
            self.say(f"  problem: {problem}")
        versions = sorted({b["version"] for b in verdict.brokers if b["version"]})
        self.say(
            f"{verdict.verdict}: {counted(len(verdict.brokers), 'broker')} on {', '.join(versions) or '?'}; batching "
            f"effective on {counted(len(verdict.coordinators), 'coordinator')} and "
            f"{counted(len(verdict.subscriptions), 'subscription')}"
            if verdict.verdict == "COMPLETE"
            else f"{verdict.verdict}: see the problems above"
        )
        self.summary["steps"].append({"step": "upgrade check", "verdict": verdict.verdict})

    def _disable(self, engine, admin) -> None:
        self._step("Downgrade step 1: disable the batch log on every broker and reload the stores")
        for line in self._set(engine, admin, False):
            self.say(line)

    def _check(self, admin, steps: str, why: str) -> str:
        from pulsar_txn_cli.downgrade.verdict import verdict_line
        from pulsar_txn_cli.downgrade import runner

        self._step(f"Downgrade steps {steps}: pulsar-txn downgrade check ({why})")
        path = runner.checkpoint_path(admin, self.checkpoint)
        result = runner.check(admin, path)
        verdict = result.verdict
        held = [i for i in verdict.items if not i.clear]
        for item in held[:4]:
            self.say(f"  {item.observation.label}: {item.reason}")
        if len(held) > 4:
            self.say(f"  ... and {len(held) - 4} more")
        for problem in verdict.problems[:3]:
            self.say(f"  problem: {problem}")
        self.say(verdict_line(verdict))
        self.summary["steps"].append(
            {
                "step": "downgrade check",
                "verdict": verdict.verdict,
                "clear": len(verdict.items) - len(held),
                "logs": len(verdict.items),
            }
        )
        self.summary["checkpoint"] = str(path)
        return verdict.verdict

    @property
    def checkpoint(self) -> str | None:
        """A temporary engine keeps its downgrade checkpoint in its own directory (the user's state
        directory forgets it): the suggested `downgrade check` names it, and answers as the demo did."""
        return str(Path(self.engine_dir) / DEMO_CHECKPOINT) if self.temporary else None

    def _persist_settings(self, engine, admin) -> None:
        """The batch settings move from the dynamic overrides into the engine's broker.conf, as an operator
        persists them after a downgrade: the records of the dynamic change leave with the demo, and a dynamic
        value without its record is one whose moment is unknown, which no later check could judge."""
        from pulsar_txn_cli import batchlog

        for log in (batchlog.TC, batchlog.PENDING_ACK):
            value = engine.config.overrides().get(log.key)
            if value is not None:
                engine.config.set(log.key, value, dynamic=False)
                admin.delete_dynamic_config(log.key)

    def _forget(self, identity: str) -> None:
        """A temporary engine's records (batch-log changes, the checkpoint, any audit) leave the user's state
        directory with the demo: `state list` shows the operator's own targets only."""
        from pulsar_txn_cli.target import remembered

        gone, _ = remembered.prune([identity], audits=True)
        self.summary["forgotten"] = len(gone)

    def _outro(self) -> None:
        import shlex

        d = shlex.quote(self.engine_dir)
        self._step("Done. The engine stays in place; try the commands on it:")
        if self.temporary:
            self.say("  (this temporary engine's records were not kept in your state directory)")
        for line in (
            *(() if self.temporary else (f"pulsar-txn --engine-dir {d} downgrade status",)),
            f"pulsar-txn --engine-dir {d} downgrade check -o json"
            + (f" --checkpoint {shlex.quote(self.checkpoint)}" if self.checkpoint else ""),
            f"pulsar-txn --engine-dir {d} get-txn-tc-batch-log-stat",
            f"pulsar-txn --engine-dir {d} coordinator-internal-stats -c 0",
        ):
            self.say(f"  {line}")
