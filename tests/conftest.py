"""Shared fixtures. `cli` runs the real entry point in process with captured streams."""

from __future__ import annotations

import json
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path

import pytest
from hypothesis import settings
from typer.testing import CliRunner

from pulsar_txn_cli.cli.main import run


# CI runs the same examples every time (a red run must be reproducible); locally hypothesis
# keeps exploring new ones.
settings.register_profile("ci", derandomize=True, print_blob=True)
if os.environ.get("CI"):
    settings.load_profile("ci")


@dataclass
class CliResult:
    exit_code: int
    stdout: str
    stderr: str

    def json(self):
        return json.loads(self.stdout)

    def jsonl(self):
        return [json.loads(line) for line in self.stdout.splitlines() if line.strip()]


# What a crash of the CLI looks like (cli/main.py): without --debug, one line `error: unexpected
# <Type>; rerun with --debug ...` and exit code 1, never a traceback. So a check that a command did not
# crash looks for that line and that exit code; a traceback is looked for too (a thread's exception or
# Python's own "Exception ignored" print one without passing through main.run).
UNEXPECTED_LINE = "error: unexpected "


def assert_no_crash(outcome, stderr: str | bytes | None = None, *, debug: bool = False) -> None:
    """Fail if a CLI run crashed instead of ending in a documented outcome. OUTCOME is a result with an
    exit code (`exit_code`, `returncode` or `code`) and its stderr (`stderr` or `err`), or the exit
    code itself with STDERR. With DEBUG (the run had --debug, which prints a traceback for every error)
    a traceback is not a crash by itself: exit code 1 is."""
    if stderr is None:
        code = next(getattr(outcome, name) for name in ("exit_code", "returncode", "code") if hasattr(outcome, name))
        stderr = next(getattr(outcome, name) for name in ("stderr", "err") if hasattr(outcome, name))
    else:
        code = outcome
    text = stderr.decode(errors="replace") if isinstance(stderr, bytes) else (stderr or "")
    tail = text[-4000:]
    assert code != 1, f"exit code 1, the CLI's unexpected error:\n{tail}"
    assert not any(line.startswith(UNEXPECTED_LINE) for line in text.splitlines()), f"a crash:\n{tail}"
    assert "Exception ignored" not in text, f"Python reported an exception it ignored:\n{tail}"
    if not debug:
        assert "Traceback (most recent call last)" not in text, f"a traceback without --debug:\n{tail}"


def missing_tool(what: str, step: str = "./dev setup") -> None:
    """Fail (never skip) a test whose tool is not installed, saying which ./dev step installs it: a run
    without the tool must not pass for a run that checked what the tool checks."""
    pytest.fail(
        f"{what} not installed: `{step}` installs it (a missing tool fails the test by design; it is never skipped)",
        pytrace=False,
    )


# Time limits of the sets of real components (pyproject.toml sets 300 s for every other test). A
# session fixture (a broker, a cluster) starts inside the first test that asks for it, so each bound
# covers one start as well as the test itself.
REAL_SET_TIMEOUTS = {
    "integration": 900,
    "cluster": 1200,
    "versions": 1800,
    "real_downgrade": 1800,
    "secured": 900,
    "spark_cluster": 1200,
    "nack_java": 900,
    "doctor": 1200,
    "faults": 1200,
    "scale": 1800,
    "java_admin": 900,
    "replication": 600,
}


# The user's real data, state and config directories, as far as this test session is concerned: a
# sentinel directory made at start-up (by the controller; xdist's workers and every subprocess inherit
# the variables). Each test then gets its own directories (`_own_dirs`), so nothing may ever land in
# the sentinel; pytest_sessionfinish fails the run if something did.
XDG_NAMES = ("XDG_STATE_HOME", "XDG_DATA_HOME", "XDG_CONFIG_HOME")
SENTINEL_VAR = "PULSAR_TXN_TEST_REAL_DIRS"


def pytest_configure(config):
    if not os.environ.get(SENTINEL_VAR):
        os.environ[SENTINEL_VAR] = tempfile.mkdtemp(prefix="pulsar-txn-real-dirs-")
    for name in XDG_NAMES:
        os.environ[name] = os.path.join(os.environ[SENTINEL_VAR], name.lower())


def written_to_real_dirs() -> list[str]:
    """Every file under the sentinel directories (what some test wrote to the 'real' ones)."""
    root = Path(os.environ[SENTINEL_VAR])
    return sorted(str(p.relative_to(root)) for p in root.rglob("*") if p.is_file())


def pytest_sessionfinish(session, exitstatus):
    if hasattr(session.config, "workerinput"):  # an xdist worker: the controller checks once for all
        return
    written = written_to_real_dirs()
    if not written:
        import shutil

        shutil.rmtree(os.environ[SENTINEL_VAR], ignore_errors=True)
        return
    if written:
        writer = session.config.get_terminal_writer()
        writer.line()
        writer.line(
            f"FAILED: tests wrote {len(written)} file(s) into the user's real data/state/config directories "
            f"(stood in for by {os.environ[SENTINEL_VAR]}): {', '.join(written[:5])}",
            red=True,
        )
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture(autouse=True, scope="module")
def _module_dirs(tmp_path_factory):
    """A module's fixtures (an engine built once for a module) get directories of their own too:
    autouse module fixtures come before the module's other fixtures."""
    root = tmp_path_factory.mktemp("module-dirs")
    with pytest.MonkeyPatch.context() as patch:
        for name in XDG_NAMES:
            patch.setenv(name, str(root / name.lower()))
        yield


@pytest.fixture(autouse=True)
def _own_dirs(monkeypatch, tmp_path_factory):
    """Every test its own data, state and config directories (subprocesses inherit them)."""
    root = tmp_path_factory.mktemp("dirs")
    for name in XDG_NAMES:
        monkeypatch.setenv(name, str(root / name.lower()))


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        bounds = [REAL_SET_TIMEOUTS[m.name] for m in item.iter_markers() if m.name in REAL_SET_TIMEOUTS]
        if bounds:
            item.add_marker(pytest.mark.timeout(max(bounds)))


def port_outside_ephemeral_range() -> int:
    """A port free now and below Linux's ephemeral range (32768 and up), for a server that stops and
    listens again on the same port: a port the kernel hands out could meanwhile be taken by any connection
    another test worker opens."""
    import random
    import socket

    for _ in range(200):
        port = random.randrange(20000, 32768)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise AssertionError("no free port between 20000 and 32767")


def isolate(monkeypatch, tmp_path) -> None:
    """No target from the environment, and HOME, state and data under tmp_path: a test never reads
    or writes the user's engine, state, client.conf or pulsarctl config."""
    for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


# How many times run_cli ran the tool in this process: a harness retry must show that the tool did not run
# while the failure it blames on the broker happened (tests/integration/harness.py, Window).
TOOL_CALLS = [0]


def run_cli(args: list[str], input: str | bytes | None = None, env: dict | None = None) -> CliResult:
    """Run `pulsar-txn ARGS` through main.run(), the same path as the console script."""
    TOOL_CALLS[0] += 1
    runner = CliRunner()
    with runner.isolation(input=input, env=env) as (out, err, _):
        code = run([str(a) for a in args])
        import sys

        sys.stdout.flush()
        sys.stderr.flush()
        return CliResult(int(code), out.getvalue().decode(), err.getvalue().decode())


@pytest.fixture
def cli():
    return run_cli


def simulate_into(directory, coordinators: int = 1, **options):
    """A new engine in directory after a seeded workload (SimOptions' keywords); the directory."""
    from pulsar_txn_cli.engine.broker import Engine
    from pulsar_txn_cli.engine.simulate import SimOptions, simulate

    engine = Engine.init(directory, coordinators=coordinators)
    try:
        simulate(engine, SimOptions(**options))
    finally:
        engine.close()
    return directory


@pytest.fixture
def simulated_engine(tmp_path):
    """An engine directory with one coordinator after a small seeded workload (sim-topic-0, sim-sub-0)."""
    return simulate_into(tmp_path / "engine", transactions=4, concurrency=1, topics=1, subscriptions=1, seed=3)
