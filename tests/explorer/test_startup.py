"""What each command loads: `import tracegraph` and the CLI's parsing stay light, and a command
imports only the layers it uses (the times are in benchmarks/first_answer.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import COMMANDS, main
from tracegraph.explorer.commands.report import REPORT_TABLES
from tracegraph.queries.report.report import TABLES

HEAVY = ("textual", "matplotlib", "ray")
BUILDERS = (
    "tracegraph.ingest.edgesets.native.edge_set",
    "tracegraph.ingest.edgesets.hta.edge_set",
    "tracegraph.ingest.pipeline",
    "tracegraph.queries.report",
)
# what parsing the command line loads of tracegraph: each command's module (its arguments) and
# what they share, not the layers the commands' handlers drive
PARSING = {
    "tracegraph", "tracegraph.ingest", "tracegraph.ingest.errors", "tracegraph.explorer",
    "tracegraph.explorer.entry", "tracegraph.explorer.cli", "tracegraph.explorer.options",
    "tracegraph.explorer.commands", "tracegraph.explorer.commands.common",
    *(f"tracegraph.explorer.commands.{name}" for name in COMMANDS),
}  # fmt: skip

PROBE = """
import json, sys
argv = json.loads(sys.argv[1])
try:
    if argv is None:
        import tracegraph
    else:
        from tracegraph.explorer.entry import main
        main(argv)
except SystemExit:
    pass
print("\\n" + json.dumps(sorted(sys.modules)))
"""


def loaded(argv: list[str] | None) -> set[str]:
    """The modules a fresh process holds after `import tracegraph` (argv None) or after running
    `tracegraph ARGV`."""
    done = subprocess.run(
        [sys.executable, "-c", PROBE, json.dumps(argv)],
        capture_output=True,
        text=True,
        check=True,
        timeout=120,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def roots(modules: set[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if n in modules]


def test_import_tracegraph_loads_no_ui_plotting_or_cluster_library() -> None:
    modules = loaded(None)
    assert roots(modules, HEAVY) == []
    assert roots(modules, ("kuzu", "pyarrow", "numpy", "importlib.metadata")) == []


@pytest.mark.parametrize("argv", [["--version"], ["--help"], ["report", "--help"]])
def test_help_and_version_load_neither_arrow_nor_kuzu(argv: list[str]) -> None:
    modules = loaded(argv)
    assert roots(modules, ("kuzu", "pyarrow", "numpy", *HEAVY)) == []
    assert sorted(m for m in modules if m.split(".")[0] == "tracegraph" and m not in PARSING) == []


def test_a_query_loads_no_builder_report_or_ui(tmp_path: Path) -> None:
    files = write_per_rank(SyntheticConfig(ranks=1, steps=1, layers=1), tmp_path / "job")
    db = tmp_path / "small.kuzu"
    assert main(["ingest", *map(str, files), "--db", str(db)]) == 0
    modules = loaded(["query", str(db), "MATCH (r:Rank) RETURN count(*) AS n"])
    assert "kuzu" in modules  # it did run the query
    assert roots(modules, (*BUILDERS, "pyarrow.compute", *HEAVY)) == []


def test_the_report_tables_the_cli_offers_are_the_reports() -> None:
    assert REPORT_TABLES == ("findings", *TABLES, "kernels", "ops", "structure")
