"""A killed `edges --hta` leaves no HTA worker running and, by the next build, no work folder;
the database is as it was."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from tracegraph.ingest.edgesets.hta.edge_set import WORK_PREFIX, _remove_stale_work_dirs
from tracegraph.ingest.edgesets.hta.env import _read_marker, parse_spec
from tracegraph.ingest.pipeline import IngestOptions, ingest

from ...conftest import TRACES
from ...dbfiles import db_digest
from .conftest import cache_root

SPEC = "HolisticTraceAnalysis==0.5.0"
TRACE = TRACES / "hta/trace_diff/control/control.json.gz"  # seconds of HTA work


def _children(pid: int) -> list[int]:
    out = []
    for status in Path("/proc").glob("[0-9]*/status"):
        try:
            fields = dict(
                line.split(":\t", 1) for line in status.read_text().splitlines() if ":\t" in line
            )
        except OSError:
            continue
        if int(fields.get("PPid", "0").strip()) == pid:
            out.append(int(status.parent.name))
    return out


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="needs Linux /proc")
@pytest.mark.skipif(not TRACE.is_file(), reason=f"real traces not at {TRACES}")
@pytest.mark.skipif(
    _read_marker(cache_root() / parse_spec(SPEC).name, parse_spec(SPEC)) is None,
    reason="HTA 0.5.0 environment not cached (building it needs PyPI)",
)
def test_kill_9_during_edges_hta_leaves_no_worker_and_no_folder(tmp_path: Path) -> None:
    db = tmp_path / "run.kuzu"
    ingest([TRACE], db, IngestOptions(run="control"))
    before = db_digest(db)
    proc = subprocess.Popen(
        [sys.executable, "-m", "tracegraph.explorer.cli", "edges", str(db), "--hta", SPEC,
         "--cache", str(cache_root())],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    workers: list[int] = []
    while time.monotonic() < deadline and not workers and proc.poll() is None:
        workers = _children(proc.pid)
        time.sleep(0.05)
    assert workers, "the HTA worker never started"
    time.sleep(1.0)  # the worker is loading the trace
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    gone_by = time.monotonic() + 5
    while time.monotonic() < gone_by and any(Path(f"/proc/{w}").exists() for w in workers):
        time.sleep(0.05)
    alive = [w for w in workers if Path(f"/proc/{w}").exists()]
    for w in alive:  # do not leave it behind even when the test fails
        os.kill(w, signal.SIGKILL)
    assert not alive, "the HTA worker outlived its killed parent"
    left = list(Path(tempfile.gettempdir()).glob(f"{WORK_PREFIX}{proc.pid}-*"))
    assert left  # the kill left its work folder ...
    _remove_stale_work_dirs()  # ... which the next build removes first
    assert not any(p.exists() for p in left)
    assert db_digest(db) == before
