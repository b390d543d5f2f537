"""docs/figures.md's test counts come from a command: its table "Tests in each set" is what
`python scripts/count_tests.py` prints (the counts of `pytest tests --collect-only -q -m NAME`)."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
ROW = re.compile(r"^\| `(-m [a-z_]+|fast|all)` \| (\d+) \|", re.M)


def _documented() -> dict[str, int]:
    text = (ROOT / "docs" / "figures.md").read_text()
    section = text.split("## Tests in each set", 1)[1].split("\n## ", 1)[0]
    return {name.removeprefix("-m "): int(n) for name, n in ROW.findall(section)}


@pytest.mark.timeout(300)
def test_the_documented_counts_are_the_collected_ones():
    run = subprocess.run(
        [sys.executable, str(ROOT / "scripts" / "count_tests.py")],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=280,
    )
    assert run.returncode == 0, run.stderr[-3000:]
    collected = {name: int(n) for name, n in (line.split() for line in run.stdout.splitlines())}
    documented = _documented()
    assert documented == collected, (
        "docs/figures.md's 'Tests in each set' is stale: put in what `python scripts/count_tests.py` prints"
    )


def test_no_other_sentence_claims_a_current_count():
    text = (ROOT / "docs" / "figures.md").read_text()
    assert not re.search(r"\d+ tests now", text)
