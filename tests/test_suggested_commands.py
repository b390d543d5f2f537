"""Every command the tool suggests is runnable as printed, and every fix has the effect it is printed for.

The scenarios below drive the tool to every kind of advice it prints (fix lines, hints, `next:`
lines, interrupt messages, stuck-readers' fixes, the downgrade advice texts, the switch guard,
demo's suggestions) on an engine directory with a space in its path, and on an engine served over
HTTP (--admin-url). Every `pulsar-txn` command found is then run exactly as printed (shlex), with
no target in the environment (no PULSAR_TXN_* variables, XDG directories of the test's own), and
must reach the same target (its `target:` line) and not fail with a usage error (exit 2). On an
engine directory no `pulsar-admin` command may be suggested (it cannot reach one). An unexpected error
(`error: unexpected` on stderr) fails a command wherever it runs.

The effect check (the second half): each fix of `downgrade check` and of `doctor` is run right after the
output that printed it, on a copy of that state (the engine directory and the user state directory with
its checkpoint), for an engine directory and for an engine served by URL; the verdict must move forward,
or the finding it was listed under must be gone (or be only a warning where it was an error).
"""

from __future__ import annotations

import contextlib
import json
import re
import shlex
import signal
import subprocess
import sys
import time

import pytest

from pulsar_txn_cli.engine.broker import Engine
from tests import sigint
from tests.conftest import assert_no_crash, port_outside_ephemeral_range, run_cli

pytestmark = pytest.mark.timeout(240)

CLI = [sys.executable, "-m", "pulsar_txn_cli"]
# Words printed in place of a value the tool cannot know at that point, each marked as such in the
# sentence around it ("MOST and LEAST from that listing"): commands holding them are not run.
PLACEHOLDERS = {
    "MOST": "a transaction id from the listing the same advice names first",
    "LEAST": "a transaction id from the listing the same advice names first",
}
QUOTED = re.compile(r"`(pulsar-(?:txn|admin) [^`]+)`")
TOPIC = "persistent://public/default/orders"


def suggestions(*texts: str) -> list[str]:
    """Every pulsar-txn / pulsar-admin command in the texts: quoted in prose, or a whole line (after
    an optional `fix:`/`next:`/`hint:` label), or one of stuck-readers' `|`-separated fixes."""
    found: list[str] = []
    for text in texts:
        found += QUOTED.findall(text)
        for line in text.splitlines():
            line = re.sub(r"^\s*(?:fix|next|hint):\s*", "", line.strip())
            for part in line.split("  |  "):
                part = re.sub(r"^\(\d+,\d+\) on \S+: ", "", part.strip())
                if part.startswith(("pulsar-txn ", "pulsar-admin ")) and "`" not in part:
                    found.append(part)
    return list(dict.fromkeys(found))


def _command_names() -> set[str]:
    from typer.main import get_command

    from pulsar_txn_cli.cli.app import app

    return set(get_command(app).commands)


# A command of the tool written with flags but without `pulsar-txn` in front ("reopen the stores with
# set-txn-tc-batch-log --enable false --reload"): not runnable as printed.
NAMES = "|".join(sorted(map(re.escape, _command_names()), key=len, reverse=True))
BARE = re.compile(rf"(?<![\w/-])({NAMES}) --")
QUOTED_BARE = re.compile(rf"`({NAMES})\b[^`]* --[^`]*`")


def bare_commands(*texts: str) -> list[str]:
    """Labelled lines (fix:, next:, hint:) that name a command of the tool with flags outside a
    `pulsar-txn ...` command, and any line that quotes one with flags but without `pulsar-txn`
    (`engine dump --list`; a quoted name alone, `downgrade check`, names the check, not a command to run)."""
    out = []
    for text in texts:
        for line in text.splitlines():
            if QUOTED_BARE.search(line):
                out.append(line.strip())
                continue
            if not re.match(r"^\s*(?:fix|next|hint):", line):
                continue
            rest = QUOTED.sub("", line)
            rest = re.sub(r"pulsar-(?:txn|admin) .*", "", rest)  # a whole-line command
            out += [line.strip() for _ in BARE.findall(rest)[:1]]
    return out


def json_suggestions(value) -> list[str]:
    """Commands in a JSON answer: `fixes`/`fix` arrays and any advice text."""
    out: list[str] = []
    if isinstance(value, dict):
        for key, item in value.items():
            if key in ("fixes", "fix") and isinstance(item, list):
                out += [c for c in item if isinstance(c, str) and c.startswith(("pulsar-txn ", "pulsar-admin "))]
            else:
                out += json_suggestions(item)
    elif isinstance(value, list):
        for item in value:
            out += json_suggestions(item)
    elif isinstance(value, str) and "`pulsar-" in value:
        out += QUOTED.findall(value)
    return out


def target_line(stderr: str) -> str | None:
    for line in stderr.splitlines():
        if line.startswith("target: "):
            return line.split(" (new:")[0]
        if line.startswith("engine: "):  # engine commands name their directory so
            return "target: engine " + line.removeprefix("engine: ")
    return None


def flag_target(argv: list[str]) -> str | None:
    """The target a command names by its flags (for one that prints no `target:` line)."""
    for flag, kind in (("--engine-dir", "engine"), ("--admin-url", "cluster")):
        if flag in argv:
            return f"target: {kind} {argv[argv.index(flag) + 1]}"
    return None


class Collector:
    def __init__(self, monkeypatch):
        for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
            monkeypatch.delenv(name, raising=False)
        self.found: dict[str, str] = {}  # command -> the scenario's target line

    def run(self, *args, expect=None, input=None):
        result = run_cli([str(a) for a in args], input=input)
        assert_no_crash(result)
        if expect is not None:
            assert result.exit_code in ((expect,) if isinstance(expect, int) else expect), result.stderr
        texts = [result.stdout, result.stderr]
        assert not bare_commands(*texts), f"a command to run without `pulsar-txn` in front: {bare_commands(*texts)}"
        commands = suggestions(*texts)
        if "-o" in args and args[args.index("-o") + 1] == "json" and result.stdout.strip():
            commands += json_suggestions(json.loads(result.stdout))
        target = target_line(result.stderr)
        for command in commands:
            self.found.setdefault(command, target)
        return result

    def add(self, text: str, target: str) -> None:
        for command in suggestions(text):
            self.found.setdefault(command, target)

    def check_all(self, *, cluster: bool) -> list[tuple[str, str]]:
        """Run every pulsar-txn suggestion as printed; returns (command, why) of those not run."""
        assert self.found, "no suggestion was collected"
        skipped = []
        for command, target in self.found.items():
            argv = shlex.split(command)
            if argv[0] == "pulsar-admin":
                assert cluster, f"pulsar-admin suggested for an engine directory: {command}"
                assert argv[1] == "--admin-url", f"pulsar-admin without the cluster's URL: {command}"
                continue
            marked = [w for w in argv if w in PLACEHOLDERS]
            if marked:
                skipped.append((command, PLACEHOLDERS[marked[0]]))
                continue
            result = run_cli(argv[1:])
            if result.exit_code == 2 and "stdin is not a terminal, so confirm with --yes" in result.stderr:
                # It asks first, as printed on a terminal; answered here with --yes.
                result = run_cli([*argv[1:], "--yes"])
            assert result.exit_code != 2, f"`{command}` fails as printed: {result.stderr}"
            assert_no_crash(result)
            reached = target_line(result.stderr) or flag_target(argv)
            if target is not None and _needs_target(argv):
                assert reached == target, f"`{command}` reached {reached!r}, printed under {target!r}"
        return skipped


def _needs_target(argv: list[str]) -> bool:
    return argv[1] not in ("decode", "analyze", "completion", "nack", "demo", "state")


def _open_transaction(directory, produce_to: str | None = None) -> tuple[int, int]:
    with Engine.open(directory) as engine:
        tc = engine.tc(0)
        got: list[int] = []
        tc.new_transaction(3_600_000, got.append)
        engine.checkpoint()
        if produce_to:
            engine.register_topic(produce_to, 1)
            partition = f"{produce_to}-partition-0"
            tc.add_partitions(got[0], [partition], lambda pos: None)
            engine.checkpoint()
            engine.buffers.produce(partition, (0, got[0]))
            engine.buffers.publish(partition, b"after")
        with engine.store.tx():
            engine.clock.advance_ms(90_000)
        engine.checkpoint()
    return 0, got[0]


def _engine_scenarios(c: Collector, d, tmp_path) -> None:
    t = ["--engine-dir", d]
    c.run("engine", "init", *t, "--coordinators", "1", expect=0)
    c.run("engine", "config", "set", "managedLedgerMaxEntriesPerLedger", "20", *t, expect=0)  # "engine reload"
    c.run("downgrade", "status", *t, expect=0)  # "`pulsar-txn downgrade check` takes one"
    c.run("set-txn-tc-batch-log", "--enable", *t, expect=0)  # "Rerun with --reload"
    c.run("get-txn-tc-batch-log-stat", *t, expect=0)  # hint: reopen the stores
    c.run("downgrade", "check", *t, expect=6)  # BLOCKED: fix lines (table)
    c.run("downgrade", "check", *t, "-o", "json", expect=6)  # ... and in JSON
    c.run("upgrade", "check", *t, expect=(5, 6))
    c.run("upgrade", "check", *t, "-o", "json", expect=(5, 6))
    # the BLOCKED check started the downgrade: batching on again is refused under --yes ("downgrade reset" first)
    c.run("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes", *t, expect=6)
    c.run("set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes", "--force", *t, expect=0)
    c.run("set-txn-tc-batch-log", "--enable", "--reload", "--yes", "--force", *t, expect=0)
    c.run("engine", "simulate", "-n", "60", "--concurrency", "5", *t, expect=0)
    _open_transaction(d)
    c.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", *t, expect=6)  # the switch guard
    c.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", "--force", *t, expect=0)
    c.run("set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes", "--force", *t, expect=0)
    for _ in range(2):  # WAIT with advice (open transaction, ledger not rolled...)
        c.run("downgrade", "check", *t, expect=(0, 5, 6))
        c.run("downgrade", "check", *t, "-o", "json", expect=(0, 5, 6))
        c.run("engine", "simulate", "-n", "30", "--concurrency", "3", "--seed", "7", *t, expect=0)
    _open_transaction(d, produce_to=TOPIC)
    c.run("stuck-readers", "-t", TOPIC, *t, expect=0)
    c.run("stuck-readers", "-t", TOPIC, *t, "-o", "json", expect=0)
    c.run("engine", "dump", "--log", "nosuch", *t, expect=2)
    c.run("engine", "dump", "-m", "nosuch", *t, expect=2)  # "`pulsar-txn engine dump --list` shows them"
    c.run("coordinator-stats", "-c", "9", *t, expect=4)  # "`pulsar-txn coordinators-list` shows them"
    c.run("slow-transactions", "-c", "9", *t, expect=4)  # the same (it said "check the URL")
    c.run("pending-ack-stats", "-t", TOPIC, "-s", "nosuch", *t, expect=4)  # "`pulsar-txn subscriptions` lists ..."
    missing = tmp_path / "typo engine"
    c.run("coordinator-stats", "--engine-dir", missing)  # the error names `engine init`


@pytest.mark.timeout(300)
def test_every_suggestion_on_an_engine_directory_runs_as_printed(monkeypatch, tmp_path):
    c = Collector(monkeypatch)
    d = tmp_path / "my engine"
    _engine_scenarios(c, d, tmp_path)
    # an interrupted workload (a real SIGINT to a real process)
    acks = tmp_path / "acks.log"
    proc = sigint.popen(
        [
            *CLI,
            "engine",
            "simulate",
            "--engine-dir",
            str(d),
            "-n",
            "10000000",
            "--txn-timeout-ms",
            "3600000",
            "--ack-log",
            str(acks),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 120
        while not (acks.exists() and acks.read_text().count("\nend ") >= 5):
            assert time.monotonic() < deadline and proc.poll() is None, "the workload never ended a transaction"
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60)
    finally:
        proc.kill()  # never leave a ten-million-transaction workload behind
    err = err.decode()
    assert proc.returncode == 130 and "slow-transactions --time 0" in err, err
    c.add(err, target_line(err))
    # demo's suggestions (its own new directory)
    demo_dir = tmp_path / "demo engine"
    result = run_cli(["demo", "--dir", str(demo_dir), "--transactions", "100", "--coordinators", "1"])
    c.add(result.stdout, f"target: engine {demo_dir}")
    skipped = c.check_all(cluster=False)
    assert len(c.found) >= 12, sorted(c.found)
    # what was not run is only what holds a marked placeholder
    assert all(why in PLACEHOLDERS.values() for _, why in skipped), skipped


@pytest.mark.timeout(300)
def test_every_suggestion_on_a_served_engine_runs_as_printed(monkeypatch, tmp_path):
    from pulsar_txn_cli.engine import server

    c = Collector(monkeypatch)
    d = tmp_path / "engine"
    assert run_cli(["engine", "init", "--engine-dir", str(d), "--coordinators", "1"]).exit_code == 0
    with server.start(str(d)) as served:
        t = ["--admin-url", served.url]
        c.run("set-txn-tc-batch-log", "--enable", *t, expect=0)
        c.run("get-txn-tc-batch-log-stat", *t, expect=0)
        c.run("downgrade", "check", *t, expect=6)
        c.run("downgrade", "check", *t, "-o", "json", expect=6)
        c.run("upgrade", "check", *t, expect=(5, 6))
        c.run("set-txn-tc-batch-log", "--disable", "--reload", "--yes", *t, expect=(0, 6))
        c.run("downgrade", "check", *t, expect=(0, 5, 6))
        c.run("downgrade", "check", *t, "-o", "json", expect=(0, 5, 6))
        c.check_all(cluster=True)


# -- effect: each fix, run on a copy of the state that printed it, removes what it addresses -------------------

RANK = {"BLOCKED": 0, "WAIT": 1, "SAFE": 2}


class Place:
    """An engine directory and the user state directory that goes with it (checkpoints, batch-log
    records), reached by --engine-dir or served by URL (`engine serve`) on a fixed port."""

    def __init__(self, directory, state, *, served: bool, port: int | None = None):
        self.dir, self.state, self.served = directory, state, served
        self.port = port_outside_ephemeral_range() if port is None else port
        self.server = None

    def __enter__(self):
        if self.served:
            from pulsar_txn_cli.engine import server

            self.server = server.start(str(self.dir), port=self.port)
        return self

    def __exit__(self, *exc):
        if self.server is not None:
            self.server.close()
            self.server = None

    @property
    def target(self) -> list[str]:
        return ["--admin-url", self.server.url] if self.served else ["--engine-dir", str(self.dir)]

    def run(self, *args, printed_for=None):
        """A command of the tool on this place; printed_for: the place a printed command named (its
        directory is this copy's; a served copy listens on the same port, so the URL stays)."""
        argv = [str(a) for a in args]
        if printed_for is not None and not printed_for.served:
            argv = [str(self.dir) if a == str(printed_for.dir) else a for a in argv]
        result = run_cli(argv, env={"XDG_STATE_HOME": str(self.state)})
        assert_no_crash(result)
        return result

    def json(self, *args) -> dict:
        result = self.run(*args, *self.target, "-o", "json")
        assert result.exit_code in (0, 5, 6), result.stderr
        return result.json()

    def copy(self, to) -> "Place":
        import shutil

        assert self.server is None, "a served engine is copied once it is stopped"
        shutil.copytree(self.dir, to / "engine")
        if self.state.exists():
            shutil.copytree(self.state, to / "state")
        _same_engine_at(to / "engine")
        return Place(to / "engine", to / "state", served=self.served, port=self.port)


def _same_engine_at(directory) -> None:
    """The copy forks the whole world, the engine with its own state directory: it stays the same engine (an
    ordinary copy gets an identity of its own, docs/identity.md), so its copied records still apply to it."""
    import sqlite3

    with contextlib.closing(sqlite3.connect(directory / "engine.db")) as db:
        db.execute("UPDATE meta SET value=? WHERE key='home'", (str(directory.resolve()),))
        db.commit()


def _downgrade_view(doc: dict) -> tuple[int, set, set]:
    held = {
        (i.get("coordinatorId"), i.get("topic"), i.get("subscription"), i["cause"])
        for i in doc["coordinators"] + doc["subscriptions"]
        if not i["clear"]
    }
    problems = {re.sub(r"\d+", "N", p) for p in doc["problems"]}
    return RANK[doc["verdict"]], held, problems


def _downgrade_moved(before: dict, after: dict) -> bool:
    """Forward: a better verdict, or some held log's cause, or some problem, gone."""
    rank, held, problems = _downgrade_view(before)
    rank2, held2, problems2 = _downgrade_view(after)
    return rank2 > rank or (rank2 == rank and (bool(held - held2) or bool(problems - problems2)))


def _runnable(fixes: list[str]) -> list[str]:
    """The fixes that are commands of the tool (a fix in words is for a broker's operator)."""
    return [f for f in fixes if f.startswith("pulsar-txn ") and not any(w in PLACEHOLDERS for w in shlex.split(f))]


def _apply(copy: Place, original: Place, fixes: list[str]) -> None:
    for fix in fixes:
        result = copy.run(*shlex.split(fix)[1:], printed_for=original)
        assert result.exit_code == 0, f"`{fix}` failed as printed ({result.exit_code}): {result.stderr}"


def check_downgrade_effects(place: Place, tmp_path) -> dict:
    """`downgrade check` on PLACE; each of its fixes, run on a copy of that moment together with the
    fixes printed before it, must move the verdict forward by the last of them (a fix that is one step
    of several, as a setting before the reload that applies it, need not move it alone)."""
    with place:
        before = place.json("downgrade", "check")
    fixes = _runnable(before["fixes"])
    if fixes:
        copy = place.copy(tmp_path / f"fixes-{len(list(tmp_path.iterdir()))}")
        with copy:
            _apply(copy, place, fixes)
            after = copy.json("downgrade", "check")
        assert _downgrade_moved(before, after), (fixes, before["problems"], after["problems"], after["verdict"])
    return before


def _finding_key(finding: dict) -> tuple:
    cause = next((e["values"].get("cause") for e in finding["evidence"] if "cause" in e["values"]), None)
    return finding["check"], finding["subject"], cause


def check_doctor_effects(place: Place, tmp_path) -> dict:
    """`doctor` on PLACE; for each finding with fixes, those fixes, run on a copy of that moment, leave
    no finding with the same check, subject and cause, or leave it a warning where it was an error."""
    with place:
        report = place.json("doctor")
    for finding in report["findings"]:
        fixes = _runnable(finding["fix"])
        if not fixes:
            continue
        copy = place.copy(tmp_path / f"doctor-{len(list(tmp_path.iterdir()))}")
        with copy:
            _apply(copy, place, fixes)
            after = copy.json("doctor")
        same = [f for f in after["findings"] if _finding_key(f) == _finding_key(finding)]
        assert not same or (finding["severity"] == "error" and all(f["severity"] == "warning" for f in same)), (
            fixes,
            finding["summary"],
            [f["summary"] for f in same],
        )
    return report


def _batched_with_open(directory, *, open_transactions: int, state, hours: int = 2) -> list[int]:
    """Batching on, a workload, transactions held open across the switch off (forced), `hours` later."""
    env = {"XDG_STATE_HOME": str(state)}
    t = ["--engine-dir", str(directory)]
    assert run_cli(["engine", "init", "--coordinators", "1", *t], env=env).exit_code == 0
    assert run_cli(["engine", "simulate", "-n", "40", *t], env=env).exit_code == 0
    for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert run_cli([command, "--enable", "--reload", "--yes", *t], env=env).exit_code == 0
    opened: list[int] = []
    with Engine.open(directory) as engine:
        for _ in range(open_transactions):
            engine.tc(0).new_transaction(3_600_000, opened.append)
        engine.checkpoint()
    for command in ("set-txn-tc-batch-log", "set-txn-pending-ack-batch-log"):
        assert run_cli([command, "--disable", "--reload", "--yes", "--force", *t], env=env).exit_code == 0
    if hours:
        assert run_cli(["engine", "advance", f"{hours}h", *t], env=env).exit_code == 0
    return opened


def _overdue(directory, *, open_transactions: int, state) -> list[int]:
    """Transactions held open across the switch off, batch-index acks on (and a restart) while they are young,
    then two hours in which their coordinator's timeout tracker never ends them: brokers before 2.11.1 left
    transactions their coordinator's reload replayed so (apache/pulsar#19200). The engine's tracker runs when
    its time moves (`engine advance`) and when a coordinator loads, so here the clock moves without it."""
    opened = _batched_with_open(directory, open_transactions=open_transactions, state=state, hours=0)
    t = ["--engine-dir", str(directory)]
    # The check right after the switch records the last batched ledgers (BLOCKED: open across the switch).
    assert run_cli(["downgrade", "check", *t], env={"XDG_STATE_HOME": str(state)}).exit_code == 6
    assert run_cli(["engine", "config", "set", "acknowledgmentAtBatchIndexLevelEnabled", "true", *t]).exit_code == 0
    assert run_cli(["engine", "reload", *t]).exit_code == 0
    with Engine.open(directory) as engine:
        with engine.store.tx():
            engine.clock.advance_ms(2 * 3_600_000)
        engine.checkpoint()
    return opened


def _stuck_committing(directory) -> None:
    """A transaction that produced to a partition and is COMMITTING past its timeout: its end never finished."""
    from pulsar_txn_cli.engine.coordinator import COMMITTING, OPEN

    assert run_cli(["engine", "init", "--coordinators", "1", "--engine-dir", str(directory)]).exit_code == 0
    with Engine.open(directory) as engine:
        tc = engine.tc(0)
        got: list[int] = []
        tc.new_transaction(60_000, got.append)
        engine.register_topic(TOPIC, 1)
        partition = f"{TOPIC}-partition-0"
        tc.add_partitions(got[0], [partition], lambda pos: None)
        engine.checkpoint()
        engine.buffers.produce(partition, (0, got[0]))
        tc.update_status(got[0], COMMITTING, OPEN, lambda pos: None)
        engine.checkpoint()
        with engine.store.tx():
            engine.clock.advance_ms(600_000)
        engine.checkpoint()


@pytest.mark.parametrize("served", [False, True], ids=["engine-dir", "served"])
def test_every_fix_removes_what_it_addresses(monkeypatch, tmp_path, served):
    """The stall (BLOCKED), overdue transactions (BLOCKED), step 1 (BLOCKED), ledgers not rolled over (WAIT),
    and a transaction stuck COMMITTING: each fix of `downgrade check` and `doctor`, run as printed on a copy of
    the state that printed it, moves the verdict forward or removes the finding it is listed under."""
    Collector(monkeypatch)  # no target from the environment
    place = Place(tmp_path / "stall" / "engine", tmp_path / "stall" / "state", served=served)
    _batched_with_open(place.dir, open_transactions=3, state=place.state)
    first = check_downgrade_effects(place, tmp_path / "stall")
    assert first["verdict"] == "BLOCKED", first["problems"]
    check_doctor_effects(place, tmp_path / "stall")

    overdue = Place(tmp_path / "overdue" / "engine", tmp_path / "overdue" / "state", served=served)
    _overdue(overdue.dir, open_transactions=3, state=overdue.state)
    second = check_downgrade_effects(overdue, tmp_path / "overdue")
    assert [i["cause"] for i in second["coordinators"]] == ["overdue-transaction"], second["coordinators"]
    check_doctor_effects(overdue, tmp_path / "overdue")

    on = Place(tmp_path / "on" / "engine", tmp_path / "on" / "state", served=served)
    env = {"XDG_STATE_HOME": str(on.state)}
    t = ["--engine-dir", str(on.dir)]
    assert run_cli(["engine", "init", "--coordinators", "2", *t], env=env).exit_code == 0
    assert run_cli(["set-txn-tc-batch-log", "--enable", "--reload", "--yes", *t], env=env).exit_code == 0
    assert run_cli(["engine", "simulate", "-n", "60", *t], env=env).exit_code == 0
    assert check_downgrade_effects(on, tmp_path / "on")["verdict"] == "BLOCKED"  # step 1
    assert run_cli(["set-txn-tc-batch-log", "--disable", "--reload", "--yes", *t], env=env).exit_code == 0
    with on:
        assert on.json("downgrade", "check")["verdict"] == "WAIT"  # records
    doctor = check_doctor_effects(on, tmp_path / "on")
    assert any("ledger-not-rolled" in f["summary"] for f in doctor["findings"]), doctor["findings"]

    stuck = Place(tmp_path / "stuck" / "engine", tmp_path / "stuck" / "state", served=served)
    _stuck_committing(stuck.dir)
    report = check_doctor_effects(stuck, tmp_path / "stuck")
    [hanging] = [f for f in report["findings"] if f["check"] == "hanging-transaction"]
    assert hanging["fix"][0].startswith("pulsar-txn unload --coordinator 0 --yes"), hanging
