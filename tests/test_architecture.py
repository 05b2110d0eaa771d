"""The import rules of STYLE.md: explorer → queries → ingest; only the explorer loads textual."""

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
