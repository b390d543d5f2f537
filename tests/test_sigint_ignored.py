"""The Ctrl-C tests pass when the run itself was launched with SIGINT ignored (a background job,
`nohup`, some CI launchers): each starts its child with SIGINT at its default (tests/sigint.py)."""

from __future__ import annotations

import ast
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
ROOT = TESTS.parent
SENDS_SIGINT = re.compile(r"(send_signal|kill|killpg)\([^)]*SIGINT")
HERE = {Path(__file__).resolve(), TESTS / "sigint.py"}


def _files_that_send_sigint() -> list[Path]:
    return sorted(p for p in TESTS.rglob("*.py") if p.resolve() not in HERE and SENDS_SIGINT.search(p.read_text()))


def _sigint_tests(path: Path) -> list[str]:
    """Node ids of the tests in path that send SIGINT themselves or through a helper of the module."""
    text = path.read_text()
    tree = ast.parse(text)
    functions = [n for n in tree.body if isinstance(n, ast.FunctionDef)]
    senders = {f.name for f in functions if SENDS_SIGINT.search(ast.get_source_segment(text, f) or "")}
    rel = path.relative_to(ROOT)
    ids = []
    for f in functions:
        source = ast.get_source_segment(text, f) or ""
        if f.name.startswith("test_") and (f.name in senders or any(re.search(rf"\b{s}\(", source) for s in senders)):
            ids.append(f"{rel}::{f.name}")
    return ids


def test_every_test_that_sends_sigint_starts_its_child_through_the_helper():
    files = _files_that_send_sigint()
    assert len(files) >= 4, files  # test_interrupt, collect, served engine, downgrade end to end
    for path in files:
        assert "sigint.popen(" in path.read_text(), (
            f"{path} sends SIGINT but does not start its child with sigint.popen"
        )
        assert _sigint_tests(path), f"{path} sends SIGINT but no test of it was found"


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_the_sigint_tests_pass_under_a_run_that_ignores_sigint():
    ids = [node for path in _files_that_send_sigint() for node in _sigint_tests(path)]
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")]))}
    ignored = subprocess.run(
        [sys.executable, "-c", "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"],
        preexec_fn=_ignore_sigint,
        capture_output=True,
        text=True,
    )
    assert ignored.stdout.strip() == "True"  # the launcher below really ignores SIGINT
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *ids, "-q", "-m", "", "-n", "0", "-p", "no:cacheprovider"],
        preexec_fn=_ignore_sigint,
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=840,
    )
    assert run.returncode == 0, run.stdout[-6000:] + run.stderr[-2000:]
    passed = re.search(r"(\d+) passed", run.stdout)
    assert passed and int(passed.group(1)) >= len(ids), run.stdout[-3000:]
