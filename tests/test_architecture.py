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


LAYER = {"ingest": 0, "queries": 1, "explorer": 2}


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
    """ingest never imports queries or explorer; queries never imports explorer."""
    upward = []
    for folder, level in LAYER.items():
        for path in (ROOT / folder).rglob("*.py"):
            for name in _imports(path):
                parts = name.split(".")
                if parts[0] == "tracegraph" and len(parts) > 1 and LAYER.get(parts[1], -1) > level:
                    upward.append(f"{path.relative_to(ROOT)} imports {name}")
    assert upward == []


def test_textual_only_in_explorer() -> None:
    offenders = [
        str(path.relative_to(ROOT))
        for folder in ("ingest", "queries")
        for path in (ROOT / folder).rglob("*.py")
        if any(n.split(".")[0] in ("textual", "rich") for n in _imports(path))
    ]
    assert offenders == []
