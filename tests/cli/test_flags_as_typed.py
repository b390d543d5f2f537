"""Flags as operators type them: each refused in one sentence or honoured, never silently ignored.

Real parts: the CLI through main.run() (and as a process where a terminal or a shell is needed), real engine
directories, a real pseudo-terminal for the confirmation question.
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
import time

import pytest

from tests.conftest import isolate

pytestmark = pytest.mark.timeout(120)

TOO_SHORT = (
    "error: --interval {} is too short: checks are at least 1 s apart (each asks every coordinator and subscription)"
)


@pytest.fixture(autouse=True)
def _isolated(monkeypatch, tmp_path):
    isolate(monkeypatch, tmp_path)


@pytest.fixture
def engine(cli, tmp_path):
    directory = tmp_path / "engine"
    made = cli(["engine", "init", "--coordinators", "1", "--engine-dir", directory])
    assert made.exit_code == 0, made.stderr
    return ["--engine-dir", str(directory)]


@pytest.mark.parametrize(
    "command",
    [["doctor", "--wait"], ["downgrade", "check", "--wait"], ["exporter"]],
    ids=["doctor", "downgrade check", "exporter"],
)
@pytest.mark.parametrize("interval", ["0", "0.5"])
def test_interval_too_short_is_one_sentence_from_every_command(cli, engine, command, interval):
    result = cli([*command, "--interval", interval, *engine])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == TOO_SHORT.format(f"{float(interval):g}")


@pytest.mark.parametrize(
    ("command", "sentence"),
    [
        (["doctor"], "error: --interval only applies with --wait: without it there is one check"),
        (["downgrade", "check"], "error: --interval only applies with --wait: without it there is one check"),
        (["exporter", "--once"], "error: --interval only applies without --once: with it there is one observation"),
    ],
    ids=["doctor", "downgrade check", "exporter --once"],
)
def test_interval_where_nothing_is_checked_again_is_refused(cli, engine, command, sentence):
    started = time.monotonic()
    result = cli([*command, "--interval", "5", *engine])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == sentence
    assert time.monotonic() - started < 5  # before any check


def _batched_then_off(cli, engine) -> None:
    """Batching on, a workload, batching off: the logs hold batched ledgers, so the verdict is WAIT for now."""
    for switch in ("--enable", "--disable"):
        done = cli(["set-txn-tc-batch-log", switch, "--reload", "--yes", "--force", *engine])
        assert done.exit_code == 0, done.stderr
        if switch == "--enable":
            assert cli(["engine", "simulate", "-n", "20", "--seed", "3", *engine]).exit_code == 0


@pytest.mark.parametrize("command", [["downgrade", "check"], ["doctor"]])
def test_a_wait_that_runs_out_says_so_in_its_last_line(cli, engine, command):
    _batched_then_off(cli, engine)
    assert cli(["downgrade", "check", *engine]).exit_code == 5  # a downgrade under way: the doctor watches it too
    result = cli([*command, "--wait", "--timeout", "1", "--interval", "1", *engine])
    assert result.exit_code == 5, result.stderr
    last = result.stdout.strip().splitlines()[-1]
    assert last.startswith("gave up waiting: --timeout 1 s ran out, and the answer is still "), result.stdout
    assert last.endswith("WAIT" if command[0] == "downgrade" else "warnings"), last


@pytest.mark.parametrize("duration", ["-5s", "-5", "-1m"])
def test_engine_advance_backwards_is_one_sentence(cli, engine, duration):
    result = cli(["engine", "advance", duration, *engine])
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith(f"error: DURATION '{duration}' is negative: the engine's clock only moves forward"), line
    assert "No such option" not in result.stderr


def test_engine_advance_still_names_an_unknown_option(cli, engine):
    result = cli(["engine", "advance", "--bogus", *engine])
    assert result.exit_code == 2 and "no such option: --bogus" in result.stderr, result.stderr


def test_a_negative_duration_elsewhere_is_named_as_negative(cli, engine):
    result = cli(["find-hanging", "--older-than", "-5m", *engine])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == (
        "error: --older-than '-5m' is negative: a duration is 0 or more, like 500ms, 1s, 10s, 1m, 5h or 3d"
    )


def test_engine_init_has_a_bound_on_coordinators(cli, tmp_path):
    directory = tmp_path / "huge"
    started = time.monotonic()
    result = cli(["engine", "init", "--coordinators", "100000", "--engine-dir", directory])
    assert result.exit_code == 2, result.stderr
    assert "--coordinators 100000 is more than 1024, pulsar-txn's bound" in result.stderr
    assert time.monotonic() - started < 5 and not (directory / "engine.db").exists()
    assert cli(["engine", "init", "--coordinators", "1024", "--engine-dir", tmp_path / "max"]).exit_code == 0


@pytest.mark.parametrize(
    "where",
    [
        ["engine", "config", "{dir}", "get", "clusterName"],
        ["engine", "{dir}", "config", "get", "clusterName"],
        ["engine", "config", "get", "clusterName", "{dir}"],
    ],
    ids=["after config", "after engine", "at the end"],
)
def test_engine_config_takes_the_engine_dir_where_users_type_it(cli, tmp_path, where):
    directory = tmp_path / "mine"
    assert cli(["engine", "init", "--cluster", "mine", "--engine-dir", directory]).exit_code == 0
    argv = []
    for word in where:
        argv += ["--engine-dir", str(directory)] if word == "{dir}" else [word]
    result = cli([*argv, "-o", "json"])
    assert result.exit_code == 0, result.stderr
    assert result.json()["value"] == "mine"


def _on_a_terminal(argv: list[str], answer: bytes, home) -> tuple[int, str]:
    """The CLI as its own process with a pseudo-terminal for stdin and stderr; answers its question."""
    primary, secondary = pty.openpty()
    env = {**os.environ, "HOME": str(home), "XDG_STATE_HOME": str(home / "state"), "NO_COLOR": "1"}
    env.pop("PULSAR_TXN_ENGINE_DIR", None)
    proc = subprocess.Popen(
        [sys.executable, "-m", "pulsar_txn_cli", *argv],
        stdin=secondary,
        stdout=subprocess.DEVNULL,
        stderr=secondary,
        env=env,
    )
    os.close(secondary)
    said, asked = b"", False
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([primary], [], [], 0.2)
            if ready:
                try:
                    chunk = os.read(primary, 4096)
                except OSError:  # the process closed the terminal
                    break
                said += chunk
                if not asked and b"[y/N]" in said:
                    os.write(primary, answer)
                    asked = True
            elif proc.poll() is not None:
                break
        return proc.wait(timeout=30), said.decode(errors="replace")
    finally:
        if proc.poll() is None:
            proc.kill()
        os.close(primary)


def test_answering_no_is_not_a_usage_error(tmp_path, cli, engine):
    code, said = _on_a_terminal(["unload", "--coordinator", "0", *engine], b"n\n", tmp_path)
    assert "Unload" in said and "[y/N]" in said, said
    assert "nothing was changed (not confirmed)" in said, said
    assert code == 6, said  # the change waits for an operator, as a guard's refusal does; 2 would blame the typing


def test_completion_offers_the_fault_names():
    env = {
        **os.environ,
        "_PULSAR_TXN_COMPLETE": "complete_bash",
        "COMP_WORDS": "pulsar-txn engine simulate --fault ",
        "COMP_CWORD": "4",
    }
    result = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli"], env=env, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    from pulsar_txn_cli.fault_names import FAULTS

    assert result.stdout.split() == list(FAULTS)
    env["COMP_WORDS"] = "pulsar-txn engine simulate --fault pe"
    narrowed = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli"], env=env, capture_output=True, text=True, timeout=60
    )
    assert narrowed.stdout.split() == ["pending-ack-not-ready"]


@pytest.mark.parametrize(
    ("n", "expected"),
    [(0, "0 entries"), (1, "1 entry"), (2, "2 entries")],
)
def test_a_count_agrees_with_its_noun(n, expected):
    from pulsar_txn_cli.output.units import counted

    assert counted(n, "entry", "entries") == expected
    assert counted(n, "request") == expected.replace("entries", "requests").replace("entry", "request")


def test_one_held_entry_is_one_entry_behind(cli, tmp_path):
    """A partition held one entry back by a hanging transaction says `1 entry behind`, not `1 entries`."""
    from pulsar_txn_cli.engine.broker import Engine

    topic = "persistent://public/default/one"
    directory = tmp_path / "held"
    engine = Engine.init(directory, coordinators=1)
    engine.register_topic(topic, 0)
    tc = engine.tc(0)
    got = []
    tc.new_transaction(3_600_000, got.append)
    engine.checkpoint()
    tc.add_partitions(got[0], [topic], lambda pos: None)
    engine.checkpoint()
    engine.buffers.produce(topic, (0, got[0]))
    engine.checkpoint()
    with engine.store.tx():
        engine.clock.advance_ms(40 * 60_000)
    engine.close()
    report = cli(["doctor", "--engine-dir", directory, "-o", "json"])
    [held] = [f for f in report.json()["findings"] if f["check"] == "held-readers"]
    assert ", 1 entry behind the last written" in held["summary"], held["summary"]
    table = cli(["doctor", "--engine-dir", directory])
    assert "2 errors, 0 warnings" in table.stdout and "checked 1 coordinator, 1 open transaction, 1 partition, 0 " in (
        table.stdout
    )


def test_a_fault_for_a_served_engine_is_refused_with_why_before_any_request(cli, tmp_path):
    """Nothing listens at the URL: a refusal that came after a request would be a connection error (exit 4)."""
    result = cli(["engine", "simulate", "--fault", "client-crash", "--admin-url", "http://127.0.0.1:9", "-n", "3"])
    assert result.exit_code == 2, result.stderr
    [line] = result.stderr.strip().splitlines()
    assert line.startswith("error: --fault client-crash with --admin-url: a fault is made inside the engine's own")
    assert "has no request that makes it sick" in line and "engine simulate --fault client-crash --engine-dir" in line
