"""The `tracegraph` command chooses Arrow's allocator before pyarrow is imported."""

from __future__ import annotations

import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

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
