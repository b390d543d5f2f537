"""A Hypothesis state machine over what operators, clients, brokers and time do to an engine during a
downgrade, with the verdicts checked against the engine's own oracle.

Used by tests/downgrade/test_verdict_oracle.py (the fast profile, a fixed budget) and `python -m bench
verdict_oracle` (the deep profile). Every step goes through the CLI in process (run_cli) or the library the
CLI calls; the verdicts are always read through `downgrade check -o json` / `upgrade check -o json`, as an
operator reads them.

`downgrade check` is an operator's step like any other (it keeps the checkpoint), so batching can come back
between two checks. After every step, what a check would say right then (on a scratch copy of the
checkpoint, so looking changes nothing): SAFE => no batched entry is stored in a transaction log (the
oracle), and time alone keeps it SAFE (on a copy). After a check the operator runs, when the step asks to
judge it: BLOCKED => traffic and time alone do not clear it, and following every printed fix (on a copy)
leaves a state the oracle says traffic and time clear; WAIT with batched entries stored => traffic and time
alone clear them; WAIT with none stored => a few rounds of traffic and time end in SAFE; upgrade COMPLETE
=> every store batches.

What it does not generate, and why: a broker.conf edit without a restart (the engine's runtime
configuration shows it at once, a real broker's only after the restart). What a BLOCKED may be without the
oracle's agreement, since the verdict fails closed where the admin API cannot tell: a store whose batching is
unknown after a change outside the tool, and transactions open across a switch whose records may all be
unbatched (a lone one, each flushed alone; or one opened before a batching spell).
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import tempfile
from pathlib import Path

from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from pulsar_txn_cli.engine.broker import Engine
from pulsar_txn_cli.engine.coordinator import OPEN
from pulsar_txn_cli.engine.oracle import batched_ledgers, copy_engine, downgrade_oracle, horizon_ms, traffic
from pulsar_txn_cli.engine.advance import advance
from pulsar_txn_cli.engine.simulate import SimOptions, simulate
from tests.conftest import assert_no_crash, port_outside_ephemeral_range, run_cli

SMALL = {
    "managedLedgerMaxEntriesPerLedger": "50",
    "managedLedgerMinLedgerRolloverTimeMinutes": "0",
    "managedLedgerMaxLedgerRolloverTimeMinutes": "10",
    "transactionPendingAckLogIndexMinLag": "5",
}
TOPIC = "persistent://public/default/sim-topic-0"
TRAFFIC = 40  # transactions per round of ordinary traffic in the oracle's future
SWITCH = {"tc": "set-txn-tc-batch-log", "pa": "set-txn-pending-ack-batch-log"}
WAIT_ROUNDS = 4  # rounds of traffic then time a --wait gets on a copy before it must have ended
FIX_STEPS = 3  # rounds of printed fixes a BLOCKED gets on a copy before it must be WAIT or SAFE


class Trail:
    """The steps of one example, as an operator would type them (shown with a failure)."""

    def __init__(self):
        self.steps: list[str] = []

    def add(self, text: str) -> None:
        self.steps.append(text)

    def __str__(self) -> str:
        return "\n".join(f"  {i + 1}. {s}" for i, s in enumerate(self.steps))


def cli(args, expect=(0,)):
    result = run_cli([str(a) for a in args])
    assert_no_crash(result)
    assert result.exit_code in expect, f"{' '.join(map(str, args))} -> {result.exit_code}: {result.stderr}"
    return result


class VerdictOracle(RuleBasedStateMachine):
    """thorough: also run a --wait on a copy for every WAIT (the bench's profile); without it a WAIT is
    checked against the oracle only where batched entries are reachable (the fast suite's profile)."""

    thorough = False
    judging = True  # False: only soundness (never a false SAFE, SAFE stays SAFE), for the widest exploration

    @property
    def behind_allowed(self) -> bool:
        """Batching switched behind the tool's back: in the soundness walks (see behind_the_back)."""
        return not self.judging

    def __init__(self):
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="verdict-oracle-"))
        self.dir = self.root / "engine"
        self.checkpoint = self.root / "checkpoint.json"
        self.held: list[tuple[int, int]] = []  # transactions a live client keeps open
        self.seed = 0
        self.trail = Trail()

    def teardown(self):
        if os.environ.get("VERDICT_ORACLE_TRACE"):
            print(f"example:\n{self.trail}", flush=True)
        shutil.rmtree(self.root, ignore_errors=True)

    # ---------------------------------------------------------------- helpers

    def target(self, directory=None):
        return ["--engine-dir", directory or self.dir]

    def engine(self):
        return Engine.open(self.dir, auto_init=False)

    # ---------------------------------------------------------------- the cluster before the story

    @initialize(
        batching=st.sampled_from([True, True, True, False]),
        batch_index=st.sampled_from([False, True]),  # Pulsar's default is false; false with a switch under load stalls
        coordinators=st.integers(1, 2),
        held=st.sampled_from([3, 2]),  # a cluster in use always has transactions open
        downgrading=st.booleans(),  # the story may start at PIP-160's first downgrade step
        # A pending-ack log's cursor lags its index by this many records: with a long lag its newest ledgers stay
        # while its oldest are trimmed, as on a cluster with Pulsar's default of 500.
        index_lag=st.sampled_from([5, 60]),
    )
    def start(self, batching, batch_index, coordinators, held, downgrading, index_lag=5):
        with Engine.init(self.dir, coordinators=coordinators) as engine:
            for key, value in {**SMALL, "transactionPendingAckLogIndexMinLag": str(index_lag)}.items():
                engine.config.set(key, value)
            engine.config.set("acknowledgmentAtBatchIndexLevelEnabled", str(batch_index).lower())
            engine.reload()
            simulate(engine, SimOptions(transactions=40, topics=2, subscriptions=3, seed=100))
        self.trail.add(
            f"engine init --coordinators {coordinators}; acknowledgmentAtBatchIndexLevelEnabled={batch_index}; "
            f"transactionPendingAckLogIndexMinLag={index_lag}; a 40-transaction workload"
        )
        if batching:
            for log in SWITCH:
                self.switch(log, True, True)
        if held:
            self.open_transactions(held, "1h")
        if batching and downgrading:
            self.disable_and_reload(("tc", "pa"))
            self.downgrade_check(False)  # the README's recipe checks right after the switches

    # ---------------------------------------------------------------- what operators do

    @rule(logs=st.sampled_from([("tc", "pa"), ("tc", "pa"), ("tc", "pa"), ("tc",), ("pa",)]))
    def disable_and_reload(self, logs):
        """The downgrade's first step as PIP-160 and the README tell it."""
        for log in logs:
            self.switch(log, False, True)

    def switch(self, log, on, reload):
        # The operator overrides the switch's guards (or switches with pulsar-admin): the verdict must hold anyway.
        args = [SWITCH[log], "--enable" if on else "--disable", *(["--reload", "--yes"] if reload else []), "--force"]
        cli([*args, *self.target()])
        self.trail.add(" ".join(args))

    # Off twice as often as on: a downgrade is under way, and batching comes back now and then.
    @rule(log=st.sampled_from(["tc", "pa"]), on=st.sampled_from([False, False, True]), reload=st.booleans())
    def any_switch(self, log, on, reload):
        self.switch(log, on, reload)

    @rule(on=st.booleans())
    def batch_index_setting(self, on):
        """acknowledgmentAtBatchIndexLevelEnabled in broker.conf, then a broker restart (it is not dynamic).

        Only with the restart: a real broker's runtime configuration shows the new value once it restarts,
        while the engine's shows a broker.conf edit at once (a limit of the model), so an edit alone would
        make the verdict judge stores opened with the old value by the new one."""
        value = str(on).lower()
        cli(["engine", "config", "set", "acknowledgmentAtBatchIndexLevelEnabled", value, *self.target()])
        cli(["engine", "reload", *self.target()])
        self.trail.add(f"engine config set acknowledgmentAtBatchIndexLevelEnabled {value}; engine reload")

    # Soundness only: where batching is switched behind the tool's back, two of the judged liveness properties
    # do not hold yet (a WAIT that needs an unload after a change without one; fixes that leave batched ledgers
    # while broker.conf and the dynamic configuration disagree), so the judged machine leaves it out.
    @precondition(lambda self: self.behind_allowed)
    @rule(log=st.sampled_from(["tc", "pa"]), on=st.booleans(), reload=st.booleans())
    def behind_the_back(self, log, on, reload):
        """Batching switched without the tool: `pulsar-admin brokers update-dynamic-config` by another operator or
        by automation, with or without an unload after it (here a restart, which also restarts the counters)."""
        key = {"tc": "transactionLogBatchedWriteEnabled", "pa": "transactionPendingAckBatchedWriteEnabled"}[log]
        value = str(on).lower()
        cli(["engine", "config", "set", key, value, *self.target()])
        if reload:
            cli(["engine", "reload", *self.target()])
        self.trail.add(f"engine config set {key} {value}" + ("; engine reload" if reload else ""))

    @rule(
        logs=st.sampled_from([("tc",), ("pa",), ("tc", "pa")]),
        transactions=st.sampled_from([20, 60]),
        behind=st.booleans(),
    )
    def batching_spell(self, logs, transactions, behind):
        """Batching comes back for a while and goes again between two checks: someone turns it on (with the tool, or
        behind its back with an unload), clients write, it is turned off again, and clients go on."""
        behind = behind and self.behind_allowed  # (see behind_the_back)
        for on in (True, False):
            for log in logs:
                self.behind_the_back(log, on, True) if behind else self.switch(log, on, True)
            self.workload(transactions)

    @rule(kind=st.sampled_from(["restart", "coordinator", "topic", "scale-up"]))
    def broker_event(self, kind):
        """A broker restart, a coordinator or topic unload, more coordinators."""
        if kind == "scale-up":
            with self.engine() as engine:
                count = engine.coordinator_count
            if count < 3:
                cli(["scale-transactionCoordinators", "-r", count + 1, "--yes", *self.target()])
                self.trail.add(f"scale-transactionCoordinators -r {count + 1} --yes")
            return
        extra = {"restart": [], "coordinator": ["--coordinator", "0"], "topic": ["-t", TOPIC]}[kind]
        cli(["engine", "reload", *extra, *self.target()])
        self.trail.add(" ".join(["engine reload", *extra]))

    # ---------------------------------------------------------------- what clients and time do

    @rule(transactions=st.sampled_from([20, 60, 150]))
    def workload(self, transactions):
        self.seed += 1
        with self.engine() as engine:
            simulate(engine, SimOptions(transactions=transactions, topics=2, subscriptions=3, seed=self.seed))
        self.trail.add(f"engine simulate -n {transactions} --topics 2 --subscriptions 3 --seed {self.seed}")

    @rule(count=st.integers(2, 4), timeout=st.sampled_from(["30s", "1h"]), coordinator=st.sampled_from([0, 0, 1]))
    def open_transactions(self, count, timeout, coordinator=0):
        """A client opens transactions, acknowledges in them, and keeps them open. A second after the check
        before it, as on a real cluster: the engine's clock stands still between steps, and a transaction
        opened at the very instant a check saw the cursor stop cannot be told from one open at that check."""
        timeout_ms = {"30s": 30_000, "1h": 3_600_000}[timeout]
        with self.engine() as engine:
            advance(engine, 1000)
            tc_id = min(coordinator, engine.coordinator_count - 1)  # any coordinator the engine has
            tc = engine.tc(tc_id)
            opened = []
            for _ in range(count):
                tc.new_transaction(timeout_ms, opened.append)
            engine.checkpoint()
            store = engine.pending_ack(TOPIC, "sim-sub-0")
            for least in opened:
                tc.add_subscriptions(least, [(store.topic, store.sub_name)], lambda pos: None)
                store.ack(tc_id, least, store.take_messages(1), lambda pos: None)
            engine.checkpoint()
        self.held += [(tc_id, least) for least in opened]
        self.trail.add(
            f"a client opens {count} transaction(s) on coordinator {tc_id} (timeout {timeout}) and acks in them"
        )

    @precondition(lambda self: self.held)
    @rule(how=st.sampled_from(["commit", "abort", "dies", "abort-by-hand"]))
    def client_ends(self, how):
        """The client commits or aborts what it holds, or dies (they time out), or an operator aborts one."""
        if how == "dies":
            self.trail.add(f"the client dies with {len(self.held)} open transaction(s)")
        elif how == "abort-by-hand":
            tc_id, least = self.held[0]
            cli(["abort-transaction", "-m", tc_id, "-l", least, "--yes", *self.target()], expect=(0, 3, 4))
            self.trail.add(f"abort-transaction -m {tc_id} -l {least} --yes")
        else:
            with self.engine() as engine:
                for tc_id, least in self.held:
                    meta = engine.tc(tc_id).txns.get(least)
                    if meta is not None and meta.status == OPEN:
                        engine.end_transaction(tc_id, least, how == "commit", lambda pos: None, lambda exc: None)
                engine.checkpoint()
            self.trail.add(f"the client {how}s its {len(self.held)} open transaction(s)")
        self.held = []

    @rule(transactions=st.sampled_from([60, 150]))
    def an_ordinary_quarter_hour(self, transactions):
        """Clients finish what they hold and go on; a quarter of an hour passes. Ledgers roll and are trimmed, so
        walks reach the states a downgrade passes through (and SAFE) often enough for the rest to act on them."""
        if self.held:
            self.client_ends("commit")
        self.workload(transactions)
        self.time_passes("15m")

    @rule(duration=st.sampled_from(["30s", "15m", "2h"]))
    def time_passes(self, duration):
        cli(["engine", "advance", duration, *self.target()])
        self.trail.add(f"engine advance {duration}")

    # ---------------------------------------------------------------- the verdicts against the oracle

    def check(self, directory=None, checkpoint=None, *extra):
        args = ["downgrade", "check", *self.target(directory), "--checkpoint", checkpoint or self.checkpoint, *extra]
        return cli([*args, "-o", "json"], expect=(0, 5, 6)).json()

    # A WAIT is also checked with --confirm-from-bookies, which reads what is stored (on an engine directory,
    # the engine's own store) and may turn it SAFE: never while a batched entry is reachable.
    confirming = True

    @invariant()
    def never_a_false_safe(self):
        """What a check would say now, without keeping it: never SAFE while a batched entry is stored."""
        if not self.trail.steps:
            return  # before initialize
        extra, peek = (), self.peek()
        doc = self.check(None, peek)
        if doc["verdict"] == "WAIT" and self.confirming:
            extra, peek = ("--confirm-from-bookies",), self.peek()
            doc = self.check(None, peek, *extra)
        if doc["verdict"] != "SAFE":
            return
        with self.engine() as engine:
            reachable = [log for log in batched_ledgers(engine) if log["reachable"]]
        assert not reachable, self.failure(
            f"SAFE{' from the bookies' if extra else ''} while batched entries are reachable", doc, reachable
        )
        if not extra or self.thorough:  # a copy and time per confirmed SAFE: 4 times the fast budget
            self.safe_stays_safe(doc, peek, *extra)

    def peek(self) -> Path:
        """A copy of the operator's checkpoint, for a check that must not change what the operator keeps."""
        peek = self.root / "peek.json"
        peek.unlink(missing_ok=True)
        if self.checkpoint.exists():
            shutil.copy(self.checkpoint, peek)
        return peek

    @rule(judge=st.booleans())
    def downgrade_check(self, judge):
        """The operator checks (the checkpoint keeps what it saw); half of the checks are judged against
        the oracle's future, which costs a copy and rounds of traffic."""
        doc = self.check()
        self.trail.add(f"downgrade check -> {doc['verdict']}")
        if not (judge and self.judging):
            return
        if doc["verdict"] == "BLOCKED":
            self.blocked_needs_an_operator(doc)
        elif doc["verdict"] == "WAIT":
            self.wait_ends_by_itself(doc)
        self.upgrade_follows_the_storage()

    @rule()
    def downgrade_reset(self):
        cli(["downgrade", "reset", "--checkpoint", self.checkpoint, *self.target()])
        self.trail.add("downgrade reset")

    def verdicts_follow_the_oracle(self):
        """Every judgement at once on the current state (the regression tests' step)."""
        self.never_a_false_safe()
        self.downgrade_check(True)

    def safe_stays_safe(self, doc, checkpoint, *extra):
        """SAFE, then time alone (idle ledgers roll over, timeouts, trims; no traffic, no operator) on a
        copy: still SAFE, checked the same way. Nothing batched can appear with batching off, so a later WAIT
        would be the verdict forgetting what it knew, and a --wait started then would never end."""
        copy, checkpoint = self.copy(checkpoint)
        try:
            with Engine.open(copy, auto_init=False) as engine:
                advance(engine, horizon_ms(engine))
            after = self.check(copy, checkpoint, *extra)
            assert after["verdict"] == "SAFE", self.failure(
                f"SAFE, then {after['verdict']} once time passed with no traffic and no operator",
                doc,
                after["problems"]
                + [
                    (i.get("coordinatorId"), i.get("topic"), i["reason"])
                    for i in after["coordinators"] + after["subscriptions"]
                    if not i["clear"]
                ],
            )
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)

    def blocked_needs_an_operator(self, doc):
        # Batching configured on is BLOCKED whatever the stores do now: a restart or an unload, which
        # happen without an operator too, would bring it back; the oracle's future has neither.
        configured_on = any("must be false" in p for p in doc["problems"])
        # Fails closed where it cannot know: a setting changed outside the tool leaves a store's batching unknown,
        # and transactions open across a switch may have all their records unbatched (opened before a spell),
        # which the admin API cannot tell; the fix it prints then is harmless.
        configured_on |= any("whether batching is effective is unknown" in p for p in doc["problems"])
        configured_on |= any(i["cause"] == "open-across-switch" for i in doc["coordinators"])
        with self.engine() as engine:
            oracle = downgrade_oracle(engine, rounds=2, seed=self.seed + 1, traffic_minimum=TRAFFIC)
        assert configured_on or not (oracle["batchedReachable"] and oracle["clearsWithoutOperator"]), self.failure(
            "BLOCKED, but traffic and time alone clear every batched ledger", doc, oracle["future"]
        )
        # Following every printed fix leads to WAIT or SAFE (on a copy), in a few steps at most: a remedy may
        # take two (the fixes of batching configured on, then those of what its spell left behind). Each step
        # must print new fixes.
        copy, checkpoint = self.copy()
        try:
            steps, fixes = [], doc["fixes"]
            for _ in range(FIX_STEPS):
                for fix in fixes:
                    self.run_fix(fix, copy)
                steps.append(fixes)
                after = self.check(copy, checkpoint)
                if after["verdict"] != "BLOCKED" or not after["fixes"] or after["fixes"] in steps:
                    break
                fixes = after["fixes"]
            assert after["verdict"] in ("WAIT", "SAFE"), self.failure(
                f"following the fixes {steps} leaves {after['verdict']}", doc, after["problems"]
            )
            # The oracle, not the verdict, says whether the fixes worked: traffic and time now clear it all.
            with Engine.open(copy, auto_init=False) as engine:
                fixed = downgrade_oracle(engine, rounds=2, seed=self.seed + 2, traffic_minimum=TRAFFIC)
            assert fixed["clearsWithoutOperator"], self.failure(
                f"after the fixes {steps}, traffic and time alone still leave batched ledgers", doc, fixed["future"]
            )
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)

    def wait_ends_by_itself(self, doc):
        """WAIT ends by itself, with traffic and time and no operator: in SAFE where they clear the batched
        ledgers (the oracle), or in BLOCKED where they never do. The latter is right only while a check cannot
        yet tell a pinned cursor from one that open transactions hold (it has stood still only since its record
        was made, after a `downgrade reset`, say): the next checks, the cursor still standing, must say BLOCKED."""
        with self.engine() as engine:
            oracle = downgrade_oracle(engine, rounds=2, seed=self.seed + 1, traffic_minimum=TRAFFIC)
        cleared, batched_now_reachable = oracle["clearsWithoutOperator"], oracle["batchedReachable"]
        if cleared and batched_now_reachable and not self.thorough:
            return  # the deep profile runs the --wait on a copy; the fast one only where nothing is stored
        copy, checkpoint = self.copy()
        seen = []
        try:
            with Engine.open(copy, auto_init=False) as engine:
                horizon = horizon_ms(engine)
            for round_ in range(WAIT_ROUNDS):
                with Engine.open(copy, auto_init=False) as engine:
                    traffic(engine, seed=self.seed * 100 + round_, minimum=TRAFFIC)
                    advance(engine, horizon)
                after = self.check(copy, checkpoint)
                seen.append(after["verdict"] + ": " + "; ".join(i["cause"] or "" for i in after["coordinators"]))
                if after["verdict"] != "WAIT":
                    break
            with Engine.open(copy, auto_init=False) as engine:
                left = [log for log in batched_ledgers(engine) if log["reachable"]]
            # Nothing stored batched: a few rounds of traffic and time end the WAIT in SAFE, not BLOCKED either.
            # Never cleared without an operator: the WAIT must turn BLOCKED.
            wanted = ("BLOCKED",) if not cleared else ("SAFE", "BLOCKED") if batched_now_reachable else ("SAFE",)
            assert after["verdict"] in wanted, self.failure(
                f"{WAIT_ROUNDS} rounds of traffic and {horizon // 1000} s each, no operator: {seen}, where "
                f"{' or '.join(wanted)} was due (traffic and time {'clear' if cleared else 'never clear'} the "
                f"batched ledgers); batched ledgers left: {[l['batchedLedgerIds'] for l in left]}",
                doc,
                {"progressWithoutOperator": oracle["progressWithoutOperator"], **oracle["future"]},
            )
        finally:
            shutil.rmtree(copy.parent, ignore_errors=True)

    def upgrade_follows_the_storage(self):
        result = cli(["upgrade", "check", *self.target(), "-o", "json"], expect=(0, 5, 6))
        if result.json()["verdict"] != "COMPLETE":
            return
        with self.engine() as engine:
            stores = [tc.ml for tc in engine.all_tcs()] + [
                engine.pending_ack(t, s).ml for t, s in engine.subscriptions() if engine.pending_ack_if_exists(t, s)
            ]
            off = [ml.name for ml in stores if not ml.owner.get("batchEnabled")]
        assert not off, self.failure("upgrade COMPLETE while stores do not batch", result.json(), off)

    def copy(self, checkpoint: Path | None = None) -> tuple[Path, Path]:
        scratch = Path(tempfile.mkdtemp(prefix="verdict-oracle-copy-"))
        with self.engine() as engine:
            copy_engine(engine, scratch / "engine")
        source, checkpoint = checkpoint or self.checkpoint, scratch / "checkpoint.json"
        if source.exists():
            shutil.copy(source, checkpoint)
        return scratch / "engine", checkpoint

    def run_fix(self, fix: str, copy: Path) -> None:
        words = shlex.split(fix)
        if words[0] == "pulsar-txn":
            if "--engine-dir" in words:
                i = words.index("--engine-dir")
                words[i + 1] = str(copy)
            else:
                words += ["--engine-dir", str(copy)]
            cli(words[1:], expect=(0, 5, 6))
        elif words[:3] == ["pulsar-admin", "brokers", "update-dynamic-config"]:
            key, value = words[words.index("--config") + 1], words[words.index("--value") + 1]
            cli(["engine", "config", "set", key, value, "--engine-dir", copy])
        elif words[:3] == ["pulsar-admin", "topics", "unload"]:
            topic = words[3]
            with Engine.open(copy, auto_init=False) as engine:
                if "transaction_coordinator_assign-partition-" in topic:
                    engine.reload(coordinator=int(topic.rsplit("-", 1)[1]))
                else:
                    engine.reload(topic=topic)
        else:
            raise AssertionError(f"a fix that cannot be run as printed: {fix!r}")

    def failure(self, what: str, doc, detail) -> str:
        return (
            f"{what}\nverdict: {doc.get('verdict')}; problems: {doc.get('problems')}; fixes: {doc.get('fixes')}\n"
            f"coordinators: {json.dumps(doc.get('coordinators'))[:1500]}\ndetail: {detail}\nsteps:\n{self.trail}"
        )


class VerdictOracleFull(VerdictOracle):
    """The bench's profile: a --wait on a copy for every judged WAIT, even with batched entries stored."""

    thorough = True


class VerdictOracleSound(VerdictOracle):
    """Soundness only, every rule: the widest exploration the fast suite's budget allows. Its walks start more
    often where a false SAFE could hide: a downgrade under way, with batch-index deletion on (the stall, which
    the judged machine explores, keeps a walk BLOCKED for good)."""

    judging = False

    @initialize(
        batching=st.sampled_from([True, True, True, False]),
        batch_index=st.sampled_from([True, True, False]),
        coordinators=st.integers(1, 2),
        held=st.sampled_from([3, 2]),
        downgrading=st.sampled_from([True, True, False]),
        index_lag=st.sampled_from([5, 60]),
    )
    def start(self, batching, batch_index, coordinators, held, downgrading, index_lag=5):
        super().start(batching, batch_index, coordinators, held, downgrading, index_lag)


class VerdictOracleServed(VerdictOracleSound):
    """The same walks with every check of the operator's made by URL, through `engine serve` (--admin-url),
    as on a cluster: the observations come over HTTP from the served engine's REST answers and metrics,
    and the checkpoint is the one an engine-directory check keeps (both know the engine by its id). A served
    engine has no bookies to confirm from."""

    confirming = False

    def __init__(self):
        super().__init__()
        self.port = port_outside_ephemeral_range()  # one URL for the whole walk

    def check(self, directory=None, checkpoint=None, *extra):
        if directory is not None:
            return super().check(directory, checkpoint, *extra)  # a copy, judged by time alone
        from pulsar_txn_cli.engine import server

        served = server.start(str(self.dir), port=self.port)
        try:
            args = ["downgrade", "check", "--admin-url", served.url, "--checkpoint", checkpoint or self.checkpoint]
            return cli([*args, "-o", "json"], expect=(0, 5, 6)).json()
        finally:
            served.close()
