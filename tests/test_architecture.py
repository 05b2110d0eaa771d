"""The import rules of STYLE.md: explorer → queries → ingest; only the explorer loads textual;
no module imports one that imports it back as it loads; every package is installed."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def test_core_imports_without_textual_or_kuzu_leaking_upward() -> None:
    code = (
        "import sys, tracegraph.ingest.pipeline, tracegraph.queries.summary, "
        "tracegraph.queries.catalog; "
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('textual', 'rich')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_only_store_imports_kuzu() -> None:
    importers = sorted(
        str(p.relative_to(ROOT))
        for folder in ("ingest", "queries", "explorer")
        for p in (ROOT / folder).rglob("*.py")
        if any(
            line.strip().startswith(("import kuzu", "from kuzu"))
            for line in p.read_text().splitlines()
        )
    )
    assert importers == ["ingest/store.py"]


# folder → layer; `api/` is the package `tracegraph` itself (the front door, `tracegraph.graph`)
LAYER = {"ingest": 0, "queries": 1, "api": 2, "explorer": 3}
MODULE_LAYER = {"ingest": 0, "queries": 1, "graph": 2, "explorer": 3}


def _imports(path: Path) -> set[str]:
    tree = ast.parse(path.read_text())
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
    return names


def test_layers_import_only_downward() -> None:
    """ingest never imports queries, the front door or explorer; queries never the front door
    or explorer; the front door never explorer."""
    upward = []
    for folder, level in LAYER.items():
        for path in (ROOT / folder).rglob("*.py"):
            for name in _imports(path) | _relative_imports(path, folder):
                parts = name.split(".")
                if parts[0] != "tracegraph":
                    continue
                layer = MODULE_LAYER.get(parts[1], -1) if len(parts) > 1 else LAYER["api"]
                if layer > level:
                    upward.append(f"{path.relative_to(ROOT)} imports {name}")
    assert upward == []


def _relative_imports(path: Path, folder: str) -> set[str]:
    """`from .x import y` in the front door's own files, as `tracegraph.x`."""
    if folder != "api":
        return set()
    tree = ast.parse(path.read_text())
    return {
        f"tracegraph.{node.module}"
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom) and node.level == 1 and node.module
    }


def test_textual_only_in_explorer() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("ingest", "queries")
        for path in (ROOT / folder).rglob("*.py")
        if any(n.split(".")[0] in ("textual", "rich") for n in _imports(path))
    ]
    assert offenders == []


def _private_uses(path: Path) -> list[str]:
    """Private names (`_x`) this file takes from another module of the project: imported by
    name (`from .pipeline import _Source`), or read off an imported module (`parse._decode`)."""
    tree = ast.parse(path.read_text())
    ours: set[str] = set()  # local names bound to the project's modules
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        project = node.level > 0 or (node.module or "").startswith("tracegraph")
        if not project:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                found.append(f"{path.relative_to(ROOT)}:{node.lineno} imports {alias.name}")
            ours.add(alias.asname or alias.name)
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Name)
            and node.value.id in ours
            and node.attr.startswith("_")
            and not node.attr.startswith("__")
        ):
            found.append(
                f"{path.relative_to(ROOT)}:{node.lineno} reads {node.value.id}.{node.attr}"
            )
    return found


def test_no_private_name_crosses_a_module() -> None:
    """What modules share has a public name in the module that owns it (type hints included):
    a private name is that module's own business."""
    crossing = [
        use
        for folder in ("api", "ingest", "queries", "explorer", "examples")
        for path in (ROOT / folder).rglob("*.py")
        for use in _private_uses(path)
    ]
    assert crossing == []


# folder → the package it is (pyproject's package-dir)
PACKAGE_OF_FOLDER = {
    "api": "tracegraph", "ingest": "tracegraph.ingest", "queries": "tracegraph.queries",
    "explorer": "tracegraph.explorer", "examples": "tracegraph.examples",
}  # fmt: skip


def _module_name(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    names = [PACKAGE_OF_FOLDER[parts[0]], *parts[1:]]
    return ".".join(names[:-1] if names[-1] == "__init__" else names)


def _load_time_imports(path: Path, modules: set[str]) -> set[str]:
    """The project's modules `path` imports as it loads: the statements of its body (inside
    `try`/`if` too), not those under `if TYPE_CHECKING:` or inside functions."""
    name = _module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()

    def visit(body: list[ast.stmt]) -> None:
        for node in body:
            if isinstance(node, ast.If):
                if "TYPE_CHECKING" not in ast.unparse(node.test):
                    visit(node.body)
                visit(node.orelse)
            elif isinstance(node, ast.Try):
                for block in (node.body, node.orelse, node.finalbody):
                    visit(block)
            elif isinstance(node, ast.Import):
                found.update(a.name for a in node.names if a.name in modules)
            elif isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    up = package.split(".")[: len(package.split(".")) - node.level + 1]
                    base = ".".join([*up, base] if base else up)
                submodules = {f"{base}.{a.name}" for a in node.names} & modules
                found.update(submodules)
                if base in modules and len(submodules) < len(node.names):
                    found.add(base)  # names the module (or package) itself defines

    visit(ast.parse(path.read_text()).body)
    found.discard(name)
    return found


def test_no_runtime_import_cycle() -> None:
    """No module imports, as it loads, a module that imports it back (directly or through
    others): which of the two runs first would decide what the other sees half made. Imports
    for type hints (`if TYPE_CHECKING:`) and inside functions are not load-time ones."""
    import networkx as nx

    paths = [p for folder in PACKAGE_OF_FOLDER for p in (ROOT / folder).rglob("*.py")]
    modules = {_module_name(p) for p in paths}
    graph = nx.DiGraph()
    for path in paths:
        graph.add_edges_from((_module_name(path), m) for m in _load_time_imports(path, modules))
    # a package's __init__ importing its own modules is how packages export: not a cycle of
    # its modules (they import the package's modules by name, not the package)
    cycles = [sorted(c) for c in nx.strongly_connected_components(graph) if len(c) > 1]
    assert cycles == [], cycles


def test_every_package_is_installed() -> None:
    """pyproject's `packages` lists every folder that is a package, so that a non-editable
    install (`pip install .`) has all of them."""
    import tomllib

    listed = set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = {
        _module_name(p)
        for folder in PACKAGE_OF_FOLDER
        for p in (ROOT / folder).rglob("__init__.py")
    }
    assert found == listed, (found - listed, listed - found)
