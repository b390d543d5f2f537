"""No import circle and no uphill import in the package: the graph of `pulsar_txn_cli` imports, read
with ast, has no cycle, neither between modules nor between packages (no package imports one that
imports it back), and every import points to the importer's own floor or a lower one, as the
layer table of docs/architecture.md draws them (the one list of the floors: this test reads it). And
docs/architecture.md's module list names every module, so a reader finds each one there.

Every import counts, at the top of a module or inside a function (a deferred import still ties
the two modules together). `from pkg import name` counts as an import of pkg.name when that is a
module, else of pkg. A package's own __init__ is not counted as a dependency of its submodules:
Python runs it before them either way.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pulsar_txn_cli

ROOT = Path(pulsar_txn_cli.__file__).parent
PACKAGE = "pulsar_txn_cli"
ARCHITECTURE = ROOT.parent / "docs" / "architecture.md"


def _modules() -> dict[str, Path]:
    found = {}
    for path in ROOT.rglob("*.py"):
        parts = list(path.relative_to(ROOT.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        found[".".join(parts)] = path
    return found


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    is_package = path.name == "__init__.py"
    out = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            out.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".") if is_package else name.split(".")[:-1]
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join(anchor + ([base] if base else []))
            for alias in node.names:
                out.add(f"{base}.{alias.name}" if f"{base}.{alias.name}" in modules else base)
    # a module's own parent packages run first anyway: not a dependency edge
    parents = {".".join(name.split(".")[:i]) for i in range(1, name.count(".") + 1)}
    return {m for m in out if m in modules and m != name and m not in parents}


def import_graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def find_cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One cycle as [a, b, ..., a], or None (an iterative depth-first search)."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in sorted(graph):
        if state.get(start):
            continue
        path, stack = [start], [iter(sorted(graph[start]))]
        state[start] = 1
        while stack:
            nxt = next(stack[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                stack.pop()
            elif state.get(nxt) == 1:
                return path[path.index(nxt) :] + [nxt]
            elif not state.get(nxt):
                state[nxt] = 1
                path.append(nxt)
                stack.append(iter(sorted(graph[nxt])))
    return None


def test_the_package_has_no_import_circle():
    graph = import_graph()
    assert len(graph) > 50 and f"{PACKAGE}.cli.app" in graph  # the walk found the package
    cycle = find_cycle(graph)
    assert cycle is None, "import circle: " + " -> ".join(cycle)


def package_of(module: str) -> str:
    """The top-level package a module belongs to (`pulsar_txn_cli.engine.buffer.log` -> `pulsar_txn_cli.engine`),
    or the module itself when it is a top-level module (`pulsar_txn_cli.stuck_readers`)."""
    parts = module.split(".")
    in_a_package = len(parts) > 2 or (len(parts) == 2 and (ROOT / parts[1]).is_dir())
    return ".".join(parts[:2]) if in_a_package else module


def package_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    """The import graph between packages: an edge where a module of one imports a module of another."""
    out: dict[str, set[str]] = {}
    for module, targets in graph.items():
        own = package_of(module)
        out.setdefault(own, set())
        for target in targets:
            theirs = package_of(target)
            if theirs != own:
                out[own].add(theirs)
    return out


def test_no_package_imports_one_that_imports_it_back():
    packages = package_graph(import_graph())
    assert f"{PACKAGE}.doctor" in packages and f"{PACKAGE}.downgrade" in packages  # the packages were found
    cycle = find_cycle(packages)
    assert cycle is None, "packages import each other: " + " -> ".join(cycle)


def test_the_package_check_finds_a_package_circle():
    graph = {
        f"{PACKAGE}.doctor.run": {f"{PACKAGE}.downgrade.runner"},
        f"{PACKAGE}.downgrade.runner": {f"{PACKAGE}.downgrade.verdict"},
        f"{PACKAGE}.downgrade.verdict": {f"{PACKAGE}.doctor.findings"},
        f"{PACKAGE}.doctor.findings": set(),
    }
    assert find_cycle(graph) is None  # no module circle...
    packages = package_graph(graph)
    assert find_cycle(packages) == [
        f"{PACKAGE}.doctor",
        f"{PACKAGE}.downgrade",
        f"{PACKAGE}.doctor",
    ]  # ...a package one
    assert package_of(f"{PACKAGE}.engine.buffer.log") == f"{PACKAGE}.engine"
    assert package_of(f"{PACKAGE}.stuck_readers") == f"{PACKAGE}.stuck_readers"


def test_the_cycle_finder_finds_a_cycle():
    assert find_cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]
    assert find_cycle({"a": {"b"}, "b": set()}) is None


# ---------------------------------------------------------------- floors


def doc_floors(text: str) -> dict[str, int]:
    """The layer table of docs/architecture.md: {"cli/": 1, "output/units.py": 8, ...} (1 is the top)."""
    block = re.search(r"<!-- layers: begin -->(.*?)<!-- layers: end -->", text, re.S)
    assert block, "docs/architecture.md has no layer table (<!-- layers: begin --> ... <!-- layers: end -->)"
    floors = {}
    for row in block.group(1).splitlines():
        cells = [c.strip() for c in row.strip().strip("|").split("|")]
        if len(cells) < 2 or not cells[0].isdigit():
            continue
        for entry in re.findall(r"`([^`]+)`", cells[1]):
            assert entry not in floors, f"{entry} is on two floors of the layer table"
            floors[entry] = int(cells[0])
    return floors


def entry_of(module: str, floors: dict[str, int]) -> str | None:
    """The row that places a module: its own file if the table names it, else its top-level package."""
    parts = module.split(".")[1:]
    path = ROOT / Path(*parts) if parts else ROOT
    own = "/".join(parts) + ("/__init__.py" if path.is_dir() else ".py") if parts else "__init__.py"
    if own in floors:
        return own
    top = f"{parts[0]}/" if len(parts) > 1 or path.is_dir() else own
    return top if top in floors else None


def uphill(graph: dict[str, set[str]], floors: dict[str, int]) -> list[str]:
    """Every import from a lower floor (a higher number) to a higher one, as 'a (floor) -> b (floor)'."""
    found = []
    for module in sorted(graph):
        own = floors[entry_of(module, floors)]
        for target in sorted(graph[module]):
            theirs = floors[entry_of(target, floors)]
            if theirs < own:
                found.append(f"{module} (floor {own}) -> {target} (floor {theirs})")
    return found


def test_every_module_is_on_a_floor_and_every_floor_names_something():
    floors = doc_floors(ARCHITECTURE.read_text())
    graph = import_graph()
    unplaced = sorted(m for m in graph if entry_of(m, floors) is None)
    assert not unplaced, "not in docs/architecture.md's layer table: " + ", ".join(unplaced)
    used = {entry_of(m, floors) for m in graph}
    stale = sorted(set(floors) - used)
    assert not stale, "docs/architecture.md's layer table names what does not exist: " + ", ".join(stale)


def test_imports_point_down_the_floors():
    floors = doc_floors(ARCHITECTURE.read_text())
    assert max(floors.values()) >= 6 and floors["cli/"] == 1  # the table was read
    found = uphill(import_graph(), floors)
    assert not found, "uphill import(s), against docs/architecture.md's layers:\n" + "\n".join(found)


def test_protocol_imports_nothing_of_the_project():
    assert import_graph()[f"{PACKAGE}.protocol"] == set()


def test_the_floor_check_finds_an_uphill_import():
    floors = {"cli/": 1, "admin/": 5, "engine/": 6, "names.py": 8}
    graph = {
        f"{PACKAGE}.cli.app": {f"{PACKAGE}.admin.client"},
        f"{PACKAGE}.admin.client": {f"{PACKAGE}.names"},
        f"{PACKAGE}.engine.router": {f"{PACKAGE}.admin.identity", f"{PACKAGE}.names"},
        f"{PACKAGE}.names": set(),
        f"{PACKAGE}.admin.identity": set(),
    }
    assert uphill(graph, floors) == [
        f"{PACKAGE}.engine.router (floor 6) -> {PACKAGE}.admin.identity (floor 5)",
    ]
    assert doc_floors("<!-- layers: begin -->\n| 1 | `cli/`, `x.py` | a |\n| 2 | `y/` | b |\n<!-- layers: end -->") == {
        "cli/": 1,
        "x.py": 1,
        "y/": 2,
    }


# ---------------------------------------------------------------- the module list


def doc_named_modules(text: str) -> tuple[set[str], dict[str, set[str]]]:
    """docs/architecture.md's "Modules" section: every `….py` it names anywhere, and per item that opens with a
    folder of the package (`pulsar_txn_cli/batchlog/`), the file names that item names."""
    section = text.split("\n## Modules\n", 1)[1].split("\n## ", 1)[0]
    anywhere = set(re.findall(r"`([^`\s]+\.py)`", section))
    by_folder = {}
    for item in re.split(r"^- ", section, flags=re.M)[1:]:
        folder = re.match(r"`pulsar_txn_cli/([\w/]+/)`", item)
        if folder:
            by_folder[folder.group(1)] = set(re.findall(r"`([^`\s/]+\.py)`", item))
    return anywhere, by_folder


def unnamed_modules(files: list[str], anywhere: set[str], by_folder: dict[str, set[str]]) -> list[str]:
    """The files (paths from the package, `batchlog/risk.py`) the module list does not name: neither by
    that path (with or without `pulsar_txn_cli/`) nor by file name in the item of their own folder; a top-level
    module may also go by its bare name. `__init__.py` and the generated protobuf modules are not asked for."""
    missing = []
    for rel in files:
        folder, _, name = rel.rpartition("/")
        if name == "__init__.py" or rel.startswith("codec/gen/"):
            continue
        folder = f"{folder}/" if folder else ""
        named = (
            rel in anywhere
            or f"{PACKAGE}/{rel}" in anywhere
            or (folder and name in by_folder.get(folder, set()))
            or (not folder and name in anywhere)
        )
        if not named:
            missing.append(rel)
    return missing


def test_the_module_list_names_every_module():
    files = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.rglob("*.py"))
    anywhere, by_folder = doc_named_modules(ARCHITECTURE.read_text())
    assert len(by_folder) >= 10  # the section was read
    missing = unnamed_modules(files, anywhere, by_folder)
    assert not missing, "docs/architecture.md's module list does not name: " + ", ".join(missing)


def test_the_module_list_check_finds_an_unnamed_module():
    text = (
        "# Architecture\n\n## Modules\n\n- `pulsar_txn_cli/batchlog/`: `config.py` and `admin/x.py`\n"
        "- `pulsar_txn_cli/engine/`: `oracle.py`\n- `names.py`\n\n## Next\n- `risk.py`\n"
    )
    anywhere, by_folder = doc_named_modules(text)
    files = [
        "batchlog/config.py",
        "batchlog/risk.py",
        "admin/x.py",
        "engine/oracle.py",
        "engine/advance.py",
        "doctor/oracle.py",
        "names.py",
        "fault_names.py",
        "codec/gen/a_pb2.py",
        "engine/__init__.py",
    ]
    assert unnamed_modules(files, anywhere, by_folder) == [
        "batchlog/risk.py",
        "engine/advance.py",
        "doctor/oracle.py",
        "fault_names.py",
    ]
