"""Tests and `demo` keep out of the user's real data, state and config directories.

conftest.py points the "real" directories at a sentinel for the whole session, gives every test its
own (`_own_dirs`) and fails the session if anything lands in the sentinel."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import SENTINEL_VAR, XDG_NAMES, written_to_real_dirs


def _files(root: Path) -> list[str]:
    return sorted(str(p) for p in root.rglob("*") if p.is_file()) if root.exists() else []


@pytest.mark.timeout(120)
def test_demo_forgets_its_temporary_engine(cli):
    result = cli(["demo", "--transactions", "200", "--coordinators", "1", "-o", "json"])
    assert result.exit_code == 0, result.stderr
    summary = result.json()
    assert summary["forgotten"] >= 1  # it had records (the batch-log changes, the checkpoint) and dropped them
    state = Path(os.environ["XDG_STATE_HOME"])
    assert _files(state) == [], "the demo's temporary engine left records in the state directory"
    listing = cli(["state", "list", "-o", "json"])
    assert listing.exit_code == 0 and listing.json() == []


def test_every_test_has_its_own_directories():
    sentinel = Path(os.environ[SENTINEL_VAR])
    import platformdirs

    for name in XDG_NAMES:
        assert sentinel not in Path(os.environ[name]).parents, name
    assert sentinel not in Path(platformdirs.user_state_dir("pulsar-txn")).parents
    assert sentinel not in Path(platformdirs.user_data_dir("pulsar-txn")).parents


@pytest.mark.timeout(60)
def test_a_subprocess_inherits_the_test_directories(tmp_path):
    """The CLI run as a program (as the integration sets do) writes into the test's directories."""
    engine = tmp_path / "engine"
    code = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli", "engine", "init", "--engine-dir", str(engine)],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert code.returncode == 0, code.stderr
    checkpoint = subprocess.run(
        [sys.executable, "-m", "pulsar_txn_cli", "downgrade", "check", "--engine-dir", str(engine)],
        capture_output=True,
        text=True,
        timeout=50,
    )
    assert checkpoint.returncode in (0, 5, 6), checkpoint.stderr
    assert _files(Path(os.environ["XDG_STATE_HOME"])), "the check's checkpoint went somewhere else"
    assert written_to_real_dirs() == []
