"""The `tracegraph` command chooses Arrow's allocator before pyarrow is imported, and runs
without pandas."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tracegraph.examples.synthetic import SyntheticConfig, write_per_rank
from tracegraph.explorer.cli import main
from tracegraph.explorer.entry import ALLOCATOR_VARIABLE
from tracegraph.ingest import memory

REPO = Path(__file__).resolve().parents[2]
BACKEND = (
    "from tracegraph.explorer.entry import choose_allocator; choose_allocator(); "
    "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"
)


def _backend(env: dict[str, str]) -> str:
    done = subprocess.run(
        [sys.executable, "-c", BACKEND], env=env, capture_output=True, text=True, check=True
    )
    return done.stdout.strip()


def test_the_command_runs_the_entry_that_chooses_the_allocator() -> None:
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["tracegraph"] == "tracegraph.explorer.entry:main"


def test_arrow_allocates_from_the_c_heap_unless_the_environment_says_otherwise() -> None:
    env = {k: v for k, v in os.environ.items() if k != ALLOCATOR_VARIABLE}
    assert _backend(env) == "system"
    if "mimalloc" not in _mimalloc_probe():
        pytest.skip("this pyarrow has no mimalloc")
    assert _backend({**env, ALLOCATOR_VARIABLE: "mimalloc"}) == "mimalloc"


def _mimalloc_probe() -> str:
    probe = "import pyarrow as pa; pa.mimalloc_memory_pool(); print('mimalloc')"
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    return done.stdout


def test_the_entry_chooses_before_the_cli_imports_pyarrow() -> None:
    env = {k: v for k, v in os.environ.items() if k != ALLOCATOR_VARIABLE}
    probe = (
        "from tracegraph.explorer.entry import main; main(['queries']); "
        "import pyarrow as pa; print(pa.default_memory_pool().backend_name)"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], env=env, capture_output=True, text=True, check=True
    )
    assert done.stdout.strip().splitlines()[-1] == "system"


def test_the_entry_and_the_ingest_name_one_variable() -> None:
    assert memory.ALLOCATOR_VARIABLE == ALLOCATOR_VARIABLE


PANDAS_PROBE = """
import sys
from tracegraph.explorer.entry import main
code = main(sys.argv[1:])
print(code, sys.modules.get("pandas", "never asked for"))
"""


def _without_pandas(argv: list[str]) -> str:
    """`tracegraph ARGV` in a fresh process: its output, once it is known to have run with
    pandas marked absent."""
    done = subprocess.run(
        [sys.executable, "-c", PANDAS_PROBE, *argv], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    *out, last = done.stdout.splitlines()
    assert last == "0 None"  # it ran, and pandas was marked absent, not imported
    return "\n".join(out)


def test_a_command_runs_without_pandas_which_it_does_not_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """pyarrow asks for pandas at its first conversion of a list, and kuzu at each COPY of an
    Arrow table: the command says there is none, and ingests and reports as with pandas."""
    job = tmp_path / "job"
    write_per_rank(SyntheticConfig(ranks=2, steps=2, layers=1), job)
    db = tmp_path / "job.kuzu"
    _without_pandas(["ingest", str(job), "--db", str(db)])
    report = _without_pandas(["report", str(db), "--format", "json"])
    capsys.readouterr()
    assert main(["report", str(db), "--format", "json"]) == 0  # here, where pandas is there
    assert json.loads(report) == json.loads(capsys.readouterr().out)
    assert json.loads(report)["steps"]  # a report of the job's steps, not an empty one
