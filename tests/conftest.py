"""Shared fixtures. `cli` runs the real entry point in process with captured streams."""

from __future__ import annotations

import json
from dataclasses import dataclass

import os

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
}


def pytest_collection_modifyitems(items):
    for item in items:
        if item.get_closest_marker("timeout") is not None:
            continue
        bounds = [REAL_SET_TIMEOUTS[m.name] for m in item.iter_markers() if m.name in REAL_SET_TIMEOUTS]
        if bounds:
            item.add_marker(pytest.mark.timeout(max(bounds)))


def isolate(monkeypatch, tmp_path) -> None:
    """No target from the environment, and HOME, state and data under tmp_path: a test never reads
    or writes the user's engine, state, client.conf or pulsarctl config."""
    for name in ("PULSAR_TXN_ADMIN_URL", "PULSAR_TXN_ENGINE_DIR", "PULSAR_TXN_CONTEXT", "PULSAR_CLIENT_CONF"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "state"))
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "data"))


def run_cli(args: list[str], input: str | bytes | None = None, env: dict | None = None) -> CliResult:
    """Run `pulsar-txn ARGS` through main.run(), the same path as the console script."""
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
