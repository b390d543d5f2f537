"""What an operator's second trial of the tool found: one test per finding, each failing without its fix."""

from __future__ import annotations

import pytest

from tests.conftest import assert_no_crash

pytestmark = pytest.mark.timeout(120)


# -- 5: a mistyped --engine-dir ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [
        ["coordinator-stats"],
        ["downgrade", "check"],
        ["get-txn-tc-batch-log-stat"],
        ["engine", "dump"],
        ["engine", "verify"],
        ["engine", "metrics"],
        ["engine", "config", "list"],
        ["engine", "reload"],
    ],
    ids=" ".join,
)
def test_a_mistyped_engine_dir_is_one_error_and_creates_nothing(cli, tmp_path, command):
    typo = tmp_path / "typo"
    result = cli([*command, "--engine-dir", typo])
    assert result.exit_code == 2, result.stderr
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr  # no "target: ... (new: created ...)" before the error
    assert lines[0].startswith(f"error: no engine in {typo} (--engine-dir)")
    assert f"`pulsar-txn engine init --engine-dir {typo}`" in lines[0]
    assert result.stdout == ""
    assert not typo.exists()


# -- 4: a closed stdout (`... | head -1`) -----------------------------------------------------------

import subprocess  # noqa: E402
import sys  # noqa: E402
from tests import sigint  # noqa: E402

CLI = [sys.executable, "-m", "pulsar_txn_cli"]


@pytest.fixture(scope="module")
def dumped_engine(tmp_path_factory):
    """An engine with enough entries that its dump is larger than a pipe's buffer, and the dump."""
    root = tmp_path_factory.mktemp("closed-stdout")
    engine = root / "engine"
    made = subprocess.run([*CLI, "engine", "simulate", "-n", "400", "--engine-dir", engine], capture_output=True)
    assert made.returncode == 0, made.stderr
    dump = root / "dump.jsonl"
    with open(dump, "wb") as out:
        assert subprocess.run([*CLI, "engine", "dump", "--engine-dir", engine], stdout=out).returncode == 0
    assert dump.stat().st_size > 256 * 1024
    return engine, dump


def _closed_stdout_commands(engine, dump):
    return {
        "engine dump": ["engine", "dump", "--engine-dir", engine],
        "engine dump json": ["engine", "dump", "--engine-dir", engine, "-o", "json"],
        "decode": ["decode", dump],
        "decode jsonl": ["decode", dump, "-o", "jsonl"],
        "decode json": ["decode", dump, "-o", "json"],
        "nack plan": ["nack", "plan", "--rate", "1000", "--delay", "60"],
    }


@pytest.mark.parametrize(
    "name", ["engine dump", "engine dump json", "decode", "decode jsonl", "decode json", "nack plan"]
)
def test_a_reader_that_stops_early_is_not_an_error(dumped_engine, name):
    """The reader closes the pipe before reading anything: quiet, exit 0 (docs/output.md)."""
    argv = [*CLI, *map(str, _closed_stdout_commands(*dumped_engine)[name])]
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()
    err = proc.stderr.read().decode()
    code = proc.wait(timeout=100)
    assert code == 0, err
    lines = [x for x in err.splitlines() if not x.startswith(("engine: ", "target: "))]
    assert lines == [], err


@pytest.mark.parametrize("name", ["engine dump", "decode jsonl", "nack plan"])
def test_head_in_a_pipefail_script(dumped_engine, name):
    import shlex

    argv = [*CLI, *map(str, _closed_stdout_commands(*dumped_engine)[name])]
    script = f"set -o pipefail; {shlex.join(argv)} -q | head -1"
    done = subprocess.run(["bash", "-c", script], capture_output=True, text=True, timeout=100)
    assert done.returncode == 0, done.stderr
    assert done.stderr == "" and len(done.stdout.splitlines()) == 1


# -- 1: downgrade check --wait --interval 0 --------------------------------------------------------


@pytest.mark.parametrize("interval", ["0", "0.5"])
def test_wait_refuses_an_interval_under_a_second(cli, tmp_path, interval):
    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    started = __import__("time").monotonic()
    result = cli(["downgrade", "check", "--wait", "--interval", interval, "--timeout", "3", "--engine-dir", engine])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == (
        f"error: --interval {float(interval):g} is too short: checks are at least 1 s apart "
        "(each asks every coordinator and subscription)"
    )
    assert __import__("time").monotonic() - started < 2  # refused before any check


# -- 2: Ctrl-C during `downgrade check --admin-url` -------------------------------------------------

KEPT = (
    "interrupted (Ctrl-C) before the command began: nothing was done",
    "interrupted (Ctrl-C) while connecting to the target: no check ran, no checkpoint was touched",
    "interrupted (Ctrl-C): the checkpoint ",
    "interrupted (Ctrl-C): no checkpoint was written yet",
)


def _signal_while_the_tool_loads(proc, rng) -> None:
    """SIGINT at a moment of the tool's own start-up, read off `python -X importtime`'s lines: after the first
    module of the package below its top (pulsar_txn_cli.__main__ is running, inside its own handler), then
    0 to 60 imports later. Never earlier: before that line CPython runs the site module and runpy, no line of
    pulsar-txn has run, and a Ctrl-C there is CPython's own ("Fatal Python error: init_import_site", or
    runpy's KeyboardInterrupt), out of the tool's reach."""
    import signal

    later = rng.randint(0, 60)
    inside = False
    for raw in proc.stderr:
        line = raw.decode()
        if not inside and "| pulsar_txn_cli." in line:
            inside = True
        elif inside and line.startswith("import time:"):
            later -= 1
        if inside and later <= 0:
            break
    proc.send_signal(signal.SIGINT)


@pytest.mark.timeout(300)
def test_ctrl_c_during_a_check_over_http_is_one_line_that_says_what_was_kept(tmp_path):
    """Real SIGINTs at many moments of a check of an engine served over HTTP (the admin calls run in
    a thread pool), half of them while the tool loads and half once the target answered: never a
    traceback, exactly one `interrupted` line naming what was kept, exit 130. Each moment is chosen
    from what the process printed, not by a sleep, and none is tried again."""
    import random
    import signal
    import time

    from pulsar_txn_cli.engine import server

    engine = tmp_path / "engine"
    # Batched logs, then batching off: the check says WAIT until the batched ledgers go, so --wait polls
    # (an engine that never batched is SAFE at once).
    steps = [
        ["engine", "init"],
        ["set-txn-tc-batch-log", "--enable", "--reload", "--yes"],
        ["set-txn-pending-ack-batch-log", "--enable", "--reload", "--yes"],
        ["engine", "simulate", "-n", "200", "--topics", "12", "--subscriptions", "40"],
        ["set-txn-tc-batch-log", "--disable", "--reload", "--yes"],
        ["set-txn-pending-ack-batch-log", "--disable", "--reload", "--yes"],
    ]
    for step in steps:
        made = subprocess.run([*CLI, *step, "--engine-dir", engine], capture_output=True, timeout=120)
        assert made.returncode == 0, (step, made.stderr)
    checkpoint = tmp_path / "cp.json"
    seen = set()
    rng = random.Random(21)
    with server.start(str(engine)) as served:
        check = ["downgrade", "check", "--admin-url", served.url, "--checkpoint", str(checkpoint), "--wait"]
        for attempt in range(10):
            loading = attempt % 2 == 0
            python = [sys.executable, "-X", "importtime"] if loading else [sys.executable]
            argv = [*python, "-m", "pulsar_txn_cli", *check, "--interval", "1"]
            proc = sigint.popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
            if loading:
                _signal_while_the_tool_loads(proc, rng)
            else:
                line = proc.stderr.readline().decode()
                assert line.startswith("target: "), line
                time.sleep(rng.uniform(0.0, 1.5))  # somewhere in the checks and the waits between them
                proc.send_signal(signal.SIGINT)
            out, err = proc.communicate(timeout=120)
            err = "\n".join(x for x in err.decode().splitlines() if not x.startswith("import time:"))
            assert proc.returncode == 130, (proc.returncode, err)
            assert_no_crash(proc.returncode, err)
            said = [x for x in err.splitlines() if "interrupted" in x]
            assert len(said) == 1, err
            assert said[0].startswith(KEPT), said
            seen.add(next(k for k in KEPT if said[0].startswith(k)))
    assert KEPT[0] in seen and KEPT[2] in seen, seen  # Ctrl-Cs landed while loading and in the checks


# -- 9: state prune of an identity nobody knows ----------------------------------------------------


def test_pruning_an_unknown_identity_is_one_error_naming_the_known_ones(cli, tmp_path):
    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    assert cli(["set-txn-tc-batch-log", "--enable", "--engine-dir", engine]).exit_code == 0  # a record
    known = cli(["state", "list", "-o", "json"]).json()[0]["identity"]
    result = cli(["state", "prune", "nosuch-identity"])
    assert result.exit_code == 2, result.stderr
    assert result.stderr.strip() == (
        f"error: no record of 'nosuch-identity' on this machine; known: {known!r} (`pulsar-txn state list` shows them)"
    )
    assert len(cli(["state", "list", "-o", "json"]).json()) == 1  # nothing was forgotten
    assert cli(["state", "prune", known]).exit_code == 0


def test_pruning_an_unknown_identity_names_a_few_however_many_are_known(cli, tmp_path):
    """One sentence even with many targets remembered: the closest identities, else three, and how many."""
    for i in range(5):
        engine = tmp_path / f"engine-{i}"
        assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
        assert cli(["set-txn-tc-batch-log", "--enable", "--engine-dir", engine]).exit_code == 0
    known = sorted({r["identity"] for r in cli(["state", "list", "-o", "json"]).json()})
    assert len(known) == 5
    result = cli(["state", "prune", "nosuch-identity"])
    assert result.exit_code == 2 and len(result.stderr.strip().splitlines()) == 1, result.stderr
    assert sum(identity in result.stderr for identity in known) == 3, result.stderr
    assert "(of 5 known; `pulsar-txn state list` shows them all)" in result.stderr
    typo = known[2][:-1] + ("0" if known[2][-1] != "0" else "1")
    result = cli(["state", "prune", typo])
    assert result.exit_code == 2 and f"did you mean: {known[2]!r}" in result.stderr, result.stderr
    assert len(cli(["state", "list", "-o", "json"]).json()) == 5  # nothing was forgotten


# -- 10: decode of an input with nothing decodable ---------------------------------------------------


@pytest.mark.parametrize("output", ["table", "json", "jsonl"])
@pytest.mark.parametrize("case", ["text file", "bad hex"])
def test_nothing_decodable_is_an_error_with_nothing_on_stdout(cli, tmp_path, case, output):
    if case == "text file":
        text = tmp_path / "text.txt"
        text.write_text("hello, this is not a dump\n")
        args = ["decode", text]
    else:
        args = ["decode", "--log", "tc", "--hex", "zz"]
    result = cli([*args, "-o", output])
    assert result.exit_code == 3, result.stderr
    assert result.stdout == ""  # no "(none)" and no [] shown as a result (docs/output.md)
    assert len(result.stderr.strip().splitlines()) == 1, result.stderr


# -- 12: a sanity bound on the coordinators, and a listing that stays fast --------------------------


@pytest.mark.timeout(240)
def test_scaling_is_bounded_and_the_listing_stays_fast(cli, tmp_path):
    import time

    engine = tmp_path / "engine"
    assert cli(["engine", "init", "--engine-dir", engine]).exit_code == 0
    refused = cli(["scale-transactionCoordinators", "-r", "100000", "--yes", "--engine-dir", engine])
    assert refused.exit_code == 2 and refused.stdout == ""
    assert refused.stderr.strip().startswith("error: --replicas 100000 is more than 1024, pulsar-txn's bound")
    assert cli(["coordinators-list", "--engine-dir", engine, "-o", "json"]).json()[-1]["id"] == 3  # unchanged
    assert cli(["scale-transactionCoordinators", "-r", "1024", "--yes", "--engine-dir", engine]).exit_code == 0
    started = time.monotonic()
    listed = cli(["coordinators-list", "--engine-dir", engine, "-o", "json"])
    elapsed = time.monotonic() - started
    assert listed.exit_code == 0 and len(listed.json()) == 1024
    assert elapsed < 60, f"listing 1024 coordinators took {elapsed:.1f} s"
