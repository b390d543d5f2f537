"""Print how many tests each marker selects, as `pytest tests --collect-only -q -m NAME` counts them.

Usage: python scripts/count_tests.py [--write]   (one collection of the whole suite; a line per set,
then the fast suite and the total; --write puts them into docs/figures.md's table "Tests in each set")

`fast` is what plain `pytest` and `./dev test-fast` run: every test of no set. The sets are the real
components' and `tools` (the tests that need Chromium, Prometheus or fish), which `./dev test` runs.

tests/test_figures_counts.py fails when that table differs from this output.
"""

from __future__ import annotations

import collections
import io
import re
import sys
from contextlib import redirect_stdout
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETS = [
    "integration",
    "cluster",
    "versions",
    "real_downgrade",
    "secured",
    "spark_cluster",
    "nack_java",
    "doctor",
    "faults",
    "scale",
    "java_admin",
    "replication",
    "tools",
]


class _Counter:
    def __init__(self):
        self.counts: collections.Counter = collections.Counter()

    def pytest_collection_finish(self, session):
        for item in session.items:
            names = {m.name for m in item.iter_markers()}
            self.counts.update(names & set(SETS))
            self.counts["fast"] += not names & set(SETS)
            self.counts["all"] += 1


def counts() -> dict[str, int]:
    import pytest

    counter = _Counter()
    # -m "": every test, whatever pyproject.toml's addopts select by default
    args = [str(ROOT / "tests"), "--collect-only", "-q", "-m", "", "-p", "no:cacheprovider"]
    with redirect_stdout(io.StringIO()):
        code = pytest.main(args, plugins=[counter])
    if code != 0:
        raise SystemExit(f"the collection failed (pytest exit {code})")
    return {name: counter.counts[name] for name in [*SETS, "fast", "all"]}


def write(found: dict[str, int]) -> None:
    doc = ROOT / "docs" / "figures.md"
    text = doc.read_text()
    for name, n in found.items():
        label = name if name in ("fast", "all") else f"-m {name}"
        text, replaced = re.subn(rf"^\| `{re.escape(label)}` \| \d+ \|", f"| `{label}` | {n} |", text, flags=re.M)
        if not replaced:
            raise SystemExit(f"docs/figures.md has no row for `{label}` in 'Tests in each set'")
    doc.write_text(text)


def main(argv: list[str]) -> int:
    found = counts()
    for name, n in found.items():
        print(f"{name} {n}")
    if argv == ["--write"]:
        write(found)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
