"""pytest wiring for the real-broker integration suite (see harness.py)."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))

import harness  # noqa: E402


# Session broker: fewer/larger ledgers than the trimming experiments use.  (Broker default
# retention -1 does NOT keep consumed TC-log ledgers on 4.0.7, so it is not set here.)
SESSION_CONF = {
    "managedLedgerMaxEntriesPerLedger": 50,
}


def pytest_configure(config):
    config.addinivalue_line("markers", "integration: needs a real Pulsar broker (JDK + Maven)")


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """The set (marker) a test belongs to, for the harness's retry cap: set before its fixtures start, so a
    session broker or cluster started inside a test counts against that test's set."""
    from tests.conftest import REAL_SET_TIMEOUTS

    harness.CURRENT_SET[0] = next((m.name for m in item.iter_markers() if m.name in REAL_SET_TIMEOUTS), "fast")
    if harness.CURRENT_SET[0] != "fast":
        import shutil

        from tests.conftest import missing_tool

        missing = [tool for tool in ("java", "mvn") if not shutil.which(tool)]
        if missing:  # the brokers, the harness's build and Pulsar's own tools are all Java
            missing_tool(f"{' and '.join(missing)} {'are' if len(missing) > 1 else 'is'}")


@pytest.fixture(scope="session")
def pulsar_cluster():
    """ZooKeeper, a bookie and two brokers (cluster.py), once per session; a failed start FAILS."""
    import time

    import cluster

    t0 = time.monotonic()
    try:
        c = cluster.start_cluster()
    except Exception as e:  # noqa: BLE001
        pytest.fail(f"could not start a real Pulsar cluster:\n{e}", pytrace=False)
    print(f"\ncluster harness: started in {time.monotonic() - t0:.1f}s", file=sys.stderr)
    SESSION_CLUSTERS.append(c)
    yield c
    SESSION_CLUSTERS.remove(c)
    c.cleanup()


SESSION_CLUSTERS: list = []
_LOADED = __import__("time").monotonic()  # about when the session began (conftest loads at collection)


@pytest.fixture(scope="session")
def pulsar_broker():
    broker = harness.start_broker_or_fail(SESSION_CONF, name="session")
    yield broker
    harness.release_broker(broker)


@pytest.fixture
def collect_broker():
    """A broker of its own for each collect test. BookieShell reads its bookie beside the broker, and
    twice in CI the session broker's bookie stopped answering writes right after such reads (adds and
    ledger creation timed out for minutes, a restart did not clear it), failing every later test of
    the session: here nothing else shares that bookie. Small ledgers, so a short workload closes some."""
    broker = harness.start_broker_or_fail({"managedLedgerMaxEntriesPerLedger": 10}, name="collect")
    yield broker
    harness.release_broker(broker)


# A failed test may leave the session broker wedged (seen once at load average 8: a coordinator
# timed out and every later test failed with it). The failure stands; the next test gets the
# broker restarted on its data, so one failure does not hide the rest of the suite.
_SESSION_BROKER_SUSPECT = []


@pytest.fixture(autouse=True)
def _restart_session_broker_after_a_failure(request):
    if _SESSION_BROKER_SUSPECT and "pulsar_broker" in request.fixturenames:
        failed = _SESSION_BROKER_SUSPECT[-1]
        _SESSION_BROKER_SUSPECT.clear()
        harness.note_retry("session broker restarted on its data before the next test", f"{failed} failed")
        broker = request.getfixturevalue("pulsar_broker")
        broker.restart()
        broker.wait_coordinators_ready()
    yield


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    if rep.failed and "pulsar_broker" in item.fixturenames:
        _SESSION_BROKER_SUSPECT.append(item.nodeid)
    if rep.failed and SESSION_CLUSTERS:
        for c in SESSION_CLUSTERS:
            rep.sections.append(
                (f"pulsar cluster logs ({c.base})", c.logs(int(os.environ.get("PULSAR_TXN_IT_LOG_CHARS", "4000"))))
            )
            for b, deadlock in c.deadlocks():
                rep.sections.append((f"pulsar cluster {b.name}: {harness.DEADLOCK}", deadlock))
    if rep.failed and harness.SESSION_BROKERS:
        for b in harness.SESSION_BROKERS:
            rep.sections.append(
                (
                    f"pulsar broker '{b.name}' log tail ({b.log_path})",
                    b.log_tail(int(os.environ.get("PULSAR_TXN_IT_LOG_CHARS", "15000"))),
                )
            )
            rep.sections.append((f"pulsar broker '{b.name}' bookie threads", b.bookie_threads()))
            if deadlock := b.deadlock():
                rep.sections.append((f"pulsar broker '{b.name}': {harness.DEADLOCK}", deadlock))


def pytest_terminal_summary(terminalreporter):
    """The harness's retries (each with its cause), then the version matrix (test_versions.py)."""
    if harness.RETRIES or harness.STARTED:
        terminalreporter.write_sep("-", f"harness retries: {len(harness.RETRIES)}")
        for n, retry in enumerate(harness.RETRIES, 1):
            terminalreporter.write_line(f"{n}. [{retry['set']}] {retry['what']} (cause: {retry['cause']})")
    _matrix_summary(terminalreporter)


def _matrix_summary(terminalreporter):
    """The version matrix's outcomes (test_versions.py), as the table in docs/compatibility.md, and
    the run's results for scripts/gen_compatibility.py."""
    module = sys.modules.get("test_versions")
    matrix = getattr(module, "MATRIX", None)
    if not matrix:
        return
    _write_compatibility_results(terminalreporter, module.LINES, matrix)
    versions = list(matrix)
    commands = list(dict.fromkeys(c for row in matrix.values() for c in row))
    terminalreporter.write_sep("-", "pulsar-txn against each Pulsar line (last outcome per command)")
    terminalreporter.write_line("| command | " + " | ".join(versions) + " |")
    terminalreporter.write_line("|---" * (len(versions) + 1) + "|")
    for command in commands:
        terminalreporter.write_line(
            f"| `{command}` | " + " | ".join(matrix[v].get(command, "-") for v in versions) + " |"
        )


def _write_compatibility_results(terminalreporter, lines: list[str], matrix: dict) -> None:
    import json
    import time

    def count(kind: str) -> int:
        return len({r.nodeid for r in terminalreporter.stats.get(kind, []) if "test_versions.py" in r.nodeid})

    results = {
        "lines": lines,
        "matrix": {line: matrix[line] for line in lines if line in matrix},
        "tests": {"passed": count("passed"), "failed": count("failed") + count("error")},
        "seconds": round(time.monotonic() - _LOADED, 1),
        "when": time.strftime("%Y-%m-%d", time.gmtime()),
        "load": " ".join(f"{x:.1f}" for x in os.getloadavg()),
    }
    out = Path(
        os.environ.get("PULSAR_TXN_COMPAT_OUT") or Path(__file__).parent / "versions/target/compatibility-run.json"
    )
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    terminalreporter.write_line(f"results written to {out}: python scripts/gen_compatibility.py {out}")
