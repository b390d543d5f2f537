"""The README is a front door and every link in the docs leads somewhere."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DOCS = [ROOT / "README.md", ROOT / "CHANGELOG.md", *sorted((ROOT / "docs").glob("*.md"))]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def _anchor(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    return re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")


def test_readme_is_a_front_door():
    text = (ROOT / "README.md").read_text()
    assert len(text.splitlines()) <= 250
    quick = text.split("## Quick start", 1)[1].split("```sh\n", 1)[1].split("```", 1)[0]
    assert [line.split("#")[0].strip() for line in quick.splitlines()] == ["./dev demo", "./dev test"]
    for section in ("## Commands at a glance", "## Exit codes", "## Target and authentication", "## Where to read on"):
        assert section in text


def test_every_relative_link_resolves():
    broken = []
    for doc in DOCS:
        for target in LINK.findall(doc.read_text()):
            if re.match(r"[a-z]+:", target):
                continue  # an absolute URL
            path, _, fragment = target.partition("#")
            file = (doc.parent / path).resolve() if path else doc
            if not file.exists():
                broken.append(f"{doc.relative_to(ROOT)}: {target}")
            elif fragment and file.suffix == ".md":
                headings = [_anchor(h) for h in re.findall(r"^#+ (.+)$", file.read_text(), re.M)]
                if fragment not in headings:
                    broken.append(f"{doc.relative_to(ROOT)}: {target} (no such heading)")
    assert not broken, broken


def test_every_figure_names_a_command_that_exists():
    """docs/figures.md: each section names the command that prints its figures, and every bench
    command in the docs names a bench in bench/ and options that bench takes."""
    figures = (ROOT / "docs" / "figures.md").read_text()
    sections = re.split(r"^## ", figures, flags=re.M)[1:]
    assert len(sections) >= 10
    for section in sections:
        title = section.splitlines()[0]
        if title != "To be re-measured":
            assert re.search(r"python -m bench \w+|pytest|\.ci/run", section), f"figures.md: {title!r} names no command"
    benches = {p.stem[len("bench_") :]: p.read_text() for p in (ROOT / "bench").glob("bench_*.py")}
    wrong = []
    for doc in DOCS:
        for name, options in re.findall(
            r"python -m bench ([a-z_]+)((?:\s+\[?--[a-z][\w-]*(?:=\S+?)?\]?)*)", doc.read_text()
        ):
            if name not in benches:
                wrong.append(f"{doc.name}: no bench {name!r}")
            wrong += [
                f"{doc.name}: bench {name} has no {opt}"
                for opt in re.findall(r"--[\w-]+", options)
                if f'"{opt}"' not in benches.get(name, "")
            ]
    assert not wrong, wrong
