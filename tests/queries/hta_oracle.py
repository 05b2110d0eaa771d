"""Running one of this folder's oracle scripts (`hta_*_oracle.py`) with an HTA environment's
python: HTA's own answer, across the process boundary the project runs HTA across."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest


def hta_oracle(edge_set: str, script: Path, out: Path, *args: str | Path) -> Any:
    """Run `script ARGS` in `edge_set`'s HTA environment ("hta-0.5.0", "traceinsight-0.6.1")
    and read the JSON it wrote to `out`; skipped where the environment cannot be built."""
    from tracegraph.ingest.edgesets.errors import HtaEnvError
    from tracegraph.ingest.edgesets.hta.env import ensure_env

    from ..ingest.edgesets.conftest import SPECS, cache_root

    try:
        env = ensure_env(SPECS[edge_set], cache_root())
    except HtaEnvError as exc:
        pytest.skip(f"HTA environment not installable here: {exc}")
    command = [str(env.python), "-I", str(script), *(str(a) for a in args)]
    done = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(out.read_text())
