"""docs/compatibility.md's table is generated from a versions run's results (docs/compatibility.json)
by scripts/gen_compatibility.py, never written by hand; the results cover every line the run tests."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests" / "integration"))

import versions  # noqa: E402  (tests/integration/versions.py: the lines the versions run starts)


def test_the_table_is_the_one_the_script_writes_from_the_runs_results():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "gen_compatibility.py"), "--check"], capture_output=True, text=True
    )
    assert run.returncode == 0, run.stderr


def test_the_results_come_from_a_whole_run_of_every_line():
    results = json.loads((ROOT / "docs" / "compatibility.json").read_text())
    assert results["lines"] == list(versions.MATRIX_LINES)
    assert all(results["matrix"][line] for line in results["lines"])
    # A table from a run with failures would publish what a failed test saw: regenerate from a green run
    # (`python scripts/gen_compatibility.py tests/integration/versions/target/compatibility-run.json`).
    assert results["tests"]["passed"] > 0 and results["tests"]["failed"] == 0, results["tests"]
    for line in results["lines"]:
        assert results["matrix"][line].get("upgrade check"), line
